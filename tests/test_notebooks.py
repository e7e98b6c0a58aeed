"""The three notebooks in examples/notebooks run top to bottom on their own (small) settings."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "examples" / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """cnn and cnn-ibp trained small, once, in the cache the notebooks' kernels use (the notebooks
    train the full ones on first use: minutes that would test the zoo, not the notebooks)."""
    import os

    from textaudit.models.zoo import train_model

    path = tmp_path_factory.mktemp("notebook-cache")
    old = os.environ.get("TEXTAUDIT_CACHE")
    os.environ["TEXTAUDIT_CACHE"] = str(path)
    try:
        train_model("cnn", if_missing=True, progress=False, max_train=20000, epochs=1)
        train_model("cnn-ibp", if_missing=True, progress=False, max_train=3000, epochs=2)
    finally:
        if old is None:
            del os.environ["TEXTAUDIT_CACHE"]
        else:
            os.environ["TEXTAUDIT_CACHE"] = old
    return path


def test_there_are_three_notebooks_without_stored_outputs():
    import nbformat

    assert [p.name for p in NOTEBOOKS] == ["01-audit-your-own-model.ipynb", "02-counterfactual-bias.ipynb",
                                          "03-base-vs-certified.ipynb"]
    for p in NOTEBOOKS:
        book = nbformat.read(p, as_version=4)
        nbformat.validate(book)
        assert all(not c.get("outputs") for c in book.cells if c.cell_type == "code"), f"{p.name} has outputs stored"


def _outputs(book) -> str:
    text = []
    for cell in book.cells:
        for out in cell.get("outputs", []):
            text.append(out.get("text", "") + str(out.get("data", {}).get("text/plain", "")))
    return "\n".join(text)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_notebook_runs_top_to_bottom(path, cache, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is in the test extra")
    monkeypatch.setenv("TEXTAUDIT_CACHE", str(cache))  # the kernel inherits this process's environment
    book = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(book, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    out = _outputs(book)
    if path.name.startswith("01"):
        assert "accuracy on these 5 dev sentences" in out and "'method': 'so-enum'" in out
        assert (tmp_path / "own-model-results.jsonl").is_file()
        assert "success" in out  # the pandas table's status column
        # a second run, its results file there (#67: it failed), continues it: the same records, nothing appended
        first = (tmp_path / "own-model-results.jsonl").read_text()
        again = nbformat.read(path, as_version=4)
        nbclient.NotebookClient(again, timeout=1800, kernel_name="python3",
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
        assert (tmp_path / "own-model-results.jsonl").read_text() == first
        assert "'method': 'so-enum'" in _outputs(again)
    elif path.name.startswith("02"):
        assert "k=0: B = " in out and "k=1: B = " in out and "95% CI" in out
        assert any("image/png" in o.get("data", {}) for c in book.cells for o in c.get("outputs", []))
    else:
        assert "certified accuracy" in out and "cnn-ibp" in out
        assert (tmp_path / "base-vs-certified" / "cnn.jsonl").is_file()
        assert (tmp_path / "base-vs-certified" / "cnn-ibp.jsonl").is_file()
