"""Run B_{p,k} for several pairs (and optionally a second model on the same neighbourhoods):
progress, every scored sentence pair appended to a JSONL file as each unit finishes, resume.

Output lines (``--output``):

* one per scored sentence pair: ``{"unit", "model", "i", "source", "pair", "reversed", "distance",
  "text", "F"}`` — ``text`` is the neighbourhood sentence as it stands (holding the source's pair
  word), ``F`` = F_soft = f_soft(with p(2)) − f_soft(with p(1));
* one marker per finished unit and model: ``{"unit_done", "model", "n", "weight", "sampled_k"}``.

A unit is one source sentence's enumerated block or one sampled level. On ``--resume`` units with
a marker are read back instead of recomputed; lines of a unit cut off by a kill are ignored and
the unit is redone.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from textaudit.errors import TextAuditError
from textaudit.fairness.bias import BiasEstimate, CounterfactualBias, Source, ScoredUnit, aggregate
from textaudit.results import JsonlWriter

__all__ = ["run_bias", "report"]


def _unit_id(pair: tuple[str, str], src: Source, sampled_k: int | None) -> str:
    """A unit's sentences do not depend on filtering, so a ``--filtered`` run reuses a full run's units."""
    return f"{pair[0]},{pair[1]}|{src.id}|{'enum' if sampled_k is None else f'k={sampled_k}'}"


def _finished_units(records: list[dict]) -> dict[tuple[str, str], tuple[dict, list[dict]]]:
    """Return {(unit, model): (marker, lines)} for the finished units among an output's records."""
    lines: dict[tuple[str, str], dict[int, dict]] = {}
    markers: dict[tuple[str, str], dict] = {}
    for r in records:
        if "unit_done" in r:
            markers[(r["unit_done"], r["model"])] = r
        elif "unit" in r:
            lines.setdefault((r["unit"], r["model"]), {})[r["i"]] = r
    return {key: (m, [lines.get(key, {})[i] for i in sorted(lines.get(key, {}))]) for key, m in markers.items()
            if len(lines.get(key, {})) == m["n"]}


def run_bias(estimator: CounterfactualBias, pairs: Sequence[tuple[str, str]], k: int, texts: Sequence[str], *,
             ids: Sequence[str] | None = None, compare: CounterfactualBias | None = None, output=None,
             resume: bool = False, filtered: bool = False, epsilon: float = 0.005, max_sources: int | None = None,
             progress: bool = True) -> dict[str, dict[tuple[str, str], dict[int, BiasEstimate]]]:
    """Return {model name: {pair: {k′: BiasEstimate}}} for k′ = 0..k over ``texts``.

    ``compare``: a second estimator (another classifier) scored on the *same* sentences.
    ``filtered``: each model's B is taken over its own X_filter (|F_soft| < ε under that model); a
    pair whose X_filter is empty for a model gets no estimates (``by_k`` empty).
    ``max_sources``: use only the first N sentences of X_p per pair (X_filter is taken among them,
    so a ``--filtered`` run reuses the units of a full run with the same cap).
    """
    from tqdm.auto import tqdm

    if len(texts) == 0:
        raise TextAuditError("no sentences to measure bias on (empty dataset)")
    if k < 0:
        raise TextAuditError(f"--k must be >= 0 (got {k})")
    ids = list(ids) if ids is not None else [str(i) for i in range(len(texts))]
    scorers = [estimator] + ([compare] if compare is not None else [])
    names = [getattr(s.classifier, "name", f"model{i}") for i, s in enumerate(scorers)]
    if len(set(names)) < len(names):
        names = [f"{n}#{i}" for i, n in enumerate(names)]
    writer = JsonlWriter(output, resume=resume, id_key="unit_done")
    previous = _finished_units(writer.records)
    writer.records = []  # read once for resuming; the new lines are not kept in memory
    plans = []
    for pair in pairs:
        for sc in scorers:
            sc.check_pair(pair)
        sources = estimator.sources(texts, pair, ids=ids)
        sources = sources[:max_sources] if max_sources is not None else sources
        if filtered:
            # X_filter is each model's own: the sentences where *its* naive k = 0 test shows no bias
            keep = {n: sc.filter_sources(sources, pair, epsilon) for n, sc in zip(names, scorers)}
            used = {s.id for ks in keep.values() for s in ks}
            sources = [s for s in sources if s.id in used]
        else:
            keep = {n: sources for n in names}
        plans.append((pair, estimator.plan(sources, k), {n: {s.id for s in ks} for n, ks in keep.items()}))
    if filtered and not any(ids_ for *_, kp in plans for ids_ in kp.values()):
        raise TextAuditError(f"no sentence has |F_soft| < ε = {epsilon} for any pair and model (raise --epsilon)")
    total = sum(len(p) for _, p, _ in plans)
    bar = tqdm(total=total, desc=f"bias k<={k}", unit="unit", disable=None if progress else True)
    results: dict[str, dict[tuple[str, str], dict[int, BiasEstimate]]] = {n: {} for n in names}
    for pair, plan, keep_ids in plans:
        units: dict[str, list[ScoredUnit]] = {n: [] for n in names}
        for src, sampled_k in plan:
            uid = _unit_id(pair, src, sampled_k)
            if all((uid, n) in previous for n in names):
                for n in names:
                    m, rows = previous[(uid, n)]
                    units[n].append(ScoredUnit(src, sampled_k, [r["text"] for r in rows],
                                          np.array([r["distance"] for r in rows]),
                                          np.array([r["F"] for r in rows], dtype=float), m.get("weight")))
            else:
                scored = estimator.score_unit(src, pair, k, sampled_k, scorers[1:])
                for n, u in zip(names, scored):
                    units[n].append(u)
                    rows = [{"unit": uid, "model": n, "i": i, "source": src.id, "pair": list(pair),
                             "reversed": src.reversed, "distance": int(d), "text": t,
                             "F": np.round(f, 6).tolist() if np.ndim(f) else round(float(f), 6)}
                            for i, (t, d, f) in enumerate(zip(u.texts, u.distance, u.F))]
                    rows.append({"unit_done": uid, "model": n, "n": len(u.texts), "weight": u.weight,
                                 "sampled_k": sampled_k})
                    writer.extend(rows, keep=False)
            bar.update(1)
        for n in names:
            results[n][pair] = aggregate([u for u in units[n] if u.source.id in keep_ids[n]], pair, k,
                                         estimator.enumerate_k)
        b = results[names[0]][pair]
        if b:
            top = b[max(b)]
            bar.set_postfix(pair="/".join(pair), B=f"{top.B:+.4f}")
    bar.close()
    return results


def report(results: dict[str, dict[tuple[str, str], dict[int, BiasEstimate]]]) -> dict:
    """The ``--json`` object: ``{"model", "pairs": [{"pair", "by_k": {"0": {...}}}], "compare"?}``."""
    names = list(results)

    def one(name: str) -> dict:
        return {"model": name, "pairs": [{"pair": list(p), "by_k": {str(kk): e.to_dict() for kk, e in by_k.items()}}
                                         for p, by_k in results[name].items()]}

    out = one(names[0])
    if len(names) > 1:
        out["compare"] = one(names[1])
    return out
