"""A sentence as word tokens plus the exact whitespace around them, so edits round-trip.

``Sentence.parse("Hello, world!")`` → tokens ``("Hello", ",", "world", "!")``; ``.text()`` gives the
original string back, and ``.replace(i, w)`` changes one token keeping every space and every
other character. SST-style tokenised text ("it 's a film .") parses into its own tokens.
Splitting: on whitespace, then leading/trailing punctuation (not apostrophes or hyphens) is
peeled off each chunk, so clitics such as ``'s`` or ``n't`` and words like ``well-made`` stay whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from textaudit.errors import TextAuditError

__all__ = ["Sentence", "restore_case"]

_PUNCT = "\"()[]{}<>.,!?;:…“”«»/\\*|`~"
_CHUNK = re.compile(r"(\s*)(\S+)")


def restore_case(word: str, like: str) -> str:
    """Return ``word`` with the case pattern of ``like``: UPPER (two letters or more), Title, or as is.

    Only the first letter is raised for Title case; the rest of ``word`` is kept (``capitalize()``
    would lower-case it: "McDonald" stays "McDonald")."""
    if like.isupper() and len(like) > 1:
        return word.upper()
    if like[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


@dataclass(frozen=True)
class Sentence:
    """Word tokens and the separators before each of them (``seps[-1]`` is the trailing space)."""

    tokens: tuple[str, ...]
    seps: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> "Sentence":
        """Return the tokens of ``text`` with its whitespace preserved."""
        if not isinstance(text, str):
            raise TextAuditError(f"expected a sentence string, got {type(text).__name__}")
        tokens: list[str] = []
        seps: list[str] = []
        end = 0
        for m in _CHUNK.finditer(text):
            space, chunk = m.group(1), m.group(2)
            end = m.end()
            lead = len(chunk) - len(chunk.lstrip(_PUNCT))
            trail = len(chunk) - len(chunk.rstrip(_PUNCT))
            if lead == len(chunk):  # punctuation only: one token per character run
                parts = [chunk]
            else:
                core = chunk[lead: len(chunk) - trail if trail else None]
                parts = list(chunk[:lead]) + [core] + list(chunk[len(chunk) - trail:] if trail else [])
            for j, p in enumerate(parts):
                tokens.append(p)
                seps.append(space if j == 0 else "")
        seps.append(text[end:])
        return cls(tuple(tokens), tuple(seps))

    def text(self) -> str:
        """Return the sentence as a string (identical to the parsed text where nothing changed)."""
        return "".join(s + t for s, t in zip(self.seps, self.tokens)) + self.seps[-1]

    def replace(self, i: int, word: str) -> "Sentence":
        """Return a copy with token ``i`` replaced by ``word``."""
        return Sentence(self.tokens[:i] + (word,) + self.tokens[i + 1:], self.seps)

    def words(self) -> list[str]:
        return list(self.tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def diff(self, other: "Sentence") -> list[int]:
        """Return the positions where ``other`` has a different token (ℓ0 = its length)."""
        return [i for i, (a, b) in enumerate(zip(self.tokens, other.tokens)) if a != b]

    def __str__(self) -> str:
        return self.text()
