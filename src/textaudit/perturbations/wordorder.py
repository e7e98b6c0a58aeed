"""Word-order perturbations and the DND / IDC metrics of Clouâtre et al. ("Demystifying Neural
Language Models' Insensitivity to Word-Order").

A reordering perturbation returns the perturbed text *and* the permutation P of character indices:
``P[j]`` is the index in the original text of the character now at position j (n characters,
spaces included).

- IDC (global order) = (1/n) · mean_j |j − P[j]| — the mean displacement as a fraction of the length.
- DND (local order) = (1/(n−1)) · #{j ∈ 0..n−2 : P[j+1] ≠ P[j] + 1} — the share of characters no
  longer followed by their original right neighbour.

Reorderings act on *units* at one of three granularities — ``word`` (whitespace-separated words),
``subword`` (WordPiece pieces of the MiniLM tokenizer, by their character spans) or ``char``
(non-space characters). Units move; the separators between them (spaces, or nothing between the
pieces of one word) stay in their slots, so the text keeps its length and its spacing pattern:

- ``full_shuffle``: a uniformly random permutation of the units;
- ``phrase_shuffle(ρ)``: walk the units, start a new phrase before each unit with probability ρ
  (the first unit always starts one), then shuffle the phrases, keeping each phrase's inner order;
- ``neighbor_flip(ρ)``: the paper's Algorithm 4 — hold the first unit and walk the others left to
  right; with probability ρ the current unit is emitted *before* the held one, which stays held (so a
  held unit can travel several places right: "The" → "heT" in the paper's Figure 4); otherwise the
  held unit is emitted and the current one becomes held. The last held unit closes the text.
All are seeded by the ``random.Random`` passed in.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache
from typing import Callable, Sequence

from textaudit.errors import TextAuditError
from textaudit.resources import resolve

__all__ = ["idc", "dnd", "char_permutation", "units", "reorder", "REORDERINGS", "LEVELS", "perturb"]

LEVELS = ("word", "subword", "char")


def _check(perm: Sequence[int]) -> list[int]:
    p = [int(v) for v in perm]
    if sorted(p) != list(range(len(p))):
        raise TextAuditError("not a permutation: P must contain each index 0..n-1 exactly once")
    return p


def idc(permutation: Sequence[int]) -> float:
    """Return IDC = (1/n) · mean_j |j − P[j]| (0 for the identity; 0 for n ≤ 1)."""
    p = _check(permutation)
    n = len(p)
    if n <= 1:
        return 0.0
    return sum(abs(j - v) for j, v in enumerate(p)) / n / n


def dnd(permutation: Sequence[int]) -> float:
    """Return DND = (1/(n−1)) · #{j : P[j+1] ≠ P[j] + 1} (0 for the identity; 0 for n ≤ 1)."""
    p = _check(permutation)
    n = len(p)
    if n <= 1:
        return 0.0
    return sum(1 for j in range(n - 1) if p[j + 1] != p[j] + 1) / (n - 1)


def char_permutation(original: str, perturbed: str) -> list[int]:
    """Return P for two texts that are permutations of each other's characters.

    Repeated characters are matched by the *longest run* rule: the character at position j continues
    the run of j−1 (original index P[j−1] + 1) when that index holds the same character and is unused;
    otherwise it takes the unused occurrence from which the longest stretch of the perturbed text
    matches the original (unused characters only), the earliest on a tie. So a text compared with
    itself gives the identity and a moved block is matched as a block even where its first characters
    occur earlier ("test is a This" from "This is a test" moves "is a", not the "is" of "This": the
    paper's Appendix C listing). A permutation that is not made of moved blocks — neighbour flips of
    equal characters — cannot be told from the text alone; :func:`perturb` returns the true P.
    """
    if sorted(original) != sorted(perturbed):
        raise TextAuditError("the two texts are not permutations of each other (different characters)")
    n = len(original)
    where: dict[str, list[int]] = {}
    for i, c in enumerate(original):
        where.setdefault(c, []).append(i)
    used = [False] * n
    out: list[int] = []

    def run_length(i: int, j: int) -> int:
        length = 0
        while j + length < n and i + length < n and not used[i + length] and original[i + length] == perturbed[j + length]:
            length += 1
        return length

    for j, c in enumerate(perturbed):
        nxt = out[-1] + 1 if out else -1
        if 0 <= nxt < n and original[nxt] == c and not used[nxt]:
            i = nxt
        else:
            free = [i for i in where[c] if not used[i]]
            i = max(free, key=lambda i: (run_length(i, j), -i))
        used[i] = True
        out.append(i)
    return out


@lru_cache(maxsize=1)
def _wordpiece():
    from transformers import AutoTokenizer


    return AutoTokenizer.from_pretrained(resolve("minilm"), trust_remote_code=False)


def units(text: str, level: str) -> list[tuple[int, int]]:
    """Return the character spans ``(start, end)`` of the units of ``text`` at ``level``."""
    if level == "word":
        return [m.span() for m in re.finditer(r"\S+", text)]
    if level == "char":
        return [(i, i + 1) for i, c in enumerate(text) if not c.isspace()]
    if level == "subword":
        enc = _wordpiece()(text, add_special_tokens=False, return_offsets_mapping=True)
        spans = [tuple(o) for o in enc["offset_mapping"] if o[1] > o[0]]
        # pieces the tokenizer normalised away (e.g. accents) still need covering: fall back to words
        covered = sum(e - s for s, e in spans)
        if covered != sum(e - s for s, e in units(text, "word")):
            return units(text, "word")
        return spans  # type: ignore[return-value]
    raise TextAuditError(f"unknown level '{level}'; use one of {', '.join(LEVELS)}")


def reorder(text: str, spans: list[tuple[int, int]], order: Sequence[int]) -> tuple[str, list[int]]:
    """Return ``(perturbed, P)``: the units at ``spans`` placed in ``order`` (unit slot t receives
    unit ``order[t]``), separators kept in their slots."""
    pieces: list[str] = []
    perm: list[int] = []
    pos = 0
    for slot, (s, _e) in enumerate(spans):
        pieces.append(text[pos:s])
        perm.extend(range(pos, s))
        us, ue = spans[order[slot]]
        pieces.append(text[us:ue])
        perm.extend(range(us, ue))
        pos = spans[slot][1]
    pieces.append(text[pos:])
    perm.extend(range(pos, len(text)))
    return "".join(pieces), perm


def _full_shuffle(m: int, rng: random.Random, rho: float) -> list[int]:
    order = list(range(m))
    rng.shuffle(order)
    return order


def _phrase_shuffle(m: int, rng: random.Random, rho: float) -> list[int]:
    phrases: list[list[int]] = []
    for i in range(m):
        if i == 0 or rng.random() < rho:
            phrases.append([])
        phrases[-1].append(i)
    rng.shuffle(phrases)
    return [i for ph in phrases for i in ph]


def _neighbor_flip(m: int, rng: random.Random, rho: float) -> list[int]:
    if m == 0:
        return []
    order: list[int] = []
    held = 0
    for i in range(1, m):
        if rng.random() < rho:  # flip: the current unit goes before the held one, which stays held
            order.append(i)
        else:
            order.append(held)
            held = i
    order.append(held)
    return order


REORDERINGS: dict[str, Callable[[int, random.Random, float], list[int]]] = {
    "full_shuffle": _full_shuffle,
    "phrase_shuffle": _phrase_shuffle,
    "neighbor_flip": _neighbor_flip,
}


def perturb(text: str, perturbation: str, level: str, rng: random.Random, rho: float = 0.5) -> tuple[str, list[int]]:
    """Return ``(perturbed text, P)`` for one reordering at one granularity (seeded by ``rng``)."""
    if perturbation not in REORDERINGS:
        raise TextAuditError(f"unknown reordering '{perturbation}'; use one of {', '.join(REORDERINGS)}")
    if not 0.0 <= rho <= 1.0:
        raise TextAuditError(f"rho must be between 0 and 1 (got {rho})")
    spans = units(text, level)
    order = REORDERINGS[perturbation](len(spans), rng, rho)
    return reorder(text, spans, order)
