"""Many searches in flight, one batched forward per step: the continuous batching of LLM servers
(vLLM's scheduler) applied to search requests.

A search is written as the paper's loop that *asks* instead of calling a model: it is a Python
generator that yields an :class:`Ask` (score these sentences; give the masked-LM candidates at
these positions; embed these texts) and receives the answer::

    probs = yield classify(classifier, sentences)          # an (n, C) array
    cands = yield Ask(mlm.candidates, queries, top=20)     # one list per query

and returns its result. :class:`Engine` keeps up to ``in_flight`` such searches going. At each
step every search in flight is waiting on one ask; the asks of the same function (the same model,
the same keyword arguments) are merged into one call — the model then packs the merged items into
padded batches of at most ``--batch-tokens`` and runs one forward per batch — and each search gets
its own slice of the answer back. A search that finishes hands its result out (in completion
order, with its key) and the next one starts in its place. :func:`run_now` answers one search's
asks directly: one search in flight.

Each search is measured on its own (:class:`Meter`), so that its record does not depend on what
ran beside it: its seconds are the host time spent stepping it plus its share (by items) of every
merged call it was part of; its classifier queries are the distinct texts it asked the classifier
for, its masked-LM queries the distinct masked contexts it asked for — whatever the caches already
held, so a budget (``--max-queries``) stops a search at the same point with 1 or 64 in flight.

A merged call that raises is retried ask by ask, and the error goes to the search that caused it
(an attack records it as that example's ``error``); :class:`~textaudit.errors.StopRun` (a remote
model's budget, an endpoint gone) stops the whole run.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Generator, Iterable, Iterator, Sequence

from textaudit.device import pick_device
from textaudit.errors import StopRun, TextAuditError
from textaudit.model_traits import traits_of
from textaudit.sentence import Sentence

__all__ = ["Ask", "Meter", "Engine", "Search", "classify", "run_now", "default_in_flight", "in_flight_for",
           "check_in_flight"]


#: a search: yields asks, receives their answers, returns its result
Search = Generator["Ask", Any, Any]


class Ask:
    """One request of a search: ``fn(items, **kw)`` answers it with one entry per item. Asks with
    the same ``fn`` and keyword arguments are merged into one call. ``kind``: what the items are,
    for the per-search counters (``classify``: classifier inputs; ``mask``: ``(words, position)``
    masked-LM queries; anything else is not counted). ``per_item``: a keyword ``fn`` also takes as one
    value per item (a masked LM's ``top``): asks that differ only in it merge too, the call given each
    item's value (an ask may give it as one value for all its items or as a list, one per item)."""

    __slots__ = ("fn", "items", "kw", "kind", "key", "per_item")

    def __init__(self, fn: Callable[..., Any], items: Sequence[Any], kind: str = "", *, per_item: str | None = None,
                 **kw: Any):
        self.fn, self.items, self.kind, self.kw, self.per_item = fn, items, kind, kw, per_item
        self.key = (fn, tuple(sorted((k, v) for k, v in kw.items() if k != per_item)), per_item)

    def merged_kw(self, asks: Sequence["Ask"]) -> dict[str, Any]:
        """The keyword arguments of one call answering ``asks`` (this one first): its own, with the
        :attr:`per_item` keyword as one value per item where the asks' values differ."""
        name = self.per_item
        if name is None:
            return self.kw
        values = [a.kw[name] for a in asks]
        if not any(isinstance(v, list) for v in values) and len(set(values)) == 1:
            return self.kw
        return {**self.kw, name: [x for a, v in zip(asks, values)
                                  for x in (v if isinstance(v, list) else [v] * len(a.items))]}

    def answer(self) -> Any:
        """The answer of this ask alone (a direct call)."""
        return self.fn(self.items, **self.kw)


def classify(classifier: Any, inputs: Sequence[Any], *, fresh: bool = False) -> Ask:
    """The ask "class probabilities of ``inputs``" (rows of an ``(n, C)`` array). A view on one side
    of sentence pairs asks its underlying classifier for the pairs, so the asks of many pairs merge.
    ``fresh``: the model is asked again whatever its cache holds (a remote model's post-condition)."""
    pairs = getattr(classifier, "pairs", None)
    if pairs is not None and hasattr(classifier, "context"):
        inputs, classifier = pairs(inputs), classifier.classifier
    fn = getattr(classifier, "predict_proba_fresh", None) if fresh else None
    return Ask(fn or classifier.predict_proba, list(inputs), "classify")


class Meter:
    """What one search has cost (see the module docstring): ``seconds``, ``queries`` (distinct
    classifier inputs asked) and ``mlm_queries`` (distinct masked contexts asked)."""

    __slots__ = ("seconds", "_texts", "_masked")

    def __init__(self) -> None:
        self.seconds = 0.0
        self._texts: set = set()
        self._masked: set = set()

    @property
    def queries(self) -> int:
        return len(self._texts)

    @property
    def mlm_queries(self) -> int:
        return len(self._masked)

    def count(self, ask: Ask) -> None:
        if ask.kind == "classify":
            add = self._texts.add
            for t in ask.items:
                add((t._text or t.text()) if type(t) is Sentence else t)
        elif ask.kind == "mask":
            add = self._masked.add
            for words, pos in ask.items:
                add((tuple(words[:pos]), tuple(words[pos + 1:])))


def run_now(search: Search) -> Any:
    """Drive one search to its result, answering each of its asks directly (one search in flight)."""
    for _, result in Engine(1).run([(None, lambda _meter: search)]):
        return result
    raise AssertionError("unreachable: a search always finishes")


class _Task:
    __slots__ = ("key", "search", "meter", "ask")

    def __init__(self, key: Any, search: Search, meter: Meter):
        self.key, self.search, self.meter = key, search, meter
        self.ask: Ask | None = None


class Engine:
    """Keeps up to ``in_flight`` searches going and merges their asks (see the module docstring)."""

    def __init__(self, in_flight: int = 1):
        check_in_flight(in_flight)
        self.in_flight = in_flight

    def run(self, starts: Iterable[tuple[Any, Callable[[Meter], Search]]]) -> Iterator[tuple[Any, Any]]:
        """Yield ``(key, result)`` for every ``(key, start)``, in completion order; ``start(meter)``
        makes the search (called when a place in flight is free, in the order given)."""
        pending = iter(starts)
        active: list[_Task] = []
        exhausted = False
        while True:
            while not exhausted and len(active) < self.in_flight:
                nxt = next(pending, None)
                if nxt is None:
                    exhausted = True
                    break
                meter = Meter()
                task = _Task(nxt[0], nxt[1](meter), meter)
                done = self._step(task, None, None)
                if done is not None:
                    yield task.key, done[0]
                else:
                    active.append(task)
            if not active:
                return
            groups: dict[tuple, list[_Task]] = {}
            for task in active:
                groups.setdefault(task.ask.key, []).append(task)  # type: ignore[union-attr]
            finished: list[_Task] = []
            for tasks in groups.values():
                for task, answer, error in self._answer(tasks):
                    done = self._step(task, answer, error)
                    if done is not None:
                        finished.append(task)
                        yield task.key, done[0]
            if finished:
                gone = {id(t) for t in finished}
                active = [t for t in active if id(t) not in gone]

    def _answer(self, tasks: list[_Task]) -> list[tuple[_Task, Any, BaseException | None]]:
        """One merged call for the asks of ``tasks`` (same function and arguments); each task's slice,
        or, when the merged call raised, each ask answered alone (its own error, if any)."""
        asks = [t.ask for t in tasks]
        for t in tasks:
            t.meter.count(t.ask)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        if len(asks) == 1:
            items = asks[0].items  # type: ignore[union-attr]
        else:
            items = [x for a in asks for x in a.items]  # type: ignore[union-attr]
        first = asks[0]
        assert first is not None
        try:
            answer = first.fn(items, **first.merged_kw(asks))  # type: ignore[arg-type]
        except StopRun:
            raise
        except Exception as e:  # noqa: BLE001
            if len(tasks) == 1:
                tasks[0].meter.seconds += time.perf_counter() - t0
                return [(tasks[0], None, e)]
            return [(t, *self._alone(t)) for t in tasks]
        dt = time.perf_counter() - t0
        n = max(len(items), 1)
        out = []
        s = 0
        for t, a in zip(tasks, asks):
            m = len(a.items)  # type: ignore[union-attr]
            t.meter.seconds += dt * m / n
            out.append((t, answer if len(asks) == 1 else answer[s:s + m], None))
            s += m
        return out

    def _alone(self, task: _Task) -> tuple[Any, BaseException | None]:
        t0 = time.perf_counter()
        try:
            return task.ask.answer(), None  # type: ignore[union-attr]
        except StopRun:
            raise
        except Exception as e:  # noqa: BLE001
            return None, e
        finally:
            task.meter.seconds += time.perf_counter() - t0

    @staticmethod
    def _step(task: _Task, answer: Any, error: BaseException | None) -> tuple[Any] | None:
        """Send ``answer`` (or throw ``error``) into the task's search: None while it asks again
        (its new ask kept), else ``(result,)``."""
        t0 = time.perf_counter()
        try:
            task.ask = task.search.throw(error) if error is not None else task.search.send(answer)
            return None
        except StopIteration as done:
            task.ask = None
            return (done.value,)
        finally:
            task.meter.seconds += time.perf_counter() - t0


def default_in_flight(device: str | None = None) -> int:
    """How many examples an engine keeps in flight when ``--in-flight`` is not given: 256 on a GPU
    (their asks fill its 65,536-token forwards: a device wants thousands of sentences per forward),
    32 on a CPU. The models' token budget (``--batch-tokens``) is theirs: 4,096 on a CPU, where a
    forward is cheapest per sentence at that size — measured on this project's 2-core CPU, bigger
    ones cost more per sentence (the activations outgrow the caches; merged asks mix lengths, so
    more of a forward is padding; ``benchmarks/engine.md``)."""
    return 256 if str(device or pick_device()).startswith("cuda") else 32


def in_flight_for(classifier: Any, in_flight: int | None = None) -> int:
    """``in_flight`` if given, else the default for ``classifier``: one example at a time for a remote
    model (an HTTP endpoint or an OpenAI-compatible server: its own ``--concurrency`` keeps it busy,
    and a query or cost budget that stops the run should find the examples it paid for finished, not
    32 of them half searched), else :func:`default_in_flight`."""
    if in_flight is not None:
        return in_flight
    return 1 if traits_of(classifier).remote else default_in_flight()


def check_in_flight(in_flight: int) -> None:
    """One-line error for an ``--in-flight`` below 1."""
    if not isinstance(in_flight, int) or isinstance(in_flight, bool) or in_flight < 1:
        raise TextAuditError(f"--in-flight must be a positive whole number of examples (got {in_flight!r})")
