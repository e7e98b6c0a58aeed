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
  else keep the β lowest-loss new sentences.
- Random baseline (App. A.1): k rounds, each moving to a uniformly random neighbour.
x0 itself is checked first: if it is already vulnerable, the attack succeeds with ℓ0 = 0 (as in
the reference implementation). The patch word's position is protected throughout.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Iterable

import numpy as np

from textaudit.attacks.patch import Patch, PatchWords, apply_patch
from textaudit.attacks.budget import Budget
from textaudit.errors import TextAuditError
from textaudit.neighborhoods.builder import NeighborhoodBuilder
from textaudit.neighborhoods.sentence import Sentence

__all__ = ["AttackResult", "SecondOrderAttack", "SOEnum", "SOBeam", "RandomBaseline", "pair_loss"]


def pair_loss(p_x: np.ndarray, p_xp: np.ndarray, c: int) -> np.ndarray:
    """Return L(x; p) = −log(1 − f_min) − log(f_max) of Eq. 4 on class ``c`` (vectorised over rows)."""
    a, b = p_x[:, c].astype(np.float64), p_xp[:, c].astype(np.float64)
    fmin, fmax = np.minimum(a, b), np.maximum(a, b)
    eps = 1e-12
    return -np.log(np.clip(1 - fmin, eps, None)) - np.log(np.clip(fmax, eps, None))


@dataclass
class AttackResult:
    """One attacked example. ``status``: success / failed / skipped / error."""

    text: str
    label: int | None
    prediction: int | None
    status: str
    method: str
    k: int
    pair: list[str] | None = None
    patch_position: int | None = None
    vulnerable: str | None = None
    vulnerable_patched: str | None = None
    vulnerable_prediction: int | None = None
    vulnerable_patched_prediction: int | None = None
    f_soft: float | None = None
    l0: int | None = None
    queries: int = 0
    mlm_queries: int = 0
    sentences_scored: int = 0
    seconds: float = 0.0
    mlm: str | None = None
    reason: str | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(d.pop("extra"))
        return d


class SecondOrderAttack(Budget):
    """Shared machinery: patch selection, batched scoring of x and x ⊕ p, budgets, bookkeeping.

    Parameters
    ----------
    classifier: any :class:`~textaudit.models.Classifier` (a ``BatchedClassifier`` gives query counts).
    k: maximum number of words changed by the neighbourhood (rounds).
    mlm: a masked LM (default: :func:`~textaudit.neighborhoods.load_mlm`'s choice).
    kappa, delta: κ and δ of the neighbourhood.
    patch_words: a :class:`PatchWords` (default: counter-fitted pairs ranked for ``classifier``).
    max_queries: give up (status failed, reason "query budget") after this many classifier texts.
    time_budget: give up after this many seconds per example.
    seed: seeds the random baseline.
    """

    method = "so"

    def __init__(self, classifier, k: int = 6, *, mlm=None, kappa: int = 20, delta: float = 3.0,
                 patch_words: PatchWords | None = None, max_queries: int | None = None,
                 time_budget: float | None = None, seed: int = 0, blacklist: Iterable[str] = ()):
        from textaudit.models import as_classifier

        if k < 1:
            raise TextAuditError(f"k must be at least 1 (got {k})")
        self.classifier = as_classifier(classifier)
        self.k = k
        if mlm is None:
            from textaudit.neighborhoods.mlm import load_mlm

            mlm = load_mlm()
        self.mlm = mlm
        self.builder = NeighborhoodBuilder(mlm, kappa=kappa, delta=delta, blacklist=blacklist, seed=seed)
        self.patch_words = patch_words or PatchWords(self.classifier)
        self.max_queries = max_queries
        self.time_budget = time_budget
        self.rng = np.random.default_rng(seed)

    # -- public ------------------------------------------------------------------------------------
    def attack(self, text: str, label: int | None = None) -> AttackResult:
        """Attack one example and return an :class:`AttackResult` (never raises for a bad sentence:
        an input the neighbourhood cannot handle comes back with status "error" and the reason)."""
        t0 = time.perf_counter()
        q0 = self._queries()
        m0 = getattr(self.mlm, "forwards", 0)
        res = AttackResult(text=text, label=label, prediction=None, status="failed", method=self.method, k=self.k,
                           mlm=getattr(self.mlm, "name", None))
        self._scored = 0
        try:
            x0 = self.builder.parse(text)
            p0 = self.classifier.predict_proba([x0.text()])[0]
            res.prediction = int(p0.argmax())
            patch = self.patch_words.select(x0)
            if patch is None:
                res.status, res.reason = "skipped", "no patch word: no counter-fitted word occurs exactly once"
            else:
                res.pair, res.patch_position = [patch.w1, patch.w2], patch.position
                self._start_budget(t0, q0)
                found = self._search(x0, patch, res.prediction)
                if found is not None:
                    x, fx, fxp, fs = found
                    res.status = "success"
                    res.vulnerable, res.vulnerable_patched = x.text(), apply_patch(x, patch).text()
                    res.vulnerable_prediction, res.vulnerable_patched_prediction = fx, fxp
                    res.f_soft, res.l0 = round(fs, 6), len(x0.diff(x))
                elif res.reason is None:
                    res.reason = getattr(self, "_stop_reason", None) or "no vulnerable example found"
        except TextAuditError as e:
            res.status, res.reason = "error", str(e)
        res.sentences_scored = getattr(self, "_scored", 0)
        res.queries = self._queries() - q0
        res.mlm_queries = getattr(self.mlm, "forwards", 0) - m0
        res.seconds = round(time.perf_counter() - t0, 3)
        return res

    # -- helpers for the searches ------------------------------------------------------------------
    def _score(self, xs: list[Sentence], patch: Patch, c: int):
        """Return predictions, F_soft and losses of ``xs`` and ``xs ⊕ p`` (one batched call)."""
        texts = [x.text() for x in xs] + [apply_patch(x, patch).text() for x in xs]
        probs = self.classifier.predict_proba(texts)
        px, pxp = probs[: len(xs)], probs[len(xs):]
        self._scored += len(xs)
        return px.argmax(1), pxp.argmax(1), pxp[:, c] - px[:, c], pair_loss(px, pxp, c)

    #: sentences scored between two budget checks inside one round / level
    chunk = 1024

    def _score_within_budget(self, xs: list[Sentence], patch: Patch, c: int):
        """:meth:`_score` in chunks of :attr:`chunk`, checking the time/query budget between chunks
        (a big classifier scoring one SO-Beam round can take minutes); None once it runs out."""
        parts = []
        for s in range(0, len(xs), self.chunk):
            if s and self._over_budget():
                return None
            parts.append(self._score(xs[s:s + self.chunk], patch, c))
        return tuple(np.concatenate([part[i] for part in parts]) for i in range(4))

    def _best_vulnerable(self, x0: Sentence, xs: list[Sentence], fx, fxp, fs):
        idx = [i for i in range(len(xs)) if fx[i] != fxp[i]]
        if not idx:
            return None
        i = min(idx, key=lambda j: (len(x0.diff(xs[j])), -abs(fs[j])))
        return xs[i], int(fx[i]), int(fxp[i]), float(fs[i])

    def _search(self, x0: Sentence, patch: Patch, c: int):
        self._scored, self._stop_reason = 0, None
        fx, fxp, fs, _ = self._score([x0], patch, c)
        if fx[0] != fxp[0]:
            return x0, int(fx[0]), int(fxp[0]), float(fs[0])
        return self._search_neighbourhood(x0, patch, c)

    def _search_neighbourhood(self, x0: Sentence, patch: Patch, c: int):  # pragma: no cover - abstract
        raise NotImplementedError


class SOEnum(SecondOrderAttack):
    """SO-Enum: exhaustive search of Neighbor_k(x0), k ≤ 2, in order of distance."""

    method = "so-enum"

    def __init__(self, classifier, k: int = 2, **kwargs):
        if k > 2:
            raise TextAuditError(f"SO-Enum enumerates Neighbor_k exhaustively and supports k <= 2 (got {k}); use SO-Beam")
        super().__init__(classifier, k, **kwargs)

    def _search_neighbourhood(self, x0, patch, c):
        level: list[Sentence] = []
        current = 1
        for nb in self.builder.iter_neighbors(x0, self.k, protected=[patch.position]):
            if nb.distance != current:
                found = self._check(x0, level, patch, c)
                if found is not None or self._over_budget():
                    return found
                level, current = [], nb.distance
            level.append(nb.sentence)
        return self._check(x0, level, patch, c)

    def _check(self, x0, level, patch, c):
        scored = self._score_within_budget(level, patch, c) if level else None
        if scored is None:
            return None
        fx, fxp, fs, _ = scored
        return self._best_vulnerable(x0, level, fx, fxp, fs)


class SOBeam(SecondOrderAttack):
    """SO-Beam (Alg. 2): beam search over Neighbor_1 expansions, keeping the β lowest-loss sentences."""

    method = "so-beam"

    def __init__(self, classifier, k: int = 6, *, beam: int = 20, **kwargs):
        if beam < 1:
            raise TextAuditError(f"beam width β must be at least 1 (got {beam})")
        super().__init__(classifier, k, **kwargs)
        self.beam = beam

    def _search_neighbourhood(self, x0, patch, c):
        beam = [x0]
        seen = {x0.tokens}
        for _ in range(self.k):
            cands = []
            for nbrs in self.builder.neighbors1(beam, protected=[patch.position]):
                for y in nbrs:
                    if y.tokens not in seen:
                        seen.add(y.tokens)
                        cands.append(y)
            if not cands:
                return None
            scored = self._score_within_budget(cands, patch, c)
            if scored is None:
                return None
            fx, fxp, fs, loss = scored
            found = self._best_vulnerable(x0, cands, fx, fxp, fs)
            if found is not None or self._over_budget():
                return found
            order = np.argsort(loss, kind="stable")[: self.beam]
            beam = [cands[i] for i in order]
        return None


class RandomBaseline(SecondOrderAttack):
    """Random baseline (App. A.1): k rounds, each moving to a uniformly random neighbour."""

    method = "random"

    def _search_neighbourhood(self, x0, patch, c):
        x = x0
        for _ in range(self.k):
            nbrs = [y for y in self.builder.neighbors1([x], protected=[patch.position])[0]]
            if not nbrs:
                return None
            x = nbrs[int(self.rng.integers(len(nbrs)))]
            fx, fxp, fs, _ = self._score([x], patch, c)
            found = self._best_vulnerable(x0, [x], fx, fxp, fs)
            if found is not None or self._over_budget():
                return found
        return None
