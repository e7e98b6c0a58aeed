"""Files the tool did not make are never moved, rewritten or deleted ([2/7] LOSS): the store opens for writing,
sets aside or rebuilds only a file that carries textaudit's mark (SQLite's application_id, or a store's own
tables from before the mark); a suite replaces only the replay file it wrote itself."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from test_store import _fresh, _queries

from textaudit.errors import TextAuditError
from textaudit.neighborhoods.store import APPLICATION_ID, NeighborhoodStore, not_a_store, parse_store


def _state(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` and a digest of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _filled(tiny_mlm, path: Path) -> list:
    """A store at ``path`` holding the test queries' contexts, closed; returns the queries."""
    q = _queries()
    s = NeighborhoodStore(path)
    _fresh(tiny_mlm, s).candidates(q, top=20)
    s.close()
    return q


def _app_db(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users VALUES (1, 'ada')")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("kind", ["text", "another program's sqlite", "garbage", "marked by another program"])
def test_a_file_that_is_not_a_store_is_left_as_it_is(tiny_mlm, tmp_path, capsys, kind):
    """--store notes.txt was renamed "damaged"; --store app.db got tables and WAL mode. Now: a one-line error for
    --store, and at run time a notice and no store — the file, byte for byte, and nothing beside it."""
    path = tmp_path / {"text": "notes.txt", "garbage": "s.sqlite"}.get(kind, "app.db")
    if kind == "text":
        path.write_text("my notes\n")
    elif kind == "garbage":
        path.write_bytes(b"not a database at all" * 200)  # a store's name, but no mark and no database
    else:
        _app_db(path)
        if kind == "marked by another program":
            conn = sqlite3.connect(path)
            conn.execute("PRAGMA application_id = 1234")
            conn.commit()
            conn.close()
    before = _state(tmp_path)
    with pytest.raises(TextAuditError, match="is not a textaudit store .* left as it is"):
        parse_store(str(path))
    q = _queries()
    want = _fresh(tiny_mlm, None).candidates(q, top=20)
    store = NeighborhoodStore(path)
    assert _fresh(tiny_mlm, store).candidates(q, top=20) == want  # the audit goes on, without the store
    assert not store.available
    assert "is not a textaudit store" in capsys.readouterr().err
    store.close()
    assert _state(tmp_path) == before  # nothing set aside, no journal, no WAL, the same bytes


def test_a_device_is_not_a_store(tmp_path):
    assert not_a_store("/dev/null") == "not a regular file"
    with pytest.raises(TextAuditError, match="not a regular file"):
        parse_store("/dev/null")


def test_a_store_carries_the_mark_and_a_store_from_before_the_mark_is_still_ours(tiny_mlm, tmp_path):
    path = tmp_path / "s.sqlite"
    q = _filled(tiny_mlm, path)
    assert int.from_bytes(path.read_bytes()[68:72], "big") == APPLICATION_ID and not_a_store(path) is None
    conn = sqlite3.connect(path)  # as a store written before the mark: application_id 0
    conn.execute("PRAGMA application_id = 0")
    conn.commit()
    conn.close()
    assert not_a_store(path) is None
    again = _fresh(tiny_mlm, NeighborhoodStore(path))
    again.candidates(q, top=20)
    assert again.store.stats.hits == len({(tuple(w), i) for w, i in q}) and again.forwards == 0
    again.store.close()
    assert int.from_bytes(path.read_bytes()[68:72], "big") == APPLICATION_ID  # it carries the mark now
    assert parse_store(str(path)) == str(path)


def test_a_damaged_store_of_ours_is_still_set_aside(tiny_mlm, tmp_path, capsys):
    path = tmp_path / "s.sqlite"
    q = _filled(tiny_mlm, path)
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(data[: len(data) // 2 + 100]))  # cut short: the header and its mark remain
    _fresh(tiny_mlm, NeighborhoodStore(path)).candidates(q, top=20)
    assert "set aside" in capsys.readouterr().err and list(tmp_path.glob("s.sqlite.damaged-*"))


def test_a_read_only_store_with_url_characters_in_its_name(tiny_mlm, tmp_path):
    """A path is a path: a name with %, # and ? is not read as a file: URI's escapes, query or fragment."""
    path = tmp_path / "a%20b#c?d.sqlite"
    q = _filled(tiny_mlm, path)
    ro = NeighborhoodStore(path, readonly=True)
    assert ro.available and ro.info()["entries"] == len({(tuple(w), i) for w, i in q})


def test_a_suite_replaces_only_the_replay_file_it_wrote(cli, tmp_path):
    """A suite's [replay] deleted a replay.jsonl the user had written in its output folder; now only its own."""
    from textaudit.formats.jsonl import write_results

    plugin = tmp_path / "m.py"
    plugin.write_text("def clf(texts):\n    return [[0.2, 0.8] if t.endswith('b') else [0.8, 0.2] for t in texts]\n")
    found = tmp_path / "found.jsonl"
    write_results(found, [{"id": "0", "status": "success", "method": "so-enum", "text": "x a", "label": 0,
                           "vulnerable": "x a", "vulnerable_patched": "x b", "pair": ["a", "b"], "l0": 0,
                           "seconds": 0.0, "queries": 2}], command="attack", config={"method": "so-enum", "model": "m"})
    suite = tmp_path / "s.toml"
    suite.write_text(f'[suite]\noutput_dir = "out"\n[replay]\nfindings = ["{found}"]\nmodel = "{plugin}:clf"\n')
    r = cli("run", str(suite))
    assert r.exit_code == 0, r.output
    r = cli("run", str(suite))  # its own file: replayed again and replaced
    assert r.exit_code == 0, r.output
    mine = tmp_path / "out" / "replay.jsonl"
    mine.unlink()
    r = cli("replay", str(found), "--model", f"{plugin}:clf", "--output", str(mine))  # the user's own replay
    assert r.exit_code == 0, r.output
    kept = mine.read_bytes()
    r = cli("run", str(suite))
    assert r.exit_code == 2 and "was not written by this suite" in r.output and "left as it is" in r.output, r.output
    assert mine.read_bytes() == kept
