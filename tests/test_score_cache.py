"""The score cache (textaudit.neighborhoods.store, tables ``classifiers`` and ``scores``): a classifier's
answers kept on disk across runs, keyed by what they are a function of; answers from it are the
forward's, bit for bit; records are the same with and without it; plug-ins and endpoints only when
asked; safe under two writers and a kill -9; covered by ``audit store info`` and ``prune``."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from textaudit.models import load_classifier
from textaudit.neighborhoods.score_cache import score_identity, use_score_cache
from textaudit.neighborhoods.store import NeighborhoodStore, use_store

TEXTS = ["a deep and meaningful film .", "the plot is thin and the acting is worse .",
         "an unflinching look at the mess we make .", "it is not the worst , is it ?", "good", "bad bad bad"]


@pytest.fixture(scope="module")
def tiny_hf(tmp_path_factory):
    """A tiny BERT sequence classifier saved as a HuggingFace directory (random weights, seeded)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    d = tmp_path_factory.mktemp("tiny-hf")
    words = sorted({w for t in TEXTS for w in t.split()} | {"film", "great", "awful"})
    (d / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tok = BertTokenizerFast(vocab_file=str(d / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=len(words) + 5, hidden_size=32, num_hidden_layers=2,
                                                     num_attention_heads=2, intermediate_size=64, num_labels=2))
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


def _scores(path, spec, texts, **options):
    """A fresh classifier object (an empty memory cache, as a new process has) scoring ``texts`` with the store
    ``path``: ``(probabilities, forwards, store hits)``."""
    from textaudit.models.options import ModelOptions, use_model_options

    precision = options.pop("precision", None)
    with use_store(str(path)), use_score_cache(options.pop("choice", None)), \
            use_model_options(ModelOptions(precision=precision)):
        clf = load_classifier(spec, device="cpu")
        probs = clf.predict_proba(texts)
        return probs, clf.stats.unique_forwards, clf.stats.store_hits


def test_answers_from_the_cache_are_the_forwards_bit_for_bit(tiny_hf, tmp_path):
    store = tmp_path / "s.sqlite"
    first, f1, h1 = _scores(store, f"hf:{tiny_hf}", TEXTS)
    again, f2, h2 = _scores(store, f"hf:{tiny_hf}", TEXTS + [TEXTS[0]])
    assert (f1, h1) == (len(TEXTS), 0) and (f2, h2) == (0, len(TEXTS))  # the second object ran no forward
    assert again.dtype == np.float32 and np.array_equal(again[:-1], first) and np.array_equal(again[-1], first[0])
    off, f3, h3 = _scores(store, f"hf:{tiny_hf}", TEXTS, choice="off")
    assert (f3, h3) == (len(TEXTS), 0) and np.array_equal(off, first)
    info = NeighborhoodStore(store).info()["scores"]
    assert info["entries"] == len(TEXTS) and info["hits"] == len(TEXTS) and info["misses"] == len(TEXTS)


def test_the_cache_is_injected_by_its_block_and_nothing_is_kept_outside_it(tiny_hf, tmp_path):
    """The score cache is injected, never installed by an import: importing its module leaves the classifiers' slot
    empty; a classifier that first misses inside ``use_score_cache`` keeps and reads its answers, one outside keeps
    nothing (the store is there, the masked-LM side of it in use) — and leaving the block takes the cache away."""
    import importlib

    import textaudit.neighborhoods.score_cache as score_cache
    from textaudit.models.batched import SCORE_CACHE

    importlib.reload(score_cache)
    assert SCORE_CACHE[0] is None
    store = tmp_path / "s.sqlite"
    with use_store(str(store)):
        outside = load_classifier(f"hf:{tiny_hf}", device="cpu")
        outside.predict_proba(TEXTS)
        assert outside.score_cache is None and outside.stats.unique_forwards == len(TEXTS)
        with score_cache.use_score_cache("auto"):
            assert SCORE_CACHE[0] is score_cache.score_cache_for
            inside = load_classifier(f"hf:{tiny_hf}", device="cpu")
            inside.predict_proba(TEXTS)
            again = load_classifier(f"hf:{tiny_hf}", device="cpu")
            again.predict_proba(TEXTS)
        assert SCORE_CACHE[0] is None
    assert (inside.stats.unique_forwards, again.stats.unique_forwards, again.stats.store_hits) == (len(TEXTS), 0, len(TEXTS))


def test_other_weights_or_precision_are_another_key(tiny_hf, tmp_path):
    """A retrained model (same directory, other weights) and another precision never read the entries."""
    import shutil

    import torch
    from transformers import BertForSequenceClassification

    store = tmp_path / "s.sqlite"
    d = tmp_path / "model"
    shutil.copytree(tiny_hf, d)
    _scores(store, f"hf:{d}", TEXTS)
    _, forwards, hits = _scores(store, f"hf:{d}", TEXTS, precision="bf16")
    assert hits == 0 and forwards == len(TEXTS)
    m = BertForSequenceClassification.from_pretrained(d)
    with torch.no_grad():
        m.classifier.bias += 1.0  # "retrained"
    m.save_pretrained(d)
    probs, forwards, hits = _scores(store, f"hf:{d}", TEXTS)
    assert hits == 0 and forwards == len(TEXTS)
    assert len(NeighborhoodStore(store).classifiers()) == 3


PLUGIN = '''
def clf(texts):  # positive when "good" or "deep" is there
    return [[0.2, 0.8] if ("good" in t.split() or "deep" in t.split()) else [0.9, 0.1] for t in texts]
'''


def test_a_plugin_is_kept_only_when_asked_and_records_are_the_same(tmp_path, cli):
    """A plug-in may read state its file does not show: its scores are kept only with --score-cache all;
    then a second attack computes nothing and its records equal a run without any store."""
    (tmp_path / "p.py").write_text(PLUGIN)
    data = tmp_path / "d.tsv"
    data.write_text("label\ttext\n" + "".join(f"{int('good' in t or 'deep' in t)}\t{t}\n" for t in TEXTS[:4]))
    store = tmp_path / "s.sqlite"

    def attack(out, *extra):
        r = cli("attack", "--model", f"{tmp_path}/p.py:clf", "--method", "so-enum", "--k", "1", "--data", str(data),
                "--no-ppl", "--output", str(tmp_path / out), "--json", *extra)
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout.strip().splitlines()[-1])

    default = attack("a.jsonl", "--store", str(store))
    assert "score_hits" not in default and NeighborhoodStore(store).info()["scores"]["entries"] == 0
    first = attack("b.jsonl", "--store", str(store), "--score-cache", "all")
    second = attack("c.jsonl", "--store", str(store), "--score-cache", "all")
    cold = attack("d.jsonl", "--store", "off")
    assert "score_hits" not in cold  # no store: nothing kept, nothing read
    assert first["score_hits"] == 0 and first["score_forwards"] > 0
    assert second["score_forwards"] == 0 and second["score_hits"] == first["score_forwards"]
    from textaudit.results import read_jsonl

    def records(name):
        return sorted(({k: v for k, v in r.items() if k != "seconds"} for r in read_jsonl(tmp_path / name)),
                      key=lambda r: r["id"])

    assert records("c.jsonl") == records("d.jsonl") == records("b.jsonl")
    assert any(r["status"] == "success" for r in records("c.jsonl"))
    bad = cli("attack", "--model", f"{tmp_path}/p.py:clf", "--score-cache", "sometimes", "--data", str(data))
    assert bad.exit_code == 2 and "--score-cache must be one of auto, all, off" in bad.output


class _Endpoint:
    """What score_identity reads of an endpoint's classifier (its loader sets these)."""

    score_kind, fingerprint, forward, _num_classes, name = "remote", "http://127.0.0.1:9/v1#m+prompt:ab", None, 3, "ep"

    def __init__(self, scores, samples=1, temperature=0.0):
        self.scores, self.samples, self.temperature = scores, samples, temperature


def test_endpoints_only_when_asked_and_label_only_sampling_never():
    with use_score_cache("auto"):
        assert score_identity(_Endpoint("logprobs")) is None
    with use_score_cache("all"):
        assert score_identity(_Endpoint("logprobs")).startswith("http://127.0.0.1:9/v1#m+prompt:ab|")
        assert score_identity(_Endpoint("labels")) is not None  # one greedy completion: one answer
        assert score_identity(_Endpoint("labels", samples=5)) is None  # every run draws again
        assert score_identity(_Endpoint("labels", temperature=0.7)) is None
    with use_score_cache("off"):
        assert score_identity(_Endpoint("logprobs")) is None


WRITER = r'''
import sys, time
import textaudit.neighborhoods.store as store_module
from textaudit.models import load_classifier
from textaudit.neighborhoods.score_cache import use_score_cache
from textaudit.neighborhoods.store import use_store
store_module.SCORE_BATCH = 40  # written every two calls (16,384 rows at a time by default): killed mid-run, mid-write
model, store, texts, pause = sys.argv[1], sys.argv[2], open(sys.argv[3]).read().splitlines(), float(sys.argv[4])
with use_store(store), use_score_cache("auto"):
    clf = load_classifier("hf:" + model, device="cpu")
    print("ready", flush=True)
    for s in range(0, len(texts), 20):
        clf.predict_proba(texts[s:s + 20])
        time.sleep(pause)
print("done", clf.stats.unique_forwards, clf.stats.store_hits, flush=True)
'''


def test_two_writers_and_a_kill_leave_a_cache_that_answers_as_one_process(tiny_hf, tmp_path):
    rng = np.random.default_rng(0)
    words = [w for t in TEXTS for w in t.split()]
    texts = list(dict.fromkeys(" ".join(rng.choice(words, rng.integers(3, 12))) for _ in range(1200)))
    (tmp_path / "texts.txt").write_text("\n".join(texts))
    (tmp_path / "w.py").write_text(WRITER)
    store = tmp_path / "s.sqlite"
    env = {**os.environ, "TEXTAUDIT_THREADS": "1"}
    args = [sys.executable, str(tmp_path / "w.py"), str(tiny_hf), str(store), str(tmp_path / "texts.txt")]
    writers = [subprocess.Popen(args + ["0"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]
    victim = subprocess.Popen(args + ["0.05"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert victim.stdout.readline().strip() == "ready"
    deadline = time.time() + 300
    while time.time() < deadline and (not store.exists() or NeighborhoodStore(store).info()["scores"]["entries"] < 100):
        time.sleep(0.1)
    victim.send_signal(signal.SIGKILL)  # mid-run: it is still writing
    victim.wait()
    for w in writers:
        out, err = w.communicate(timeout=600)
        assert w.returncode == 0, err
        assert out.strip().splitlines()[-1].startswith("done")
    with sqlite3.connect(store) as c:
        assert c.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    alone, _, _ = _scores(tmp_path / "alone.sqlite", f"hf:{tiny_hf}", texts)
    cached, forwards, hits = _scores(store, f"hf:{tiny_hf}", texts)
    assert forwards == 0 and hits == len(texts)  # every text, once, in the cache
    # a row computed in another batch may differ in its last bit (padding, BLAS blocking): nothing more
    assert np.abs(cached - alone).max() < 1e-6


def test_prune_drops_scores_too_and_info_counts_them(tiny_hf, tmp_path, cli):
    store = tmp_path / "s.sqlite"
    rng = np.random.default_rng(1)
    texts = [f"film {i} " + " ".join(rng.choice(["good", "bad", "deep"], 5)) for i in range(3000)]
    _scores(store, f"hf:{tiny_hf}", texts)
    r = cli("store", "info", "--store", str(store), "--json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.stdout)
    assert info["scores"]["entries"] == len(texts) and info["scores"]["classifiers"][0]["entries"] == len(texts)
    size = store.stat().st_size
    r = cli("store", "prune", "--store", str(store), "--max-gb", str(size / 2 / 1e9), "--json")
    assert r.exit_code == 0, r.output
    # at most the size asked (#63: prune dropped a share of the entries by the file's size, and reported a store
    # still above it: a file's pages are not all entries)
    assert store.stat().st_size <= size / 2 and json.loads(r.stdout.strip().splitlines()[-1])["bytes"] <= size / 2
    left = NeighborhoodStore(store).info()["scores"]["entries"]
    assert 0 < left < len(texts)
    _, forwards, hits = _scores(store, f"hf:{tiny_hf}", texts)
    assert hits == left and forwards == len(texts) - left


def test_replay_on_the_attacked_model_reads_the_scores_the_attack_kept(tmp_path, cli):
    """The findings' sentences were scored by the attack: replayed on the same model, the store answers them."""
    from textaudit.findings import replay

    (tmp_path / "p.py").write_text(PLUGIN)
    data = tmp_path / "d.tsv"
    data.write_text("label\ttext\n" + "".join(f"{int('good' in t or 'deep' in t)}\t{t}\n" for t in TEXTS[:4]))
    store = tmp_path / "s.sqlite"
    r = cli("attack", "--model", f"{tmp_path}/p.py:clf", "--method", "so-enum", "--k", "1", "--data", str(data),
            "--no-ppl", "--store", str(store), "--score-cache", "all", "--output", str(tmp_path / "a.jsonl"), "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["score_forwards"] > 0 and summary["success"] >= 1, summary
    with use_store(str(store)), use_score_cache("all"):
        clf = load_classifier(f"{tmp_path}/p.py:clf")
        result = replay(tmp_path / "a.jsonl", clf)
    assert result.records and clf.stats.unique_forwards == 0 and clf.stats.store_hits > 0
    assert all(rec["status"] == "still" for rec in result.records)  # the same model: every finding holds


def test_a_run_that_finds_nothing_stops_looking_but_keeps_what_it_computes(tmp_path):
    """Looking up texts the disk has not got only costs: after a window of misses the classifier stops looking
    (its answers unchanged), yet keeps writing, so the next run finds everything."""
    from textaudit.models.batched import DiskWeigher

    (tmp_path / "p.py").write_text(PLUGIN)
    store = tmp_path / "s.sqlite"
    texts = [f"film number {i} is good" if i % 3 else f"film number {i}" for i in range(3 * DiskWeigher.WINDOW)]
    with use_store(str(store)), use_score_cache("all"):
        first = load_classifier(f"{tmp_path}/p.py:clf")
        probs = np.concatenate([first.predict_proba(texts[s:s + 1000]) for s in range(0, len(texts), 1000)])
        assert not first._disk.looking and first.stats.store_hits == 0
        again = load_classifier(f"{tmp_path}/p.py:clf")
        probs2 = np.concatenate([again.predict_proba(texts[s:s + 1000]) for s in range(0, len(texts), 1000)])
        assert again._disk.looking and again.stats.store_hits == len(texts) and again.stats.unique_forwards == 0
    assert np.array_equal(probs, probs2)


LAST_BIT = '''
import numpy as np
def clf(texts):  # a float32 forward whose last bits depend on the batch, as a GEMM's blocking makes them
    p = np.float32(0.8) + np.float32(1e-7) * np.float32(len(texts))
    return [[1 - p, p] if "good" in t.split() else [p, 1 - p] for t in texts]
'''


def test_a_text_the_memory_let_go_is_read_back_not_computed_again(tmp_path):
    """A long run asks more texts than its memory cache holds: one asked again after the memory let it go must get
    the answer already kept (and used by earlier records), not a forward in another batch that differs in its last
    bit — else a rerun answered from the disk differs from the first run (it did: 15 of 3.8 million bias records'
    F in the sixth decimal). Even after a cheap model stopped looking every text up."""
    from textaudit.models.batched import DiskWeigher

    (tmp_path / "b.py").write_text(LAST_BIT)
    store, spec, text = tmp_path / "s.sqlite", f"{tmp_path}/b.py:clf", "a good film"
    texts = [f"film number {i}" for i in range(3 * DiskWeigher.WINDOW)]

    def run(clf) -> tuple[np.ndarray, np.ndarray]:
        clf.cache_size = 1000
        alone = clf.predict_proba([text])[0]
        for s in range(0, len(texts), 1000):  # the memory lets the text go
            clf.predict_proba(texts[s:s + 1000])
        assert text not in clf._cache
        return alone, clf.predict_proba([text, "another good film"])[0]

    plain = load_classifier(spec)  # no score cache: the forward answers again, in a batch of two
    alone, later = run(plain)
    assert alone[1] != later[1] and abs(alone[1] - later[1]) < 1e-6
    with use_store(str(store)), use_score_cache("all"):
        first = load_classifier(spec)
        alone, later = run(first)
        assert not first._disk.looking  # every text new: it stopped looking up, yet reads back what it let go
        assert np.array_equal(alone, later) and first.stats.store_hits == 1
        first.clear_cache()
        assert np.array_equal(first.predict_proba([text, "a good day", "good"])[0], alone)
        again = load_classifier(spec)  # the next run: the same answer, from the disk
        assert np.array_equal(again.predict_proba([text])[0], alone) and again.stats.unique_forwards == 0


def test_a_server_keeps_no_score_on_disk(tiny_hf, tmp_path):
    """audit serve answers texts from anyone, without end: none of them goes to the store."""
    pytest.importorskip("fastapi")
    from textaudit.serve import make_app

    with use_store(str(tmp_path / "s.sqlite")), use_score_cache("auto"):
        clf = load_classifier(f"hf:{tiny_hf}", device="cpu")
        assert clf.score_cache is not None  # an audit would keep them
        make_app(clf)
        clf.predict_proba(TEXTS)
        assert clf.score_cache is None and clf.stats.store_hits == 0
    assert NeighborhoodStore(tmp_path / "s.sqlite").info()["scores"]["entries"] == 0


def test_the_store_keeps_no_credential_of_an_identity(tmp_path):
    """An endpoint's identity holds its URL: what the store file keeps of it passes the one redaction."""
    from textaudit.secrets import register

    secret = "sk-verysecretkey-0123456789"
    register(secret)
    store = NeighborhoodStore(tmp_path / "s.sqlite")
    found = store.classifier_id(f"https://user:{secret}@api.example.com/v1#m|-|-|remote|scores-1",
                                f"https://api.example.com/v1?key={secret}", 2)
    assert found is not None and store.classifier_id(
        f"https://user:{secret}@api.example.com/v1#m|-|-|remote|scores-1", "x", None) == found  # the same key
    store.close()
    assert secret.encode() not in (tmp_path / "s.sqlite").read_bytes()
    assert all(secret not in c["identity"] + c["name"] for c in NeighborhoodStore(tmp_path / "s.sqlite").classifiers())


TWO = '''
import numpy as np

def pos(texts):
    return np.array([[0.2, 0.8]] * len(texts))

def neg(texts):
    return np.array([[0.8, 0.2]] * len(texts))

def flips(texts):  # positive exactly when "good" is in the text: an attack on it succeeds
    return np.array([[0.1, 0.9] if "good" in t.split() else [0.9, 0.1] for t in texts])

def constant(texts):  # one answer whatever the text: an attack on it can never succeed
    return np.array([[0.1, 0.9]] * len(texts))
'''


def test_two_models_in_one_plugin_file_never_share_answers(tmp_path, cli, monkeypatch):
    """#82 (WRONG): ``two.py:pos`` and ``two.py:neg`` were one identity (the file's hash): ``neg`` reported ``pos``'s
    accuracy from the cache, and an attack on a constant model reported the successes of the model asked before it
    in the same file. The object named is part of every kept answer's key (and of the results header's fingerprint)."""
    (tmp_path / "two.py").write_text(TWO)
    data = tmp_path / "d.tsv"
    data.write_text("text\tlabel\na good film\t1\na bad film\t0\na good plot\t1\na dull plot\t0\n")
    monkeypatch.setenv("TEXTAUDIT_STORE", str(tmp_path / "s.sqlite"))
    monkeypatch.setenv("TEXTAUDIT_SCORE_CACHE", "all")

    def run(*args):
        r = cli(*args, "--data", str(data), "--json")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout.strip().splitlines()[-1])

    from textaudit.neighborhoods.store_sync import LIVE

    assert run("evaluate", "--model", f"{tmp_path}/two.py:pos")["accuracy"] == 0.5
    for s in list(LIVE):  # what a process writes at its exit (this one is pytest's)
        s.flush()
    assert NeighborhoodStore(tmp_path / "s.sqlite").info()["scores"]["entries"] == 4  # pos's answers, kept
    neg = run("evaluate", "--model", f"{tmp_path}/two.py:neg")
    assert neg["accuracy"] == 0.5 and neg["confusion"]["matrix"] == [[2, 0], [2, 0]]  # its own answers: all class 0
    found = run("attack", "--model", f"{tmp_path}/two.py:flips", "--method", "so-enum", "--k", "1", "--no-ppl")
    assert found["success"] > 0
    const = run("attack", "--model", f"{tmp_path}/two.py:constant", "--method", "so-enum", "--k", "1", "--no-ppl")
    assert const["success"] == 0  # was: flips's successes, read from the cache under the file's one identity
    from textaudit.models import load_classifier

    fps = {load_classifier(f"{tmp_path}/two.py:{n}").fingerprint for n in ("pos", "neg", "flips", "constant")}
    assert len(fps) == 4  # a results file of one is never resumed with another


def test_the_key_of_a_kept_answer_changes_with_every_trait_it_depends_on():
    """#82 (contract): every answer in the score cache is keyed by :func:`answer_key` of the model's declared
    :class:`AnswerTraits` alone; changing any one trait — weights or code, the object named, output, labels,
    multi-label, scoring, samples, temperature, precision, device, who may keep it — changes the key, and
    a trait added to the dataclass without a value here fails this test."""
    import dataclasses

    from textaudit.models.traits import AnswerTraits, answer_key

    base = AnswerTraits(fingerprint="abc", obj="pos", output="probs", labels=("negative", "positive"), multilabel=False,
                        scores=None, samples=1, temperature=0.0, precision="fp32", device="cpu", kind="weights")
    other = {"fingerprint": "abd", "obj": "neg", "output": "logits", "labels": ("positive", "negative"), "multilabel": True,
             "scores": "labels", "samples": 5, "temperature": 0.7, "precision": "bf16", "device": "cuda", "kind": "code"}
    assert set(other) == {f.name for f in dataclasses.fields(AnswerTraits)}  # every trait is tried
    keys = {answer_key(base, 1)}
    for name, value in other.items():
        keys.add(answer_key(dataclasses.replace(base, **{name: value}), 1))
    assert len(keys) == 1 + len(other)
    assert answer_key(base, 2) != answer_key(base, 1)  # the kept rows' format too
    assert answer_key(dataclasses.replace(base), 1) == answer_key(base, 1)  # and nothing else: the same traits, one key


def test_a_kept_row_rewritten_with_its_crc_recomputed_is_no_answer(tmp_path, cli, monkeypatch):
    """#82 (WRONG): score rows rewritten as NaN (or out of [0, 1], or not summing to 1) with their CRC recomputed were
    served as answers (accuracy 0.5 instead of 1.0, exit 0). A kept row is checked as an answer before it is one:
    such a row is damaged — dropped, said, recomputed."""
    import zlib

    (tmp_path / "two.py").write_text(TWO)
    data = tmp_path / "d.tsv"
    data.write_text("text\tlabel\na good film\t1\na bad film\t0\na good plot\t1\na dull plot\t0\n")
    store = tmp_path / "s.sqlite"
    monkeypatch.setenv("TEXTAUDIT_STORE", str(store))
    monkeypatch.setenv("TEXTAUDIT_SCORE_CACHE", "all")
    args = ("evaluate", "--model", f"{tmp_path}/two.py:flips", "--data", str(data), "--json")
    first = cli(*args)
    assert first.exit_code == 0 and json.loads(first.stdout.strip().splitlines()[-1])["accuracy"] == 1.0
    from textaudit.neighborhoods.store_sync import LIVE

    for s in list(LIVE):  # what a process writes at its exit (this one is pytest's)
        s.flush()
    lies = [np.array([np.nan, np.nan]), np.array([1.5, -0.5]), np.array([0.9, 0.9]), np.array([np.inf, 0.0])]
    with sqlite3.connect(store) as c:
        rows = c.execute("SELECT clf, k FROM scores").fetchall()
        assert len(rows) == 4
        for (clf, k), lie in zip(rows, lies):
            v = lie.astype("<f4").tobytes()
            c.execute("UPDATE scores SET v = ?, crc = ? WHERE clf = ? AND k = ?", (v, zlib.crc32(k + v), clf, k))
    again = cli(*args)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout.strip().splitlines()[-1])["accuracy"] == 1.0  # the model's answers, not the lies
    assert "4 damaged scores dropped (recomputed)" in again.stderr
