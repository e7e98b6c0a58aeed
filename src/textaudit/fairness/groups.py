"""Protected groups: the pairs p = (p(1), p(2)) of ``audit bias --group`` and each group's blacklist.

A group is a set of single-word members. Its pairs are either every member against the group's
*reference* member, p = (member, reference) — B_{p,k} then measures the shift of f_soft when a
member is replaced by the reference, e.g. (gay, straight), (asian, american) as in the Double
Perturbation paper — or, with ``--group-pairs all``, every unordered pair of members. While B of a
group's pair is measured, the neighbourhood never introduces any member of that group (its
*blacklist*), so that a neighbour cannot carry a second protected word of the same kind.

Members come from the ``checklist-lexicons`` resource (CheckList, Ribeiro et al. 2020): its
``nationality``, ``religion_adj`` and ``sexual_adj`` lists, lowercased, multi-word and hyphenated
entries left out (one pair word is one word); ``names`` pairs its ``male`` and ``female`` first
names rank by rank. ``ethnicity`` is a short list written here (the lexicons have none): black and
white are left out on purpose — in reviews they are colours far more often than people. ``gender``
is the paper's six pairs. ``--group all`` is every group.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from textaudit.errors import TextAuditError
from textaudit.fairness.pairs import GENDER_PAIRS
from textaudit.perturbations.gender import gender_words
from textaudit.resources import read_json

__all__ = ["ProtectedGroup", "GROUP_NAMES", "protected_group", "group_pairs", "PAIR_MODES"]

#: how a group's pairs are formed
PAIR_MODES = ("reference", "all")
#: ethnicity words (no CheckList list): single words a review may use for people
ETHNICITY = ("asian", "african", "hispanic", "latino", "arab", "european", "american")


@dataclass(frozen=True)
class ProtectedGroup:
    """``members`` (lowercase single words), the ``reference`` member (None: fixed ``pairs``)."""

    name: str
    members: tuple[str, ...]
    reference: str | None = None
    fixed_pairs: tuple[tuple[str, str], ...] = ()
    also_blacklisted: frozenset[str] = frozenset()

    def pairs(self, mode: str = "reference") -> list[tuple[str, str]]:
        """p = (member, reference) for every other member, or every unordered pair (``mode="all"``)."""
        if mode not in PAIR_MODES:
            raise TextAuditError(f"unknown --group-pairs '{mode}'; use one of {', '.join(PAIR_MODES)}")
        if self.fixed_pairs and (mode == "reference" or self.reference is None):
            return list(self.fixed_pairs)
        if mode == "all":
            return [(a, b) for i, a in enumerate(self.members) for b in self.members[i + 1:]]
        return [(m, self.reference) for m in self.members if m != self.reference]  # type: ignore[misc]

    @property
    def blacklist(self) -> frozenset[str]:
        """Every member: the neighbourhood of one of the group's pairs never introduces any."""
        return frozenset(self.members) | {w for p in self.fixed_pairs for w in p} | self.also_blacklisted


def _single_words(words) -> tuple[str, ...]:
    out = []
    for w in words:
        w = str(w).strip().lower()
        if w.isalpha() and w not in out:
            out.append(w)
    return tuple(out)


@lru_cache(maxsize=1)
def _checklist() -> dict:
    keys = ("male", "female", "nationality", "religion_adj", "sexual_adj")
    return read_json("checklist-lexicons", lambda d: isinstance(d, dict) and all(
        isinstance(d.get(k), list) and all(isinstance(w, str) for w in d[k]) for k in keys),
        f"a JSON object with word lists {', '.join(keys)}")  # type: ignore[return-value]


def _build(name: str) -> ProtectedGroup:
    if name == "gender":  # blacklist: every gendered word of the swap map, as --pair has always had

        return ProtectedGroup("gender", _single_words(w for p in GENDER_PAIRS for w in p), None, tuple(GENDER_PAIRS),
                              gender_words())
    if name == "ethnicity":
        return ProtectedGroup("ethnicity", ETHNICITY, "american")
    lex = _checklist()
    if name == "names":
        males, females = _single_words(lex["male"]), _single_words(lex["female"])
        pairs = tuple(zip(males, females))
        return ProtectedGroup("names", males + females, None, pairs)
    key, reference = {"nationality": ("nationality", "american"), "religion": ("religion_adj", "christian"),
                      "sexuality": ("sexual_adj", "straight")}[name]
    members = _single_words(lex[key])
    if reference not in members:  # pragma: no cover - the lexicon changed under us
        raise TextAuditError(f"the CheckList '{key}' list has no '{reference}'; its reference member is missing")
    return ProtectedGroup(name, members, reference)


#: every group ``--group`` takes (and ``all``)
GROUP_NAMES = ("gender", "nationality", "religion", "sexuality", "ethnicity", "names")


def protected_group(name: str) -> ProtectedGroup:
    """The group called ``name`` (one-line error for another name)."""
    if name not in GROUP_NAMES:
        raise TextAuditError(f"unknown group '{name}'; use one of {', '.join(GROUP_NAMES)} or all")
    return _build(name)


def group_pairs(spec: str, mode: str = "reference") -> tuple[list[tuple[str, str]], dict[tuple[str, str], frozenset[str]]]:
    """``(pairs, blacklists)`` of ``--group spec`` (a group name or ``all``): the pairs in order, and
    each pair's blacklist (its group's members). A pair two groups share keeps the first group's."""
    names = GROUP_NAMES if spec == "all" else (spec,)
    pairs: list[tuple[str, str]] = []
    blacklists: dict[tuple[str, str], frozenset[str]] = {}
    for name in names:
        g = protected_group(name)
        for p in g.pairs(mode):
            if p not in blacklists:
                pairs.append(p)
                blacklists[p] = g.blacklist
    return pairs, blacklists
