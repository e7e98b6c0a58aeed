"""Results files: JSON Lines written as they are produced, flushed per record, resumable.

Every long-running command (attacks, bias, learnability) appends one JSON object per finished
unit of work to its ``--output`` file and flushes it, so a killed run loses at most the unit in
flight; ``--resume`` reads the ids already present and skips them. A final line cut off by a kill
is dropped (and the file repaired) when the file is reopened.

The first line of a results file is a *header record*, ``{"header": {"command", "config",
"textaudit"}}``: the settings the records depend on (method, k, β, κ, δ, the model's fingerprint,
the MLM, the data, the seed …). ``--resume`` refuses a file whose header has other settings, so
one file never mixes two runs. While a run writes a file it holds an exclusive lock on it
(``.<name>.lock`` next to it): a second writer gets a one-line error instead of duplicating records.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator, Mapping

from textaudit.errors import TextAuditError
from textaudit.files import file_lock, loads_json
from textaudit.secrets import redact, redact_obj
from textaudit.version import __version__

__all__ = ["read_jsonl", "read_header", "JsonlWriter", "HEADER", "config_conflicts", "check_output", "write_results",
           "check_results", "record_lines", "RecordSpec", "by_id", "NUMBER", "OPTIONAL"]

#: the key of the header record (the first line of a results file)
HEADER = "header"


def read_jsonl(path: str | Path) -> list[dict]:
    """Return the records of a JSONL results file (its header record left out), ignoring a
    truncated last line. A header record after the first line is a one-line error: two runs' files
    joined into one would otherwise read as one run."""
    out = []
    for n, r in _iter(Path(path)):
        if HEADER not in r:
            out.append(r)
        elif n > 1 and out:
            raise TextAuditError(f"{path}:{n} is a second header record: two runs' results were joined into one file; "
                                 "keep each run in its own file (audit merge joins the shards of one run)")
    return out


def record_lines(path: str | Path) -> list[int]:
    """The line numbers (from 1, the header's included in the count) of the records :func:`read_jsonl` returns,
    in the same order: what an error about one record names."""
    return [n for n, r in _iter(Path(path)) if HEADER not in r]


def read_header(path: str | Path) -> dict | None:
    """Return the header record's content (``{"command", "config", "textaudit"}``) of a results
    file, or None when the file is missing, empty or has no header."""
    for _, r in _iter(Path(path)):
        return r[HEADER] if HEADER in r and isinstance(r[HEADER], dict) else None
    return None


_NUMBER = (int, float)
_NONE = type(None)
#: the field types a :class:`RecordSpec` uses: a number, and "may be absent or null"
NUMBER, OPTIONAL = _NUMBER, _NONE


def by_id(record: dict) -> Hashable:
    """The usual record key: its ``id``."""
    return record["id"]


@dataclass(frozen=True)
class RecordSpec:
    """What the code reading one kind's results file back takes from each record, declared by the audit that writes it
    (``textaudit.attacks.run.ATTACK_RECORDS``, …) and held by its row of :data:`textaudit.kinds.KINDS`.

    ``fields``: by record status, the fields and their types (``"*"``: every record; ``"success"``: a record of that
    status too); a field whose types include :data:`OPTIONAL` may be absent or null, and is of one of the others
    where it is given. ``key``: what identifies a record (two records with one key are one: ``audit merge`` keeps the
    first). ``unique``: a file holding one key twice is refused (lines pasted from another copy). ``check``: a
    record's own rule the types do not say, as the message for a record that breaks it (None when sound)."""

    fields: Mapping[str, Mapping[str, tuple]] = field(default_factory=dict)
    key: Callable[[dict], Hashable] = by_id
    unique: bool = False
    check: Callable[[dict], str | None] | None = None


#: fields whose type alone does not say they can be read back: what they must be
FIELD_SHAPES = {"pair": "a list of two words (p = (w1, w2))", "l0": "a whole number >= 0",
                "seconds": "a finite number >= 0", "queries": "a finite number >= 0"}


def _sound(key: str, value: object) -> bool:
    """The shape checks of :data:`FIELD_SHAPES` (types are checked by the caller); numbers finite."""
    if key == "pair":
        return len(value) == 2 and all(isinstance(w, str) for w in value)  # type: ignore[arg-type]
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if key in ("l0", "seconds", "queries"):
        return value >= 0  # type: ignore[operator]
    return True


def check_results(path: str | Path, header: dict | None, records: list[dict], spec: RecordSpec | None = None) -> None:
    """One line naming the file, the line and the field for a results file whose header or records lack
    what reading it back needs (edited by hand, cut by another tool, written by something else), instead
    of a KeyError deep in a summary. Lines count as written: the header is line 1. ``spec``: what its kind's records
    hold (:class:`RecordSpec`; ``textaudit.kinds.check_records`` finds it from the header); None checks the header."""
    if not isinstance(header, dict):
        raise TextAuditError(f"{path}:1: no header record; give a results file written by audit with --output")
    if not isinstance(header.get("command"), str) or not isinstance(header.get("config"), dict):
        missing = "command" if not isinstance(header.get("command"), str) else "config"
        raise TextAuditError(f"{path}:1: the header has no {missing} (a table of the run's settings); "
                             "was the file edited or written by another tool?")
    if spec is None:
        return
    seen: dict = {}
    for line, r in enumerate(records, 2):
        wrong = spec.check(r) if spec.check is not None else None
        if wrong:
            raise TextAuditError(f"{path}:{line}: {wrong}")
        status = r.get("status")
        for key, types in {**spec.fields.get("*", {}), **spec.fields.get(str(status), {})}.items():
            v = r.get(key)
            if v is None and _NONE in types:
                continue
            if v is None or isinstance(v, bool) or not isinstance(v, types) or not _sound(key, v):
                got = "nothing" if v is None else f"{type(v).__name__} {str(v)[:30]!r}"
                want = " or ".join(t.__name__ for t in types if t is not _NONE)
                raise TextAuditError(f"{path}:{line}: field '{key}' must be {FIELD_SHAPES.get(key, want)}, "
                                     f"got {got}; was the file edited or written by another tool?")
        if spec.unique:
            k = spec.key(r)
            if k in seen:  # one run writes each unit once: a copy means lines were joined or pasted
                raise TextAuditError(f"{path}:{line} repeats the record of line {seen[k]} ({k!r}): one run writes each "
                                     "unit once (were lines pasted from another copy?); remove the repeat, or rerun into "
                                     "a new --output")
            seen[k] = line


#: header settings textaudit began to record after files were written without them: such a file is continued
#: (checked by the settings it has), a file that has them is checked by them
ADDED_LATER = frozenset({"mlm_fingerprint", "lm_order"})


def config_conflicts(saved: dict, wanted: dict, *, exact: bool = False) -> list[str]:
    """The settings of ``wanted`` that differ from ``saved``, as ``"key: saved → wanted"``.

    ``exact``: every key of either side counts, None included (a run's full configuration);
    otherwise only keys in both, and None in ``wanted`` means "the default", not checked (the
    options a user typed, compared before the defaults are known)."""
    if exact:
        keys = list(saved) + [k for k in wanted if k not in saved and k not in ADDED_LATER]
        return [f"{k}: {_norm(saved.get(k, 'missing'))} → {_norm(wanted.get(k, 'missing'))}" for k in keys
                if _norm(saved.get(k)) != _norm(wanted.get(k)) or (k in saved) != (k in wanted)]
    return [f"{k}: {_norm(saved[k])} → {_norm(v)}" for k, v in wanted.items()
            if v is not None and k in saved and _norm(saved[k]) != _norm(v)]


def _norm(v: Any) -> Any:
    """``v`` as a results file holds it: tuples → lists, numpy → numbers, and no secret (:func:`textaudit.secrets.redact`)."""
    return redact_obj(json.loads(json.dumps(v, default=_default)))


def check_output(path: str | Path | None, resume: bool | None, settings: dict | None = None, shard: str | None = None,
                 *, exact: bool = False) -> None:
    """Everything about ``--output`` that can fail, checked before any model loads: ``--resume``
    without a file; a directory; a file that exists without ``--resume``; a file written with
    other ``settings`` (see :func:`config_conflicts`; ``exact`` for a run's full configuration) or
    for another ``shard`` ("i/N"); another
    process writing it. The lock taken here is kept by the process (the writer takes it again).
    ``resume=None``: the command has no ``--resume`` (a short run that writes its file at the end)."""
    if path is None:
        if resume:
            raise TextAuditError("--resume needs --output (the JSONL file to continue)")
        return
    path = Path(path)
    blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise TextAuditError(f"--output {path} cannot be written: {blocked} is a file, not a directory")
    if path.is_dir():
        raise TextAuditError(f"--output {path} is a directory; give a file name, e.g. {path / 'results.jsonl'}")
    if path.exists() and path.stat().st_size > 0:
        if resume is None:  # a command without --resume
            raise TextAuditError(f"{path} already exists; choose another --output or remove it")
        if not resume:
            raise TextAuditError(f"{path} already exists; pass --resume (in Python: resume=True) to continue it or "
                                 "choose another --output")
        header = _checked_header(path)
        bad = config_conflicts(header.get("config", {}), settings or {}, exact=exact and bool(header))
        if header and header.get("shard") != shard:
            bad.append(f"shard: {header.get('shard') or 'none'} → {shard or 'none'}")
        if bad:
            raise TextAuditError(f"{path} was written with other settings ({'; '.join(bad)}); rerun with the same "
                                 "settings to continue it, or choose another --output")
    _hold_lock(path)


def _checked_header(path: Path) -> dict:
    header = read_header(path)
    if header is None and read_jsonl(path):
        raise TextAuditError(f"{path} has no header record (written by an older textaudit or another tool), so it "
                             "cannot be checked against this run's settings; choose another --output")
    return header or {}


_LOCKS: dict[Path, Any] = {}


def _hold_lock(path: Path) -> None:
    """Take (again: it is re-entrant) this process's exclusive lock on results file ``path``."""
    from filelock import Timeout

    key = path.resolve()
    if key not in _LOCKS:
        try:  # a place we cannot write (read-only, no permission) is named as such, not as "locked"
            path.parent.mkdir(parents=True, exist_ok=True)
            (path.parent / f".{path.name}.lock").touch()
        except OSError as e:
            raise TextAuditError(f"--output {path} cannot be written: {e.strerror or e}") from None
    lock = _LOCKS.get(key) or file_lock(path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise TextAuditError(f"{path} is being written by another process (lock {lock.lock_file}); wait for it to "
                             "finish or choose another --output") from None
    _LOCKS[key] = lock


def _release_lock(path: Path) -> None:
    """Let go of this process's lock on ``path`` entirely (the check and the writer each took it),
    closing its file handle: a notebook or ``audit serve`` running many audits keeps none open."""
    lock = _LOCKS.pop(path.resolve(), None)
    if lock is not None and lock.is_locked:
        lock.release(force=True)


def _iter(path: Path) -> Iterator[tuple[int, dict]]:
    if not path.is_file():
        return
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except UnicodeDecodeError:
        raise TextAuditError(f"{path} is not UTF-8 text, so not a JSONL results file; check the path") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = loads_json(line)
        except json.JSONDecodeError:
            if n == len(lines) and not line.endswith("\n"):
                return  # cut off by a kill: the unit will be redone
            raise TextAuditError(f"{path}:{n} is not valid JSON; the results file is damaged (move it away or fix "
                                 "that line)") from None
        if not isinstance(obj, dict):
            raise TextAuditError(f"{path}:{n} is a JSON {type(obj).__name__}, not an object; this is not a textaudit "
                                 "results file (or that line was edited): move it away or fix that line")
        yield n, obj


class JsonlWriter:
    """Append-only JSONL results file with a header record, a lock, and resume support.

    ``JsonlWriter(path, resume=False)`` refuses to overwrite an existing non-empty file (so no
    results are lost by accident); with ``resume=True`` it keeps the file and exposes the ids in
    it as :attr:`done`. ``command`` and ``config`` make the header record of a new file; on
    resume they must match the file's (:func:`check_output`); ``shard`` ("i/N") and ``extra`` go into
    a new file's header too; ``spec``: what its records hold (:class:`RecordSpec`, the writing audit's), checked on
    the records a resumed file already has. :meth:`close` releases the lock.
    """

    def __init__(self, path: str | Path | None, *, resume: bool = False, id_key: str = "id",
                 command: str | None = None, config: dict | None = None, shard: str | None = None,
                 extra: dict | None = None, spec: RecordSpec | None = None):
        self.path = Path(path) if path else None
        self.id_key = id_key
        self.records: list[dict] = []
        self.header: dict | None = None
        if self.path is None:
            return
        check_output(self.path, resume, config, shard, exact=config is not None)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume:
            self.records = read_jsonl(self.path)
            self.header = read_header(self.path)
            if self.header is not None:
                check_results(self.path, self.header, self.records, spec)
            self._repair()
        if self.header is None:
            self.header = {"command": command, "config": _norm(config or {}), "textaudit": __version__}
            if shard is not None:
                self.header["shard"] = shard
            self.header.update({k: v for k, v in (extra or {}).items() if v is not None})
            self._append_lines([{HEADER: self.header}])

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
        if self.path is not None and records:
            self._append_lines(records)

    def _append_lines(self, records: list[dict[str, Any]]) -> None:
        assert self.path is not None
        with open(self.path, "a", encoding="utf-8") as f:
            # the one way a record reaches a file: each line redacted (a substring test when no secret is known)
            f.write("".join(redact(json.dumps(r, default=_default)) + "\n" for r in records))
            f.flush()
            os.fsync(f.fileno())

    def close(self) -> None:
        """Release the lock on the file (the process keeps it if it took it more than once)."""
        if self.path is not None:
            _release_lock(self.path)


def write_results(path: str | Path, records: list[dict], *, command: str, config: dict) -> None:
    """Write a short run's records (a certification, a word-order sweep) as a results file: the header
    record then ``records``; like every results file it is never overwritten (:func:`check_output`)."""
    writer = JsonlWriter(path, command=command, config=config)
    try:
        writer.extend(records)
    finally:
        writer.close()


def _default(o: Any):
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "to_dict"):
        return o.to_dict()
    return str(o)

