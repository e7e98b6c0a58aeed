"""A non-inferiority table (``audit replay --margin``, ``audit compare --margin``), the same in the CLI and the report:
harm = the model's rate − the baseline's (higher is worse); non-inferior when the 90% interval's upper end < m,
equivalent when the interval lies within ±m (:func:`textaudit.stats.non_inferiority` computes it)."""

from __future__ import annotations

from typing import Sequence

from textaudit.stats import format_ci

__all__ = ["MARGIN_COLUMNS", "margin_title", "margin_rows", "margin_verdicts"]

#: the columns of a non-inferiority table
MARGIN_COLUMNS = ["model", "vs", "n", "rate vs", "rate model", "harm", "90% CI", "margin", "harmful", "beneficial",
                  "non-inferior", "equivalent"]


def margin_title(rate: str, tests: Sequence[tuple[str, str, dict]]) -> str:
    """The table's title for ``rate`` (higher is worse)."""
    return (f"non-inferiority of the {rate} at m = {tests[0][2]['margin']:g} (harm = how much worse the model is than "
            "vs; non-inferior when the 90% CI's upper end < m, equivalent when it lies within ±m)")


def margin_rows(tests: Sequence[tuple[str, str, dict]]) -> list[list]:
    """One row per ``(model, baseline, non_inferiority(...))``."""
    return [[m, b, t["n"], f"{t['rate_before']:.4f}", f"{t['rate_after']:.4f}", f"{t['harm']:+.4f}",
             format_ci(t["harm_ci"], 4, signed=True), t["margin"], t["harmful"], t["beneficial"],
             "yes" if t["non_inferior"] else "no", "yes" if t["equivalent"] else "no"] for m, b, t in tests]


def margin_verdicts(tests: Sequence[tuple[str, str, dict]]) -> list[str]:
    """Each verdict as a sentence."""
    return [f"{m} vs {b}: {t['verdict']} ({t['harmful']} harmful, {t['beneficial']} beneficial flips)"
            for m, b, t in tests]
