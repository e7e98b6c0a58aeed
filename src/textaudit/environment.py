"""The environment variables textaudit reads, checked in one place before any work starts.

``audit`` calls :func:`check_environment` first thing (in its global options), so a bad value is a
one-line error before any data, model or masked LM is loaded, and never a traceback halfway
through a run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from textaudit.device import check_device, cpu_threads
from textaudit.errors import TextAuditError

__all__ = ["ENVIRONMENT", "check_environment", "tune_garbage_collector"]


def _directory(name: str, value: str) -> None:
    p = Path(value).expanduser()
    if p.exists() and not p.is_dir():
        raise TextAuditError(f"{name}={value} is a file, not a directory; point it at a directory (or unset it)")


def _existing_directory(name: str, value: str) -> None:
    if not Path(value).expanduser().is_dir():
        raise TextAuditError(f"{name}={value} is not a directory; point it at the data directory (e.g. ../shared/data)")


def _threads(name: str, value: str) -> None:
    cpu_threads()  # the one reader of TEXTAUDIT_THREADS says what is wrong with it


def _seconds(name: str, value: str) -> None:
    try:
        ok = float(value) >= 0
    except ValueError:
        ok = False
    if not ok:
        raise TextAuditError(f"{name} must be a number of seconds >= 0 (got '{value}')")


def _switch(name: str, value: str) -> None:
    if value.strip().lower() not in ("", "0", "1", "true", "false", "yes", "no"):
        raise TextAuditError(f"{name} must be 1 or 0 (got '{value}')")


def _device(name: str, value: str) -> None:
    check_device(value, name)


def _store(name: str, value: str) -> None:
    if value.strip().lower() != "off" and Path(value).expanduser().is_dir():
        raise TextAuditError(f"{name}={value} is a directory; give a file (e.g. {Path(value) / 'neighborhoods.sqlite'}) or off")


#: name -> (check(name, value), what it means)
ENVIRONMENT: dict[str, tuple[Callable[[str, str], None], str]] = {
    "TEXTAUDIT_DATA": (_existing_directory, "directory of SST-2 and the lexicons (resources)"),
    "TEXTAUDIT_CACHE": (_directory, "where trained models, downloads and caches go (default ~/.cache/textaudit)"),
    "TEXTAUDIT_DEVICE": (_device, "cpu, cuda or cuda:N (default: CUDA when present)"),
    "TEXTAUDIT_THREADS": (_threads, "CPU threads torch uses (audit --threads)"),
    "TEXTAUDIT_PROGRESS_SECONDS": (_seconds, "seconds between progress lines when stderr is not a terminal"),
    "TEXTAUDIT_OFFLINE": (_switch, "1: never download"),
    "TEXTAUDIT_TRUST_REMOTE_CODE": (_switch, "1: let named HuggingFace models run their own code"),
    "TEXTAUDIT_STORE": (_store, "the neighbourhood store: a file, or off (default $TEXTAUDIT_CACHE/neighborhoods.sqlite)"),
}


def check_environment() -> None:
    """Raise a one-line :class:`TextAuditError` for the first variable of :data:`ENVIRONMENT` with a bad value."""
    for name, (check, _) in ENVIRONMENT.items():
        value = os.environ.get(name)
        if value:
            check(name, value)


def tune_garbage_collector() -> None:
    """Collect cyclic garbage less often: an audit allocates millions of short-lived objects (neighbour sentences,
    id lists, candidate rows) that reference counting frees, and at Python's default threshold (a generation-0
    collection every 700 allocations) the collector re-walks the young objects thousands of times a second for
    almost no garbage. The ``audit`` process (and ``benchmarks/reproduce_paper.py``) call this first; a library
    user's process is left as it is. Measured in ``benchmarks/store.md`` (the bias stage of ``--quick``)."""
    import gc

    gc.set_threshold(50_000, 20, 100)
