"""The neighbourhood store across the machines of a Ray cluster (:func:`textaudit.backends.register_sync`).

A worker on the driver's machine opens the driver's store file as any process does; one on another machine gets a
copy of it (``ship``: taken when the run starts, kept in the worker's memory: :data:`SHIPPED`), answers from it, and
sends back what it computed with each chunk's results (``collect``: each store's
:meth:`~textaudit.neighborhoods.store.NeighborhoodStore.drain`); the driver keeps it in its own file (``merge``:
:meth:`~textaudit.neighborhoods.store.NeighborhoodStore.absorb`) and counts its workers' hits and misses per asking
masked LM (:data:`WORKER_COUNTS`, read by the masked LM's summary). A worker's answers are those of the forward or of
the driver's store, so the records are a serial run's.

The store (:mod:`textaudit.neighborhoods.store`) registers every object it makes in :data:`LIVE` and one
:class:`StoreSync` with the backends; this module knows the stores only through those methods.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

__all__ = ["LIVE", "SHIPPED", "WORKER_COUNTS", "StoreSync"]

#: every store object of this process (the sync finds them here)
LIVE: weakref.WeakSet = weakref.WeakSet()
#: in a Ray worker on another machine than the driver's: {the driver's store file: its bytes as shipped}
SHIPPED: dict[str, bytes] = {}
#: in a Ray driver: the store hits and misses of its workers, per asking masked LM's token (their summaries)
WORKER_COUNTS: dict[str, tuple[int, int]] = {}


class StoreSync:
    """The store's :class:`~textaudit.backends.Sync`; ``open_store(key)`` opens the driver's store of a file (for
    what a worker computed when no store of this process has that file open for writing)."""

    def __init__(self, open_store: Callable[[str], Any]):
        self.open_store = open_store

    def ship(self) -> dict[str, bytes] | None:
        out: dict[str, bytes] = {}
        for store in list(LIVE):
            if store.key in out:
                continue
            data = store.ship()
            if data is not None:
                out[store.key] = data
        return out or None

    def receive(self, shipped: dict[str, bytes]) -> None:
        SHIPPED.update(shipped)

    def collect(self) -> dict[str, list[dict]] | None:
        out: dict[str, list[dict]] = {}
        for store in list(LIVE):
            box = store.drain()
            if box is not None:
                out.setdefault(store.key, []).append(box)
        return out or None

    def merge(self, collected: dict[str, list[dict]]) -> None:
        for key, boxes in collected.items():
            for box in boxes:
                for source, (h, m) in box["sources"].items():
                    wh, wm = WORKER_COUNTS.get(source, (0, 0))
                    WORKER_COUNTS[source] = (wh + h, wm + m)
                if box["remote"]:
                    mine = next((s for s in list(LIVE) if s.key == key and not s.is_copy and not s.readonly), None)
                    (mine or self.open_store(key)).absorb(box)
