"""Shared fixtures: the data directory we are given (../shared/data) and an isolated cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TEXTAUDIT_DATA", REPO.parent / "shared" / "data")).resolve()


# Session-wide (module-scoped fixtures need it too): the shared data dir and no network downloads.
os.environ["TEXTAUDIT_DATA"] = str(SHARED_DATA)
os.environ["TEXTAUDIT_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"


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
