"""Findings that outlive the audit: ``audit replay`` re-checks what an attack found on another model.

An attack's findings are the successes of its results file: for a second-order attack (SO-Enum,
SO-Beam, random) the vulnerable pair (x̃, x̃ ⊕ p); for a first-order one (Genetic, BAE, TextAttack
recipes) the adversarial text x' of an input x with label y. Replaying them on a model M scores
exactly those texts — no masked LM, no search — and says of each finding whether it still holds:

* second order: **still** when M's predictions of x̃ and x̃ ⊕ p differ (neither a tie: a tie is no
  prediction, never half of a flip), else **fixed**;
* first order: **not_applicable** when M misclassifies x itself (or ties on it: there is nothing to
  attack), else **still** when M misclassifies x' (a tie is not a misclassification), else **fixed**.

On an endpoint that samples N answers per text (``--samples N``) each applicable finding also gets
``flips``: the draws of its changed text (x̃ ⊕ p, or x') naming another class than the reference
(M's decision on x̃, or the label y), and the summary the mean flip rate and hit@k for k ≤ N with
intervals (:func:`textaudit.stats.hit_rates`): a finding "fixed" by the majority may still flip in
some draws.

With a ``baseline`` M0 the same findings are replayed on M0 too and paired: **fixed_by_model** (held
on M0, fixed on M), **regressed** (fixed on M0, holding again on M — what a release must not ship),
and McNemar's exact test of "still" on M0 vs M over the findings applicable on both.

A bias results file (``audit bias --output``) is replayed as B_{p,k} of M on the very sentences the
run scored, with its interval (:mod:`textaudit.fairness.replay`): one record per pair p and k′, **still**
when the bias the run found (a 95% interval excluding 0) is still significant on M with the same sign,
**fixed** when it is not, **not_applicable** where the run found none.

Replay reads results files (``audit attack --output``, ``audit bias --output``), ``audit compare``
folders and ``audit harden`` folders; a file of another kind, another task's findings (a label or
prediction the model has no class for) or a damaged line is a one-line error naming the file (and line).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

import textaudit.neighborhoods.store  # noqa: F401 - installs the score cache: a replay reads the scores runs kept
from textaudit.attacks.patch import PatchWords
from textaudit.attacks.registry import make_attack, method_spec
from textaudit.attacks.run import run_attack
from textaudit.errors import TextAuditError
from textaudit.fairness.replay import BiasFindings, bias_status, estimate_fields, read_bias_findings
from textaudit.formats.jsonl import check_output, read_header, read_jsonl, record_lines, write_results
from textaudit.kinds import REPLAY_STATUSES as STATUSES
from textaudit.kinds import check_records, summarize_replay
from textaudit.lexicons import load_pairs_file
from textaudit.loaded import load
from textaudit.models import load_classifier
from textaudit.models.batched import TIE, Classifier, decisions, flips_in_draws, label_view, sampled_draws, unknown_class
from textaudit.neighborhoods.mlm import load_mlm
from textaudit.notices import say as say_line
from textaudit.request import RANGES, Outcome, option, shared, written
from textaudit.stats import check_margin, mcnemar, wilson

__all__ = ["ReplayRequest", "ReplayOutcome", "Finding", "BiasFindings", "Replay", "read_findings", "replay", "attack_files", "STATUSES"]

#: attack methods whose successes are vulnerable pairs (x̃, x̃ ⊕ p); every other method's are adversarial texts
SECOND_ORDER = ("so-enum", "so-beam", "random")


@dataclass(frozen=True)
class Finding:
    """One success of an attack's results file (see the module docstring)."""

    file: str
    line: int
    id: str
    method: str
    found_on: str
    text: str
    label: int | None
    vulnerable: str
    vulnerable_patched: str | None = None
    pair: tuple[str, str] | None = None
    #: the class names of the model it was found on (its file's label map), by class id; None: bare ids
    classes: tuple[str, ...] | None = None

    @property
    def second_order(self) -> bool:
        return self.vulnerable_patched is not None

    @property
    def key(self) -> str:
        """Where it comes from: ``file:line``."""
        return f"{self.file}:{self.line}"


def attack_files(path: Path) -> list[Path]:
    """The attack results files under ``path``: itself, or a compare / harden folder's cells."""
    if not path.is_dir():
        return [path]
    res = load(path)  # the folder's own checks: every file its own
    return [c.path for c in res.cells.values()]


def read_findings(paths: Sequence[str | Path], *, bias: bool = True) -> list[Finding | BiasFindings]:
    """Every success of the attack results files (or compare / harden folders) ``paths``, in file
    order, and (``bias``) the scored units of bias results files; a path of another kind is a
    one-line error."""
    kinds = "audit attack or audit bias" if bias else "audit attack"
    out: list[Finding | BiasFindings] = []
    for given in paths:
        for path in attack_files(Path(given).expanduser()):
            if not path.is_file():
                raise TextAuditError(f"findings file {path} does not exist")
            header = read_header(path)
            if header is None:
                raise TextAuditError(f"{path} has no textaudit header line: give results files written by {kinds} "
                                     "(--output), or an audit compare or audit harden folder")
            command = header.get("command")
            if command not in (("attack", "bias") if bias else ("attack",)):
                what = "an attack's or a bias run's findings" if bias else "an attack's findings"
                raise TextAuditError(f"{path} holds {command or 'unknown'} results, not {what}; give results files of "
                                     f"{kinds}, or an audit compare or audit harden folder")
            records = read_jsonl(path)
            check_records(path, header, records)  # a damaged line: file and line
            if command == "bias":
                out.append(read_bias_findings(str(path), header, records, record_lines(path)))
                continue
            cfg = header.get("config", {})
            if cfg.get("perturb_side"):  # scoring the changed text without its pair's other text would be wrong
                raise TextAuditError(f"{path} holds findings on sentence pairs ({cfg['perturb_side']} text changed); "
                                     "replay takes findings on single texts for now")
            lines = record_lines(path)
            for line, r in zip(lines, records):
                if r.get("status") != "success":
                    continue
                method = str(r.get("method") or cfg.get("method"))
                second = method in SECOND_ORDER or r.get("vulnerable_patched") is not None
                need = {"text": str, "vulnerable": str, **({"vulnerable_patched": str} if second else {"label": int})}
                bad = next((k for k, t in need.items() if not isinstance(r.get(k), t) or isinstance(r.get(k), bool)), None)
                if bad is not None:
                    raise TextAuditError(f"{path}:{line}: a success without '{bad}' (a {need[bad].__name__}); was the file "
                                         "edited?")
                pair = r.get("pair")
                if pair is not None and not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(w, str)
                                                                                            for w in pair)):
                    raise TextAuditError(f"{path}:{line}: 'pair' must be a list of two words, got {str(pair)[:30]!r}; was "
                                         "the file edited?")
                pair = tuple(pair) if pair is not None else None
                classes = tuple(str(c) for c in cfg["labels"]) if isinstance(cfg.get("labels"), list) else None
                out.append(Finding(str(path), line, str(r["id"]), method, str(cfg.get("model", "?")), str(r["text"]),
                                   None if r.get("label") is None else int(r["label"]), str(r["vulnerable"]),
                                   str(r["vulnerable_patched"]) if second else None, pair, classes))
    return out


def named(classes: Sequence[str] | None) -> bool:
    """Whether ``classes`` are names (not absent, not only the ids "0", "1", … again)."""
    return bool(classes) and list(map(str, classes)) != [str(i) for i in range(len(classes or ()))]


def label_on(f: Finding, classifier: Classifier) -> int | None:
    """The finding's gold label as ``classifier``'s class id: by class *name* when both the finding's file and the
    model name their classes (a model whose classes come in another order gets the same statuses), else the id as
    recorded. A class the model does not have is one line naming file and line."""
    names = [str(n) for n in (getattr(classifier, "labels", None) or [])]
    if f.label is not None and named(f.classes) and not named(names):  # the order the ids mean cannot be checked
        raise TextAuditError(f"{f.key}: these findings name their classes ({', '.join(f.classes or ())}) but model "
                             f"{classifier.name} names none, so which of its outputs is which class cannot be checked: "
                             f"give the model a labels attribute naming its outputs in order")
    if f.label is None or not f.classes or not names or names == [str(i) for i in range(len(names))]:
        return f.label
    if not 0 <= f.label < len(f.classes):
        raise TextAuditError(f"{f.key}: label {f.label} but its file names {len(f.classes)} classes; was it edited?")
    name = f.classes[f.label]
    match = [i for i, n in enumerate(names) if n == name] or [i for i, n in enumerate(names) if n.lower() == name.lower()]
    if not match:
        raise TextAuditError(f"{f.key}: class {name!r} of these findings is not a class of {classifier.name} "
                             f"({', '.join(names)}): they are of another task, or its classes are named otherwise")
    return match[0]


def _check_task(findings: Sequence[Finding], classifier: Classifier) -> None:
    """Another task's findings: a label the model has no class for is one line naming file and line."""
    n = getattr(classifier, "num_classes", None)
    for f in findings:
        label = label_on(f, classifier)
        if n is not None and label is not None and not 0 <= label < n:
            raise TextAuditError(f"{f.key}: label {f.label} but model {classifier.name} has {n} classes: these findings "
                                 "are of another task or dataset than the model's")


def _statuses(findings: Sequence[Finding], classifier: Classifier) -> tuple[list[str], dict[str, list[float]]]:
    """Each finding's status on ``classifier`` and the probabilities of every text scored (one batch)."""
    texts = sorted({t for f in findings for t in ((f.vulnerable, f.vulnerable_patched) if f.second_order
                                                   else (f.text, f.vulnerable))})
    probs = np.asarray(classifier.predict_proba(texts)) if texts else np.zeros((0, 2))
    pred = dict(zip(texts, decisions(probs).tolist())) if texts else {}
    row = {t: [round(float(p), 6) for p in probs[i]] for i, t in enumerate(texts)}
    unknown = unknown_class(classifier)
    out = []
    for f in findings:
        if f.second_order:
            a, b = pred[f.vulnerable], pred[f.vulnerable_patched]
            holds = TIE not in (a, b) and unknown not in (a, b) and a != b
            out.append("still" if holds else "fixed")
            continue
        x, adv, label = pred[f.text], pred[f.vulnerable], label_on(f, classifier)
        if x != label:  # misclassified (or a tie): nothing to attack on this model
            out.append("not_applicable")
        else:
            out.append("still" if adv not in (TIE, label) and adv != unknown else "fixed")
    return out, row


@dataclass
class Replay:
    """The findings replayed on ``model`` (and ``baseline``): one record per finding, and counts.

    ``records[i]``: the finding (file, line, id, method, pair, the texts), ``status`` on the model and
    the model's probabilities of its texts; with a baseline, ``baseline_status`` and its probabilities."""

    model: str
    records: list[dict]
    baseline: str | None = None
    config: dict = field(default_factory=dict)

    def _count(self, key: str, status: str) -> int:
        return sum(r[key] == status for r in self.records)

    @property
    def still(self) -> int:
        return self._count("status", "still")

    @property
    def fixed(self) -> int:
        return self._count("status", "fixed")

    @property
    def not_applicable(self) -> int:
        return self._count("status", "not_applicable")

    @property
    def regressed(self) -> int:
        """Fixed on the baseline, holding again on the model (0 without a baseline)."""
        return sum(r.get("baseline_status") == "fixed" and r["status"] == "still" for r in self.records)

    @property
    def fixed_by_model(self) -> int:
        """Holding on the baseline, fixed on the model (0 without a baseline)."""
        return sum(r.get("baseline_status") == "still" and r["status"] == "fixed" for r in self.records)

    @property
    def still_share(self) -> float | None:
        """Still among the applicable findings (still + fixed), or None when none applies."""
        n = self.still + self.fixed
        return self.still / n if n else None

    def summary(self) -> dict[str, Any]:
        """Counts overall and per (method, pair); with a baseline the paired counts and McNemar's p
        (:func:`textaudit.kinds.summarize_replay`: ``results.load`` of a replay file gives the same)."""
        return summarize_replay(self.records, self.model, self.baseline, self.config.get("margin"))


def _bias_records(found: BiasFindings, clf: Classifier, base: Classifier | None) -> list[dict]:
    """One record per pair p and k′ of a bias file: B_{p,k′} as the run found it and on the model (and baseline)."""
    now = found.estimates(clf)
    before = found.estimates(base) if base is not None else None
    out = []
    for pair, by_k in found.found.items():
        for kk, e in by_k.items():
            m = now.get(pair, {}).get(kk)
            rec = {"file": found.file, "line": found.line, "id": f"{pair[0]},{pair[1]}|k={kk}", "method": "bias",
                   "found_on": found.found_on, "pair": list(pair), "k": kk, "order": "bias",
                   "status": bias_status(e, m), **estimate_fields(e, "found_"), **estimate_fields(m)}
            if before is not None:
                b = before.get(pair, {}).get(kk)
                rec.update(baseline_status=bias_status(e, b), **estimate_fields(b, "baseline_"))
            out.append(rec)
    return out


def replay(findings: str | Path | Sequence[str | Path] | Sequence[Finding | BiasFindings], model: object,
           baseline: object | None = None, *, margin: float | None = None) -> Replay:
    """Replay ``findings`` (results files or folders, or what :func:`read_findings` returned) on ``model``
    (and ``baseline``): any model spec or classifier :func:`~textaudit.models.load_classifier` takes.
    ``margin`` (with a baseline): the summary says whether the model's still-rate is non-inferior to
    (and equivalent with) the baseline's at that margin, a share (0.02: 2 points).
    See the module docstring for what each status means."""
    check_margin(margin, baseline is not None)

    if isinstance(findings, (str, Path)):
        findings = [findings]
    items = list(findings)
    read = items if items and all(isinstance(f, (Finding, BiasFindings)) for f in items) else read_findings(items)  # type: ignore[arg-type]
    found = [f for f in read if isinstance(f, Finding)]
    biased = [f for f in read if isinstance(f, BiasFindings)]
    if not found and not any(b.found for b in biased):
        raise TextAuditError("the findings files hold no success to replay (no vulnerable or adversarial example, "
                             "no scored bias unit)")
    clf = model if hasattr(model, "predict_proba") and not isinstance(model, str) else load_classifier(model)
    _check_task(found, clf)
    base = None
    if baseline is not None:
        base = baseline if hasattr(baseline, "predict_proba") and not isinstance(baseline, str) else load_classifier(baseline)
        _check_task(found, base)
    status, probs = _statuses(found, clf)
    base_status, base_probs = _statuses(found, base) if base is not None else (None, None)
    records = []
    draws = sampled_draws(clf)
    for i, (f, s) in enumerate(zip(found, status)):
        texts = (f.vulnerable, f.vulnerable_patched) if f.second_order else (f.text, f.vulnerable)
        rec = {**{k: v for k, v in asdict(f).items() if k not in ("line", "classes")}, "line": f.line,
               "order": "second" if f.second_order else "first", "status": s, "probs": [probs[t] for t in texts]}
        if draws is not None and s != "not_applicable":  # how often the finding flips over the model's N draws
            ref = int(decisions(np.asarray([probs[texts[0]]]))[0]) if f.second_order else label_on(f, clf)
            rec.update(draws=draws, flips=flips_in_draws(probs[texts[1]], ref, unknown_class(clf), draws))
        if f.pair is not None:
            rec["pair"] = list(f.pair)
        if base_status is not None:
            rec.update(baseline_status=base_status[i], baseline_probs=[base_probs[t] for t in texts])  # type: ignore[index]
        records.append(rec)
    for b in biased:
        records.extend(_bias_records(b, clf, base))
    config = {"model": clf.name, "model_fingerprint": getattr(clf, "fingerprint", None),
              "findings": sorted({f.file for f in found} | {b.file for b in biased})}
    if base is not None:
        config.update(baseline=base.name, baseline_fingerprint=getattr(base, "fingerprint", None))
    if margin is not None:
        config["margin"] = float(margin)
    return Replay(clf.name, records, base.name if base is not None else None, config)


def fresh_attacks(paths: Sequence[str | Path], model: object, n: int, *, seed: int = 0,
                  pairs: Sequence[tuple[str, str]] | None = None, in_flight: int | None = None,
                  progress: bool = True, say: Callable[[str], None] | None = None) -> list[dict]:
    """Attack ``model`` afresh on ``n`` examples drawn (``seed``) from the attacked examples of each attack
    results file of ``paths``, with that file's method and settings (k, β, κ, δ, the naturalness constraint, its
    seed and masked LM; patch words: ``pairs``, else the default ones): what a replay cannot say — whether the model is more
    robust now, not only whether these x̃ still flip. One dict per file: the examples, the successes
    there of the file's own model (its records) and of ``model`` now, each with its Wilson interval, and
    McNemar's exact p on the paired examples. ``say``: where each file's attack says its time before it starts
    (as ``audit attack`` does) and again when wrong by more than 2×; None: not estimated."""
    if n < 1:
        raise TextAuditError(f"--fresh must be at least 1 example (got {n})")
    clf = model if hasattr(model, "predict_proba") and not isinstance(model, str) else load_classifier(model)
    out = []
    for given in paths:
        for path in attack_files(Path(given).expanduser()):
            header = read_header(path) or {}
            if header.get("command") != "attack":
                continue  # a bias run's findings: B is replayed on its own sentences, no attack to repeat
            cfg = header.get("config", {})
            method = str(cfg.get("method"))
            if method.startswith("textattack:"):
                continue
            records = read_jsonl(path)
            check_records(path, header, records)  # (read_findings checks them too; this is also a Python API)
            attacked = [r for r in records if r.get("status") in ("success", "failed")
                        and isinstance(r.get("text"), str) and isinstance(r.get("label"), int)]
            if not attacked:
                continue
            rng = np.random.default_rng(seed)
            pick = sorted(rng.choice(len(attacked), size=min(n, len(attacked)), replace=False).tolist())
            sample = [attacked[i] for i in pick]
            spec = method_spec(method)
            options = {k: cfg.get(k) for k in ("k", "beam", "kappa", "delta", "seed", "max_queries", "threshold")
                       if k in spec.options and cfg.get(k) is not None}
            if spec.needs_mlm:
                options["mlm"] = load_mlm(cfg.get("mlm"))
            if "naturalness" in spec.options:  # the file's search: a header without it is the paper's
                options["naturalness"] = bool(cfg.get("naturalness"))
            if pairs is not None and "patch_words" in spec.options:
                options["patch_words"] = PatchWords(clf, pairs)
            atk = make_attack(method, clf, **options)
            texts = [r["text"] for r in sample]
            if hasattr(atk, "rank_patch_words"):
                atk.rank_patch_words(texts)
            _, now = run_attack(atk, texts, [r["label"] for r in sample], ids=[str(r.get("id")) for r in sample],
                                progress=progress, in_flight=in_flight, estimate=say is not None, say=say)
            pairs_ok = [(a, b) for a, b in zip(sample, now) if b.get("status") in ("success", "failed")]
            before = [a["status"] == "success" for a, _ in pairs_ok]
            after = [b["status"] == "success" for _, b in pairs_ok]
            out.append({"file": str(path), "method": method, "k": cfg.get("k"), "examples": len(sample),
                        "paired": len(pairs_ok), "then_model": cfg.get("model"), "model": clf.name,
                        "then_success": sum(before), "then_ci95": list(wilson(sum(before), len(before)) or ()),
                        "now_success": sum(after), "now_ci95": list(wilson(sum(after), len(after)) or ()),
                        "mcnemar_p": mcnemar(before, after)["p"] if pairs_ok else None})
    return out


@dataclass(kw_only=True)
class ReplayOutcome(Outcome):
    """A finished replay (:class:`~textaudit.request.Outcome`: its ``summary`` — with ``fresh``, the fresh attack's
    rows under ``"fresh"`` —, one record per finding, its results file), the :class:`Replay` and the fresh attack's
    rows (None without ``fresh``)."""

    replay: Replay
    fresh: list[dict] | None


@dataclass
class ReplayRequest:
    """Every option of ``audit replay`` with its default, range and help (:mod:`textaudit.request`): an audit's
    findings — an attack's successes (x̃, x̃ ⊕ p), a bias run's scored sentences — replayed on ``model``; no masked
    LM, no search."""

    findings: list[Path] = option(..., argument=True, help=(
        "Results files of audit attack or audit bias (--output), or audit compare / audit harden folders: an attack's "
        "successes are its findings; a bias run's, the sentences it scored (B_{p,k} on them)."))
    model: str = shared("model", ...)
    target_label: str | None = shared("target_label")
    label_threshold: float = shared("label_threshold", 0.5)
    baseline: str | None = option(None, help=(
        "A second model (the previous version): the findings are replayed on both and paired — fixed by --model, "
        "regressed (fixed on the baseline, holding again), McNemar's exact p."))
    margin: float | None = option(None, **RANGES["margin"], help=(
        "With --baseline: a non-inferiority margin m, a share (0.02 = 2 points). Says whether the model's still-rate "
        "is no worse than the baseline's by m or more (the one-sided test at α = 0.05 on Newcombe's paired interval) "
        "and whether the two are equivalent within ±m (TOST); the harmful and beneficial flips beside it."))
    output: Path | None = option(None, flags=("--output", "-o"), scope="command",
                                 help="JSONL file: one record per finding (must not exist).")
    fresh: int | None = option(None, low=1, help=(
        "Beside the replay, attack --model afresh on N examples drawn from each attack file's attacked examples, with "
        "the file's method and settings: its success rate now beside the file's own on the same examples (McNemar) — "
        "whether the model is more robust, which the replay alone does not say."))
    pairs_file: Path | None = option(None, help=(
        "With --fresh: the synonym pairs 'w1,w2' the patch words come from, as the attack was given them (default: the "
        "counter-fitted neighbours)."))

    def check(self) -> tuple[list, list[tuple[str, str]] | None]:
        """Every one-line error before any model loads: the findings read and checked, the pairs file read."""
        check_margin(self.margin, self.baseline is not None)
        found = read_findings(self.findings)  # every file checked before any model loads
        if self.output is not None:
            check_output(self.output, None)  # never over a file: refused before anything runs
        if self.pairs_file is not None and self.fresh is None:
            raise TextAuditError("--pairs-file goes with --fresh (the patch words of the fresh attack)")
        pairs = load_pairs_file(str(self.pairs_file)) if self.pairs_file is not None else None
        return found, pairs

    def run(self, *, checked: tuple | None = None, progress: bool = True, say: Callable[[str], None] = say_line,
            config: dict | None = None) -> ReplayOutcome:
        """Replay the findings (and attack afresh with ``fresh``); the records go to ``output`` when it is given
        (``config``: more of its header's settings, e.g. the mark of the suite that writes it)."""
        found, pairs = self.check() if checked is None else checked
        model = label_view(load_classifier(self.model), self.target_label, self.label_threshold)
        result = replay(found, model, self.baseline, margin=self.margin)
        again = None
        if self.fresh is not None:
            say(f"fresh attack: {self.fresh} examples of each attack file, on {result.model} …")
            again = fresh_attacks(self.findings, model, self.fresh, pairs=pairs, progress=progress, say=say)
        if self.output is not None:
            write_results(self.output, result.records, command="replay", config={**result.config, **(config or {})})
        summary = result.summary()
        if again is not None:
            summary["fresh"] = again
        return ReplayOutcome(summary, result.records, written(self.output), replay=result, fresh=again)
