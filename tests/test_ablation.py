"""#79: paper/ablation.md renders from its committed cells alone (a fresh clone), and a model retrained elsewhere is a
training of its own — its cells never resume into another training's, and each factor's Δ is against the relaxed
cell of the same training."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import ablation  # noqa: E402
from reproduce_paper import unpack_cells  # noqa: E402


def _clone(tmp_path: Path) -> Path:
    out = tmp_path / "ablation"
    shutil.copytree(REPO / "paper" / "ablation" / "cells", out / "cells")
    return out


def test_the_committed_ablation_table_renders_from_its_cells_byte_for_byte(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTAUDIT_CACHE", str(tmp_path / "cache"))
    out = _clone(tmp_path)
    assert ablation.main(["--render", "--out", str(out)]) == 0
    assert (tmp_path / "ablation.md").read_text() == (REPO / "paper" / "ablation.md").read_text()


def _retrained(src: Path, dest: Path, fingerprint: str, flip: int) -> dict[str, bool]:
    """``src``'s cell as another training would have written it: another fingerprint, the first ``flip`` successes
    failed. Returns {id: success} of the attacked."""
    lines = src.read_text().splitlines()
    head = json.loads(lines[0])
    head["header"]["config"]["model_fingerprint"] = fingerprint
    recs, left = [json.loads(x) for x in lines[1:]], flip
    for r in recs:
        if r["status"] == "success" and left:
            r["status"], left = "failed", left - 1
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(json.dumps(x) for x in [head, *recs]) + "\n")
    return {r["id"]: r["status"] == "success" for r in recs if r["status"] in ("success", "failed")}


def test_a_retrained_model_is_a_training_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTAUDIT_CACHE", str(tmp_path / "cache"))
    out = _clone(tmp_path)
    runs = out / "runs"
    unpack_cells(out / "cells", runs)
    flat = runs / ablation.cell_name("cnn", "bae", "relaxed")
    here = ablation._training(flat)
    assert here and ablation.cell_path(runs, "cnn", "bae", "relaxed", here) == flat
    # another machine's training: its cell goes in a folder of its own, the flat one is never resumed into
    new = ablation.cell_path(runs, "cnn", "bae", "relaxed", "f" * 16)
    assert new == runs / f"cnn@{'f' * 16}" / flat.name
    before = flat.read_bytes()
    relaxed = _retrained(flat, new, "f" * 16, flip=40)
    paper = _retrained(runs / ablation.cell_name("cnn", "bae", "paper"),
                       ablation.cell_path(runs, "cnn", "bae", "paper", "f" * 16), "f" * 16, flip=0)
    assert ablation.cell_path(runs, "cnn", "bae", "relaxed", "f" * 16) == new  # found again: resumed there
    assert flat.read_bytes() == before
    groups = ablation.trainings(runs, "cnn", "bae")
    assert groups[0][0] == here  # the training with the most cells first (the committed cells hold others too)
    assert set(dict(groups)["f" * 16]) == {"relaxed", "paper"} and len({fp for fp, _ in groups}) == len(groups)

    table = ablation.render(["cnn"], runs, tmp_path / "none")
    rows = [r.split(" | ") for r in table.splitlines() if r.startswith("| cnn (ffffffff) | bae | paper |")]
    assert len(rows) == 1
    ids = sorted(set(relaxed) & set(paper))
    delta = 100 * (sum(paper[i] for i in ids) - sum(relaxed[i] for i in ids)) / len(ids)
    assert rows[0][6].startswith(f"{delta:+.1f} [") and rows[0][6].endswith(f"over {len(ids)}")
    # the first training's paper row is still paired with its own relaxed cell, as committed
    own = [r for r in table.splitlines() if r.startswith(f"| cnn ({here[:8]}) | bae | paper |")]
    committed = [r for r in (REPO / "paper" / "ablation.md").read_text().splitlines()
                 if r.startswith(f"| cnn ({here[:8]}) | bae | paper |")]
    assert own == committed and own
