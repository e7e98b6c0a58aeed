"""A masked LM behind its caches, as :class:`~textaudit.models.batched.BatchedClassifier` is a classifier behind
its own: the one shape of a cached model on the masked-LM side.

:class:`CachedMaskedLM` answers ``candidates(batch, top)`` from three tiers, in order — an in-memory LRU of masked
contexts (``cache_size``), the neighbourhood store shared by runs, processes and Ray workers
(:mod:`textaudit.neighborhoods.store`), then the bare forward — and keeps what the forward computes in both. A
concrete masked LM (:class:`~textaudit.neighborhoods.masked_lm.HFMaskedLM`) says only what its forward is:
:meth:`~CachedMaskedLM.context_keys` (the key of each masked context) and :meth:`~CachedMaskedLM.compute` (the top
``n`` vocabulary ids and logits of the contexts no tier held), its vocabulary (``id_to_word``) and what identifies
its answers (:meth:`~CachedMaskedLM.compute_fingerprint`). Every forward computes the top max(κ,
:data:`~textaudit.neighborhoods.store.STORE_TOP`) candidates, so an answer from either tier is the first κ of what
the forward gives, with the store or without it.
"""

from __future__ import annotations

import os
import uuid
from collections import OrderedDict
from typing import Iterable, Sequence

from textaudit.errors import TextAuditError
from textaudit.neighborhoods.fingerprints import recall_fingerprint, remember_fingerprint
from textaudit.neighborhoods.store import STORE_TOP, context_key, serves, tops_per_query
from textaudit.neighborhoods.store_sync import WORKER_COUNTS

__all__ = ["CachedMaskedLM", "Query"]

#: one query: a sentence's words and the position to mask
Query = tuple[Sequence[str], int]


class CachedMaskedLM:
    """The tiers in front of a masked LM's forward (see the module docstring). ``store``: a
    :class:`~textaudit.neighborhoods.store.NeighborhoodStore`, or None; ``fingerprint_key``: where the
    fingerprint is remembered between processes (None: computed in each)."""

    name: str
    id_to_word: list[str]

    def __init__(self, *, name: str, cache_size: int = 200_000, store=None, fingerprint_key: str | None = None):
        self.name = name
        self.cache_size = cache_size
        #: in-memory LRU: masked context -> (n, its top-n candidates)
        self._cache: OrderedDict[tuple, tuple[int, list[tuple[str, float]]]] = OrderedDict()
        #: the neighbourhood store behind the LRU (:mod:`textaudit.neighborhoods.store`), or None
        self.store = store
        self._fingerprint: str | None = None
        self._fingerprint_key = fingerprint_key
        self._store_mlm: int | None = None
        self._store_pid: int | None = None
        self._stored_seconds: float | None = None
        self.store_hits = 0  # masked contexts the store answered ...
        self.store_misses = 0  # ... and those it did not (computed, then stored)
        self.store_seconds_saved = 0.0
        #: this object's name in its store's counters, the same in its copies on Ray workers
        self.token = uuid.uuid4().hex
        self.forwards = 0  # masked sentences actually run through the model
        self.cache_hits = 0
        self.forward_seconds = 0.0

    # -- what a concrete masked LM says ------------------------------------------------------------
    def context_keys(self, batch: list[Query]) -> list[tuple]:
        """The in-memory cache's key of each masked context (the same context, the same key)."""
        return [(tuple(words[:pos]), tuple(words[pos + 1:])) for words, pos in batch]

    def compute(self, todo: list[tuple], n: int) -> Iterable[tuple[tuple, list[int], list[float]]]:
        """``(key, vocabulary ids, logits)``, best first, of the top ``n`` candidates of each masked context
        ``todo`` (keys of :meth:`context_keys`) that no tier held: the forward."""
        raise NotImplementedError

    def compute_fingerprint(self) -> str:
        """What identifies this masked LM's answers (weights, tokenizer, precision, device kind)."""
        raise NotImplementedError

    @property
    def loaded(self) -> bool:
        """Whether the weights are in memory (a masked LM that loads them on first use says False until then)."""
        return True

    # -- the tiers ---------------------------------------------------------------------------------
    #: ``candidates`` takes one ``top`` per query (the engine merges asks of different tops into one call)
    tops_per_item = True

    def candidates(self, batch: list[Query], top: int | Sequence[int] = 20) -> list[list[tuple[str, float]]]:
        """Return, per ``(words, position)``, the ``top`` whole-word candidates ``(word, logit)``, best first
        (the original word is *not* removed here; the neighbourhood builder does that): from the in-memory
        cache, else the store, else the forward — a masked context shared by several sentences is computed
        once — and what is computed goes into both. ``top``: one for all, or one per query (asks of κ = 20 and
        of the naturalness constraint's P = 200 answered in the same forwards; each context is kept with what
        was asked of it)."""
        for words, pos in batch:
            if not 0 <= pos < len(words):
                raise TextAuditError(f"position {pos} is outside a sentence of {len(words)} words")
        tops = tops_per_query(top, len(batch))
        keys = self.context_keys(batch)
        need: dict[tuple, int] = {}
        for k, t in zip(keys, tops):
            need[k] = max(t, need.get(k, 0))
        found, todo = self._from_memory(keys, need)
        mlm_id = self._store_id() if todo else None
        skeys: dict[tuple, bytes] = {}
        if mlm_id is not None:
            skeys = {k: context_key(*batch[i]) for k, i in todo.items()}
            self._from_store(mlm_id, skeys, found, todo, need)
        if todo:
            n = max(max(need[k] for k in todo), STORE_TOP)
            t0 = self.forward_seconds
            rows = []
            for k, ids, vals in self.compute(list(todo), n):
                t = need[k]
                found[k] = self._remember(k, t, [(self.id_to_word[j], v) for j, v in zip(ids[:t], vals[:t])])
                kept = max(t, STORE_TOP)  # what the store keeps of it: what was asked (at least STORE_TOP)
                rows.append((k, kept, ids[:kept], vals[:kept]))
            if mlm_id is not None and rows:
                per = (self.forward_seconds - t0) / len(rows)
                self.store.put(mlm_id, [(skeys[k], kept, ids, vals) for k, kept, ids, vals in rows], per)  # type: ignore[union-attr]
        return [found[k][:t] for k, t in zip(keys, tops)]

    def _from_memory(self, keys: list[tuple], need: dict[tuple, int]) -> tuple[dict[tuple, list], dict[tuple, int]]:
        """The contexts the in-memory cache holds (enough of, or all there is), and the others (key → its first
        query)."""
        cache = self._cache
        found: dict[tuple, list[tuple[str, float]]] = {}
        todo: dict[tuple, int] = {}
        for i, k in enumerate(keys):
            if k in found or k in todo:
                continue
            hit = cache.get(k)
            if hit is not None and serves(hit[0], len(hit[1]), need[k]):
                cache.move_to_end(k)
                found[k] = hit[1]
            else:
                todo[k] = i
        self.cache_hits += len(keys) - len(todo)
        return found, todo

    def _from_store(self, mlm_id: int, skeys: dict[tuple, bytes], found: dict, todo: dict,
                    need: dict[tuple, int]) -> None:
        """Move the contexts of ``todo`` the store holds (enough of, or all there is) into ``found`` (and the
        in-memory cache), and count."""
        assert self.store is not None
        got = self.store.get(mlm_id, list(skeys.values()), min(need[k] for k in todo))
        words = self.id_to_word
        for k in list(todo):
            hit = got.get(skeys[k])
            if hit is None or not serves(hit[0], len(hit[1]), need[k]):
                continue
            _, ids, vals = hit
            t = need[k]
            found[k] = self._remember(k, t, [(words[j], v) for j, v in zip(ids[:t], vals[:t])])
            del todo[k]
        self.store_hits += len(skeys) - len(todo)
        self.store_misses += len(todo)
        self.store.record(mlm_id, len(skeys) - len(todo), len(todo), self.token)
        self.store_seconds_saved += (len(skeys) - len(todo)) * self._seconds_per_entry(mlm_id)

    def _remember(self, key: tuple, n: int, rows: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """Keep ``rows`` (the top ``n`` candidates: what was asked, the store keeps more) in the in-memory
        LRU; return them."""
        if self.cache_size:
            cache = self._cache
            cache[key] = (n, rows)
            while len(cache) > self.cache_size:
                cache.popitem(last=False)
        return rows

    def clear_cache(self) -> None:
        """Forget every cached candidate list."""
        self._cache.clear()

    def __getstate__(self) -> dict:
        """A copy sent to another process (a Ray worker) starts with an empty cache (see
        :meth:`BatchedClassifier.__getstate__ <textaudit.models.batched.BatchedClassifier.__getstate__>`)."""
        state = dict(self.__dict__)
        state["_cache"] = OrderedDict()
        state["_store_mlm"] = None  # the worker registers it in its own connection
        return state

    # -- the store ---------------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """What identifies this masked LM's answers: the store's key (:meth:`compute_fingerprint`), computed once
        — or, before the weights load, as another process remembered it for the same files."""
        if self._fingerprint is None:
            known = recall_fingerprint(self._fingerprint_key) if not self.loaded else None
            if known is not None:  # the same files, read by another process: the weights need not load
                self._fingerprint = known
            else:
                self._fingerprint = self.compute_fingerprint()
                remember_fingerprint(self._fingerprint_key, self._fingerprint)
        return self._fingerprint

    def _store_id(self) -> int | None:
        """This masked LM's id in :attr:`store` (registered on first use), or None without a store."""
        if self.store is None or not self.store.available:
            return None
        if self._store_mlm is None or self._store_pid != os.getpid():
            self._store_mlm = self.store.mlm_id(self.fingerprint, self.name, self.id_to_word)
            self._store_pid = os.getpid()
        return self._store_mlm

    def store_summary(self) -> dict | None:
        """``{"path", "hits", "misses", "hit_rate", "seconds_saved"}`` of this masked LM's store use in this
        process and in its Ray workers (summaries and ``--json``), or None without a store."""
        if self.store is None:
            return None
        hits, misses, saved = self.store_hits, self.store_misses, self.store_seconds_saved
        if self.token in WORKER_COUNTS:  # a Ray run: its workers' copies of this masked LM asked the store
            wh, wm = WORKER_COUNTS[self.token]
            mlm_id = self._store_id()
            hits, misses = hits + wh, misses + wm
            saved += wh * (self._seconds_per_entry(mlm_id) if mlm_id is not None else 0.0)
        asked = hits + misses
        return {"path": str(self.store.path), "hits": hits, "misses": misses,
                "hit_rate": round(hits / asked, 4) if asked else None, "mlm_seconds_saved": round(saved, 2)}

    def seconds_per_context(self) -> float | None:
        """Seconds a masked context takes to compute here (a forward, not an answer from the cache or the
        store): measured in this process, else as the store recorded it for this masked LM; None unknown."""
        if self.forwards:
            return self.forward_seconds / self.forwards
        mlm_id = self._store_id() if self.store is not None else None
        return (self._seconds_per_entry(mlm_id) or None) if mlm_id is not None else None

    def _seconds_per_entry(self, mlm_id: int) -> float:
        """Masked-LM seconds per masked sentence: measured in this process, else as the store recorded it."""
        if self.forwards:
            return self.forward_seconds / self.forwards
        if self._stored_seconds is None:
            row = next((m for m in self.store.mlms() if m["id"] == mlm_id), None) if self.store else None
            self._stored_seconds = float(row["seconds_per_entry"]) if row else 0.0
        return self._stored_seconds
