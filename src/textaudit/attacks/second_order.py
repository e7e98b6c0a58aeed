"""Second-order attacks (Double Perturbation §3): SO-Enum, SO-Beam and the random baseline.

A *vulnerable example* is a natural sentence x near the input x0 whose prediction flips when the
patch p = (w1, w2) is applied: F(x; p) = f(x ⊕ p) − f(x) ≠ 0 on predicted classes.

- Loss (Eq. 4): L(x; p) = −log(1 − f_min) − log(f_max), where f_min / f_max are the smaller / larger
  of the probabilities of class c of x and of x ⊕ p, and c is the class the model predicts for x0
  (for two classes this equals the paper's positive-class form, because L is symmetric under
  f → 1 − f; for C > 2 classes it is the natural one-vs-rest extension).
- F_soft(x; p) = f_c(x ⊕ p) − f_c(x).
- SO-Enum: Neighbor_k(x0), k ≤ 2, in order of distance; the vulnerable example with the smallest ℓ0
  (ties: largest |F_soft|).
- SO-Beam (Alg. 2): beam of β sentences (β = 20), at most k rounds of Neighbor_1 expansion of the
  whole beam; stop at the first round with a vulnerable example (returning the best as above),
  else keep the β lowest-loss new sentences. On a label-only model (one-hot probabilities: every
  non-vulnerable candidate has the same loss) the β kept are a uniformly random choice under the
  example's seed (the candidates shuffled, then sorted stably by loss); on sampled label
  frequencies the loss ranks them as usual.
- A label-only model's ``unknown`` prediction (a completion that matched no verbaliser) is never
  half of a vulnerable pair.
- Random baseline (App. A.1): k rounds, each moving to a uniformly random neighbour.
x0 itself is checked first: if it is already vulnerable, the attack succeeds with ℓ0 = 0 (as in
the reference implementation). The patch word's position is protected throughout.

With ``naturalness`` (the default; :mod:`textaudit.attacks.naturalness`) p is the best-ranked pair that fits x0,
the neighbourhood never repeats an adjacent word, and a vulnerable candidate is a finding only when it is settled
and p fits it; ``naturalness=False`` is the paper's search exactly. Under the constraint SO-Enum and SO-Beam look
for the *nearest* finding over every pair that fits x0 before searching beyond ℓ0 = 1 under p: x0 under each pair,
Neighbor_1(x0) under p, then Neighbor_1(x0) under each other fitting pair in rank order (one more masked context:
the neighbours at p's position), the record naming the pair it was found under. Issue #85 measured why: choosing p
among every fitting pair raised the share of inputs with a finding from 63 % to 95 % (cnn, 200 dev) but the pairs
past the tenth-ranked are weaker, so more searches went to ℓ0 = 2–3 under p, where SO-Beam asks β × |x0| masked
contexts per round; a nearer finding under another pair that fits costs one classifier ask and its checks.
"""

from __future__ import annotations

from typing import ClassVar, Iterable

import numpy as np

from textaudit.attacks.base import Attack, AttackResult, Budget, Found, Goal, Skip
from textaudit.attacks.naturalness import NaturalChecks, Naturalness
from textaudit.attacks.patch import Patch, PatchWords, apply_patch
from textaudit.engine.scheduler import Search, classify
from textaudit.errors import TextAuditError
from textaudit.models.batched import TIE, Classifier, PairView, decisions, scores_of, unknown_class
from textaudit.neighborhoods.builder import NeighborhoodBuilder
from textaudit.neighborhoods.mlm import MaskedLM, load_mlm
from textaudit.sentence import Sentence

__all__ = ["AttackResult", "SecondOrderAttack", "SOEnum", "SOBeam", "RandomBaseline", "pair_loss", "NATURALNESS", "PATCH_CHOICE"]

#: what a results header records of the naturalness constraint (absent: the paper's search)
NATURALNESS = "mlm-agreement"
#: what a results header records of how p is chosen under the constraint: the best-ranked of every applicable pair
#: that fits x0, unless another pair that fits x0 has a nearer finding (ℓ0 ≤ 1) — :meth:`SecondOrderAttack.search`
#: (absent: the ten best were tried, files written before issue #85; another value: an earlier choice of #85's; a
#: ``--resume`` of either is refused)
PATCH_CHOICE = "every fitting pair, nearest first"
#: vulnerable candidates checked for naturalness per masked-LM ask (in the order a finding is chosen)
NATURAL_CHUNK = 32


def pair_loss(p_x: np.ndarray, p_xp: np.ndarray, c: int) -> np.ndarray:
    """Return L(x; p) = −log(1 − f_min) − log(f_max) of Eq. 4 on class ``c`` (vectorised over rows)."""
    a, b = p_x[:, c].astype(np.float64), p_xp[:, c].astype(np.float64)
    fmin, fmax = np.minimum(a, b), np.maximum(a, b)
    eps = 1e-12
    return -np.log(np.clip(1 - fmin, eps, None)) - np.log(np.clip(fmax, eps, None))


class SecondOrderAttack(Attack):
    """Shared machinery: patch selection, batched scoring of x and x ⊕ p.

    Parameters
    ----------
    classifier: any :class:`~textaudit.models.Classifier` (a ``BatchedClassifier`` gives query counts).
    k: maximum number of words changed by the neighbourhood (rounds); default :attr:`default_k`.
    mlm: a masked LM (default: :func:`~textaudit.neighborhoods.load_mlm`'s choice).
    kappa, delta: κ and δ of the neighbourhood.
    patch_words: a :class:`PatchWords` (default: counter-fitted pairs ranked for ``classifier``).
    max_queries, time_budget, seed: see :class:`~textaudit.attacks.base.Attack`.
    blacklist: words the neighbourhood never introduces.
    language: how sentences split into words (``fr`` splits elisions; see :mod:`textaudit.sentence`).
    naturalness: the naturalness constraint (:mod:`textaudit.attacks.naturalness`); False: the paper's search.
    """

    default_k: ClassVar[int] = 6
    max_k: ClassVar[int | None] = None
    no_result = "no vulnerable example found"
    #: sentences scored between two budget checks inside one round / level
    chunk: ClassVar[int] = 1024
    #: under the naturalness constraint, whether a nearer finding (ℓ0 ≤ 1) under another pair that fits x0 is looked
    #: for before the search goes beyond ℓ0 = 1 under p (:meth:`search`)
    nearest_pair: ClassVar[bool] = True

    def __init__(self, classifier: Classifier, k: int | None = None, *, mlm: MaskedLM | None = None,
                 kappa: int = 20, delta: float = 3.0, patch_words: PatchWords | None = None,
                 max_queries: int | None = None, time_budget: float | None = None, seed: int = 0,
                 blacklist: Iterable[str] = (), language: str = "en", naturalness: bool = True):
        k = self.default_k if k is None else k
        self.check_k(k)
        super().__init__(classifier, max_queries=max_queries, time_budget=time_budget, seed=seed)
        self.k = k
        self.mlm = load_mlm() if mlm is None else mlm
        self.builder = NeighborhoodBuilder(self.mlm, kappa=kappa, delta=delta, blacklist=blacklist, seed=seed,
                                           language=language, no_repeats=naturalness)
        self.natural = Naturalness(self.mlm, kappa, delta) if naturalness else None
        self.checks = NaturalChecks()  # (shared by this attack's copies: a pair's, the probe's)
        self.patch_words = patch_words or PatchWords(self.classifier)

    def settings(self) -> dict:
        out = {"kappa": self.builder.kappa, "delta": self.builder.delta}
        if self.natural is not None:  # absent: the paper's search (every file written before the constraint)
            out["naturalness"] = NATURALNESS
            out["patch_choice"] = PATCH_CHOICE
        if self.builder.language != "en":
            out["language"] = self.builder.language
        digest = self.patch_words.pairs_digest()
        if digest is not None:  # the user's own synonym pairs (--pairs-file): the threat model, by content
            out["pairs_digest"] = digest
        return out

    def on_pair(self, context: str, side: str = "second") -> "SecondOrderAttack":
        """Patch words of a pair classifier are ranked on single words as the perturbed side with an
        empty other side (one ranking per side, shared by every pair), as the paper ranks them on
        single words."""
        bound = super().on_pair(context, side)
        ranked = self.__dict__.setdefault("_pair_patch_words", {})
        if side not in ranked:
            ranked[side] = self.patch_words.with_classifier(PairView(self.classifier, "", side))
        bound.patch_words = ranked[side]
        return bound  # type: ignore[return-value]

    def rank_patch_words(self, texts: Iterable[str], side: str | None = None) -> None:
        """Rank, in one batch before the attack, the patch-word pairs ``texts`` can use (w1 one of
        their words): what :meth:`PatchWords.select` will consult (``side``: of sentence pairs)."""
        atk = self if side is None else self.on_pair("", side)
        words: set[str] = set()
        for x in texts:
            try:
                words.update(t.lower() for t in self.parse(x).tokens)
            except TextAuditError:  # too short to attack: its record says so; nothing to rank
                continue
        atk.patch_words.fit(words)

    @classmethod
    def check_k(cls, k: int) -> None:
        """One-line error for a k this method cannot search (cheap: callers check before loading models)."""
        if k < 1:
            raise TextAuditError(f"k must be at least 1 (got {k})")
        if cls.max_k is not None and k > cls.max_k:
            raise TextAuditError(f"{cls.method} enumerates Neighbor_k exhaustively and supports k <= {cls.max_k} "
                                 f"(got {k}); use so-beam")

    # -- the template's hooks ----------------------------------------------------------------------
    def parse(self, text: str) -> Sentence:
        return self.builder.parse(text)

    def goal(self, x0: Sentence, prediction: int, label: int | None) -> Goal | Search:
        """c = the prediction of x0; p = the best-ranked patch word of x0 (skipped when there is none); with the
        naturalness constraint, the best-ranked of every applicable pair that fits x0 (a search)."""
        if self.natural is not None:
            return self._natural_goal(x0, prediction)
        patch = self.patch_words.select(x0)
        if patch is None:
            raise Skip("no patch word: no counter-fitted word occurs exactly once")
        return Goal(prediction, patch)

    def _natural_goal(self, x0: Sentence, prediction: int) -> Search:
        assert self.natural is not None
        patches = self.patch_words.select_many(x0, None, per_word=None)
        if not patches:
            raise Skip("no patch word: no counter-fitted word occurs exactly once")
        fitting = yield from self.natural.ask_fitting(x0, patches)
        if not fitting:
            raise Skip(f"no patch word fits this sentence: the masked LM finds each of its {len(patches)} synonym "
                       "pairs far less plausible than the word it would replace (--naturalness off tries them)")
        return Goal(prediction, fitting[0], tuple(fitting[1:]) if self.nearest_pair else ())

    def search(self, x0: Sentence, goal: Goal, budget: Budget, rng: np.random.Generator) -> Search:
        """x0 itself first (ℓ0 = 0 when it is already vulnerable), then the method's neighbourhood search.

        With the other pairs that fit x0 (:attr:`Goal.others`, the naturalness constraint), nearest first: x0 under
        every pair (p the best-ranked that flips it), then Neighbor_1(x0) under p, then under each other pair in
        rank order (:meth:`_nearer_pair`), and only then the method's search beyond ℓ0 = 1 under p. A finding under
        another pair names that pair."""
        assert goal.patch is not None
        pairs = [goal.patch, *goal.others]
        probs = yield classify(self.classifier, [x0] + [apply_patch(x0, q) for q in pairs])
        budget.scored += 1
        fx, fxp = self._decided(probs[:1].repeat(len(pairs), axis=0), probs[1:])
        flips = np.flatnonzero(fx != fxp)
        if flips.size:  # (x0 is natural: a person wrote it, and the pair was chosen to fit it)
            j = int(flips[0])
            return Found(x0, int(fx[j]), int(fxp[j]), float(probs[1 + j, goal.c] - probs[0, goal.c]),
                         patch=pairs[j] if j else None)
        return (yield from self.search_neighborhood(x0, goal.patch, goal.c, budget, rng, goal.others))

    def search_neighborhood(self, x0: Sentence, patch: Patch, c: int, budget: Budget,
                            rng: np.random.Generator, others: tuple[Patch, ...] = ()) -> Search:
        """The method's loop over the neighbourhood of x0 (a search: returns a :class:`Found` or None); when
        Neighbor_1(x0) has no finding under p, :meth:`_nearer_pair` looks under ``others`` before going on."""
        raise NotImplementedError

    def _nearer_pair(self, x0: Sentence, level1: list[Sentence], others: tuple[Patch, ...], c: int,
                     budget: Budget) -> Search:
        """A finding at ℓ0 = 1 under one of ``others`` (the pairs that fit x0 after p, best-ranked first), or None.
        ``level1`` is all of Neighbor_1(x0), p's position included (each pair protects its own). Every pair's
        neighbours are scored in one classifier ask and the first chunk of each pair's vulnerable candidates checked
        in one masked-LM ask (:meth:`Naturalness.ask_natural_groups`: full batches for the engine); the first pair in
        rank order with a finding wins (:meth:`_best_vulnerable`, as one pair after another would choose)."""
        per = [(q, xs) for q in others if (xs := [y for y in level1 if q.position not in x0.diff(y)])]
        if not per:
            return None
        probs = yield classify(self.classifier, [t for q, xs in per for t in (*xs, *(apply_patch(y, q) for y in xs))])
        scored, at = [], 0
        for q, xs in per:
            px, pxp = probs[at:at + len(xs)], probs[at + len(xs):at + 2 * len(xs)]
            at += 2 * len(xs)
            budget.scored += len(xs)
            fx, fxp = self._decided(px, pxp)
            fs = pxp[:, c] - px[:, c]
            idx = self._vulnerable(x0, xs, fx, fxp, fs)
            if idx:
                scored.append((q, xs, fx, fxp, fs, idx))
        assert self.natural is not None
        firsts = iter((yield from self.natural.ask_natural_groups(
            x0, [(q, [xs[i] for i in idx[:NATURAL_CHUNK]]) for q, xs, _, _, _, idx in scored])) if scored else [])
        for (q, xs, fx, fxp, fs, _), first in zip(scored, firsts):
            found = yield from self._best_vulnerable(x0, xs, fx, fxp, fs, q, budget, first=first)
            if found is not None:
                return Found(found.sentence, found.prediction, found.patched_prediction, found.f_soft, patch=q)
            if budget.exhausted():
                return None
        return None

    # -- helpers for the searches ------------------------------------------------------------------
    def _score(self, xs: list[Sentence], patch: Patch, c: int, budget: Budget) -> Search:
        """Return predictions of ``xs`` and ``xs ⊕ p``, F_soft and the losses (one classifier ask)."""
        probs = yield classify(self.classifier, xs + [apply_patch(x, patch) for x in xs])
        px, pxp = probs[: len(xs)], probs[len(xs):]
        budget.scored += len(xs)
        fx, fxp = self._decided(px, pxp)
        return fx, fxp, pxp[:, c] - px[:, c], pair_loss(px, pxp, c)

    def _decided(self, px: np.ndarray, pxp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The decisions on x and x ⊕ p, x ⊕ p's set to x's where either has none: a tie (equal top probabilities)
        or an unknown completion on either side reads as x and x ⊕ p agreeing; a flip crosses the boundary strictly
        on both sides."""
        fx, fxp = decisions(px), decisions(pxp)
        unknown = unknown_class(self.classifier)
        none = (fx == TIE) | (fxp == TIE) | ((fx == unknown) | (fxp == unknown) if unknown is not None else False)
        return fx, np.where(none, fx, fxp)

    def _score_within_budget(self, xs: list[Sentence], patch: Patch, c: int, budget: Budget) -> Search:
        """:meth:`_score` in chunks of :attr:`chunk`, checking the budget between chunks (a big
        classifier scoring one SO-Beam round can take minutes); None once it runs out."""
        parts = []
        for s in range(0, len(xs), self.chunk):
            if s and budget.exhausted():
                return None
            parts.append((yield from self._score(xs[s:s + self.chunk], patch, c, budget)))
        return tuple(np.concatenate([part[i] for part in parts]) for i in range(4))

    @staticmethod
    def _vulnerable(x0: Sentence, xs: list[Sentence], fx, fxp, fs) -> list[int]:
        """The vulnerable among ``xs`` in the order a finding is chosen: the smallest ℓ0, then the largest |F_soft|."""
        return sorted((i for i in range(len(xs)) if fx[i] != fxp[i]), key=lambda j: (len(x0.diff(xs[j])), -abs(fs[j])))

    def _best_vulnerable(self, x0: Sentence, xs: list[Sentence], fx, fxp, fs, patch: Patch,
                         budget: Budget, first: list | None = None) -> Search:
        """The vulnerable sentence with the smallest ℓ0 (ties: the largest |F_soft|), or None. With the naturalness
        constraint, in that order, :data:`NATURAL_CHUNK` at a time: the natural ones of the smallest ℓ0 in the first
        chunk that has any, the most natural of them (the smallest settled distance; ties: the largest |F_soft|).
        The refused are counted in ``budget.unnatural``. ``first``: the first chunk's verdicts, already asked."""
        idx = self._vulnerable(x0, xs, fx, fxp, fs)
        if self.natural is None:
            return Found(xs[idx[0]], int(fx[idx[0]]), int(fxp[idx[0]]), float(fs[idx[0]])) if idx else None
        if not idx:
            return None
        checks, key = self.checks, x0.tokens
        checks.open[key] = len(idx)
        try:
            for s in range(0, len(idx), NATURAL_CHUNK):
                part = idx[s:s + NATURAL_CHUNK]
                drop = first if s == 0 and first is not None else (
                    yield from self.natural.ask_natural(x0, [xs[i] for i in part], patch))
                good = [(len(x0.diff(xs[i])), d, -abs(fs[i]), n) for n, (i, d) in enumerate(zip(part, drop)) if d is not None]
                budget.unnatural += len(part) - len(good)
                checks.checked, checks.accepted = checks.checked + len(part), checks.accepted + len(good)
                checks.open[key] = len(idx) - s - len(part)
                if good:
                    i = part[min(good)[3]]
                    return Found(xs[i], int(fx[i]), int(fxp[i]), float(fs[i]))
            checks.refused += 1
            return None
        finally:
            checks.done += 1
            checks.open.pop(key, None)


class SOEnum(SecondOrderAttack):
    """SO-Enum: exhaustive search of Neighbor_k(x0), k ≤ 2, in order of distance."""

    method = "so-enum"
    default_k = 2
    max_k = 2

    def search_neighborhood(self, x0, patch, c, budget, rng, others=()):
        seen, frontier = {x0.tokens}, [x0]
        announced = self.checks.announced  # (the next level's contexts while this level is checked: an ETA's)
        try:
            for d in range(1, self.k + 1):  # level d = Neighbor_d(x0) \ Neighbor_{d-1}(x0), nearest first
                announced.pop(x0.tokens, None)
                wide = d == 1 and bool(others)  # (the other pairs' Neighbor_1 holds p's position too: one ask)
                every = [nb.sentence for nb in (yield from self.builder.ask_level(x0, frontier, seen, d,
                                                                                  [] if wide else [patch.position]))]
                level = [y for y in every if patch.position not in x0.diff(y)] if wide else every
                if d < self.k:
                    announced[x0.tokens] = len(level) * len(self.builder.positions(x0, [patch.position]))
                found = yield from self._check(x0, level, patch, c, budget)
                if found is None and wide and not budget.exhausted():
                    found = yield from self._nearer_pair(x0, every, others, c, budget)
                if found is not None or budget.exhausted() or not level:
                    return found
                frontier = level
            return None
        finally:
            announced.pop(x0.tokens, None)

    def _check(self, x0, level, patch, c, budget) -> Search:
        scored = (yield from self._score_within_budget(level, patch, c, budget)) if level else None
        if scored is None:
            return None
        fx, fxp, fs, _ = scored
        return (yield from self._best_vulnerable(x0, level, fx, fxp, fs, patch, budget))


class SOBeam(SecondOrderAttack):
    """SO-Beam (Alg. 2): beam search over Neighbor_1 expansions, keeping the β (``beam``) lowest-loss sentences."""

    method = "so-beam"

    def __init__(self, classifier: Classifier, k: int | None = None, *, beam: int = 20, mlm: MaskedLM | None = None,
                 kappa: int = 20, delta: float = 3.0, patch_words: PatchWords | None = None,
                 max_queries: int | None = None, time_budget: float | None = None, seed: int = 0,
                 blacklist: Iterable[str] = (), language: str = "en", naturalness: bool = True):
        check_beam(beam)
        super().__init__(classifier, k, mlm=mlm, kappa=kappa, delta=delta, patch_words=patch_words,
                         max_queries=max_queries, time_budget=time_budget, seed=seed, blacklist=blacklist,
                         language=language, naturalness=naturalness)
        self.beam = beam

    def settings(self) -> dict:
        return {**super().settings(), "beam": self.beam}

    def search_neighborhood(self, x0, patch, c, budget, rng, others=()):
        beam = [x0]
        seen = {x0.tokens}
        for step in range(self.k):
            wide = step == 0 and bool(others)  # (the other pairs' Neighbor_1 holds p's position too: one ask)
            every = []
            for nbrs in (yield from self.builder.ask_neighbors1(beam, protected=[] if wide else [patch.position])):
                for y in nbrs:
                    if y.tokens not in seen:
                        seen.add(y.tokens)
                        every.append(y)
            cands = [y for y in every if patch.position not in x0.diff(y)] if wide else every
            scored = (yield from self._score_within_budget(cands, patch, c, budget)) if cands else None
            if scored is None:
                return (yield from self._nearer_pair(x0, every, others, c, budget)) if wide and cands == [] else None
            fx, fxp, fs, loss = scored
            found = yield from self._best_vulnerable(x0, cands, fx, fxp, fs, patch, budget)
            if found is None and wide and not budget.exhausted():
                found = yield from self._nearer_pair(x0, every, others, c, budget)
            if found is not None or budget.exhausted():
                return found
            if self.natural is not None:  # vulnerable but unnatural (all refused): not sentences to search on from
                keep = np.flatnonzero(fx == fxp)
                cands, loss = [cands[i] for i in keep], loss[keep]
                if not cands:
                    return None
            if scores_of(self.classifier) == "labels":  # flat losses: a random β under the example's seed
                perm = rng.permutation(len(cands))
                order = perm[np.argsort(loss[perm], kind="stable")][: self.beam]
            else:
                order = np.argsort(loss, kind="stable")[: self.beam]
            beam = [cands[i] for i in order]
        return None


def check_beam(beam: int) -> None:
    """One-line error for a beam width β below 1."""
    if beam < 1:
        raise TextAuditError(f"beam width β must be at least 1 (got {beam})")


class RandomBaseline(SecondOrderAttack):
    """Random baseline (App. A.1): k rounds, each moving to a uniformly random neighbour."""

    method = "random"
    nearest_pair = False  # (a random walk under p, as the paper's baseline)

    def search_neighborhood(self, x0, patch, c, budget, rng, others=()):
        x = x0
        for _ in range(self.k):
            nbrs = (yield from self.builder.ask_neighbors1([x], protected=[patch.position]))[0]
            if not nbrs:
                return None
            x = nbrs[int(rng.integers(len(nbrs)))]
            fx, fxp, fs, _ = yield from self._score([x], patch, c, budget)
            found = yield from self._best_vulnerable(x0, [x], fx, fxp, fs, patch, budget)
            if found is not None or budget.exhausted():
                return found
        return None
