"""``--backend ray``: a local Ray with two workers gives the serial run's records, and losing a worker
or the driver loses nothing."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'textaudit[ray]')")

from test_attacks import PAIRS, X, _words_proposed, planted  # noqa: E402
from test_bias import TEXTS  # noqa: E402
from test_bias import planted as she_planted  # noqa: E402

from textaudit.attacks import PatchWords, SOBeam, make_attack, run_attack  # noqa: E402
from textaudit.backends import RayBackend, local_worker_env  # noqa: E402
from textaudit.fairness import CounterfactualBias, run_bias  # noqa: E402
from textaudit.results import read_jsonl  # noqa: E402

VOLATILE = ("seconds", "queries", "ppl_seconds", "mlm_queries")


def _stable(records):
    return sorted(json.dumps({k: v for k, v in r.items() if k not in VOLATILE}, sort_keys=True) for r in records)


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    import test_attacks
    import test_bias

    for m in (test_attacks, test_bias, sys.modules[__name__]):  # the workers cannot import the tests
        ray.cloudpickle.register_pickle_by_value(m)
    env = {**{k: os.environ[k] for k in ("TEXTAUDIT_DATA",) if k in os.environ}, **local_worker_env()}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": env})
    yield
    ray.shutdown()


def _texts(tiny_mlm):
    t = _words_proposed(tiny_mlm, X, 1)[0]
    return [X, "a deep and meaningful story .", X.replace("deep", "long"), X.replace("a ", "the ", 1),
            "one more film that is deep .", "the film is deep and meaningful ."], t


@pytest.mark.slow
def test_so_beam_and_genetic_on_two_workers_give_the_serial_records(tiny_mlm, tmp_path):
    texts, trigger = _texts(tiny_mlm)
    clf = planted([trigger])
    mk = lambda: SOBeam(clf, k=2, mlm=tiny_mlm, kappa=5, delta=1e9, patch_words=PatchWords(clf, PAIRS),  # noqa: E731
                        naturalness=False)  # the paper's search: the tiny random masked LM knows no English
    s1, serial = run_attack(mk(), texts, [1] * len(texts), output=tmp_path / "s.jsonl", progress=False)
    s2, _ = run_attack(mk(), texts, [1] * len(texts), output=tmp_path / "r.jsonl", progress=False,
                       backend=RayBackend(workers=2, chunk=1))
    assert _stable(read_jsonl(tmp_path / "r.jsonl")) == _stable(serial) and s1["success"] == s2["success"] >= 1
    g1, serial = run_attack(make_attack("genetic", clf, seed=3), texts, [1] * len(texts), progress=False)
    g2, parallel = run_attack(make_attack("genetic", clf, seed=3), texts, [1] * len(texts), progress=False,
                              backend=RayBackend(workers=2, chunk=2))
    assert _stable(parallel) == _stable(serial)


def test_bias_on_two_workers_gives_the_serial_estimates(tiny_mlm, tmp_path):
    """... and the workers, on the driver's machine, write the driver's store; the run's summary and the
    store's counters count what they asked of it."""
    from textaudit.neighborhoods.masked_lm import HFMaskedLM
    from textaudit.neighborhoods.store import NeighborhoodStore

    mk = lambda mlm=tiny_mlm: CounterfactualBias(she_planted(1.0), mlm, kappa=4, delta=1e9, enumerate_k=1, sample=20)  # noqa: E731
    serial = run_bias(mk(), [("he", "she")], 2, TEXTS, output=tmp_path / "s.jsonl", progress=False)
    store = NeighborhoodStore(tmp_path / "n.sqlite")
    stored = HFMaskedLM(tiny_mlm.model, tiny_mlm.tokenizer, name="tiny", device="cpu", store=store)
    parallel = run_bias(mk(stored), [("he", "she")], 2, TEXTS, output=tmp_path / "r.jsonl", progress=False,
                        backend=RayBackend(workers=2, chunk=1))
    assert _stable(read_jsonl(tmp_path / "r.jsonl")) == _stable(read_jsonl(tmp_path / "s.jsonl"))
    for kk, e in serial["she1.0"][("he", "she")].items():
        assert parallel["she1.0"][("he", "she")][kk].B == pytest.approx(e.B, abs=1e-12)
    info, summary = store.info(), stored.store_summary()
    assert info["entries"] > 0 and summary["misses"] == info["misses"] >= info["entries"]


@pytest.mark.slow
def test_a_killed_worker_loses_nothing(tiny_mlm, tmp_path):
    texts, trigger = _texts(tiny_mlm)
    clf = planted([trigger])
    _, serial = run_attack(make_attack("genetic", clf, seed=1), texts * 2, [1] * 12, progress=False)
    backend = RayBackend(workers=2, chunk=1)
    killed = []

    def kill_one_worker(rec):
        if not killed:  # after the first record: one actor dies with its chunks in flight; Ray restarts it
            ray.kill(backend.actors[0], no_restart=False)
            killed.append(rec["id"])

    _, records = run_attack(make_attack("genetic", clf, seed=1), texts * 2, [1] * 12, progress=False, backend=backend,
                            on_result=kill_one_worker, output=tmp_path / "k.jsonl")
    assert killed and _stable(read_jsonl(tmp_path / "k.jsonl")) == _stable(serial)


SLOW = ("import time\ndef clf(texts):\n    time.sleep(0.2)\n"
        "    return [[0.9, 0.1] if 'movie' in t.split() else [0.1, 0.9] for t in texts]\n")


@pytest.mark.slow
def test_a_killed_driver_resumes_without_duplicates(tmp_path):
    (tmp_path / "p.py").write_text(SLOW)
    rows = [f"a deep and meaningful film number {i} ." for i in range(12)]
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(f"1\t{r}\n" for r in rows))
    out = tmp_path / "o.jsonl"
    cmd = [sys.executable, "-m", "textaudit", "attack", "--model", f"{tmp_path}/p.py:clf", "--method", "genetic",
           "--data", str(tmp_path / "d.tsv"), "--no-ppl", "--output", str(out), "--backend", "ray", "--workers", "2",
           "--cpus-per-worker", "0.5"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline and len(read_jsonl(out) if out.exists() else []) < 2:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and the local Ray it started
    proc.wait()
    before = read_jsonl(out)
    assert 2 <= len(before) < len(rows)
    r = subprocess.run([*cmd[:-6], "--resume", "--json"], capture_output=True, text=True, timeout=1200)  # serial
    assert r.returncode == 0, r.stderr[-2000:]
    ids = [x["id"] for x in read_jsonl(out)]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == len(rows)
    assert json.loads(r.stdout.splitlines()[-1])["success"] == len(rows)


def test_workers_run_at_the_drivers_niceness_not_rays_15():
    # Ray's default (15) starves workers beside any CPU-bound process: a busy machine's tests crawled
    backend = RayBackend(workers=1, chunk=1)
    assert list(backend.map(lambda: lambda _: os.nice(0), [("a", None)])) == [("a", os.nice(0))]


def test_the_costliest_jobs_start_first():
    # one worker, one job per task: the worker numbers the jobs as it starts them (the order results
    # come back in is Ray's choice when several are ready at once, as on a busy machine)
    def make_worker():
        started = itertools.count()
        return lambda text: next(started)

    jobs = [(f"j{i}", "word " * n) for i, n in enumerate([3, 40, 1, 12, 40, 7])]
    out = dict(RayBackend(workers=1, chunk=1).map(make_worker, jobs, cost=lambda text: len(text.split())))
    assert sorted(out, key=out.get) == ["j1", "j4", "j3", "j5", "j0", "j2"]  # longest first, ties in given order
    out = dict(RayBackend(workers=1, chunk=1).map(make_worker, jobs))  # no cost: the given order
    assert sorted(out, key=out.get) == [j for j, _ in jobs]
