"""#80: the other four papers' folders (paper/wordorder, paper/learnability, paper/cent, paper/perturbscore) render
from their committed cells alone — byte for byte, loading no model, as a fresh clone would — and the word-order
study runs, resumes and refuses a changed setting on a tiny real model."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))


@pytest.fixture
def no_models(monkeypatch, tmp_path):
    import textaudit.models
    import textaudit.neighborhoods.mlm

    def refuse(*a, **k):
        raise AssertionError("the render loaded a model")

    monkeypatch.setattr(textaudit.models, "load_classifier", refuse)
    monkeypatch.setattr(textaudit.neighborhoods.mlm, "load_mlm", refuse)
    monkeypatch.setenv("TEXTAUDIT_CACHE", str(tmp_path / "cache"))


def _clone(name: str, dest: Path) -> Path:
    """What a clone holds of paper/<name>: its packed cells (and nothing it ran)."""
    out = dest / name
    shutil.copytree(REPO / "paper" / name / "cells", out / "cells")
    return out


@pytest.mark.parametrize("name, module", [("wordorder", "paper_wordorder"), ("learnability", "paper_learnability"),
                                          ("perturbscore", "paper_perturbscore")])
def test_a_committed_paper_folder_renders_from_its_cells(name, module, tmp_path, no_models):
    out = _clone(name, tmp_path)
    main = __import__(module).main
    assert main(["--render", "--out", str(out)]) == 0
    assert (out / "README.md").read_text() == (REPO / "paper" / name / "README.md").read_text()


def test_cent_renders_from_the_committed_learnability_study(tmp_path, no_models):
    from paper_cent import main

    study = _clone("learnability", tmp_path)
    assert main(["--render", "--study", str(study), "--out", str(tmp_path / "cent")]) == 0
    assert (tmp_path / "cent" / "README.md").read_text() == (REPO / "paper" / "cent" / "README.md").read_text()


def test_the_word_order_study_runs_resumes_and_refuses_other_settings(tmp_path, capsys):
    from paper_wordorder import main

    args = ["--models", "bow", "--limit", "40", "--train-limit", "300", "--protocols", "retrained,test-only",
            "--out", str(tmp_path / "wo")]
    assert main(args) == 0
    runs = tmp_path / "wo" / "runs"
    rows = {p: [json.loads(x) for x in (runs / f"{p}.bow.jsonl").read_text().splitlines()[1:]]
            for p in ("retrained", "test-only")}
    assert all(len(r) == 27 for r in rows.values())
    assert {r["id"] for r in rows["retrained"]} == {r["id"] for r in rows["test-only"]}
    assert all(r["train_seconds"] >= 0 for r in rows["retrained"]) and "train_seconds" not in rows["test-only"][0]
    readme = (tmp_path / "wo" / "README.md").read_text()
    assert "| bow | retrained | 27 |" in readme and "| bow | test-only | 27 |" in readme
    # a row cut by a kill runs again; the others are kept as they are
    path = runs / "retrained.bow.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:25])
    assert main(args) == 0
    again = [json.loads(x) for x in path.read_text().splitlines()[1:] if x.startswith("{") and x.endswith("}")]
    assert [r["id"] for r in again] == [r["id"] for r in rows["retrained"]]
    assert again[:-1] == rows["retrained"][:-1]
    with pytest.raises(SystemExit, match="was run with other settings"):
        main([*args[:-2], "--seed", "1", "--out", str(tmp_path / "wo")])
