"""CPU threads: an explicit setting wins, else torch's default; a busy machine gets a notice;
SmolLM2's tiny batches run on one thread."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from textaudit.device import busy_notice, cpu_threads, free_cores, small_batch_threads
from textaudit.errors import TextAuditError


def test_threads_come_from_the_setting_else_torch_decides(monkeypatch):
    monkeypatch.setenv("TEXTAUDIT_THREADS", "3")
    assert cpu_threads() == 3
    monkeypatch.setenv("TEXTAUDIT_THREADS", "zero")
    with pytest.raises(TextAuditError, match="TEXTAUDIT_THREADS must be a whole number >= 1"):
        cpu_threads()
    monkeypatch.delenv("TEXTAUDIT_THREADS")
    assert cpu_threads() is None  # fixed per machine: training's floats depend on the thread count


def test_a_busy_machine_gets_a_notice(monkeypatch, cli):
    cores = os.cpu_count()
    monkeypatch.setattr(os, "getloadavg", lambda: (float(cores) + 3, 0.0, 0.0))  # busier than its cores
    assert free_cores() == 1
    msg = busy_notice(torch_threads=2)
    assert msg.startswith("notice: the machine is busy (1 of") and "TEXTAUDIT_THREADS=1" in msg
    # the command it gives works as written (#52: it said "--threads 1", which `audit attack --threads 1` refuses)
    given = msg.split("faster: ")[1].split(" <command>")[0].split()
    assert given == ["audit", "--threads", "1"]
    assert cli(*given[1:], "cite", "--json").exit_code == 0
    # and after the command too, where users put options (#67: "No such option" before)
    assert cli("cite", "--threads", "1", "--json").exit_code == 0
    r = cli("cite", "--threads", "0")
    assert r.exit_code == 2 and "--threads must be at least 1" in r.output
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert free_cores() == cores and busy_notice(torch_threads=cores) is None


def test_small_batches_run_on_one_thread_and_the_setting_is_restored(monkeypatch):
    monkeypatch.delenv("TEXTAUDIT_THREADS", raising=False)
    before = torch.get_num_threads()
    with small_batch_threads(torch):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_the_threads_option_reaches_torch(cli):
    code = "import torch; from textaudit.device import pick_device; pick_device(); print(torch.get_num_threads())"
    env = {**os.environ, "TEXTAUDIT_THREADS": "1"}
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.strip() == "1"
    r = cli("--threads", "0", "doctor")
    assert r.exit_code == 2 and "--threads must be at least 1" in r.output


def test_the_busy_notice_comes_with_long_work_once_and_never_before_an_error(monkeypatch, capsys):
    import textaudit.device as device
    from textaudit.progress import progress

    monkeypatch.delenv("TEXTAUDIT_THREADS", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (float(os.cpu_count()) + 3, 0.0, 0.0))
    monkeypatch.setattr(device, "_noticed", [])
    monkeypatch.setattr(device, "_keep", [])  # (a hardening earlier in this process keeps its threads: not this one)
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # more threads than the one core this load leaves free
    try:
        for _ in range(2):
            progress(total=1, desc="work", unit="x").close()
        applied = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    err = capsys.readouterr().err
    assert err.count("notice: the machine is busy") == 1
    # inference follows the load: the one free core, said once (the numbers do not change with the threads)
    assert applied == 1 and "torch uses 1 thread for this run instead of 2" in err


def test_training_on_a_busy_machine_keeps_its_threads_and_gets_advice(monkeypatch, capsys):
    """Training's floats depend on the thread count: the same seed must keep giving the same model, so a busy
    machine only gets the advice, also in a process that infers before it trains (audit harden)."""
    import textaudit.device as device
    from textaudit.progress import progress

    monkeypatch.delenv("TEXTAUDIT_THREADS", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (float(os.cpu_count()) + 3, 0.0, 0.0))
    before = torch.get_num_threads()
    try:
        for kwargs, keep in (({"training": True}, []), ({}, [True])):  # a training bar; an attack's bar in harden
            monkeypatch.setattr(device, "_noticed", [])
            monkeypatch.setattr(device, "_keep", keep)
            torch.set_num_threads(2)
            progress(total=1, desc="train", unit="batch", **kwargs).close()
            assert torch.get_num_threads() == 2
            assert "fewer is likely faster: audit --threads 1" in capsys.readouterr().err
    finally:
        torch.set_num_threads(before)


def test_an_attack_times_its_pace_with_the_threads_its_run_will_use(monkeypatch, capsys, tiny_mlm):
    """The pace behind an attack's estimate is timed after the busy machine's thread count is applied: timed with two
    threads fighting over the one free core, it read 214 texts/s where the run went at 13,219, and an attack said
    5m56s for 39 s."""
    import numpy as np

    import textaudit.device as device
    from textaudit.attacks import SOEnum
    from textaudit.attacks.patch import PatchWords
    from textaudit.attacks.run import run_attack
    from textaudit.models import as_classifier

    threads_seen: list[int] = []

    def f(texts):
        threads_seen.append(torch.get_num_threads())
        return np.array([[0.2, 0.8] if "film" in t else [0.7, 0.3] for t in texts])

    clf = as_classifier(f, name="threads-seen")
    monkeypatch.delenv("TEXTAUDIT_THREADS", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (float(os.cpu_count()) + 3, 0.0, 0.0))
    monkeypatch.setattr(device, "_noticed", [])
    monkeypatch.setattr(device, "_keep", [])
    said: list[str] = []
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        attack = SOEnum(clf, k=1, mlm=tiny_mlm, kappa=3, patch_words=PatchWords(clf, [("film", "movie")]))
        run_attack(attack, ["a deep and meaningful film .", "an honest and moving film ."], [1, 1], progress=False,
                   estimate=True, say=said.append)
    finally:
        torch.set_num_threads(before)
    # the first call is the label check's one-text probe (how many classes); the pace's come next, then the run's
    assert len(threads_seen) > 2 and set(threads_seen[1:]) == {1}, threads_seen
    assert "torch uses 1 thread for this run instead of 2" in capsys.readouterr().err

