"""Every kind of results file, in one table: what it is, how its summary is recomputed, whether it resumes and merges.

A results file names its command in its header (:mod:`textaudit.formats.jsonl`); a certification names its method
too, and IBP's file (one record per model, one pass) is another kind than randomized smoothing's (one record per
example, resumable, mergeable). :func:`kind_of` reads a header into its :class:`Kind`; everything that reads
results files — ``results.load``, ``audit merge``, ``audit report``, the tracker, an interrupt's hint — asks the
table instead of testing the command itself.

Where each kind's other parts live: its records' fields are checked in :data:`textaudit.formats.jsonl.RECORD_FIELDS`,
its report section is ``textaudit.report.sections.BUILDERS[kind.id]`` (a contract test holds the two tables
together), its command in :mod:`textaudit.cli`. A new kind is one row here, one builder there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from textaudit.attacks.run import summarize as summarize_attack
from textaudit.classification import metrics_from_records
from textaudit.errors import TextAuditError
from textaudit.fairness.bias import estimates_from_records, report
from textaudit.robustness.calibration import summarize_calibration
from textaudit.robustness.learnability import aggregate
from textaudit.robustness.perturbscore.tuples import summarize_tuples
from textaudit.robustness.smoothing import SMOOTHING, summarize_certify
from textaudit.stats import hit_rates, mcnemar, non_inferiority, round_p, wilson

__all__ = ["Kind", "KINDS", "BY_ID", "kind_of", "summarize_records", "summarize_replay", "REPLAY_STATUSES",
           "resumable_commands", "listed"]

#: what a replayed finding can be (:mod:`textaudit.findings`)
REPLAY_STATUSES = ("still", "fixed", "not_applicable")

Summarizer = Callable[[Mapping[str, Any], list[dict]], dict]


@dataclass(frozen=True)
class Kind:
    """One kind of results: ``id`` (the report's and the table's key), the ``command`` its header names and the
    command line that writes it (``writer``), a ``title`` for a person, ``summarize(config, records)`` (the
    command's summary from its records alone; None where it has none), ``resumable`` (``--resume`` continues a cut
    file), ``merge_refusal`` (None: shards merge; else why not, one line), ``per_model`` (one record per model
    rather than per example)."""

    id: str
    command: str
    writer: str
    title: str
    summarize: Summarizer | None
    resumable: bool = False
    merge_refusal: str | None = None
    per_model: bool = False


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


#: every kind, in the order of a report's sections
KINDS: tuple[Kind, ...] = (
    Kind("harden", "harden", "audit harden", "a before/after of hardening (a folder)", None,
         merge_refusal="a harden folder is one run: there are no shards to merge"),
    Kind("replay", "replay", "audit replay", "findings replayed on a model", _replay),
    Kind("compare", "compare", "audit compare", "a model × method matrix (a folder)", None,
         merge_refusal="an audit compare folder is not a shard: rerun audit compare to extend it"),
    Kind("attack", "attack", "audit attack", "an attack's examples", _attack, resumable=True),
    Kind("bias", "bias", "audit bias", "counterfactual token bias B_(p,k)", _bias, resumable=True),
    Kind("wordorder", "wordorder", "audit wordorder", "word-order sensitivity (DND, IDC)", None,
         merge_refusal="a word-order sweep has no summary to recompute from shards"),
    Kind("certify", "certify", "audit certify --method safer|ranmask", "randomized smoothing's certificates",
         _certify, resumable=True),
    Kind("certify-ibp", "certify", "audit certify --method ibp", "IBP's certified accuracy", _certify_ibp,
         merge_refusal="an IBP certification has one record per model: there is nothing to merge", per_model=True),
    Kind("evaluate", "evaluate", "audit evaluate --perturbed", "calibration under perturbation", _evaluate),
    Kind("metrics", "evaluate", "audit evaluate --output", "precision, recall, F1 and the confusion matrix",
         lambda config, records: metrics_from_records(dict(config), records),
         merge_refusal="an evaluation's predictions are one pass: run audit evaluate on all the data"),
    Kind("learnability", "learnability", "audit learnability", "learnability of perturbations", _learnability,
         resumable=True),
    Kind("perturbscore build", "perturbscore build", "audit perturbscore build", "PerturbScore's tuples",
         _perturbscore, resumable=True),
)
BY_ID: dict[str, Kind] = {kind.id: kind for kind in KINDS}


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
