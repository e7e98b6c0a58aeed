"""Shared fixtures: the data directory we are given (../shared/data) and an isolated cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TEXTAUDIT_DATA", REPO.parent / "shared" / "data")).resolve()


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path_factory):
    """Every test sees the shared data dir, a private empty cache and no network downloads."""
    monkeypatch.setenv("TEXTAUDIT_DATA", str(SHARED_DATA))
    monkeypatch.setenv("TEXTAUDIT_CACHE", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("TEXTAUDIT_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def cli():
    """Invoke the ``audit`` app in-process: ``cli("doctor", "--json")`` -> click Result."""
    from typer.testing import CliRunner

    from textaudit.cli.main import _register_subcommands, app

    _register_subcommands()
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(app, list(args))

    return run
