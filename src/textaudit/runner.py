"""The one resumable loop behind every long command (attack, bias, learnability, perturbscore build).

:class:`ResumableRun` owns the results file (:class:`~textaudit.formats.jsonl.JsonlWriter`: append and
flush per record, a cut-off last line repaired), the ids already done (``--resume``), and the
progress bar. A command supplies only its jobs and a factory of the work of one job (built once
per worker; :mod:`textaudit.backends` decides where the jobs run)::

    with ResumableRun(output, resume=resume) as run:
        for job_id, record in run.results(jobs, lambda: work, desc="so-beam", unit="ex"):
            run.write({"id": job_id, **record})
            run.show(success="3/4")
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar

import textaudit.notices as notices
from textaudit.backends import Backend, SerialBackend
from textaudit.errors import StopRun, TextAuditError
from textaudit.formats.jsonl import JsonlWriter, RecordSpec, check_output
from textaudit.progress import follow, weigh
from textaudit.progress import progress as progress_bar
from textaudit.shards import Shard, in_shard, parse_shard, shard_name

__all__ = ["ResumableRun", "check_sharded_output"]

T = TypeVar("T")


class ResumableRun:
    """A results file being written (see the module docstring).

    Parameters
    ----------
    output: the JSONL file (None: records are kept in memory only).
    resume: continue ``output`` (its records are :attr:`previous`, their ids :attr:`done`).
    id_key: the field that identifies a finished job.
    keep: keep every record in memory (:attr:`records`); False for runs of millions of lines.
    progress: show a progress bar on stderr.
    command, config: what the file's header record says produced it; ``--resume`` into a file with
        another ``config`` is refused (:mod:`textaudit.formats.jsonl`).
    shard: ``(i, N)``: only the jobs of that shard are done (:mod:`textaudit.shards`).
    spec: what the records hold (the audit's :class:`~textaudit.formats.jsonl.RecordSpec`), checked on a resumed file.
    """

    def __init__(self, output: str | Path | None, *, resume: bool = False, id_key: str = "id", keep: bool = True,
                 progress: bool = True, command: str | None = None, config: dict | None = None,
                 shard: Shard | None = None, spec: RecordSpec | None = None):
        self.writer = JsonlWriter(output, resume=resume, id_key=id_key, command=command, config=config,
                                  shard=shard_name(shard), spec=spec)
        self.shard = shard
        self.previous: list[dict] = self.writer.records
        self.done: set = self.writer.done
        self.keep = keep
        if not keep:
            self.writer.records = []
        self.progress = progress
        self._bar: Any = None
        self._fields: dict[str, Any] = {}
        self._cost: tuple[float, float] | None = None  # (done, remaining) cost of the jobs, for the ETA

    @property
    def records(self) -> list[dict]:
        """Every record of the file: the previous ones and those written since (with ``keep``)."""
        return self.writer.records

    def results(self, jobs: Sequence[tuple[str, T]], make_worker: Callable[[], Callable[[T], Any]], *, desc: str,
                unit: str, skip: Callable[[str], bool] | None = None,
                backend: Backend | None = None, cost: Callable[[T], float] | None = None,
                group: int | None = None, first: Callable[[T, Any, float], None] | None = None,
                first_count: int = 1, weighted_eta: bool = False,
                live: tuple[Callable[[], dict[str, Any]], Callable[[], float | None] | None] | None = None
                ) -> Iterator[tuple[str, Any]]:
        """Run the jobs still to do (default: id not in :attr:`done`) in this run's shard on ``backend``
        (default: here, in order) with the workers ``make_worker`` builds; yield ``(id, work(job))`` as
        jobs finish, advancing the progress bar. ``cost(job)``: its expected work, relative to the
        others (several workers start the costliest first; with ``weighted_eta`` the ETA is weighted
        by it, asked again after each job, so a cost that ``first`` refines counts from then on — for
        work whose cost is known, not for searches that stop at their first find); ``group``: jobs a worker
        keeps in flight (:meth:`Backend.map <textaudit.backends.Backend.map>`). ``first(job, result,
        seconds)``: called as each of the first ``first_count`` jobs is done — they run alone, so that their
        seconds measure them (a cost estimate to say before the rest is spent) — before the others start."""
        skip = skip or (lambda job_id: job_id in self.done)
        todo = [(job_id, job) for job_id, job in jobs if in_shard(job_id, self.shard) and not skip(job_id)]
        self._bar = progress_bar(total=len(todo), desc=desc, unit=unit, enabled=self.progress)
        runner = backend or SerialBackend()
        left = dict(todo)
        weighted = weighted_eta and cost is not None
        done_cost, remaining = 0.0, sum(cost(j) for j in left.values()) if weighted else 0.0  # type: ignore[misc]
        t0 = time.monotonic()
        if live is not None and live[1] is None:  # the work's fields, the ETA of the jobs' weighted cost

            def weighted_left() -> float | None:
                if not self._cost or not self._cost[0]:
                    return None
                return (time.monotonic() - t0) * self._cost[1] / self._cost[0]

            live = (live[0], weighted_left)
        stop_following = follow(self._bar, *live, shown=lambda: self._fields) if live else (lambda: None)
        try:
            batches = [todo[:first_count], todo[first_count:]] if first is not None and todo else [todo]
            for batch in batches:
                for job_id, result in runner.map(make_worker, batch, cost, group):
                    job = left.pop(job_id)
                    if first is not None and batch is batches[0] and len(batches) > 1:
                        first(job, result, time.monotonic() - t0)
                        if weighted:  # ``first`` may have refined the costs: summed again once
                            remaining = sum(cost(j) for j in left.values()) + cost(job)  # type: ignore[misc]
                    if weighted:
                        c = cost(job)  # type: ignore[misc]
                        done_cost, remaining = done_cost + c, remaining - c
                        self._cost = (done_cost, max(remaining, 0.0))
                        weigh(self._bar, *self._cost, self._fields)
                    yield job_id, result
                    self._bar.update(1)
        finally:
            stop_following()
        self._bar.close()

    def write(self, *records: dict) -> None:
        """Append records to the file (one write and flush)."""
        self.writer.extend(list(records), keep=self.keep)

    def say(self, msg: str) -> None:
        """A line through the notices channel that does not break the progress bar (a tqdm bar on the terminal
        redraws itself below it)."""
        bar = self._bar
        if bar is not None and hasattr(bar, "write") and not getattr(bar, "disable", True) and notices.to_terminal():
            bar.write(msg, file=sys.stderr)
        else:
            notices.say(msg)

    def show(self, **fields: Any) -> None:
        """Show ``fields`` next to the progress bar, from its next update on: the fields count the record
        just written, which the bar counts when the job's update comes (refreshing now would show the new
        counts beside the old total: ``46/50 … success=47/47``)."""
        self._fields = fields
        if self._bar is None:
            return
        if self._cost is not None:
            weigh(self._bar, *self._cost, fields)
        else:
            self._bar.set_postfix(refresh=False, **fields)

    def __enter__(self) -> "ResumableRun":
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if self._bar is not None:
            self._bar.close()
        self.writer.close()
        if isinstance(exc, StopRun) and not getattr(exc, "where_kept", False):
            # said here, where the output is known (a command without --output keeps nothing)
            where = (f"the results so far are kept in {self.writer.path}: rerun with --resume to continue"
                     if self.writer.path is not None else "nothing was kept: give --output to keep what a run finishes")
            stop = StopRun(f"{exc}; {where}")
            stop.where_kept = True  # type: ignore[attr-defined]
            raise stop from None


def check_sharded_output(path: str | Path | None, resume: bool | None, shard: str | None,
                         settings: dict | None = None) -> Shard | None:
    """:func:`check_output` for a command with ``--shard i/N`` too: a shard needs its own file (``audit merge``
    joins them), and a file continued by ``--resume`` must be the same shard's. Returns the parsed shard."""
    part = parse_shard(shard)
    if part is not None and path is None:
        raise TextAuditError("--shard needs --output (each shard writes its own results file for audit merge)")
    check_output(path, resume, settings, shard_name(part))
    return part
