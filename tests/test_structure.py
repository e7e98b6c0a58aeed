"""The layout's promises: a light CLI import, ruff-clean code, and one method table for every attack."""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import textaudit.attacks as attacks_pkg
from textaudit.attacks import METHODS, Attack
from textaudit.attacks.textattack_interop import TextAttackRecipe

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ["torch", "transformers", "datasets", "scipy", "matplotlib", "textattack"]


def test_importing_the_cli_imports_no_heavy_library():
    """``audit --help`` stays fast: the CLI and every command module load without torch & co."""
    code = ("import sys, json; import textaudit.cli.main, textaudit.attacks, textaudit.fairness, textaudit.models; "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(r.stdout) == []


def test_ruff_is_clean():
    ruff = shutil.which("ruff") or (Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (it comes with the test extra: pip install -e '.[dev]')")
    r = subprocess.run([str(ruff), "check", "src", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_attack_class_is_in_the_method_table():
    """A new attack is a table entry: every concrete Attack subclass is reachable by a method name."""
    classes = {obj for _, obj in inspect.getmembers(attacks_pkg, inspect.isclass)
               if issubclass(obj, Attack) and obj.__dict__.get("method") not in (None, "attack", "so", "first-order")}
    classes.discard(TextAttackRecipe)  # textattack:<recipe>, made from the name
    assert classes == {spec.cls for spec in METHODS.values()}
    for name, spec in METHODS.items():
        assert spec.cls.method == name and spec.name == name
