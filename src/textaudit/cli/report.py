"""``audit report``: one offline HTML (or Markdown) page from any mix of results files."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from textaudit.cli.app import AuditCommand, app
from textaudit.cli.output import notice
from textaudit.report import write_report


@app.command(cls=AuditCommand)
def report(
    results: List[Path] = typer.Argument(..., help="Results files (--output of attack, bias, wordorder, certify, "
                                         "learnability, perturbscore build) and audit compare directories."),
    out: Path = typer.Option(Path("report.html"), "--out", "-o", help="The report file."),
    fmt: Optional[str] = typer.Option(None, "--format", help="html or md (default: from --out's suffix)."),
    title: Optional[str] = typer.Option(None, "--title", help="The report's title."),
) -> None:
    """Write one self-contained report (no network needed to view it) of the given results."""
    path = write_report(results, out, fmt, title)
    notice(f"report: {path}")
