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


#: textaudit's modules that import a heavy library (torch) when imported: the only ones imported inside functions
LAZY = {"textaudit.findings",  # textaudit.replay, for a light `import textaudit`
        "textaudit.models.zoo.ibp", "textaudit.models.zoo.architectures", "textaudit.neighborhoods.lora"}


def test_textaudit_modules_are_imported_at_the_top_except_the_heavy_ones():
    """STYLE keeps function-level imports for heavy libraries: an import of one of textaudit's own modules
    inside a function hides a dependency from the reader (and the layers' picture) unless that module
    imports torch at import time — and those modules really do."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("code_shape", ROOT / "benchmarks" / "code_shape.py")
    shape = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shape)
    inner = []
    for place in shape.measure()["inner_imports"]:
        module, line = place.split(" in ")[0].split(":")
        text = (ROOT / "src" / "textaudit" / module).read_text().splitlines()[int(line) - 1].split("#")[0].split()
        imported = text[1]
        if imported not in LAZY:
            inner.append(f"{place}: {imported}")
    assert inner == []
    for module in sorted(LAZY - {"textaudit.findings"}):
        code = f"import sys, {module}; print('torch' in sys.modules)"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert r.stdout.strip() == "True", f"{module} no longer imports torch: import it at the top where it is used"


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
