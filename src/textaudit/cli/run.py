"""``audit run suite.toml``: declared audits with thresholds — the CI gate (exit 1 when one fails)."""

from __future__ import annotations

from pathlib import Path

import typer

from textaudit.cli.app import (
    AuditCommand,
    JsonOpt,
    app,
    emit_json,
    finished_run,
    notice,
    print_table,
    with_store_option,
    with_track_option,
)
from textaudit.suite import load_suite, run_suite
from textaudit.track import check_tracker, suite_run


@app.command("run", cls=AuditCommand)
@with_track_option
@with_store_option
def run_suite_command(
    suite_file: Path = typer.Argument(..., metavar="SUITE.toml", help="The suite: audits, options and thresholds."),
    json_out: JsonOpt = False,
) -> None:
    """Run a declared suite of audits (resumable), write its report, and exit 1 when a threshold fails."""
    suite = load_suite(suite_file)
    track = check_tracker(suite.get("suite", "track"))  # [suite] track = "mlflow": as --track mlflow
    _, checks, report, inputs = run_suite(suite)
    notice(f"report: {report}")
    finished_run(lambda: suite_run(suite.get("suite", "name") or suite.path.stem, checks,  # built only when tracked
                                   {"suite": str(suite.path), **suite.spec.get("suite", {})}, inputs, report), track)
    failed = [c for c in checks if not c.passed]
    if json_out:
        emit_json({"report": str(report), "passed": not failed,
                   "checks": [{"name": c.name, "value": c.value, "op": c.op, "limit": c.limit, "passed": c.passed}
                              for c in checks]})
    else:
        print_table(f"thresholds: {len(checks) - len(failed)} of {len(checks)} met", ["threshold", "value", "must be", "result"],
                    [c.row for c in checks])
    note = suite.get("suite", "note")
    if failed:
        notice(f"{len(failed)} threshold(s) failed: {', '.join(c.name for c in failed)}" + (f"\nnote: {note}" if note else ""))
        raise typer.Exit(1)
    if note:
        notice(f"note: {note}")
