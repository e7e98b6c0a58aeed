"""Word tokenisation shared by the zoo's word models, the neighbourhood builder and the attacks.

SST-2 ships tokenised, lowercased text ("it 's a film that does n't work ."). Raw text is brought
to the same form: lowercased, clitics split off the way the Penn Treebank does ("doesn't" →
"does n't", "it's" → "it 's"), punctuation as separate tokens, hyphenated words kept whole.
"""

from __future__ import annotations

import re

__all__ = ["word_tokenize", "STOPWORDS"]

_NT = re.compile(r"(\w)n't\b")
_CLITIC = re.compile(r"(\w)'(s|re|ve|ll|d|m)\b")
_TOKEN = re.compile(r"n't|'(?:s|re|ve|ll|d|m)\b|\w+(?:-\w+)*|[^\w\s]")


def word_tokenize(text: str) -> list[str]:
    """Return the lowercased word tokens of ``text`` (PTB-style clitics, punctuation split)."""
    t = text.lower().replace("’", "'")
    t = _NT.sub(r"\1 n't", t)
    t = _CLITIC.sub(r"\1 '\2", t)
    return _TOKEN.findall(t)


#: English function words (articles, pronouns, auxiliaries, prepositions, conjunctions, clitics).
#: Attacks never substitute them; quality benchmarks report "content words" without them.
STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being below
between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each few
for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself him
himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most mustn't my
myself no nor not of off on once only or other ought our ours ourselves out over own same shan't she she'd
she'll she's should shouldn't so some such than that that's the their theirs them themselves then there
there's these they they'd they'll they're they've this those through to too under until up very was wasn't we
we'd we'll we're we've were weren't what what's when when's where where's which while who who's whom why why's
with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves 's n't 're 've 'll 'd 'm
also just will shall may might must upon yet whether either neither every
""".split())
