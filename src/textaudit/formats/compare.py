"""An ``audit compare`` folder: one results file per (model, method) cell and ``compare.json``, the
summary that names them (:func:`read_compare` reads it back, checked)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Sequence

from textaudit.errors import TextAuditError
from textaudit.files import loads_json
from textaudit.secrets import safe_name

__all__ = ["file_part", "SUMMARY", "MATRIX_COLUMNS", "MATRIX_FOUND", "cell_path", "read_compare", "plain_name", "folder_file"]

#: the summary file ``audit compare`` writes next to its cells (``audit report`` and ``load`` read it)
SUMMARY = "compare.json"

#: what each cell of the matrix reports
MATRIX_COLUMNS = ("model", "method", "k", "n", "attacked", "success_rate", "success_rate_ci95", "mean_l0",
                  "sec_per_example", "queries_per_example")
#: each cell's share of *all* its inputs with a finding (skipped and failed count as not found) and its parts:
#: written since #85, so a summary written before may lack them (its readers show "–")
MATRIX_FOUND = ("success", "skipped", "found_share", "found_share_ci95")


def file_part(name: str) -> str:
    """``name`` (a model's, a method's) as part of a file name: its public form (no credential of a URL:
    :func:`textaudit.secrets.safe_name`), the characters a file name cannot hold as ``_``."""
    return re.sub(r"[^\w.+-]+", "_", safe_name(name)).strip("_") or "_"


def check_distinct_files(names: Sequence[str], what: str) -> None:
    """One line, before anything runs, when two of ``names`` (models of a compare or of a suite's certify) would
    write one results file: their :func:`file_part` is the same (``a/b`` and ``a:b``), and the second would find
    the first's file only after the first ran."""
    seen: dict[str, str] = {}
    for name in names:
        part = file_part(name)
        if part in seen and seen[part] != name:
            raise TextAuditError(f"{what} {safe_name(seen[part])} and {safe_name(name)} would write one results file "
                                 f"({part}): give them names that differ in letters or digits")
        seen[part] = name


def cell_path(output_dir: str | Path, model: str, method: str) -> Path:
    """The results file of one cell: :func:`file_part` of the model and of the method."""
    return Path(output_dir) / f"{file_part(model)}.{file_part(method)}.jsonl"


def plain_name(name: object) -> bool:
    """``name`` is a file name in its folder: a non-empty string with no path in it (a summary's file
    names are the folder's own; a name leading elsewhere is never followed)."""
    return isinstance(name, str) and bool(name) and Path(name).name == name and name not in (".", "..")


def folder_file(folder: Path, name: str, what: str) -> Path:
    """The file ``name`` of a results folder, checked to be the folder's own: a regular file, not a link,
    inside the folder (a link or a name leading elsewhere is never followed: it could be another run's)."""
    path = folder / name
    if path.is_symlink() or not plain_name(name):
        raise TextAuditError(f"{path} ({what}) is a link or leads out of {folder}; a results folder's files are its own "
                             "(copy the file in, or rerun)")
    if not path.is_file():
        raise TextAuditError(f"{path} ({what}) does not exist; the folder is incomplete: rerun the command with the "
                             "same output to finish it")
    if path.resolve().parent != folder.resolve():
        raise TextAuditError(f"{path} ({what}) leads out of {folder}; a results folder's files are its own")
    return path


def read_compare(path: str | Path) -> dict:
    """The content of a ``compare.json``, checked: what the report and :func:`textaudit.results.load`
    read of it is there and of its type; a damaged one is a one-line error naming the file."""
    path = Path(path)
    try:
        content = loads_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TextAuditError(f"{path} is not a readable compare summary ({e}); rerun audit compare") from None
    damaged = f"{path} is not an audit compare summary: %s; rerun audit compare with its --output-dir"
    if not isinstance(content, dict):
        raise TextAuditError(damaged % f"it is a JSON {type(content).__name__}, not an object")
    if not isinstance(content.get("header", {}), dict):
        raise TextAuditError(damaged % "its header is not an object")
    cells = content.get("cells")
    if not isinstance(cells, list):
        raise TextAuditError(damaged % "'cells' is not a list")
    for c in cells:
        if not isinstance(c, dict) or not all(isinstance(c.get(k), str) for k in ("model", "method")):
            raise TextAuditError(damaged % "a cell without its model and method")
        missing = [k for k in MATRIX_COLUMNS if k not in c]
        if missing:
            raise TextAuditError(damaged % f"cell {c['model']} × {c['method']} lacks {', '.join(missing)}")
    files = content.get("files", [])
    if not isinstance(files, list) or not all(plain_name(f) for f in files):
        raise TextAuditError(damaged % "'files' does not name the cells' files in the folder")
    if not isinstance(content.get("paired", []), list):
        raise TextAuditError(damaged % "'paired' is not a list")
    return content
