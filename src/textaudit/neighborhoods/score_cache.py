"""The score cache: the classifiers' answers kept in the store across runs (``--score-cache``).

A classifier's answer to a text is kept under a key derived from its declared traits alone
(:func:`score_identity`: :func:`textaudit.models.traits.answer_key`) and the text's digest (:func:`score_key`), in
the store in effect (:mod:`textaudit.neighborhoods.store`: its ``classifiers`` and ``scores`` tables, every row with
its CRC and checked as an answer before it is served). Which models' answers are kept is the choice in effect
(:func:`score_cache_choice`): ``auto`` those of fingerprinted weights (zoo, ``hf:``, ``llm:``), ``all`` plug-ins' and
endpoints' too, ``off`` none; never label-only answers sampled from an endpoint (each run draws anew).

The cache is injected, not installed: :class:`use_score_cache` puts :func:`score_cache_for` in
:data:`textaudit.models.batched.SCORE_CACHE` for the time of a ``with`` block (every command enters one, with its
``--score-cache``), and a classifier asks it once, on its first miss, for its :class:`ScoreView`. Importing this
module changes nothing; code that runs audits itself enters ``with use_score_cache("auto"):`` to share the commands'
cache.
"""

from __future__ import annotations

import hashlib
import os
import weakref
from typing import Sequence

from textaudit.errors import TextAuditError
from textaudit.model_traits import traits_of
from textaudit.models.batched import SCORE_CACHE
from textaudit.models.traits import answer_key, answer_traits
from textaudit.neighborhoods.store import SCORES_FORMAT, NeighborhoodStore, current_store

__all__ = ["SCORE_CACHE_CHOICES", "score_cache_choice", "use_score_cache", "score_key", "score_identity", "ScoreView",
           "score_cache_for"]

_SCORE_CHOICE: list[str | None] = [None]
SCORE_CACHE_CHOICES = ("auto", "all", "off")


def score_cache_choice() -> str:
    """``--score-cache`` in effect (``TEXTAUDIT_SCORE_CACHE`` else ``auto``): ``auto`` keeps the scores of
    models with fingerprinted weights, ``all`` those of plug-ins and endpoints too, ``off`` none."""
    choice = (_SCORE_CHOICE[0] or os.environ.get("TEXTAUDIT_SCORE_CACHE") or "auto").strip().lower()
    if choice not in SCORE_CACHE_CHOICES:
        raise TextAuditError(f"--score-cache must be one of {', '.join(SCORE_CACHE_CHOICES)} (got {choice!r})")
    return choice


class use_score_cache:
    """``with use_score_cache("auto" | "all" | "off" | None): ...``: the score cache injected into the classifiers that
    first miss inside (:data:`textaudit.models.batched.SCORE_CACHE`), under that choice (None: ``TEXTAUDIT_SCORE_CACHE``
    else ``auto``). Every command runs inside one (``--score-cache``); outside one, nothing is kept on disk."""

    def __init__(self, value: str | None):
        self.value = value.strip().lower() if value is not None else None
        if self.value is not None and self.value not in SCORE_CACHE_CHOICES:
            raise TextAuditError(f"--score-cache must be one of {', '.join(SCORE_CACHE_CHOICES)} (got {value!r})")

    def __enter__(self) -> None:
        self._prev = _SCORE_CHOICE[0], SCORE_CACHE[0]
        _SCORE_CHOICE[0], SCORE_CACHE[0] = self.value, score_cache_for

    def __exit__(self, *exc: object) -> None:
        _SCORE_CHOICE[0], SCORE_CACHE[0] = self._prev


def score_key(text: object) -> bytes:
    """A text's key in the score cache: a 16-byte BLAKE2b digest of it (a sentence pair: of both texts, marked)."""
    if isinstance(text, tuple):
        data = b"\x01" + text[0].encode("utf-8", "surrogatepass") + b"\x00" + text[1].encode("utf-8", "surrogatepass")
    else:
        data = b"\x00" + str(text).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).digest()


def score_identity(clf) -> str | None:
    """The key of a classifier's kept answers, or None when they may not be kept: derived from its declared
    :class:`~textaudit.models.traits.AnswerTraits` alone (:func:`~textaudit.models.traits.answer_key`: weights or code
    and the object named, output, labels, scoring, precision, device). None without a fingerprint, for label-only
    answers sampled from an endpoint (samples > 1 or a temperature above 0: every run draws anew), for a plug-in or
    an endpoint unless ``--score-cache all``, and with ``--score-cache off``."""
    choice = score_cache_choice()
    traits = traits_of(clf)
    if choice == "off" or (traits.score_kind != "weights" and choice != "all"):
        return None
    if traits.scores == "labels" and (traits.samples > 1 or traits.temperature > 0):
        return None
    answer = answer_traits(clf)
    return answer_key(answer, SCORES_FORMAT) if answer is not None else None


class ScoreView:
    """One classifier's view of the score cache (:data:`textaudit.models.batched.SCORE_CACHE`): its identity is
    read at every call (an endpoint learns how it scores at its first answer), so answers are looked up and kept
    under the identity they were computed under."""

    def __init__(self, store: NeighborhoodStore, clf):
        self.store, self._clf = store, weakref.ref(clf)
        self._ids: dict[str, tuple[int, int]] = {}
        self._fixed: tuple[int, int] | None = None

    def _id(self) -> tuple[int, int] | None:
        if self._fixed is not None:
            return self._fixed
        clf = self._clf()
        identity = score_identity(clf) if clf is not None else None
        if identity is None:
            return None
        if identity not in self._ids:
            classes = clf._num_classes
            found = self.store.classifier_id(identity, str(clf.name), int(classes) if classes else None)
            if found is None:  # not in the store, and the model has not answered yet to register it
                return None
            self._ids[identity] = found
            if traits_of(clf).score_kind != "remote":  # only an endpoint's identity can change (once it has answered)
                self._fixed = found
        return self._ids[identity]

    def lookup(self, keys: Sequence) -> dict:
        found = self._id()
        if found is None:
            return {}
        digests = {score_key(k): k for k in keys}
        clf = self._clf()
        got = self.store.get_scores(found[0], list(digests), found[1], multilabel=traits_of(clf).multilabel)
        return {digests[d]: row for d, row in got.items()}

    def keep(self, rows, *, replace: bool = False) -> None:
        found = self._id()
        if found is not None:
            self.store.put_scores(found[0], ((score_key(k), row) for k, row in rows), replace=replace)


def score_cache_for(clf) -> ScoreView | None:
    """The provider of :data:`textaudit.models.batched.SCORE_CACHE`: the store in effect, if its choice lets
    this classifier's scores be kept (:func:`score_identity` is asked again at every call)."""
    if score_identity(clf) is None:  # (an endpoint's identity may grow once it answers: asked again at every call)
        return None
    store = current_store()
    if store is None or store.readonly:
        return None
    return ScoreView(store, clf)
