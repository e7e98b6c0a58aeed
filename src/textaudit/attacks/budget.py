"""Per-example query and time budgets shared by every attack (second-order and first-order)."""

from __future__ import annotations

import time


class Budget:
    """Mixin: needs ``classifier``, ``max_queries``, ``time_budget``; call :meth:`_start_budget`
    at the start of an example, then :meth:`_over_budget` sets ``_stop_reason`` when one runs out."""

    def _queries(self) -> int:
        stats = getattr(self.classifier, "stats", None)
        return int(stats.unique_forwards) if stats is not None else 0

    def _start_budget(self, t0: float, q0: int) -> None:
        self._t0, self._q0, self._stop_reason = t0, q0, None

    def _over_budget(self) -> bool:
        if self.max_queries is not None and self._queries() - self._q0 >= self.max_queries:
            self._stop_reason = "query budget exhausted"
            return True
        if self.time_budget is not None and time.perf_counter() - self._t0 >= self.time_budget:
            self._stop_reason = "time budget exhausted"
            return True
        return False
