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
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

import textaudit.notices as notices
from textaudit.errors import TextAuditError

__all__ = ["atomic_path", "atomic_dir", "file_lock", "lock_or_fail", "wait_for_lock", "sha256_file", "fingerprint_files",
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


@contextlib.contextmanager
def atomic_path(target: str | Path, *, suffix: str = "") -> Iterator[Path]:
    """Yield a unique temporary file path next to ``target``; when the block ends without an
    exception it replaces ``target`` atomically, otherwise it is removed. ``suffix`` keeps an
    extension some writers insist on (``np.savez`` adds ``.npz``)."""
    target = Path(target)
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
