"""What a B_{p,k} run will cost, said before it is spent (``audit bias``'s cost lines).

The sentences to score are {x} ∪ Neighbor_k(x) for every source x of X_p (enumerated up to
``enumerate_k``; ``sample`` draws per source at each sampled level). |Neighbor_k(x)| is not known
before the masked LM is asked, but it grows with the number of positions a word can change at: with
n words (the pair's position protected, n − 1 changeable), the sentences at distance j are about
C(n − 1, j) · r_j, where r_j — sentences at distance j per choice of j positions — is measured on the
run's first unit (which runs alone for that: its seconds give the time estimate) and assumed for
every source. Before that first unit, r_j = :data:`PRIOR_PER_POSITION` ** j.
"""

from __future__ import annotations

from math import comb
from typing import Callable, Sequence

import numpy as np

import textaudit.notices as notices
from textaudit.fairness.pairs import Source
from textaudit.progress import ProjectedClock, duration

__all__ = ["BiasCost", "BiasClock", "PRIOR_PER_POSITION"]

#: candidates per changeable position assumed before the first unit is measured (κ = 20 within δ = 3
#: of the best logit keeps about this many whole words on SST-2)
PRIOR_PER_POSITION = 8.0

Job = tuple[tuple[str, str], Source, "int | None"]


class BiasCost:
    """Estimated sentences per unit (the progress bar's ETA weights) and the cost lines."""

    def __init__(self, k: int, enumerate_k: int, sample: int, scorers: int = 1):
        self.k, self.enumerate_k, self.sample, self.scorers = k, enumerate_k, sample, scorers
        self.rate = [PRIOR_PER_POSITION ** j for j in range(min(k, enumerate_k) + 1)]
        self.measured = False

    @staticmethod
    def _changeable(src: Source) -> int:
        return max(0, len(src.text.split()) - 1)

    def by_distance(self, job: Job) -> dict[int, float]:
        """Estimated sentences of one unit per distance j (a sampled unit: its draws, at its level)."""
        _, src, sampled_k = job
        if sampled_k is not None:
            return {sampled_k: float(self.sample)}
        n = self._changeable(src)
        return {j: comb(n, j) * r for j, r in enumerate(self.rate)}

    def sentences(self, job: Job) -> float:
        """Estimated sentences one unit scores (its cost, for the ETA)."""
        return sum(self.by_distance(job).values())

    def contexts(self, job: Job) -> float:
        """Estimated masked-LM contexts one unit asks: each sentence at a distance j below the enumerated k asks one
        context per position still changeable, Σ_{j<k} C(n, j) · r_j · (n − j) — most of a unit's time on a CPU, and
        it does not grow as the sentences do (a unit of long sentences asks more contexts per sentence scored); a
        sampled unit, one per step of each draw."""
        _, src, sampled_k = job
        if sampled_k is not None:
            return float(self.sample * sampled_k)
        n = self._changeable(src)
        return sum(comb(n, j) * r * (n - j) for j, r in enumerate(self.rate[:-1]))

    def measure(self, job: Job, distances: np.ndarray) -> None:
        """r_j from the first unit's sentences at each distance."""
        _, src, sampled_k = job
        if sampled_k is not None:
            return
        n = self._changeable(src)
        for j in range(1, len(self.rate)):
            if comb(n, j):
                self.rate[j] = float(np.sum(np.asarray(distances) == j)) / comb(n, j)
        self.measured = True

    def say_plan(self, pairs: Sequence[tuple[str, str]], jobs: Sequence[Job], done: int) -> None:
        sources = len({(p, s.id) for p, s, _ in jobs})
        resumed = f" ({done} done before)" if done else ""
        notices.say(f"cost: {len(jobs)} units to score{resumed} — {sources} source sentences of X_p for "
                    f"{', '.join('/'.join(p) for p in pairs[:4])}{' …' if len(pairs) > 4 else ''}, k ≤ {self.k}; "
                    "the first unit is timed for an estimate")

    def say_estimate(self, jobs: Sequence[Job], first: Job, first_sentences: int, seconds: float,
                     left: float | None = None) -> None:
        """After the first unit: the sentences per k (k = 0 exact) and the time — ``left`` (a
        :class:`BiasClock`'s projection of the texts and contexts), else the first unit's sentences per second."""
        per: dict[int, float] = {}
        for job in jobs:
            for j, n in self.by_distance(job).items():
                per[j] = per.get(j, 0.0) + n
        total = sum(per.values())
        rest = total - first_sentences
        pace = first_sentences / seconds if seconds > 0 else float("inf")
        shown = ", ".join(f"k={j}: {'' if j == 0 else '~'}{int(round(n)):,}" for j, n in sorted(per.items()))
        eta = duration(left) if left is not None else duration(rest / pace) if np.isfinite(pace) and rest > 0 else "0s"
        notices.say(f"cost: about {int(round(total)):,} neighbourhood sentences to score ({shown}; estimated from the first "
                    f"unit: {first_sentences:,} sentences in {seconds:.1f} s) — about {eta} more at that pace; "
                    "--max-sources N or a smaller --k bounds it")


class BiasClock(ProjectedClock):
    """The ETA of a bias run while its units are in flight (many at once, none finishing for minutes: a count of
    finished units says nothing then). The first unit runs alone: the texts it had scored, per estimated sentence
    (:meth:`BiasCost.sentences`), and the contexts the masked LM answered for it, per estimated context
    (:meth:`BiasCost.contexts`), project the whole run's (:class:`~textaudit.progress.ProjectedClock` turns what is
    not asked yet into seconds).

    ``counters()`` returns (texts scored, contexts answered, classifier seconds, masked-LM seconds) so far."""

    def __init__(self, cost: BiasCost, counters: Callable[[], tuple[float, float, float, float]]):
        super().__init__(counters)
        self.cost = cost

    def first_done(self, jobs: Sequence[Job], first: Job) -> None:
        """The first unit (of ``jobs``, all this run's units) finished: project the run's texts from its sentences
        and its contexts from the contexts estimated per unit (:meth:`BiasCost.contexts`), each scaled by what the
        first unit asked against its own estimate."""
        texts, contexts, _, _ = self.asked()
        mine, total = self.cost.sentences(first), sum(self.cost.sentences(j) for j in jobs)
        mine_c, total_c = self.cost.contexts(first), sum(self.cost.contexts(j) for j in jobs)
        if mine > 0:
            self.expected = (texts * total / mine, contexts * total_c / mine_c if mine_c > 0 else contexts * total / mine)
