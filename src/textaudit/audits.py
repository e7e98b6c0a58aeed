"""Every audit in one table: its request, its suite section, what that section inherits from ``[suite]``, the
thresholds it can gate on, and the kinds of results it writes.

A row is what the rest of the package asks instead of naming an audit: ``audit run`` builds a suite section for
each row (``[evaluate]``, ``[wordorder]`` … as ``[attack]``), checks its keys with the request's ranges, runs it
into the suite's folder and reads its gates from the run's :class:`~textaudit.request.Outcome` summary (the same
summary the command prints with ``--json``); ``results.load``, ``audit report`` and ``audit merge`` read the
files by their kind (:mod:`textaudit.kinds`). A new audit is its request module (an
:class:`~textaudit.request.Audit`) and one row here.

A gate of a row with ``metrics`` is ``<section>.<path…>.<metric>_<max|min>``: the path walks the summary — a
key of a dict, or in a list of rows the row one of whose names is that key (a class, a label, a model, a
perturbation) — and ends in a number named one of the row's metrics, e.g. ``evaluate.positive.recall_min``
(the per-class row of the class ``positive``), ``evaluate.macro.f1_min``, ``wordorder.dnd_max``,
``learnability.bow.butter_fingers_perturbation.robustness_min``. A value the summary does not hold fails the
gate as missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from textaudit.attacks.request import AttackRequest, CompareRequest
from textaudit.evaluation import EvaluateRequest
from textaudit.fairness.request import BiasRequest
from textaudit.findings import ReplayRequest
from textaudit.harden.request import HardenRequest
from textaudit.kinds import BY_ID
from textaudit.robustness.learnability import LearnabilityRequest
from textaudit.robustness.perturbscore.request import TuplesRequest
from textaudit.robustness.request import CertifyRequest
from textaudit.robustness.wordorder import WordOrderRequest

__all__ = ["AuditRow", "AUDITS", "BY_NAME", "summary_value"]

#: the [suite] keys most sections take as their own unless they give them
DATA_SEED_LIMIT = {"data": "data", "seed": "seed", "limit": "limit"}


@dataclass(frozen=True)
class AuditRow:
    """One audit: ``name`` (its command and suite section), its ``request`` class, where a suite keeps its results
    (``results``, in the suite's folder; ``output``: the request's field they go to), ``inherits`` (``[suite]`` key
    → the request's field, used when the section gives no value), the ``kinds`` of results it writes (ids of
    :data:`textaudit.kinds.KINDS`), ``metrics`` (the numbers a generic gate may name; empty: the suite's own
    grammar for this section), ``own_keys`` (keys of the section that are the suite's gates, not the request's
    options), ``paths`` (fields a suite file gives relative to itself), ``replaced`` (a suite run writes its file
    afresh: a kind that does not resume), ``aliases`` (a section's older key → the field)."""

    name: str
    request: type
    results: str
    output: str
    kinds: tuple[str, ...]
    inherits: Mapping[str, str] = field(default_factory=lambda: dict(DATA_SEED_LIMIT))
    metrics: tuple[str, ...] = ()
    own_keys: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    replaced: bool = False
    aliases: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in BY_ID]
        if unknown:
            raise ValueError(f"audit {self.name}: unknown kind {unknown[0]!r} (textaudit.kinds.KINDS)")


#: the numbers a classification summary holds: accuracy, each class's (or label's) and the averages' P/R/F1
CLASSIFICATION_METRICS = ("accuracy", "precision", "recall", "f1", "subset_accuracy", "hamming_loss", "ece", "brier")

AUDITS: tuple[AuditRow, ...] = (
    AuditRow("attack", AttackRequest, "attack.jsonl", "output", ("attack",)),
    AuditRow("compare", CompareRequest, "compare", "output_dir", ("compare", "attack"), own_keys=("equivalence",)),
    AuditRow("bias", BiasRequest, "bias.jsonl", "output", ("bias",), inherits={"data": "data", "seed": "seed"},
             aliases={"pairs": "pair"}),
    AuditRow("certify", CertifyRequest, "certify.{model}.jsonl", "output", ("certify", "certify-ibp"),
             own_keys=("models",)),
    AuditRow("replay", ReplayRequest, "replay.jsonl", "output", ("replay",), inherits={},
             own_keys=("max_still", "max_regressed", "equivalence"), paths=("findings",), replaced=True),
    AuditRow("harden", HardenRequest, "harden", "out", ("harden",),
             inherits={"data": "eval_data", "limit": "eval_limit", "seed": "seed"}, paths=("from_findings",)),
    AuditRow("evaluate", EvaluateRequest, "evaluate.jsonl", "output", ("metrics", "evaluate"),
             metrics=CLASSIFICATION_METRICS, replaced=True),
    AuditRow("wordorder", WordOrderRequest, "wordorder.jsonl", "output", ("wordorder",),
             inherits={"data": "data", "seed": "seed", "limit": "limit"},
             metrics=("accuracy", "dnd", "idc", "levenshtein", "bleu4", "clean_accuracy", "rho"), replaced=True),
    AuditRow("learnability", LearnabilityRequest, "learnability.jsonl", "output", ("learnability",),
             inherits={}, metrics=("avg_learnability", "robustness", "post_aug_delta", "rho")),
    AuditRow("perturbscore", TuplesRequest, "perturbscore.jsonl", "output", ("perturbscore build",),
             inherits={"data": "data", "seed": "seed"}, metrics=("tried", "kept", "mean_eps")),
)
BY_NAME: dict[str, AuditRow] = {row.name: row for row in AUDITS}


def _names(row: Mapping[str, Any]) -> set[str]:
    return {str(v) for v in row.values() if isinstance(v, (str, int, float)) and not isinstance(v, bool)}


def _row(rows: Any, key: str) -> Any:
    """The row of ``rows`` (a list of dicts) one of whose names is ``key``; None when none is."""
    return next((r for r in rows if isinstance(r, dict) and key in _names(r)), None) if isinstance(rows, list) else None


def summary_value(summary: Any, path: tuple[str, ...]) -> float | None:
    """The number at ``path`` in a summary (the module's gate grammar): a dict's key, or the row of a list whose
    names hold the key — a list of the dict's own when the key is none of its keys (``per_class``'s row of a
    class); None when the summary holds no number there."""
    here = summary
    for key in path:
        if isinstance(here, dict) and key in here:
            here = here[key]
        elif isinstance(here, dict):
            here = next((r for r in (_row(v, key) for v in here.values()) if r is not None), None)
        else:
            here = _row(here, key)
        if here is None:
            return None
    if isinstance(here, bool) or not isinstance(here, (int, float)):
        return None
    return float(here)
