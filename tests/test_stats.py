"""Intervals and paired tests against values computed by hand, and the cluster bootstrap of B_{p,k}."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_bias import TEXTS, planted

from textaudit.attacks.run import summarize
from textaudit.fairness import CounterfactualBias
from textaudit.stats import cluster_bootstrap, mcnemar, wilson


def _wilson_by_hand(x: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


@pytest.mark.parametrize("x,n", [(8, 10), (0, 10), (10, 10), (37, 100), (1, 3)])
def test_wilson_matches_the_formula(x, n):
    lo, hi = wilson(x, n)
    elo, ehi = _wilson_by_hand(x, n)
    assert lo == pytest.approx(elo, abs=6e-5) and hi == pytest.approx(ehi, abs=6e-5)
    assert 0 <= lo <= x / n <= hi <= 1
    assert wilson(0, 0) is None


def test_wilson_at_8_of_10_by_hand():
    # centre (0.8 + 1.9208/10) / 1.38415 = 0.71676; half 1.96·sqrt(0.016 + 0.009604) / 1.38415 = 0.22658
    assert wilson(8, 10) == (0.4902, 0.9433)


def test_mcnemar_exact_against_the_binomial_by_hand():
    a = [True] * 6 + [False] * 2 + [True] * 5 + [False] * 3
    b = [False] * 6 + [True] * 2 + [True] * 5 + [False] * 3
    r = mcnemar(a, b)
    # 6 vs 2 discordant pairs: p = 2 · P(X <= 2), X ~ Bin(8, 1/2) = 2 · (1 + 8 + 28) / 256
    assert (r["only_a"], r["only_b"], r["n"]) == (6, 2, 16)
    assert r["p"] == pytest.approx(2 * 37 / 256, rel=5e-3)  # p keeps three significant digits
    assert mcnemar([True, False], [True, False])["p"] == 1.0  # no discordant pair
    assert mcnemar([True] * 7, [False] * 7)["p"] == pytest.approx(2 / 128, rel=5e-3)  # p keeps three significant digits
    with pytest.raises(ValueError, match="equal lengths"):
        mcnemar([True], [True, False])


def test_cluster_bootstrap_of_a_ratio_covers_the_pooled_mean_and_is_seeded():
    rng = np.random.default_rng(0)
    sizes = rng.integers(5, 40, 30).astype(float)
    sums = sizes * rng.normal(0.2, 0.1, 30)
    pooled = sums.sum() / sizes.sum()
    lo, hi = cluster_bootstrap(sums, sizes)
    assert lo < pooled < hi and hi - lo < 0.15
    assert cluster_bootstrap(sums, sizes) == (lo, hi)  # fixed seed: the same interval
    with pytest.raises(ValueError, match="two clusters"):
        cluster_bootstrap([1.0], [2.0])


def test_bias_bootstrap_interval_contains_the_clustered_centre(tiny_mlm):
    clustered = CounterfactualBias(planted(1.0), tiny_mlm, kappa=5, delta=1e9).estimate_all("he,she", 2, TEXTS)
    boot = CounterfactualBias(planted(1.0), tiny_mlm, kappa=5, delta=1e9, ci="bootstrap").estimate_all("he,she", 2, TEXTS)
    for kk in clustered:
        c, b = clustered[kk], boot[kk]
        assert b.B == c.B and b.ci_method.startswith("cluster bootstrap")
        assert b.ci95[0] <= c.B <= b.ci95[1], (kk, b.ci95, c.B)
        assert b.ci95 != c.ci95
    with pytest.raises(Exception, match="unknown --ci"):
        CounterfactualBias(planted(1.0), tiny_mlm, ci="wald")


def test_attack_summary_reports_the_wilson_interval():
    records = [{"status": "success", "l0": 1, "seconds": 1.0, "queries": 10}] * 3 + \
              [{"status": "failed", "seconds": 1.0, "queries": 10}] * 7 + [{"status": "skipped"}]
    s = summarize(records, "so-beam", 6)
    assert s["success_rate"] == 0.3 and s["success_rate_ci95"] == list(wilson(3, 10))
