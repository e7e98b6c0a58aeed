"""Protected word pairs p = (p(1), p(2)) and X_p, the sentences a pair's bias is measured on.

X_p: the sentences with exactly one occurrence of p(1) and none of p(2); sentences with exactly one
p(2) and no p(1) count too, *with the pair reversed*, so that one B measures one direction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from textaudit.errors import TextAuditError
from textaudit.lexicons import load_pairs_file, parse_pair  # re-exported: the pair's format is the lexicons'
from textaudit.sentence import Sentence

__all__ = ["GENDER_PAIRS", "GROUPS", "parse_pair", "load_pairs_file", "Source", "find_sources", "measurable_sources",
           "check_some_source"]

#: The gender pairs the Double Perturbation paper reports (§4.2, Fig. 5/Table 5).
GENDER_PAIRS: list[tuple[str, str]] = [("he", "she"), ("his", "her"), ("him", "her"), ("men", "women"),
                                        ("man", "woman"), ("actor", "actress")]
GROUPS = {"gender": GENDER_PAIRS}


@dataclass(frozen=True)
class Source:
    """A sentence of X_p: the pair's word sits at ``position``; ``reversed``: it holds p(2).
    ``context``: for sentence-pair data, the other text of the pair, kept verbatim."""

    id: str
    sentence: Sentence
    position: int
    reversed: bool
    context: str | None = None

    @property
    def text(self) -> str:
        return self.sentence.text()


def find_sources(texts: Sequence[str], pair: tuple[str, str], ids: Sequence[str] | None = None,
                 contexts: Sequence[str] | None = None, language: str = "en") -> list[Source]:
    """Return X_p: sentences with exactly one p(1) and no p(2), and (reversed) exactly one p(2) and no p(1)
    (``contexts``: the other text of each sentence pair, carried along)."""
    w1, w2 = pair
    ids = list(ids) if ids is not None else [str(i) for i in range(len(texts))]
    ctx = list(contexts) if contexts is not None else [None] * len(texts)
    out = []
    for id_, t, c in zip(ids, texts, ctx):
        s = Sentence.parse(t, language)
        low = [w.lower() for w in s.tokens]
        c1, c2 = low.count(w1), low.count(w2)
        if c1 == 1 and c2 == 0:
            out.append(Source(id_, s, low.index(w1), False, c))
        elif c2 == 1 and c1 == 0:
            out.append(Source(id_, s, low.index(w2), True, c))
    return out


def measurable_sources(texts: Sequence[str], pair: tuple[str, str], ids: Sequence[str] | None = None,
                       contexts: Sequence[str] | None = None, language: str = "en") -> list[Source]:
    """X_p as B_{p,k} measures it: :func:`find_sources` less the sentences of fewer than two words."""
    return [s for s in find_sources(texts, pair, ids, contexts, language) if sum(t.isalpha() for t in s.sentence.tokens) >= 2]


def check_some_source(pairs: Sequence[tuple[str, str]], texts: Sequence[str], ids: Sequence[str] | None,
                      contexts: Sequence[str] | None, language: str = "en", *, limit: int | None = None,
                      sample: int | None = None, limit_name: str = "--limit", bound: str = "--max-sources N") -> None:
    """Before any model loads: some pair must have X_p in the data. When --limit or --sample-examples cut the
    data, say so — they cut the sentences X_p is drawn from; --max-sources bounds the work instead."""
    if any(measurable_sources(texts, p, ids, contexts, language) for p in pairs):
        return
    words = " or ".join(f"one '{a}' or one '{b}'" for a, b in pairs[:3]) + (" …" if len(pairs) > 3 else "")
    if limit is not None or sample is not None:
        cut = f"{limit_name} {limit}" if limit is not None else f"--sample-examples {sample}"
        raise TextAuditError(f"none of the {len(texts)} sentences {cut} keeps contains exactly {words}: {cut} cuts the "
                             f"data X_p is drawn from; to bound the work, keep the data and give {bound}")
    if len(pairs) > 1:  # the words run_bias uses for a group, said before any model loads
        raise TextAuditError(f"none of the {len(pairs)} pairs can be measured on this data and model: no sentence of "
                             "the data holds exactly one of their words; choose other pairs or other data")
    raise TextAuditError(f"no sentence of the data contains exactly {words}; choose another pair or other data")
