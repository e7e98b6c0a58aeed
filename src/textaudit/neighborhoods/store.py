"""The neighbourhood store: masked-LM answers computed once, kept on disk, shared by every run.

Most of an audit's masked-LM work does not depend on the model audited: the κ candidates of a masked
context are the same for cnn and lstm, for a rerun, a resume, a shard or a Ray worker. The store keeps
them in one SQLite file (``$TEXTAUDIT_CACHE/neighborhoods.sqlite`` unless ``--store PATH``; ``--store
off`` disables it), in front of which the masked LM's in-memory LRU stays.

**Key.** The masked LM's *fingerprint* — a hash of its weights and tokenizer (vocabulary, piece scheme),
its precision and the kind of device it runs on (:func:`textaudit.neighborhoods.fingerprints.mlm_fingerprint`, with
its memo per artifact): another or a retrained masked LM never reads another's entries — and the masked
context: the words left and right of the position (:func:`context_key`; under the fingerprinted tokenizer the
context's ids are a function of these words, so the key determines the value, and a lookup needs neither the
weights nor the tokenizer).

**Value.** The top-N whole-word candidates ``(vocabulary id, logit)``, best first, where N ≥ the κ
asked (:data:`STORE_TOP` at least), so one entry serves every κ ≤ N and every δ; logits are float32, as
the forward computes them, so an answer from the store is the answer the forward would give. Each value
carries a CRC-32: a damaged entry is a miss (and is dropped), never an answer.

**Safety.** SQLite in WAL mode (``synchronous=NORMAL``): several processes read and write at once, a
transaction is atomic, and a process killed mid-write (kill -9) leaves a database that opens with every
committed entry. A store carries textaudit's mark (SQLite's ``application_id``, :data:`APPLICATION_ID`): a
file that does not — another program's database, a text file, a device — is never opened for writing, set
aside or changed (``--store`` naming one is a one-line error; found at run time, a notice and no store). A
store of ours that fails ``PRAGMA quick_check`` is set aside (``<name>.damaged-<time>``) with a one-line
notice and rebuilt. A full disk or a read-only location
degrades to reading (or to no store) with a notice; the audit goes on.

**Scores.** The same file keeps the classifiers' answers too (the *score cache*, tables ``classifiers``
and ``scores``): key = the classifier's identity — its fingerprint (weights and tokenizer; an ``llm:``
model's prompt; an endpoint's URL, model, prompt and scoring), its precision, the kind of device, and
:data:`SCORES_FORMAT` — and a 16-byte BLAKE2b digest of the text (or of a sentence pair's two texts);
value = the float32 row of class probabilities as the forward gave it, with its CRC-32, so a run that
reads it gives the records a run that computes it gives. On by default for models whose answers are a
function of fingerprinted weights (zoo, ``hf:``, ``llm:``); for plug-ins (``file.py:obj``, callables:
they may read state their file does not show) and endpoints only with ``--score-cache all``
(``TEXTAUDIT_SCORE_CACHE``); never for label-only answers sampled from an endpoint (each run draws
anew), never with ``--score-cache off`` or ``--store off``. Pruning drops the least recently used of
both kinds of entries. Ray workers read and write no scores (a classifier sent to another process knows
neither ``--store`` nor ``--score-cache``). Which classifiers' answers are kept, and how a classifier is given its view of them, is
:mod:`textaudit.neighborhoods.score_cache`'s; this module only stores them.

Why SQLite and not LMDB: it is in the standard library (no dependency, no native wheel to match), its
WAL mode gives many readers with concurrent writers across processes, and its crash guarantees are
documented and tested; LMDB's single memory map needs a size chosen up front and a lock file that
misbehaves on network file systems.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import math
import os
import sqlite3
import struct
import tempfile
import time
import zlib
from array import array
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

import textaudit.notices as notices
from textaudit.backends import register_sync
from textaudit.errors import TextAuditError
from textaudit.files import APPLICATION_ID as FILES_APPLICATION_ID
from textaudit.files import loads_json
from textaudit.neighborhoods.store_sync import LIVE, SHIPPED, StoreSync
from textaudit.resources import cache_dir
from textaudit.secrets import redact

__all__ = ["NeighborhoodStore", "StoredMaskedLM", "StoreStats", "default_store_path", "open_store", "context_key",
           "STORE_TOP", "FORMAT", "APPLICATION_ID", "use_store", "current_store", "parse_store", "not_a_store",
           "SCORES_FORMAT", "MergeCounts",
           "entry_problem", "tops_per_query", "serves"]

#: every entry holds at least this many candidates (κ = 20 by default; a larger κ stores more)
STORE_TOP = 32


def tops_per_query(top: int | Sequence[int], n: int) -> list[int]:
    """A masked LM's ``top`` as one value per query of ``n``: one for all, or one each (the engine's merged asks of κ
    and of the naturalness constraint's P)."""
    tops = [top] * n if isinstance(top, int) else list(top)
    if len(tops) != n:
        raise TextAuditError(f"{len(tops)} tops for {n} masked contexts")
    return tops


def serves(n: int, held: int, need: int) -> bool:
    """Whether an answer kept with ``n`` candidates asked (``held`` of them there) serves an ask of ``need``: it has
    enough, or it is all the masked LM has there (fewer whole words than were asked)."""
    return n >= need or held < n
#: the store's format; a store of ours of another format is set aside and rebuilt
FORMAT = "textaudit-neighborhoods-1"
#: textaudit's mark in a store's SQLite header (``PRAGMA application_id``: "TAUD"; textaudit.files.APPLICATION_ID)
APPLICATION_ID = FILES_APPLICATION_ID
#: the tables of a store (a database holding any other is not one)
STORE_TABLES = frozenset({"meta", "mlms", "entries", "classifiers", "scores"})
#: part of every classifier's identity in the score cache: raised when the way scores are computed changes
SCORES_FORMAT = 1
#: scores gathered before they are written in one transaction
SCORE_BATCH = 16384
#: ``PRAGMA quick_check`` on open up to this size (it reads every page)
CHECK_BYTES = 2 << 30
#: rows per SELECT ... IN (...)
_CHUNK = 500

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS mlms (
    id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE, name TEXT NOT NULL, vocab BLOB NOT NULL,
    seconds_per_entry REAL NOT NULL DEFAULT 0, hits INTEGER NOT NULL DEFAULT 0, misses INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    mlm INTEGER NOT NULL, k BLOB NOT NULL, n INTEGER NOT NULL, v BLOB NOT NULL, crc INTEGER NOT NULL,
    used INTEGER NOT NULL, PRIMARY KEY (mlm, k)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entries_used ON entries (used);
CREATE TABLE IF NOT EXISTS classifiers (
    id INTEGER PRIMARY KEY, identity TEXT NOT NULL UNIQUE, name TEXT NOT NULL, classes INTEGER NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0, misses INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS scores (
    clf INTEGER NOT NULL, k BLOB NOT NULL, v BLOB NOT NULL, crc INTEGER NOT NULL, used INTEGER NOT NULL,
    PRIMARY KEY (clf, k)) WITHOUT ROWID;
"""


def default_store_path() -> Path:
    """``$TEXTAUDIT_CACHE/neighborhoods.sqlite`` (default ``~/.cache/textaudit``)."""
    return cache_dir() / "neighborhoods.sqlite"


def context_key(words: Sequence[str], pos: int) -> bytes:
    """The 16-byte key of the masked context of ``words`` at ``pos``: the words left and right of it."""
    text = "\x1f".join(words[:pos]) + "\x1e" + "\x1f".join(words[pos + 1:])
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


#: the tables of a store (:data:`_SCHEMA`): a file without one of them is no store, whatever its format row says
TABLES = frozenset({"meta", "mlms", "entries", "classifiers", "scores"})


def _pack(n: int, ids: Sequence[int], logits: Sequence[float]) -> bytes:
    return struct.pack("<HH", n, len(ids)) + array("I", ids).tobytes() + array("f", logits).tobytes()


def _unpack(v: bytes) -> tuple[int, list[int], list[float]]:
    n, c = struct.unpack_from("<HH", v)
    if len(v) != 4 + 8 * c:
        raise ValueError("length")
    ids = array("I")
    ids.frombytes(v[4:4 + 4 * c])
    vals = array("f")
    vals.frombytes(v[4 + 4 * c:])
    return n, ids.tolist(), vals.tolist()


def entry_problem(k: bytes, n: int, v: bytes, crc: int, vocab_size: int) -> str | None:
    """Why a masked-LM entry read from a file cannot be an answer (None when it can): its CRC, its layout, its
    key's length, n (the candidates asked) ≥ 1 and ≥ the candidates it holds, ids distinct and within the masked
    LM's vocabulary of ``vocab_size`` words, logits finite and best first."""
    if not isinstance(k, bytes) or not isinstance(v, bytes) or len(k) != 16:
        return "a key or value of the wrong type or size"
    if zlib.crc32(k + v) != crc:
        return "a CRC that does not match"
    try:
        n_, ids, vals = _unpack(v)
    except (struct.error, ValueError):
        return "a value of the wrong layout"
    if n_ != n or n_ < 1 or len(ids) > n_:
        return "candidate counts out of bounds"
    if ids and max(ids) >= vocab_size:
        return "ids outside its masked LM's vocabulary"
    if len(set(ids)) != len(ids):
        return "a candidate repeated"
    if not all(map(math.isfinite, vals)) or any(a < b for a, b in zip(vals, vals[1:])):
        return "logits that are not finite or not best first"
    return None


class DamagedVocabulary(TextAuditError):
    """A masked LM's vocabulary in a store cannot be read back (an import skips that masked LM's entries)."""


@dataclass
class MergeCounts:
    """What an import did: entries ``copied`` in, entries ``kept`` as this store held them (an import never replaces
    one), and the ``bad`` ones skipped, by reason."""

    copied: int = 0
    kept: int = 0
    bad: Counter = field(default_factory=Counter)

    def describe(self) -> str:
        bad = sum(self.bad.values())
        why = "; ".join(f"{n} with {r}" for r, n in self.bad.most_common())
        return (f"{self.copied} entries imported, {self.kept} already in the store kept as they were"
                + (f", {bad} bad entries skipped ({why})" if bad else ""))


class StoreStats:
    """What the store did in this process, all masked LMs together: ``hits`` (masked contexts answered from
    the store), ``misses`` (asked of it and computed), ``written`` and ``damaged`` (entries dropped). Each
    masked LM keeps its own counts and the seconds its hits saved (``HFMaskedLM.store_summary``)."""

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0
        self.written = 0
        self.damaged = 0


class NeighborhoodStore:
    """One store file (see the module docstring). The connection is opened on first use in each
    process (a copy sent to a Ray worker or a forked process opens its own); ``readonly`` never writes."""

    def __init__(self, path: str | Path, *, readonly: bool = False, quiet: bool = False):
        self.path = Path(path).expanduser()
        self.readonly = readonly
        self.quiet = quiet
        self.stats = StoreStats()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None
        self._mlm_ids: dict[str, int] = {}
        self._disabled = False
        self._writable = not readonly
        self._used: dict[int, set[bytes]] = {}
        self._pending: dict[int, tuple[int, int]] = {}
        self._fingerprints: dict[int, str] = {}  # id -> fingerprint, of the masked LMs this object met
        self._vocab_sizes: dict[int, int] = {}
        self._used_scores: dict[int, set[bytes]] = {}  # the score cache's last-use days and counters, like _used/_pending
        self._score_buffer: dict[tuple[int, bytes], tuple] = {}  # scores not yet written (put_scores), read by get_scores
        self._pending_scores: dict[int, tuple[int, int]] = {}
        #: on a Ray worker on another machine than the driver's: what it computed, for the driver (see neighborhoods.store_sync)
        self._outbox: dict | None = None
        self._since: dict[str, tuple[int, int]] = {}  # hits and misses per asking masked LM, since the last drain
        LIVE.add(self)

    # -- opening -----------------------------------------------------------------------------------
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.update(_conn=None, _pid=None, _mlm_ids={}, stats=StoreStats(), _used={}, _pending={}, _fingerprints={},
                     _vocab_sizes={},
                     _outbox=None, _since={}, _used_scores={}, _pending_scores={}, _score_buffer={})
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        LIVE.add(self)

    @property
    def key(self) -> str:
        """The store's file, resolved: the same string for every object (and Ray worker) reading it."""
        return str(self.path.resolve())

    def _notice(self, msg: str) -> None:
        if not self.quiet:
            notices.notice(f"neighbourhood store {self.path}: {msg}")

    @property
    def available(self) -> bool:
        """The store can be read (False after it degraded to no store)."""
        return self._connection() is not None

    def _connection(self) -> sqlite3.Connection | None:
        if self._disabled:
            return None
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        self._conn, self._pid, self._mlm_ids = None, os.getpid(), {}
        try:
            self._conn = self._open()
        except OSError as e:
            self._disabled = True
            self._notice(f"cannot be opened ({e.strerror or e}); running without it")
        return self._conn

    def _open(self) -> sqlite3.Connection:
        if self.key in SHIPPED:  # a Ray worker on another machine: the driver's store, as it was, in memory
            conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            if SHIPPED[self.key]:
                data = bytearray(SHIPPED[self.key])
                data[18:20] = b"\x01\x01"  # the header's WAL flag: a database in memory keeps a rollback journal
                conn.deserialize(bytes(data))
            if not self.readonly:
                self._outbox = {"mlms": {}, "rows": [], "counts": {}}
            return self._checked(conn, fresh=True)
        if not self.readonly:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError:
                pass
        fresh = not self.path.exists()
        if not fresh:
            foreign = not_a_store(self.path)
            if foreign:  # nothing of it is read, written, set aside or removed
                raise OSError(f"is not a textaudit store ({foreign}); left as it is")
        if self.readonly or (not fresh and not os.access(self.path, os.W_OK)) or \
                (fresh and not os.access(self.path.parent if self.path.parent.exists() else Path.cwd(), os.W_OK)):
            if fresh:
                raise OSError(f"{self.path} does not exist" if self.readonly else "its folder is read-only")
            if not self.readonly:
                self._notice("is read-only: reading it, saving nothing new")
            self._writable = False
            try:  # with what another process still holds in its WAL; immutable (WAL unread) where it cannot be shared
                try:
                    return self._checked(sqlite3.connect(_read_only_uri(self.path), uri=True,
                                                         check_same_thread=False), fresh=False)
                except sqlite3.OperationalError:
                    return self._checked(sqlite3.connect(_read_only_uri(self.path, immutable=True), uri=True,
                                                         check_same_thread=False), fresh=False)
            except sqlite3.DatabaseError as e:  # damaged, or not a store: nothing to read, nothing set aside
                raise OSError(f"not a readable store ({e})") from None
        try:
            try:
                return self._checked(self._connect(), fresh=fresh)
            except sqlite3.OperationalError:
                raise  # cannot open or lock it: not damage
            except sqlite3.DatabaseError as e:
                self._set_aside(str(e))
                return self._checked(self._connect(), fresh=True)
        except sqlite3.OperationalError as e:
            raise OSError(str(e)) from None

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), timeout=60, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=60000")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _checked(self, conn: sqlite3.Connection, *, fresh: bool) -> sqlite3.Connection:
        """Check a file that existed (format, ``quick_check``), or create the schema; a damaged file
        raises :class:`sqlite3.DatabaseError` (set aside by the caller)."""
        if not fresh and self.path.stat().st_size <= CHECK_BYTES:
            row = conn.execute("PRAGMA quick_check").fetchone()
            if not row or row[0] != "ok":
                conn.close()
                raise sqlite3.DatabaseError(f"quick_check: {row[0] if row else 'no answer'}")
        if self._writable:
            conn.executescript(_SCHEMA)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
            if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:  # the mark, written once
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        fmt = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if not fmt or fmt[0] != FORMAT:
            conn.close()
            raise sqlite3.DatabaseError(f"format {fmt[0] if fmt else 'missing'}, not {FORMAT}")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not TABLES <= tables:  # a format row alone is no store (a file made to look like one)
            conn.close()
            raise sqlite3.DatabaseError(f"no {', '.join(sorted(TABLES - tables))} table")
        return conn

    def _set_aside(self, why: str) -> None:
        if self.readonly or not self._writable:
            raise OSError(f"damaged ({why[:80]})")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                os.replace(p, Path(str(aside) + suffix))
        self._notice(f"was damaged ({why[:80]}); set aside as {aside.name} and rebuilt")

    def _failed(self, e: sqlite3.Error, doing: str) -> None:
        """A database error mid-run: a write that cannot be made (disk full, read-only) stops writing;
        a damaged file stops the store for this run (it is set aside when next opened)."""
        if isinstance(e, sqlite3.OperationalError) and doing == "write":
            self._writable = False
            self._notice(f"cannot be written ({e}); reading it, saving nothing new")
            return
        self._disabled = True
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
        self._conn = None
        self._notice(f"failed while it was read ({e}); running without it")

    # -- masked LMs ------------------------------------------------------------------------------
    def mlm_id(self, fingerprint: str, name: str, vocab: Sequence[str] | None) -> int | None:
        """The store's id of a masked LM (registered with its vocabulary on first use; ``vocab`` None:
        only looked up)."""
        conn = self._connection()
        if conn is None:
            return None
        if fingerprint in self._mlm_ids:
            return self._mlm_ids[fingerprint]
        try:
            row = conn.execute("SELECT id FROM mlms WHERE fingerprint = ?", (fingerprint,)).fetchone()
            if row is None and vocab is not None and self._writable:
                if self._outbox is not None:  # new to the driver's store too: it is registered there with this
                    self._outbox["mlms"][fingerprint] = (name, list(vocab))
                blob = zlib.compress(json.dumps(list(vocab), ensure_ascii=False).encode("utf-8", "surrogatepass"))
                try:
                    conn.execute("INSERT OR IGNORE INTO mlms (fingerprint, name, vocab, created) VALUES (?, ?, ?, ?)",
                                 (fingerprint, name, blob, time.time()))
                except sqlite3.OperationalError as e:
                    self._failed(e, "write")
                row = conn.execute("SELECT id FROM mlms WHERE fingerprint = ?", (fingerprint,)).fetchone()
        except sqlite3.Error as e:
            self._failed(e, "read")
            return None
        if row is None:
            return None
        self._mlm_ids[fingerprint] = row[0]
        self._fingerprints[row[0]] = fingerprint
        return row[0]

    def _rows(self, sql: str) -> list[tuple]:
        """Every row of a listing query (none when the store cannot be opened)."""
        conn = self._connection()
        return [] if conn is None else conn.execute(sql).fetchall()

    def mlms(self) -> list[dict]:
        """Every masked LM in the store: ``{"id", "fingerprint", "name", "entries", "hits", "misses", ...}``."""
        rows = self._rows("SELECT m.id, m.fingerprint, m.name, m.seconds_per_entry, m.hits, m.misses, m.created, "
                          "(SELECT COUNT(*) FROM entries e WHERE e.mlm = m.id) FROM mlms m ORDER BY m.id")
        return [{"id": r[0], "fingerprint": r[1], "name": r[2], "seconds_per_entry": r[3], "hits": r[4], "misses": r[5],
                 "created": r[6], "entries": r[7]} for r in rows]

    def vocabulary(self, mlm: int) -> list[str]:
        """The vocabulary a masked LM's ids index (stored with it)."""
        conn = self._connection()
        row = conn.execute("SELECT vocab FROM mlms WHERE id = ?", (mlm,)).fetchone() if conn else None
        if row is None:
            raise TextAuditError(f"the neighbourhood store {self.path} has no masked LM with id {mlm}")
        try:
            vocab = loads_json(zlib.decompress(row[0]).decode("utf-8", "surrogatepass"))
        except (zlib.error, TypeError, ValueError):  # (loads_json: nesting and huge numbers are ValueErrors too)
            vocab = None
        if not isinstance(vocab, list) or not vocab or not all(isinstance(w, str) for w in vocab):
            raise DamagedVocabulary(f"the neighbourhood store {self.path} keeps a damaged vocabulary for its masked LM "
                                    f"{mlm}: remove the store (or export it again where it was made)")
        return vocab

    def _vocab_size(self, mlm: int) -> int:
        """How many words the ids of masked LM ``mlm`` index (read once per process)."""
        if mlm not in self._vocab_sizes:
            self._vocab_sizes[mlm] = len(self.vocabulary(mlm))
        return self._vocab_sizes[mlm]

    # -- entries ---------------------------------------------------------------------------------
    def _valid_rows(self, table: str, owner: str, oid: int, keys: Sequence[bytes]) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
        """``(good, bad)``: the ``(key, value)`` rows of ``table`` (masked-LM ``entries`` or ``scores``) that ``owner``
        ``oid`` holds for ``keys`` and whose CRC matches, and the keys whose CRC does not (raises sqlite3.Error)."""
        conn = self._connection()
        good: list[tuple[bytes, bytes]] = []
        bad: list[bytes] = []
        if conn is None:
            return good, bad
        for s in range(0, len(keys), _CHUNK):
            chunk = keys[s:s + _CHUNK]
            q = f"SELECT k, v, crc FROM {table} WHERE {owner} = ? AND k IN ({','.join('?' * len(chunk))})"
            for k, v, crc in conn.execute(q, (oid, *chunk)):
                (good.append((k, v)) if zlib.crc32(k + v) == crc else bad.append(k))
        return good, bad

    def _drop_damaged(self, table: str, owner: str, oid: int, bad: Sequence[bytes], noun: str) -> None:
        """Count, say and delete the damaged rows ``bad`` (a miss, recomputed; never an answer)."""
        if not bad:
            return
        self.stats.damaged += len(bad)
        self._notice(f"{len(bad)} damaged {noun} dropped (recomputed)")
        self._write(lambda c: c.executemany(f"DELETE FROM {table} WHERE {owner} = ? AND k = ?", [(oid, k) for k in bad]))

    def get(self, mlm: int, keys: Sequence[bytes], top: int) -> dict[bytes, tuple[int, list[int], list[float]]]:
        """``{key: (n, ids, logits)}`` (the top n, best first) for the ``keys`` the store holds with n ≥ ``top``
        candidates (or every candidate the masked LM has there); the others are missing."""
        out: dict[bytes, tuple[int, list[int], list[float]]] = {}
        if self._connection() is None or not keys:
            return out
        try:
            good, bad = self._valid_rows("entries", "mlm", mlm, keys)
        except sqlite3.Error as e:
            self._failed(e, "read")
            return {}
        size = self._vocab_size(mlm)
        for k, v in good:
            try:
                n_, ids, vals = _unpack(v)
            except (struct.error, ValueError):
                bad.append(k)
                continue
            if ids and max(ids) >= size or not all(map(math.isfinite, vals)):  # a file written by another hand
                bad.append(k)
                continue
            if serves(n_, len(ids), top):
                out[k] = (n_, ids, vals)
        self._drop_damaged("entries", "mlm", mlm, bad, "entry" if len(bad) == 1 else "entries")
        if self._writable:  # their last-use day, written with the next write (prune drops the oldest)
            self._used.setdefault(mlm, set()).update(out)
        return out

    def put(self, mlm: int, rows: Iterable[tuple[bytes, int, Sequence[int], Sequence[float]]],
            seconds_per_entry: float | None = None) -> None:
        """Keep ``(key, n, ids, logits)`` rows (n: the candidates asked of the forward); an entry is
        replaced only by one with more candidates."""
        today = int(time.time() // 86400)
        data = []
        for k, n, ids, vals in rows:
            v = _pack(n, ids, vals)
            data.append((mlm, k, n, v, zlib.crc32(k + v), today))
        if not data:
            return

        def write(c: sqlite3.Connection) -> None:
            c.executemany(_UPSERT, data)
            if seconds_per_entry:
                c.execute("UPDATE mlms SET seconds_per_entry = ? WHERE id = ?", (seconds_per_entry, mlm))

        if self._write(write):
            self.stats.written += len(data)
            if self._outbox is not None and mlm in self._fingerprints:
                fp = self._fingerprints[mlm]
                self._outbox["rows"].extend((fp, k, n, v, crc) for _, k, n, v, crc, _ in data)
                if seconds_per_entry:
                    self._outbox.setdefault("seconds", {})[fp] = seconds_per_entry

    def _write(self, fn) -> bool:
        conn = self._connection()
        if conn is None or not self._writable:
            return False
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                fn(conn)
                self._flush_used(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            self._failed(e, "write")
            return False
        return True

    def _flush_used(self, conn: sqlite3.Connection) -> None:
        today = int(time.time() // 86400)
        for mlm, keys in self._used.items():
            conn.executemany("UPDATE entries SET used = ? WHERE mlm = ? AND k = ? AND used < ?",
                             [(today, mlm, k, today) for k in keys])
        self._used = {}
        for clf, keys in self._used_scores.items():
            conn.executemany("UPDATE scores SET used = ? WHERE clf = ? AND k = ? AND used < ?",
                             [(today, clf, k, today) for k in keys])
        self._used_scores = {}

    def record(self, mlm: int, hits: int, misses: int, source: str | None = None) -> None:
        """Add this call's hits and misses to the store's counters (``audit store info``'s hit rate);
        ``source``: the asking masked LM's token (a Ray worker's counts reach its driver's summary by it)."""
        self.stats.hits += hits
        self.stats.misses += misses
        if source is not None:
            h, m = self._since.get(source, (0, 0))
            self._since[source] = (h + hits, m + misses)
        if self._outbox is not None:  # a worker's copy: counted in the driver's store (absorb)
            if mlm in self._fingerprints:
                h, m = self._outbox["counts"].get(self._fingerprints[mlm], (0, 0))
                self._outbox["counts"][self._fingerprints[mlm]] = (h + hits, m + misses)
            return
        h, m = self._pending.get(mlm, (0, 0))
        self._pending[mlm] = (h + hits, m + misses)

    def flush(self) -> None:
        """Write the counters and last-use days gathered since the last write."""
        self._write_scores()  # the gathered scores first
        pending, self._pending = self._pending, {}
        scores, self._pending_scores = self._pending_scores, {}
        if not pending and not self._used and not scores and not self._used_scores:
            return

        def write(c: sqlite3.Connection) -> None:
            c.executemany("UPDATE mlms SET hits = hits + ?, misses = misses + ? WHERE id = ?",
                          [(h, m, mlm) for mlm, (h, m) in pending.items()])
            c.executemany("UPDATE classifiers SET hits = hits + ?, misses = misses + ? WHERE id = ?",
                          [(h, m, clf) for clf, (h, m) in scores.items()])

        self._write(write)

    def close(self) -> None:
        """Flush and close this process's connection."""
        if self._conn is not None and self._pid == os.getpid():
            self.flush()
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
        self._conn = None

    # -- the score cache ------------------------------------------------------------------------
    def classifier_id(self, identity: str, name: str, classes: int | None) -> tuple[int, int] | None:
        """``(id, classes)`` of a classifier's identity (:func:`score_identity`) in the store, registered on first
        use; with ``classes`` None (a model that has not answered yet) only looked up."""
        conn = self._connection()
        if conn is None:
            return None
        identity, name = redact(identity), redact(name)  # the file keeps no credential (an endpoint's URL, key)
        try:
            q = "SELECT id, classes FROM classifiers WHERE identity = ?"
            row = conn.execute(q, (identity,)).fetchone()
            if row is None and classes and self._writable:
                self._write(lambda c: c.execute("INSERT OR IGNORE INTO classifiers (identity, name, classes, created) "
                                                "VALUES (?, ?, ?, ?)", (identity, name, classes, time.time())))
                row = conn.execute(q, (identity,)).fetchone()
        except sqlite3.Error as e:
            self._failed(e, "read")
            return None
        return (row[0], row[1]) if row else None

    def get_scores(self, clf: int, keys: Sequence[bytes], classes: int, *, multilabel: bool = False
                   ) -> dict[bytes, "np.ndarray"]:
        """``{key: float32 row}`` for the ``keys`` the store holds, each checked as an answer before it is one: its
        CRC, its length (``classes``), every value finite and in [0, 1], a row of exclusive classes summing to 1
        (:func:`valid_rows`); an entry that fails is damaged: dropped, said, and recomputed."""
        out: dict = {}
        if self._connection() is None or not keys:
            return out
        buffered = self._score_buffer
        if buffered:  # gathered by this process, not yet written
            for k in keys:
                row = buffered.get((clf, k))
                if row is not None:
                    out[k] = np.frombuffer(row[2], dtype="<f4").astype(np.float32)
        try:
            good, bad = self._valid_rows("scores", "clf", clf, [k for k in keys if k not in out] if out else keys)
        except sqlite3.Error as e:
            self._failed(e, "read")
            return {}
        sized = [(k, v) for k, v in good if len(v) == 4 * classes]
        bad.extend(k for k, v in good if len(v) != 4 * classes)
        if sized:  # every row checked at once (a warm run reads millions: no per-row numpy calls)
            rows = np.frombuffer(b"".join(v for _, v in sized), dtype="<f4").astype(np.float32).reshape(len(sized), classes)
            ok = valid_rows(rows, multilabel)
            for (k, _), row, fine in zip(sized, rows, ok):
                if fine:
                    out[k] = row
                else:
                    bad.append(k)
        self._drop_damaged("scores", "clf", clf, bad, "score" if len(bad) == 1 else "scores")
        if self._writable and out:
            self._used_scores.setdefault(clf, set()).update(out)
        h, m = self._pending_scores.get(clf, (0, 0))
        self._pending_scores[clf] = (h + len(out), m + len(keys) - len(out))
        return out

    def put_scores(self, clf: int, rows: Iterable[tuple[bytes, "np.ndarray"]], *, replace: bool = False) -> None:
        """Keep ``(key, row)`` rows of class probabilities (float32, as computed); ``replace``: over what is kept.
        Rows are gathered and written :data:`SCORE_BATCH` at a time (and at every :meth:`flush`, at the end of a
        command, at exit): one transaction per classifier call cost a cheap model more than its forwards. A process
        killed before a write loses only those rows of the cache (they are recomputed), never a committed one."""
        today = int(time.time() // 86400)
        data = []
        for k, row in rows:
            v = np.ascontiguousarray(row, dtype="<f4").tobytes()
            data.append((clf, k, v, zlib.crc32(k + v), today))
        if not data or self._outbox is not None:
            return
        if replace:  # a fresh answer (predict_proba_fresh) replaces the kept one, now
            self._write_scores(data, replace=True)
            return
        for row in data:
            self._score_buffer.setdefault((row[0], row[1]), row)  # the first answer kept stays, as in the file
        if len(self._score_buffer) >= SCORE_BATCH:
            self._write_scores()

    def _write_scores(self, data: list | None = None, *, replace: bool = False) -> None:
        """Write ``data`` (default: the gathered rows). The first answer kept stays (another process's of the same
        identity is the same answer, up to the last bit of a float32 computed in another batch). No index on
        ``used``: it would cost every write a second B-tree, and only a prune reads it."""
        if data is None:
            data, self._score_buffer = list(self._score_buffer.values()), {}
        if not data:
            return
        verb = ("INSERT INTO scores (clf, k, v, crc, used) VALUES (?, ?, ?, ?, ?) ON CONFLICT (clf, k) DO UPDATE "
                "SET v = excluded.v, crc = excluded.crc, used = excluded.used") if replace else \
            "INSERT OR IGNORE INTO scores (clf, k, v, crc, used) VALUES (?, ?, ?, ?, ?)"
        if self._write(lambda c: c.executemany(verb, data)):
            self.stats.written += len(data)

    def classifiers(self) -> list[dict]:
        """Every classifier whose scores the store keeps: ``{"name", "identity", "entries", "hits", "misses"}``."""
        rows = self._rows("SELECT c.name, c.identity, c.hits, c.misses, (SELECT COUNT(*) FROM scores s WHERE s.clf = c.id) "
                          "FROM classifiers c ORDER BY c.id")
        return [{"name": r[0], "identity": r[1], "hits": r[2], "misses": r[3], "entries": r[4]} for r in rows]

    # -- maintenance -----------------------------------------------------------------------------
    def info(self) -> dict:
        """Size, entries, bytes per entry (of both kinds) and hit rate, per masked LM and in all; ``scores``: the
        score cache's entries and hit rate, per classifier."""
        conn = self._connection()
        self.flush()
        size = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        mlms = self.mlms() if conn is not None else []
        entries = sum(m["entries"] for m in mlms)
        hits, misses = sum(m["hits"] for m in mlms), sum(m["misses"] for m in mlms)
        clfs = self.classifiers() if conn is not None else []
        sh, sm = sum(c["hits"] for c in clfs), sum(c["misses"] for c in clfs)
        every = entries + sum(c["entries"] for c in clfs)  # masked contexts and scored texts
        return {"path": str(self.path), "bytes": size, "entries": entries,
                "bytes_per_entry": round(size / every, 1) if every else None,
                "hits": hits, "misses": misses, "hit_rate": round(hits / (hits + misses), 4) if hits + misses else None,
                "mlms": [{k: m[k] for k in ("name", "fingerprint", "entries", "hits", "misses")} for m in mlms],
                "scores": {"entries": sum(c["entries"] for c in clfs), "hits": sh, "misses": sm,
                           "hit_rate": round(sh / (sh + sm), 4) if sh + sm else None,
                           "classifiers": [{"name": c["name"], "identity": c["identity"][:16], "entries": c["entries"],
                                            "hits": c["hits"], "misses": c["misses"]} for c in clfs]}}

    def prune(self, max_bytes: int) -> int:
        """Drop the least recently used entries until the file is at most ``max_bytes`` (or holds no entry: what
        is left is the masked LMs' vocabularies); return how many. A file's pages are not all entries, so the share
        dropped by size is repeated until the file (checkpointed: a WAL database's VACUUM lands in its WAL) fits."""
        conn = self._connection()
        if conn is None or not self._writable:
            raise TextAuditError(f"the neighbourhood store {self.path} cannot be written; nothing pruned")
        self.flush()
        dropped = 0
        for _ in range(20):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            size = self.path.stat().st_size
            entries = conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
            scores = conn.execute("SELECT COUNT(*) FROM scores").fetchone()[0]
            if size <= max_bytes or not entries + scores:
                break
            share = 1 - max_bytes / size  # the same share of each kind, the least recently used first
            drop = min(entries, int(entries * share) + 1) if entries else 0
            drop_scores = min(scores, int(scores * share) + 1) if scores else 0

            def write(c: sqlite3.Connection, drop: int = drop, drop_scores: int = drop_scores) -> None:
                c.execute("DELETE FROM entries WHERE (mlm, k) IN (SELECT mlm, k FROM entries ORDER BY used, k LIMIT ?)",
                          (drop,))
                c.execute("DELETE FROM scores WHERE (clf, k) IN (SELECT clf, k FROM scores ORDER BY used, k LIMIT ?)",
                          (drop_scores,))

            if not self._write(write):
                break
            conn.execute("VACUUM")
            dropped += drop + drop_scores
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return dropped

    def export(self, out: str | Path, *, mlm: str | None = None) -> "MergeCounts":
        """Copy the entries (of one masked LM: a name or fingerprint prefix) into a new store file ``out``, whole or
        not at all: written under a temporary name beside it and given its name when complete."""
        out = Path(out).expanduser()
        if out.exists():
            raise TextAuditError(f"{out} already exists; give a new file name to export to")
        conn = self._connection()
        if conn is None:
            raise TextAuditError(f"the neighbourhood store {self.path} cannot be read")
        self.flush()
        ids = [m["id"] for m in self.mlms() if mlm is None or m["name"] == mlm or m["fingerprint"].startswith(mlm)]
        if not ids:
            raise TextAuditError(f"the store {self.path} holds no masked LM named or fingerprinted {mlm!r}; "
                                 "see audit store info")
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
        os.close(fd)
        tmp = Path(name)
        try:
            target = NeighborhoodStore(tmp, quiet=True)
            if target._connection() is None:
                raise TextAuditError(f"{out} cannot be written")
            try:
                counts = target.merge_from(self, ids)
            finally:
                target.close()  # its WAL checkpointed into the file and removed
            try:
                os.link(tmp, out)  # complete, and never over a file that appeared meanwhile
            except FileExistsError:
                raise TextAuditError(f"{out} appeared while it was exported; give a new file name") from None
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{tmp}{suffix}").unlink(missing_ok=True)
        return counts

    def merge_from(self, other: "NeighborhoodStore", mlm_ids: Sequence[int] | None = None) -> "MergeCounts":
        """Copy ``other``'s entries (every masked LM, or those of ``mlm_ids``) into this store. ``other`` is untrusted
        (an imported file): each entry is checked (:func:`entry_problem`: its CRC, its layout, finite logits best
        first, ids within its masked LM's vocabulary, counts within bounds), a masked LM whose vocabulary differs
        from the one this store holds under its fingerprint is skipped whole, and an entry never replaces one this
        store already holds. Raises when this store cannot be written."""
        src = other._connection()
        if src is None or self._connection() is None:
            raise TextAuditError(f"cannot merge {other.path} into {self.path}")
        if not self._writable:
            raise TextAuditError(f"the neighbourhood store {self.path} cannot be written; nothing imported")
        counts = MergeCounts()
        try:
            return self._merge(src, other, mlm_ids, counts)
        except sqlite3.DatabaseError as e:  # the other file damaged past its header (a page, a table's layout)
            raise TextAuditError(f"{other.path} is damaged ({' '.join(str(e).split())[:80]}); {counts.copied} entries "
                                 "were imported before it was found: export it again where it was made") from None

    def _merge(self, src: sqlite3.Connection, other: "NeighborhoodStore", mlm_ids: Sequence[int] | None,
               counts: "MergeCounts") -> "MergeCounts":
        for m in other.mlms():
            if mlm_ids is not None and m["id"] not in mlm_ids:
                continue
            if not all(isinstance(m[k], str) and m[k] for k in ("fingerprint", "name")) or \
                    not isinstance(m["seconds_per_entry"], (int, float)) or not math.isfinite(m["seconds_per_entry"]):
                counts.bad["a masked LM described by values of the wrong type"] += m["entries"]
                continue
            try:
                vocab = other.vocabulary(m["id"])
            except DamagedVocabulary:
                counts.bad["a damaged vocabulary"] += m["entries"]
                continue
            theirs = self.mlm_id(m["fingerprint"], m["name"], None)
            if theirs is not None and self.vocabulary(theirs) != vocab:
                counts.bad["its masked LM's vocabulary differs from the one kept under its fingerprint"] += m["entries"]
                continue
            mine = self.mlm_id(m["fingerprint"], m["name"], vocab)
            if mine is None:
                raise TextAuditError(f"{self.path} cannot be written; nothing imported")
            cur = src.execute("SELECT k, n, v, crc FROM entries WHERE mlm = ?", (m["id"],))
            today = int(time.time() // 86400)
            while rows := cur.fetchmany(5000):
                good = []
                for k, n, v, crc in rows:
                    why = entry_problem(k, n, v, crc, len(vocab))
                    if why:
                        counts.bad[why] += 1
                    else:
                        good.append((mine, k, n, v, crc, today))

                added: list[int] = []

                def write(c: sqlite3.Connection, rows: list = good, added: list = added) -> None:
                    before = c.total_changes
                    c.executemany(_INSERT_NEW, rows)
                    added.append(c.total_changes - before)  # counted once committed: a rolled-back batch wrote nothing

                if not self._write(write):
                    raise TextAuditError(f"{self.path} cannot be written; {counts.copied} entries imported before it "
                                         "failed")
                counts.copied += sum(added)
                counts.kept += len(good)
            self._write(lambda c, args=(m["seconds_per_entry"], mine): c.execute(
                "UPDATE mlms SET seconds_per_entry = MAX(seconds_per_entry, ?) WHERE id = ?", args))
        counts.kept -= counts.copied  # those already here, kept as they were
        return counts

    # -- Ray workers on other machines (neighborhoods.store_sync) -------------------------------------------------
    @property
    def is_copy(self) -> bool:
        """This is a Ray worker's copy of the driver's store (on another machine): what it computes goes back."""
        return self._outbox is not None

    def ship(self) -> bytes | None:
        """What a Ray worker on another machine gets of this store: its entries (empty when nothing is stored yet: the
        workers send back what they compute), or None (nothing to ship: a worker's own copy, a disabled store, a
        read-only store that does not exist)."""
        if self._outbox is not None or self._disabled:
            return None
        if self._conn is not None or self.path.exists():
            return self.snapshot()
        return None if self.readonly else b""

    def snapshot(self) -> bytes | None:
        """The whole store as it is now (committed entries), as bytes a worker deserializes; None without one."""
        conn = self._connection()
        if conn is None:
            return None
        self.flush()
        mem = sqlite3.connect(":memory:")
        try:
            conn.backup(mem)
            return mem.serialize()
        except sqlite3.Error as e:
            self._notice(f"cannot be copied for the Ray workers on other machines ({e}); they start without it")
            return None
        finally:
            mem.close()

    def drain(self) -> dict | None:
        """What this Ray worker's store did since the last call, for the driver, or None: ``sources`` (hits and
        misses per asking masked LM, for its summary); on another machine than the driver's (``remote``) also
        the masked LMs, entries and counters its copy gained. On the driver's machine the counters are written
        to the file now."""
        if self._outbox is None:
            if self._conn is not None and self._pid == os.getpid():
                self.flush()
            box: dict = {"mlms": {}, "rows": [], "counts": {}, "remote": False}
        else:
            box, self._outbox = {**self._outbox, "remote": True}, {"mlms": {}, "rows": [], "counts": {}}
        box["sources"], self._since = self._since, {}
        return box if box["mlms"] or box["rows"] or box["counts"] or box["sources"] else None

    def absorb(self, box: dict) -> int:
        """Keep what a worker on another machine computed (:meth:`drain`): each entry checked by its CRC,
        as :meth:`put` keeps its own. Returns the entries kept."""
        for fp, (name, vocab) in box["mlms"].items():
            self.mlm_id(fp, name, vocab)
        ids: dict[str, int | None] = {}
        today = int(time.time() // 86400)
        rows = []
        for fp, k, n, v, crc in box["rows"]:
            if fp not in ids:
                ids[fp] = self.mlm_id(fp, "", None)
            if ids[fp] is not None and zlib.crc32(k + v) == crc:
                rows.append((ids[fp], k, n, v, crc, today))
        seconds = [(secs, mid) for fp, secs in box.get("seconds", {}).items() if (mid := self.mlm_id(fp, "", None))]

        def write(c: sqlite3.Connection) -> None:
            c.executemany(_UPSERT, rows)
            c.executemany("UPDATE mlms SET seconds_per_entry = ? WHERE id = ?", seconds)

        if (rows or seconds) and self._write(write):
            self.stats.written += len(rows)
        for fp, (h, m) in box["counts"].items():
            if (mid := self.mlm_id(fp, "", None)) is not None:
                self.stats.hits += h
                self.stats.misses += m
                hp, mp = self._pending.get(mid, (0, 0))
                self._pending[mid] = (hp + h, mp + m)
        return len(rows)


#: an imported entry: never replaces one the store holds
_INSERT_NEW = "INSERT OR IGNORE INTO entries (mlm, k, n, v, crc, used) VALUES (?, ?, ?, ?, ?, ?)"
_UPSERT = ("INSERT INTO entries (mlm, k, n, v, crc, used) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (mlm, k) DO UPDATE "
           "SET n = excluded.n, v = excluded.v, crc = excluded.crc, used = excluded.used WHERE excluded.n > entries.n")
register_sync("neighborhood-store", StoreSync(lambda key: open_store(key)))


class StoredMaskedLM:
    """A masked LM answered by a store alone (``--mlm store:NAME``): the answers an imported store holds,
    with no weights and no tokenizer. A masked context the store lacks is one clear error.

    ``NAME`` is the stored masked LM's name (``minilm-mlm``) or a prefix of its fingerprint
    (``audit store info`` lists both); its results carry the stored name, so they are the records the
    masked LM itself gave."""

    def __init__(self, store: NeighborhoodStore, which: str):
        found = [m for m in store.mlms() if m["name"] == which or m["fingerprint"].startswith(which)]
        if len(found) != 1:
            names = ", ".join(f"{m['name']} ({m['fingerprint'][:12]})" for m in store.mlms()) or "none"
            raise TextAuditError(f"--mlm store:{which}: the store {store.path} holds "
                                 f"{'no' if not found else 'more than one'} masked LM of that name or fingerprint "
                                 f"(it holds: {names})")
        self.store, self.name, self.fingerprint = store, found[0]["name"], found[0]["fingerprint"]
        self._id = found[0]["id"]
        self._words = store.vocabulary(self._id)
        self.store_hits = 0
        self.store_misses = 0
        self.store_seconds_saved = 0.0
        self._seconds = float(found[0]["seconds_per_entry"])

    #: ``candidates`` takes one ``top`` per query
    tops_per_item = True

    def candidates(self, batch: list, top: int | Sequence[int] = 20) -> list[list[tuple[str, float]]]:
        """Per ``(words, position)``: the stored ``top`` candidates ``(word, logit)``, best first (``top``: one for
        all, or one per query)."""
        tops = tops_per_query(top, len(batch))
        keys = [context_key(words, pos) for words, pos in batch]
        got = self.store.get(self._id, list(dict.fromkeys(keys)), min(tops, default=0))
        missing = [(words, pos) for (words, pos), k, t in zip(batch, keys, tops)
                   if k not in got or not serves(got[k][0], len(got[k][1]), t)]
        if missing:
            words, pos = missing[0]
            raise TextAuditError(f"the store holds no answer of {self.name} for '{' '.join(words[:pos])} [MASK] "
                                 f"{' '.join(words[pos + 1:])}' ({len(missing)} of {len(batch)} masked contexts missing); "
                                 f"run with the masked LM itself (--mlm {self.name}) to compute them")
        self.store_hits += len(set(keys))
        self.store_seconds_saved += len(set(keys)) * self._seconds
        words = self._words
        return [[(words[j], v) for j, v in zip(got[k][1][:t], got[k][2][:t])] for k, t in zip(keys, tops)]

    def store_summary(self) -> dict:
        return {"path": str(self.store.path), "hits": self.store_hits, "misses": 0, "hit_rate": 1.0 if self.store_hits else None,
                "mlm_seconds_saved": round(self.store_seconds_saved, 2)}

    def clear_cache(self) -> None:
        """Nothing is cached in memory (the store is the cache)."""


# -- the process's choice (--store) -----------------------------------------------------------------
_CHOICE: list[str | None] = [None]
_OPEN: dict[str, NeighborhoodStore] = {}


def parse_store(value: str | None) -> str | None:
    """Check a ``--store`` value: ``off``, or a file path (not a directory, and not a file of another kind
    than a store: it would never be touched); None is the default path."""
    if value is None or value.strip().lower() == "off":
        return None if value is None else "off"
    p = Path(value).expanduser()
    if p.is_dir():
        raise TextAuditError(f"--store {value} is a directory; give a file, e.g. {p / 'neighborhoods.sqlite'}, or off")
    try:
        foreign = not_a_store(p) if p.exists() else None
    except OSError as e:  # locked, or in a folder SQLite cannot open it in (a read-only one, with its WAL there)
        raise TextAuditError(f"--store {value} {e}: another process may hold it locked, or its folder may be read-only; "
                             "try again, or give another file, or off") from None
    if foreign:
        raise TextAuditError(f"--store {value} is not a textaudit store ({foreign}); it is left as it is: give a new "
                             "file name, or off")
    return str(p)


def _read_only_uri(path: Path, *, immutable: bool = False) -> str:
    """A read-only SQLite URI for ``path``, percent-encoded (a ``%``, ``#`` or ``?`` in a name stays itself).
    ``immutable``: the file alone, without the shared memory a WAL needs (a file in a read-only place nobody writes)."""
    return path.expanduser().resolve().as_uri() + "?mode=ro" + ("&immutable=1" if immutable else "")


def not_a_store(path: str | Path) -> str | None:
    """Why the existing file ``path`` is not one of textaudit's stores (None when it is one), read through SQLite
    without writing anything: textaudit's mark (:data:`APPLICATION_ID`); without it, a store made before the
    mark or one another process is creating (its mark still in the WAL): a database whose tables are all the
    store's, its format textaudit's. An empty regular file holds nothing to lose: a store may be made in it.

    Read with a file descriptor of its own only when SQLite cannot read it: on POSIX, closing any descriptor of a
    database file drops every lock this process's SQLite connections hold on it (SQLite's "how to corrupt",
    §2.2; a concurrent test corrupted a store that way)."""
    p = Path(path)
    if not p.is_file():
        return "not a regular file"
    if p.stat().st_size == 0:
        return None
    try:  # a plain connection that only reads: no journal or WAL mode is set, nothing is written
        conn = sqlite3.connect(str(p), timeout=60)
        try:
            app = conn.execute("PRAGMA application_id").fetchone()[0]
            if app == APPLICATION_ID:
                return None
            if app != 0:
                return f"another program's database (application_id {app:#x})"
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            fmt = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() if "meta" in tables else None
        finally:
            conn.close()
    except sqlite3.OperationalError as e:  # busy, locked or not openable now: not a verdict on what it is
        raise OSError(f"cannot be read now ({e})") from None
    except sqlite3.DatabaseError as e:
        # SQLite cannot read it, so no lock of this process's connections protects anything in it: its header may
        # be read directly — a store of ours that is damaged still carries the mark (set aside by the caller)
        with open(p, "rb") as f:
            head = f.read(100)
        if head.startswith(b"SQLite format 3\x00") and int.from_bytes(head[68:72], "big") == APPLICATION_ID:
            return None
        return "not an SQLite database" if "not a database" in str(e) else f"an SQLite database that cannot be read ({e})"
    if not tables <= STORE_TABLES:
        return f"an SQLite database of another program (tables {', '.join(sorted(tables - STORE_TABLES)[:3])})"
    if fmt and not str(fmt[0]).startswith("textaudit-"):
        return f"an SQLite database of another program (format {fmt[0]!r})"
    return None


class use_store:
    """``with use_store("off" | PATH | None): ...``: the store masked LMs loaded inside use."""

    def __init__(self, value: str | None):
        self.value = parse_store(value)

    def __enter__(self) -> None:
        self._prev = _CHOICE[0]
        _CHOICE[0] = self.value

    def __exit__(self, *exc: object) -> None:
        _CHOICE[0] = self._prev
        close_stores()  # the counters and last-use days of the run are written now, not at exit


def current_store() -> NeighborhoodStore | None:
    """The store in effect: ``--store`` (or ``TEXTAUDIT_STORE``: a path or ``off``), else the default
    path; one object per path in a process."""
    choice = _CHOICE[0] or os.environ.get("TEXTAUDIT_STORE") or None
    if choice is not None and choice.strip().lower() == "off":
        return None
    return open_store(choice or default_store_path())


def open_store(path: str | Path, *, readonly: bool = False) -> NeighborhoodStore:
    """The process's one :class:`NeighborhoodStore` for ``path``."""
    key = f"{Path(path).expanduser().resolve()}|{readonly}"
    if key not in _OPEN:
        if not _OPEN:
            atexit.register(close_stores)
        _OPEN[key] = NeighborhoodStore(path, readonly=readonly)
    return _OPEN[key]


def close_stores() -> None:
    """Flush and close every store this process opened (at exit, too)."""
    for store in _OPEN.values():
        store.close()


def valid_rows(rows: "np.ndarray", multilabel: bool = False) -> "np.ndarray":
    """Which kept rows (an (n, C) array) can be a model's answer: every value finite and in [0, 1], and (exclusive
    classes) summing to 1 within float32 rounding. A CRC recomputed over a rewritten row proves nothing; this checks
    what it says."""
    rows = np.asarray(rows, dtype=np.float32).reshape(len(rows), -1)
    if rows.shape[1] == 0:
        return np.zeros(len(rows), dtype=bool)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(rows).all(1) & (rows >= 0.0).all(1) & (rows <= 1.0 + 1e-6).all(1)
        if not multilabel:
            ok &= np.abs(rows.sum(1, dtype=np.float64) - 1.0) <= 1e-3
    return ok


def valid_row(row: "np.ndarray", multilabel: bool = False) -> bool:
    """:func:`valid_rows` of one row."""
    return bool(valid_rows(np.asarray(row)[None], multilabel)[0]) if np.asarray(row).size else False
