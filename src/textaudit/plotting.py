"""matplotlib, set up once for every plot textaudit draws (files only, no display)."""

from __future__ import annotations

__all__ = ["pyplot"]


def pyplot():
    """Return matplotlib's pyplot on the non-interactive Agg backend (imported only when a plot is
    drawn, so the CLI starts without matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
