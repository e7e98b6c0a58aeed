"""The one channel for lines to a person (textaudit.notices): the library never prints, a library user
silences or captures what it says, and the command still shows it on stderr."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import numpy as np

from textaudit import notices

ROOT = Path(__file__).resolve().parents[1]


def _code_shape():
    spec = importlib.util.spec_from_file_location("code_shape", ROOT / "benchmarks" / "code_shape.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_library_module_prints():
    """Every line for a person goes through textaudit.notices: a print in a library module (anything
    outside the commands and the channel) cannot be silenced or captured by a library user."""
    found = _code_shape().measure()
    assert found["prints"] == [], found["prints"]


def test_the_checker_sees_a_print(tmp_path, monkeypatch):
    """The static check above is not blind: a module with a print to stderr is named."""
    shape = _code_shape()
    pkg = tmp_path / "textaudit"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "loud.py").write_text("import sys\n\ndef f():\n    print('x', file=sys.stderr)\n")
    (pkg / "cli" / "cmd.py").write_text("def g():\n    print('a command may')\n")
    monkeypatch.setattr(shape, "SRC", pkg)
    assert shape.measure()["prints"] == ["loud.py:4"]


def test_notices_go_to_stderr_by_default(capsys):
    assert notices.to_terminal()
    notices.notice("the store is read-only")
    notices.say("time: about 4s")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == ["notice: the store is read-only", "time: about 4s"]


def test_captured_and_silenced_leave_stderr_empty_and_restore_the_handler(capsys):
    with notices.captured() as lines:
        assert not notices.to_terminal()
        notices.notice("a")
        with notices.silenced():
            notices.notice("dropped")
        notices.say("b")
    assert lines == ["notice: a", "b"]
    assert notices.to_terminal()
    assert capsys.readouterr().err == ""
    mine: list[str] = []
    previous = notices.set_handler(mine.append)
    try:
        notices.say("c")
    finally:
        assert notices.set_handler(previous) == mine.append
    assert mine == ["c"] and notices.to_terminal()


def test_lines_from_threads_are_whole():
    """Worker threads say through the same handler; each line arrives whole."""
    with notices.captured() as lines:
        workers = [threading.Thread(target=lambda i=i: [notices.say(f"w{i} line {j}") for j in range(50)])
                   for i in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert sorted(lines) == sorted(f"w{i} line {j}" for i in range(4) for j in range(50))


def test_a_library_run_is_captured_whole(tiny_mlm, capsys, monkeypatch):
    """A real attack with progress on, as a notebook user runs it: its progress lines and the masked LM's
    notice come through the channel (captured here), none on stderr, and the records are the same as
    a silenced run's."""
    from textaudit.attacks import PatchWords, SOEnum, run_attack
    from textaudit.models import as_classifier
    from textaudit.neighborhoods.mlm import load_mlm

    monkeypatch.setenv("TEXTAUDIT_PROGRESS_SECONDS", "0")
    clf = as_classifier(lambda texts: np.array([[0.8, 0.2] if "dull" in t.split() else [0.3, 0.7] for t in texts]),
                        name="dull")
    texts = ["a deep and meaningful film .", "the film is a moving story ."]
    with notices.captured() as lines:
        load_mlm("minilm-mlm", device="cpu")
        atk = SOEnum(clf, 1, mlm=tiny_mlm, kappa=3, patch_words=PatchWords(clf, [("film", "movie")]))
        _, records = run_attack(atk, texts, None, progress=True)
    assert capsys.readouterr().err == ""
    assert "notice: masked LM in use: minilm-mlm" in lines
    assert any(line.startswith("so-enum k=1: 2/2 ex (100%)") for line in lines), lines
    with notices.silenced():
        _, again = run_attack(atk, texts, None, progress=True)
    assert capsys.readouterr().err == ""

    def strip(recs):
        return [{k: v for k, v in r.items() if k not in ("seconds", "queries", "mlm_queries")} for r in recs]

    assert strip(again) == strip(records)


def test_a_captured_line_holds_no_secret():
    """The channel is a boundary of its own: a handler other than the command's stream (a notebook's list, a
    logger) gets the line redacted too."""
    from textaudit.secrets import _forget_all, register

    register("sk-notices-secret-123")
    try:
        with notices.captured() as lines:
            notices.notice("endpoint http://user:pw@host/v1 refused sk-notices-secret-123")
        assert lines and "sk-notices-secret-123" not in lines[0] and "pw@" not in lines[0], lines
    finally:
        _forget_all()
