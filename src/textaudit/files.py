"""Safe writes to places other processes share: unique temporary names, atomic replace, file locks.

Every file textaudit writes into the cache (zoo checkpoints, patch scores, downloads, the parsed
GloVe vectors, the SmolLM2 copy) and every training state goes through :func:`atomic_path`: it is
written under a unique temporary name next to its target and renamed over it only when complete,
so a kill leaves the old file (or none) and two processes never write the same temporary file.
Work that must happen once (training a zoo model on first use, a download) runs under
:func:`file_lock`, a ``filelock`` lock file ``.<name>.lock`` next to the target.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

import textaudit.notices as notices
from textaudit.errors import TextAuditError

__all__ = ["made_by_textaudit", "check_replaceable", "check_folder", "APPLICATION_ID", "REPORT_MARKERS", "FIGURE_MARK",
           "atomic_path", "atomic_dir", "file_lock", "lock_or_fail", "wait_for_lock", "sha256_file", "fingerprint_files",
           "fingerprint_dir"]


def _umask() -> int:
    """The process's umask, read without changing it where the system says it (Linux), else by
    setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# -- is this ours? ---------------------------------------------------------------------------------------------
#: SQLite's ``application_id`` of textaudit's stores ("TAUD"; :mod:`textaudit.neighborhoods.store` writes it)
APPLICATION_ID = 0x54415544
#: what every report carries near its top: HTML, its generator tag; Markdown, the line under its title
#: ("textaudit 0.1.0 · 3 result file(s) · generated 2026-11-24 23:30")
REPORT_MARKERS = (re.compile(rb'<meta name="generator" content="textaudit report '),
                  re.compile(rb"\A# [^\n]*\n\ntextaudit \S+ \xc2\xb7 \d+ result file\(s\) \xc2\xb7 generated "))
#: a suite's JUnit XML (``audit run --junit``; :mod:`textaudit.formats.junit` writes it): its root's name
JUNIT_MARK = re.compile(rb"<testsuites [^>]*\bname=\"textaudit suite")
#: the metadata textaudit gives the figures it draws (PNG ``Software``, PDF and SVG ``Creator``)
FIGURE_MARK = b"textaudit"
_HEAD = 1 << 16


def made_by_textaudit(path: str | Path) -> bool:
    """Whether the existing file ``path`` is one textaudit made — **the one check** every writer that may replace,
    set aside or delete a file passes (:func:`check_replaceable`), read from the file's own bytes, never its name
    alone: a store (SQLite ``application_id``), a results file or a JSON summary (its ``header``), a kept tracker
    run or a training state of ours (``format: textaudit-…``), a checkpoint's ``textaudit*.json``, weights in
    safetensors with textaudit's metadata, a report (:data:`REPORT_MARKERS`), a figure (:data:`FIGURE_MARK` in its
    metadata). An empty file holds nothing to lose. Never called on a store this process has open: closing a
    descriptor of a database drops this process's SQLite locks on it (:func:`textaudit.neighborhoods.store.not_a_store`
    reads a store's mark through SQLite)."""
    p = Path(path)
    try:
        if not p.is_file():
            return False
        size = p.stat().st_size
        if size == 0:
            return True
        with open(p, "rb") as f:
            head = f.read(_HEAD)
            if size > _HEAD:
                f.seek(-_HEAD, os.SEEK_END)
            tail = f.read() if size > _HEAD else head
    except OSError:
        return False
    if head.startswith(b"SQLite format 3\x00"):
        return len(head) >= 72 and int.from_bytes(head[68:72], "big") == APPLICATION_ID
    if head.startswith((b"\x89PNG", b"%PDF")) or b"<svg" in head[:4096]:
        return FIGURE_MARK in head or FIGURE_MARK in tail  # a PDF's metadata is at its end
    if any(m.search(head) for m in REPORT_MARKERS) or (head.startswith(b"<?xml") and JUNIT_MARK.search(head[:4096])):
        return True
    n = int.from_bytes(head[:8], "little") if len(head) > 9 else 0
    if 0 < n < size and head[8:9] == b"{":  # safetensors: a JSON header after its length
        meta = head[8:8 + n]
        return b'"textaudit"' in meta or (b'"arch"' in meta or b'"scale"' in meta) and b'"__metadata__"' in meta
    return _json_of_ours(p, head)


def loads_json(text: str | bytes) -> object:
    """:func:`json.loads` for a file anyone may have written: a document nested too deep for Python's parser (a line
    of 100,000 ``[``) or holding an integer of more digits than Python converts is a :class:`json.JSONDecodeError`
    like any other malformed JSON — the one error every reader already turns into its one line — never a
    ``RecursionError`` or ``ValueError`` traceback."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply to read", text if isinstance(text, str) else "", 0) from None
    except ValueError as e:  # an integer of more digits than Python converts (4,300): not a number anything wrote
        raise json.JSONDecodeError(f"a value too large to read ({str(e)[:60]})", text if isinstance(text, str) else "",
                                   0) from None


def _json_of_ours(p: Path, head: bytes) -> bool:
    """A JSON or JSON-lines file of ours: its first line (or the whole file) an object with textaudit's header, a
    ``format`` of textaudit's, or, named ``textaudit*.json``, a checkpoint's own settings."""
    first = head.split(b"\n", 1)[0]
    for text in (first, head):
        try:
            doc = loads_json(text)
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict):
            header = doc.get("header")
            return (isinstance(header, dict) and isinstance(header.get("command"), str)) or \
                str(doc.get("format", "")).startswith("textaudit") or "textaudit" in doc or \
                p.name.startswith("textaudit") and p.suffix == ".json"
    return False


def check_replaceable(path: str | Path, hint: str = "choose another name") -> None:
    """Raise a one-line :class:`TextAuditError` when ``path`` exists and textaudit did not make it
    (:func:`made_by_textaudit`): no file the tool did not make is replaced, set aside or deleted."""
    p = Path(path)
    if p.is_dir():
        raise TextAuditError(f"{p} is a directory, where textaudit writes a file; {hint}")
    if p.exists() and not made_by_textaudit(p):
        raise TextAuditError(f"{p} exists and textaudit did not write it (it carries no textaudit mark): it is left as it "
                             f"is; {hint}, or move it away yourself")


def check_folder(path: str | Path, marker: str, hint: str = "choose another folder") -> None:
    """A folder textaudit will write files into (and replace its own there): new, empty, or holding ``marker``, a
    file of ours (:func:`made_by_textaudit`); else one line."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise TextAuditError(f"{p} is a file; give a directory ({hint})")
    if p.is_dir() and any(p.iterdir()) and not made_by_textaudit(p / marker):
        raise TextAuditError(f"{p} holds files textaudit did not write (no {marker} of its own there): it is left as it "
                             f"is; {hint}")


@contextlib.contextmanager
def atomic_path(target: str | Path, *, suffix: str = "", unmarked: str | None = None) -> Iterator[Path]:
    """Yield a unique temporary file path next to ``target``; when the block ends without an
    exception it replaces ``target`` atomically, otherwise it is removed. ``suffix`` keeps an
    extension some writers insist on (``np.savez`` adds ``.npz``). An existing ``target`` is replaced only when
    textaudit made it (:func:`check_replaceable`), unless the caller says in ``unmarked`` why the place is its own
    (a file in textaudit's cache, a folder it checked)."""
    target = Path(target)
    if unmarked is None:
        check_replaceable(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=f".tmp{suffix}", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600: the file gets the mode any file written here gets
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(target: str | Path) -> Iterator[Path]:
    """Yield a unique temporary directory next to ``target``; when the block ends without an
    exception it becomes ``target`` (if another process made ``target`` meanwhile, theirs is kept
    and this copy is dropped), otherwise it is removed."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        os.rename(tmp, target)
    except OSError:
        if not target.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        shutil.rmtree(tmp, ignore_errors=True)  # another process won the race with the same content


def _lock_path(target: Path) -> Path:
    return target.parent / f".{target.name}.lock"


def file_lock(target: str | Path, *, timeout: float = -1):
    """A ``filelock.FileLock`` on ``.<name>.lock`` next to ``target`` (``timeout=-1``: wait)."""
    from filelock import FileLock

    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(_lock_path(target)), timeout=timeout)


@contextlib.contextmanager
def lock_or_fail(target: str | Path, busy: str) -> Iterator[None]:
    """Hold the lock of ``target`` for the block, or raise ``TextAuditError(busy)`` at once when
    another process holds it."""
    from filelock import Timeout

    lock = file_lock(target, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise TextAuditError(busy) from None
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def wait_for_lock(target: str | Path, waiting: str) -> Iterator[None]:
    """Hold the lock of ``target`` for the block, waiting for another process (with the notice
    ``waiting`` on stderr) when it holds it."""
    from filelock import Timeout

    lock = file_lock(target, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        notices.notice(waiting)
        lock.acquire(timeout=-1)
    try:
        yield
    finally:
        lock.release()


def sha256_file(path: str | Path) -> str:
    """The hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fingerprint_files(paths: Iterable[str | Path]) -> str:
    """A short fingerprint (16 hex digits of SHA-256) of the bytes of ``paths``, in the order given:
    what a results header records to tell one model's weights from another's."""
    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).name.encode() + b"\0" + sha256_file(p).encode())
    return h.hexdigest()[:16]


def fingerprint_dir(path: str | Path) -> str:
    """:func:`fingerprint_files` of every file under directory ``path`` (hidden ones left out), by
    relative path: a checkpoint or HuggingFace model directory."""
    root = Path(path)
    files = sorted(p for p in root.rglob("*") if p.is_file() and not any(part.startswith(".") for part in
                                                                         p.relative_to(root).parts))
    return fingerprint_files(files)
