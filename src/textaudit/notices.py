"""The one channel for what textaudit tells a person while it works: notices, progress lines, time estimates.

The library never prints. Every line it has for a person — ``notice: masked LM in use: …``, a progress
line of a log, ``time: about 4m for 50 examples …`` — goes to :func:`say`, which hands it to the
current handler. By default the handler writes the line to stderr, which is what ``audit`` shows (the
command's stream redacts secrets, :class:`textaudit.secrets.RedactingStream`). A library user decides
otherwise::

    from textaudit import notices

    with notices.silenced():           # nothing shown (progress bars off too)
        run_attack(...)
    with notices.captured() as lines:  # kept, to log or to assert on
        run_attack(...)
    notices.set_handler(logging.getLogger("mine").info)   # routed for the rest of the process

A progress bar on a terminal is drawn by tqdm, which must own the terminal line; it is used only while
the default handler is in place (:func:`to_terminal`): under any other handler progress comes as
plain lines through :func:`say` like everything else.

The handler is process-wide, not per thread: the engine's worker threads and a run's timer report
through the same channel as the run that started them.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from textaudit.secrets import redact

__all__ = ["Handler", "say", "notice", "set_handler", "routed", "captured", "silenced", "without", "to_terminal"]

#: what receives each line (one line of text, no trailing newline)
Handler = Callable[[str], None]

_lock = threading.RLock()  # a handler that says something itself does not deadlock


def _to_stderr(line: str) -> None:
    # sys.stderr is looked up at each line: a command swaps in its redacting stream, pytest its capture
    print(line, file=sys.stderr, flush=True)


_handler: Handler = _to_stderr


def say(line: str) -> None:
    """Hand ``line``, without the secrets this process knows (:func:`textaudit.secrets.redact`), to the current
    handler (stderr unless a caller chose otherwise): a captured or logged line is as clean as a command's stderr."""
    handler = _handler
    with _lock:  # two threads' lines never interleave within one line
        handler(redact(line))


def notice(text: str) -> None:
    """``notice: <text>``: something the person should know that does not stop the work."""
    say(f"notice: {text}")


def set_handler(handler: Handler | None) -> Handler:
    """Route every line to ``handler`` from now on (None: back to stderr); returns the handler it replaces."""
    global _handler
    with _lock:
        previous, _handler = _handler, (handler or _to_stderr)
    return previous


@contextmanager
def routed(handler: Handler | None) -> Iterator[None]:
    """Within the block, lines go to ``handler``; the handler before it is restored after."""
    previous = set_handler(handler)
    try:
        yield
    finally:
        set_handler(previous)


@contextmanager
def captured() -> Iterator[list[str]]:
    """Within the block, lines are appended to the list it yields instead of being shown."""
    lines: list[str] = []
    with routed(lines.append):
        yield lines


@contextmanager
def silenced() -> Iterator[None]:
    """Within the block nothing is shown."""
    with routed(lambda line: None):
        yield


class _Without:
    """The current handler, less the lines ``drop`` matches."""

    def __init__(self, inner: Handler, drop: Callable[[str], bool]) -> None:
        self.inner, self.drop = inner, drop

    def __call__(self, line: str) -> None:
        if not self.drop(line):
            self.inner(line)


@contextmanager
def without(drop: Callable[[str], bool]) -> Iterator[None]:
    """Within the block, the lines ``drop`` matches are not shown (a repeat said once already); every other line goes
    where it went before, a progress bar on the terminal included."""
    with routed(_Without(_handler, drop)):
        yield


def to_terminal() -> bool:
    """Whether lines go to stderr as by default (only then may a progress bar draw itself there)."""
    handler = _handler
    while isinstance(handler, _Without):
        handler = handler.inner
    return handler is _to_stderr
