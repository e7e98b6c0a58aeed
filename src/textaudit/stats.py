"""Rank correlations as textaudit reports them: scipy's, rounded, and honest when undefined.

A correlation over a constant series (every model at chance on a tiny sample, say) is undefined:
scipy then warns and returns NaN. Here it comes back as ``None`` with a note saying why, with no
raw warning; p-values keep three significant digits, coefficients four decimals.
"""

from __future__ import annotations

import math
import warnings
from typing import Sequence

__all__ = ["rank_correlation", "round_p"]

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
