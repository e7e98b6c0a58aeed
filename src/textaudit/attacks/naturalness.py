"""The naturalness constraint of the second-order attacks (on by default; ``--naturalness off`` is the paper's search).

A finding is shown to a person as "this natural sentence x̃ flips when w1 becomes w2". Three checks keep it one a
colleague would not dismiss at once, each asked of the **masked LM that builds the neighbourhoods** (its answers are
the store's masked contexts: a rerun asks nothing new), so the figure that *measures* naturalness — the causal LM's
perplexity (SmolLM2, ``median_ppl_*`` of ``audit attack``) — is never the score that filtered (no circular figure):

* **No repeated neighbour** (:meth:`NeighborhoodBuilder._keep <textaudit.neighborhoods.builder.NeighborhoodBuilder>`
  with ``no_repeats``): a candidate equal to one of the two words before or after its position, punctuation aside,
  is not a neighbour ("a meaningful and meaningful film", "a tale of regret , regret" are not proposed).
* **Settled** (:meth:`Naturalness.ask_settled`): each word x̃ changed from x0 is still one the masked LM proposes at
  its position *given the final sentence* — in its top κ within δ of the best logit, the very rule (κ, δ) that
  proposed it. A word proposed one position at a time can stop fitting once a later round changes its neighbours;
  a settled x̃ is a fixed point of its own neighbourhood rule.
* **The patch fits** (:meth:`Naturalness.ask_patch_fits`): where w1 stands (in x0 when p is chosen, in x̃ when a
  finding is accepted), w2 must be one of the masked LM's ``pool`` (P = 200) most likely words, and, when w1 is one
  of them too, not more than δ below it (``s(w2) ≥ s(w1) − δ``, s the masked LM's logit). The counter-fitted lists
  hold pairs of another part of speech, sense or language (long → largo, uses → usage, within → indoors,
  feels → believes: Morris et al. 2020); the masked LM's own agreement refuses them in context, without a
  part-of-speech tagger (spaCy's and NLTK's fetch their models from their own servers, unreachable here, and a
  tagger knows nothing of sense: "the fabric believes ugly" tags as well as "the fabric feels ugly").
  P was chosen on SST-2 *train* (100 sentences of six words or more, cnn's ten best-ranked pairs each, the
  offline ``minilm-mlm``): w2 is in the top 50 for 11 % of the pairs, the top 100 for 16 %, the top 200 for 22 %,
  the top 500 for 31 %; at least one of the ten fits 63, 77, 85 and 91 sentences of 100. P = 200 keeps most
  sentences attackable while refusing the words the masked LM does not consider at all there. p is then the
  best-ranked pair of x0 that fits it among *every* applicable pair (:meth:`Naturalness.ask_fitting`); until
  issue #85 only the ten best were tried, and a third of SST-2 dev went unattacked. On the first 200 rows of SST-2
  train (192 of two words or more) and cnn's ranking, a fitting pair is among the 10 best for 111, the 20 best for
  148 and among all for 157: the pairs past the tenth are what most sentences without a finding lacked. The other
  pairs that fit x0 are kept too: a finding at ℓ0 ≤ 1 under one of them comes before a search beyond ℓ0 = 1 under p
  (:meth:`SecondOrderAttack.search <textaudit.attacks.second_order.SecondOrderAttack.search>`).

A vulnerable candidate that fails is not a finding: the search goes on (SO-Beam drops it from its beam). Each
attacked example's record counts the vulnerable candidates refused (``unnatural``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from textaudit.attacks.patch import Patch
from textaudit.engine.scheduler import Search
from textaudit.errors import TextAuditError
from textaudit.neighborhoods.masked_lm import ask_candidates
from textaudit.sentence import Sentence

__all__ = ["Naturalness", "NaturalChecks", "patch_fits", "word_settled", "POOL", "ppl_ratio", "most_natural_first", "naturalness_on"]

#: P: the masked LM's most likely words at the patch position, one of which w2 must be (module docstring)
POOL = 200


def naturalness_on(value: str) -> bool:
    """``--naturalness on|off`` as a bool; anything else is one line (a typo must not silently run the paper's search)."""
    if value not in ("on", "off"):
        raise TextAuditError(f"--naturalness must be on or off (got {value!r}); off is the paper's search")
    return value == "on"


def word_settled(cands: Sequence[tuple[str, float]], word: str, kappa: int, delta: float) -> float | None:
    """How far below the best logit ``word`` is, when it is among ``cands``' top κ within δ of the best (the
    neighbourhood's own rule, case aside); None when it is not."""
    if not cands:
        return None
    best, w = cands[0][1], word.lower()
    return next((best - logit for c, logit in cands[:kappa] if c.lower() == w and logit > best - delta), None)


def patch_fits(cands: Sequence[tuple[str, float]], w1: str, w2: str, delta: float) -> bool:
    """Whether w2 is among ``cands`` (the masked position's most likely words, ``(word, logit)`` best first) and, when
    w1 is among them too, not more than δ below it: see the module docstring."""
    scores: dict[str, float] = {}
    for c, logit in cands:
        scores.setdefault(c.lower(), logit)
    s1, s2 = scores.get(w1.lower()), scores.get(w2.lower())
    return s2 is not None and (s1 is None or s2 >= s1 - delta)


@dataclass(frozen=True)
class Naturalness:
    """The constraint's checks, as searches that ask the masked LM ``mlm`` (κ, δ: the neighbourhood's)."""

    mlm: Any
    kappa: int = 20
    delta: float = 3.0
    pool: int = POOL

    def ask_patch_fits(self, sentences: Sequence[Sentence], patches: Sequence[Patch]) -> Search:
        """Per sentence, whether its patch fits there (:func:`patch_fits`): one masked-LM ask for all."""
        if not sentences:
            return []
        queries = [(list(s.tokens), p.position) for s, p in zip(sentences, patches)]
        cands = yield ask_candidates(self.mlm, queries, self.pool)
        return [patch_fits(c, p.w1, p.w2, self.delta) for c, p in zip(cands, patches)]

    def ask_fitting(self, x0: Sentence, patches: Sequence[Patch]) -> Search:
        """Those of ``patches`` that fit x0 (:func:`patch_fits`), in their order (best-ranked first): one masked-LM
        ask, one context per distinct patch position (the pairs at one position share its answer)."""
        positions = list(dict.fromkeys(p.position for p in patches))
        if not positions:
            return []
        cands = yield ask_candidates(self.mlm, [(list(x0.tokens), i) for i in positions], self.pool)
        at = dict(zip(positions, cands))
        return [p for p in patches if patch_fits(at[p.position], p.w1, p.w2, self.delta)]

    def ask_settled(self, x0: Sentence, sentences: Sequence[Sentence]) -> Search:
        """Per sentence, None unless every word changed from ``x0`` is settled (:func:`word_settled`), else the sum
        of their distances below the best logit (0: each is the masked LM's first choice) — one ask for all."""
        queries, owners = _changed_words(x0, sentences)
        cands = (yield ask_candidates(self.mlm, queries, self.kappa)) if queries else []
        return self._settled(sentences, owners, cands)

    def _settled(self, sentences: Sequence[Sentence], owners: list[tuple[int, int]], cands: Sequence) -> list:
        drop: list[float | None] = [0.0] * len(sentences)
        for (j, i), c in zip(owners, cands):
            if drop[j] is not None:
                d = word_settled(c, sentences[j].tokens[i], self.kappa, self.delta)
                drop[j] = None if d is None else drop[j] + d
        return drop

    def ask_natural(self, x0: Sentence, sentences: Sequence[Sentence], patch: Patch) -> Search:
        """Per vulnerable candidate x̃: None unless it is settled and its patch fits in it, else its settled distance
        (:meth:`ask_settled`). With a masked LM that takes one top per context (``tops_per_item``: textaudit's own)
        both checks are one ask — κ at each changed word, P at the patch of every candidate, settled or not — so a
        check is one engine step, not two, and its contexts share the forwards of the other searches' asks (#85:
        the constraint's small asks had halved the engine's fullness); any other masked LM is asked twice, the
        patch's fit only of the settled."""
        if not getattr(self.mlm, "tops_per_item", False):
            settled = yield from self.ask_settled(x0, sentences)
            keep = [s for s, d in zip(sentences, settled) if d is not None]
            fits = iter((yield from self.ask_patch_fits(keep, [patch] * len(keep))))
            return [d if d is not None and next(fits) else None for d in settled]
        queries, owners = _changed_words(x0, sentences)
        at_patch = [(list(s.tokens), patch.position) for s in sentences]
        cands = (yield ask_candidates(self.mlm, queries + at_patch, [self.kappa] * len(queries)
                                      + [self.pool] * len(at_patch))) if sentences else []
        settled = self._settled(sentences, owners, cands[:len(queries)])
        return [d if d is not None and patch_fits(c, patch.w1, patch.w2, self.delta) else None
                for d, c in zip(settled, cands[len(queries):])]


    def ask_natural_groups(self, x0: Sentence, groups: Sequence[tuple[Patch, Sequence[Sentence]]]) -> Search:
        """:meth:`ask_natural` of several (patch, candidates) groups: one ask for all with a masked LM that takes one
        top per context (the verdicts are each group's own), else one group after another."""
        if not getattr(self.mlm, "tops_per_item", False):
            each = []
            for patch, xs in groups:
                each.append((yield from self.ask_natural(x0, xs, patch)))
            return each
        queries, tops, spans = [], [], []
        for patch, xs in groups:
            changed, owners = _changed_words(x0, xs)
            spans.append((len(queries), owners, len(changed)))
            queries += changed + [(list(s.tokens), patch.position) for s in xs]
            tops += [self.kappa] * len(changed) + [self.pool] * len(xs)
        cands = (yield ask_candidates(self.mlm, queries, tops)) if queries else []
        out = []
        for (patch, xs), (at, owners, n) in zip(groups, spans):
            settled = self._settled(xs, owners, cands[at:at + n])
            out.append([d if d is not None and patch_fits(c, patch.w1, patch.w2, self.delta) else None
                        for d, c in zip(settled, cands[at + n:at + n + len(xs)])])
        return out


def _changed_words(x0: Sentence, sentences: Sequence[Sentence]) -> tuple[list, list[tuple[int, int]]]:
    """The masked contexts of every word each sentence changed from x0, and (sentence, position) of each."""
    queries, owners = [], []
    for j, s in enumerate(sentences):
        for i in x0.diff(s):
            queries.append((list(s.tokens), i))
            owners.append((j, i))
    return queries, owners


def ppl_ratio(record: dict) -> float | None:
    """How much less natural than x0 a finding reads to the measuring LM: the larger of ppl(x̃) / ppl(x0) and
    ppl(x̃ ⊕ p) / ppl(x0) (SmolLM2's perplexities in the record; None without them)."""
    po = record.get("ppl_original")
    shown = [record.get(k) for k in ("ppl_perturbed", "ppl_patched") if record.get(k) is not None]
    return round(max(shown) / po, 3) if po and shown else None


def most_natural_first(records: Sequence[dict]) -> list[dict]:
    """Successes ordered by :func:`ppl_ratio`, lowest first (ties, and records without perplexities after them, in
    their file order): what a person is shown first."""
    found = [r for r in records if r.get("status") == "success" and r.get("vulnerable")
             and isinstance(r.get("text"), str)]  # a finding is shown beside its input
    return sorted(found, key=lambda r: (ppl_ratio(r) is None, ppl_ratio(r) or 0.0))


@dataclass
class NaturalChecks:
    """The naturalness checks of an attack's vulnerable candidates, counted for an ETA: how likely a search still
    checking a level is to go on to the next (an enumeration begins level d + 1 only when every candidate of level d
    is refused).

    ``checked`` / ``accepted``: candidates checked and found natural; ``done`` / ``refused``: checks finished, and
    those that refused every candidate; ``open``: per start sentence (its tokens), the candidates its check in
    flight has not checked yet; ``announced``: per start sentence whose search is in flight between two levels, the
    masked-LM contexts of its next level (the level's sentences × the start's positions: a neighbour has as many
    words), set by the search when a level d < k is found and withdrawn when the next begins or the search ends."""

    checked: int = 0
    accepted: int = 0
    done: int = 0
    refused: int = 0
    open: dict[tuple, int] = field(default_factory=dict)
    announced: dict[tuple, int] = field(default_factory=dict)

    def upcoming(self) -> float:
        """The contexts the searches in flight are expected to ask for the levels they would begin next: each
        announced level at :meth:`going_on`'s chance."""
        return float(sum(c * self.going_on(start) for start, c in list(self.announced.items())))

    def going_on(self, start: tuple) -> float:
        """The chance that the search from ``start`` goes on to its next level: for a check in flight with m
        candidates left, that all m are refused, (1 − q)^m with q = (a + 1) / (c + 2) the share of the c checked
        found natural (Laplace's rule); for one not in a check (scoring its level), the share of checks that
        refused all, (r + 1) / (n + 2)."""
        m = self.open.get(start)
        if m is None:
            return (self.refused + 1) / (self.done + 2)
        return (1 - (self.accepted + 1) / (self.checked + 2)) ** m
