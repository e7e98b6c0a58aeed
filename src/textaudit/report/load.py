"""Read the inputs of ``audit report``: any mix of results files, ``audit compare`` and ``audit harden`` folders.

Every results file textaudit writes starts with a header record naming its command (see
:mod:`textaudit.formats.jsonl`); that is how a file's kind is known. ``audit compare`` writes
``compare.json`` next to its cells: a directory holding one (or the file itself) counts as a
comparison, and its cells are read as attack files too. ``audit harden`` writes ``harden.json``: a
folder holding one is a before/after.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from textaudit.errors import TextAuditError
from textaudit.formats.compare import SUMMARY as COMPARE_SUMMARY
from textaudit.formats.compare import folder_file, read_compare
from textaudit.formats.harden import SUMMARY as HARDEN_SUMMARY
from textaudit.formats.harden import read_harden_folder
from textaudit.formats.jsonl import read_header, read_jsonl
from textaudit.kinds import BY_ID, check_records, kind_of, listed
from textaudit.kinds import KINDS as ALL_KINDS

__all__ = ["Loaded", "load_inputs", "kind_order"]


def kind_order() -> list[str]:
    """The kinds of results a report shows (:data:`textaudit.kinds.KINDS` ids), in the order of its sections."""
    return [kind.id for kind in ALL_KINDS]


@dataclass
class Loaded:
    """One input: its ``kind`` (a :func:`kind_order` entry, :func:`textaudit.kinds.kind_of` its header), path, header and
    records."""

    kind: str
    path: Path
    header: dict
    records: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)  # compare.json's content

    @property
    def config(self) -> dict:
        return self.header.get("config", {})


def _load_compare(path: Path) -> list[Loaded]:
    content = read_compare(path)
    out = [Loaded("compare", path, content.get("header", {}), summary=content)]
    for name in content.get("files", []):
        out.append(_load_file(folder_file(path.parent, name, "a cell of the comparison")))
    return out


def load_harden(path: Path) -> Loaded:
    """An ``audit harden`` folder by its summary (``harden.json``), checked with its files as
    :func:`textaudit.results.load` checks it: a damaged one is a one-line error."""
    content, _ = read_harden_folder(path.parent, BY_ID["attack"].records)
    return Loaded("harden", path, content["header"], summary=content)


def _load_file(path: Path) -> Loaded:
    header = read_header(path)
    if header is None:
        raise TextAuditError(f"{path} has no header record; give results files written with --output by {listed()}")
    try:
        kind = kind_of(header)
    except TextAuditError:
        raise TextAuditError(f"{path} was written by '{header.get('command')}'; give results files written with "
                             f"--output by {listed()}") from None
    records = read_jsonl(path)
    check_records(path, header, records)
    return Loaded(kind.id, path, header, records)


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
            if (p / HARDEN_SUMMARY).is_file():
                loaded = [load_harden(p / HARDEN_SUMMARY)]
            elif (p / COMPARE_SUMMARY).is_file():
                loaded = _load_compare(p / COMPARE_SUMMARY)
            else:
                files = sorted(p.glob("*.jsonl"))
                if not files:
                    raise TextAuditError(f"{p} holds no results files (*.jsonl) and no compare.json")
                loaded = [_load_file(f) for f in files]
        elif p.name == HARDEN_SUMMARY:
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
