"""Shards: a run's work split into N disjoint parts, one per machine or job (``--shard i/N``).

A job belongs to shard ``i`` of ``N`` when a stable hash of its id (SHA-256, not Python's salted
``hash``) is ``i`` modulo ``N``: shards never overlap, together they cover every job, and the
split depends neither on the order of the jobs nor on the machine. Any scheduler can run them
(Slurm arrays, Kubernetes jobs, ``ssh``); ``audit merge`` joins their results files.
"""

from __future__ import annotations

import hashlib
import re

from textaudit.errors import TextAuditError

__all__ = ["Shard", "parse_shard", "in_shard", "shard_name"]

#: ``(i, N)``: the i-th of N shards, 0 <= i < N
Shard = tuple[int, int]


def parse_shard(spec: str | None) -> Shard | None:
    """``"i/N"`` as ``(i, N)`` (None stays None); anything else is a one-line error."""
    if spec is None:
        return None
    m = re.fullmatch(r"([0-9]+)/([0-9]+)", str(spec).strip())  # ASCII digits: str.isdigit also takes ² and ٣
    i, n = (m.group(1), m.group(2)) if m else ("", "")
    if not (m and int(n) >= 1 and int(i) < int(n)):
        raise TextAuditError(f"--shard must be i/N with 0 <= i < N, e.g. 0/4 (got '{spec}')")
    return int(i), int(n)


def in_shard(job_id: str, shard: Shard | None) -> bool:
    """Whether the job ``job_id`` belongs to ``shard`` (every job belongs to no shard at all)."""
    if shard is None:
        return True
    i, n = shard
    return int.from_bytes(hashlib.sha256(str(job_id).encode("utf-8")).digest()[:8], "little") % n == i


def shard_name(shard: Shard | None) -> str | None:
    """``"i/N"`` for a results header (None: the whole run)."""
    return None if shard is None else f"{shard[0]}/{shard[1]}"
