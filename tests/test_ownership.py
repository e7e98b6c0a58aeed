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


# -- one "is this ours?" check (textaudit.files.made_by_textaudit) for every kind of file textaudit writes ----------
def _kinds(tmp_path: Path) -> dict[str, tuple[Path, Path]]:
    """Per kind of file textaudit writes: (one textaudit made, one of the same kind it did not)."""
    import json

    import numpy as np
    import torch
    from safetensors.torch import save_file

    from textaudit.formats.jsonl import write_results
    from textaudit.plotting import pyplot, save_figure
    from textaudit.track import TrackRun, keep_pending

    d = tmp_path
    out: dict[str, tuple[Path, Path]] = {}
    write_results(d / "ours.jsonl", [{"id": "0", "status": "success", "method": "so-enum", "text": "a good film",
                                      "label": 0, "vulnerable": "a good film", "vulnerable_patched": "a good movie",
                                      "pair": ["film", "movie"], "l0": 0, "seconds": 0.0, "queries": 2}],
                  command="attack", config={"method": "so-enum", "model": "x"})
    (d / "mine.jsonl").write_text('{"id": 0, "note": "my own lines"}\n')
    out["results file"] = (d / "ours.jsonl", d / "mine.jsonl")
    (d / "results.jsonl").write_text("")
    keep_pending(TrackRun("a", "attack", {}, {}, {}, [str(d / "results.jsonl")]), d / "results.jsonl")
    (d / "mine.track.json").write_text(json.dumps({"format": "mlflow", "artifacts": ["/home/me/.ssh"]}))
    out["kept tracker run"] = (d / "results.jsonl.track.json", d / "mine.track.json")
    (d / "compare.json").write_text(json.dumps({"header": {"command": "compare"}, "cells": []}))
    (d / "summary.json").write_text(json.dumps({"accuracy": 0.9, "header": "my notes"}))
    out["JSON summary"] = (d / "compare.json", d / "summary.json")
    (d / "textaudit.json").write_text(json.dumps({"format": 1, "arch": "cnn"}))
    (d / "config.json").write_text(json.dumps({"format": 1, "arch": "cnn"}))
    out["checkpoint settings"] = (d / "textaudit.json", d / "config.json")
    for name, mark in (("ours.png", True), ("mine.png", False), ("ours.pdf", True), ("mine.pdf", False),
                       ("ours.svg", True), ("mine.svg", False)):
        fig, ax = pyplot().subplots()
        ax.plot([0, 1], [1, 0])
        if mark:
            save_figure(fig, d / name)
        else:
            fig.savefig(d / name)
            pyplot().close(fig)
    for ext in ("png", "pdf", "svg"):
        out[f"figure ({ext})"] = (d / f"ours.{ext}", d / f"mine.{ext}")
    t = {"w": torch.zeros(2)}
    save_file(t, str(d / "ours.safetensors"), metadata={"textaudit": "0.1.0", "arch": "cnn"})
    save_file(t, str(d / "mine.safetensors"), metadata={"format": "pt"})
    out["weights"] = (d / "ours.safetensors", d / "mine.safetensors")
    from textaudit.report import write_report

    write_report([d / "ours.jsonl"], d / "ours.html")
    write_report([d / "ours.jsonl"], d / "ours.md")
    (d / "mine.html").write_text('<html><meta name="generator" content="Hugo"><body>my page</body></html>')
    (d / "mine.md").write_text("# My notes\n\ntextaudit is a tool I use.\n")
    out["report (HTML)"] = (d / "ours.html", d / "mine.html")
    out["report (Markdown)"] = (d / "ours.md", d / "mine.md")
    store = NeighborhoodStore(d / "ours.sqlite")
    store.mlm_id("f" * 40, "x", ["a"])
    store.close()
    _app_db(d / "mine.sqlite")
    out["store"] = (d / "ours.sqlite", d / "mine.sqlite")
    np.save(d / "mine.npy", np.zeros(3))
    (d / "notes.txt").write_text("do not lose me\n")
    out["anything else"] = (d / "ours.jsonl", d / "notes.txt")
    return out


KINDS = ["results file", "kept tracker run", "JSON summary", "checkpoint settings", "figure (png)", "figure (pdf)",
         "figure (svg)", "weights", "report (HTML)", "report (Markdown)", "store", "anything else"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_one_check_knows_each_kind_of_file_textaudit_makes_and_refuses_the_others(tmp_path, kind):
    from textaudit.files import atomic_path, check_replaceable, made_by_textaudit

    ours, mine = _kinds(tmp_path)[kind]
    assert made_by_textaudit(ours) and not made_by_textaudit(mine), kind
    check_replaceable(ours)
    before = _state(tmp_path)
    with pytest.raises(TextAuditError, match="textaudit did not write it"):
        check_replaceable(mine)
    with pytest.raises(TextAuditError, match="textaudit did not write it"):
        with atomic_path(mine) as tmp:
            tmp.write_text("replaced")
    assert _state(tmp_path) == before  # nothing moved, rewritten, or left beside it


def test_every_writer_that_may_replace_or_delete_a_file_passes_the_one_check_or_says_why_not():
    """The contract: a call that writes, replaces, sets aside or deletes a file — outside textaudit.files, and not on
    a temporary it just made — sits in a function that asks the one check (or a reader of a mark that is one:
    the store's through SQLite, a results header, a kept run's digest), or is listed below with why its place is
    textaudit's own. A writer added later without it fails here, as test_secrets does for the redaction."""
    import ast
    import re

    writes = re.compile(r"\.write_text\(|\.unlink\(|rmtree\(|os\.replace\(|os\.rename\(|\.rename\(|savefig\(|"
                        r"save_pretrained\(|torch\.save\(|np\.save|save_file\(|json\.dump\(|"
                        r"\bopen\([^)]*[\"'][wa][bt+]?[\"']|\.open\([\"'][wa]")
    checks = re.compile(r"check_replaceable|check_folder|made_by_textaudit|not_a_store|read_pending|check_output|"
                        r"_corpus_index|is_report|_check_out|_replay_is_ours|save_figure|atomic_path\(")
    own = {  # module:function -> why the place is textaudit's own
        "neighborhoods/corpus.py:generate_synthetic": "the corpus folder audit mlm-corpus checked (_corpus_index)",
        "neighborhoods/train_mlm.py:_train": "its finished training state, in the run's own folder",
        "models/zoo/build.py:_train": "its finished training state, in the checkpoint folder check_folder took",
        "models/zoo/vocab.py:save": "a checkpoint's vocabulary, in the folder save_checkpoint checked",
        "lm.py:_load_smollm2": "a damaged de-quantised copy in textaudit's cache",
        "lm.py:_save_plain": "a new temporary folder (mkdtemp) in textaudit's cache",
        "harden/run.py:train": "a round's weights it wrote, in the harden folder _check_out took",
        "formats/jsonl.py:_append_lines": "a results file check_output checked (new, or its header ours on --resume)",
        "cli/track.py:track": "a kept run read_pending verified (its mark, its digest), now logged",
        "suite.py:_run_section": "a replay, evaluate or wordorder file whose header names this suite (run_suite "
                                 "checks it before any audit runs)",
        "neighborhoods/store.py:_set_aside": "a store of ours that quick_check found damaged (not_a_store said ours)",
        "harden/model.py:save": "a hardened model's folder check_folder took",
        "robustness/perturbscore/scorer.py:save": "the scorer's folder check_folder took",
        "models/zoo/checkpoint.py:save_checkpoint": "the checkpoint folder check_folder took",
    }
    src = Path(__file__).resolve().parents[1] / "src" / "textaudit"
    bad, used = [], set()
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel == "files.py":
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = "\n".join(lines[fn.lineno - 1:fn.end_lineno])
            inner = {n.lineno for f in ast.walk(fn) if f is not fn and isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                     for n in ast.walk(f) if hasattr(n, "lineno")}
            for n in range(fn.lineno, fn.end_lineno + 1):
                line = lines[n - 1]
                if n in inner or not writes.search(line) or line.lstrip().startswith("#") or re.search(r"\btmp\b", line):
                    continue  # a nested function is judged as itself; a temporary it just made is its own
                key = f"{rel}:{fn.name}"
                if checks.search(body) or key in own:
                    used.add(key)
                    continue
                bad.append(f"{rel}:{n} ({fn.name}): {line.strip()}")
    assert not bad, "writers that may replace a file without the one check (textaudit.files.check_replaceable, or " \
                    "list why the place is textaudit's own):\n" + "\n".join(bad)
    assert set(own) <= used, f"listed but no longer writing: {sorted(set(own) - used)}"
    unmarked = re.compile(r"atomic_path\([^)]*unmarked=(?![\"'])")
    loose = [f"{p.relative_to(src)}:{i}" for p in src.rglob("*.py") for i, x in enumerate(p.read_text().splitlines(), 1)
             if unmarked.search(x)]
    assert not loose, f"atomic_path(unmarked=...) must say why in words: {loose}"


@pytest.mark.parametrize("command", ["train", "perturbscore", "mlm-corpus", "plot"])
def test_a_folder_of_someone_elses_files_is_refused_before_any_work(tmp_path, cli, command):
    """`audit train --out`, `audit perturbscore train --out`, `audit mlm-corpus --out` and a plot folder holding the
    user's own files (a model.safetensors, a config.json, a hist_he_she.png of their own): one line before any
    training or drawing, every file as it was."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "config.json").write_text('{"my": "model"}')
    (folder / "model.safetensors").write_bytes(b"my weights")
    (folder / "hist_he_she.png").write_bytes(b"\x89PNG my own figure")
    before = _state(folder)
    if command == "train":
        r = cli("train", "--model", "bow", "--out", str(folder), "--epochs", "1")
    elif command == "perturbscore":
        (tmp_path / "t.jsonl").write_text("")
        r = cli("perturbscore", "train", "--tuples", str(tmp_path / "t.jsonl"), "--out", str(folder))
    elif command == "mlm-corpus":
        r = cli("mlm-corpus", "--out", str(folder), "--no-debian", "--synthetic-batches", "1")
    else:
        from textaudit.plotting import pyplot, save_figure

        fig, _ = pyplot().subplots()
        with pytest.raises(TextAuditError, match="textaudit did not write it"):
            save_figure(fig, folder / "hist_he_she.png")
        assert _state(folder) == before
        return
    assert r.exit_code == 2 and "did not write" in r.output and "Traceback" not in r.output, r.output
    assert _state(folder) == before and sorted(p.name for p in folder.iterdir()) == sorted(before)
