"""The ``audit`` app and what every command shares: one error handler, the common options, output.

Results go to stdout (a readable table, or with ``--json`` one JSON object as the last line);
progress and notices go to stderr. A :class:`~textaudit.errors.TextAuditError` raised anywhere
below becomes ``error: <one line>`` on stderr and exit code 2 — here, in :class:`AuditGroup`,
and nowhere else.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperCommand, TyperGroup

from textaudit.errors import TextAuditError

__all__ = ["AuditGroup", "AuditCommand", "app", "emit_json", "print_table", "notice", "check_resume", "example_ids", "ModelOpt",
           "DataOpt", "TextColumnOpt", "LabelColumnOpt", "LimitOpt", "OutputOpt", "ResumeOpt", "SeedOpt", "JsonOpt",
           "MODEL_HELP"]

#: what an interrupted command keeps, and how to continue: commands with a results file (--output)
INTERRUPT_HINT = "results written so far are kept; rerun with --resume to continue"
#: ... the same commands run without --output
INTERRUPT_NO_OUTPUT = "nothing was kept (no --output was given); pass --output FILE to keep results as they come"
RESUMABLE = ("attack", "bias", "learnability", "perturbscore")
INTERRUPT_HINTS = {
    "train": "the last finished epoch is kept; run the same command again to resume",
    "train-mlm": "the best checkpoint so far is kept at --out; run the same command again to resume",
}

MODEL_HELP = ("Zoo name (bow, cnn, lstm, transformer, minilm[-gender-swap], bow-ibp, cnn-ibp), hf:<dir-or-id>, "
              "checkpoint dir or file.py:obj.")
ModelOpt = Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)]
DataOpt = Annotated[str, typer.Option("--data", help="sst2[:train|dev|test] or a .csv/.tsv/.jsonl file.")]
TextColumnOpt = Annotated[Optional[str], typer.Option("--text-column", help="Column of a data file holding the text.")]
LabelColumnOpt = Annotated[Optional[str], typer.Option("--label-column", help="Column of a data file holding the label.")]
LimitOpt = Annotated[Optional[int], typer.Option("--limit", help="Use only the first N examples.")]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", help="JSONL results file, written as it goes.")]
ResumeOpt = Annotated[bool, typer.Option("--resume", help="Continue --output: skip the work already in it.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of every random choice.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object as the last line of stdout.")]


class _FlagsShowNoType:
    """``--help`` shows no ``<bool>`` type on flags: a flag takes no value."""

    def get_params(self, ctx):  # type: ignore[override]
        params = super().get_params(ctx)  # type: ignore[misc]
        for p in params:
            if getattr(p, "is_flag", False) and p.metavar is None:
                p.metavar = ""
        return params


class AuditGroup(_FlagsShowNoType, TyperGroup):
    """Click group that turns library errors into one line on stderr and exit code 2."""

    def invoke(self, ctx):  # type: ignore[override]
        argv = [*getattr(ctx, "_protected_args", []), *ctx.args]  # the subcommand and its arguments
        try:
            return super().invoke(ctx)
        except TextAuditError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            typer.echo(f"interrupted: {interrupt_hint(argv)}", err=True)
            raise typer.Exit(130) from None


class AuditCommand(_FlagsShowNoType, TyperCommand):
    """A command of ``audit`` (its flags show no type in ``--help``)."""


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
    threads: Optional[int] = typer.Option(None, "--threads", help=(
        "CPU threads torch uses (default: $TEXTAUDIT_THREADS, else one per core; on a busy machine fewer "
        "is faster, and a notice says so; benchmarks/threads.py measures it)."), show_default=False),
) -> None:
    """Audit NLP text classifiers beyond their test set."""
    if threads is not None:
        if threads < 1:
            raise TextAuditError(f"--threads must be at least 1 (got {threads})")
        os.environ["TEXTAUDIT_THREADS"] = str(threads)


def interrupt_hint(argv: list[str]) -> str:
    """What an interrupt of ``audit <argv>`` kept and how to continue."""
    command = argv[0] if argv else ""
    if command in INTERRUPT_HINTS:
        return INTERRUPT_HINTS[command]
    if command not in RESUMABLE:
        return "nothing to keep"
    has_output = any(a in ("--output", "-o") or a.startswith("--output=") for a in argv)
    return INTERRUPT_HINT if has_output else INTERRUPT_NO_OUTPUT


def check_resume(output: Path | None, resume: bool) -> None:
    """``--resume`` continues a results file, so it needs ``--output``."""
    if resume and output is None:
        raise TextAuditError("--resume needs --output (the JSONL file to continue)")


def example_ids(data: str, n: int) -> list[str]:
    """Ids of a dataset's examples: ``<data>:<i>`` (a local file by its name, so a moved file resumes)."""
    prefix = data if ":" in data or not Path(data).exists() else Path(data).name
    return [f"{prefix}:{i}" for i in range(n)]


def emit_json(obj: Any) -> None:
    """Print ``obj`` as one JSON line on stdout (the last line of a ``--json`` command)."""
    typer.echo(json.dumps(obj, default=str))


def print_table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """Print a rich table on stdout."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*["" if v is None else str(v) for v in r])
    Console(width=max(120, 0)).print(table)


def notice(msg: str) -> None:
    """Print a one-line notice on stderr."""
    typer.echo(msg, err=True)
