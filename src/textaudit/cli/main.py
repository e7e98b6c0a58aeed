"""The ``audit`` command line: parse, call the library, print.

Results go to stdout (a readable table, or with ``--json`` one JSON object as the last line);
progress and notices go to stderr. A :class:`~textaudit.errors.TextAuditError` raised anywhere
below becomes ``error: <one line>`` on stderr and exit code 2 — here, in :class:`AuditGroup`,
and nowhere else.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Optional

import typer
from typer.core import TyperGroup

from textaudit.errors import TextAuditError


class AuditGroup(TyperGroup):
    """Click group that turns library errors into one line on stderr and exit code 2."""

    def invoke(self, ctx):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except TextAuditError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            typer.echo("interrupted: results written so far are kept; rerun with --resume to continue", err=True)
            raise typer.Exit(130) from None


app = typer.Typer(
    cls=AuditGroup,
    name="audit",
    help="Audit NLP text classifiers beyond their test set.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


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


def _human_size(n: Optional[int]) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(n)


@app.command()
def doctor(
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object as the last line."),
    network: bool = typer.Option(True, "--network/--no-network", help="Check whether public sources are reachable."),
) -> None:
    """Show where every resource resolves from (or why not), without downloading anything."""
    from textaudit import resources

    rows = resources.report(check_network=network)
    info = {"data_dir": str(resources.data_dir()) if resources.data_dir() else None,
            "cache_dir": str(resources.cache_dir()), "offline": resources.offline()}
    if json_out:
        emit_json({**info, "resources": rows})
        return
    print_table(
        f"textaudit resources (TEXTAUDIT_DATA={info['data_dir'] or 'unset'}, cache={info['cache_dir']})",
        ["resource", "resolved from", "size", "path / note"],
        [[r["name"], r["source"] or "not found", _human_size(r["size_bytes"]), r["path"] if r["found"] else r["note"]]
         for r in rows],
    )


@app.command()
def predict(
    texts: list[str] = typer.Argument(..., help="One or more texts to classify."),
    model: str = typer.Option(..., "--model", "-m", help="Zoo name, hf:<dir-or-id>, checkpoint dir or file.py:obj."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object as the last line."),
) -> None:
    """Print the model's class probabilities for each text."""
    from textaudit.models import load_classifier

    for t in texts:
        if not t.strip():
            raise TextAuditError("empty text; give at least one non-empty sentence")
    clf = load_classifier(model)
    probs = clf.predict_proba(texts)
    labels = clf.labels or [str(i) for i in range(clf.num_classes)]
    if json_out:
        emit_json({"model": clf.name, "labels": labels,
                   "predictions": [{"text": t, "probs": [round(float(x), 6) for x in p], "label": int(p.argmax())}
                                   for t, p in zip(texts, probs)]})
        return
    print_table(f"predictions of {clf.name}", ["text", "label"] + labels,
                [[t, labels[int(p.argmax())]] + [f"{x:.4f}" for x in p] for t, p in zip(texts, probs)])


def _register_subcommands() -> None:
    """Attach the commands that live in their own modules (kept light: they import lazily)."""
    from textaudit.cli import attack, bias, commands, learnability, neighbors, perturbscore, wordorder  # noqa: F401


def main(argv: Optional[list[str]] = None) -> None:
    """Entry point of the ``audit`` console script and ``python -m textaudit``."""
    _register_subcommands()
    app(args=argv, prog_name="audit")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
