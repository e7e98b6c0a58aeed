"""Where a long run's jobs are done: here, one after another (``serial``), or on Ray workers (``ray``).

A run hands :meth:`Backend.map` a *worker factory* — a function, run once per worker, that returns
``work(job) -> result`` with everything loaded (the attack with its classifier and masked LM, the
bias estimator) — and the jobs; it gets ``(job id, result)`` back as jobs finish. The driver stays
the only writer of the results file (:class:`~textaudit.runner.ResumableRun`), so ``--resume``,
the header and the lock work as in a serial run.

:class:`RayBackend` keeps ``workers`` Ray actors (``--gpus-per-worker`` may be a fraction: four
workers can share one GPU). The factory is shipped to them as is — the loaded models travel with
it, so a node needs no data of its own — and each worker moves its models to its own device. An
actor that dies is restarted and its chunk in flight is run again (``max_restarts``,
``max_task_retries``); a bad example is never retried, because an attack records it as that
example's ``error`` record. ``TEXTAUDIT_*`` and HuggingFace offline settings reach the workers
through Ray's runtime environment.

Some state outlives a run and must travel beside the factory: a :class:`Sync` registered with
:func:`register_sync` (the neighbourhood store registers one) is asked, when a cluster has several
machines, for what workers on *other* machines need (``ship``), hands it to them (``receive``),
and gets back, with every chunk's results, what each worker made (``collect``) to keep it in the
driver (``merge``). Workers on the driver's machine share its files and need none of this.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Iterator, Protocol, Sequence

from textaudit.device import pick_device
from textaudit.errors import TextAuditError

__all__ = ["Backend", "SerialBackend", "RayBackend", "make_backend", "BACKENDS", "place_on_device", "Sync",
           "register_sync"]

Worker = Callable[[Any], Any]
BACKENDS = ("serial", "ray")
#: environment variables a worker needs to resolve resources and behave like the driver
PASSED_ENV = ("TEXTAUDIT_DATA", "TEXTAUDIT_CACHE", "TEXTAUDIT_OFFLINE", "TEXTAUDIT_THREADS", "TEXTAUDIT_TRUST_REMOTE_CODE",
              "HF_HUB_OFFLINE", "HF_HOME", "TRANSFORMERS_OFFLINE")


class Sync(Protocol):
    """State a run shares with its Ray workers on other machines (see the module docstring)."""

    def ship(self) -> Any:
        """Driver, before the workers start: what a worker on another machine needs (None: nothing)."""
        ...

    def receive(self, shipped: Any) -> None:
        """Worker on another machine than the driver's, before its first job: take what was shipped."""
        ...

    def collect(self) -> Any:
        """Worker, after each chunk: what it made since the last call, for the driver (None: nothing)."""
        ...

    def merge(self, collected: Any) -> None:
        """Driver: keep what a worker collected."""
        ...


#: the registered syncs, by name (the same names in the driver and its workers: modules register at import)
SYNCS: dict[str, Sync] = {}


def register_sync(name: str, sync: Sync) -> None:
    """Register ``sync`` under ``name`` (again: replaced), for every Ray run of this process."""
    SYNCS[name] = sync


class Backend(Protocol):
    def start(self) -> "Backend":
        """Get ready (start workers) while the caller goes on, e.g. loading models; optional."""
        ...

    def map(self, make_worker: Callable[[], Worker], jobs: Sequence[tuple[str, Any]],
            cost: Callable[[Any], float] | None = None, group: int | None = None) -> Iterator[tuple[str, Any]]:
        """Yield ``(job id, work(job))`` for every job, in any order, as they finish. ``cost(job)``:
        how long a job is expected to take, relative to the others (a backend with several workers
        starts the costliest first). A worker with ``many(jobs)`` (an engine keeping several jobs in
        flight) is handed its jobs together, ``group`` at a time or more."""
        ...


class SerialBackend:
    """Every job here, in order, on one worker."""

    def start(self) -> "SerialBackend":
        return self

    def map(self, make_worker: Callable[[], Worker], jobs: Sequence[tuple[str, Any]],
            cost: Callable[[Any], float] | None = None, group: int | None = None) -> Iterator[tuple[str, Any]]:
        work = make_worker()
        many = getattr(work, "many", None)
        if many is not None:  # a worker that keeps many jobs in flight (an engine): finished ones come first
            yield from many(jobs)
            return
        for job_id, job in jobs:
            yield job_id, work(job)


#: modules a worker imports as soon as it starts: torch and HuggingFace's model code
PRELOAD = ("torch", "transformers.modeling_utils", "textaudit.attacks", "textaudit.fairness")
_IN_WORKER: list[bool] = []  # set in a Ray actor: its models move to its own device


class _RayWorker:
    """One Ray actor: imports torch and textaudit when it starts,
    builds its worker from the factory once, then runs chunks of jobs. The factory comes as a
    reference inside a list, so Ray does not fetch it again for every chunk; an actor restarted
    after a crash builds its worker again on its first chunk."""

    def __init__(self):
        _IN_WORKER[:] = [True]
        import importlib

        # what unpickling the models would import, imported while the driver is still loading them
        # (seconds of a worker's start-up; textaudit's own packages import these lazily)
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        self.work: Worker | None = None

    def setup(self, factory: list) -> bool:
        """``factory``: ``[the worker factory, {sync name: what it shipped}, the driver's node]`` (references)."""
        if self.work is None:
            import ray

            make_worker = ray.get(factory[0])  # unpickling it imports the modules that register syncs
            if factory[1] and ray.get_runtime_context().get_node_id() != factory[2]:
                for name, shipped in ray.get(factory[1]).items():
                    if name in SYNCS:
                        SYNCS[name].receive(shipped)
            self.work = make_worker()
        return True

    def run(self, chunk: list[tuple[str, Any]], factory: list) -> tuple[list[tuple[str, Any]], dict[str, Any]]:
        """The chunk's ``(job id, result)`` and what each registered sync collected meanwhile."""
        self.setup(factory)
        assert self.work is not None
        many = getattr(self.work, "many", None)
        if many is not None:  # the worker's engine keeps its chunk in flight: one batched forward per step
            results = list(many(chunk))
        else:
            results = [(job_id, self.work(job)) for job_id, job in chunk]
        collected = {name: c for name, sync in SYNCS.items() if (c := sync.collect()) is not None}
        return results, collected


def local_worker_env() -> dict[str, str]:
    """What a local Ray's workers need so that a busy machine does not starve them: Ray starts its
    workers at niceness 15 (ray-project/ray#24928), and a nice-15 process beside one CPU-bound job
    at niceness 0 gets about 1/30 of a core (measured: tests/test_ray.py crawled for over ten
    minutes beside one busy process). The workers of a Ray we start ourselves do the run's work
    while the driver waits, so they take the driver's own niceness (``nice -n 10 audit ...`` still
    lowers them), unless ``RAY_worker_niceness`` is set. Also put in this process's environment,
    which the Ray it starts inherits. A cluster (``--address``) keeps its own settings."""
    os.environ.setdefault("RAY_worker_niceness", str(os.nice(0)))
    return {"RAY_worker_niceness": os.environ["RAY_worker_niceness"]}


class RayBackend:
    """Jobs on ``workers`` Ray actors (see the module docstring).

    Parameters
    ----------
    address: a running cluster (``auto``, ``ray://host:10001``); None starts a local Ray.
    workers: actors; each holds its own copy of the models.
    gpus_per_worker, cpus_per_worker: Ray resources per actor (fractions allowed).
    chunk: jobs per task (default: about sixteen tasks per worker, 1 to 16 jobs each).
    """

    def __init__(self, *, address: str | None = None, workers: int = 2, gpus_per_worker: float = 0.0,
                 cpus_per_worker: float = 1.0, chunk: int | None = None):
        if workers < 1:
            raise TextAuditError(f"--workers must be at least 1 (got {workers})")
        if gpus_per_worker < 0 or cpus_per_worker <= 0:
            raise TextAuditError("--gpus-per-worker must be >= 0 and --cpus-per-worker > 0")
        require_ray()
        self.address, self.workers = address, workers
        self.gpus, self.cpus, self.chunk = gpus_per_worker, cpus_per_worker, chunk
        self.actors: list[Any] = []
        self.startup_seconds = 0.0  # of the last map: until every worker had its models

    def _init(self) -> None:
        import ray

        if ray.is_initialized():
            return
        env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
        if self.address is None:  # a local Ray sized for the workers asked for
            env.update(local_worker_env())
            ray.init(num_cpus=max(os.cpu_count() or 1, int(self.workers * self.cpus + 0.999)), include_dashboard=False,
                     runtime_env={"env_vars": env}, log_to_driver=False, configure_logging=False)
        else:
            ray.init(address=self.address, runtime_env={"env_vars": env}, log_to_driver=False)

    def start(self) -> "RayBackend":
        """Start Ray and the workers now, without waiting for them: they import their libraries while
        the caller goes on (loading models, say); :meth:`map` calls it when nobody did."""
        import ray

        self._init()
        if not self.actors:
            actor_cls = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_restarts=-1,
                                   max_task_retries=-1)(_RayWorker)
            self.actors = [actor_cls.remote() for _ in range(self.workers)]
        return self

    def map(self, make_worker: Callable[[], Worker], jobs: Sequence[tuple[str, Any]],
            cost: Callable[[Any], float] | None = None, group: int | None = None) -> Iterator[tuple[str, Any]]:
        import sys

        import ray

        jobs = list(jobs)
        if cost is not None:
            # costliest first: one long example started last keeps a worker busy while the others idle
            # (SO-Beam k=6 on cnn: one of the first 50 SST-2 dev examples takes half the work of all 50)
            jobs.sort(key=lambda j: -cost(j[1]))
        if not jobs:
            return
        t0 = time.perf_counter()
        self.start()
        for name, module in list(sys.modules.items()):  # plug-ins are files, not packages the workers could import
            if name.startswith("textaudit_plugin_"):
                ray.cloudpickle.register_pickle_by_value(module)
        factory = [ray.put(make_worker), None, ray.get_runtime_context().get_node_id()]
        if sum(1 for n in ray.nodes() if n.get("Alive")) > 1:  # workers may run on other machines
            shipped = {name: s for name, sync in SYNCS.items() if (s := sync.ship()) is not None}
            factory[1] = ray.put(shipped) if shipped else None
        ray.get([a.setup.remote(factory) for a in self.actors])
        self.startup_seconds = time.perf_counter() - t0
        # small chunks: a worker idles at most one chunk at the end (a task costs Ray about a millisecond); a
        # worker that keeps ``group`` jobs in flight gets chunks of up to that many (its engine fills its forwards)
        size = self.chunk or max(1, min(16, len(jobs) // (16 * len(self.actors))))
        if group and not self.chunk:
            size = max(size, min(group, -(-len(jobs) // (2 * len(self.actors)))))
        chunks = [jobs[i:i + size] for i in range(0, len(jobs), size)]
        pending: dict[Any, int] = {}  # task -> actor index
        todo = list(reversed(chunks))
        for a in range(len(self.actors)):  # two chunks per actor in flight: no actor waits for the driver
            for _ in range(2):
                if todo:
                    pending[self.actors[a].run.remote(todo.pop(), factory)] = a
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                a = pending.pop(done[0])
                if todo:
                    pending[self.actors[a].run.remote(todo.pop(), factory)] = a
                try:
                    results, collected = ray.get(done[0])
                except ray.exceptions.RayTaskError as e:
                    cause = e.as_instanceof_cause()
                    if isinstance(cause, TextAuditError):
                        raise TextAuditError(str(cause)) from None
                    raise
                for name, c in collected.items():
                    if name in SYNCS:
                        SYNCS[name].merge(c)
                yield from results
        finally:
            for actor in self.actors:
                ray.kill(actor, no_restart=True)
            self.actors = []


def require_ray() -> None:
    """A one-line error when Ray is not installed (cheap: nothing is imported)."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise TextAuditError("--backend ray needs Ray: pip install 'textaudit[ray]'")


def make_backend(name: str = "serial", *, address: str | None = None, workers: int = 2, gpus_per_worker: float = 0.0,
                 cpus_per_worker: float = 1.0) -> SerialBackend | RayBackend:
    """The backend called ``name`` (:data:`BACKENDS`), checked before any model loads."""
    if name == "serial":
        if address is not None:
            raise TextAuditError("--address applies to --backend ray only")
        return SerialBackend()
    if name == "ray":
        # not started here: bad data or a bad --output must stay a one-line error, not a Ray start-up first
        return RayBackend(address=address, workers=workers, gpus_per_worker=gpus_per_worker,
                          cpus_per_worker=cpus_per_worker)
    raise TextAuditError(f"unknown --backend '{name}'; use one of {', '.join(BACKENDS)}")


def place_on_device(*objects: Any) -> None:
    """Move the torch models inside ``objects`` (classifiers, masked LMs, attacks holding them) to this
    process's device: a worker on a GPU node uses its GPU even when the driver had none. Only in a
    Ray worker: in the driver, models stay where their loader put them."""
    if not _IN_WORKER:
        return

    device = pick_device()
    seen: set[int] = set()

    def visit(obj: Any, depth: int) -> None:
        if obj is None or id(obj) in seen or depth > 3:
            return
        seen.add(id(obj))
        for holder, attr in ((obj, "module"), (obj, "model")):
            m = getattr(holder, attr, None)
            if m is not None and hasattr(m, "to") and hasattr(obj, "device") and obj.device != device:
                setattr(holder, attr, m.to(device))
                obj.device = device
                if hasattr(obj, "_allowed_t"):
                    obj._allowed_t = None
        for attr in ("classifier", "forward", "mlm", "_mlm", "builder", "encoder", "patch_words"):
            visit(getattr(obj, attr, None), depth + 1)

    for o in objects:
        visit(o, 0)
