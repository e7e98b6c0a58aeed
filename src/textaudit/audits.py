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
``learnability.bow.butter_fingers_perturbation.robustness_min`` (:func:`textaudit.gates.summary_value`). A value
the summary does not hold fails the gate as missing. The other rows name their grammar in :mod:`textaudit.gates`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from textaudit.attacks.request import AttackRequest, CompareRequest
from textaudit.errors import TextAuditError
from textaudit.evaluation import EvaluateRequest
from textaudit.fairness.request import BiasRequest
from textaudit.findings import ReplayRequest
from textaudit.gates import (
    Gates,
    Limit,
    attack_gate,
    bias_gate,
    bias_note,
    certify_gate,
    compare_margins,
    harden_gate,
    method_gate,
    method_of,
    replay_limits,
    summary_gate,
)
from textaudit.harden.request import HardenRequest
from textaudit.kinds import BY_ID
from textaudit.robustness.learnability import LearnabilityRequest
from textaudit.robustness.perturbscore.request import TuplesRequest
from textaudit.robustness.request import CertifyRequest
from textaudit.robustness.wordorder import WordOrderRequest

__all__ = ["AuditRow", "AUDITS", "BY_NAME", "gates_of", "limits_of", "register", "unregister", "ON_REGISTER"]

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
    afresh: a kind that does not resume), ``aliases`` (a section's older key → the field), ``gate`` (its
    thresholds' grammar, :mod:`textaudit.gates`; with ``metrics``, a path into the summary) and ``limits`` (the
    gates its section's own keys set: a margin, ``max_still``; they check those keys), ``required`` (fields a suite
    must give though the command has a default: the model audited), ``per_model`` (the section's ``models`` are
    each audited alike, one request and results file each), ``reads`` (the outcome's attribute its gates read:
    the summary, or bias's estimates) and ``header_limit`` (a suite's limit is one of its results file's settings:
    the examples it counts), ``note`` (what a gate's value is worth beside its pass, from the gate's name and what
    the gates read: bias's few-sources warning)."""

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
    gate: Callable[[dict, tuple[str, ...], str], Gates] | None = None
    limits: Callable[[dict], list[Limit]] | None = None
    required: tuple[str, ...] = ()
    per_model: bool = False
    reads: str = "summary"
    header_limit: bool = False
    note: Callable[[str, object], str | None] | None = None

    def __post_init__(self) -> None:
        if self.gate is None and self.metrics:
            object.__setattr__(self, "gate", summary_gate(self.name, self.metrics))
        unknown = [k for k in self.kinds if k not in BY_ID]
        if unknown:
            raise ValueError(f"audit {self.name}: unknown kind {unknown[0]!r} (textaudit.kinds.KINDS)")


#: the numbers a classification summary holds: accuracy, each class's (or label's) and the averages' P/R/F1
CLASSIFICATION_METRICS = ("accuracy", "precision", "recall", "f1", "subset_accuracy", "hamming_loss", "ece", "brier")

AUDITS: list[AuditRow] = [
    AuditRow("attack", AttackRequest, "attack.jsonl", "output", ("attack",), gate=attack_gate),
    AuditRow("compare", CompareRequest, "compare", "output_dir", ("compare", "attack"), own_keys=("equivalence",),
             limits=compare_margins),
    AuditRow("bias", BiasRequest, "bias.jsonl", "output", ("bias",), inherits={"data": "data", "seed": "seed"},
             aliases={"pairs": "pair"}, gate=bias_gate, required=("model",), reads="results", header_limit=True,
             note=bias_note),
    AuditRow("certify", CertifyRequest, "certify.{model}.jsonl", "output", ("certify", "certify-ibp"),
             own_keys=("models",), gate=certify_gate, per_model=True),
    AuditRow("harden", HardenRequest, "harden", "out", ("harden",),
             inherits={"data": "eval_data", "limit": "eval_limit", "seed": "seed"}, paths=("from_findings",),
             gate=harden_gate),
    AuditRow("evaluate", EvaluateRequest, "evaluate.jsonl", "output", ("metrics", "evaluate"),
             metrics=CLASSIFICATION_METRICS, replaced=True),
    AuditRow("wordorder", WordOrderRequest, "wordorder.jsonl", "output", ("wordorder",),
             inherits={"data": "data", "seed": "seed", "limit": "limit"},
             metrics=("accuracy", "dnd", "idc", "levenshtein", "bleu4", "clean_accuracy", "rho"), replaced=True),
    AuditRow("learnability", LearnabilityRequest, "learnability.jsonl", "output", ("learnability",),
             inherits={}, metrics=("avg_learnability", "robustness", "post_aug_delta", "rho")),
    AuditRow("perturbscore", TuplesRequest, "perturbscore.jsonl", "output", ("perturbscore build",),
             inherits={"data": "data", "seed": "seed"}, metrics=("tried", "kept", "mean_eps")),
    AuditRow("replay", ReplayRequest, "replay.jsonl", "output", ("replay",), inherits={},
             own_keys=("max_still", "max_regressed", "equivalence"), paths=("findings",), replaced=True,
             limits=replay_limits),  # (last: a suite's findings may be what its other sections just wrote)
]
"""Every audit, in the order a suite checks and runs its sections (a command and a section each)."""
BY_NAME: dict[str, AuditRow] = {row.name: row for row in AUDITS}
#: called with each row :func:`register` adds (the command line gives it a command) and ``unregister`` takes out
#: (``removed=True``: the command goes too)
ON_REGISTER: list[Callable[..., None]] = []


def register(row: AuditRow) -> None:
    """Add an audit: its row, and with it a suite section and (once the command line is loaded) a command."""
    if row.name in BY_NAME:
        raise ValueError(f"an audit named {row.name!r} is already in the table")
    AUDITS.append(row)
    BY_NAME[row.name] = row
    for hook in ON_REGISTER:
        hook(row)


def unregister(name: str) -> None:
    """Take an audit :func:`register` added out of the table again, and its command with it."""
    row = BY_NAME.pop(name)
    AUDITS.remove(row)
    for hook in ON_REGISTER:
        hook(row, removed=True)


def gates_of(spec: dict, keys: tuple[str, ...], metric: str) -> Gates:
    """A threshold's gates, by the grammar of the row its first key names — or of ``[compare]``'s when it names a
    method of that section (``so_beam.success_rate_max``); a name no row takes is one line."""
    row = BY_NAME.get(keys[0])
    if row is not None and row.gate is not None:
        return row.gate(spec, keys, metric)
    if method_of(spec, keys[0]) is None:
        raise TextAuditError(f"threshold {'.'.join(keys)}: '{keys[0]}' is not a method of [compare] (nor an audit: "
                             f"{', '.join(BY_NAME)})")
    return method_gate(spec, keys, metric)


def limits_of(spec: dict) -> list[Limit]:
    """The gates the declared sections' own keys set (``[replay] max_still``, a ``margin``), in the table's order."""
    return [limit for row in AUDITS if row.limits is not None and row.name in spec for limit in row.limits(spec)]
