"""How long ``audit certify`` (randomized smoothing) will take, said once its first examples are timed.

An example's cost is its draws — ``selection + samples`` texts (n0 + n) — and, when it is certified and the
second-order view is on, its view: the masked LM's contexts for its neighbours, ``neighbors`` neighbours certified
(n0 + n each) and synonym patches on those whose radius is below 1 (as many again each, stopping at a flip). How
many inputs are certified, and how many patches their neighbours need, depends on the model: no one knows it before.
So the first examples (a fifth of the run, :data:`FIRST_MIN` to :data:`FIRST_MAX`) run first, alone, and are timed:

    T_rest ≈ (N − n) · (a + s · b)

with a the seconds of one example's draws, b those of one viewed example's view (its texts beyond the draws and its
contexts, at the pace measured on them), and s the share of inputs viewed: (v + 1) / (n + 2) of the n timed, v
viewed (Laplace's rule: 0 of 4 viewed does not prove that none will be). The same projection, in texts and
contexts, gives the progress line's ETA (:class:`~textaudit.progress.ProjectedClock`), and s is re-made as the run
goes from every example past its draws: those finished and those in their view (``views()``: the views begun). An
example not viewed finishes right after its draws and one viewed runs on, so the finished alone read s low while the
viewed ones run (the ETAs of 20 examples read 2–4× low in their last third that way); counted in their view, they
are not missed.
"""

from __future__ import annotations

import time
from typing import Callable

from textaudit.progress import ProjectedClock, duration

__all__ = ["CertifyClock", "FIRST_MIN", "FIRST_MAX", "first_examples"]

#: examples timed before the estimate: a fifth of the run, at least FIRST_MIN and at most FIRST_MAX
FIRST_MIN = 4
FIRST_MAX = 16


def first_examples(todo: int) -> int:
    """How many of ``todo`` examples run first, alone, to time the rest."""
    return min(todo, FIRST_MAX, max(FIRST_MIN, -(-todo // 5)))


class CertifyClock(ProjectedClock):
    """The estimate said after the first examples and the ETA of the rest (``draws``: texts one example's draws ask,
    n0 + n; ``neighbors``: neighbours certified per viewed input, 0 without the second-order view; ``todo``: the
    examples of this run)."""

    def __init__(self, counters: Callable[[], tuple[float, float, float, float]], *, todo: int, draws: int,
                 neighbors: int = 0, views: Callable[[], int] | None = None):
        super().__init__(counters)
        self.todo, self.draws, self.neighbors = todo, draws, neighbors
        self.view = neighbors > 0
        self.views = views
        self.views_start = views() if views is not None else 0
        self.first = first_examples(todo)
        self.timed = self.viewed = 0  # the first examples, and those of them viewed
        self.finished = self.finished_viewed = 0  # every example finished (:meth:`finish`), and those viewed
        self.per_view: tuple[float, float] = (0.0, 0.0)  # texts and contexts of one viewed example's view

    def share(self) -> float:
        """s: the share of inputs viewed, (v + 1) / (n + 2) of the n examples past their draws — finished, or in
        their view — v of them viewed (0 without the view)."""
        if not self.view:
            return 0.0
        viewed, n = max(self.finished_viewed, self.viewed), max(self.finished, self.timed)
        in_view = max(self.views() - self.views_start - viewed, 0) if self.views is not None else 0
        return (viewed + in_view + 1) / (n + in_view + 2)

    def finish(self, record: dict) -> None:
        """An example of the run finished (the first ones too): the share viewed is re-made with it."""
        self.finished += 1
        self.finished_viewed += bool(record.get("neighbors"))

    def left(self) -> float | None:
        if self.expected is not None:
            self.expected = self.projected(self.share())
        return super().left()

    def add(self, record: dict) -> bool:
        """A first example finished (its record); True once all of them have: the projection is then made."""
        self.timed += 1
        self.viewed += bool(record.get("neighbors"))
        if self.timed < self.first:
            return False
        texts, contexts, _, _ = self.asked()
        if self.viewed:
            self.per_view = (max(texts - self.timed * self.draws, 0.0) / self.viewed, contexts / self.viewed)
        else:  # none viewed: a view costs at least its neighbours' draws (and their masked-LM contexts, unknown)
            self.per_view = (float(self.neighbors * self.draws), 0.0)
        self.expected = self.projected(self.share())
        return True

    def projected(self, share: float) -> tuple[float, float]:
        """(texts, contexts) of the whole run with a ``share`` of the inputs viewed."""
        q_v, c_v = self.per_view
        return self.todo * (self.draws + share * q_v), self.todo * share * c_v

    def estimate_line(self) -> str | None:
        """The line said once the first examples are timed (None before, or when they were all the run)."""
        if self.expected is None or self.todo <= self.timed:
            return None
        left = self.left()
        if left is None:
            return None
        elapsed = time.monotonic() - self.t0
        view = (f", {self.viewed} of them certified and viewed (the view: {self.per_view[0]:,.0f} texts and "
                f"{self.per_view[1]:,.0f} contexts each; expected for {100 * self.share():.0f}% of the inputs)"
                if self.view else "")
        return (f"time: about {duration(left)} more for the other {self.todo - self.timed} examples — the first "
                f"{self.timed} took {duration(elapsed)}{view}; the progress line's ETA follows the texts and contexts asked")
