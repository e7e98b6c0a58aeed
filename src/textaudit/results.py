"""Results, read back: the facade users import (``from textaudit.results import load``).

:func:`load` reads any results file a command wrote, an ``audit compare`` folder or an ``audit
harden`` folder, and returns a :class:`~textaudit.loaded.Results` (``.to_pandas()``, ``.summary()``,
shown inline in Jupyter). The file format itself — JSON Lines with a header record, appended and
flushed per record, resumable, locked while written — is :mod:`textaudit.formats.jsonl`; its reader
and writer are importable from here too, as they always were.

In the package's layers (``docs/architecture.md``) this facade sits above every reader and every audit
whose summary it recomputes, and below hardening and the report: it reads a harden folder through
:mod:`textaudit.formats.harden`, never through :mod:`textaudit.harden`. Nothing inside textaudit imports it.
"""

from __future__ import annotations

from textaudit.formats.jsonl import (
    HEADER,
    JsonlWriter,
    check_output,
    config_conflicts,
    read_header,
    read_jsonl,
    write_results,
)
from textaudit.kinds import check_records
from textaudit.loaded import Results, load

#: a results file's header and records checked as read back, by its kind's record spec (one line naming file, line and
#: field where they lack what reading them needs)
check_results = check_records

__all__ = ["load", "Results", "read_jsonl", "read_header", "JsonlWriter", "HEADER", "config_conflicts", "check_output",
           "write_results", "check_results"]
