"""An audit's request: every option of one audit stated once — its default, its range, its help.

A request is a dataclass next to the audit's run (``fairness.request.BiasRequest`` …) whose fields are made
with :func:`option`. Everything that starts the audit reads the same fields:

- the command (``audit bias``): its options are the fields (``textaudit.cli.options.with_request``), with the
  same defaults, ranges and help, so a new field is a new option;
- a suite section (``[bias]``): its keys are the fields, each value checked by :func:`from_mapping` with the
  same range before anything runs (a field that only says how a command shows or writes its results is
  ``scope="command"``; the suite decides those itself);
- hardening and a notebook: the dataclass itself, ``BiasRequest(pair=["he,she"], k=1).run()``.

Every request keeps one contract, :class:`Audit`: ``request.check()`` raises every one-line error a bad request
can have before anything loads and returns what it found (the audit's own ``Checked*`` object, or None);
``request.run(checked=..., progress=...)`` does the audit (checking first when it is not given what ``check()``
found) and returns an :class:`Outcome` — the ``summary`` (the command's ``--json`` object, the same whoever runs it),
the ``records`` and the ``files`` it wrote. ``textaudit.testing.check_audit`` checks a request keeps it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Protocol, runtime_checkable

from textaudit.errors import TextAuditError

__all__ = ["Audit", "Outcome", "EachLabel", "written", "Spec", "option", "shared", "SHARED", "specs", "flags_of", "from_mapping",
           "from_command", "check_value", "describe", "suite_fields", "RANGES", "within", "range_words"]


@dataclass
class Outcome:
    """What every audit's ``run`` returns: the ``summary`` (the command's ``--json`` object: a command, a suite and a
    notebook get the same one), the ``records`` (what its results file holds: one per example, cell or row; empty
    for an audit whose results are a folder's), and the ``files`` it wrote (results files and folders, in order).
    An audit's own outcome adds what a person is shown beside them (the classifier, the attack …)."""

    summary: dict
    records: list[dict] = dataclasses.field(default_factory=list)
    files: list[Path] = dataclasses.field(default_factory=list)


@dataclass(kw_only=True)
class EachLabel(Outcome):
    """``--label all``'s outcome: every label of a multi-label model audited in one run — ``labels``: each label's
    own outcome (its summary, records and file); the summary ``{"labels": {label: its summary}, …}``, the files
    every label's."""

    labels: dict[str, Outcome]


@runtime_checkable
class Audit(Protocol):
    """The contract of every audit's request (see the module's docstring)."""

    def check(self) -> Any:
        """Every one-line error before anything loads; what was found (the ``checked`` :meth:`run` takes)."""

    def run(self, *, checked: Any = None, progress: bool = True) -> Outcome:
        """The audit, into its files; its :class:`Outcome`."""


def written(*paths: Path | None) -> list[Path]:
    """The results files and folders of ``paths`` an audit wrote (None: none asked for)."""
    return [Path(p) for p in paths if p is not None]


@dataclass(frozen=True)
class Spec:
    """What a field means to a person: ``help``, the command line's ``flags`` (default ``--field-name``), the
    range ``low``..``high`` (inclusive; ``open``: the bounds themselves excluded) or the ``choices``, and ``scope``
    (``audit``: any caller sets it; ``command``: only the command line — where results go and how they are shown);
    ``sep``: a list field the command line takes as one ``sep``-separated string (a suite writes a list)."""

    help: str
    flags: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None
    scope: str = "audit"
    sep: str | None = None  # a list the command line writes as one string, e.g. --models cnn,lstm
    argument: bool = False  # the command line's argument (no flag): audit replay FILE …
    open: bool | str = False  # True: low < value < high, not low <= value <= high; "high" / "low": that end alone


#: the ranges a value has wherever it is given — an option on the command line, a key of a suite section, a check in
#: the library — stated once: a field takes its range with ``**RANGES[name]``, a check reads :func:`within`
RANGES: dict[str, dict[str, Any]] = {
    "margin": {"low": 0.0, "high": 1.0, "open": True},  # a non-inferiority margin m: a share (0.02 = 2 points)
    "label_threshold": {"low": 0.0, "high": 1.0, "open": True},  # the probability above which a label is on
    "share": {"low": 0.0, "high": 1.0},  # a rate a suite gate bounds (max_still)
    "mask_rate": {"low": 0.0, "high": 1.0, "open": "high"},  # RanMASK's ρ: the share of the words masked, [0, 1)
}


def _ends(open: bool | str) -> tuple[bool, bool]:
    """Whether a range's low and high ends are excluded: ``open`` True (both), ``"low"`` or ``"high"`` (that end)."""
    return open is True or open == "low", open is True or open == "high"


def _holds(value: Any, low: float | None, high: float | None, open: bool | str) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return False
    open_low, open_high = _ends(open)
    if low is not None and (value <= low if open_low else value < low):
        return False
    return high is None or (value < high if open_high else value <= high)


def _bounds(low: float | None, high: float | None, open: bool | str) -> str:
    open_low, open_high = _ends(open)
    parts = [f"{'>' if open_low else '>='} {low:g}" if low is not None else "",
             f"{'<' if open_high else '<='} {high:g}" if high is not None else ""]
    return " and ".join(p for p in parts if p)


def within(name: str, value: Any) -> bool:
    """Whether ``value`` is a number in :data:`RANGES`' range ``name``."""
    r = RANGES[name]
    return _holds(value, r.get("low"), r.get("high"), r.get("open", False))


def range_words(name: str) -> str:
    """:data:`RANGES`' range ``name`` as a one-line error says it: ``a number > 0 and < 1``."""
    r = RANGES[name]
    return f"a number {_bounds(r.get('low'), r.get('high'), r.get('open', False))}"


def option(default: Any = None, *, help: str, flags: tuple[str, ...] = (), low: float | None = None,
           high: float | None = None, choices: tuple[str, ...] | None = None, scope: str = "audit",
           sep: str | None = None, argument: bool = False, open: bool | str = False) -> Any:
    """A request field with its default and :class:`Spec` (a list default is copied per request; ``...``: required,
    the command line and a suite section must give it)."""
    return _field(default, Spec(help, flags, low, high, choices, scope, sep, argument, open))


def _field(default: Any, spec: Spec) -> Any:
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata={"spec": spec})
    return dataclasses.field(default=default, metadata={"spec": spec})


#: the options many audits share, each stated once (``shared("seed")`` in a request; the commands' ``SeedOpt`` …)
SHARED: dict[str, Spec] = {
    "model": Spec("Zoo name (bow, cnn, lstm, transformer, minilm[-gender-swap], bow-ibp, cnn-ibp, lstm-ibp), "
                  "hf:<dir-or-id>, llm:smollm2 (or llm:<causal-LM id or dir>), http(s)://endpoint, checkpoint dir or "
                  "file.py:obj.", ("--model", "-m")),
    "data": Spec("sst2[:train|dev|test], hf:<dataset>[:config][:split] (a hub id or a saved/local dataset folder), or a "
                 ".csv/.tsv/.jsonl/.parquet/.arrow file."),
    "text_column": Spec("Column of a data file holding the text."),
    "pair_column": Spec("Column of a sentence pair's second text (NLI hypothesis, paraphrase, QA passage); "
                        "--text-column is the first."),
    "perturb_side": Spec("Text of a pair the neighbourhood and the patch word change: second (default) or first; the "
                         "other stays verbatim."),
    "label_column": Spec("Column of a data file holding the label."),
    "label_map": Spec("Which class id of the model each class name of the data means, e.g. happy=1,unhappy=0 (needed "
                      "when the data's labels are names and the model has no class names; recorded in the results "
                      "header)."),
    "target_label": Spec("A multi-label model's label to audit: a flip is that label crossing --label-threshold "
                         "(strictly: a tie is no flip); B_{p,k} is of its probability. The data's label is that "
                         "label's 0/1 (--label-column).", ("--label",)),
    "naturalness": Spec("The second-order searches' naturalness constraint: on (a finding's changed words still fit the "
                        "final sentence, no word repeats its neighbour, the synonym fits where it goes — each asked of "
                        "the masked LM; the causal LM's perplexity measures the result) or off (the paper's search "
                        "exactly; reproduce_paper.py uses it)."),
    "label_threshold": Spec("With --label: the probability above which the label is on.", ("--label-threshold",),
                            **RANGES["label_threshold"]),
    "limit": Spec("Use only the first N examples.", low=1),
    "sample": Spec("Use N examples drawn at random with --seed (each keeps its row's id; not with --limit).", low=1),
    "mlm": Spec("Masked LM of the neighbourhood: minilm-mlm, or any HF fill-mask id or directory "
                "(distilbert-base-uncased, xlm-roberta-base, camembert-base, ...; default: distilbert if available, else "
                "minilm-mlm); minilm-mlm+smollm2 re-ranks the candidates by SmolLM2's sentence likelihood (quality "
                "mode, slower)."),
    "language": Spec("Language of the text (en, fr, de, ...): how words split (fr/it/ca split elisions such as "
                     "l'homme); default: from --mlm's name (camembert: fr), else en."),
    "in_flight": Spec("Examples searched at once (per Ray worker), their model calls merged into one batched forward "
                      "per step (default: 32 on a CPU, 256 on a GPU, 1 for an http(s):// or OpenAI-compatible "
                      "endpoint). Records are the same whatever it is.", low=1),
    "seed": Spec("Seed of every random choice.", low=0),
    "output": Spec("JSONL results file, written as it goes.", ("--output", "-o"), scope="command"),
    "resume": Spec("Continue --output: skip the work already in it.", scope="command"),
    "shard": Spec("i/N: do only the i-th of N disjoint parts of the work (0 <= i < N), e.g. one per machine; join "
                  "the parts' --output files with audit merge.", scope="command"),
}


def shared(name: str, default: Any = None, **changes: Any) -> Any:
    """A request field of the shared option ``name`` (:data:`SHARED`), its spec changed by ``changes``."""
    return _field(default, dataclasses.replace(SHARED[name], **changes))


def specs(cls: type) -> dict[str, tuple[Any, Any, Spec]]:
    """``name → (type, default, spec)`` of every field of the request class ``cls``, in order."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        out[f.name] = (hints[f.name], default, f.metadata["spec"])
    return out


def flags_of(name: str, spec: Spec) -> tuple[str, ...]:
    """The command line's names of field ``name``: its spec's, else ``--name-with-dashes``."""
    return spec.flags or ("--" + name.replace("_", "-"),)


def _base(hint: Any) -> tuple[Any, bool]:
    """The type inside Optional[...] and whether None is allowed."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(hint))
    return hint, False


def describe(hint: Any, spec: Spec) -> str:
    """What a value must be, for a one-line error: ``a whole number >= 0``, ``clustered or bootstrap`` …"""
    base, _ = _base(hint)
    if spec.choices:
        return " or ".join(spec.choices)
    if typing.get_origin(base) is list:
        return "a non-empty list of names" if spec.sep else "a list of strings"
    word = {int: "a whole number", float: "a number", bool: "true or false", str: "a string", Path: "a path"}[base]
    bounds = _bounds(spec.low, spec.high, spec.open)
    return f"{word} {bounds}" if bounds else word


def check_value(hint: Any, spec: Spec, value: Any, where: str) -> Any:
    """``value`` as the field's type (a path from a string, a number from an int, one string as a list of one)
    when it is one; else a one-line error that says ``where`` and what it must be."""
    base, optional = _base(hint)
    if value is None:
        if optional:
            return None
        raise TextAuditError(f"{where} must be {describe(hint, spec)}")
    ok = True
    if typing.get_origin(base) is list:
        value = [value] if isinstance(value, str) and not spec.sep else value
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value) and (bool(value) or not spec.sep)
    elif base is bool:
        ok = isinstance(value, bool)
    elif base is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif base is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif base is Path:
        ok = isinstance(value, (str, Path)) and str(value) != ""
        value = Path(value) if ok else value
    elif base is str:
        ok = isinstance(value, str) and value.strip() != ""
    if ok and spec.choices is not None:
        ok = value in spec.choices
    if ok and (spec.low is not None or spec.high is not None) and isinstance(value, (int, float)):
        ok = _holds(value, spec.low, spec.high, spec.open)
    if not ok:
        raise TextAuditError(f"{where} must be {describe(hint, spec)} (got {value!r})")
    return value


def check_fields(request: Any) -> None:
    """Each field of ``request`` within its own range and choices, however the request was built (a command line and
    a suite section check them as they parse; code that builds a request is checked here): the first field outside
    them is one line naming its flag."""
    for name, (hint, _, spec) in specs(type(request)).items():
        value = getattr(request, name)
        if value is not None and (spec.choices or spec.low is not None or spec.high is not None):
            check_value(hint, spec, value, flags_of(name, spec)[0])


def suite_fields(cls: type) -> dict[str, tuple[Any, Any, Spec]]:
    """The fields a suite section takes: all but those only the command line sets."""
    return {name: s for name, s in specs(cls).items() if s[2].scope != "command"}


def from_mapping(cls: type, values: Mapping[str, Any], path: str | Path, section: str, *,
                 aliases: Mapping[str, str] | None = None, **fixed: Any) -> Any:
    """A request of ``cls`` from the suite section ``[section]`` of ``path`` (checked: an unknown key or a bad value
    is a one-line error naming the file, the section and the key); ``aliases``: older key → field; ``fixed``:
    fields the caller decides (the output file, resume), not the section."""
    fields = suite_fields(cls)
    where = f"{path}: [{section}]"
    missing = [name for name, (_, default, _) in fields.items() if default is ... and name not in values]
    if missing:
        raise TextAuditError(f"{where} needs {missing[0]} = \"<{missing[0]}>\"")
    given: dict[str, Any] = {}
    for key, value in values.items():
        name = (aliases or {}).get(key, key)
        if name not in fields:
            raise TextAuditError(f"{path}: unknown key '{key}' in [{section}]; use {', '.join(sorted(fields))}")
        hint, _, spec = fields[name]
        given[name] = check_value(hint, spec, value, f"{where} {key}")
    return cls(**{**given, **fixed})


def from_command(cls: type, values: Mapping[str, Any]) -> Any:
    """A request of ``cls`` from a command line's values: a ``sep`` list arrives as one string (``cnn,lstm``)."""
    fields = specs(cls)
    out = dict(values)
    for name, (hint, default, spec) in fields.items():
        if spec.sep and isinstance(out.get(name), str):
            out[name] = [part.strip() for part in out[name].split(spec.sep) if part.strip()]
        value = out.get(name)
        if value is not None and value is not default and (spec.choices or spec.low is not None or spec.high is not None):
            # the field's own choices and range, whatever command gives it (never a per-command check)
            check_value(hint, spec, value, flags_of(name, spec)[0])
    return cls(**out)
