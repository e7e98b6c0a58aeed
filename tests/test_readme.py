"""The README runs as written: every Python block, every line of its quick-check block, and the
test command that .ci/run runs."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
QUICK_BLOCK = re.search(r"Quick checks.*?```bash\n(.*?)```", README, re.S)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """One cache for the module, with a small cnn trained in it once, here, before any block runs: no
    block trains a model inside a subprocess whose time limit a busy machine could break, and the
    blocks need a cnn that works like the full one, not the full one (20,000 SST-2 train sentences,
    one epoch: 12 s idle where the full training takes 80 s idle and about five minutes on a busy
    machine). Not fewer: a cnn trained on 2,000 or 3,000 sentences flips less, so SO-Enum k = 2 searches
    its whole neighbourhoods and the quick block's attack line took 75 s idle (20 s with this cnn, 15 s
    with the full one) and five minutes on a busy machine."""
    from textaudit.models.zoo import train_model

    cache = tmp_path_factory.mktemp("readme-cache")
    old = os.environ.get("TEXTAUDIT_CACHE")
    os.environ["TEXTAUDIT_CACHE"] = str(cache)
    try:
        train_model("cnn", if_missing=True, progress=False, max_train=20000, epochs=1)
    finally:
        os.environ["TEXTAUDIT_CACHE"] = old if old is not None else ""
        if old is None:
            del os.environ["TEXTAUDIT_CACHE"]
    return {**os.environ, "TEXTAUDIT_CACHE": str(cache), "TEXTAUDIT_PROGRESS_SECONDS": "3600"}


def _run(argv: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    # a wide limit: the blocks load a trained cnn and run seconds of work; 30 minutes is for a stuck one
    r = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0 and "Traceback" not in r.stderr, f"{argv}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


def test_the_readme_has_what_the_tests_read():
    assert len(PYTHON_BLOCKS) >= 2 and QUICK_BLOCK is not None


@pytest.mark.parametrize("i", [pytest.param(i, marks=pytest.mark.textattack) if "textattack" in code else i
                               for i, code in enumerate(PYTHON_BLOCKS)])
@pytest.mark.slow
def test_python_block_runs_as_written(i, env, tmp_path):
    code = PYTHON_BLOCKS[i]
    if "textattack" in code and importlib.util.find_spec("textattack") is None:
        pytest.skip("this block needs the TextAttack extra (pip install -e '.[textattack]')")
    r = _run([sys.executable, "-c", code], env, tmp_path)
    assert r.stdout.strip(), "a README example should print what it computed"
    if "SOBeam" in code:
        status = r.stdout.split()[0]
        assert status in ("success", "failed", "skipped"), r.stdout
        assert "B = " in r.stdout and "95% CI" in r.stdout
        assert r.stderr.count("masked LM in use") == 1  # loaded once, shared by the attack and the bias


QUICK_LINES = [ln.split("#")[0].strip() for ln in QUICK_BLOCK.group(1).splitlines() if ln.strip()] if QUICK_BLOCK else []


def test_the_quick_block_has_its_lines():
    assert len(QUICK_LINES) >= 5


@pytest.mark.slow
@pytest.mark.parametrize("line", QUICK_LINES)
def test_quick_cli_line_runs_as_written(line, env, tmp_path):
    """One test per line, so that a busy machine's slowest test is one command, not seven."""
    argv = shlex.split(line)
    assert argv[0] == "audit"
    r = _run([sys.executable, "-m", "textaudit", *argv[1:]], env, tmp_path)
    assert r.stdout.strip(), line


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    command = [ln for ln in ci.splitlines() if ln.startswith("python3 -m venv")]
    assert len(command) == 1 and command[0] in README
