"""The ``audit`` app: one error handler, the global options, the number checks every command's options pass, and
what an interrupted command says it kept. The options every command shares are :mod:`textaudit.cli.options`'s;
what a command prints, :mod:`textaudit.cli.output`'s.

Results go to stdout (a readable table, or with ``--json`` one JSON object as the last line);
progress and notices go to stderr. A :class:`~textaudit.errors.TextAuditError` raised anywhere
below becomes ``error: <one line>`` on stderr and exit code 2 — here, in :class:`AuditGroup`,
and nowhere else.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Callable, Iterator, NoReturn, Optional, Sequence

import typer
from typer.core import TyperCommand, TyperGroup
from typer.exceptions import TyperException

from textaudit.environment import check_environment
from textaudit.errors import TextAuditError
from textaudit.kinds import resumable_commands
from textaudit.models.zoo.names import split_robust
from textaudit.neighborhoods.score_cache import use_score_cache
from textaudit.secrets import RedactingStream, register_env, register_url
from textaudit.stats import format_ci  # noqa: F401 - the commands import it from here

__all__ = ["AuditGroup", "fail", "AuditCommand", "app", "interrupt_hint", "hoist_global_options", "redacted_streams",
           "INTERRUPT_HINT", "INTERRUPT_NO_OUTPUT", "format_ci"]


#: what an interrupted command keeps, and how to continue: commands with a results file (--output)
INTERRUPT_HINT = "results written so far are kept; rerun with --resume to continue"


#: ... the same commands run without --output
INTERRUPT_NO_OUTPUT = "nothing was kept (no --output was given); pass --output FILE to keep results as they come"


INTERRUPT_HINTS = {
    "train": "the last finished epoch is kept; run the same command again to resume",
    "train-mlm": "the best checkpoint so far is kept at --out; run the same command again to resume",
    "mlm-corpus": "the batches generated so far are kept; run the same command again to resume",
}


class _FlagsShowNoType:
    """``--help`` shows no ``<bool>`` type on flags (a flag takes no value), and a bounded number as
    ``<int>``/``<float>`` rather than ``<int range> [x>=1]`` (the bound is in the error message),
    which would squeeze the help column."""

    def get_params(self, ctx):  # type: ignore[override]
        params = super().get_params(ctx)  # type: ignore[misc]
        for p in params:
            if getattr(p, "is_flag", False) and p.metavar is None:
                p.metavar = ""
            elif p.metavar is None and (getattr(p, "min", None) is not None or getattr(p, "max", None) is not None):
                p.metavar = "<int>" if str(p.bare_type()) == "int" else "<float>"
        return params


def fail(message: str) -> NoReturn:
    """Print ``error: <message>`` (one line) on stderr and exit with code 2."""
    typer.echo("error: " + " ".join(str(message).split()), err=True)
    raise typer.Exit(2)


def usage_message(e: TyperException) -> str:
    """A typer usage error (unknown command or option, a value of the wrong type, a missing option)
    as one line, with where to read more."""
    ctx = getattr(e, "ctx", None)
    where = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
    return e.format_message().rstrip() + where


def _is_help(e: TyperException) -> bool:
    """``audit`` (or a group) with no arguments: typer shows the help, which is what the user wants."""
    return type(e).__name__ == "NoArgsIsHelpError"  # typer's own test; the class is not public


def os_error_message(e: OSError) -> str:
    """An ``OSError`` (an unwritable --output, a full disk, a directory where a file is expected) as one line."""
    what = e.strerror or type(e).__name__
    return f"{e.filename}: {what}" if e.filename else f"{what}: {e}"


@contextlib.contextmanager
def redacted_streams(argv: Sequence[str] = ()) -> Iterator[None]:
    """Run a command with its stdout and stderr passing :func:`textaudit.secrets.redact`: the secrets of the
    environment (API keys, tracker tokens) and of every URL among ``argv`` (a model spec's user:password@
    and credential query values) are known before the command reads any of them."""
    register_env()
    for a in argv:
        for part in str(a).split(","):  # --models a,b,c
            if "://" in part:
                register_url(part.strip())
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(out), RedactingStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


#: the group's own options (``audit --threads 1 attack ...``), also taken where users put options: after the command
GLOBAL_OPTIONS = {"--threads": True, "--trust-remote-code": False}  # name: takes a value


def hoist_global_options(args: list[str], own: Callable[[str], set[str]] = lambda command: set()) -> list[str]:
    """``audit attack --threads 1 ...`` as ``audit --threads 1 attack ...``: the group's options given after the
    command are moved before it, unless the command has an option of that name itself (``own(command)``:
    ``audit train-mlm --threads`` is its own)."""
    first, i = None, 0
    while i < len(args):  # the command: the first word that is no option's value
        a = args[i]
        if not a.startswith("-"):
            first = i
            break
        i += 2 if GLOBAL_OPTIONS.get(a) else 1
    if first is None:
        return args
    mine = own(args[first])
    head, tail, moved = args[:first], [], []
    i = first
    while i < len(args):
        a = args[i]
        name = a.split("=", 1)[0]
        if a == "--":  # what follows is the command's, whatever it looks like
            tail += args[i:]
            break
        if name in GLOBAL_OPTIONS and name not in mine and i > first:
            takes = GLOBAL_OPTIONS[name] and "=" not in a
            moved += args[i:i + 1 + takes]
            i += 1 + takes
            continue
        tail.append(a)
        i += 1
    return head + moved + tail


class AuditGroup(_FlagsShowNoType, TyperGroup):
    """The one place that turns every failure the user can fix into one line on stderr and exit 2:
    :class:`TextAuditError` from the library (bad input, a model that raised), typer/click usage
    errors (unknown command, ``--k abc``, a missing ``--model``) and ``OSError`` on our files."""

    def make_context(self, info_name, args, parent=None, **extra):  # type: ignore[override]
        if parent is None:
            args = hoist_global_options(list(args), self._own_options)
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except TyperException as e:  # the group's own options, e.g. --threads abc
            if _is_help(e):
                raise
            fail(usage_message(e))

    def _own_options(self, name: str) -> set[str]:
        """The option names of command ``name`` (none for an unknown one: its error comes later)."""
        cmd = self.commands.get(name)
        return {o for p in getattr(cmd, "params", []) for o in getattr(p, "opts", [])} if cmd is not None else set()

    def invoke(self, ctx):  # type: ignore[override]
        argv = [*getattr(ctx, "_protected_args", []), *ctx.args]  # the subcommand and its arguments
        # every line the command prints passes the one redaction; every command runs with the score cache injected
        # (TEXTAUDIT_SCORE_CACHE, else auto: a command with --score-cache enters its own inside)
        with redacted_streams(argv), use_score_cache(None):
            return self._invoke(ctx, argv)

    def _invoke(self, ctx, argv: list[str]):
        check_numbers(ctx)  # the group's own (--threads)
        try:
            return super().invoke(ctx)
        except TyperException as e:
            if _is_help(e):
                raise
            fail(usage_message(e))
        except TextAuditError as e:
            fail(str(e))
        except OSError as e:
            fail(os_error_message(e))
        except KeyboardInterrupt:
            typer.echo(f"interrupted: {interrupt_hint(argv)}", err=True)
            raise typer.Exit(130) from None


#: options where ±inf means something: δ = inf keeps the top κ candidates however far below the best logit
INFINITE_OK = frozenset({"delta"})


#: the largest sensible value of an option, where a larger one can only be a slip (10 ** 30 workers, a
#: thread pool of a million, k beyond any sentence's length); every other integer is at most INT_LIMIT
NUMBER_LIMITS: dict[str, float] = {
    "k": 100, "enumerate_k": 100, "kappa": 100_000, "beam": 100_000,
    "workers": 10_000, "threads": 4_096, "concurrency": 1_024, "retries": 100, "samples": 10_000,
    "prompts_per_request": 10_000, "epochs": 100_000, "rounds": 10_000, "seeds": 100_000,
    "gpus_per_worker": 1_024, "cpus_per_worker": 100_000, "lr": 100.0, "alpha": 1e6, "rank": 100_000,
    "max_new_tokens": 1_000_000, "synthetic_batches": 10_000_000,
}


#: integers beyond this are refused whatever the option (a seed, a size, a count of 10 ** 30)
INT_LIMIT = 2**31 - 1


#: options a command checks itself, NaN, ±inf and absurd sizes included, with a message that says more
#: (harden's ranges say what λ weighs and what is usual): :func:`check_numbers` leaves them to it
OWN_CHECKS: dict[str, frozenset[str]] = {
    "harden": frozenset({"train_sample", "epochs", "rounds", "neighbors", "found_weight", "pairs_per_sentence",
                         "eval_limit", "max_train", "consistency_weight", "lr"}),
    "store prune": frozenset({"max_gb"}),
}


def check_numbers(ctx: typer.Context) -> None:
    """Refuse, in one line, a number no option can mean: NaN; ±inf (but where :data:`INFINITE_OK`); a value
    beyond :data:`NUMBER_LIMITS` or :data:`INT_LIMIT`. Runs after parsing, before a command does anything;
    each option's own range (``--limit`` at least 1, ...) is checked by the parser before, and the options
    of :data:`OWN_CHECKS` by their command."""
    import math

    own = OWN_CHECKS.get(" ".join(ctx.command_path.split()[1:]), frozenset())
    for p in ctx.command.params:
        value = ctx.params.get(p.name or "")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not getattr(p, "opts", None) or p.name in own:
            continue
        name = p.opts[0]
        if isinstance(value, float) and math.isnan(value):
            fail(f"{name} nan is not a number; give a finite value")
        if isinstance(value, float) and math.isinf(value):
            if p.name in INFINITE_OK:
                continue
            fail(f"{name} {value} is not finite; give a number (or leave {name} out for its default)")
        cap = NUMBER_LIMITS.get(p.name or "", INT_LIMIT)
        if abs(value) > cap:
            shown = f"{value:.3g}" if isinstance(value, float) or abs(value) > 10**12 else str(value)
            fail(f"{name} {shown} is too large (at most {cap:g}); is it a slip?")


class AuditCommand(_FlagsShowNoType, TyperCommand):
    """A command of ``audit`` (its flags show no type in ``--help``; its numbers are checked by
    :func:`check_numbers` before it runs)."""

    def invoke(self, ctx):  # type: ignore[override]
        check_numbers(ctx)
        return super().invoke(ctx)


app = typer.Typer(
    cls=AuditGroup,
    name="audit",
    help="Audit NLP text classifiers beyond their test set.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _global_options(
    ctx: typer.Context,
    threads: Optional[int] = typer.Option(None, "--threads", help=(
        "CPU threads torch uses, before or after the command (default: $TEXTAUDIT_THREADS, else one per core; on a "
        "busy machine inference uses the free cores and a notice says so, training keeps the count: "
        "benchmarks/threads.py measures it)."), show_default=False),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help=(
        "Let a HuggingFace model you name (hf:<dir-or-id>, --mlm) run the Python code it ships (auto_map in "
        "its config.json). Off by default: such a model is refused with a one-line error.")),
) -> None:
    """Audit NLP text classifiers beyond their test set."""
    if ctx.invoked_subcommand != "doctor":  # doctor is how one finds out what is wrong with them
        check_environment()
    if trust_remote_code:
        os.environ["TEXTAUDIT_TRUST_REMOTE_CODE"] = "1"
    if threads is not None:
        if threads < 1:
            raise TextAuditError(f"--threads must be at least 1 (got {threads})")
        os.environ["TEXTAUDIT_THREADS"] = str(threads)


def _ibp_certification(argv: list[str]) -> bool:
    """``audit certify`` by IBP (one pass, nothing resumes): --method ibp, or a zoo *-ibp(-jia) model without --method."""
    if argv[:1] != ["certify"]:
        return False
    methods = [b for a, b in zip(argv, argv[1:]) if a == "--method"] + [a.split("=", 1)[1] for a in argv
                                                                        if a.startswith("--method=")]
    return methods[-1:] == ["ibp"] or (not methods and any(split_robust(a)[1] for a in argv))


def interrupt_hint(argv: list[str]) -> str:
    """What an interrupt of ``audit <argv>`` kept and how to continue."""
    command = argv[0] if argv else ""
    if command in INTERRUPT_HINTS:
        return INTERRUPT_HINTS[command]
    line = " ".join(argv[:2])
    if not any(line == c or line.startswith(c + " ") for c in resumable_commands()) or _ibp_certification(argv):
        return "nothing to keep"
    has_output = any(a in ("--output", "-o") or a.startswith("--output=") for a in argv)
    return INTERRUPT_HINT if has_output else INTERRUPT_NO_OUTPUT
