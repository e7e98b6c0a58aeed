"""#63 (WRONG — imported stores): a store file from elsewhere is untrusted input. ``audit store import`` checks every
entry (not only a CRC anyone can recompute), never replaces an entry the store holds, reads a source another process
holds open whole (its WAL included), and ``audit store export`` writes a file whole or not at all; a store already
holding a hostile entry answers with the forward, never with it, and never a traceback."""

from __future__ import annotations

import json
import sqlite3
import struct
import subprocess
import sys
import zlib
from array import array

import pytest
from test_store import _close, _fresh, _queries

from textaudit.errors import TextAuditError
from textaudit.neighborhoods.store import NeighborhoodStore, context_key, entry_problem


def _pack(n, ids, logits):
    return struct.pack("<HH", n, len(ids)) + array("I", ids).tobytes() + array("f", logits).tobytes()


def _forge(path, k: bytes, n: int, ids, logits, *, mlm=None, replace=True):
    """Write an entry into the store file ``path`` by hand, with a CRC that matches (as anyone can compute one)."""
    v = _pack(n, ids, logits)
    with sqlite3.connect(path) as c:
        mlm = mlm or c.execute("SELECT id FROM mlms").fetchone()[0]
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        c.execute(f"{verb} INTO entries (mlm, k, n, v, crc, used) VALUES (?, ?, ?, ?, ?, 0)",
                  (mlm, k, n, v, zlib.crc32(k + v)))


@pytest.fixture
def stores(tiny_mlm, tmp_path):
    """``a``: a store the forward filled; its export; the forward's own answers (the truth)."""
    q = _queries()
    a = tmp_path / "a.sqlite"
    _fresh(tiny_mlm, NeighborhoodStore(a)).candidates(q, top=20)
    out = tmp_path / "export.sqlite"
    NeighborhoodStore(a).export(out)
    return a, out, q, _fresh(tiny_mlm, None).candidates(q, top=20)


def test_every_hostile_entry_is_skipped_and_counted_and_results_equal_the_forwards(tiny_mlm, tmp_path, stores, cli):
    a, out, q, truth = stores
    vocab = tiny_mlm.tokenizer.vocab_size
    keys = [context_key(w, i) for w, i in q]
    hostile = {  # each a valid CRC over a lie
        "nan": (keys[0], 20, list(range(20)), [float("nan")] + [1.0] * 19),
        "inf": (keys[1], 20, list(range(20)), [float("inf")] * 20),
        "beyond the vocabulary": (keys[2], 20, [vocab + 7] + list(range(19)), [5.0 - i for i in range(20)]),
        "out of order": (keys[3], 20, list(range(20)), [float(i) for i in range(20)]),
        "more ids than asked": (keys[4], 2, list(range(20)), [5.0 - i for i in range(20)]),
        "repeated ids": (keys[5], 20, [3] * 20, [5.0 - i for i in range(20)]),
    }
    for k, n, ids, logits in hostile.values():
        _forge(out, k, n, ids, logits)
    b = tmp_path / "b.sqlite"
    _fresh(tiny_mlm, NeighborhoodStore(b)).candidates(q[6:9], top=20)  # b already holds three genuine entries
    for k in keys[6:9]:  # the import claims more candidates for them (which used to replace b's for good)
        _forge(out, k, 40, list(range(40)), [9.0 - i / 10 for i in range(40)])
    r = cli("store", "import", str(out), "--store", str(b), "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert sum(got["bad"].values()) == len(hostile) and got["kept"] == 3, got
    assert got["imported"] == len(set(keys)) - len(hostile) - 3
    assert set(got["bad"]) == {"logits that are not finite or not best first", "ids outside its masked LM's vocabulary",
                               "candidate counts out of bounds", "a candidate repeated"}  # #82: each lie by its name
    reader = _fresh(tiny_mlm, NeighborhoodStore(b))
    assert _close(reader.candidates(q, top=20), truth)  # what --store off gives (to an ulp): nothing forged is an answer
    assert reader.forwards > 0 and reader.store.stats.damaged == 0  # the six were never stored, so are recomputed


def test_a_store_already_holding_a_hostile_entry_answers_with_the_forward(tiny_mlm, tmp_path, stores, capsys):
    """A store that an older textaudit let a hostile import into (ids beyond the vocabulary: a traceback in every
    later run; NaN logits: served as answers): such an entry is a miss, dropped and recomputed."""
    a, _, q, truth = stores
    keys = [context_key(w, i) for w, i in q]
    _forge(a, keys[0], 20, [tiny_mlm.tokenizer.vocab_size + 1] + list(range(19)), [5.0 - i for i in range(20)])
    _forge(a, keys[1], 20, list(range(20)), [float("nan")] * 20)
    reader = _fresh(tiny_mlm, NeighborhoodStore(a))
    assert _close(reader.candidates(q, top=20), truth) and reader.store.stats.damaged == 2
    assert "2 damaged entries dropped" in capsys.readouterr().err


def test_a_masked_lm_whose_vocabulary_differs_under_one_fingerprint_is_skipped_whole(tiny_mlm, tmp_path, stores, cli):
    a, out, q, truth = stores
    with sqlite3.connect(out) as c:
        (blob,) = c.execute("SELECT vocab FROM mlms").fetchone()
        words = json.loads(zlib.decompress(blob))
        words[100], words[101] = words[101], words[100]  # two words swapped: every id of them names the other
        c.execute("UPDATE mlms SET vocab = ?", (zlib.compress(json.dumps(words).encode()),))
    r = cli("store", "import", str(out), "--store", str(a), "--json")
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.exit_code == 0 and got["imported"] == 0 and sum(got["bad"].values()) == len(set(map(str, q)))
    assert "vocabulary differs" in next(iter(got["bad"]))
    assert _fresh(tiny_mlm, NeighborhoodStore(a)).candidates(q, top=20) == truth


def test_a_source_another_process_holds_open_is_read_whole_with_its_wal(tiny_mlm, tmp_path, stores, cli):
    """Entries committed to the WAL of a store another process still has open (not yet checkpointed into the main
    file) are imported too: the source is read through SQLite's shared memory, not as an immutable file."""
    a, _, q, _ = stores
    n = NeighborhoodStore(a).info()["entries"]
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, zlib, struct\n"
        f"c = sqlite3.connect({str(a)!r}, isolation_level=None)\n"
        "c.execute('PRAGMA journal_mode=WAL'); c.execute('PRAGMA wal_autocheckpoint=0')\n"
        "m = c.execute('SELECT id FROM mlms').fetchone()[0]\n"
        "for i in range(25):\n"
        "    k = bytes([i]) * 16; v = struct.pack('<HH', 1, 1) + struct.pack('<I', 5) + struct.pack('<f', 1.0)\n"
        "    c.execute('INSERT INTO entries VALUES (?, ?, 1, ?, ?, 0)', (m, k, v, zlib.crc32(k + v)))\n"
        "print('ready', flush=True); sys.stdin.read()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        assert (tmp_path / "a.sqlite-wal").stat().st_size > 0  # the 25 are in the WAL only
        b = tmp_path / "b.sqlite"
        r = cli("store", "import", str(a), "--store", str(b), "--json")
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout.strip().splitlines()[-1])["imported"] == n + 25
    finally:
        holder.communicate("", timeout=60)


def test_an_export_is_whole_or_absent_and_an_import_into_a_store_it_cannot_write_says_so(tiny_mlm, tmp_path, stores,
                                                                                          monkeypatch):
    a, out, q, _ = stores
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".export", "export"))) == ["export.sqlite"]
    with sqlite3.connect(out) as c:  # one file, complete: its WAL was checkpointed into it before it got its name
        assert c.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == len(set(map(str, q)))
    calls = []
    real = NeighborhoodStore._write

    def failing(self, fn):  # the disk fills after the entries were written
        calls.append(1)
        if len(calls) > 1:
            raise OSError(28, "No space left on device")
        return real(self, fn)

    monkeypatch.setattr(NeighborhoodStore, "_write", failing)
    with pytest.raises(OSError):
        NeighborhoodStore(a).export(tmp_path / "half.sqlite")
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir() if "half" in p.name] == []  # no half file, no temporary left behind
    with pytest.raises(TextAuditError, match="cannot be written; nothing imported"):
        NeighborhoodStore(a, readonly=True).merge_from(NeighborhoodStore(out, readonly=True))


@pytest.mark.parametrize("case, k, n, v, why", [
    ("short key", b"k" * 8, 1, _pack(1, [1], [1.0]), "wrong type or size"),
    ("zero asked", b"k" * 16, 0, _pack(0, [], []), "counts out of bounds"),
    ("n disagrees", b"k" * 16, 3, _pack(2, [1], [1.0]), "counts out of bounds"),
    ("truncated value", b"k" * 16, 2, _pack(2, [1, 2], [1.0, 0.5])[:-2], "wrong layout"),
    ("genuine", b"k" * 16, 20, _pack(20, [1, 2], [1.0, 0.5]), None),
])
def test_entry_problem_names_each_lie(case, k, n, v, why):
    got = entry_problem(k, n, v, zlib.crc32(k + v), 30)
    assert (got is None) if why is None else (why in got), (case, got)
    if why is None:  # the genuine entry: a CRC that does not match, or a vocabulary too small for its ids, is a lie
        assert "CRC" in entry_problem(k, n, v, zlib.crc32(k + v) ^ 1, 30)
        assert "vocabulary" in entry_problem(k, n, v, zlib.crc32(k + v), 2)


def test_a_file_with_the_format_row_but_no_tables_is_one_line(tmp_path, cli):
    """#82 (traceback): a file made to look like a store — the mark and the format row, no tables — was an
    ``sqlite3.OperationalError`` traceback on import. A store has its tables, or it is no store."""
    from textaudit.neighborhoods.store import APPLICATION_ID, FORMAT

    fake = tmp_path / "fake.sqlite"
    with sqlite3.connect(fake) as c:
        c.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        c.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
        c.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    r = cli("store", "import", str(fake), "--store", str(tmp_path / "b.sqlite"))
    assert r.exit_code == 2 and "Traceback" not in r.output and len(r.stderr.strip().splitlines()) == 1, r.output
    assert "is not a neighbourhood store (or it is damaged)" in r.stderr


def test_a_damaged_vocabulary_skips_its_masked_lm_and_says_why(tiny_mlm, tmp_path, stores, cli):
    """#82 (traceback): a vocabulary blob that does not decompress was a ``zlib.error`` traceback; one that is not a
    list of words would have been trusted. Either skips that masked LM's entries, counted by their reason."""
    a, out, q, truth = stores
    for blob in (b"not zlib at all", zlib.compress(b'{"a": 1}'), zlib.compress(b"[" * 100_000)):
        with sqlite3.connect(out) as c:
            c.execute("UPDATE mlms SET vocab = ?", (blob,))
        b = tmp_path / f"b{len(blob)}.sqlite"
        r = cli("store", "import", str(out), "--store", str(b), "--json")
        assert r.exit_code == 0 and "Traceback" not in r.output, r.output
        got = json.loads(r.stdout.strip().splitlines()[-1])
        assert got["imported"] == 0 and got["bad"] == {"a damaged vocabulary": len(set(map(str, q)))}


def test_an_import_whose_writes_roll_back_reports_only_what_it_wrote(tiny_mlm, tmp_path, stores, monkeypatch):
    """#82 (wrong report): a batch counted before its transaction committed was reported as imported when the commit
    failed (a store that turned read-only). A batch counts once committed; the store holds what the report says."""
    a, out, q, _ = stores
    b = tmp_path / "b.sqlite"
    target = NeighborhoodStore(b)
    target.mlm_id("x", "x", ["a"])  # the store exists and was written once

    def refuse(self, conn):  # SQLite's own error when the database turns read-only inside a transaction
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(NeighborhoodStore, "_flush_used", refuse)
    with pytest.raises(TextAuditError, match=r"cannot be written; 0 entries imported before it failed"):
        target.merge_from(NeighborhoodStore(out, readonly=True))
    monkeypatch.undo()
    with sqlite3.connect(b) as c:
        assert c.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0  # and nothing was


def test_an_import_into_a_store_whose_folder_cannot_be_written_is_one_line(tiny_mlm, tmp_path, stores, cli):
    """A store in a folder that became read-only (``chattr +i``: even root cannot create the WAL there): one line that
    says what to do, never "OSError: cannot be read now"; nothing is reported imported."""
    a, out, q, _ = stores
    folder = tmp_path / "ro"
    folder.mkdir()
    NeighborhoodStore(folder / "t.sqlite").mlm_id("x", "x", ["a"])
    for p in folder.iterdir():
        if p.name != "t.sqlite":
            p.unlink()
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported on this file system")
    try:
        r = cli("store", "import", str(out), "--store", str(folder / "t.sqlite"), "--json")
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
    assert "its folder may be read-only" in r.stderr and "imported" not in r.stdout


def test_an_export_killed_mid_write_leaves_nothing_at_the_asked_name(tmp_path, stores):
    """#82: ``kill -9`` during ``audit store export`` (a real process, killed while it writes): at the asked name there is
    no file, or — if the export had finished first — the whole store; never a partial one."""
    import os
    import signal
    import time

    a, _, _, _ = stores
    big = tmp_path / "big.sqlite"
    with sqlite3.connect(a) as c:
        c.execute("VACUUM INTO ?", (str(big),))
    with sqlite3.connect(big) as c:  # 200,000 more genuine-looking entries: seconds to copy
        mlm, _, n, v, _, _ = c.execute("SELECT * FROM entries LIMIT 1").fetchone()
        rows = [(mlm, i.to_bytes(16, "little"), n, v, zlib.crc32(i.to_bytes(16, "little") + v), 0) for i in range(200_000)]
        c.executemany("INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?, ?, ?)", rows)
        total = c.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
    out = tmp_path / "out" / "e.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "textaudit", "store", "export", str(out), "--store", str(big)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not any((tmp_path / "out").glob(".e.sqlite.*")):
        time.sleep(0.01)  # until it is writing (its temporary file exists), or done
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    if out.exists():  # only if it finished before the kill: then it is whole (a partial store would fail here)
        with sqlite3.connect(out) as c:
            assert c.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == total
