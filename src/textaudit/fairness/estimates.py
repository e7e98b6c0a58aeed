"""B_{p,k} from scored neighbourhoods: the pooled mean over source sentences and its 95% interval.

B_{p,k} = Σ_s S_s / Σ_s n_s over the m source sentences s of X_p (S_s: the sum of F_soft over the
neighbourhood of s at distance ≤ k, n_s its size; a sampled level weights the mean of its draws by
the estimated |Neighbor_k(s)|). The interval is a CLT for a ratio estimator clustered by source
sentence, Var(B) ≈ m/(m−1) · Σ_s (S_s − B·n_s)² / (Σ_s n_s)², because the sentences of one
neighbourhood are strongly correlated. ``ci="bootstrap"`` replaces it by a percentile cluster bootstrap over the
source sentences (:func:`textaudit.stats.cluster_bootstrap`), better when X_p has few sentences and the CLT is
doubtful.

The sources are the independent units: with m = 1 there is **no interval** (a neighbourhood's sentences are not
independent draws, so an i.i.d. interval over them is as narrow as it is wrong), and a *claim* — "the 95% interval
excludes 0" read as an effect — is made only from at least :data:`MIN_CLAIM_SOURCES` sources
(:attr:`BiasEstimate.significant`); :func:`claim_status` says which case an estimate is in, in the words every
output (table, ``--json``, report, suite gates) uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from textaudit.fairness.pairs import Source
from textaudit.stats import cluster_bootstrap

__all__ = ["clustered_mean", "BiasEstimate", "ScoredUnit", "aggregate", "l1_norm", "CI_METHODS", "MIN_CLAIM_SOURCES",
           "claim_status"]

#: how B_{p,k}'s 95% interval is computed (``audit bias --ci``)
CI_METHODS = ("clustered", "bootstrap")

#: the fewest source sentences (clusters) B_{p,k}'s interval may rest on for "excludes 0" to count as a claim: below
#: it a clustered CLT or bootstrap over a handful of sentences is far from its nominal 95% (and at m = 1 there is none)
MIN_CLAIM_SOURCES = 10

#: the method an estimate from one source sentence carries: it has no interval
NO_INTERVAL = "none: one source sentence (an interval needs at least two)"


def clustered_mean(sums: Sequence[np.ndarray], sizes: Sequence[float]) -> tuple[np.ndarray, np.ndarray, str]:
    """Return ``(B, half_width_95, method)`` of the pooled mean Σ S_s / Σ n_s (see the module docstring); with one
    source (m = 1) the half-width is NaN: no interval."""
    S = np.asarray(sums, dtype=float)
    n = np.asarray(sizes, dtype=float)
    m = len(n)
    total = n.sum()
    B = S.sum(0) / total
    if m >= 2:
        resid = S - B[None] * n[:, None] if S.ndim == 2 else S - B * n
        var = m / (m - 1) * (resid ** 2).sum(0) / total ** 2
        return B, 1.96 * np.sqrt(var), "clustered CLT over source sentences"
    return B, np.full_like(np.atleast_1d(B), np.nan, dtype=float).reshape(np.shape(B)), NO_INTERVAL


@dataclass
class BiasEstimate:
    """B_{p,k} with its 95% CI, the number of scored sentences ``n`` and of source sentences."""

    pair: tuple[str, str]
    k: int
    B: float
    ci95: tuple[float, float]
    n: float
    sources: int
    ci_method: str
    sampled: bool = False
    per_class: list[float] | None = None  # C > 2: the per-class mean of F_soft (``B`` is its L1 norm)
    size: float = 0.0  # |Neighbor_k(X_p)| as a multiset: exact when enumerated, estimated when sampled
    values: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    #: (bin edges, counts) of ``values`` when the estimate was read back without them (:meth:`from_dict`)
    histogram: tuple[list[float], list[int]] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, pair: tuple[str, str], k: int, d: dict,
                  histogram: tuple[list[float], list[int]] | None = None) -> "BiasEstimate":
        """The estimate :meth:`to_dict` wrote (its values are not there: ``histogram``, when kept, stands in for them
        in a plot)."""
        f = lambda v: math.nan if v is None else float(v)  # noqa: E731  (to_dict writes a NaN as null)
        return cls(tuple(pair), int(k), f(d["B"]), (f(d["ci95"][0]), f(d["ci95"][1])), float(d["n"]),
                   int(d["sources"]), d["ci_method"], bool(d.get("sampled", False)), d.get("per_class"),
                   float(d.get("neighborhood_size", 0)), histogram=histogram)

    def to_dict(self) -> dict:
        d = {"B": _r(self.B), "ci95": [_r(self.ci95[0]), _r(self.ci95[1])], "n": int(round(self.n)),
             "sources": self.sources, "ci_method": self.ci_method, "sampled": self.sampled,
             "neighborhood_size": int(round(self.size)), "excludes_0": self.excludes_zero,
             "significant": self.significant}
        if self.sources < MIN_CLAIM_SOURCES:
            d["claim"] = claim_status(self)
        if self.per_class is not None:
            d["per_class"] = [_r(v) for v in self.per_class]
        return d

    @property
    def excludes_zero(self) -> bool:
        """True when the 95% CI exists and excludes 0 (on any number of sources: see :attr:`significant`)."""
        lo, hi = self.ci95
        return bool(lo > 0 or hi < 0)  # NaN ends (no interval): False

    @property
    def significant(self) -> bool:
        """The claim: the 95% CI excludes 0 *and* rests on at least :data:`MIN_CLAIM_SOURCES` source sentences."""
        return self.excludes_zero and self.sources >= MIN_CLAIM_SOURCES


def claim_status(e: BiasEstimate) -> str:
    """What the "CI excludes 0" cell says: ``yes`` / ``no``, or why no claim is made (one source: no interval;
    fewer than :data:`MIN_CLAIM_SOURCES`: an interval, but no claim)."""
    if e.sources < 2:
        return "no interval (1 source)"
    if e.sources < MIN_CLAIM_SOURCES:
        return f"no claim ({e.sources} sources < {MIN_CLAIM_SOURCES})"
    return "yes" if e.excludes_zero else "no"


def _r(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else round(float(v), 6)


@dataclass
class ScoredUnit:
    """The scored sentences of one source at one neighbourhood level (or one sampled k)."""

    source: Source
    k: int | None  # None: the enumerated block (distances 0..enumerate_k); else the sampled k
    texts: list[str]
    distance: np.ndarray
    F: np.ndarray  # (n,) for two classes, (n, C) otherwise
    weight: float | None = None  # sampled: estimated |Neighbor_k(x)|



def l1_norm(F: np.ndarray) -> np.ndarray:
    """|F| per sentence: F itself for two classes, the L1 norm of the per-class vector otherwise."""
    return F if F.ndim == 1 else np.abs(F).sum(1)


def aggregate(units: Sequence[ScoredUnit], pair: tuple[str, str], k: int, enumerate_k: int,
              ci: str = "clustered") -> dict[int, BiasEstimate]:
    """Pool scored units into {k′: BiasEstimate} for k′ = 0..k (see the module docstring); ``ci``:
    one of :data:`CI_METHODS`."""
    out: dict[int, BiasEstimate] = {}
    for kk in range(k + 1):
        sums, sizes, vals = [], [], []
        sampled = kk > enumerate_k
        for u in units:
            if sampled:
                if u.k != kk or not len(u.F):
                    continue
                w = u.weight if u.weight is not None and math.isfinite(u.weight) else len(u.F)
                sums.append(u.F.mean(0) * w)
                sizes.append(w)
                vals.append(u.F)
            else:
                if u.k is not None:
                    continue
                sel = u.F[u.distance <= kk]
                if not len(sel):
                    continue
                sums.append(sel.sum(0))
                sizes.append(len(sel))
                vals.append(sel)
        if not sizes:
            continue
        B, half, method = clustered_mean(sums, sizes)
        n = float(sum(len(v) for v in vals))
        if ci == "bootstrap" and len(sizes) >= 2:
            boot = "cluster bootstrap over source sentences (percentile)"
            if np.ndim(B) == 0:
                est = BiasEstimate(pair, kk, float(B), cluster_bootstrap(sums, sizes, seed=kk), n, len(sizes), boot,
                                   sampled)
            else:
                est = BiasEstimate(pair, kk, float(np.abs(B).sum()),
                                   cluster_bootstrap(sums, sizes, statistic=lambda m: np.abs(m).sum(-1), seed=kk),
                                   n, len(sizes), boot + " of the L1 norm", sampled, per_class=B.tolist())
        elif np.ndim(B) == 0:
            est = BiasEstimate(pair, kk, float(B), (float(B - half), float(B + half)), n, len(sizes), method, sampled)
        else:
            # C > 2: B is the L1 norm of the per-class mean; its CI from the per-class half-widths
            l1 = float(np.abs(B).sum())
            lo = float(np.clip(np.abs(B) - half, 0, None).sum())
            est = BiasEstimate(pair, kk, l1, (lo, float((np.abs(B) + half).sum())), n, len(sizes),
                               method + "; L1 bounds from per-class intervals", sampled, per_class=B.tolist())
        est.values = np.concatenate([l1_norm(v) if v.ndim > 1 else v for v in vals])
        est.size = float(sum(sizes))
        out[kk] = est
    return out
