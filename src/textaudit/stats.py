"""The statistics textaudit reports, all from scipy: rank correlations, Wilson intervals on rates,
McNemar's exact test for paired comparisons, and a cluster bootstrap for pooled means.

A correlation over a constant series (every model at chance on a tiny sample, say) is undefined:
scipy then warns and returns NaN. Here it comes back as ``None`` with a note saying why, with no
raw warning; p-values keep three significant digits, coefficients four decimals.
"""

from __future__ import annotations

import math
import warnings
from typing import Callable, Sequence

import numpy as np

__all__ = ["rank_correlation", "round_p", "wilson", "mcnemar", "cluster_bootstrap", "format_ci", "CONFIDENCE"]

#: the confidence level of every interval textaudit reports
CONFIDENCE = 0.95

#: fewer points than this and a rank correlation means nothing
MIN_POINTS = 3


def round_p(p: float) -> float | None:
    """A p-value to three significant digits (None when undefined)."""
    return None if p is None or math.isnan(p) else float(f"{float(p):.3g}")


def rank_correlation(x: Sequence[float], y: Sequence[float], method: str = "spearman") -> dict:
    """``{"rho", "p", "n"}`` (Spearman ρ, or Kendall τ with ``method="kendall"``) of ``x`` with ``y``;
    ``rho``/``p`` None plus a ``note`` when it is undefined (a constant series, or under 3 points)."""
    from scipy.stats import ConstantInputWarning, kendalltau, spearmanr

    n = len(x)
    if n < MIN_POINTS:
        return {"rho": None, "p": None, "n": n, "note": f"undefined: {n} points (need at least {MIN_POINTS})"}
    if len(set(x)) < 2 or len(set(y)) < 2:
        return {"rho": None, "p": None, "n": n, "note": "undefined: one of the series is constant (sample too small?)"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstantInputWarning)
        res = (kendalltau if method == "kendall" else spearmanr)(x, y)
    rho = float(res.statistic)
    return {"rho": None if math.isnan(rho) else round(rho, 4), "p": round_p(res.pvalue), "n": n}


def wilson(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The Wilson score interval of the rate ``successes / n`` (None when n = 0).

    Unlike the normal ("Wald") interval it stays inside [0, 1] and keeps its coverage near 0 and 1,
    where attack success rates and certified accuracies often sit."""
    from scipy.stats import binomtest

    if n <= 0:
        return None
    ci = binomtest(int(successes), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return round(float(ci.low), 4), round(float(ci.high), 4)


def format_ci(ci: Sequence[float] | None, digits: int = 4) -> str:
    """A 95% interval as ``[lo, hi]`` for a table ("–" when there is none)."""
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "–"


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> dict:
    """McNemar's exact test of two paired binary outcomes (two models, or two methods, on the same
    examples): only the discordant pairs count, ``only_a`` (a true, b false) and ``only_b``; under
    H0 each discordant pair goes either way with probability 1/2, so p is the two-sided binomial
    test of ``only_a`` out of ``only_a + only_b``. p = 1 when there is no discordant pair."""
    from scipy.stats import binomtest

    if len(a) != len(b):
        raise ValueError(f"paired outcomes need equal lengths ({len(a)} vs {len(b)})")
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    d = only_a + only_b
    p = binomtest(only_a, d, 0.5).pvalue if d else 1.0
    return {"n": len(a), "only_a": only_a, "only_b": only_b, "p": round_p(min(1.0, p))}


def cluster_bootstrap(sums: Sequence, sizes: Sequence[float], *, statistic: Callable[[np.ndarray], float] | None = None,
                      confidence: float = CONFIDENCE, n_resamples: int = 9999, seed: int = 0) -> tuple[float, float]:
    """A percentile bootstrap interval of the pooled mean Σ_s S_s / Σ_s n_s that resamples whole
    clusters s (source sentences with their neighbourhoods), with ``scipy.stats.bootstrap``.

    ``sums``: S_s per cluster (a number, or a per-class vector); ``sizes``: n_s. ``statistic`` maps
    the pooled mean to the reported number, vectorised over leading axes (default: itself; for
    per-class vectors it must reduce the last axis, e.g. the L1 norm ``lambda m: abs(m).sum(-1)``).
    Needs at least two clusters."""
    from scipy.stats import bootstrap

    S = np.asarray(sums, dtype=float)
    n = np.asarray(sizes, dtype=float)
    if len(n) < 2:
        raise ValueError("a cluster bootstrap needs at least two clusters")
    f = statistic or (lambda m: m)

    def pooled(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.asarray(idx, dtype=int)  # (..., m): the resampled clusters
        totals = n[idx].sum(-1)
        if S.ndim == 1:
            return f(S[idx].sum(-1) / totals)
        return f(S[idx].sum(-2) / totals[..., None])  # (..., C) per-class means; f reduces the last axis

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a degenerate resample (all clusters equal) warns; the interval stands
        res = bootstrap((np.arange(len(n)),), pooled, vectorized=True, n_resamples=n_resamples,
                        confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)
