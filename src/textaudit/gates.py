"""Each audit's suite gates: the threshold names its section takes and where each value is read.

A threshold of ``[thresholds]`` is ``<what>.<metric>_max`` (the value must be ≤ the limit) or ``_min`` (≥). Each
audit's row of :data:`textaudit.audits.AUDITS` names its grammar here: a function ``(spec, keys, metric)`` that
checks a threshold's name against the suite file's sections ``spec`` (a bad name: one line, before anything
runs) and returns ``[(name, value_of(results))]`` — ``results`` the suite's, each audit's summary under its
section's name (``bias``: its estimates; ``certify``: a summary per model). A row's ``limits`` are the gates its
section's own keys set (``[replay] max_still``, a ``margin``).

``[attack]``'s thresholds are ``attack.<metric>_max`` (or ``_min``) with the attack metrics below (``[compare]``'s:
``<method>.<metric>`` for every model's cell, ``<method>.<model>.<metric>`` for one); with
``target_label = "all"`` (every label of a multi-label model, each in its own file), ``attack.<label>.<metric>``.
The sections gated by their summary alone (``[evaluate]``, ``[wordorder]``, ``[learnability]``,
``[perturbscore]``) take ``<section>.[<class, label, model …>.]<metric>``: a path into the summary their run gives
(:func:`summary_value`), e.g. ``evaluate.macro.f1_min``, ``wordorder.dnd_max``,
``learnability.bow.butter_fingers_perturbation.robustness_min``.

Attack metrics: the cells' numbers (``found_share``, the share of *every* input with a finding — skipped and failed
count as not found —, ``success_rate``, the share of the attacked only, ``mean_l0``, ``sec_per_example``,
``queries_per_example``, and ``found_share_ci_low``/``_ci_high``, ``success_rate_ci_low``/``_ci_high``, the
Wilson intervals' ends);
bias: ``B_k<k>`` and ``abs_B_k<k>``; certify: ``accuracy`` and ``certified_accuracy`` (IBP's), or
``certified_accuracy_r<R>`` (randomized smoothing's at radius R); harden: ``harden.<before|after>.<accuracy|
success_rate>`` (and, for ``method = "masked"`` or ``"substitute"``, ``smoothed_accuracy`` and ``certified_at_<R>``)
and ``harden.mcnemar_p`` (the first evaluation attack's paired test). Method names
may be written with ``_`` for ``-``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from textaudit.errors import TextAuditError
from textaudit.fairness.bias import MIN_SOURCES, few_sources
from textaudit.harden.run import CERTIFIED
from textaudit.models.batched import ALL_LABELS
from textaudit.request import range_words, within

__all__ = ["ATTACK_METRICS", "CERTIFY_METRICS", "HARDEN_METRICS", "Value", "attack_gate", "bias_gate", "certify_gate",
           "harden_gate", "method_gate", "summary_gate", "compare_margins", "replay_limits", "summary_value", "Check",
           "split_threshold", "flatten", "bias_note"]

ATTACK_METRICS = ("found_share", "found_share_ci_low", "found_share_ci_high", "success_rate", "mean_l0",
                  "sec_per_example", "queries_per_example", "success_rate_ci_low", "success_rate_ci_high")
CERTIFY_METRICS = ("accuracy", "certified_accuracy")
#: a harden section's thresholds: harden.<side>.<metric> (the first evaluation attack's) and harden.mcnemar_p
HARDEN_METRICS = ("accuracy", "success_rate")
#: a gate's value from the suite's results (None: missing, the gate fails)
Value = Callable[[dict], "float | None"]
Gates = list[tuple[str, Value]]


@dataclass
class Check:
    """One threshold and how the results met it."""

    name: str
    value: float | None
    op: str  # "<=", ">=", "<" or ">"
    limit: float
    passed: bool
    file: str | None = None  # the results file (or folder) the value was read from
    note: str | None = None  # what the value is worth beside its pass (B on too few sources: no claim)

    @property
    def row(self) -> list:
        return [self.name, "missing" if self.value is None else self.value, f"{self.op} {self.limit}",
                ("pass" if self.passed else "FAIL") + (" (see the note)" if self.note else "")]

    def to_dict(self) -> dict:
        """The check as ``audit run --json`` gives it."""
        return {"name": self.name, "value": self.value, "op": self.op, "limit": self.limit, "passed": self.passed,
                "file": self.file, "note": self.note}


def split_threshold(name: str) -> tuple[str, str]:
    """A threshold's last key as ``(metric, op)``: ``_max`` is ``<=``, ``_min`` ``>=``."""
    for op, suffix in (("<=", "_max"), (">=", "_min")):
        if name.endswith(suffix):
            return name[: -len(suffix)], op
    raise TextAuditError(f"threshold '{name}' must end in _max or _min (e.g. success_rate_max)")


def flatten(d: dict, prefix: tuple = ()) -> list[tuple[tuple, Any]]:
    """``[thresholds]`` as ``(keys, limit)`` pairs (a dotted name is TOML's nested tables)."""
    out = []
    for k, v in d.items():
        out += flatten(v, prefix + (k,)) if isinstance(v, dict) else [(prefix + (k,), v)]
    return out


def bias_note(name: str, estimates: Any) -> str | None:
    """What a bias gate's value is worth beside its pass: audit bias's warning when B_{p,k} rests on fewer than
    ``MIN_SOURCES`` sentences (``estimates``: the suite's bias results, ``{model: {pair: {k: estimate}}}``)."""
    pair_text, metric = name[len("bias."):].rsplit(".", 1)
    pair = tuple(w.strip() for w in pair_text.strip('"').split(","))
    k = int(metric.partition("_k")[2].split("_")[0] or 0)
    e = next(iter((estimates or {}).values()), {}).get(pair, {}).get(k)
    return None if e is None or e.sources >= MIN_SOURCES else f"B for {pair[0]}→{pair[1]} {few_sources(e.sources)}"


def _section(spec: dict, name: str) -> dict:
    return spec.get(name, {})


def attack_value(summary: dict, metric: str) -> float | None:
    """An attack's metric: a summary's number, or an end of a rate's Wilson interval (``found_share_ci_low``: of every
    input; ``success_rate_ci_high``: of the attacked)."""
    rate = re.fullmatch(r"(found_share|success_rate)_ci_(low|high)", metric)
    if rate is not None:
        ci = summary.get(f"{rate.group(1)}_ci95")
        return None if not ci else ci[0] if rate.group(2) == "low" else ci[1]
    return summary.get(metric)


def attack_gate(spec: dict, keys: tuple[str, ...], metric: str) -> Gates:
    """``attack.<metric>``; with ``target_label = "all"``, ``attack.<label>.<metric>`` (each label's summary)."""
    name = ".".join(keys)
    each = _section(spec, "attack").get("target_label") == ALL_LABELS
    if "attack" not in spec or len(keys) != 2 + each or metric not in ATTACK_METRICS:
        raise TextAuditError(f"threshold {name}: write attack.{'<label>.' if each else ''}"
                             f"<{'|'.join(ATTACK_METRICS)}>_<max|min> and declare [attack]")
    return [(name, lambda res, at=keys[1:-1]: attack_value(
        (res["attack"]["labels"].get(at[0]) or {}) if at else res["attack"], metric))]


def bias_gate(spec: dict, keys: tuple[str, ...], metric: str) -> Gates:
    """``bias."<w1,w2>".B_k<k>`` or ``abs_B_k<k>``: B_{p,k} of a pair of ``[bias]`` (k at most its k)."""
    name, bias = ".".join(keys), _section(spec, "bias")
    if "bias" not in spec or len(keys) != 3:
        raise TextAuditError(f"threshold {name}: write bias.\"<w1,w2>\".abs_B_k<k>_max and declare [bias]")
    pair = tuple(w.strip() for w in keys[1].split(","))
    declared = bias.get("pairs", bias.get("pair", []))  # (pairs: the older name of pair)
    declared = [declared] if isinstance(declared, str) else declared
    if ",".join(pair) not in [",".join(p.strip() for p in q.split(",")) for q in declared]:
        raise TextAuditError(f"threshold {name}: pair '{keys[1]}' is not among [bias] pairs")
    base, _, kk = metric.partition("_k")
    if base not in ("B", "abs_B") or not kk.isdigit() or int(kk) > bias.get("k", 3):
        raise TextAuditError(f"threshold {name}: bias metrics are B_k<k> and abs_B_k<k> with k <= the [bias] k")

    def value(res: dict) -> float | None:
        e = next(iter(res["bias"].values())).get(pair, {}).get(int(kk))
        return None if e is None else abs(e.B) if base == "abs_B" else e.B

    return [(name, value)]


def certify_value(summary: dict, metric: str) -> float | None:
    """A certification's metric; smoothing's ``certified_accuracy_r<R>`` read from its curve (0..the largest radius
    certified: beyond it nothing is certified, 0)."""
    radius = re.fullmatch(r"certified_accuracy_r([0-9]+)", metric)
    if radius is None or "curve" not in summary:
        return summary.get(metric)
    at = {row["radius"]: row["certified_accuracy"] for row in summary["curve"]}
    return at.get(int(radius.group(1)), 0.0 if summary.get("n") else None)


def certify_gate(spec: dict, keys: tuple[str, ...], metric: str) -> Gates:
    """``certify.<model>.<accuracy|certified_accuracy>`` (smoothing: ``certified_accuracy_r<R>``) of a model of
    ``[certify]``."""
    name = ".".join(keys)
    if len(keys) != 3 or keys[1] not in _section(spec, "certify").get("models", []) or not (
            metric in CERTIFY_METRICS or re.fullmatch(r"certified_accuracy_r[0-9]+", metric)):
        raise TextAuditError(f"threshold {name}: write certify.<model>.<{'|'.join(CERTIFY_METRICS)}>_min "
                             "(smoothing: certified_accuracy_r<R>_min) for a model of [certify]")
    return [(name, lambda res, m=keys[1]: certify_value(res["certify"][m], metric))]


def harden_value(summary: dict, path: tuple, metric: str) -> float | None:
    """A harden gate's value: the first evaluation attack's (``accuracy``, ``success_rate``), the paired test, or the
    certificate a masked or substitute hardening computed (``smoothed_accuracy``, ``certified_at_<R>``: 0 past the
    largest radius certified)."""
    if not path:
        return summary.get(metric)
    if metric == "smoothed_accuracy" or metric.startswith("certified_at_"):
        side = (summary.get("certificate") or {}).get(path[0])
        if side is None:
            return None
        if metric == "smoothed_accuracy":
            return side.get("accuracy")
        at = {c["radius"]: c["certified_accuracy"] for c in side.get("curve", [])}
        return at.get(int(metric.rsplit("_", 1)[1]), 0.0)
    return summary[path[0]].get(metric)


def harden_gate(spec: dict, keys: tuple[str, ...], metric: str) -> Gates:
    """``harden.<before|after>.<metric>`` (``smoothed_accuracy``, ``certified_at_<R>`` for a hardening that trains
    for a certificate) or ``harden.mcnemar_p``."""
    name = ".".join(keys)
    certified = metric == "smoothed_accuracy" or re.fullmatch(r"certified_at_[0-9]+", metric) is not None
    if "harden" not in spec or keys[1:-1] not in (("before",), ("after",), ()) or \
            (not (metric in HARDEN_METRICS or certified) if len(keys) == 3 else metric != "mcnemar_p"):
        raise TextAuditError(f"threshold {name}: write harden.<before|after>.<{'|'.join(HARDEN_METRICS)}|"
                             "smoothed_accuracy|certified_at_<R>>_<max|min> or harden.mcnemar_p_max, and declare "
                             "[harden]")
    if certified and spec["harden"].get("method") not in CERTIFIED:
        raise TextAuditError(f"threshold {name}: [harden] method {spec['harden'].get('method')!r} trains for "
                             f"no certificate; {' or '.join(CERTIFIED)} do")
    return [(name, lambda res, path=keys[1:-1]: harden_value(res["harden"], path, metric))]


def method_of(spec: dict, head: str) -> str | None:
    """The method of ``[compare]`` a threshold's first key names (``so_beam`` for ``so-beam``), None when none."""
    return next((m for m in _section(spec, "compare").get("methods", []) if m == head or m.replace("-", "_") == head),
                None)


def method_gate(spec: dict, keys: tuple[str, ...], metric: str) -> Gates:
    """``<method>.<metric>`` (every model's cell) or ``<method>.<model>.<metric>`` (one cell) of ``[compare]``."""
    name, models = ".".join(keys), _section(spec, "compare").get("models", [])
    method = method_of(spec, keys[0])
    if len(keys) == 3 and keys[1] not in models:
        raise TextAuditError(f"threshold {name}: '{keys[1]}' is not a model of [compare]")
    if len(keys) not in (2, 3) or metric not in ATTACK_METRICS:
        raise TextAuditError(f"threshold {name}: attack metrics are {', '.join(ATTACK_METRICS)}")

    def cell(res: dict, model: str) -> float | None:
        return attack_value(next(c for c in res["compare"]["cells"] if c["model"] == model and c["method"] == method),
                            metric)

    return [(name if len(keys) == 3 else f"{keys[0]}.{model}.{keys[-1]}", lambda res, m=model: cell(res, m))
            for model in ([keys[1]] if len(keys) == 3 else models)]


def _row(rows: Any, key: str) -> Any:
    """The row of ``rows`` (a list of dicts) one of whose names is ``key``; None when none is."""
    if not isinstance(rows, list):
        return None
    return next((r for r in rows if isinstance(r, dict) and key in
                 {str(v) for v in r.values() if isinstance(v, (str, int, float)) and not isinstance(v, bool)}), None)


def summary_value(summary: Any, path: tuple[str, ...]) -> float | None:
    """The number at ``path`` in a summary: a dict's key, or the row of a list whose names hold the key — a list of
    the dict's own when the key is none of its keys (``per_class``'s row of a class); None when the summary holds no
    number there."""
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


def summary_gate(section: str, metrics: tuple[str, ...]) -> Callable[[dict, tuple[str, ...], str], Gates]:
    """The gates of a section gated by its summary alone: ``<section>.[<class, label, model …>.]<metric>``, a path
    into the summary its run gives ending in one of ``metrics``."""

    def gate(spec: dict, keys: tuple[str, ...], metric: str) -> Gates:
        if section not in spec or metric not in metrics:
            raise TextAuditError(f"threshold {'.'.join(keys)}: write {section}.[<class, label, model …>.]"
                                 f"<{'|'.join(metrics)}>_<max|min> and declare [{section}]")
        return [(".".join(keys), lambda res, p=(*keys[1:-1], metric): summary_value(res[section], p))]

    return gate


#: a gate of a section's own key: (name, op, limit, value_of(results))
Limit = tuple[str, str, float, Value]


def _margin_gates(name: str, margin: float | None, equivalence: bool, test_of: Callable[[dict], dict | None]) -> list[Limit]:
    """A non-inferiority gate as thresholds on the ends of the harm's interval: the upper end < m, and
    with ``equivalence`` the lower end > −m too (``test_of(results)``: the test, None when missing)."""
    if margin is None:
        return []

    def end(i: int) -> Value:
        return lambda res: None if test_of(res) is None else test_of(res)["harm_ci"][i]  # type: ignore[index]

    out = [(f"{name}.harm_ci_high", "<", float(margin), end(1))]
    if equivalence:
        out.append((f"{name}.harm_ci_low", ">", -float(margin), end(0)))
    return out


def _own_key(section: str, values: dict, key: str, want: str, ok: Callable[[Any], bool]) -> None:
    """A section's own key (a gate's, not its request's): what it must be, in one line."""
    if key in values and (isinstance(values[key], bool) != (want == "true or false") or not ok(values[key])):
        raise TextAuditError(f"[{section}] {key} must be {want} (got {values[key]!r})")


def _equivalence(section: str, values: dict) -> None:
    _own_key(section, values, "equivalence", "true or false", lambda v: isinstance(v, bool))
    if "equivalence" in values and "margin" not in values:
        raise TextAuditError(f"[{section}] equivalence needs margin = <a share, e.g. 0.02>")


def compare_margins(spec: dict) -> list[Limit]:
    """``[compare] margin``: each later model non-inferior to the first under every method, and in accuracy (with
    ``equivalence = true``, equivalent); a margin needs two models."""
    compare = _section(spec, "compare")
    models, margin, equivalence = compare.get("models", []), compare.get("margin"), compare.get("equivalence", False)
    _equivalence("compare", compare)
    if margin is not None and len(models) < 2:
        raise TextAuditError("[compare] margin needs two models or more (each later one is tested against the first)")

    def paired(res: dict, model: str, method: str) -> dict | None:
        return next((p.get("non_inferiority") for p in res["compare"]["paired"]
                     if p["a"] == f"{models[0]}/{method}" and p["b"] == f"{model}/{method}"), None)

    out = []
    for model in models[1:]:
        for method in compare.get("methods", []):
            out += _margin_gates(f"compare.{method}.{model}.vs_{models[0]}", margin, equivalence,
                                 lambda res, m=model, a=method: paired(res, m, a))
        out += _margin_gates(f"compare.accuracy.{model}.vs_{models[0]}", margin, equivalence,
                             lambda res, m=model: next((t["non_inferiority"] for t in res["compare"].get("accuracy", [])
                                                        if t["b"] == m), None))
    return out


def replay_limits(spec: dict) -> list[Limit]:
    """``[replay]``'s own limits: the margin gate, the share of applicable findings still holding, regressions (the
    margin and the regressions need a baseline)."""
    replay = _section(spec, "replay")
    _own_key("replay", replay, "max_still", f"{range_words('share')} (a share)", lambda v: within("share", v))
    _own_key("replay", replay, "max_regressed", "a whole number >= 0", lambda v: isinstance(v, int) and v >= 0)
    if "max_regressed" in replay and "baseline" not in replay:
        raise TextAuditError("[replay] max_regressed needs baseline = \"<the previous model>\" (a regression is a finding "
                             "fixed on the baseline that holds again)")
    if ("margin" in replay or "equivalence" in replay) and "baseline" not in replay:
        raise TextAuditError("[replay] margin needs baseline = \"<the previous model>\" (non-inferiority compares the "
                             "model with it)")
    _equivalence("replay", replay)
    out = _margin_gates("replay.non_inferiority", replay.get("margin"), replay.get("equivalence", False),
                        lambda res: res["replay"].get("non_inferiority"))
    if replay.get("max_still") is not None:
        out.append(("replay.still_share_max", "<=", float(replay["max_still"]), lambda res: res["replay"]["still_share"]))
    if replay.get("max_regressed") is not None:
        out.append(("replay.regressed_max", "<=", float(replay["max_regressed"]), lambda res: res["replay"]["regressed"]))
    return out
