"""What a B_{p,k} run will cost, said before it is spent (``audit bias``'s cost lines).

The sentences to score are {x} ∪ Neighbor_k(x) for every source x of X_p (enumerated up to
``enumerate_k``; ``sample`` draws per source at each sampled level). |Neighbor_k(x)| is not known
before the masked LM is asked, but it grows with the number of positions a word can change at: with
n words (the pair's position protected, n − 1 changeable), the sentences at distance j are about
C(n − 1, j) · r_j, where r_j — sentences at distance j per choice of j positions — is measured on the
run's first units, pooled (a fifth of them, :func:`first_units`; they run alone for that, and what they asked
gives the time estimate) and assumed for every source. Before them, r_j = :data:`PRIOR_PER_POSITION` ** j.
"""

from __future__ import annotations

from math import comb
from typing import Callable, Sequence

import numpy as np

import textaudit.notices as notices
from textaudit.fairness.pairs import Source
from textaudit.progress import ProjectedClock, duration

__all__ = ["BiasCost", "BiasClock", "PRIOR_PER_POSITION", "first_units"]

#: candidates per changeable position assumed before the first unit is measured (κ = 20 within δ = 3
#: of the best logit keeps about this many whole words on SST-2)
PRIOR_PER_POSITION = 8.0

Job = tuple[tuple[str, str], Source, "int | None"]

#: units timed before the estimate: a fifth of the run, at least one, at most FIRST_UNITS_MAX — one source's
#: neighbourhood says little of the others' (20 sources at k = 2: the first unit's rates projected half the sentences
#: and contexts the run then asked)
FIRST_UNITS_MAX = 16


def first_units(todo: int) -> int:
    """How many of ``todo`` units run first, alone, to time the rest."""
    return min(todo, FIRST_UNITS_MAX, max(1, -(-todo // 5)))


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

    def measure_units(self, units: Sequence[tuple[Job, np.ndarray]]) -> None:
        """r_j from the first units' sentences at each distance, pooled: Σ sentences at j / Σ C(n, j)."""
        for j in range(1, len(self.rate)):
            count = positions = 0.0
            for (_, src, sampled_k), distances in units:
                if sampled_k is None:
                    count += float(np.sum(np.asarray(distances) == j))
                    positions += comb(self._changeable(src), j)
            if positions:
                self.rate[j] = count / positions
        self.measured = self.measured or any(sampled_k is None for (_, _, sampled_k), _ in units)

    def say_plan(self, pairs: Sequence[tuple[str, str]], jobs: Sequence[Job], done: int, timed: int = 1) -> None:
        sources = len({(p, s.id) for p, s, _ in jobs})
        resumed = f" ({done} done before)" if done else ""
        first = "the first unit is" if timed == 1 else f"the first {timed} units are"
        notices.say(f"cost: {len(jobs)} units to score{resumed} — {sources} source sentences of X_p for "
                    f"{', '.join('/'.join(p) for p in pairs[:4])}{' …' if len(pairs) > 4 else ''}, k ≤ {self.k}; "
                    f"{first} timed for an estimate")

    def say_estimate(self, jobs: Sequence[Job], firsts: Sequence[Job], first_sentences: int, seconds: float,
                     left: float | None = None) -> None:
        """After the first units: the sentences per k (k = 0 exact) and the time — ``left`` (a
        :class:`BiasClock`'s projection of the texts and contexts), else the first units' sentences per second."""
        per: dict[int, float] = {}
        for job in jobs:
            for j, n in self.by_distance(job).items():
                per[j] = per.get(j, 0.0) + n
        total = sum(per.values())
        rest = total - first_sentences
        pace = first_sentences / seconds if seconds > 0 else float("inf")
        shown = ", ".join(f"k={j}: {'' if j == 0 else '~'}{int(round(n)):,}" for j, n in sorted(per.items()))
        eta = duration(left) if left is not None else duration(rest / pace) if np.isfinite(pace) and rest > 0 else "0s"
        which = "the first unit" if len(firsts) == 1 else f"the first {len(firsts)} units"
        notices.say(f"cost: about {int(round(total)):,} neighbourhood sentences to score ({shown}; estimated from {which}: "
                    f"{first_sentences:,} sentences in {seconds:.1f} s) — about {eta} more at that pace; "
                    "--max-sources N or a smaller --k bounds it")


class BiasClock(ProjectedClock):
    """The ETA of a bias run while its units are in flight (many at once, none finishing for minutes: a count of
    finished units says nothing then). The first units run alone: the texts they had scored, per estimated sentence
    (:meth:`BiasCost.sentences`), and the contexts the masked LM answered for them, per estimated context
    (:meth:`BiasCost.contexts`), project the whole run's (:class:`~textaudit.progress.ProjectedClock` turns what is
    not asked yet into seconds).

    ``counters()`` returns (texts scored, contexts answered, classifier seconds, masked-LM seconds) so far."""

    def __init__(self, cost: BiasCost, counters: Callable[[], tuple[float, float, float, float]],
                 levels: Callable[[], Sequence[float]] | None = None):
        super().__init__(counters, levels)
        self.cost = cost

    def first_done(self, jobs: Sequence[Job], firsts: Sequence[Job]) -> None:
        """The first units (of ``jobs``, all this run's units) finished: project the run's texts from their sentences
        and its contexts from the contexts estimated per unit (:meth:`BiasCost.contexts`), each scaled by what the
        first units asked against their own estimate."""
        texts, contexts, _, _ = self.asked()
        mine, total = sum(self.cost.sentences(j) for j in firsts), sum(self.cost.sentences(j) for j in jobs)
        mine_c, total_c = sum(self.cost.contexts(j) for j in firsts), sum(self.cost.contexts(j) for j in jobs)
        if mine > 0:
            self.expected = (texts * total / mine, contexts * total_c / mine_c if mine_c > 0 else contexts * total / mine)
