"""Word lists shared by several audits, read once through the resource layer."""

from __future__ import annotations

import json
from functools import lru_cache

from textaudit.resources import resolve

__all__ = ["counterfitted_neighbors"]


@lru_cache(maxsize=1)
def counterfitted_neighbors() -> dict[str, list[str]]:
    """The counter-fitted synonym lists (resource ``counterfitted-neighbors``): {word: [neighbours,
    nearest first]} — the substitution set of the paper's patch words and of the Genetic attack."""
    return json.loads(resolve("counterfitted-neighbors").read_text())
