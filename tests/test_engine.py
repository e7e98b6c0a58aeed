"""The engine's scheduler (textaudit.engine.scheduler): many searches in flight, their asks merged
into one call per step, each answer handed back to its own search."""

from __future__ import annotations

import numpy as np
import pytest

from textaudit.engine.scheduler import Ask, Engine, Meter, check_in_flight, classify, run_now
from textaudit.errors import StopRun, TextAuditError
from textaudit.models import as_classifier


class Recorder:
    """A batched function that records the size of every call it gets."""

    def __init__(self, fail_on: str | None = None, stop_on: str | None = None):
        self.calls: list[int] = []
        self.fail_on, self.stop_on = fail_on, stop_on

    def __call__(self, items):
        self.calls.append(len(items))
        if self.stop_on in items:
            raise StopRun("the endpoint is gone")
        if self.fail_on in items:
            raise ValueError(f"cannot score {self.fail_on!r}")
        return [len(x) for x in items]


def steps(name: str, n: int, fn):
    """A search of ``n`` steps: each asks ``fn`` for its name and the step; returns the answers."""
    got = []
    for i in range(n):
        got.append((yield Ask(fn, [f"{name}{i}", f"{name}{i}!"])))
    return name, got


def test_asks_of_the_same_function_are_merged_into_one_call_per_step():
    fn = Recorder()
    done = list(Engine(in_flight=8).run((f"s{j}", lambda _m, j=j: steps(f"s{j}", 3, fn)) for j in range(5)))
    assert fn.calls == [10, 10, 10]  # five searches of two items, three steps: three calls
    results = dict(done)
    assert results["s2"] == ("s2", [[3, 4]] * 3)  # each search got its own slice back ("s20", "s20!", …)


class Widths:
    """A batched function of a per-item keyword (a masked LM's ``top``): answers item x with x repeated ``top`` times."""

    def __init__(self):
        self.calls: list[tuple[int, object]] = []

    def __call__(self, items, top):
        self.calls.append((len(items), top))
        tops = [top] * len(items) if isinstance(top, int) else top
        return [[x] * t for x, t in zip(items, tops)]


def asks_top(fn, name: str, top: int, per_item: str | None):
    got = yield Ask(fn, [name, name + "!"], per_item=per_item, top=top)
    return got


def test_asks_differing_only_in_a_per_item_keyword_merge_into_one_call_each_given_its_own_value():
    """#85: the naturalness constraint asks P = 200 candidates where the neighbourhood asks κ = 20; with ``per_item``
    the asks merge (one call, one value per item) and each search gets exactly its own answer; without it they stay
    two calls, as before."""
    fn = Widths()
    done = dict(Engine(in_flight=4).run(((j, t), lambda _m, j=j, t=t: asks_top(fn, f"s{j}", t, "top"))
                                        for j, t in enumerate((1, 3, 1))))
    assert fn.calls == [(6, [1, 1, 3, 3, 1, 1])]  # one call, each item its own top
    assert done[(1, 3)] == [["s1"] * 3, ["s1!"] * 3] and done[(2, 1)] == [["s2"], ["s2!"]]
    fn = Widths()
    list(Engine(in_flight=4).run((j, lambda _m, j=j: asks_top(fn, f"s{j}", 2, "top")) for j in range(2)))
    assert fn.calls == [(4, 2)]  # one value for all: given as it is (a plain call)
    fn = Widths()  # an ask may give one value per item itself (the constraint's two checks in one ask)
    done = dict(Engine(in_flight=4).run(((j, str(t)), lambda _m, j=j, t=t: asks_top(fn, f"s{j}", t, "top"))
                                        for j, t in enumerate((2, [1, 3]))))
    assert fn.calls == [(4, [2, 2, 1, 3])] and done[(1, "[1, 3]")] == [["s1"], ["s1!"] * 3]
    fn = Widths()
    done = dict(Engine(in_flight=4).run((t, lambda _m, t=t: asks_top(fn, f"s{t}", t, None)) for t in (1, 3)))
    assert sorted(fn.calls) == [(2, 1), (2, 3)] and done[3] == [["s3"] * 3, ["s3!"] * 3]


def test_one_in_flight_calls_once_per_ask_and_searches_finish_in_completion_order():
    fn = Recorder()
    done = list(Engine(in_flight=1).run((j, lambda _m, j=j: steps("x", j, fn)) for j in (3, 1, 2)))
    assert [k for k, _ in done] == [3, 1, 2] and fn.calls == [2] * 6
    fn = Recorder()
    done = list(Engine(in_flight=3).run((j, lambda _m, j=j: steps("x", j, fn)) for j in (3, 1, 2)))
    assert [k for k, _ in done] == [1, 2, 3]  # the shortest search finishes first
    assert fn.calls == [6, 4, 2]
    assert run_now(steps("y", 2, fn)) == ("y", [[2, 3], [2, 3]])


def test_a_merged_call_that_raises_is_retried_ask_by_ask_and_the_error_goes_to_its_search():
    fn = Recorder(fail_on="bad0")

    def careful(name):
        try:
            return (yield Ask(fn, [name + "0"]))
        except ValueError as e:
            return f"caught: {e}"

    done = dict(Engine(in_flight=4).run((n, lambda _m, n=n: careful(n)) for n in ("good", "bad", "fine")))
    assert done == {"good": [5], "bad": "caught: cannot score 'bad0'", "fine": [5]}
    assert fn.calls == [3, 1, 1, 1]  # the merged call, then each ask alone
    with pytest.raises(ValueError, match="bad0"):  # a search that does not catch it stops the run
        list(Engine(in_flight=2).run([("bad", lambda _m: steps("bad", 1, fn))]))


def test_stop_run_stops_every_search():
    fn = Recorder(stop_on="b0")
    with pytest.raises(StopRun):
        list(Engine(in_flight=4).run((n, lambda _m, n=n: steps(n, 2, fn)) for n in ("a", "b", "c")))


def test_a_search_is_measured_on_its_own_whatever_the_cache_holds():
    clf = as_classifier(lambda texts: np.tile([0.3, 0.7], (len(texts), 1)), name="flat")

    def asks(texts):
        yield classify(clf, texts)
        yield classify(clf, texts[:1])  # asked again: not a new query
        return None

    meters = []

    def start(texts):
        def make(meter: Meter):
            meters.append(meter)
            return asks(texts)
        return make

    list(Engine(in_flight=1).run([(0, start(["a b", "c d", "a b"]))]))
    forwards = clf.stats.unique_forwards
    list(Engine(in_flight=4).run([(1, start(["a b", "c d"])), (2, start(["c d", "e f"]))]))
    assert [m.queries for m in meters] == [2, 2, 2]  # the cache answered "a b" and "c d" the second time
    assert clf.stats.unique_forwards == forwards + 1
    assert all(m.seconds >= 0 for m in meters)


@pytest.mark.parametrize("bad", [0, -3, 1.5, True])
def test_in_flight_must_be_a_positive_whole_number(bad):
    with pytest.raises(TextAuditError, match="--in-flight must be a positive whole number"):
        check_in_flight(bad)


def test_cli_in_flight_below_one_is_a_one_line_error(cli):
    for command in (["attack", "--model", "bow"], ["bias", "--model", "bow", "--pair", "he,she"]):
        r = cli(*command, "--in-flight", "0")
        assert r.exit_code == 2 and "--in-flight" in r.output and "Traceback" not in r.output, r.output
