"""Word tokenisation shared by the zoo's word models, the neighbourhood builder and the attacks.

SST-2 ships tokenised, lowercased text ("it 's a film that does n't work ."). Raw text is brought
to the same form: lowercased, clitics split off the way the Penn Treebank does ("doesn't" →
"does n't", "it's" → "it 's"), punctuation as separate tokens, hyphenated words kept whole.
"""

from __future__ import annotations

import re

__all__ = ["word_tokenize"]

_NT = re.compile(r"(\w)n't\b")
_CLITIC = re.compile(r"(\w)'(s|re|ve|ll|d|m)\b")
_TOKEN = re.compile(r"n't|'(?:s|re|ve|ll|d|m)\b|\w+(?:-\w+)*|[^\w\s]")


def word_tokenize(text: str) -> list[str]:
    """Return the lowercased word tokens of ``text`` (PTB-style clitics, punctuation split)."""
    t = text.lower().replace("’", "'")
    t = _NT.sub(r"\1 n't", t)
    t = _CLITIC.sub(r"\1 '\2", t)
    return _TOKEN.findall(t)
