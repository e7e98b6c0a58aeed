"""Control pairs for B_{p,k}: "is this bias, or the noise of the method?" (``audit bias --control``).

A control pair c = (c(1), c(2)) is two words with no protected meaning that fit where p's words stand
(the same part of speech) and are about as common. B_{c,k} is measured on **the same sentences** as
B_{p,k}: each sentence of Neighbor_k(X_p) with c(1) and with c(2) at p's position, so
F_c(x) = f_soft(x with c(2)) − f_soft(x with c(1)). B_c is how far a swap of two neutral words of that
kind moves the output on this model and data; B_p − B_c, with an interval clustered by source sentence
as B's own (each sentence gives both shifts, so the difference is paired), is the effect of the
protected meaning beyond that.

The built-in choice: each pair word is put in a class by the lexicon it comes from — a pronoun or
possessive (he, she, his, her; they, them), a gendered or group noun for people, singular or plural
(man, women, actress; from the gender swap map), a group adjective (nationality, religion, sexuality,
ethnicity; from the CheckList lexicons), a first name — and the control is the class's neutral pair
whose mean Zipf frequency (``wordfreq``, Speer 2022) is closest to p's. The part of speech is read from
that lexicon membership, not from a tagger: the pair words are a closed, known set, and their lexicon
says what they are. ``--control w1,w2`` names any pair instead; ``--control auto`` is the built-in choice.
"""

from __future__ import annotations

from typing import Iterable

from textaudit.errors import TextAuditError
from textaudit.fairness.groups import protected_group
from textaudit.fairness.pairs import parse_pair
from textaudit.perturbations.gender import gender_words

__all__ = ["NEUTRAL_PAIRS", "word_class", "control_for", "controls_for"]

#: neutral pairs per word class: common words of the class without a protected meaning (nor, as far as a
#: review goes, a sentiment)
NEUTRAL_PAIRS: dict[str, tuple[tuple[str, str], ...]] = {
    "pronoun": (("this", "that"),),
    "plural pronoun": (("these", "those"),),
    "person": (("friend", "neighbor"), ("student", "teacher"), ("writer", "reader"), ("person", "guest")),
    "people": (("friends", "neighbors"), ("students", "teachers"), ("writers", "readers"), ("people", "folks")),
    "adjective": (("northern", "southern"), ("wooden", "plastic"), ("summer", "winter")),
    "name": (("smith", "jones"), ("miller", "wilson"), ("taylor", "walker")),
}
#: personal pronouns and possessive determiners, singular (class "pronoun") and plural ("plural pronoun");
#: no control starts with a vowel, so that a swap after "a" stays grammatical
PRONOUNS = frozenset("he she him her his hers himself herself i me my you your it its".split())
PLURAL_PRONOUNS = frozenset("they them their theirs themselves we us our".split())
#: plural nouns for people that do not end in -s
IRREGULAR_PLURALS = frozenset("men women people children gentlemen ladies".split())


def word_class(word: str) -> str | None:
    """The class of a pair word (a key of :data:`NEUTRAL_PAIRS`), from the lexicon that holds it; None when
    no lexicon does."""
    w = word.lower()
    if w in PRONOUNS:
        return "pronoun"
    if w in PLURAL_PRONOUNS:
        return "plural pronoun"
    if w in gender_words():
        return "people" if w in IRREGULAR_PLURALS or (w.endswith("s") and not w.endswith("ss")) else "person"
    if w in protected_group("names").members:
        return "name"
    for group in ("nationality", "religion", "sexuality", "ethnicity"):
        if w in protected_group(group).members:
            return "adjective"
    return None


def _zipf(words: Iterable[str]) -> float:
    try:
        from wordfreq import zipf_frequency
    except ImportError:  # pragma: no cover - wordfreq comes with the offline extra
        raise TextAuditError("--control auto needs wordfreq (pip install wordfreq), or name a pair: --control w1,w2") from None
    ws = list(words)
    return sum(zipf_frequency(w, "en") for w in ws) / len(ws)


def control_for(pair: tuple[str, str], choice: str = "auto") -> tuple[str, str]:
    """The control pair of ``pair``: ``choice`` "w1,w2" itself, or (``auto``) the neutral pair of p's
    word class closest to p in mean Zipf frequency (see the module docstring). One line when there is
    none, or when the control is the pair itself or shares a word with it."""
    if choice != "auto":
        control = parse_pair(choice)
    else:
        classes = {word_class(w) for w in pair} - {None}
        if not classes:
            raise TextAuditError(f"no built-in control for {pair[0]}/{pair[1]} (neither word is in a protected "
                                 "lexicon); name one: --control w1,w2 (two neutral words that fit where they stand)")
        kind = sorted(classes)[0] if len(classes) > 1 else classes.pop()
        target = _zipf(pair)
        control = min(NEUTRAL_PAIRS[kind], key=lambda c: (abs(_zipf(c) - target), c))
    if set(control) & set(pair):
        raise TextAuditError(f"the control {control[0]},{control[1]} shares a word with the pair {pair[0]},{pair[1]}; "
                             "a control swaps two other words")
    return control


def controls_for(pairs: Iterable[tuple[str, str]], choice: str,
                 blacklists: dict[tuple[str, str], frozenset[str]] | None = None,
                 blacklist: frozenset[str] | None = None) -> dict[tuple[str, str], tuple[str, str]]:
    """``{pair: control}`` for every pair (:func:`control_for`); a control word that is itself protected
    (in the pair's blacklist, e.g. a gendered word for a gender pair) is one line."""
    out = {}
    for p in pairs:
        c = control_for(tuple(p), choice)  # type: ignore[arg-type]
        protected = (blacklists or {}).get(tuple(p), blacklist or frozenset())  # type: ignore[arg-type]
        bad = [w for w in c if w in protected]
        if bad:
            raise TextAuditError(f"the control word '{bad[0]}' is itself protected for {p[0]},{p[1]}; a control pair "
                                 "has no protected meaning: choose two neutral words")
        out[tuple(p)] = c
    return out  # type: ignore[return-value]
