"""Shared fixtures: the data directory we are given (../shared/data) and an isolated cache."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TEXTAUDIT_DATA", REPO.parent / "shared" / "data")).resolve()


# Session-wide (module-scoped fixtures need it too): the shared data dir and no network downloads.
os.environ["TEXTAUDIT_DATA"] = str(SHARED_DATA)
os.environ["TEXTAUDIT_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"


def _cores_busy_elsewhere(seconds: float = 1.0) -> float | None:
    """How many cores other processes keep busy now, from two readings of /proc/stat (pytest itself
    sleeps between them); None off Linux. The load average is no use here: it still counts the pip
    install that ran just before the tests."""
    def read() -> tuple[int, int]:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
        return sum(ticks), ticks[3] + ticks[4]  # all, idle + iowait

    try:
        all0, idle0 = read()
        time.sleep(seconds)
        all1, idle1 = read()
    except (OSError, ValueError, IndexError):
        return None
    cores = os.cpu_count() or 1
    return cores * (1 - (idle1 - idle0) / max(1, all1 - all0))


def pytest_configure(config):
    """On a busy machine torch gets one thread per free core (``TEXTAUDIT_THREADS``, which every
    in-process model and every subprocess the tests start reads), as ``audit``'s busy notice tells users
    to do: beside one CPU-bound process on 2 cores, 2 threads took 91 s for the minilm fine-tuning test
    and 1 thread 50 s. Idle, torch keeps its own default. Outputs do not depend on it (inference is
    bit-identical with 1 and 2 threads; tests of training assert what was learned, not floats)."""
    if os.environ.get("TEXTAUDIT_THREADS") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    busy = _cores_busy_elsewhere()
    cores = os.cpu_count() or 1
    if busy is not None and busy >= 0.5:
        free = max(1, min(cores, int(cores - busy + 0.5)))
        if free < cores:
            os.environ["TEXTAUDIT_THREADS"] = str(free)
            config._textaudit_busy = f"busy machine: {busy:.1f} of {cores} cores in use elsewhere, TEXTAUDIT_THREADS={free}"


def pytest_report_header(config):
    return getattr(config, "_textaudit_busy", None)


def pytest_terminal_summary(terminalreporter, config):
    if getattr(config, "_textaudit_busy", None):  # -q hides the header: said again at the end
        terminalreporter.write_line(config._textaudit_busy)


@pytest.fixture(autouse=True)
def _isolated_cache(monkeypatch, tmp_path_factory):
    """Every test gets a private, empty user cache."""
    monkeypatch.setenv("TEXTAUDIT_CACHE", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def cli():
    """Invoke the ``audit`` app in-process: ``cli("doctor", "--json")`` -> click Result."""
    from typer.testing import CliRunner

    from textaudit.cli.main import app

    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(app, list(args))

    return run


@pytest.fixture(scope="session")
def tiny_mlm():
    """A real HuggingFace masked LM, randomly initialised and tiny, over the shipped MiniLM vocabulary."""
    import torch
    from transformers import BertTokenizerFast, DistilBertConfig, DistilBertForMaskedLM

    from textaudit.neighborhoods.mlm import HFMaskedLM
    from textaudit.resources import resolve

    tok = BertTokenizerFast.from_pretrained(resolve("minilm"))
    torch.manual_seed(0)
    cfg = DistilBertConfig(vocab_size=tok.vocab_size, dim=32, hidden_dim=64, n_layers=1, n_heads=2)
    model = DistilBertForMaskedLM(cfg).eval()
    return HFMaskedLM(model, tok, name="tiny-distilbert", device="cpu")


@pytest.fixture(autouse=True)
def _fresh_secrets():
    """Each test starts knowing no secret, as each run of audit does (textaudit.secrets keeps them per process)."""
    from textaudit.secrets import _forget_all

    _forget_all()
    yield
