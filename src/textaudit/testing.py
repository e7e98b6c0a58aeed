"""Contract checks a plug-in author runs on their own model before auditing it — scikit-learn's
``check_estimator``, for classifiers.

    from textaudit.testing import check_model
    check_model("sentiment.py:vader")          # a spec, a callable, an object with predict_proba, a classifier

Every audit assumes the same few things of a model; a model that breaks one gives numbers that mean something
else (a score that depends on the other texts of its batch makes a search's findings depend on its batch
size, a non-deterministic one makes ``--resume`` and the score cache lie). :func:`check_model` asks each:

- ``scores``: one row per text, C ≥ 2 columns (≥ 1 for a multi-label model) as ``num_classes`` says, finite, in
  [0, 1], each row summing to 1 within 1e-3 (multi-label: each in [0, 1]);
- ``labels``: the declared class names, if any, are C distinct names;
- ``decisions``: ``predict`` is the strict arg-max of ``predict_proba`` (a tie is no class);
- ``batch invariance``: each text scored alone equals its score in a batch, and in the batch reversed;
- ``determinism``: asked twice (past every cache), the same scores;
- ``empty batch``: no texts, no rows (shape ``(0, C)``);
- ``edge texts``: an empty, a blank, a very long and a non-Latin text each get a valid row or a
  :class:`~textaudit.errors.TextAuditError` the model raises itself — never another exception (textaudit shows
  a plug-in's crash to users as one line; the check names the crash).

Scores are compared within ``tolerance`` (default 1e-5: a float32 forward may differ in its last bits between
batch shapes). The answer is a :class:`ModelReport`; ``strict=True`` (the default) raises
:class:`ModelCheckError` listing every failed check.

:func:`check_audit` does the same for an audit's request (:class:`textaudit.request.Audit`), run on small real
settings — an audit's author runs it on a new request, our tests on every row of ``textaudit.audits.AUDITS``:

- ``contract``: ``check()`` and ``run(checked=..., progress=...)``;
- ``check``: every one-line error before anything loads — it writes nothing, and asked twice it answers twice;
- ``run``: given what ``check()`` found, an :class:`~textaudit.request.Outcome`;
- ``summary``: a dict with string keys that JSON writes as it is (no value only ``str()`` could show);
- ``records``: a list of dicts JSON writes as they are;
- ``files``: every file it names exists and was asked for; a JSONL one is a results file of a known kind
  (:func:`textaudit.kinds.kind_of`) holding the outcome's records (``--label all``: its label's outcome's).

:func:`check_kind` checks a kind of results (:class:`textaudit.kinds.Kind`) against a results file of it: the
table knows it by its id, the file's header names it, its records are sound by its record spec (``records``: each
field's type, a key every record has, no key twice where the spec says so), its summary is recomputed from the
records as plain JSON
(``summarize``), its headline rows are the report's width, a resumable kind's command is one ``--resume``
continues, a kind that does not merge says why in one line.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from textaudit.decision import decisions
from textaudit.errors import TextAuditError
from textaudit.formats.jsonl import RecordSpec, check_results, read_header, read_jsonl
from textaudit.kinds import BY_ID, HEADLINE_COLUMNS, Kind, kind_of, resumable_commands
from textaudit.model_traits import traits_of
from textaudit.models import as_classifier, load_classifier
from textaudit.models.batched import BatchedClassifier
from textaudit.request import Audit, Outcome

__all__ = ["check_model", "ModelReport", "ModelCheck", "ModelCheckError", "PROBE_TEXTS", "EDGE_TEXTS", "check_audit",
           "AuditReport", "AuditCheckError", "OUTPUT_FIELDS", "check_kind"]

#: the texts every check scores (short and long, punctuation, a repeated word, digits)
PROBE_TEXTS = (
    "a deep and moving film .",
    "the plot is thin , the acting wooden and the ending a relief .",
    "not bad at all",
    "great great great",
    "it runs 95 minutes and feels like 3 hours !",
    "an unremarkable , forgettable sequel that never finds its footing , despite a cast that tries hard .",
)
#: texts a model must answer or refuse in one line: empty, blank, very long, non-Latin
EDGE_TEXTS = ("", "   ", " ".join(["long"] * 2000), "très bien — 非常好 — отлично")


class ModelCheckError(TextAuditError):
    """A model failed :func:`check_model`; the message lists each failed check."""


class AuditCheckError(TextAuditError):
    """A request failed :func:`check_audit`; the message lists each failed check."""


@dataclass
class ModelCheck:
    """One check: its ``name``, whether it ``passed``, and what was seen (``detail``)."""

    name: str
    passed: bool
    detail: str = ""


@dataclass
class ModelReport:
    """Every check of one model (:func:`check_model`)."""

    model: str
    checks: list[ModelCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> list[ModelCheck]:
        return [c for c in self.checks if not c.passed]

    def __str__(self) -> str:
        lines = [f"{self.model}: {'every check passed' if self.ok else f'{len(self.failed)} check(s) failed'}"]
        lines += [f"  {'ok  ' if c.passed else 'FAIL'} {c.name}" + (f": {c.detail}" if c.detail else "") for c in self.checks]
        return "\n".join(lines)


def _classifier(model: Any) -> BatchedClassifier:
    if isinstance(model, BatchedClassifier):
        return model
    if isinstance(model, str):
        return load_classifier(model)
    return as_classifier(model, output=traits_of(model).output)


def _fresh(clf: BatchedClassifier, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
    """Scores the model itself gives (past the memory and disk caches), ``batch_size`` texts per forward."""
    old = clf.batch_size
    if batch_size is not None:
        clf.batch_size = batch_size
    try:
        return np.asarray(clf.predict_proba_fresh(list(texts)), dtype=float)
    finally:
        clf.batch_size = old


def _gap(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def _check_rows(probs: np.ndarray, n: int, multilabel: bool) -> str | None:
    """What is wrong with ``probs`` as scores of ``n`` texts (None: nothing)."""
    if probs.ndim != 2 or probs.shape[0] != n:
        return f"shape {probs.shape} for {n} texts (want ({n}, C))"
    if probs.shape[1] < (1 if multilabel else 2):
        return f"{probs.shape[1]} column(s): a classifier needs at least {1 if multilabel else 2}"
    if not np.isfinite(probs).all():
        return "a score is NaN or infinite"
    if probs.min() < 0 or probs.max() > 1:
        return f"a score outside [0, 1] ({probs.min():.4g} .. {probs.max():.4g})"
    if not multilabel and np.abs(probs.sum(1) - 1).max() > 1e-3:
        return f"a row sums to {probs.sum(1)[np.abs(probs.sum(1) - 1).argmax()]:.4g}, not 1"
    return None


def _run(name: str, fn: Callable[[], str | None], report: ModelReport) -> None:
    """Run one check: ``fn`` returns what is wrong (None: passed); an exception fails the check with its line."""
    try:
        problem = fn()
    except TextAuditError as e:
        problem = f"refused: {str(e).splitlines()[0]}"
    except Exception as e:  # noqa: BLE001 — any other exception is exactly what the check reports
        problem = f"raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    report.checks.append(ModelCheck(name, problem is None, problem or ""))


def check_model(model: Any, *, texts: Sequence[str] | None = None, tolerance: float = 1e-5,
                strict: bool = True) -> ModelReport:
    """Run every check of the module docstring on ``model`` (a spec ``load_classifier`` takes, a callable, an
    object with ``predict_proba``, or a :class:`~textaudit.models.batched.BatchedClassifier`) over ``texts``
    (default :data:`PROBE_TEXTS`); return the :class:`ModelReport`, raising :class:`ModelCheckError` when a
    check failed and ``strict``."""
    clf = _classifier(model)
    probe = list(texts) if texts is not None else list(PROBE_TEXTS)
    if len(probe) < 2:
        raise TextAuditError("check_model needs at least two texts (batch invariance compares them in a batch)")
    report = ModelReport(getattr(clf, "name", "model"))
    multilabel = traits_of(clf).multilabel
    seen: dict[str, np.ndarray] = {}

    def scores() -> str | None:
        seen["batch"] = batch = _fresh(clf, probe)
        problem = _check_rows(batch, len(probe), multilabel)
        if problem is None and clf.num_classes != batch.shape[1]:
            problem = f"num_classes says {clf.num_classes}, the rows have {batch.shape[1]} columns"
        return problem

    def labels() -> str | None:
        names, width = getattr(clf, "labels", None), seen["batch"].shape[1]
        if names is None:
            return None
        if len(names) != width:
            return f"{len(names)} label names for {width} classes"
        if len(set(names)) != len(names):
            return f"label names repeat: {list(names)}"
        return None

    def decided() -> str | None:
        if multilabel:
            return None  # independent labels: each decided against its own threshold, not an arg-max
        got, want = np.asarray(clf.predict(probe)), decisions(seen["batch"])
        return None if np.array_equal(got, want) else f"predict gives {got.tolist()}, the arg-max of the rows {want.tolist()}"

    def batch_invariance() -> str | None:
        batch = seen["batch"]
        alone = np.vstack([_fresh(clf, [t], batch_size=1) for t in probe])
        backwards = _fresh(clf, probe[::-1])[::-1]
        gap_alone, gap_order = _gap(alone, batch), _gap(backwards, batch)
        if gap_alone > tolerance:
            worst = int(np.abs(alone - batch).max(1).argmax())
            return (f"scored alone, {probe[worst]!r} differs from its score in a batch by {gap_alone:.3g} "
                    f"(the other texts of a batch change a text's score)")
        if gap_order > tolerance:
            return f"the batch reversed changes scores by {gap_order:.3g}"
        return None

    def determinism() -> str | None:
        gap = _gap(_fresh(clf, probe), seen["batch"])
        return None if gap <= tolerance else f"asked again, scores differ by {gap:.3g} (a random or stateful model)"

    def empty_batch() -> str | None:
        out = np.asarray(clf.predict_proba([]))
        return None if out.shape[0] == 0 else f"no texts gave shape {out.shape}"

    def edge_texts() -> str | None:
        for t in EDGE_TEXTS:
            shown = repr(t if len(t) < 40 else t[:20] + f"… ({len(t)} characters)")
            try:
                row = _fresh(clf, [t])
            except TextAuditError as e:
                cause = e.__cause__
                if cause is None or isinstance(cause, TextAuditError):
                    continue  # the model refused it in one line, as it may
                # textaudit shows a plug-in's crash as one line; for its author it is still a crash
                return f"{shown} raised {type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}"
            except Exception as e:  # noqa: BLE001 — what the check reports
                return f"{shown} raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            problem = _check_rows(row, 1, multilabel)
            if problem:
                return f"{shown}: {problem}"
        return None

    _run("scores", scores, report)
    return _in_order(report, [("labels", labels), ("decisions", decided), ("batch invariance", batch_invariance),
                              ("determinism", determinism), ("empty batch", empty_batch), ("edge texts", edge_texts)],
                     strict, report.model, ready=lambda: "batch" in seen, unready="the model gave no scores to check",
                     error=ModelCheckError)


@dataclass
class AuditReport(ModelReport):
    """Every check of one audit's request (:func:`check_audit`; ``model``: the request's class name) and the
    :class:`~textaudit.request.Outcome` its run gave (None when it did not run)."""

    outcome: Outcome | None = None


#: the request fields an audit's results go to (a file or a folder)
OUTPUT_FIELDS = ("output", "output_dir", "out")


def _outputs(request: Any) -> list[Path]:
    return [Path(getattr(request, f)) for f in OUTPUT_FIELDS if getattr(request, f, None) is not None]


def _json(value: Any, what: str) -> str | None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        return f"{what} is not plain JSON: {e}"
    return None


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _asked(path: Path, asked: Path) -> bool:
    """Whether ``path`` is the results file or folder ``asked``, inside it, or one label's file of it
    (``--label all``: ``out.jsonl`` → ``out.<label>.jsonl``)."""
    label_file = path.parent == asked.parent and path.suffix == asked.suffix and path.name.startswith(asked.stem + ".")
    return path == asked or asked in path.parents or label_file


def _bag(records: list[dict]) -> list[str]:
    """Records as a multiset: a file holds them in the order they finished, an outcome in the data's."""
    return sorted(json.dumps(r, sort_keys=True) for r in records)


def _in_order(report: Any, checks: list[tuple[str, Callable[[], str | None]]], strict: bool, what: str, *,
              ready: Callable[[], bool] | None = None, unready: str = "an earlier check failed",
              error: type[TextAuditError] | None = None) -> Any:
    """Run ``checks`` in order into ``report``, each only while ``ready()`` (default: every earlier one passed; else
    it is "not run", ``unready`` saying why); with ``strict``, ``error`` (default :class:`AuditCheckError`) naming
    ``what`` and every failed check."""
    for name, fn in checks:
        if (ready or (lambda: report.ok))():
            _run(name, fn, report)
        else:
            report.checks.append(ModelCheck(name, False, f"not run: {unready}"))
    if strict and not report.ok:
        raise (error or AuditCheckError)(f"{what} failed {len(report.failed)} check(s): "
                              + "; ".join(f"{c.name}: {c.detail}" for c in report.failed))
    return report


def check_audit(request: Any, *, strict: bool = True) -> AuditReport:
    """Run every check of the module docstring on ``request`` (an audit's request, on settings small enough to run
    here): ``check()``, then ``run(checked=..., progress=False)``. Returns the :class:`AuditReport`, raising
    :class:`AuditCheckError` when a check failed and ``strict``."""
    report = AuditReport(type(request).__name__)
    seen: dict[str, Any] = {}

    def contract() -> str | None:
        if not isinstance(request, Audit):
            return "no check() or no run()"
        params = inspect.signature(request.run).parameters
        missing = [p for p in ("checked", "progress") if p not in params]
        return f"run() takes no {' or '.join(missing)}" if missing else None

    def check() -> str | None:
        before = {p: p.exists() for p in _outputs(request)}
        seen["checked"] = request.check()
        wrote = [str(p) for p, was in before.items() if p.exists() and not was]
        if wrote:
            return f"check() wrote {', '.join(wrote)}: it must only say what is wrong"
        request.check()  # asked again before anything ran: the same request, no other answer
        return None

    def run() -> str | None:
        outcome = request.run(checked=seen["checked"], progress=False)
        if not isinstance(outcome, Outcome):
            return f"run() returned {type(outcome).__name__}, not an Outcome"
        report.outcome = outcome
        return None

    def summary() -> str | None:
        got = report.outcome.summary
        if not isinstance(got, dict) or not all(isinstance(k, str) for k in got):
            return f"the summary is a {type(got).__name__}{'' if not isinstance(got, dict) else ' with a key not a string'}"
        return _json(got, "the summary")

    def records() -> str | None:
        got = report.outcome.records
        if not isinstance(got, list) or not all(isinstance(r, dict) for r in got):
            return "the records are not a list of dicts"
        return _json(got, "a record")

    def files() -> str | None:
        asked = [p.resolve() for p in _outputs(request)]
        for path in report.outcome.files:
            if not Path(path).exists():
                return f"{path} is named but does not exist"
            if not any(_asked(Path(path).resolve(), a) for a in asked):
                return f"{path} was not asked for (the request's {', '.join(OUTPUT_FIELDS)})"
            if Path(path).is_file() and Path(path).suffix == ".jsonl":
                kind_of(read_header(path))  # an unknown kind: its one line
                labels = getattr(report.outcome, "labels", None)  # --label all: each file is a label's outcome's
                owner = next((o for o in labels.values() if path in o.files), report.outcome) if labels else report.outcome
                if _bag(read_jsonl(path)) != _bag(_plain(owner.records)):  # (written as they finish)
                    return f"{path} holds {len(read_jsonl(path))} records, the outcome {len(owner.records)} others"
        if asked and not report.outcome.files:
            return f"it was asked for {', '.join(map(str, asked))} and names no file"
        return None

    return _in_order(report, [("contract", contract), ("check", check), ("run", run), ("summary", summary),
                              ("records", records), ("files", files)], strict, report.model)


def check_kind(kind: Kind, path: str | Path, *, strict: bool = True) -> ModelReport:
    """Run every check of the module docstring on ``kind`` with the results file at ``path`` (one of its); return the
    report (``model``: the kind's id), raising :class:`AuditCheckError` when a check failed and ``strict``."""
    report = ModelReport(kind.id)
    seen: dict[str, Any] = {}

    def table() -> str | None:
        if BY_ID.get(kind.id) is not kind:
            return f"the table holds no kind {kind.id!r} (textaudit.kinds.register_kind adds one)"
        return None if kind.command and kind.writer and kind.title else "a kind needs its command, writer and title"

    def header() -> str | None:
        seen["header"], seen["records"] = read_header(path) or {}, read_jsonl(path)
        named = kind_of(seen["header"])
        return None if named is kind else f"{path}'s header names the kind {named.id!r}"

    def records() -> str | None:
        if not isinstance(kind.records, RecordSpec):
            return f"its records are a {type(kind.records).__name__}, not a RecordSpec"
        try:
            check_results(path, seen["header"], seen["records"], kind.records)
            {kind.records.key(r) for r in seen["records"]}  # every record has its key, and a hashable one
        except TextAuditError as e:
            return str(e)
        except (KeyError, TypeError) as e:
            return f"a record has no key by its kind's records.key ({type(e).__name__}: {e})"
        return None

    def summary() -> str | None:
        if kind.summarize is None:
            return None  # (a kind read whole: a word-order sweep, a folder's summary)
        got = kind.summarize(seen["header"].get("config", {}), seen["records"])
        return _json(got, "the summary") if isinstance(got, dict) else f"summarize gave a {type(got).__name__}"

    def headline() -> str | None:
        rows = kind.headline(seen["header"].get("config", {}), seen["records"], {})
        wrong = [r for r in rows if len(r) != len(HEADLINE_COLUMNS)]
        return f"a headline row of {len(wrong[0])} cells, not {len(HEADLINE_COLUMNS)}" if wrong else None

    def resume_merge() -> str | None:
        if kind.resumable and kind.writer.removeprefix("audit ").split(" --")[0] not in resumable_commands():
            return f"resumable, but {kind.writer} is not a command --resume continues"
        if kind.merge_refusal is not None and (not kind.merge_refusal.strip() or "\n" in kind.merge_refusal):
            return "its merge refusal is not one line"
        return None

    return _in_order(report, [("table", table), ("header", header), ("records", records), ("summary", summary),
                              ("headline", headline),
                              ("resume and merge", resume_merge)], strict, f"kind {kind.id}")
