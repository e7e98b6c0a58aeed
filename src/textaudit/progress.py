"""Progress of long work, readable on a terminal and in a log.

On a terminal (stderr is a TTY that reports its width) :func:`progress` is a tqdm bar. Anywhere else (CI, ``| tee``,
``nohup``, a notebook's captured stderr) a bar would be silent or unreadable, so it prints one plain
line every ``$TEXTAUDIT_PROGRESS_SECONDS`` seconds (default 30) and one when the work ends::

    so-beam k=6: 12/50 ex (24%), 0.85 ex/s, elapsed 14s, ETA 45s, success=12/12

The first line comes when the work starts (``0/50 ex``), the next within :data:`FIRST_LINE_SECONDS`
even when no unit has finished yet (one unit of a bias run can take minutes), then every interval. An
ETA is given once one unit is done; where the caller knows that units differ in cost (a long
sentence's neighbourhood is far larger than a short one's), it is ``elapsed × remaining cost / done
cost`` (:meth:`LogProgress.weigh`), not a count's, so it does not jump when a cheap unit follows a
costly one.

Every long loop of textaudit (attacks, bias, learnability, PerturbScore, word-order sweeps, zoo and
masked-LM training) reports through here. The ``audit`` command silences other libraries' bars
(:func:`quiet_third_party_bars`: transformers' weight loading, GGUF de-quantising, datasets), which
would otherwise be the only output in a log.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, Sequence

import textaudit.notices as notices
from textaudit.device import notice_if_busy

__all__ = ["progress", "LogProgress", "log_interval", "quiet_third_party_bars", "eta_text", "duration",
           "FIRST_LINE_SECONDS", "follow", "WorkClock", "ProjectedClock"]

#: the longest a plain-lines log waits for its second line (the first comes when the work starts)
FIRST_LINE_SECONDS = 10.0

#: environment switches of the progress bars of tqdm itself, huggingface_hub/transformers and datasets
_THIRD_PARTY_BARS_OFF = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}


def quiet_third_party_bars() -> None:
    """Turn off other libraries' progress bars for this process (a variable already set is kept).
    Effective for libraries imported afterwards (tqdm and huggingface_hub read these variables at
    import); the ``audit`` command calls it first thing. textaudit's own reporter passes
    ``disable=False`` explicitly, so tqdm's switch does not reach it. transformers 5's notice that a
    model "was not sharded" (tensor parallelism, which textaudit never uses), printed at every
    load of a BERT-family model, is silenced too."""
    import logging

    for key, value in _THIRD_PARTY_BARS_OFF.items():
        os.environ.setdefault(key, value)
    logging.getLogger("transformers.distributed.tensor_parallel").setLevel(logging.ERROR)


def log_interval() -> float:
    """Seconds between two progress lines when stderr is not a terminal (``$TEXTAUDIT_PROGRESS_SECONDS``)."""
    try:
        return max(0.0, float(os.environ.get("TEXTAUDIT_PROGRESS_SECONDS", "30")))
    except ValueError:
        return 30.0


def duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def eta_text(elapsed: float, done: float, remaining: float) -> str | None:
    """``ETA 1m05s`` for work of which ``done`` (units, or their cost) took ``elapsed`` seconds and
    ``remaining`` is left; None before anything is done or after everything is."""
    if done <= 0 or remaining <= 0 or elapsed <= 0:
        return None
    return f"ETA {duration(elapsed * remaining / done)}"


class LogProgress:
    """tqdm's ``update`` / ``set_postfix`` / ``close`` as periodic plain lines on stderr: one when the
    work starts, one within :data:`FIRST_LINE_SECONDS` (from a timer, so a long first unit is not
    silent), then one every ``interval`` seconds and one at the end."""

    def __init__(self, *, total: int | None, desc: str, unit: str, initial: int = 0, interval: float | None = None):
        self.total, self.desc, self.unit = total, desc, unit
        self.n = self.start_n = initial
        self.interval = log_interval() if interval is None else interval
        self.t0 = self.last = time.monotonic()
        self.postfix: dict[str, Any] = {}
        self.closed = False
        self.cost: tuple[float, float] | None = None  # (done, remaining) cost, from weigh()
        #: (fields, seconds left) read at each line, from follow(): work inside the units
        self.live: tuple[Callable[[], dict[str, Any]], Callable[[], float | None]] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        if total != 0:
            self._emit()  # the work has started: said at once
        self._timer: threading.Thread | None = None
        if total != 0 and self.interval > 0:
            self._timer = threading.Thread(target=self._heartbeat, daemon=True, name="textaudit-progress")
            self._timer.start()

    def _heartbeat(self) -> None:
        """A line when nothing finished for a while: first within FIRST_LINE_SECONDS, then every interval."""
        wait = min(FIRST_LINE_SECONDS, self.interval)
        while not self._stop.wait(max(0.05, self.last + wait - time.monotonic())):
            if time.monotonic() - self.last >= wait - 1e-3:
                self._emit()
                wait = self.interval

    def weigh(self, done: float, remaining: float) -> None:
        """The cost of the units done and of those left: the ETA is then ``elapsed × remaining / done``."""
        self.cost = (done, remaining)

    def line(self) -> str:
        elapsed = time.monotonic() - self.t0
        done = self.n - self.start_n
        rate = done / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.n}/{self.total} {self.unit}" if self.total else f"{self.n} {self.unit}"]
        if self.total:
            parts[0] += f" ({100 * self.n / self.total:.0f}%)"
        parts.append(f"{rate:.3g} {self.unit}/s" if rate else f"0 {self.unit}/s")
        parts.append(f"elapsed {duration(elapsed)}")
        fields = dict(self.postfix)
        if self.live is not None:
            live_fields, left = self.live
            fields.update(live_fields())
            seconds = left()
            if self.total and self.n < self.total and seconds is not None and elapsed > 0:
                parts.append(f"ETA {duration(seconds)}")
        elif self.total and done and self.n < self.total:
            eta = eta_text(elapsed, *self.cost) if self.cost else eta_text(elapsed, done, self.total - self.n)
            if eta:
                parts.append(eta)
        text = f"{self.desc}: " + ", ".join(parts)
        if fields:
            text += ", " + ", ".join(f"{k}={v}" for k, v in fields.items())
        return text

    def _emit(self) -> None:
        with self._lock:
            notices.say(self.line())
            self.last = time.monotonic()

    def update(self, n: int = 1) -> None:
        self.n += n
        if time.monotonic() - self.last >= self.interval:
            self._emit()

    def set_postfix(self, refresh: bool = True, **fields: Any) -> None:
        self.postfix = {k: v for k, v in fields.items() if v is not None}

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._stop.set()
            if self.n > self.start_n or self.total == 0:
                self._emit()


def progress(*, total: int | None, desc: str, unit: str, initial: int = 0, enabled: bool = True,
             training: bool = False):
    """A progress reporter for ``total`` steps: a tqdm bar on a terminal, :class:`LogProgress`
    lines otherwise, nothing when not ``enabled``. Starting one is when a busy machine is noticed
    (:func:`~textaudit.device.notice_if_busy`: fewer threads for inference, only advice for ``training``)."""
    # tqdm reads its TQDM_* defaults when first imported: importing it here, not at the top, lets
    # quiet_third_party_bars() run first
    from tqdm.auto import tqdm

    if not enabled:
        return tqdm(total=total, initial=initial, disable=True)
    notice_if_busy(apply=not training)
    if notices.to_terminal() and sys.stderr.isatty() and _columns() > 0:
        return tqdm(total=total, initial=initial, desc=desc, unit=unit, file=sys.stderr, disable=False)
    return LogProgress(total=total, desc=desc, unit=unit, initial=initial)


def weigh(bar: Any, done: float, remaining: float, fields: dict[str, Any]) -> None:
    """Give ``bar`` (a tqdm bar or :class:`LogProgress`) a cost-weighted ETA beside ``fields``: a plain
    log computes it per line; a tqdm bar shows it among its fields, in place of its own count-based
    estimate (its format no longer has ``<remaining``)."""
    if isinstance(bar, LogProgress):
        bar.weigh(done, remaining)
        bar.set_postfix(refresh=False, **fields)
        return
    if getattr(bar, "disable", False):
        return
    bar.bar_format = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]"
    eta = eta_text(bar.format_dict["elapsed"], done, remaining)
    bar.set_postfix(refresh=False, **({"ETA": eta[4:]} if eta else {}), **fields)


def follow(bar: Any, fields: Callable[[], dict[str, Any]], left: Callable[[], float | None],
           shown: Callable[[], dict[str, Any]] | None = None, interval: float = 1.0) -> Callable[[], None]:
    """Show the work done *inside* the units on ``bar`` while they run: ``fields()`` (e.g. texts and
    contexts asked so far) and an ETA of ``left()`` seconds, read at each plain line, or every
    ``interval`` seconds on a tqdm bar (beside ``shown()``, the caller's own fields) — so the line moves
    while many units are in flight and none has finished. Returns the function that stops it."""
    if isinstance(bar, LogProgress):
        bar.live = (fields, left)
        return lambda: None
    if getattr(bar, "disable", False):
        return lambda: None
    stop = threading.Event()
    bar.bar_format = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]"

    def refresh() -> None:
        while not stop.wait(interval):
            try:
                seconds = left()
                bar.set_postfix(refresh=True, **({"ETA": duration(seconds)} if seconds is not None else {}),
                                **(shown() if shown else {}), **fields())
            except Exception:  # noqa: BLE001 — a progress line never stops the work
                return

    threading.Thread(target=refresh, daemon=True, name="textaudit-progress-follow").start()
    return stop.set


class WorkClock:
    """Work inside the units, for :func:`follow`: ``asked()`` counts what was done so far (e.g. texts a
    classifier was asked), ``expected()`` the whole run's (re-read at each line, so a caller refines it
    as units finish). The ETA is the elapsed time × what is left / what was done."""

    def __init__(self, asked: Callable[[], float], expected: Callable[[], float], unit: str = "asked",
                 more: dict[str, Callable[[], float]] | None = None):
        self.asked, self.expected, self.unit = asked, expected, unit
        self.more = {name: (fn, fn()) for name, fn in (more or {}).items()}  # other work shown (e.g. contexts)
        self.start = asked()
        self.t0 = time.monotonic()

    def done(self) -> float:
        return self.asked() - self.start

    def fields(self) -> dict[str, Any]:
        out = {self.unit: f"{int(self.done()):,}"}
        for name, (fn, start) in self.more.items():
            if fn() - start:
                out[name] = f"{int(fn() - start):,}"
        return out

    def remaining(self) -> float | None:
        done = self.done()
        if done <= 0:
            return None
        return max(self.expected() - done, 0.0) * (time.monotonic() - self.t0) / done


class ProjectedClock:
    """The ETA of work projected in classifier texts and masked-LM contexts (``expected``, set by the caller once it
    can project them): what is not asked yet, each at the seconds per text and per context measured in this run,
    times the host's share of the wall (``elapsed / (classifier + masked-LM seconds)``) — it moves as the work inside
    units in flight is asked, where a count of finished units says nothing for minutes.

    ``counters()`` returns (texts asked, contexts asked, classifier seconds, masked-LM seconds) so far; ``levels()``,
    the masked-LM contexts of the neighbourhood levels begun (and asked): a level's are known when it begins, so the
    contexts expected are at least those — the projection from the first units counts the units not begun."""

    def __init__(self, counters: Callable[[], tuple[float, float, float, float]],
                 levels: Callable[[], Sequence[float]] | None = None):
        self.counters = counters
        self.levels = levels
        self.levels_start = levels()[0] if levels is not None else 0.0
        self.start = counters()
        self.t0 = time.monotonic()
        self.expected: tuple[float, float] | None = None  # (texts, contexts) of the whole run, once projected

    def asked(self) -> tuple[float, float, float, float]:
        """(texts, contexts, classifier seconds, masked-LM seconds) since this clock started."""
        return tuple(a - b for a, b in zip(self.counters(), self.start))  # type: ignore[return-value]

    def left(self) -> float | None:
        """Seconds for the projected work not asked yet (None before a projection or any work, and once more was asked
        than projected: the work left is unknown then, and "ETA 0s" would be wrong)."""
        if self.expected is None:
            return None
        texts, contexts, clf_s, mlm_s = self.asked()
        if texts <= 0 and contexts <= 0:
            return None
        s_q = clf_s / texts if texts > 0 else 0.0
        s_m = mlm_s / contexts if contexts > 0 else 0.0
        elapsed = time.monotonic() - self.t0
        device = clf_s + mlm_s
        host = elapsed / device if device > 1.0 and elapsed > device else 1.0
        planned = self.levels()[0] - self.levels_start if self.levels is not None else 0.0
        expected_contexts = max(self.expected[1], planned)
        left = (max(self.expected[0] - texts, 0.0) * s_q + max(expected_contexts - contexts, 0.0) * s_m) * host
        return left if left > 0 else None

    def remaining(self) -> float | None:
        return self.left()


def _columns() -> int:
    """The width of the terminal stderr writes to; 0 when it reports none (a serial console, some CI
    and container terminals), where a tqdm bar would draw nothing: plain lines are used there."""
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        return 0
