"""The shape figures of issue [1/7], measured on the source tree: run before and after moving code.

    python benchmarks/code_shape.py            # the counts
    python benchmarks/code_shape.py --list     # and where each one is

What it counts (statically, with `ast`; nothing is imported or run):
- functions longer than 60 and than 80 lines (decorators included, the docstring too);
- imports of textaudit's own modules inside a function (STYLE keeps function-level imports for heavy
  third-party libraries, so these count; `if TYPE_CHECKING:` blocks at module level do not);
- `print(...)` calls in library modules, that is outside `textaudit.cli` and the one channel
  (`textaudit.notices`), which is where notices and progress are rendered.

The fourth figure of the issue, pairs of places sharing six or more lines, comes from a duplicate finder
run over `src/` (any will do; the note says which).
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "textaudit"
#: Modules allowed to print: the commands and the one channel that renders notices for them.
PRINTERS = ("cli/", "notices.py", "__main__.py")


def _module_name(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def _is_own(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "textaudit"
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "textaudit" for alias in node.names)
    return False


def measure(long_at: tuple[int, int] = (60, 80)) -> dict[str, list[str]]:
    """Every place that counts, by figure: ``{"over60": [...], "over80": [...], "inner_imports": [...], "prints": [...]}``."""
    found: dict[str, list[str]] = {f"over{n}": [] for n in long_at} | {"inner_imports": [], "prints": []}
    for path in sorted(SRC.rglob("*.py")):
        name = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                length = (node.end_lineno or node.lineno) - start + 1
                for n in long_at:
                    if length > n:
                        found[f"over{n}"].append(f"{name}:{node.lineno} {node.name} ({length} lines)")
                for inner in ast.walk(node):
                    if inner is not node and _is_own(inner):
                        found["inner_imports"].append(f"{name}:{inner.lineno} in {node.name}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
                and not name.startswith(PRINTERS)
            ):
                found["prints"].append(f"{name}:{node.lineno}")
    # A nested function's imports were counted once for each enclosing function: keep each place once.
    found["inner_imports"] = sorted(set(found["inner_imports"]), key=found["inner_imports"].index)
    seen: set[str] = set()
    unique = []
    for place in found["inner_imports"]:
        where = place.split(" in ")[0]
        if where not in seen:
            seen.add(where)
            unique.append(place)
    found["inner_imports"] = unique
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="name every place, not only the counts")
    args = parser.parse_args()
    found = measure()
    labels = {
        "over60": "functions over 60 lines",
        "over80": "functions over 80 lines",
        "inner_imports": "function-level imports of textaudit modules",
        "prints": "print calls in library modules",
    }
    for key, label in labels.items():
        print(f"{label}: {len(found[key])}")
        if args.list:
            for place in found[key]:
                print(f"  {place}")


if __name__ == "__main__":
    main()
