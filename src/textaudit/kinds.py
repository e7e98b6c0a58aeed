"""Every kind of results file, in one table: what it is, how its summary is recomputed, whether it resumes and merges.

A results file names its command in its header (:mod:`textaudit.formats.jsonl`); a certification names its method
too, and IBP's file (one record per model, one pass) is another kind than randomized smoothing's (one record per
example, resumable, mergeable). :func:`kind_of` reads a header into its :class:`Kind`; everything that reads
results files — ``results.load``, ``audit merge``, ``audit report``, the tracker, an interrupt's hint — asks the
table instead of testing the command itself.

Each kind's row also gives its line(s) of a report's summary table (``headline``: what was audited, with what, and
its headline number, from the header's config, the records and — for a folder — its summary; :data:`HEADLINE_COLUMNS`)
and its ``records`` (a :class:`~textaudit.formats.jsonl.RecordSpec` its audit declares beside the code that writes
them: what each record holds and what identifies one; a file read back is checked by it, :func:`check_records`, and
``audit merge`` de-duplicates by its key): a kind without either cannot be declared. Its report section is
``textaudit.report.sections.BUILDERS[kind.id]`` where it has one of its own (its summary as a table where not), its
command in :mod:`textaudit.cli`. A new kind is one row here (``tests/test_kinds.py`` and
:func:`textaudit.testing.check_kind` hold the row to its files).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from textaudit.attacks.run import ATTACK_RECORDS
from textaudit.attacks.run import summarize as summarize_attack
from textaudit.classification import metrics_from_records
from textaudit.errors import TextAuditError
from textaudit.fairness.bias import BIAS_RECORDS, estimates_from_records, report
from textaudit.formats.jsonl import RecordSpec, check_results
from textaudit.robustness.calibration import summarize_calibration
from textaudit.robustness.learnability import LEARNABILITY_RECORDS, aggregate
from textaudit.robustness.perturbscore.tuples import TUPLE_RECORDS, summarize_tuples
from textaudit.robustness.smoothing import CERTIFY_RECORDS, SMOOTHING, summarize_certify
from textaudit.robustness.wordorder import WORDORDER_RECORDS
from textaudit.stats import format_ci, format_p, hit_rates, mcnemar, non_inferiority, round_p, wilson

__all__ = ["Kind", "KINDS", "BY_ID", "register_kind", "unregister_kind", "kind_of", "check_records", "summarize_records",
           "summarize_replay", "REPLAY_STATUSES", "resumable_commands", "listed", "HEADLINE_COLUMNS", "shown_number"]

#: a report's summary table: one row per audit (a kind's ``headline`` gives its rows)
HEADLINE_COLUMNS = ["audit", "model", "what", "masked LM", "data", "seed", "headline (95% CI)"]

#: what a replayed finding can be (:mod:`textaudit.findings`)
REPLAY_STATUSES = ("still", "fixed", "not_applicable")

Summarizer = Callable[[Mapping[str, Any], list[dict]], dict]
#: ``headline(config, records, summary)``: the kind's rows of :data:`HEADLINE_COLUMNS` (``summary``: a folder's)
Headline = Callable[[Mapping[str, Any], list[dict], Mapping[str, Any]], list[list[Any]]]


@dataclass(frozen=True)
class Kind:
    """One kind of results: ``id`` (the report's and the table's key), the ``command`` its header names and the
    command line that writes it (``writer``), a ``title`` for a person, ``summarize(config, records)`` (the
    command's summary from its records alone; None where it has none), ``resumable`` (``--resume`` continues a cut
    file), ``merge_refusal`` (None: shards merge; else why not, one line), ``per_model`` (one record per model
    rather than per example), ``headline`` (its rows of a report's summary table), ``records`` (what its records
    hold and what identifies one: a :class:`~textaudit.formats.jsonl.RecordSpec`, the writing audit's; a kind
    without one cannot be declared)."""

    id: str
    command: str
    writer: str
    title: str
    summarize: Summarizer | None
    headline: Headline
    resumable: bool = False
    merge_refusal: str | None = None
    per_model: bool = False
    records: RecordSpec = field(kw_only=True)


def _attack(config: Mapping, records: list[dict]) -> dict:
    out = summarize_attack(records, config.get("method"), config.get("k"), config.get("labels"))
    out["model"] = config.get("model")
    return out


def _bias(config: Mapping, records: list[dict]) -> dict:
    if "k" not in config or "enumerate_k" not in config:
        raise TextAuditError("its header has no k or enumerate_k; is it a bias results file?")
    out = report(estimates_from_records(records, config["k"], config["enumerate_k"]))
    out["model"] = out["model"] or config.get("model")
    return out


def _learnability(config: Mapping, records: list[dict]) -> dict:
    models = list(dict.fromkeys(r["model"] for r in records))
    perts = list(dict.fromkeys(r["perturbation"] for r in records))
    probabilities = sorted({float(r["p"]) for r in records if r["p"] != "robustness"})
    return aggregate(records, models, perts, probabilities)


def _certify(config: Mapping, records: list[dict]) -> dict:
    return {**summarize_certify(records, config["method"]), "model": config.get("model")}


def _certify_ibp(config: Mapping, records: list[dict]) -> dict:
    return {r["id"]: {k: v for k, v in r.items() if k != "id"} for r in records}


def _evaluate(config: Mapping, records: list[dict]) -> dict:
    return {"model": config.get("model"), "perturbed_by": config.get("perturbed_by"),
            **summarize_calibration(records, int(config.get("bins", 10)), int(config.get("seed", 0)))}


def _replay(config: Mapping, records: list[dict]) -> dict:
    return summarize_replay(records, str(config.get("model")), config.get("baseline"), config.get("margin"))


def _perturbscore(config: Mapping, records: list[dict]) -> dict:
    return {"model": config.get("model"), "perturbation": config.get("perturbation"), **summarize_tuples(records)}


def shown_number(v: Any, digits: int = 3) -> Any:
    """A number as a table shows it: a float rounded, None as "–"."""
    return "–" if v is None else round(v, digits) if isinstance(v, float) else v


_num = shown_number


def _attack_rows(cfg: Mapping, records: list[dict], summary: Mapping) -> list[list[Any]]:
    s = summarize_attack(records, cfg.get("method"), cfg.get("k"), cfg.get("labels"))
    what = f"{s['headline']}; success rate {_num(s['success_rate'])} {format_ci(s['success_rate_ci95'], 3)} of the " \
           f"{s['attacked']} attacked only"
    return [["attack", cfg.get("model"), cfg.get("method") + (f", k={cfg['k']}" if cfg.get("k") else ""),
             cfg.get("mlm") or "–", cfg.get("data"), cfg.get("seed"), what]]


def _bias_rows(cfg: Mapping, records: list[dict], summary: Mapping) -> list[list[Any]]:
    rows = []
    for name, per in estimates_from_records(records, cfg["k"], cfg["enumerate_k"]).items():
        for p, by_k in per.items():
            if by_k:
                e = by_k[max(by_k)]
                rows.append(["bias", name, f"{p[0]}→{p[1]}", cfg.get("mlm") or "–", cfg.get("data"), cfg.get("seed"),
                             f"B_(p,{max(by_k)}) = {e.B:+.5f} {format_ci(e.ci95, 5)}"])
    return rows


def _certify_rows(cfg: Mapping, records: list[dict], summary: Mapping) -> list[list[Any]]:
    c = summarize_certify(records, cfg["method"])
    r1 = next((r for r in c["curve"] if r["radius"] == 1), None)
    return [["certify", cfg.get("model"), SMOOTHING[cfg["method"]], "–", cfg.get("data"), cfg.get("seed"),
             f"smoothed accuracy {_num(c['accuracy'])}; certified at radius 1: "
             + (f"{_num(r1['certified_accuracy'])} {format_ci(r1['certified_accuracy_ci95'], 3)}" if r1 else "0")]]


def _certify_ibp_rows(cfg: Mapping, records: list[dict], summary: Mapping) -> list[list[Any]]:
    return [["certify", r.get("model"), "IBP", "–", cfg.get("data"), "–",
             f"certified accuracy {r['certified_accuracy']} {format_ci(r.get('certified_accuracy_ci95'), 3)}"]
            for r in records]


def _wordorder_rows(cfg: Mapping, records: list[dict], summary: Mapping) -> list[list[Any]]:
    if cfg.get("sweep"):
        return [["wordorder", cfg.get("model"), f"sweep of {len(records)}", "–", cfg.get("data"), cfg.get("seed"),
                 f"clean accuracy {(cfg.get('correlations') or {}).get('clean_accuracy')}"]]
    return [["wordorder", cfg.get("model"), f"{r['perturbation']} ({r['level']})", "–", cfg.get("data"), cfg.get("seed"),
             f"accuracy {r['accuracy']} {format_ci(r.get('accuracy_ci95'), 3)}"] for r in records[:1]]


def _learnability_rows(cfg: Mapping, records: list[dict], summary: Mapping) -> list[list[Any]]:
    return [["learnability", ", ".join(sorted({r["model"] for r in records})), "–", "–", cfg.get("data"), "–",
             f"{len(records)} training runs"]]


def _harden_rows(cfg: Mapping, records: list[dict], h: Mapping) -> list[list[Any]]:
    line = (f"success {_num(h['before']['success_rate'])} → {_num(h['after']['success_rate'])} (McNemar p "
            f"{format_p(h.get('mcnemar_p'))}); accuracy {_num(h['before']['accuracy'])} → {_num(h['after']['accuracy'])}")
    cert = h.get("certificate")
    if cert:  # a hardening for a certificate: certified at radius 1, before → after
        at1 = [{c["radius"]: c["certified_accuracy"] for c in cert[side]["curve"]}.get(1, 0.0) for side in ("before", "after")]
        line += f"; {SMOOTHING.get(cert['method'], cert['method'])} certified at radius 1: {_num(at1[0])} → {_num(at1[1])}"
    return [["harden", h.get("from"), f"{h.get('method')}; {h['before']['attack']} before → after",
             h.get("mlm") or cfg.get("mlm") or "–", h.get("eval_data"), cfg.get("seed"), line]]


def _replay_rows(cfg: Mapping, records: list[dict], summary: Mapping) -> list[list[Any]]:
    s = _replay(cfg, records)
    base = f"; vs {cfg.get('baseline')}: {s['regressed']} regressed" if cfg.get("baseline") else ""
    return [["replay", cfg.get("model"), f"{s['findings']} findings", "–", "–", "–",
             f"still {s['still']} of {s['still'] + s['fixed']} applicable{base}"]]


def _evaluate_rows(cfg: Mapping, records: list[dict], summary: Mapping) -> list[list[Any]]:
    c = _evaluate(cfg, records)
    return [["evaluate", cfg.get("model"), f"calibration vs {cfg.get('perturbed')}", "–", cfg.get("data"), cfg.get("seed"),
             f"ECE {c['original']['ece']:.4f} → {c['perturbed']['ece']:.4f} (difference "
             f"{format_ci(c['difference']['ece_ci95'], 4)})"]]


def _metrics_rows(cfg: Mapping, records: list[dict], summary: Mapping) -> list[list[Any]]:
    m = metrics_from_records(dict(cfg), records)
    head = (f"micro F1 {_num(m['micro']['f1'])}, subset accuracy {_num(m['subset_accuracy'])}" if m.get("multilabel")
            else f"accuracy {_num(m['accuracy'])} {format_ci(m['accuracy_ci95'] or None, 3)}")
    return [["evaluate", cfg.get("model"), f"macro F1 {_num(m['macro']['f1'])}", "–", cfg.get("data"), cfg.get("seed"),
             head]]


def _perturbscore_rows(cfg: Mapping, records: list[dict], summary: Mapping) -> list[list[Any]]:
    return [["perturbscore", cfg.get("model"), cfg.get("perturbation"), "–", "–", cfg.get("seed"),
             f"{len(records)} tuples"]]


def _compare_rows(cfg: Mapping, records: list[dict], summary: Mapping) -> list[list[Any]]:
    return []  # a comparison's cells are attack files the report loads with it: each has its own row


#: the records of a kind read whole by its summary (a replay, an evaluation, a folder's files): no field is checked
#: one record at a time; they are told apart by their id
READ_WHOLE = RecordSpec()

#: every kind, in the order of a report's sections
KINDS: list[Kind] = [
    Kind("harden", "harden", "audit harden", "a before/after of hardening (a folder)", None, _harden_rows,
         merge_refusal="a harden folder is one run: there are no shards to merge", records=READ_WHOLE),
    Kind("replay", "replay", "audit replay", "findings replayed on a model", _replay, _replay_rows,
         records=READ_WHOLE),
    Kind("compare", "compare", "audit compare", "a model × method matrix (a folder)", None, _compare_rows,
         merge_refusal="an audit compare folder is not a shard: rerun audit compare to extend it", records=READ_WHOLE),
    Kind("attack", "attack", "audit attack", "an attack's examples", _attack, _attack_rows, resumable=True,
         records=ATTACK_RECORDS),
    Kind("bias", "bias", "audit bias", "counterfactual token bias B_(p,k)", _bias, _bias_rows, resumable=True,
         records=BIAS_RECORDS),
    Kind("wordorder", "wordorder", "audit wordorder", "word-order sensitivity (DND, IDC)", None, _wordorder_rows,
         merge_refusal="a word-order sweep has no summary to recompute from shards", records=WORDORDER_RECORDS),
    Kind("certify", "certify", "audit certify --method safer|ranmask", "randomized smoothing's certificates",
         _certify, _certify_rows, resumable=True, records=CERTIFY_RECORDS),
    Kind("certify-ibp", "certify", "audit certify --method ibp", "IBP's certified accuracy", _certify_ibp,
         _certify_ibp_rows, records=CERTIFY_RECORDS,
         merge_refusal="an IBP certification has one record per model: there is nothing to merge", per_model=True),
    Kind("evaluate", "evaluate", "audit evaluate --perturbed", "calibration under perturbation", _evaluate,
         _evaluate_rows, records=READ_WHOLE),
    Kind("metrics", "evaluate", "audit evaluate --output", "precision, recall, F1 and the confusion matrix",
         lambda config, records: metrics_from_records(dict(config), records), _metrics_rows,
         merge_refusal="an evaluation's predictions are one pass: run audit evaluate on all the data",
         records=READ_WHOLE),
    Kind("learnability", "learnability", "audit learnability", "learnability of perturbations", _learnability,
         _learnability_rows, resumable=True, records=LEARNABILITY_RECORDS),
    Kind("perturbscore build", "perturbscore build", "audit perturbscore build", "PerturbScore's tuples",
         _perturbscore, _perturbscore_rows, resumable=True, records=TUPLE_RECORDS),
]
"""Every kind of results, in the order of a report's sections."""
BY_ID: dict[str, Kind] = {kind.id: kind for kind in KINDS}


def register_kind(kind: Kind) -> None:
    """Add a kind of results (a new audit's): one row; ``results.load``, ``audit report`` (its headline rows and,
    without a section of its own, its summary as a table) and ``audit merge`` read its files from then on."""
    if kind.id in BY_ID:
        raise ValueError(f"a kind {kind.id!r} is already in the table")
    KINDS.append(kind)
    BY_ID[kind.id] = kind


def unregister_kind(kind_id: str) -> None:
    """Take a kind :func:`register_kind` added out of the table again."""
    KINDS.remove(BY_ID.pop(kind_id))


def kind_of(header: Mapping[str, Any] | None) -> Kind:
    """The kind of results a header describes; a one-line error for a header no command of textaudit writes."""
    command = (header or {}).get("command")
    if command == "certify":
        method = (header or {}).get("config", {}).get("method")
        return BY_ID["certify" if method in SMOOTHING else "certify-ibp"]
    if command == "evaluate":  # calibration under perturbation, or the metrics of the predictions
        return BY_ID["evaluate" if "perturbed" in (header or {}).get("config", {}) else "metrics"]
    if command in BY_ID:
        return BY_ID[command]
    raise TextAuditError(f"'{command}' results are not a kind textaudit writes; give results written with --output "
                         f"by {listed()}")


def check_records(path: str | Path, header: Mapping[str, Any] | None, records: list[dict]) -> None:
    """:func:`~textaudit.formats.jsonl.check_results` with the records' spec of the kind ``header`` names (its
    header alone when it names none: the caller's :func:`kind_of` says so in its own words)."""
    try:
        spec: RecordSpec | None = kind_of(header).records
    except TextAuditError:
        spec = None
    check_results(path, dict(header) if isinstance(header, Mapping) else header, records, spec)


def listed() -> str:
    """The commands that write results files, for a one-line error."""
    writers = list(dict.fromkeys(k.writer.split(" --")[0] for k in KINDS if k.id not in ("harden", "compare")))
    return ", ".join(writers) + ", or an audit compare or audit harden folder"


def resumable_commands() -> tuple[str, ...]:
    """The command lines (``attack``, ``perturbscore build``, …) whose results ``--resume`` continues."""
    return tuple(dict.fromkeys(k.writer.removeprefix("audit ").split(" --")[0] for k in KINDS if k.resumable))


def summarize_records(header: Mapping[str, Any], records: list[dict]) -> dict[str, Any]:
    """The summary the command prints, recomputed from ``records`` alone (the kind's ``summarize``)."""
    kind = kind_of(header)
    if kind.summarize is None:
        raise TextAuditError(f"cannot summarize '{kind.id}' results from records")
    return kind.summarize(header.get("config", {}), records)


def summarize_replay(records: list[dict], model: str, baseline: str | None = None,
                     margin: float | None = None) -> dict[str, Any]:
    """An ``audit replay``'s summary from its records: still / fixed / not_applicable overall and per
    (method, pair), the share still holding among the applicable ones with its Wilson interval; with a
    baseline, the paired counts (``fixed_by_model``, ``regressed``) and McNemar's exact p of "still"
    on the baseline vs the model over the findings applicable on both; with a ``margin`` too, the
    non-inferiority and equivalence of the model's still-rate to the baseline's
    (:func:`textaudit.stats.non_inferiority`: ``non_inferiority``), regressions being the harmful flips."""

    def count(key: str, status: str) -> int:
        return sum(r.get(key) == status for r in records)

    still, fixed = count("status", "still"), count("status", "fixed")
    out: dict[str, Any] = {"model": model, "findings": len(records), "still": still, "fixed": fixed,
                           "not_applicable": count("status", "not_applicable"),
                           "still_share": round(still / (still + fixed), 4) if still + fixed else None}
    if still + fixed:
        lo, hi = wilson(still, still + fixed)
        out["still_share_ci95"] = [round(lo, 4), round(hi, 4)]
    groups: dict[tuple, dict] = {}
    for r in records:
        g = groups.setdefault((r["method"], "/".join(r["pair"]) if r.get("pair") else None),
                              {"method": r["method"], "pair": r.get("pair"), **{s: 0 for s in REPLAY_STATUSES},
                               "regressed": 0})
        g[r["status"]] += 1
        g["regressed"] += r.get("baseline_status") == "fixed" and r["status"] == "still"
    out["by_method"] = list(groups.values())
    sampled = [r for r in records if isinstance(r.get("draws"), int) and isinstance(r.get("flips"), int)]
    if sampled:  # a sampling endpoint: how often the findings flip over their draws
        out["sampled"] = hit_rates([r["flips"] for r in sampled if r["draws"] == sampled[0]["draws"]],
                                   sampled[0]["draws"])
    if baseline is not None:
        both = [r for r in records if "not_applicable" not in (r["status"], r.get("baseline_status"))]
        test = mcnemar([r["baseline_status"] == "still" for r in both], [r["status"] == "still" for r in both])
        out.update(baseline=baseline, baseline_still=count("baseline_status", "still"),
                   baseline_fixed=count("baseline_status", "fixed"),
                   fixed_by_model=sum(r.get("baseline_status") == "still" and r["status"] == "fixed" for r in records),
                   regressed=sum(r.get("baseline_status") == "fixed" and r["status"] == "still" for r in records),
                   paired=len(both), mcnemar_p=round_p(float(test["p"])))
        if margin is not None and both:
            out["non_inferiority"] = non_inferiority([r["baseline_status"] == "still" for r in both],
                                                     [r["status"] == "still" for r in both], float(margin))
    return out
