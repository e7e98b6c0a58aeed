"""The package's layers (``[tool.importlinter]`` in pyproject.toml, docs/architecture.md) hold and stay.

``lint-imports`` checks the contracts on the real package; each upward import that once existed (or that
the contracts exist to stop) is put back, inside a function, in a copy of the package, and must break them;
an AST walk over every ``import`` — at module level or inside a function — finds no cycle among modules.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "textaudit"


def _lint_imports() -> str:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    if not Path(exe).exists():
        pytest.fail("lint-imports is missing: it comes with the test extra (pip install -e '.[dev]')")
    return exe


def _run_lint(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if pythonpath is not None:  # the copy is found before the installed (editable) package
        env["PYTHONPATH"] = str(pythonpath) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([_lint_imports(), "--no-cache", "--config", str(cwd / "pyproject.toml")], cwd=cwd,
                          capture_output=True, text=True, env=env)


def test_the_layer_contracts_hold():
    r = _run_lint(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    for contract in ("Layers:", "never import the HTTP client", "CLI libraries", "No import cycle"):
        assert contract in r.stdout
    assert "BROKEN" not in r.stdout


#: (module, the import put back inside a function, the contract it must break)
UPWARD = [
    # the 14-module cycle: results read harden's summary name (the facade and the format below it)
    ("results.py", "from textaudit.harden.run import SUMMARY", "Layers:"),
    ("formats/jsonl.py", "from textaudit.harden.run import harden", "Layers:"),
    # results read back know no page: loaded is below the report
    ("loaded.py", "from textaudit.report.render import write_report", "Layers:"),
    # the runner below the audits it runs
    ("runner.py", "from textaudit.attacks.run import run_attack", "Layers:"),
    # the 4-module cycle: token ids read the masked LM's tokenizer scheme
    ("token_ids.py", "from textaudit.neighborhoods.masked_lm import HFMaskedLM", "Layers:"),
    # a search asking the HTTP module whether a model answers with labels only
    ("attacks/second_order.py", "from textaudit.models.http import Endpoint", "HTTP client"),
    # typer below the commands
    ("data.py", "import typer", "CLI libraries"),
    # a cycle between two sibling packages (the zoo and IBP once were)
    ("models/zoo/build.py", "from textaudit.models.ibp import certify", "No import cycle"),
]


@pytest.mark.parametrize("module,statement,contract", UPWARD, ids=[u[0] for u in UPWARD])
def test_an_upward_import_inside_a_function_breaks_the_contracts(tmp_path, module, statement, contract):
    copy = tmp_path / "src" / "textaudit"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__", "assets"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert _run_lint(tmp_path, tmp_path / "src").returncode == 0  # the copy alone keeps them
    with open(copy / module, "a", encoding="utf-8") as f:
        f.write(f"\n\ndef _upward():\n    {statement}  # noqa\n")
    r = _run_lint(tmp_path, tmp_path / "src")
    assert r.returncode != 0, r.stdout
    broken = [line for line in r.stdout.splitlines() if line.endswith("BROKEN")]
    assert broken, r.stdout
    assert contract in r.stdout.split("Broken contracts")[1], r.stdout


def _module_graph() -> dict[str, set[str]]:
    """Every textaudit module → the textaudit modules it imports anywhere (top level or inside a function)."""
    files = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        files[name] = path

    def owner(name: str) -> str | None:  # the module a dotted name lives in
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets.add(base)
                targets.update(f"{base}.{a.name}" for a in node.names)
        graph[name] = {m for t in targets if t.startswith("textaudit") and (m := owner(t)) and m != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycle_among_modules_counting_imports_inside_functions():
    graph = _module_graph()
    assert len(graph) > 100 and "textaudit.formats.jsonl" in graph["textaudit.runner"]
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_the_cycles_that_were_there():
    """The walk above would have caught both cycles the layers broke (so its empty answer means something)."""
    graph = _module_graph()
    graph["textaudit.token_ids"].add("textaudit.neighborhoods.masked_lm")
    graph["textaudit.formats.jsonl"].add("textaudit.harden.run")
    found = _cycles(graph)
    assert len(found) == 2
    assert {"textaudit.token_ids", "textaudit.neighborhoods.masked_lm", "textaudit.models.torch_backend"} <= set(
        next(c for c in found if "textaudit.token_ids" in c))
    assert {"textaudit.formats.jsonl", "textaudit.harden.run", "textaudit.runner"} <= set(
        next(c for c in found if "textaudit.harden.run" in c))
