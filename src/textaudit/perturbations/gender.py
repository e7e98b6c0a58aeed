"""Male ↔ female word swaps (WinoBias pairs from resource ``gender-pairs`` plus pronouns).

Used by ``audit train --augment gender-swap`` (the "debiased" models of Double Perturbation
§4.2.1) and by the bias estimator's blacklist. ``her`` is ambiguous (him / his); it maps to
``his``, the more frequent reading in reviews. Swaps are made on lowercased word tokens.
"""

from __future__ import annotations

from functools import lru_cache

from textaudit.resources import read_json
from textaudit.text import word_tokenize

__all__ = ["gender_swap_map", "gender_words", "gender_swap"]

PRONOUNS = [("he", "she"), ("him", "her"), ("his", "her"), ("himself", "herself"), ("his", "hers")]


@lru_cache(maxsize=1)
def gender_swap_map() -> dict[str, str]:
    """Return the symmetric word → counterpart map (pairs from ``gender-pairs`` + pronouns)."""
    doc = read_json("gender-pairs", lambda d: isinstance(d, list) and all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(w, str) and w for w in p) for p in d),
        "a JSON list of [male, female] word pairs")
    pairs = [tuple(p) for p in doc]  # type: ignore[union-attr]
    mapping: dict[str, str] = {}
    for a, b in list(pairs) + PRONOUNS:
        a, b = a.lower(), b.lower()
        mapping.setdefault(a, b)
        mapping.setdefault(b, a)
    mapping["her"] = "his"
    return mapping


def gender_words() -> frozenset[str]:
    """Return every gendered word known to the swap map (for blacklists)."""
    m = gender_swap_map()
    return frozenset(m) | frozenset(m.values())


def gender_swap(text: str) -> str:
    """Return ``text`` (tokenised, lowercased) with every gendered word replaced by its counterpart."""
    m = gender_swap_map()
    return " ".join(m.get(t, t) for t in word_tokenize(text))
