"""Patch words p = (w1, w2): the synonym swap whose effect a second-order attack amplifies.

For a model f, every synonym pair (w1, w2) of the counter-fitted lists (resource
``counterfitted-neighbors``, or a list you give) is ranked by the model's own single-word score gap

    gap(w1, w2) = ½·‖f_soft(w2) − f_soft(w1)‖₁    (= |P(pos | w2) − P(pos | w1)| for two classes),

where f_soft(w) is the model's probability output on the single word w as the whole input. The
single-word probabilities are computed in one batched pass and cached on disk per model
(``$TEXTAUDIT_CACHE/patch-scores/``), keyed by the model's name and a fingerprint of its outputs.
For an input x0, p is the best-ranked pair with w1 occurring exactly once in x0 and w2 not
occurring; if there is none the example is *skipped*.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass
from typing import Iterable, Sequence

import numpy as np

from textaudit.errors import TextAuditError
from textaudit.files import atomic_path
from textaudit.lexicons import counterfitted_neighbors
from textaudit.models.batched import Classifier
from textaudit.resources import cache_dir
from textaudit.sentence import Sentence, restore_case

__all__ = ["Patch", "PatchWords", "apply_patch"]

_PROBES = ["the", "good", "bad", "a film .", "not at all", "wonderful", "terrible", "it is what it is ."]


@dataclass(frozen=True)
class Patch:
    """p = (w1, w2) at ``position`` of x0 (``score`` is the model's single-word gap)."""

    w1: str
    w2: str
    position: int
    score: float

    def to_dict(self) -> dict:
        return asdict(self)


def apply_patch(s: Sentence, patch: Patch) -> Sentence:
    """Return x ⊕ p: ``s`` with the word at the patch position replaced by w2 (case kept)."""
    return s.replace(patch.position, restore_case(patch.w2, s.tokens[patch.position]))


def _fingerprint(classifier: Classifier) -> str:
    probs = classifier.predict_proba(_PROBES)
    h = hashlib.sha1(np.round(probs, 5).tobytes())
    h.update(str(getattr(classifier, "name", "")).encode())
    return h.hexdigest()[:16]


class PatchWords:
    """Ranks synonym pairs by the model's single-word score gap and selects p for each input.

    Parameters
    ----------
    classifier: a :class:`~textaudit.models.Classifier`.
    pairs: optional explicit ``[(w1, w2), ...]``; default: every (word, neighbour) of the
        counter-fitted lists (both directions where the lists have them).
    disk_cache: cache single-word probabilities on disk per model.
    """

    def __init__(self, classifier: Classifier, pairs: Iterable[tuple[str, str]] | None = None, *, disk_cache: bool = True):
        self.classifier = classifier
        self._pairs_in = None if pairs is None else [(a.lower(), b.lower()) for a, b in pairs]
        self.disk_cache = disk_cache
        self._best_for: dict[str, list[tuple[float, str]]] | None = None

    def with_classifier(self, classifier: Classifier) -> "PatchWords":
        """The same candidate pairs, ranked for another classifier (e.g. one side of a pair model)."""
        return PatchWords(classifier, self._pairs_in, disk_cache=self.disk_cache)

    # -- fitting -----------------------------------------------------------------------------------
    def _pairs(self) -> list[tuple[str, str]]:
        if self._pairs_in is not None:
            return self._pairs_in
        nbrs = counterfitted_neighbors()
        return [(w, n) for w, ns in nbrs.items() for n in ns if w != n]

    def _word_probs(self, words: list[str]) -> dict[str, np.ndarray]:
        path = None
        if self.disk_cache:
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(getattr(self.classifier, "name", "model")))[-60:]
            path = cache_dir() / "patch-scores" / f"{safe}-{_fingerprint(self.classifier)}.npz"
            if path.is_file():
                try:
                    z = np.load(path, allow_pickle=False)
                    cached = dict(zip(z["words"].tolist(), z["probs"]))
                    if all(w in cached for w in words):
                        return cached
                except (OSError, ValueError, KeyError):
                    pass  # a damaged cache is recomputed
        probs = self.classifier.predict_proba(words)
        out = dict(zip(words, probs))
        if path is not None:
            with atomic_path(path, suffix=".npz") as tmp:
                np.savez(tmp, words=np.array(words), probs=probs)
        return out

    def fit(self) -> "PatchWords":
        """Score every pair (one batched pass over all words, cached) and index them by w1."""
        pairs = self._pairs()
        if not pairs:
            raise TextAuditError("no synonym pairs to choose patch words from")
        words = sorted({w for p in pairs for w in p})
        probs = self._word_probs(words)
        best: dict[str, list[tuple[float, str]]] = {}
        for w1, w2 in pairs:
            gap = 0.5 * float(np.abs(probs[w2] - probs[w1]).sum())
            best.setdefault(w1, []).append((gap, w2))
        for v in best.values():
            v.sort(key=lambda t: (-t[0], t[1]))
        self._best_for = best
        return self

    # -- selection ---------------------------------------------------------------------------------
    def select(self, x0: Sentence, exclude_positions: Sequence[int] = ()) -> Patch | None:
        """Return the best-ranked applicable p for ``x0`` (w1 exactly once, w2 absent), or None."""
        if self._best_for is None:
            self.fit()
        assert self._best_for is not None
        lower = [t.lower() for t in x0.tokens]
        present = set(lower)
        best: Patch | None = None
        for i, w in enumerate(lower):
            if i in exclude_positions or lower.count(w) != 1 or w not in self._best_for:
                continue
            for gap, w2 in self._best_for[w]:
                if w2 not in present:
                    if best is None or gap > best.score or (gap == best.score and (w, w2) < (best.w1, best.w2)):
                        best = Patch(w, w2, i, gap)
                    break
        return best

    def ranking(self, top: int = 20) -> list[tuple[str, str, float]]:
        """Return the ``top`` pairs with the largest gap (for reports)."""
        if self._best_for is None:
            self.fit()
        assert self._best_for is not None
        flat = [(w1, w2, g) for w1, v in self._best_for.items() for g, w2 in v]
        flat.sort(key=lambda t: -t[2])
        return flat[:top]
