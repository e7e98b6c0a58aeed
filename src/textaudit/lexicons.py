"""Word lists and word-pair files shared by several audits (the counter-fitted neighbours, read once through the
resource layer; a file of pairs p = (w1, w2), the protected pairs of bias and the synonym pairs of the patch words)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from textaudit.errors import TextAuditError
from textaudit.files import loads_json
from textaudit.resources import read_json

__all__ = ["counterfitted_neighbors", "parse_pair", "load_pairs_file"]


@lru_cache(maxsize=1)
def counterfitted_neighbors() -> dict[str, list[str]]:
    """The counter-fitted synonym lists (resource ``counterfitted-neighbors``): {word: [neighbours,
    nearest first]} — the substitution set of the paper's patch words and of the Genetic attack."""
    return read_json("counterfitted-neighbors", lambda d: isinstance(d, dict) and all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(w, str) for w in v) for k, v in d.items()),
        "a JSON object {word: [neighbours]}")  # type: ignore[return-value]


def parse_pair(text: str) -> tuple[str, str]:
    """Parse ``"he,she"`` (or ``he/she``, ``he she``) into a lowercased pair."""
    parts = [p for p in text.replace("/", ",").replace(" ", ",").split(",") if p]
    if len(parts) != 2 or not all(p.isalpha() for p in parts):
        raise TextAuditError(f"'{text}' is not a word pair; write it as two alphabetic words, e.g. --pair he,she")
    a, b = (p.lower() for p in parts)
    if a == b:
        raise TextAuditError(f"the pair '{text}' uses the same word twice; give two different words")
    return a, b


def load_pairs_file(path: str) -> list[tuple[str, str]]:
    """Read pairs from a file: one pair per line (``w1,w2``, ``w1 w2`` or tab-separated), or a JSON
    list of two-word lists; ``#`` starts a comment."""
    p = Path(path)
    if not p.is_file():
        raise TextAuditError(f"pairs file {path} not found")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TextAuditError(f"pairs file {path} is not UTF-8 text; write one pair per line, e.g. 'he,she'") from None
    if text.lstrip().startswith("["):
        try:
            items = loads_json(text)
        except json.JSONDecodeError as e:
            raise TextAuditError(f"{path} is not a JSON list of word pairs ({e})") from None
        if not isinstance(items, list) or not items or not all(
                isinstance(x, list) and len(x) == 2 and all(isinstance(w, str) for w in x) for x in items):
            raise TextAuditError(f"{path} is not a JSON list of word pairs: write [[\"he\", \"she\"], ...], two words "
                                 "each")
        return [parse_pair(",".join(x)) for x in items]
    pairs = [parse_pair(line.split("#")[0].replace("\t", ",").strip())
             for line in text.splitlines() if line.split("#")[0].strip()]
    if not pairs:
        raise TextAuditError(f"{path} holds no word pairs; write one pair per line, e.g. 'he,she'")
    return pairs
