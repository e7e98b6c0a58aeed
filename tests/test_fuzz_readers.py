"""#82: every reader of a file a user or another process can write, under a property-based fuzzer (Hypothesis).

For each reader the property is the same: given any bytes — valid files mutated by deep nesting, huge values,
wrong types, truncation and random bytes — it returns a correct answer or raises :class:`TextAuditError` (which every
command turns into one ``error:`` line and exit 2); never another exception (a traceback), and never a silently
different number (where the file holds numbers that become answers, each answer is checked against what the
file really says). Seeded (``derandomize``) and bounded: each test takes seconds, well under a minute.

Readers: results files (``results.load`` and their summaries), kept runs (``<results>.track.json``), ``--synonyms``,
``--pairs-file``, prompt files, suites, data files (TSV, CSV, JSON lines), compare and harden summaries, store files
and their imports (masked-LM entries), and the score cache's kept rows.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import zlib

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from textaudit.errors import TextAuditError  # noqa: E402

#: every fuzz test: the same examples on every run (seeded by the test's name), no example database, no deadline
#: (a busy machine must not fail a test), a bound on the examples that keeps each test to seconds
FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=int(os.environ.get("TEXTAUDIT_FUZZ_EXAMPLES", "150")),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])

DEEP = "[" * 100_000 + "]" * 100_000
#: JSON values of every type, nested a little
LEAF = (st.none() | st.booleans() | st.integers(min_value=-(2 ** 70), max_value=2 ** 70)
        | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12))
VALUES = st.recursive(LEAF, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                      max_leaves=12)


def _dumps(v) -> str:
    return json.dumps(v, allow_nan=True)


@st.composite
def mutated(draw, valid: str) -> bytes:
    """``valid`` (a file's text) as it is, or mutated one way: truncated, a byte range replaced by random bytes,
    a deep nesting or a huge value spliced in, a line replaced by a random JSON value, or random bytes alone."""
    how = draw(st.sampled_from(["as is", "truncate", "bytes", "deep", "huge", "line", "random"]))
    data = valid.encode("utf-8")
    if how == "truncate":
        return data[: draw(st.integers(0, max(0, len(data) - 1)))]
    if how == "bytes":
        i = draw(st.integers(0, len(data)))
        return data[:i] + draw(st.binary(min_size=1, max_size=16)) + data[i + draw(st.integers(0, 16)):]
    if how == "deep":
        i = draw(st.integers(0, len(data)))
        return data[:i] + DEEP.encode() + data[i:]
    if how == "huge":
        i = draw(st.integers(0, len(data)))
        return data[:i] + draw(st.sampled_from([b"1e999", b"9" * 5000, b'"' + b"x" * 200_000 + b'"', b"-1e-999"])) + data[i:]
    if how == "line":
        lines = valid.splitlines() or [""]
        lines[draw(st.integers(0, len(lines) - 1))] = _dumps(draw(VALUES))
        return "\n".join(lines).encode("utf-8") + b"\n"
    if how == "random":
        return draw(st.binary(max_size=200))
    return data


def _only_our_error(fn, *args, **kw):
    """``fn(*args)``'s value, or None when it raised TextAuditError (one line, exit 2); anything else fails the test."""
    try:
        return fn(*args, **kw)
    except TextAuditError as e:
        assert "\n" not in str(e).strip(), str(e)
        return None


# -- results files --------------------------------------------------------------------------------------------

def _attack_file() -> str:
    header = {"header": {"command": "attack", "config": {"method": "so-enum", "k": 1, "model": "m.py:clf", "seed": 0},
                         "textaudit": "0.1.0"}}
    recs = [{"id": f"d:{i}", "status": s, "method": "so-enum", "text": "a good film", "label": 1, "prediction": 1,
             "vulnerable": "a good film", "vulnerable_patched": "a good movie", "pair": ["film", "movie"], "l0": 0,
             "queries": 3, "seconds": 0.1} for i, s in enumerate(["success", "failed", "success", "skipped"])]
    return "".join(_dumps(x) + "\n" for x in [header, *recs])


@FUZZ
@given(data=mutated(_attack_file()))
def test_results_files(tmp_path_factory, data):
    """``results.load`` and the summary it recomputes: an answer or one line. A file that loads and still has its
    four records gives the success rate they say (2 of 3 attacked) or says why not."""
    from textaudit.results import load

    p = tmp_path_factory.mktemp("r") / "r.jsonl"
    p.write_bytes(data)
    res = _only_our_error(load, p)
    if res is None:
        return
    summary = _only_our_error(res.summary)
    if summary is not None and data == _attack_file().encode():
        assert summary["success"] == 2 and summary["success_rate"] == pytest.approx(2 / 3, abs=1e-4)


@FUZZ
@given(header=VALUES, record=VALUES)
def test_results_files_of_any_json(tmp_path_factory, header, record):
    """Well-formed JSON lines of any shape: a header of the wrong type, records that are numbers or lists."""
    from textaudit.results import load

    p = tmp_path_factory.mktemp("r") / "r.jsonl"
    p.write_text(_dumps({"header": header}) + "\n" + _dumps(record) + "\n")
    res = _only_our_error(load, p)
    if res is not None:
        _only_our_error(res.summary)


# -- kept runs ------------------------------------------------------------------------------------------------

@FUZZ
@given(run=VALUES, digest=st.one_of(st.none(), st.text(max_size=70)), data=st.data())
def test_kept_runs(tmp_path_factory, run, digest, data):
    """``<results>.track.json``: honoured, or one line; whatever it holds, the artifacts of a run read from it are
    the results file alone (#82: nothing kept decides what leaves the machine)."""
    from textaudit.track import PENDING_FORMAT, read_pending

    d = tmp_path_factory.mktemp("k")
    results = d / "g.jsonl"
    results.write_text(_attack_file())
    doc = {"format": PENDING_FORMAT, "run": run, "sha256": digest}
    kept = d / "g.jsonl.track.json"
    kept.write_bytes(data.draw(mutated(_dumps(doc))))
    got = _only_our_error(read_pending, kept, results)
    if got is not None:
        assert got.artifacts == [str(results.resolve())] and all(not c.artifacts for c in got.children)


# -- synonyms, pairs, prompts, suites --------------------------------------------------------------------------

@FUZZ
@given(data=st.data())
def test_synonyms_files(tmp_path_factory, data):
    from textaudit.robustness.request import read_synonyms

    p = tmp_path_factory.mktemp("s") / "syn.json"
    p.write_bytes(data.draw(mutated(_dumps({"good": ["great", "fine"], "Film": ["movie"]}))
                            | st.builds(lambda v: _dumps(v).encode(), VALUES)))
    table = _only_our_error(read_synonyms, p)
    if table is not None:
        assert all(isinstance(k, str) and k == k.strip().lower() and any(ch.isalpha() for ch in k) for k in table)
        assert all(isinstance(v, list) and all(isinstance(x, str) and x for x in v) for v in table.values())


@FUZZ
@given(data=st.data())
def test_pairs_files(tmp_path_factory, data):
    from textaudit.lexicons import load_pairs_file

    p = tmp_path_factory.mktemp("p") / "pairs.txt"
    p.write_bytes(data.draw(mutated("he,she\nman woman  # a comment\n") | mutated(_dumps([["he", "she"], ["a", "b"]]))
                            | st.builds(lambda v: _dumps(v).encode(), VALUES)))
    pairs = _only_our_error(load_pairs_file, str(p))
    if pairs is not None:
        assert pairs and all(isinstance(a, str) and isinstance(b, str) and a and b and a != b for a, b in pairs)


PROMPT = 'template = "Review: {text}\\nSentiment:"\n[labels]\nnegative = ["negative"]\npositive = ["positive"]\n'
SUITE = '[suite]\nname = "x"\n[attack]\nmodel = "cnn"\nmethod = "so-enum"\nk = 1\nlimit = 3\n[thresholds]\n' \
        'attack.success_rate_max = 0.5\n'


@FUZZ
@given(data=st.data(), which=st.sampled_from(["prompt", "suite"]))
def test_prompts_and_suites(tmp_path_factory, data, which):
    """The two TOML files a user writes: read, or one line; the file as written reads whole."""
    from textaudit.models.prompt import load_prompt
    from textaudit.suite import load_suite

    valid, read = {"prompt": (PROMPT, load_prompt), "suite": (SUITE, load_suite)}[which]
    p = tmp_path_factory.mktemp("toml") / f"{which}.toml"
    p.write_bytes(data.draw(mutated(valid)))
    got = _only_our_error(read, p)
    if p.read_bytes() == valid.encode():
        assert got is not None
        if which == "prompt":
            assert got.fill("a film").endswith("Sentiment:")


# -- data files ------------------------------------------------------------------------------------------------

@FUZZ
@given(data=st.data(), kind=st.sampled_from(["tsv", "csv", "jsonl"]))
def test_data_files(tmp_path_factory, data, kind):
    """A data file: its rows, or one line. Where it loads, every text is a string and every label one of the
    file's own (a number read from it is never another number)."""
    from textaudit.data import load_dataset

    valid = {"tsv": "text\tlabel\na good film\t1\na dull film\t0\n",
             "csv": "text,label\na good film,1\na dull film,0\n",
             "jsonl": _dumps({"text": "a good film", "label": 1}) + "\n" + _dumps({"text": "a dull film", "label": 0}) + "\n"}
    p = tmp_path_factory.mktemp("d") / f"d.{kind}"
    p.write_bytes(data.draw(mutated(valid[kind])))
    ds = _only_our_error(load_dataset, str(p))
    if ds is not None:
        assert all(isinstance(t, str) for t in ds["text"])
        assert all(isinstance(y, int) for y in ds["label"])
        if p.read_bytes() == valid[kind].encode():
            assert list(ds["label"]) == [1, 0] and list(ds["text"]) == ["a good film", "a dull film"]


# -- compare and harden summaries --------------------------------------------------------------------------------

@FUZZ
@given(data=st.data(), which=st.sampled_from(["compare", "harden"]))
def test_compare_and_harden_summaries(tmp_path_factory, data, which):
    from textaudit.formats.compare import read_compare
    from textaudit.formats.harden import read_harden

    valid = {"compare": {"header": {}, "cells": [{"model": "cnn", "method": "so-enum"}], "matrix": []},
             "harden": {"header": {"config": {}}, "model": "m", "attacks": []}}[which]
    p = tmp_path_factory.mktemp("c") / f"{which}.json"
    p.write_bytes(data.draw(mutated(_dumps(valid)) | st.builds(lambda v: _dumps(v).encode(), VALUES)))
    _only_our_error(read_compare if which == "compare" else read_harden, p)


# -- stores, their imports, the score cache ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def genuine_store(tmp_path_factory):
    """A real store with one masked LM (a vocabulary of 30 words) and 20 genuine entries, and one classifier's rows."""
    from textaudit.neighborhoods.store import NeighborhoodStore, _pack

    p = tmp_path_factory.mktemp("st") / "s.sqlite"
    s = NeighborhoodStore(p, quiet=True)
    mlm = s.mlm_id("f" * 16, "tiny", [f"w{i}" for i in range(30)])
    with sqlite3.connect(p) as c:
        for i in range(20):
            k = bytes([i]) * 16
            v = _pack(5, [i % 30, (i + 1) % 30], [2.0, 1.0])
            c.execute("INSERT INTO entries VALUES (?, ?, ?, ?, ?, 0)", (mlm, k, 5, v, zlib.crc32(k + v)))
    s.close()
    return p


@FUZZ
@given(rows=st.lists(st.tuples(st.binary(max_size=20) | st.text(max_size=5) | st.integers(-(2 ** 63), 2 ** 63 - 1),
                                st.integers(-5, 70000) | st.text(max_size=3),  # (the schema refuses NULL)
                                st.binary(max_size=40) | st.text(max_size=5)), min_size=1, max_size=6),
       crc_ok=st.booleans())
def test_store_imports(tmp_path_factory, genuine_store, rows, crc_ok):
    """Entries of any type and content in an imported store (each with a CRC that matches, where it can): an import
    keeps only entries that can be answers — every entry in the store afterwards passes ``entry_problem`` — and
    never raises anything but one line."""
    import shutil

    from textaudit.neighborhoods.store import NeighborhoodStore, entry_problem

    d = tmp_path_factory.mktemp("imp")
    src = d / "src.sqlite"
    shutil.copy(genuine_store, src)
    with sqlite3.connect(src) as c:
        mlm = c.execute("SELECT id FROM mlms").fetchone()[0]
        for k, n, v in rows:
            crc = zlib.crc32(k + v) if crc_ok and isinstance(k, bytes) and isinstance(v, bytes) else 7
            c.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, 0)", (mlm, k, n, v, crc))
    target = NeighborhoodStore(d / "t.sqlite", quiet=True)
    counts = _only_our_error(target.merge_from, NeighborhoodStore(src, readonly=True, quiet=True))
    target.close()
    if counts is None:
        return
    with sqlite3.connect(d / "t.sqlite") as c:
        kept = c.execute("SELECT k, n, v, crc FROM entries").fetchall()
    assert len(kept) == counts.copied
    assert all(entry_problem(k, n, v, crc, 30) is None for k, n, v, crc in kept)


@FUZZ
@given(data=st.binary(max_size=300), head=st.booleans())
def test_store_files_of_any_bytes(tmp_path_factory, data, head):
    """A file given as a store (``--store``, ``audit store import``): any bytes, with or without SQLite's header."""
    from textaudit.neighborhoods.store import NeighborhoodStore, not_a_store

    p = tmp_path_factory.mktemp("b") / "s.sqlite"
    p.write_bytes((b"SQLite format 3\x00" if head else b"") + data)
    _only_our_error(not_a_store, p)
    src = NeighborhoodStore(p, readonly=True, quiet=True)
    if src.available:
        target = NeighborhoodStore(p.with_name("t.sqlite"), quiet=True)
        _only_our_error(target.merge_from, src)
        target.close()


@FUZZ
@given(rows=st.lists(st.binary(max_size=24) | st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32),
                                                         min_size=0, max_size=4), min_size=1, max_size=8))
def test_kept_scores(tmp_path_factory, rows):
    """Rows of the score cache rewritten with any bytes or floats, their CRC recomputed: what ``get_scores`` serves
    is exactly the rows that can be a two-class model's answer (finite, in [0, 1], summing to 1), each as kept."""
    from textaudit.neighborhoods.store import NeighborhoodStore, valid_row

    s = NeighborhoodStore(tmp_path_factory.mktemp("sc") / "s.sqlite", quiet=True)
    clf, classes = s.classifier_id("id|x|scores-1", "m", 2)
    keys = [bytes([i]) * 16 for i in range(len(rows))]
    blobs = [r if isinstance(r, bytes) else np.asarray(r, dtype="<f4").tobytes() for r in rows]
    conn = s._connection()
    conn.executemany("INSERT INTO scores (clf, k, v, crc, used) VALUES (?, ?, ?, ?, 0)",
                     [(clf, k, v, zlib.crc32(k + v)) for k, v in zip(keys, blobs)])
    got = s.get_scores(clf, keys, classes)
    for k, v in zip(keys, blobs):
        row = np.frombuffer(v, dtype="<f4") if len(v) == 8 else None
        ok = row is not None and valid_row(row.astype(np.float32))
        assert (k in got) == ok, (v, got.get(k))
        if ok:
            assert np.array_equal(got[k], row) and all(math.isfinite(x) for x in got[k])
    s.close()



# -- what reads results files whole: merge and the report ----------------------------------------------------------

@st.composite
def attack_record(draw) -> dict:
    """A record of an attack results file, each field of its type or of any other."""
    rec = {"id": "d:0", "status": "success", "method": "so-enum", "text": "a good film", "label": 1, "prediction": 1,
           "vulnerable": "a good film", "vulnerable_patched": "a good movie", "pair": ["film", "movie"], "l0": 0,
           "queries": 3, "seconds": 0.1}
    for key in draw(st.lists(st.sampled_from(sorted(rec)), max_size=3, unique=True)):
        rec[key] = draw(VALUES)
    return rec


@FUZZ
@given(records=st.lists(attack_record(), min_size=1, max_size=3))
@example(records=[{"id": "d:0", "status": "success", "method": "so-enum", "text": "a good film", "label": 1, "prediction": 1,
                   "vulnerable": "a good film", "vulnerable_patched": "a good movie", "pair": None, "l0": 0, "queries": 3,
                   "seconds": 0.1}])  # found by this test (#84's run): a finding with x̃ ⊕ p and no pair broke the report
def test_merge_and_report_of_records_of_any_field_type(tmp_path_factory, records):
    """Shards and a report of records whose fields hold any JSON value: merged or refused in one line, and a report
    written or refused in one line."""
    from textaudit.formats.jsonl import write_results
    from textaudit.merge import merge_results
    from textaudit.report import write_report

    d = tmp_path_factory.mktemp("m")
    config = {"method": "so-enum", "k": 1, "model": "m.py:clf", "seed": 0}
    write_results(d / "a.jsonl", records[:1], command="attack", config={**config, "shard": "0/2"})
    write_results(d / "b.jsonl", [{**r, "id": f"d:{i + 1}"} for i, r in enumerate(records[1:])], command="attack",
                  config={**config, "shard": "1/2"})
    _only_our_error(merge_results, d / "m.jsonl", [d / "a.jsonl", d / "b.jsonl"])
    _only_our_error(write_report, [d / "a.jsonl"], d / "r.html")
