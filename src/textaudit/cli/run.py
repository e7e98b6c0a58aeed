"""``audit run suite.toml``: declared audits with thresholds — the CI gate (exit 1 when one fails)."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from textaudit.cli.app import AuditCommand, app
from textaudit.cli.options import JsonOpt, with_store_option, with_track_option
from textaudit.cli.output import emit_json, finished_run, notice, print_table
from textaudit.files import check_replaceable
from textaudit.formats.junit import write_junit
from textaudit.suite import load_suite, run_suite
from textaudit.track import check_tracker, suite_run


@app.command("run", cls=AuditCommand)
@with_track_option
@with_store_option
def run_suite_command(
    suite_file: Path = typer.Argument(..., metavar="SUITE.toml", help="The suite: audits, options and thresholds."),
    json_out: JsonOpt = False,
    junit: Path | None = typer.Option(None, "--junit", metavar="FILE", help=(
        "Also write the gates as JUnit XML to FILE (what GitHub, GitLab and Jenkins show as test results): each "
        "threshold a test case with its value, threshold and the results file it reads; a failed one a failure.")),
) -> None:
    """Run a declared suite of audits (resumable), write its report, and exit 1 when a threshold fails."""
    suite = load_suite(suite_file)
    if junit is not None:
        check_replaceable(junit)  # a file textaudit did not make is refused now, not after the audits ran
    track = check_tracker(suite.get("suite", "track"))  # [suite] track = "mlflow": as --track mlflow
    started = time.perf_counter()
    _, checks, report, inputs = run_suite(suite)
    notice(f"report: {report}")
    if junit is not None:
        write_junit(junit, suite.get("suite", "name") or suite.path.stem, checks,
                    seconds=time.perf_counter() - started, report=str(report))
        notice(f"JUnit: {junit}")
    finished_run(lambda: suite_run(suite.get("suite", "name") or suite.path.stem, checks,  # built only when tracked
                                   {"suite": str(suite.path), **suite.spec.get("suite", {})}, inputs, report), track)
    failed = [c for c in checks if not c.passed]
    if json_out:
        emit_json({"report": str(report), "passed": not failed, "checks": [c.to_dict() for c in checks]})
    else:
        print_table(f"thresholds: {len(checks) - len(failed)} of {len(checks)} met", ["threshold", "value", "must be", "result"],
                    [c.row for c in checks])
    for c in checks:
        if c.note:
            notice(f"warning: {c.name}: {c.note}")
    note = suite.get("suite", "note")
    if failed:
        notice(f"{len(failed)} threshold(s) failed: {', '.join(c.name for c in failed)}" + (f"\nnote: {note}" if note else ""))
        raise typer.Exit(1)
    if note:
        notice(f"note: {note}")
