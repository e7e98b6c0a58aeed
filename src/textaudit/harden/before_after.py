"""The honest before/after of ``audit harden``: the original and the hardened model audited on the
*same* held-out examples.

- clean accuracy of each with its Wilson 95% interval, and McNemar's exact test on the paired
  correct/incorrect outcomes;
- each evaluation attack's success rate with its Wilson interval, mean ℓ0 and cost, and McNemar's
  exact test on the examples both models were attacked on (an example is attacked when the model
  classifies it correctly, so the two sets differ a little);
- B_{p,k} of each protected pair for both models with its interval, scored on the same sentences
  (:func:`~textaudit.fairness.bias.run_bias` with ``compare``);
- for a hardening that trained for a certificate (``masked``, ``substitute``): the smoothed classifier's accuracy
  and certified accuracy at every radius of both models, each with its Wilson interval, under the threat model
  the training targeted (:func:`certificate_before_after`: the records ``audit certify`` writes, seeded alike).

What it writes is read back, checked, and turned into tables by :mod:`textaudit.formats.harden`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from textaudit.attacks.compare import compare_cells
from textaudit.attacks.registry import method_spec
from textaudit.attacks.run import run_attack
from textaudit.fairness import CounterfactualBias, run_bias
from textaudit.fairness.estimates import MIN_CLAIM_SOURCES
from textaudit.harden.weaknesses import build_attack
from textaudit.lexicons import counterfitted_neighbors
from textaudit.robustness.smoothing import SAFER, PerturbationSets, RanMASK, run_certify
from textaudit.stats import mcnemar, wilson

__all__ = ["accuracy_before_after", "attack_before_after", "bias_before_after", "attack_file", "certificate_before_after"]

def _rate(successes: int, n: int) -> dict:
    return {"n": n, "rate": round(successes / n, 4) if n else None, "ci95": list(wilson(successes, n) or ()) or None}


def accuracy_before_after(before, after, texts: Sequence, labels: Sequence[int]) -> dict:
    """Clean accuracy of both models on ``texts`` with Wilson intervals, and McNemar's exact test."""
    y = np.asarray(labels)
    ok_b, ok_a = before.predict(list(texts)) == y, after.predict(list(texts)) == y
    return {"before": _rate(int(ok_b.sum()), len(y)), "after": _rate(int(ok_a.sum()), len(y)),
            "mcnemar": mcnemar(ok_b.tolist(), ok_a.tolist())}


def attack_file(out: Path, role: str, method: str, k: int | None) -> Path:
    """The results file of one evaluation attack on one model (``before`` or ``after``)."""
    return Path(out) / f"{role}.{method.replace(':', '_')}{'' if k is None else f'-k{k}'}.jsonl"


def attack_before_after(before, after, method: str, k: int | None, texts: Sequence[str], labels: Sequence[int],
                        ids: Sequence[str], *, mlm, out: Path, seed: int, data: str, max_queries: int | None = None,
                        in_flight: int | None = None, progress: bool = True,
                        pairs: Sequence[tuple[str, str]] | None = None, naturalness: bool = True) -> dict:
    """Run ``method`` on both models (resumable files in ``out``) and return both summaries and the
    paired test: ``{"method", "k", "before", "after", "mcnemar", "files"}``. ``pairs``: the
    second-order attacks' p is one of them."""
    spec = method_spec(method)
    cells, summaries, files = {}, {}, []
    for role, clf in (("before", before), ("after", after)):
        path = attack_file(out, role, method, k if "k" in spec.options else None)
        atk = build_attack(method, clf, k=k, mlm=mlm, seed=seed, max_queries=max_queries, pairs=pairs,
                           naturalness=naturalness)
        if hasattr(atk, "rank_patch_words"):
            atk.rank_patch_words(texts)
        s, records = run_attack(atk, list(texts), list(labels), ids=list(ids), output=path, resume=path.exists(),
                                config={"data": data, "role": f"harden: {role}"}, progress=progress, in_flight=in_flight)
        cells[(role, method)] = records
        summaries[role] = {"attacked": s["attacked"], "success": s["success"], "success_rate": s["success_rate"],
                           "ci95": s["success_rate_ci95"], "mean_l0": s["mean_l0"],
                           "sec_per_example": s["sec_per_example"], "queries_per_example": s["queries_per_example"],
                           "seconds": round(sum(float(r.get("seconds") or 0) for r in records), 1)}
        files.append(path.name)
    paired = compare_cells(cells)["paired"]
    test = paired[0] if paired else {"n": 0, "only_a": 0, "only_b": 0, "p": None}
    return {"method": method, "k": k if "k" in spec.options else None, **summaries,
            "mcnemar": {"n": test["n"], "only_before": test["only_a"], "only_after": test["only_b"], "p": test["p"]},
            "files": files}


def bias_before_after(before, after, pairs: Sequence[tuple[str, str]], texts: Sequence[str], ids: Sequence[str], *,
                      mlm, k: int, out: Path, seed: int, data: str, blacklists=None,
                      in_flight: int | None = None, progress: bool = True) -> list[dict]:
    """B_{p,k} of both models on the same sentences (one resumable file), one row per pair:
    ``{"pair", "k", "before": {"B", "ci95", "n"}, "after": {...}, "interval_excludes_before"}``."""
    est_after = CounterfactualBias(after, mlm, blacklists=blacklists, seed=seed)
    est_before = CounterfactualBias(before, mlm, blacklists=blacklists, seed=seed)
    results = run_bias(est_after, pairs, k, list(texts), ids=list(ids), compare=est_before, output=out,
                       resume=Path(out).exists(), config={"data": data, "role": "harden: before/after"},
                       progress=progress, in_flight=in_flight)
    rows = []
    for p in pairs:
        b = results.get(before.name, {}).get(tuple(p), {}).get(k)
        a = results.get(after.name, {}).get(tuple(p), {}).get(k)
        if a is None or b is None:
            continue
        keep = ("B", "ci95", "n", "sources", "ci_method")
        lo, hi = a.ci95
        rows.append({"pair": list(p), "k": k, "before": {x: v for x, v in b.to_dict().items() if x in keep},
                     "after": {x: v for x, v in a.to_dict().items() if x in keep},
                     "abs_B_lower": abs(a.B) < abs(b.B),
                     # a claim as audit bias makes one: an interval (two sources or more) on enough sources
                     "interval_excludes_before": bool(a.sources >= MIN_CLAIM_SOURCES and np.isfinite([lo, hi]).all()
                                                      and not (lo <= b.B <= hi))})
    return rows


def certificate_before_after(before, after, threat: dict, texts: Sequence[str], labels: Sequence[int],
                             ids: Sequence[str], *, out: Path, seed: int, samples: int = 1000, selection: int = 100,
                             alpha: float = 0.05, in_flight: int | None = None, progress: bool = True,
                             builder=None, neighbors_k: int = 1, neighbors: int = 8, patches: int = 4) -> dict:
    """Both models certified under ``threat`` (``{"method": "ranmask", "mask_rate", "mask_token"}`` or ``{"method":
    "safer", "hops"}``) on the held-out examples: the records ``audit certify`` writes (``before.certify.jsonl``,
    ``after.certify.jsonl``, resumable), and ``{"method", "threat", "before", "after", "files"}`` — each side the
    smoothed accuracy, abstentions and certified accuracy per radius with Wilson intervals (its summary). With a
    ``builder`` (the masked LM's neighbourhoods) each side also gets ``audit certify --neighbors``'s second-order
    view: of its certified inputs, the share with a natural neighbour that is not certified or flips under a
    synonym patch."""
    ranmask = threat["method"] == "ranmask"
    sides, files = {}, []
    for role, clf in (("before", before), ("after", after)):
        path = Path(out) / f"{role}.certify.jsonl"
        # RanMASK draws no synonyms: its sets serve only the second-order view's patches (as audit certify's)
        sets = PerturbationSets({} if ranmask and builder is None else counterfitted_neighbors(),
                                hops=int(threat.get("hops", 2)))
        kind = RanMASK if ranmask else SAFER
        smoother = kind(clf, sets, samples=samples, selection=selection, alpha=alpha, seed=seed, builder=builder,
                        neighbors_k=neighbors_k if builder is not None else 0, neighbors=neighbors, patches=patches,
                        **({"rate": threat["mask_rate"], "mask_token": threat["mask_token"]} if ranmask else {}))
        summary, _ = run_certify(smoother, list(texts), list(labels), list(ids), output=path, resume=path.exists(),
                                 progress=progress, in_flight=in_flight,
                                 config={"synonyms": None if ranmask and builder is None else "counterfitted-neighbors",
                                         "synonyms_digest": None})
        sides[role] = summary
        files.append(path.name)
    return {"method": threat["method"], "threat": threat, "before": sides["before"], "after": sides["after"],
            "files": files}
