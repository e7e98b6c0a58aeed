"""Results written as they are produced: JSON Lines, flushed per record, resumable.

Every long-running command (attacks, bias, learnability) appends one JSON object per finished
unit of work to its ``--output`` file and flushes it, so a killed run loses at most the unit in
flight; ``--resume`` reads the ids already present and skips them. A final line cut off by a kill
is dropped (and the file repaired) when the file is reopened.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

from textaudit.errors import TextAuditError

__all__ = ["read_jsonl", "JsonlWriter"]


def read_jsonl(path: str | Path) -> list[dict]:
    """Return the records of a JSONL file, ignoring a truncated last line."""
    return list(_iter(Path(path)))


def _iter(path: Path) -> Iterator[dict]:
    if not path.is_file():
        return
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines) and not line.endswith("\n"):
                return  # cut off by a kill: the unit will be redone
            raise TextAuditError(f"{path}:{n} is not valid JSON; the results file is damaged (move it away or fix "
                                 "that line)") from None


class JsonlWriter:
    """Append-only JSONL results file with resume support.

    ``JsonlWriter(path, resume=False)`` refuses to overwrite an existing non-empty file (so no
    results are lost by accident); with ``resume=True`` it keeps the file and exposes the ids in
    it as :attr:`done`.
    """

    def __init__(self, path: str | Path | None, *, resume: bool = False, id_key: str = "id"):
        self.path = Path(path) if path else None
        self.id_key = id_key
        self.records: list[dict] = []
        if self.path is None:
            return
        if self.path.exists() and self.path.stat().st_size > 0 and not resume:
            raise TextAuditError(f"{self.path} already exists; pass --resume to continue it or choose another --output")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume:
            self.records = read_jsonl(self.path)
            self._repair()

    @property
    def done(self) -> set:
        return {r.get(self.id_key) for r in self.records}

    def _repair(self) -> None:
        """Rewrite the file without a truncated last line, if there is one."""
        assert self.path is not None
        if not self.path.is_file():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            keep = data[: data.rfind(b"\n") + 1]
            self.path.write_bytes(keep)

    def append(self, record: dict[str, Any]) -> None:
        """Add one record (and write + flush it when the writer has a path)."""
        self.extend([record])

    def extend(self, records: list[dict[str, Any]], *, keep: bool = True) -> None:
        """Add several records with one write + flush (``keep=False``: not kept in :attr:`records`)."""
        if keep:
            self.records.extend(records)
        if self.path is None or not records:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(r, default=_default) + "\n" for r in records))
            f.flush()
            os.fsync(f.fileno())


def _default(o: Any):
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "to_dict"):
        return o.to_dict()
    return str(o)
