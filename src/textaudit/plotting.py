"""matplotlib, set up once for every plot textaudit draws (files only, no display), and the one way a figure is
saved: atomically, with textaudit's mark in its metadata, and never over a file textaudit did not make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textaudit.files import FIGURE_MARK, atomic_path

__all__ = ["pyplot", "save_figure"]

#: the metadata key each format keeps the mark in
_MARK_KEY = {".png": "Software", ".pdf": "Creator", ".svg": "Creator"}


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    """Save ``fig`` to ``path`` (its format from its suffix) with :data:`textaudit.files.FIGURE_MARK` in its
    metadata, replacing only a figure textaudit drew (:func:`textaudit.files.check_replaceable`), and close it."""
    path = Path(path)
    key = _MARK_KEY.get(path.suffix.lower())
    with atomic_path(path, suffix=path.suffix) as tmp:
        fig.savefig(tmp, dpi=dpi, metadata={key: FIGURE_MARK.decode()} if key else None)
    pyplot().close(fig)
    return path


def pyplot():
    """Return matplotlib's pyplot on the non-interactive Agg backend (imported only when a plot is
    drawn, so the CLI starts without matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
