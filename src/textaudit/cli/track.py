"""``audit track RESULTS...``: log finished results files or folders as runs of an experiment tracker."""

from __future__ import annotations

from pathlib import Path

import typer

from textaudit.cli.app import AuditCommand, app
from textaudit.cli.options import JsonOpt, TrackExperimentOpt, TrackRunIdOpt
from textaudit.cli.output import emit_json, notice, print_table
from textaudit.errors import TextAuditError
from textaudit.track import Target, check_tracker, log_run, pending_path, run_of_files


@app.command(cls=AuditCommand)
def track(
    results: list[Path] = typer.Argument(..., help="Results files or folders (compare, harden, a suite's output_dir "
                                                   "audits) of finished audits."),
    to: str = typer.Option("mlflow", "--to", help=(
        "The tracker: mlflow (where: MLFLOW_TRACKING_URI, else MLflow's own default in the working folder: "
        "./mlflow.db, or ./mlruns before MLflow 3).")),
    experiment: TrackExperimentOpt = None,
    run_id: TrackRunIdOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Log finished audits as tracker runs: the content a live --track run would have logged (kept beside a file
    whose live logging failed), else the file's settings and its summary recomputed from its records."""
    check_tracker(to)
    runs = []
    for path in results:
        if not path.exists():
            raise TextAuditError(f"{path} does not exist; give results files or folders of finished audits")
        runs.append((path, run_of_files(path)))  # every file read before anything is logged
    logged = []
    for path, run in runs:
        rid = log_run(run, Target(experiment, run_id))
        kept = pending_path(path)
        if kept.is_file():
            kept.unlink()  # logged now: a second audit track logs it again from its records
        logged.append({"path": str(path), "run_id": rid, "name": run.name, "metrics": len(run.metrics)})
        notice(f"tracked: {path} as MLflow run {rid}")
    if json_out:
        emit_json({"runs": logged})
        return
    print_table(f"{len(logged)} run(s) logged", ["results", "run id", "run", "metrics"],
                [[r["path"], r["run_id"], r["name"], r["metrics"]] for r in logged])
