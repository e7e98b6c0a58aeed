"""Read the inputs of ``audit report``: any mix of results files, ``audit compare`` and ``audit harden`` folders.

Every results file textaudit writes starts with a header record naming its command (see
:mod:`textaudit.results`); that is how a file's kind is known. ``audit compare`` writes
``compare.json`` next to its cells: a directory holding one (or the file itself) counts as a
comparison, and its cells are read as attack files too. ``audit harden`` writes ``harden.json``: a
folder holding one is a before/after.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from textaudit.errors import TextAuditError
from textaudit.results import check_results, read_header, read_jsonl

__all__ = ["Loaded", "load_inputs", "KINDS"]

#: the commands whose results a report shows, in the order of its sections
KINDS = ("harden", "compare", "attack", "bias", "wordorder", "certify", "learnability", "perturbscore build")


@dataclass
class Loaded:
    """One input: its ``kind`` (a :data:`KINDS` entry), path, header and records."""

    kind: str
    path: Path
    header: dict
    records: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)  # compare.json's content

    @property
    def config(self) -> dict:
        return self.header.get("config", {})


def _load_compare(path: Path) -> list[Loaded]:
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TextAuditError(f"{path} is not a readable compare summary ({e}); rerun audit compare") from None
    out = [Loaded("compare", path, content.get("header", {}), summary=content)]
    for name in content.get("files", []):
        cell = path.parent / name
        if cell.is_file():
            out.append(_load_file(cell))
    return out


def load_harden(path: Path) -> Loaded:
    """An ``audit harden`` summary (``harden.json``), checked: a damaged one is a one-line error."""
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TextAuditError(f"{path} is not a readable harden summary ({e}); rerun audit harden") from None
    header = content.get("header") if isinstance(content, dict) else None
    if not isinstance(header, dict) or header.get("command") != "harden" or "attacks" not in content:
        raise TextAuditError(f"{path} is not an audit harden summary; rerun audit harden with its --out")
    _check_harden(path, content)
    return Loaded("harden", path, header, summary=content)


def _check_harden(path: Path, content: dict) -> None:
    """What the report and :func:`textaudit.results.load` read of a harden summary is there and of
    its type: a damaged one is a one-line error here, not a traceback where it is read."""
    from textaudit.harden import before_after as ba

    damaged = f"{path} is damaged: %s; rerun audit harden with its --out"
    if not isinstance(content["header"].get("config", {}), dict):
        raise TextAuditError(damaged % "its header's 'config' is not an object")
    if not isinstance(content["attacks"], list):
        raise TextAuditError(damaged % "'attacks' is not a list")
    for a in content["attacks"]:
        if not isinstance(a, dict) or not isinstance(a.get("method"), str):
            raise TextAuditError(damaged % "an evaluation attack without its method")
        files = a.get("files")
        # the before/after files are the folder's own: a name with a path in it is not followed
        if not (isinstance(files, list) and len(files) == 2
                and all(isinstance(f, str) and f and Path(f).name == f and f not in (".", "..") for f in files)):
            raise TextAuditError(damaged % f"{a['method']} does not name its before and after files in the folder")
    for key in ("from", "method", "model", "data", "eval_data"):
        if not isinstance(content.get(key), str):
            raise TextAuditError(damaged % f"'{key}' is not a string")
    if not isinstance(content.get("held_out"), dict) or "eval_examples" not in content["held_out"]:
        raise TextAuditError(damaged % "'held_out' does not count the evaluation examples")
    for side in ("before", "after"):
        if not isinstance(content.get(side), dict) or not {"attack", "success_rate", "accuracy"} <= set(content[side]):
            raise TextAuditError(damaged % f"'{side}' lacks the headline (attack, success_rate, accuracy)")
    try:  # the tables the report and the CLI print from it
        ba.summary_rows(content), ba.bias_rows(content), ba.cost_rows(content)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as e:
        raise TextAuditError(damaged % f"{type(e).__name__}: {e}") from None


def _load_file(path: Path) -> Loaded:
    header = read_header(path)
    if header is None or header.get("command") not in KINDS:
        what = "has no header record" if header is None else f"was written by '{header.get('command')}'"
        raise TextAuditError(f"{path} {what}; give results files written with --output by attack, bias, wordorder, "
                             "certify, learnability or perturbscore build, or an audit compare --output-dir")
    records = read_jsonl(path)
    check_results(path, header, records)
    return Loaded(header["command"], path, header, records)


def load_inputs(paths: Iterable[str | Path]) -> list[Loaded]:
    """Every input of ``paths`` (files or ``audit compare`` directories), each file once."""
    out: list[Loaded] = []
    seen: set[Path] = set()
    paths = list(paths)
    if not paths:
        raise TextAuditError("give at least one results file or audit compare directory")
    for p in map(Path, paths):
        if not p.exists():
            raise TextAuditError(f"{p} does not exist; give results files written with --output")
        if p.is_dir():
            if (p / "harden.json").is_file():
                loaded = [load_harden(p / "harden.json")]
            elif (p / "compare.json").is_file():
                loaded = _load_compare(p / "compare.json")
            else:
                files = sorted(p.glob("*.jsonl"))
                if not files:
                    raise TextAuditError(f"{p} holds no results files (*.jsonl) and no compare.json")
                loaded = [_load_file(f) for f in files]
        elif p.name == "harden.json":
            loaded = [load_harden(p)]
        elif p.name.endswith(".json"):
            loaded = _load_compare(p)
        else:
            loaded = [_load_file(p)]
        for item in loaded:
            if item.path.resolve() not in seen:
                seen.add(item.path.resolve())
                out.append(item)
    return out
