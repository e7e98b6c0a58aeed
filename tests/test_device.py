"""CPU threads: an explicit setting wins, the default follows the cores the load leaves free."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from textaudit.device import cpu_threads, free_cores
from textaudit.errors import TextAuditError


def test_threads_come_from_the_setting_else_from_the_free_cores(monkeypatch):
    monkeypatch.setenv("TEXTAUDIT_THREADS", "3")
    assert cpu_threads() == 3
    monkeypatch.setenv("TEXTAUDIT_THREADS", "zero")
    with pytest.raises(TextAuditError, match="TEXTAUDIT_THREADS must be a whole number >= 1"):
        cpu_threads()
    monkeypatch.delenv("TEXTAUDIT_THREADS")
    assert cpu_threads() == free_cores()
    assert 1 <= free_cores() <= os.cpu_count()
    monkeypatch.setattr(os, "getloadavg", lambda: (float(os.cpu_count()) + 3, 0.0, 0.0))
    assert free_cores() == 1  # a machine busier than its cores: one thread
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert free_cores() == os.cpu_count()


def test_the_threads_option_reaches_torch(cli):
    code = ("import torch; from textaudit.device import pick_device; pick_device(); print(torch.get_num_threads())")
    env = {**os.environ, "TEXTAUDIT_THREADS": "1"}
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.strip() == "1"
    r = cli("--threads", "0", "doctor")
    assert r.exit_code == 2 and "--threads must be at least 1" in r.output
