"""The one error type the library raises for user-facing problems."""


class TextAuditError(Exception):
    """A problem the user can fix (bad input, missing resource, corrupt file).

    The message is a single line that says what went wrong and what to do about it. The CLI turns
    it into ``error: <message>`` on stderr and exit code 2, in exactly one place
    (:mod:`textaudit.cli.app`).
    """

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class StopRun(TextAuditError):
    """A failure no later example can escape (a remote model's budget is spent, its endpoint is down
    or refuses the key): loops over examples that record a per-example error for a
    :class:`TextAuditError` (an attack's status "error") let this one through, so that the run stops
    with its results so far kept, and ``--resume`` continues once it is fixed."""


def user_code_error(who: str, e: BaseException) -> TextAuditError:
    """The one-line error for an exception raised by the user's code (a plug-in, a callable model):
    ``<who> raised <Type>: <first line of the message>`` (``sys.exit(n)`` included)."""
    if isinstance(e, SystemExit):
        return TextAuditError(f"{who} called sys.exit({e.code!r}); a model must return predictions, not exit")
    first = (str(e).strip().splitlines() or [""])[0][:200]
    return TextAuditError(f"{who} raised {type(e).__name__}" + (f": {first}" if first else ""))


def check_at_least(name: str, value: float | None, least: float) -> None:
    """One line when ``value`` (None: not given, allowed) is below ``least``: ``kappa (κ) must be at least 1 (got
    0)``; a constructor's guard of its numeric arguments."""
    if value is not None and not value >= least:
        raise TextAuditError(f"{name} must be at least {least} (got {value})")


def first_line(e: BaseException, width: int = 160) -> str:
    """The first line of an exception's message (its type's name when it has none), cut to ``width`` characters:
    what a one-line error quotes of a library's own."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:width]
