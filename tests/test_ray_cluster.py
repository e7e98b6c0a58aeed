"""The neighbourhood store on a Ray cluster of several machines: workers on a machine other than the
driver's read the driver's store (a copy shipped when the run starts) and send back what they computed,
which the driver keeps in its own file; the records are a serial run's.

The cluster is real: Ray's own ``ray.cluster_utils.Cluster`` starts a head node and two worker nodes (each
its own raylet and object store, with its own node id) on this machine. The head has no CPU for actors,
so every worker runs on a node that is not the driver's.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'textaudit[ray]')")

from test_bias import TEXTS  # noqa: E402
from test_bias import planted as she_planted  # noqa: E402
from test_store import _close, _fresh  # noqa: E402

from textaudit.backends import RayBackend, local_worker_env  # noqa: E402
from textaudit.fairness import CounterfactualBias, run_bias  # noqa: E402
from textaudit.neighborhoods import store_sync  # noqa: E402
from textaudit.neighborhoods.store import NeighborhoodStore, context_key  # noqa: E402
from textaudit.results import read_jsonl  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def cluster():
    import test_bias
    import test_store
    from ray.cluster_utils import Cluster

    for m in (test_bias, test_store, sys.modules[__name__]):  # the workers cannot import the tests
        ray.cloudpickle.register_pickle_by_value(m)
    env = {**{k: os.environ[k] for k in ("TEXTAUDIT_DATA",) if k in os.environ}, **local_worker_env()}
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(2):
        c.add_node(num_cpus=1)
    ray.init(address=c.address, runtime_env={"env_vars": env}, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


def _contexts(texts):
    return [(t.split(), i) for t in texts for i in range(len(t.split()))]


def test_workers_on_other_machines_read_the_drivers_store_and_send_back_what_they_computed(tiny_mlm, tmp_path):
    path = tmp_path / "s.sqlite"
    store = NeighborhoodStore(path)
    driver = _fresh(tiny_mlm, store)
    known = TEXTS[:3]
    driver.candidates(_contexts(known), top=20)  # the driver's store holds these before the run
    before = store.info()
    mlm = _fresh(tiny_mlm, store)  # what the workers get: the same masked LM and store path

    key = store.key

    def make_worker():
        def work(text):
            got = mlm.candidates(_contexts([text]), top=20)
            return {"answers": got, "node": ray.get_runtime_context().get_node_id(),
                    "shipped": key in store_sync.SHIPPED}
        return work

    jobs = [(f"t{i}", t) for i, t in enumerate(TEXTS)]
    out = dict(RayBackend(workers=2, chunk=1).map(make_worker, jobs))
    driver_node = ray.get_runtime_context().get_node_id()
    assert all(r["node"] != driver_node and r["shipped"] for r in out.values())  # every worker on another machine
    assert len({r["node"] for r in out.values()}) == 2
    alone = _fresh(tiny_mlm, None)
    for i, t in enumerate(TEXTS):
        assert _close(out[f"t{i}"]["answers"], alone.candidates(_contexts([t]), top=20))
    # the driver's file now holds every context of every text: what it had, and what the workers computed
    after = store.info()
    want = {context_key(w, i) for w, i in _contexts(TEXTS)}
    assert after["entries"] == len(want) > before["entries"]
    # the known texts' contexts were answered from the shipped copy (hits counted in the driver's store), the
    # new ones computed once
    assert after["hits"] - before["hits"] >= len({context_key(w, i) for w, i in _contexts(known)})
    assert after["misses"] - before["misses"] == len(want) - before["entries"]
    summary = mlm.store_summary()  # the run's summary counts what its workers asked of the store
    assert summary["misses"] == after["misses"] - before["misses"] and summary["hits"] == after["hits"] - before["hits"]
    reader = _fresh(tiny_mlm, NeighborhoodStore(path))
    assert _close(reader.candidates(_contexts(TEXTS), top=20), alone.candidates(_contexts(TEXTS), top=20))
    assert reader.forwards == 0  # a serial run after it computes nothing


def test_bias_on_a_cluster_gives_the_serial_records_and_fills_the_drivers_store(tiny_mlm, tmp_path):
    def mk(store):
        return CounterfactualBias(she_planted(1.0), _fresh(tiny_mlm, store), kappa=4, delta=1e9, enumerate_k=1, sample=20)

    serial = run_bias(mk(None), [("he", "she")], 2, TEXTS, output=tmp_path / "s.jsonl", progress=False)
    store = NeighborhoodStore(tmp_path / "c.sqlite")
    parallel = run_bias(mk(store), [("he", "she")], 2, TEXTS, output=tmp_path / "r.jsonl", progress=False,
                        backend=RayBackend(workers=2, chunk=1))

    def stable(name):
        return sorted(json.dumps({k: v for k, v in r.items() if k != "seconds"}, sort_keys=True)
                      for r in read_jsonl(tmp_path / name))

    assert stable("r.jsonl") == stable("s.jsonl")
    for kk, e in serial["she1.0"][("he", "she")].items():
        assert parallel["she1.0"][("he", "she")][kk].B == pytest.approx(e.B, abs=1e-12)
    assert store.info()["entries"] > 0  # what the workers computed came back
    again = mk(NeighborhoodStore(tmp_path / "c.sqlite"))
    run_bias(again, [("he", "she")], 2, TEXTS, output=tmp_path / "a.jsonl", progress=False)
    assert stable("a.jsonl") == stable("s.jsonl") and again.mlm.store_misses == 0 and again.mlm.store_hits > 0
