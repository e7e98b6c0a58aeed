"""The neighbourhood store (textaudit.neighborhoods.store): answers equal the forwards', shared across
masked-LM objects and processes, never read by another masked LM, safe under concurrent writers, kill -9,
damage, a full disk; and the CLI around it (--store, audit store info|prune|export|import, --mlm store:)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from textaudit.errors import TextAuditError
from textaudit.neighborhoods import NeighborhoodBuilder
from textaudit.neighborhoods.masked_lm import HFMaskedLM
from textaudit.neighborhoods.store import STORE_TOP, NeighborhoodStore, StoredMaskedLM, context_key

SENTENCES = ["a deep and meaningful film .", "the plot is thin and the acting is worse .",
             "an unflinching look at the mess we make .", "it is not the worst , is it ?"]


def _queries(sentences=SENTENCES):
    return [(s.split(), i) for s in sentences for i in range(len(s.split()))]


def _close(a: list, b: list, tol: float = 1e-5) -> bool:
    """Two answers are the same up to float noise: a forward's logits differ in the last bits with the batch
    it ran in (padding, BLAS blocking), so a context computed in another batch may differ by an ulp, and two
    candidates that tie to an ulp may swap; nothing else may differ."""
    for x, y in zip(a, b):
        dx, dy = dict(x), dict(y)
        if len(x) != len(y):
            return False
        edge = min(min(dx.values(), default=0), min(dy.values(), default=0))
        if any(abs(dx.get(w, dy.get(w)) - edge) > tol for w in set(dx) ^ set(dy)):
            return False
        if any(abs(dx[w] - dy[w]) > tol for w in set(dx) & set(dy)):
            return False
    return len(a) == len(b)


def _fresh(tiny_mlm, store, name="tiny-distilbert"):
    """Another masked-LM object over the same weights: an empty in-memory cache, as a new process has."""
    return HFMaskedLM(tiny_mlm.model, tiny_mlm.tokenizer, name=name, device="cpu", store=store)


def test_answers_from_the_store_are_the_forwards_answers(tiny_mlm, tmp_path):
    q = _queries()
    off = _fresh(tiny_mlm, None)
    want = off.candidates(q, top=20)
    store = NeighborhoodStore(tmp_path / "s.sqlite")
    first = _fresh(tiny_mlm, store)
    assert first.candidates(q, top=20) == want and first.store_misses == len(set(map(str, q))) and first.forwards > 0
    second = _fresh(tiny_mlm, NeighborhoodStore(tmp_path / "s.sqlite"))  # another object, as another process
    assert second.candidates(q, top=20) == want
    assert second.forwards == 0 and second.store_hits == first.store_misses and second.store_misses == 0
    # one entry serves every κ ≤ N: κ = 5 is the first 5 of the same answer, without a forward
    assert _fresh(tiny_mlm, store).candidates(q, top=5) == [c[:5] for c in want]
    # a larger κ than stored is computed, and the entry grows to serve it from then on
    big = _fresh(tiny_mlm, store)
    wide = big.candidates(q[:3], top=STORE_TOP + 8)
    assert big.forwards == 3 and wide == off.candidates(q[:3], top=STORE_TOP + 8)
    again = _fresh(tiny_mlm, store)
    assert again.candidates(q[:3], top=STORE_TOP + 8) == wide and again.forwards == 0
    assert second.store_summary()["hit_rate"] == 1.0 and second.store_summary()["mlm_seconds_saved"] >= 0


def test_one_top_per_context_answers_as_one_call_per_top_and_stores_what_each_asked(tiny_mlm, tmp_path):
    """#85: the engine merges the neighbourhood's κ = 20 and the naturalness constraint's P = 200 into one call (one
    top per context): each answer is what a call of its own top gives, the forward runs once for both, and the
    store keeps each context with what was asked of it (a κ context is not stored 200 wide)."""
    q = _queries()[:6]
    tops = [20, 200, 20, 200, 5, 20]
    off = _fresh(tiny_mlm, None)
    want = [off.candidates([x], top=t)[0] for x, t in zip(q, tops)]
    store = NeighborhoodStore(tmp_path / "s.sqlite")
    mixed = _fresh(tiny_mlm, store)
    got = mixed.candidates(q, top=tops)
    assert _close(got, want) and [len(c) for c in got] == tops and mixed.forwards == 6
    kept = store.get(mixed._store_id(), [context_key(w, i) for w, i in q], 1)
    assert [kept[context_key(w, i)][0] for w, i in q] == [max(t, STORE_TOP) for t in tops]
    again = _fresh(tiny_mlm, store)  # the store answers each at its own top: no forward
    assert _close(again.candidates(q, top=tops), want) and again.forwards == 0
    stored = StoredMaskedLM(store, "tiny-distilbert")  # --mlm store:NAME answers one top per context alike
    assert _close(stored.candidates(q, top=tops), want)
    with pytest.raises(TextAuditError, match="holds no answer"):  # stored 32 wide, asked 200 wide: not held
        stored.candidates(q[:1], top=[200])
    wider = _fresh(tiny_mlm, store)  # a context stored 32 wide, asked 200 wide: computed, and only it
    assert _close(wider.candidates(q[:1], top=[200]), [off.candidates(q[:1], top=200)[0]]) and wider.forwards == 1
    with pytest.raises(TextAuditError, match="2 tops for 6"):
        mixed.candidates(q, top=[20, 200])


def test_neighbourhoods_are_the_same_with_and_without_the_store(tiny_mlm, tmp_path):
    def build(store):
        b = NeighborhoodBuilder(_fresh(tiny_mlm, store), kappa=6, delta=10.0)
        return [(nb.text, nb.distance) for s in SENTENCES[:2] for nb in b.neighbors(s, 2)]

    store = NeighborhoodStore(tmp_path / "s.sqlite")
    off, filling, served = build(None), build(store), build(store)
    assert len(off) > 50 and off == filling == served


def test_another_masked_lm_never_reads_the_entries(tiny_mlm, tmp_path):
    import torch
    from transformers import DistilBertConfig, DistilBertForMaskedLM

    store = NeighborhoodStore(tmp_path / "s.sqlite")
    q = _queries()
    _fresh(tiny_mlm, store).candidates(q, top=20)
    torch.manual_seed(1)  # other weights, same tokenizer and name
    other_model = DistilBertForMaskedLM(DistilBertConfig(vocab_size=tiny_mlm.tokenizer.vocab_size, dim=32, hidden_dim=64,
                                                         n_layers=1, n_heads=2)).eval()
    other = HFMaskedLM(other_model, tiny_mlm.tokenizer, name="tiny-distilbert", device="cpu", store=store)
    got = other.candidates(q, top=20)
    assert other.store_hits == 0 and other.forwards > 0
    assert got == HFMaskedLM(other_model, tiny_mlm.tokenizer, name="x", device="cpu").candidates(q, top=20)
    assert got != _fresh(tiny_mlm, None).candidates(q, top=20)
    assert other.fingerprint != _fresh(tiny_mlm, None).fingerprint
    assert len(store.mlms()) == 2


def test_a_damaged_entry_is_a_miss_never_an_answer(tiny_mlm, tmp_path, capsys):
    path = tmp_path / "s.sqlite"
    q = _queries()
    want = _fresh(tiny_mlm, None).candidates(q, top=20)
    _fresh(tiny_mlm, NeighborhoodStore(path)).candidates(q, top=20)
    with sqlite3.connect(path) as c:  # flip one bit of three stored values
        rows = c.execute("SELECT mlm, k, v FROM entries LIMIT 3").fetchall()
        for m, k, v in rows:
            b = bytearray(v)
            b[10] ^= 0x04
            c.execute("UPDATE entries SET v = ? WHERE mlm = ? AND k = ?", (bytes(b), m, k))
    again = _fresh(tiny_mlm, NeighborhoodStore(path))
    got = again.candidates(q, top=20)
    assert again.forwards == 3 and again.store.stats.damaged == 3
    flipped = {k for _, k, _ in rows}
    redone = [i for i, (w, p) in enumerate(q) if context_key(w, p) in flipped]
    assert len(redone) == 3 and all(got[i] == want[i] for i in range(len(q)) if i not in redone)
    # the three are recomputed (in a batch of their own, as a new forward of just them gives them)
    assert [got[i] for i in redone] == _fresh(tiny_mlm, None).candidates([q[i] for i in redone], top=20)
    assert "3 damaged entries dropped" in capsys.readouterr().err
    assert _fresh(tiny_mlm, NeighborhoodStore(path)).candidates(q, top=20) == got  # recomputed and kept again


@pytest.mark.parametrize("damage", ["truncated", "garbage", "flipped page"])
def test_a_damaged_store_file_is_set_aside_and_rebuilt(tiny_mlm, tmp_path, capsys, damage):
    path = tmp_path / "s.sqlite"
    q = _queries()
    want = _fresh(tiny_mlm, None).candidates(q, top=20)
    s = NeighborhoodStore(path)
    _fresh(tiny_mlm, s).candidates(q, top=20)
    s.close()
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2 + 100]
    elif damage == "garbage":  # our store's header (its mark) kept, garbage behind it: a file wholly foreign to
        data = data[:100] + bytearray(b"not a database at all" * 200)  # textaudit is left alone (test_ownership)
    else:  # a b-tree page's header: quick_check sees it
        page = int.from_bytes(data[16:18], "big")
        for p in range(1, len(data) // page):
            data[p * page] ^= 0xFF
    path.write_bytes(bytes(data))
    again = _fresh(tiny_mlm, NeighborhoodStore(path))
    assert again.candidates(q, top=20) == want
    err = capsys.readouterr().err
    assert "was damaged" in err and "set aside" in err
    assert list(tmp_path.glob("s.sqlite.damaged-*"))
    assert _fresh(tiny_mlm, NeighborhoodStore(path)).candidates(q, top=20) == want  # the rebuilt store answers
    assert NeighborhoodStore(path).info()["entries"] == len({context_key(w, i) for w, i in q})


def test_a_full_disk_degrades_to_reading_with_a_notice(tiny_mlm, tmp_path, capsys):
    path = tmp_path / "s.sqlite"
    q = _queries()
    off = _fresh(tiny_mlm, None)
    off.candidates(q[:2], top=20)
    want = off.candidates(q, top=20)  # computed in the same batches as below
    store = NeighborhoodStore(path)
    mlm = _fresh(tiny_mlm, store)
    mlm.candidates(q[:2], top=20)
    conn = store._connection()
    conn.execute("VACUUM")  # no free pages left to fill
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")  # SQLite's own "disk is full"
    assert mlm.candidates(q, top=20) == want
    assert "cannot be written" in capsys.readouterr().err and not store._writable
    assert _fresh(tiny_mlm, store).candidates(q[:2], top=20) == want[:2]  # what it holds is still read


def test_a_store_that_cannot_be_opened_is_no_store(tiny_mlm, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    mlm = _fresh(tiny_mlm, NeighborhoodStore(blocker / "s.sqlite"))  # its folder is a file
    assert mlm.candidates(_queries()[:3], top=20) == _fresh(tiny_mlm, None).candidates(_queries()[:3], top=20)
    assert "running without it" in capsys.readouterr().err


WRITER = r"""
import sys, torch
from transformers import BertTokenizerFast, DistilBertConfig, DistilBertForMaskedLM
from textaudit.neighborhoods.masked_lm import HFMaskedLM
from textaudit.neighborhoods.store import NeighborhoodStore
from textaudit.resources import resolve
tok = BertTokenizerFast.from_pretrained(resolve("minilm"))
torch.manual_seed(0)
cfg = DistilBertConfig(vocab_size=tok.vocab_size, dim=32, hidden_dim=64, n_layers=1, n_heads=2)
model = DistilBertForMaskedLM(cfg).eval()
mlm = HFMaskedLM(model, tok, name="tiny-distilbert", device="cpu", store=NeighborhoodStore(sys.argv[1]))
lines = [l.split() for l in open(sys.argv[2], encoding="utf-8").read().splitlines()]
if sys.argv[4:] == ["ray"]:  # two Ray workers on this machine, each writing the store itself
    import os, ray
    from textaudit.backends import RayBackend, local_worker_env
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": local_worker_env()})
    def make_worker():
        return lambda s: (mlm.candidates([(w, i) for w in lines[s:s + 4] for i in range(len(w))], top=20), os.getpid())[1]
    pids = {pid for _, pid in RayBackend(workers=2, chunk=1).map(make_worker, [(str(s), s) for s in range(0, len(lines), 4)])}
    print("workers", len(pids), flush=True)
    sys.exit(0)
print("ready", flush=True)
for rep in range(int(sys.argv[3])):
    for s in range(0, len(lines), 4):
        mlm.candidates([(w, i) for w in lines[s:s + 4] for i in range(len(w))], top=20)
    mlm._cache.clear()
    print("pass", rep, flush=True)
"""


def test_concurrent_writers_and_a_kill_leave_a_store_every_process_agrees_with(tiny_mlm, tmp_path):
    """Two processes and a run on two Ray workers fill one store at once; a fourth process is killed
    (SIGKILL) mid-run; the store opens, passes quick_check, and every entry equals what one process alone
    computes."""
    from textaudit.data import load_dataset

    texts = [t for t in load_dataset("sst2", default_split="train", limit=300)["text"] if 4 <= len(t.split()) <= 14][:120]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts), encoding="utf-8")
    path = tmp_path / "s.sqlite"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "TEXTAUDIT_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, str(script), str(path), str(corpus), "1", *extra], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for extra in ([], [], ["ray"] if importlib.util.find_spec("ray") else [])]
    victim = subprocess.Popen([sys.executable, str(script), str(path), str(corpus), "50"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert victim.stdout.readline().strip() == "ready"
    deadline = time.time() + 300
    while time.time() < deadline and NeighborhoodStore(path).info()["entries"] < 200:
        time.sleep(0.2)
    victim.send_signal(signal.SIGKILL)  # mid-run: it is still writing
    victim.wait()
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert "workers 2" in out or p.args[-1] != "ray", out  # the Ray run's contexts were written by two workers
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    store = NeighborhoodStore(path)
    q = [(t.split(), i) for t in texts for i in range(len(t.split()))]
    assert store.info()["entries"] == len({context_key(w, i) for w, i in q})  # every context, once
    alone = _fresh(tiny_mlm, None).candidates(q, top=20)
    reader = _fresh(tiny_mlm, store)
    assert _close(reader.candidates(q, top=20), alone) and reader.forwards == 0


def test_the_store_commands(tmp_path, cli):
    """audit neighbors --store fills it; info counts it; export + import move it; --mlm store: answers without
    the weights; a context it lacks, a folder as --store and a bad --max-gb are one-line errors."""
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    r = cli("neighbors", "a deep and meaningful film .", "--k", "1", "--store", str(a), "--json")
    assert r.exit_code == 0, r.output
    first = json.loads(r.stdout.strip().splitlines()[-1])
    assert first["store_misses"] == 5 and first["store_hits"] == 0  # the five words (not the full stop)
    r = cli("neighbors", "a deep and meaningful film .", "--k", "1", "--store", str(a), "--json")
    again = json.loads(r.stdout.strip().splitlines()[-1])
    assert again["neighbors"] == first["neighbors"] and again["store_hits"] == 5 and again["store_misses"] == 0
    info = json.loads(cli("store", "info", "--store", str(a), "--json").stdout.strip().splitlines()[-1])
    assert info["entries"] == 5 and info["mlms"][0]["name"] == "minilm-mlm" and info["hits"] == 5
    out = tmp_path / "export.sqlite"
    assert cli("store", "export", str(out), "--store", str(a), "--mlm", "minilm-mlm").exit_code == 0
    r = cli("store", "import", str(out), "--store", str(b), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout.strip().splitlines()[-1])["imported"] == 5
    r = cli("neighbors", "a deep and meaningful film .", "--k", "1", "--store", str(b), "--mlm", "store:minilm-mlm", "--json")
    assert r.exit_code == 0, r.output
    stored = json.loads(r.stdout.strip().splitlines()[-1])
    assert stored["neighbors"] == first["neighbors"] and stored["mlm"] == "minilm-mlm"
    r = cli("neighbors", "an entirely different sentence .", "--k", "1", "--store", str(b), "--mlm", "store:minilm-mlm")
    assert r.exit_code == 2 and "holds no answer of minilm-mlm" in r.output and "Traceback" not in r.output
    for args, says in [(("neighbors", "a film .", "--store", str(tmp_path)), "is a directory"),
                       (("store", "prune", "--max-gb", "nan", "--store", str(a)), "--max-gb"),
                       (("store", "info", "--store", str(tmp_path / "none.sqlite")), "no neighbourhood store"),
                       (("store", "export", str(out), "--store", str(a)), "already exists"),
                       (("store", "import", str(tmp_path / "nothing"), "--store", str(b)), "does not exist")]:
        r = cli(*args)
        assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output, (args, r.output)
    r = cli("store", "prune", "--max-gb", "0", "--store", str(a), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout.strip().splitlines()[-1])["entries"] == 0


LEXICON = '''
POSITIVE = {{{pos}}}
NEGATIVE = {{"dull", "bad", "worst", "boring", "mess", "thin", "worse", "flat", "not", "no"}}

def clf(texts):
    out = []
    for t in texts:
        words = t.lower().split()
        s = sum(w in POSITIVE for w in words) - sum(w in NEGATIVE for w in words)
        p = 1 / (1 + 2.718281828 ** (-(s + 0.1)))
        out.append([1 - p, p])
    return out
'''


def test_an_attack_on_another_model_reads_what_the_first_stored_with_the_same_records(tmp_path, cli):
    """Two models, one store: the second attack's masked-LM answers come from the store (hits, fewer
    forwards) and its records equal a --store off run's in every field but seconds."""
    (tmp_path / "a.py").write_text(LEXICON.format(pos='"good", "great", "fine", "deep", "moving"'))
    (tmp_path / "b.py").write_text(LEXICON.format(pos='"good", "great", "fine", "meaningful", "fun"'))
    store = tmp_path / "s.sqlite"

    def attack(model, store_arg, out):
        r = cli("attack", "--model", f"{tmp_path}/{model}.py:clf", "--method", "so-enum", "--k", "1", "--limit", "6",
                "--no-ppl", "--store", store_arg, "--output", str(tmp_path / out), "--json")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout.strip().splitlines()[-1])

    first = attack("a", str(store), "a.jsonl")
    assert first["store_misses"] > 0 and first["store_hits"] == 0
    warm = attack("b", str(store), "b-warm.jsonl")
    cold = attack("b", "off", "b-cold.jsonl")
    assert warm["store_hits"] > 0 and warm["store_hit_rate"] > 0.5 and "store_hits" not in cold
    from textaudit.results import read_jsonl

    def records(name):
        return sorted(({k: v for k, v in r.items() if k != "seconds"} for r in read_jsonl(tmp_path / name)),
                      key=lambda r: r["id"])

    assert records("b-warm.jsonl") == records("b-cold.jsonl")
    assert len(records("b-warm.jsonl")) == 6 and any(r["status"] in ("success", "failed") for r in records("b-warm.jsonl"))


SLOW_LEXICON = "import os, time\n" + LEXICON.format(pos='"good", "great", "fine", "deep", "moving"').replace(
    "    out = []\n", "    time.sleep(float(os.environ.get('LEXICON_SLEEP', '0')))\n    out = []\n")


def test_an_attack_killed_while_it_writes_the_store_resumes_to_the_records_of_a_run_without_it(tmp_path):
    """kill -9 of an audit that is writing the store, mid-run: the store opens and passes quick_check,
    --resume finishes the results file with the records of a --store off run (every field but seconds), and
    a rerun finds every answer in the store, with the same records."""
    import signal

    from textaudit.results import read_jsonl

    (tmp_path / "p.py").write_text(SLOW_LEXICON)
    rows = ["a deep and meaningful film .", "the plot is thin and the acting is worse .", "a moving , fine story .",
            "one more deep film .", "it is a good and great mess .", "the best film of the year .",
            "an unflinching look at the mess we make .", "a fine cast in a flat film ."]
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(f"1\t{r}\n" for r in rows))
    store, out = tmp_path / "s.sqlite", tmp_path / "o.jsonl"
    cmd = [sys.executable, "-m", "textaudit", "--threads", "1", "attack", "--model", f"{tmp_path}/p.py:clf",
           "--method", "so-enum", "--k", "1", "--data", str(tmp_path / "d.tsv"), "--no-ppl", "--in-flight", "1"]
    proc = subprocess.Popen([*cmd, "--store", str(store), "--output", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, "LEXICON_SLEEP": "0.3"})  # slow enough to be killed mid-run
    deadline = time.time() + 300
    while time.time() < deadline and len(read_jsonl(out) if out.exists() else []) < 2:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 2 <= len(read_jsonl(out)) < len(rows)
    with sqlite3.connect(store) as c:
        assert c.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    r = subprocess.run([*cmd, "--store", str(store), "--output", str(out), "--resume", "--json"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    again = subprocess.run([*cmd, "--store", str(store), "--output", str(tmp_path / "again.jsonl"), "--json"],
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    summary = json.loads(again.stdout.splitlines()[-1])  # the killed run and its resume left every answer stored
    assert summary["store_misses"] == 0 and summary["store_hits"] > 0
    cold = subprocess.run([*cmd, "--store", "off", "--output", str(tmp_path / "cold.jsonl")], capture_output=True,
                          text=True, timeout=600)
    assert cold.returncode == 0, cold.stderr[-2000:]

    def records(path):
        return sorted(({k: v for k, v in rec.items() if k != "seconds"} for rec in read_jsonl(path)), key=lambda x: x["id"])

    assert records(out) == records(tmp_path / "cold.jsonl") == records(tmp_path / "again.jsonl")
    assert len(records(out)) == len(rows)


_LAZY = '''
import json, sys
from textaudit.neighborhoods.minilm_mlm import load_minilm_mlm
from textaudit.neighborhoods.store import NeighborhoodStore
from textaudit.errors import TextAuditError
m = load_minilm_mlm(device="cpu")
m.store = NeighborhoodStore(sys.argv[1])
q = [(s.split(), i) for s in json.loads(sys.argv[2]) for i in range(len(s.split()))]
try:
    got = m.candidates(q, top=20)
except TextAuditError as e:
    print(json.dumps({"error": str(e), "loaded": m.loaded}))
    raise SystemExit(2)
print(json.dumps({"loaded": m.loaded, "forwards": m.forwards, "hits": m.store_hits, "got": got, "fp": m.fingerprint}))
'''


def _lazy_run(tmp_path, sentences):
    r = subprocess.run([sys.executable, "-c", _LAZY, str(tmp_path / "s.sqlite"), json.dumps(sentences)],
                       capture_output=True, text=True)
    assert r.returncode in (0, 2), r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_process_the_store_answers_entirely_never_loads_the_masked_lms_weights(tmp_path):
    """minilm-mlm builds its model on first need: a new process whose every masked context the store holds answers
    from it without loading the weights (the fingerprint, the store's key, is remembered for the same files) —
    the same answers; a remembered fingerprint that the weights contradict is an error and forgotten, never an
    answer under another masked LM's key."""
    from textaudit.neighborhoods.minilm_mlm import files_key
    from textaudit.resources import cache_dir, resolve

    first = _lazy_run(tmp_path, SENTENCES[:2])
    assert first["loaded"] and first["forwards"] > 0
    second = _lazy_run(tmp_path, SENTENCES[:2])  # a new process: every context in the store
    assert not second["loaded"] and second["forwards"] == 0 and second["hits"] == len(_queries(SENTENCES[:2]))
    assert second["got"] == first["got"] and second["fp"] == first["fp"]
    third = _lazy_run(tmp_path, SENTENCES[:3])  # a context the store lacks: the weights load, once
    assert third["loaded"] and third["got"][: len(first["got"])] == first["got"] and third["fp"] == first["fp"]

    memo = cache_dir() / "mlm-fingerprints.json"
    table = json.loads(memo.read_text())
    (key,) = table
    assert key.startswith(files_key(resolve("minilm-mlm"), resolve("minilm"))) and table[key] == first["fp"]
    memo.write_text(json.dumps({key: "0" * 40}))  # what another masked LM's weights would give
    wrong = _lazy_run(tmp_path, SENTENCES[:3])  # no answer under "0"*40: a miss, the weights load and disagree
    assert "no longer matches its weights" in wrong["error"] and "\n" not in wrong["error"]
    assert key not in json.loads(memo.read_text())
    again = _lazy_run(tmp_path, SENTENCES[:3])
    # the fingerprint computed from the weights (loaded for it), remembered again; every answer from the store
    assert again["got"] == third["got"] and again["fp"] == first["fp"] and again["loaded"] and again["forwards"] == 0
    assert not _lazy_run(tmp_path, SENTENCES[:3])["loaded"]


def test_another_artifact_or_encoder_is_another_key(tmp_path):
    from textaudit.neighborhoods.minilm_mlm import files_key
    from textaudit.resources import resolve

    art = tmp_path / "a.safetensors"
    art.write_bytes(resolve("minilm-mlm").read_bytes())
    base = files_key(art, resolve("minilm"))
    assert files_key(art, resolve("minilm")) == base
    art.write_bytes(art.read_bytes()[:-1] + b" ")  # one byte of the artifact
    assert files_key(art, resolve("minilm")) != base
    enc = tmp_path / "enc"
    enc.mkdir()
    for f in resolve("minilm").iterdir():
        if f.is_file():
            (enc / f.name).write_bytes(f.read_bytes())
    assert files_key(resolve("minilm-mlm"), enc) != files_key(resolve("minilm-mlm"), resolve("minilm"))


def test_a_masked_lm_not_yet_built_travels_with_its_artifact_not_its_weights(tmp_path):
    """A copy for a Ray worker (pickled) of a minilm-mlm whose model is not built yet carries the artifact's bytes
    (a few MB): built on the other side from them, even where the driver's path does not exist, it answers as the
    driver's would."""
    import pickle

    from textaudit.neighborhoods.minilm_mlm import load_minilm_mlm

    mlm = load_minilm_mlm(device="cpu")
    blob = pickle.dumps(mlm)
    assert not mlm.loaded and len(blob) < 20_000_000  # the weights (90 MB) stay home
    there = pickle.loads(blob)
    there._loader.path = str(tmp_path / "not-on-this-machine.safetensors")
    q = _queries(SENTENCES[:1])
    assert _close(there.candidates(q, top=20), mlm.candidates(q, top=20)) and there.loaded
