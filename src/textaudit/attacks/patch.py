"""Patch words p = (w1, w2): the synonym swap whose effect a second-order attack amplifies.

For a model f, every synonym pair (w1, w2) of the counter-fitted lists (resource
``counterfitted-neighbors``, or a list you give) is ranked by the model's own single-word score gap

    gap(w1, w2) = ½·‖f_soft(w2) − f_soft(w1)‖₁    (= |P(pos | w2) − P(pos | w1)| for two classes),

where f_soft(w) is the model's probability output on the single word w as the whole input. The
single-word probabilities are computed in batched passes (before an attack: the words of its data
and their neighbours) and cached on disk per model (``$TEXTAUDIT_CACHE/patch-scores/``), keyed by
the model's name and a fingerprint of its outputs.
For an input x0, p is the best-ranked pair with w1 occurring exactly once in x0 and w2 not
occurring; if there is none the example is *skipped*.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from typing import Iterable, Sequence

import numpy as np

import textaudit.notices as notices
from textaudit.errors import StopRun, TextAuditError
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

    def pairs_digest(self) -> str | None:
        """A digest of the synonym pairs given (``--pairs-file``; None for the counter-fitted default): a results
        header holds the threat model by content, so a ``--resume`` after the file changed is refused."""
        if self._pairs_in is None:
            return None
        return hashlib.sha256(json.dumps(sorted(set(self._pairs_in))).encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def __init__(self, classifier: Classifier, pairs: Iterable[tuple[str, str]] | None = None, *, disk_cache: bool = True):
        self.classifier = classifier
        self._pairs_in = None if pairs is None else [(a.lower(), b.lower()) for a, b in pairs]
        self.disk_cache = disk_cache
        self._best_for: dict[str, list[tuple[float, str]]] = {}  # w1 -> [(gap, w2)], best first
        self._w2_of: dict[str, list[str]] | None = None
        self._probs: dict[str, np.ndarray] = {}  # single-word probabilities scored so far
        self.refused: dict[str, str] = {}  # words the model refused (a per-input error), and why

    def with_classifier(self, classifier: Classifier) -> "PatchWords":
        """The same candidate pairs, ranked for another classifier (e.g. one side of a pair model)."""
        return PatchWords(classifier, self._pairs_in, disk_cache=self.disk_cache)

    # -- fitting -----------------------------------------------------------------------------------
    def _pairs(self) -> list[tuple[str, str]]:
        if self._pairs_in is not None:
            return self._pairs_in
        nbrs = counterfitted_neighbors()
        return [(w, n) for w, ns in nbrs.items() for n in ns if w != n]

    def _candidates(self) -> dict[str, list[str]]:
        """w1 -> its w2s, in the order of the pair list (no model query)."""
        if self._w2_of is None:
            w2_of: dict[str, list[str]] = {}
            for w1, w2 in self._pairs():
                w2_of.setdefault(w1, []).append(w2)
            if not w2_of:
                raise TextAuditError("no synonym pairs to choose patch words from")
            self._w2_of = w2_of
        return self._w2_of

    def _cache_path(self):
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(getattr(self.classifier, "name", "model")))[-60:]
        return cache_dir() / "patch-scores" / f"{safe}-{_fingerprint(self.classifier)}.npz"

    def _word_probs(self, words: list[str]) -> dict[str, np.ndarray]:
        """Single-word probabilities of ``words``: from memory, then the disk cache, the rest in one
        batched pass (then added to the disk cache)."""
        missing = [w for w in words if w not in self._probs and w not in self.refused]
        if missing and self.disk_cache:
            path = self._cache_path()
            if path.is_file() and not self._probs:
                try:
                    z = np.load(path, allow_pickle=False)
                    self._probs.update(zip(z["words"].tolist(), z["probs"]))
                except (OSError, ValueError, KeyError):
                    pass  # a damaged cache is recomputed
                missing = [w for w in words if w not in self._probs and w not in self.refused]
            if missing:
                self._probs.update(self._score(missing))
                known = sorted(self._probs)
                with atomic_path(path, suffix=".npz", unmarked="patch scores in textaudit's cache") as tmp:
                    np.savez(tmp, words=np.array(known), probs=np.stack([self._probs[w] for w in known]))
        elif missing:
            self._probs.update(self._score(missing))
        return self._probs

    def _score(self, words: list[str], *, say: bool = True) -> dict[str, np.ndarray]:
        """The single-word probabilities of ``words`` in one batch. A word the model refuses — a per-input error,
        as an endpoint's content filter answers HTTP 400; a :class:`~textaudit.errors.StopRun` (the endpoint
        down, a budget spent) still stops the run — is that word's alone, as the search treats a refused input
        as that example's error: a refused batch is split in halves until the refused words stand alone (a few
        more requests per refused word, not one per word), and they are said once and left out (no pair with
        them is ranked, so none is ever p)."""
        try:
            return dict(zip(words, self.classifier.predict_proba(words)))
        except StopRun:
            raise
        except TextAuditError as e:
            if len(words) == 1:
                self.refused[words[0]] = str(e)
                return {}
        half = len(words) // 2
        out = {**self._score(words[:half], say=False), **self._score(words[half:], say=False)}
        refused = [w for w in words if w not in out]
        if say and refused:
            shown = ", ".join(refused[:8]) + (" …" if len(refused) > 8 else "")
            notices.notice(f"the model refused {len(refused)} of the {len(words)} words the patch pairs are ranked by "
                           f"({shown}: {self.refused[refused[0]]}); no pair with them is used as p")
        return out

    def fit(self, words: Iterable[str] | None = None) -> "PatchWords":
        """Rank the pairs whose w1 is one of ``words`` (every pair when None): one batched pass over
        the words they need that are not scored yet, cached. An attack ranks the words of its data
        before it starts (:meth:`~textaudit.attacks.second_order.SecondOrderAttack.rank_patch_words`):
        p is only ever chosen among them, and a remote or LLM model is asked a few thousand words,
        not the lists' 50,000."""
        w2_of = self._candidates()
        w1s = list(w2_of) if words is None else [w for w in dict.fromkeys(x.lower() for x in words) if w in w2_of]
        todo = [w for w in w1s if w not in self._best_for]
        if not todo:
            return self
        probs = self._word_probs(sorted({w for w1 in todo for w in (w1, *w2_of[w1])}))
        for w1 in todo:  # a word the model refused (see _score) ranks no pair
            gaps = [(0.5 * float(np.abs(probs[w2] - probs[w1]).sum()), w2) for w2 in w2_of[w1]
                    if w1 in probs and w2 in probs]
            self._best_for[w1] = sorted(gaps, key=lambda t: (-t[0], t[1]))
        return self

    # -- selection ---------------------------------------------------------------------------------
    def select(self, x0: Sentence, exclude_positions: Sequence[int] = ()) -> Patch | None:
        """Return the best-ranked applicable p for ``x0`` (w1 exactly once, w2 absent), or None."""
        best = self.select_many(x0, 1, exclude_positions)
        return best[0] if best else None

    def select_many(self, x0: Sentence, m: int | None, exclude_positions: Sequence[int] = (), *,
                    per_word: int | None = 1) -> list[Patch]:
        """The ``m`` best-ranked applicable p for ``x0`` (None: all), largest gap first (ties by (w1, w2)); at
        most ``per_word`` of them share w1 (1: each word's best w2, as :meth:`select` ranks them; None: all)."""
        lower = [t.lower() for t in x0.tokens]
        self.fit(lower)  # nothing to do when the attack ranked its data's words beforehand
        present = set(lower)
        found: list[Patch] = []
        for i, w in enumerate(lower):
            if i in exclude_positions or lower.count(w) != 1 or w not in self._best_for:
                continue
            found.extend(Patch(w, w2, i, gap) for gap, w2 in
                         [(g, w2) for g, w2 in self._best_for[w] if w2 not in present][:per_word])
        found.sort(key=lambda p: (-p.score, p.w1, p.w2))
        return found[:m]

    def ranking(self, top: int = 20) -> list[tuple[str, str, float]]:
        """Return the ``top`` pairs with the largest gap (for reports)."""
        self.fit()
        flat = [(w1, w2, g) for w1, v in self._best_for.items() for g, w2 in v]
        flat.sort(key=lambda t: -t[2])
        return flat[:top]
