"""BAE's part-of-speech filter (Garg & Ramakrishnan 2020, as TextAttack's ``PartOfSpeech`` constraint applies it).

A swap of word w at position i for candidate c is kept when c's part of speech, tagged in w's context (the four words
before i and the three after it, of the sentence the attack started from), is w's — or when one is a noun and the
other a verb (``allow_verb_noun_swap``, on in BAE's recipe). Tags are the universal tagset's twelve (Petrov, Das &
McDonald 2012), mapped from the Penn Treebank tags a tagger gives (:data:`UNIVERSAL`).

The tagger is TextBlob's ``PatternTagger`` (CLiPS Pattern's lexicon — Brill's rule-based tagger v1.14, trained on the
Brown corpus and the Penn Treebank — and its contextual rules; TextBlob is MIT-licensed and published on PyPI by its
author, Steven Loria): it installs offline from PyPI
(``pip install 'textaudit[recipes]'``). TextAttack's default, NLTK's averaged perceptron, fetches its model from
NLTK's own server and flair's and stanza's from theirs — none reachable here, and none on PyPI. It is a stand-in: a
different tagger agrees with NLTK's on most words and not on all, so BAE's cells with it are said to use it.
"""

from __future__ import annotations

import time
from functools import lru_cache
from importlib.metadata import version
from typing import Sequence

from textaudit.errors import TextAuditError

__all__ = ["UNIVERSAL", "universal_tag", "PartOfSpeech", "load_tagger", "require_tagger", "tagger_name"]

#: Penn Treebank tag → universal tag (Petrov et al. 2012's en-ptb mapping); anything else is "X"
UNIVERSAL: dict[str, str] = {
    **dict.fromkeys(["NN", "NNS", "NNP", "NNPS"], "NOUN"),
    **dict.fromkeys(["VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "MD"], "VERB"),
    **dict.fromkeys(["JJ", "JJR", "JJS"], "ADJ"),
    **dict.fromkeys(["RB", "RBR", "RBS", "WRB"], "ADV"),
    **dict.fromkeys(["PRP", "PRP$", "WP", "WP$"], "PRON"),
    **dict.fromkeys(["DT", "PDT", "WDT", "EX"], "DET"),
    "IN": "ADP", "CC": "CONJ", "CD": "NUM",
    **dict.fromkeys(["RP", "TO", "POS"], "PRT"),
    **dict.fromkeys([".", ",", ":", "(", ")", "``", "''", "#", "$", "-LRB-", "-RRB-"], "."),
}

#: words of context either side, as TextAttack's constraint takes them: four before the position, three after
BEFORE, AFTER = 4, 3


def universal_tag(penn: str) -> str:
    """The universal tag of a Penn Treebank tag ("X" for one the mapping lacks: FW, SYM, UH, LS)."""
    return UNIVERSAL.get(penn, "X")


def require_tagger() -> type:
    """TextBlob's Pattern tagger class, or one line saying how to install it (checked before any model loads)."""
    try:
        from textblob.en.taggers import PatternTagger
    except ImportError as e:
        raise TextAuditError("BAE's part-of-speech filter (--recipe paper) tags words with TextBlob's Pattern tagger, "
                             "which is not installed: pip install 'textaudit[recipes]'") from e
    return PatternTagger


def load_tagger():
    """TextBlob's Pattern tagger (a ``tag(text, tokenize=False)`` callable), or one line saying how to install it."""
    return require_tagger()()


def tagger_name(tagger) -> str:
    """What a results header records of the tagger: TextBlob's Pattern tagger with TextBlob's version, or the class."""
    if type(tagger).__module__.startswith("textblob"):
        return f"textblob-pattern {version('textblob')}"
    return type(tagger).__name__


class PartOfSpeech:
    """Whether a word may replace another at a position: same universal part of speech in the same context
    (:func:`can_replace`). Tags are cached per context (a sentence's positions are asked again and again)."""

    def __init__(self, tagger=None, allow_verb_noun_swap: bool = True, cache_size: int = 2 ** 16):
        self.tagger = load_tagger() if tagger is None else tagger
        self.name = tagger_name(self.tagger)  # (recorded in the results header: another tagger, other records)
        self.allow_verb_noun_swap = allow_verb_noun_swap
        self.tag_in_context = lru_cache(maxsize=cache_size)(self._tag_in_context)
        self.asked = 0  # contexts tagged (cache misses)
        self.seconds = 0.0  # ... and the seconds they took (an attack's ETA prices them)

    def _tag_in_context(self, before: tuple[str, ...], word: str, after: tuple[str, ...]) -> str:
        self.asked += 1
        t0 = time.perf_counter()
        try:
            words = [*before, word, *after]
            tagged = self.tagger.tag(" ".join(words), tokenize=False)
            if len(tagged) != len(words):  # a word the tagger split or joined: tag it alone
                tagged = self.tagger.tag(word, tokenize=False)[:1]
                return universal_tag(tagged[0][1]) if tagged else "X"
            return universal_tag(tagged[len(before)][1])
        finally:
            self.seconds += time.perf_counter() - t0

    def tag(self, words: Sequence[str], i: int, word: str | None = None) -> str:
        """The universal tag of ``word`` (default: ``words[i]``) put at position i of ``words``, in its context."""
        return self.tag_in_context(tuple(words[max(i - BEFORE, 0):i]), words[i] if word is None else word,
                                   tuple(words[i + 1:i + 1 + AFTER]))

    def compatible(self, a: str, b: str) -> bool:
        """Two universal tags a swap may cross: equal, or a noun and a verb when ``allow_verb_noun_swap``."""
        return a == b or (self.allow_verb_noun_swap and {a, b} <= {"NOUN", "VERB"})

    def can_replace(self, words: Sequence[str], i: int, candidates: Sequence[str]) -> list[bool]:
        """Per candidate, whether it may replace ``words[i]`` (both tagged in the context of ``words``)."""
        ref = self.tag(words, i)
        return [self.compatible(ref, self.tag(words, i, c)) for c in candidates]
