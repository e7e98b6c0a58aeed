"""The statistics textaudit reports, all from scipy: rank correlations, Wilson intervals on rates,
McNemar's exact test for paired comparisons, a cluster bootstrap for pooled means, the interval of a
paired difference of rates with its non-inferiority and equivalence verdicts, hit@k of sampled
answers, and calibration (ECE, Brier score) with paired bootstrap intervals.

A correlation over a constant series (every model at chance on a tiny sample, say) is undefined:
scipy then warns and returns NaN. Here it comes back as ``None`` with a note saying why, with no
raw warning; p-values keep three significant digits, coefficients four decimals.
"""

from __future__ import annotations

import math
import warnings
from typing import Callable, Sequence

import numpy as np

from textaudit.decision import decisions
from textaudit.errors import TextAuditError
from textaudit.request import range_words, within

__all__ = ["rank_correlation", "round_p", "wilson", "mcnemar", "cluster_bootstrap", "format_ci", "CONFIDENCE",
           "paired_difference", "non_inferiority", "check_margin", "hit_at_k", "hit_rates", "calibration", "paired_calibration",
           "rank_correlations_with_intervals"]

#: the confidence level of every interval textaudit reports
CONFIDENCE = 0.95

#: fewer points than this and a rank correlation means nothing
MIN_POINTS = 3


def round_p(p: float) -> float | None:
    """A p-value to three significant digits (None when undefined)."""
    return None if p is None or math.isnan(p) else float(f"{float(p):.3g}")


def format_p(p: float | None) -> str:
    """A p-value as a table shows it: three significant digits, in scientific notation below 1e-4 (never rounded
    to 0: McNemar's p of 1e-13 is not 0.0), ``–`` when undefined."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "–"
    p = float(p)
    return f"{p:.3g}" if p >= 1e-4 or p == 0 else f"{p:.2e}"


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


def rank_correlations_with_intervals(y: Sequence[float], xs: dict[str, Sequence[float]], *,
                                     contrast: tuple[str, str] | None = None, confidence: float = CONFIDENCE,
                                     n_resamples: int = 2000, seed: int = 0) -> dict:
    """Spearman ρ of ``y`` with each series in ``xs``, each with a percentile bootstrap interval over the points
    (resampled together), and for ``contrast = (a, b)`` the difference |ρ_a| − |ρ_b| with its interval from the
    same resamples (the claim "y follows a more than b" holds at the confidence level when that interval lies
    above 0).

    A resample whose column is constant has no ρ; it is left out of that interval (``scipy.stats.bootstrap``
    would turn the whole interval into NaN, which on a dozen points happens often), and ``undefined_resamples``
    counts them. Returns ``{name: {"rho", "p", "n", "ci95"}, ..., "contrast": {"a", "b", "difference", "ci95"}}``."""
    from scipy.stats import spearmanr

    names = list(xs)
    out: dict = {name: rank_correlation(y, xs[name]) for name in names}
    y_ = np.asarray(y, dtype=float)
    cols = [np.asarray(xs[name], dtype=float) for name in names]
    n = len(y_)
    if n < MIN_POINTS or any(out[name]["rho"] is None for name in names):
        return out
    rng = np.random.default_rng(seed)
    stats = np.full((n_resamples, len(names) + (contrast is not None)), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant resample: NaN, left out below
        for b in range(n_resamples):
            idx = rng.integers(0, n, n)
            rhos = [spearmanr(y_[idx], c[idx]).statistic for c in cols]
            if contrast is not None:
                a, c2 = (rhos[names.index(k)] for k in contrast)
                rhos.append(abs(a) - abs(c2))
            stats[b] = rhos
    tail = (1 - confidence) / 2 * 100

    def interval(k: int) -> list[float]:
        col = stats[:, k][~np.isnan(stats[:, k])]
        return [round(float(np.percentile(col, tail)), 4), round(float(np.percentile(col, 100 - tail)), 4)]

    for k, name in enumerate(names):
        out[name]["ci95"] = interval(k)
        out[name]["undefined_resamples"] = int(np.isnan(stats[:, k]).sum())
    if contrast is not None:
        a, b = contrast
        out["contrast"] = {"a": a, "b": b, "difference": round(abs(out[a]["rho"]) - abs(out[b]["rho"]), 4),
                           "ci95": interval(len(names))}
    return out


def wilson(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The Wilson score interval of the rate ``successes / n`` (None when n = 0).

    Unlike the normal ("Wald") interval it stays inside [0, 1] and keeps its coverage near 0 and 1,
    where attack success rates and certified accuracies often sit."""
    from scipy.stats import binomtest

    if n <= 0:
        return None
    ci = binomtest(int(successes), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return round(float(ci.low), 4), round(float(ci.high), 4)


def format_ci(ci: Sequence[float] | None, digits: int = 4, signed: bool = False) -> str:
    """A 95% interval as ``[lo, hi]`` for a table ("–" when there is none, or an end is missing or not finite);
    ``signed``: each end with its sign (an effect's interval: ``[-0.0120, +0.0340]``)."""
    if not ci or any(v is None or not math.isfinite(v) for v in ci):
        return "–"
    sign = "+" if signed else ""
    return f"[{ci[0]:{sign}.{digits}f}, {ci[1]:{sign}.{digits}f}]"


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


def paired_difference(a: Sequence[bool], b: Sequence[bool], confidence: float = CONFIDENCE) -> dict:
    """The difference of two paired rates Δ = rate(b) − rate(a) with Newcombe's interval (Newcombe 1998,
    "Improved confidence intervals for the difference between binomial proportions based on paired
    data", method 10): the Wilson intervals (l₁, u₁) of rate(a) = p₁ and (l₂, u₂) of rate(b) = p₂ are
    combined with the phi coefficient φ of the paired 2×2 table (its numerator A = n₁₁n₀₀ − n₁₀n₀₁
    taken as A − n/2 when A > n/2 and as 0 when 0 ≤ A ≤ n/2, as Newcombe does),

        L = Δ − √((p₂ − l₂)² − 2φ (p₂ − l₂)(u₁ − p₁) + (u₁ − p₁)²)
        U = Δ + √((u₂ − p₂)² − 2φ (u₂ − p₂)(p₁ − l₁) + (p₁ − l₁)²)

    (φ = 0 when a margin of the table is empty). Unlike the Wald interval it stays inside [−1, 1] and
    keeps its coverage when the discordant pairs are few, as they are between two close models.
    Returns ``{"n", "rate_a", "rate_b", "difference", "ci", "confidence", "only_a", "only_b"}``."""
    from scipy.stats import norm

    if len(a) != len(b):
        raise ValueError(f"paired outcomes need equal lengths ({len(a)} vs {len(b)})")
    n = len(a)
    if n == 0:
        raise ValueError("a paired difference needs at least one pair")
    n11 = sum(1 for x, y in zip(a, b) if x and y)
    n10 = sum(1 for x, y in zip(a, b) if x and not y)
    n01 = sum(1 for x, y in zip(a, b) if y and not x)
    n00 = n - n11 - n10 - n01
    p1, p2 = (n11 + n10) / n, (n11 + n01) / n
    z = float(norm.ppf(0.5 + confidence / 2))
    (l1, u1), (l2, u2) = _wilson_exact(n11 + n10, n, z), _wilson_exact(n11 + n01, n, z)
    margins = (n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)
    A = n11 * n00 - n10 * n01  # Newcombe's φ: A − n/2 when A > n/2, 0 when 0 <= A <= n/2, A when A < 0
    phi = ((A - n / 2) if A > n / 2 else 0.0 if A >= 0 else A) / math.sqrt(margins) if margins else 0.0
    d = p2 - p1
    lo = d - math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    hi = d + math.sqrt(max(0.0, (u2 - p2) ** 2 - 2 * phi * (u2 - p2) * (p1 - l1) + (p1 - l1) ** 2))
    return {"n": n, "rate_a": round(p1, 6), "rate_b": round(p2, 6), "difference": round(d, 6),
            "ci": [round(max(-1.0, lo), 6), round(min(1.0, hi), 6)], "confidence": confidence,
            "only_a": n10, "only_b": n01}


def _wilson_exact(x: int, n: int, z: float) -> tuple[float, float]:
    """The Wilson score interval of x / n at the normal quantile z, unrounded (Newcombe's building block)."""
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def check_margin(margin: float | None, paired: bool, what: str = "--baseline") -> None:
    """A non-inferiority margin is a share in (0, 1) and needs something to compare with: one line."""
    if margin is None:
        return
    if not within("margin", margin):
        raise TextAuditError(f"--margin must be {range_words('margin')}: a share, e.g. 0.02 for 2 points (got {margin!r})")
    if not paired:
        raise TextAuditError(f"--margin needs {what}: non-inferiority compares the model with a baseline")


def non_inferiority(before: Sequence[bool], after: Sequence[bool], margin: float, *, higher_is_worse: bool = True,
                    alpha: float = 0.05) -> dict:
    """Is ``after`` no worse than ``before`` by more than ``margin`` (a share: 0.02 is 2 points)?

    ``before``/``after``: paired per-example outcomes (the baseline's and the new model's), each True
    for the event counted by the rate — a bad event (an attack's success, a finding still holding)
    with ``higher_is_worse``, a good one (a right answer) otherwise. The harm h = the new rate minus
    the old for a bad event (the old minus the new for a good one) gets Newcombe's paired interval
    (:func:`paired_difference`) at level 1 − 2α. Non-inferior at m: its upper end is below m, which is
    the one-sided test of H0: h ≥ m at level α. Equivalent at m: the whole interval lies inside
    (−m, m), the two one-sided tests (TOST, Schuirmann 1987) at level α each. Beside the verdicts,
    the flips: ``harmful`` (examples that became worse) and ``beneficial`` (that became better)."""
    if not within("margin", margin):
        raise ValueError(f"the margin must be {range_words('margin')} (got {margin})")
    diff = paired_difference(before, after, 1 - 2 * alpha)
    sign = 1 if higher_is_worse else -1
    lo, hi = sorted((sign * diff["ci"][0], sign * diff["ci"][1]))
    harm = sign * diff["difference"]
    harmful, beneficial = (diff["only_b"], diff["only_a"]) if higher_is_worse else (diff["only_a"], diff["only_b"])
    non_inferior, equivalent = hi < margin, lo > -margin and hi < margin
    points = f"{margin * 100:g} point{'s' if margin * 100 != 1 else ''}"
    verdict = (f"non-inferior at m = {points}" if non_inferior else f"not shown non-inferior at m = {points}")
    verdict += "; equivalent" if equivalent else "; not shown equivalent"
    return {"n": diff["n"], "margin": margin, "alpha": alpha, "rate_before": diff["rate_a"], "rate_after": diff["rate_b"],
            "harm": round(harm, 6), "harm_ci": [round(lo, 6), round(hi, 6)], "confidence": round(1 - 2 * alpha, 6),
            "non_inferior": bool(non_inferior), "equivalent": bool(equivalent), "harmful": harmful,
            "beneficial": beneficial, "higher_is_worse": higher_is_worse, "verdict": verdict,
            "method": "Newcombe paired interval (method 10) at 1 − 2α; one-sided test / TOST"}


def hit_at_k(draws: int, flips: int, k: int) -> float:
    """hit@k of one finding: the chance that at least one of k answers drawn (without replacement)
    from its ``draws`` answers flips, when ``flips`` of them did — 1 − C(n − f, k) / C(n, k), the
    unbiased estimator of 1 − (1 − q)^k for a flip probability q (Chen et al. 2021's pass@k)."""
    if not 0 < k <= draws or not 0 <= flips <= draws:
        raise ValueError(f"hit@k needs 0 < k <= draws and 0 <= flips <= draws (k={k}, draws={draws}, flips={flips})")
    return 1.0 - math.comb(draws - flips, k) / math.comb(draws, k)


def hit_rates(flips: Sequence[int], draws: int, ks: Sequence[int] | None = None, *, confidence: float = CONFIDENCE,
              seed: int = 0) -> dict:
    """The mean flip rate and mean hit@k (k = 1..draws, or ``ks``) over findings that each had
    ``draws`` sampled answers of which ``flips[i]`` flipped, each with an interval: a percentile
    bootstrap over the findings (``scipy.stats.bootstrap``, seeded) for two findings or more; for
    one, Wilson's interval of its flip rate q, mapped through 1 − (1 − q)^k."""
    from scipy.stats import bootstrap

    f = np.asarray(flips, dtype=int)
    if not len(f):
        return {"findings": 0, "draws": draws}
    ks = list(ks) if ks is not None else list(range(1, draws + 1))
    rows = np.array([[hit_at_k(draws, int(x), k) for k in ks] for x in f])  # (findings, ks)
    rates = f / draws
    if len(f) >= 2 and (rows.std(0).max() > 0 or rates.std() > 0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = bootstrap((np.column_stack([rates, rows]),), lambda x, axis: x.mean(axis), vectorized=True,
                            n_resamples=9999, confidence_level=confidence, method="percentile",
                            rng=np.random.default_rng(seed))
        lo, hi = np.atleast_1d(res.confidence_interval.low), np.atleast_1d(res.confidence_interval.high)
        how = "percentile bootstrap over the findings"
    else:
        w = wilson(int(f.sum()), draws * len(f), confidence)
        qlo, qhi = w if w else (0.0, 1.0)
        lo = np.array([qlo] + [1 - (1 - qlo) ** k for k in ks])
        hi = np.array([qhi] + [1 - (1 - qhi) ** k for k in ks])
        how = "Wilson interval of the flip rate, mapped through 1 − (1 − q)^k"
    mean = np.concatenate([[rates.mean()], rows.mean(0)])
    return {"findings": int(len(f)), "draws": draws, "flip_rate": round(float(mean[0]), 4),
            "flip_rate_ci95": [round(float(lo[0]), 4), round(float(hi[0]), 4)],
            "hit_at_k": {str(k): round(float(mean[i + 1]), 4) for i, k in enumerate(ks)},
            "hit_at_k_ci95": {str(k): [round(float(lo[i + 1]), 4), round(float(hi[i + 1]), 4)] for i, k in enumerate(ks)},
            "ci_method": how}


def _calibration_arrays(probs: np.ndarray, labels: np.ndarray, bins: int) -> dict[str, np.ndarray]:
    """Per example: top-label confidence, correctness, squared error Σ_c (p_c − 1[y = c])², its bin."""
    conf = probs.max(1)
    right = (decisions(probs) == labels).astype(float)  # a tie is no decision: not right
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(labels)), labels] = 1.0
    sq = ((probs - onehot) ** 2).sum(1)
    b = np.clip(np.ceil(conf * bins).astype(int) - 1, 0, bins - 1)  # bin i holds (i/B, (i+1)/B]
    return {"conf": conf, "right": right, "sq": sq, "bin": b}


def _ece(conf: np.ndarray, right: np.ndarray, b: np.ndarray, bins: int) -> np.ndarray:
    """ECE = Σ_i |B_i|/n · |acc(B_i) − conf(B_i)|, vectorised over leading axes (bootstrap resamples)."""
    n = conf.shape[-1]
    total = np.zeros(conf.shape[:-1])
    for i in range(bins):
        m = b == i
        cnt = m.sum(-1)
        gap = np.abs((right * m).sum(-1) - (conf * m).sum(-1))  # = cnt · |acc − conf|
        total = total + np.where(cnt > 0, gap, 0.0)
    return total / n


def calibration(probs: Sequence[Sequence[float]], labels: Sequence[int], bins: int = 10) -> dict:
    """Calibration of class probabilities against labels: the expected calibration error ECE over
    ``bins`` equal-width bins of the top-label confidence (Guo et al. 2017), the Brier score
    (1/n) Σ_x Σ_c (p_c(x) − 1[y = c])² (Brier 1950), the mean confidence and the accuracy, and the
    reliability diagram's bins (``{"low", "high", "n", "confidence", "accuracy"}``)."""
    P, y = np.asarray(probs, dtype=float), np.asarray(labels, dtype=int)
    if P.ndim != 2 or len(P) != len(y) or not len(y):
        raise ValueError("calibration needs one probability row per label")
    if bins < 1:
        raise ValueError(f"bins must be >= 1 (got {bins})")
    a = _calibration_arrays(P, y, bins)
    rows = []
    for i in range(bins):
        m = a["bin"] == i
        rows.append({"low": round(i / bins, 6), "high": round((i + 1) / bins, 6), "n": int(m.sum()),
                     "confidence": round(float(a["conf"][m].mean()), 6) if m.any() else None,
                     "accuracy": round(float(a["right"][m].mean()), 6) if m.any() else None})
    return {"n": len(y), "bins": bins, "ece": round(float(_ece(a["conf"], a["right"], a["bin"], bins)), 6),
            "brier": round(float(a["sq"].mean()), 6), "confidence": round(float(a["conf"].mean()), 6),
            "accuracy": round(float(a["right"].mean()), 6), "reliability": rows}


def paired_calibration(before: Sequence[Sequence[float]], after: Sequence[Sequence[float]], labels: Sequence[int],
                       bins: int = 10, *, confidence: float = CONFIDENCE, n_resamples: int = 2000, seed: int = 0) -> dict:
    """:func:`calibration` of the same examples' probabilities ``before`` (the originals) and ``after``
    (their perturbed versions, same labels), and for ECE, Brier score, mean confidence and accuracy the
    difference after − before, each with a percentile bootstrap interval that resamples the examples
    as pairs (both versions of an example together; seeded)."""
    P0, P1, y = np.asarray(before, dtype=float), np.asarray(after, dtype=float), np.asarray(labels, dtype=int)
    if P0.shape != P1.shape:
        raise ValueError(f"paired probabilities need equal shapes ({P0.shape} vs {P1.shape})")
    c0, c1 = calibration(P0, y, bins), calibration(P1, y, bins)
    a0, a1 = _calibration_arrays(P0, y, bins), _calibration_arrays(P1, y, bins)
    rng = np.random.default_rng(seed)
    keys = ("ece", "brier", "confidence", "accuracy")
    m0: dict[str, list] = {k: [] for k in keys}
    m1: dict[str, list] = {k: [] for k in keys}
    step = max(1, 2_000_000 // max(1, len(y)))  # resamples at once: memory bounded whatever n (the same draws)
    for start in range(0, n_resamples, step):
        idx = rng.integers(0, len(y), size=(min(step, n_resamples - start), len(y)))
        for a, m in ((a0, m0), (a1, m1)):
            conf, right = a["conf"][idx], a["right"][idx]
            for k, v in (("ece", _ece(conf, right, a["bin"][idx], bins)), ("brier", a["sq"][idx].mean(1)),
                         ("confidence", conf.mean(1)), ("accuracy", right.mean(1))):
                m[k].append(v)
    m0 = {k: np.concatenate(v) for k, v in m0.items()}  # type: ignore[misc]
    m1 = {k: np.concatenate(v) for k, v in m1.items()}  # type: ignore[misc]
    q = [(1 - confidence) / 2 * 100, (1 + confidence) / 2 * 100]

    def ci(v: np.ndarray) -> list[float]:
        lo, hi = np.percentile(v, q)
        return [round(float(lo), 6), round(float(hi), 6)]

    out: dict = {"n": len(y), "bins": bins, "original": c0, "perturbed": c1, "difference": {},
                 "ci_method": f"percentile bootstrap over examples, resampled in pairs ({n_resamples} resamples)"}
    for key in keys:
        c0[f"{key}_ci95"], c1[f"{key}_ci95"] = ci(m0[key]), ci(m1[key])
        out["difference"][key] = round(c1[key] - c0[key], 6)
        out["difference"][f"{key}_ci95"] = ci(m1[key] - m0[key])
    return out
