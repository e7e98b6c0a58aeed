"""What a command prints and hands on: a table, one JSON line, a notice, the margins of a non-inferiority test, and
the end every results-writing command shares (:func:`conclude`: where the results are, ``--track``, ``--json``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from textaudit.errors import TextAuditError
from textaudit.formats.margins import MARGIN_COLUMNS, margin_rows, margin_title, margin_verdicts
from textaudit.stats import format_ci  # noqa: F401 - the commands import it from here
from textaudit.track import keep_pending, log_run, run_of_summary

#: what the running command hands the tracker (:func:`finished`): its summary and files, or a whole run
_FINISHED: dict[str, Any] = {}


__all__ = ["finished", "say_default_model", "conclude", "finished_run", "emit_json", "TABLE_WIDTH", "LOG_WIDTH",
           "print_table", "wide_terminal", "notice", "print_margins", "print_sampled"]


def finished(summary: dict, files: Any = ()) -> dict:
    """Hand a tracked command's result to ``--track``: its summary (the ``--json`` object: its numbers become
    the run's metrics) and the results files or folders it wrote (``None`` left out). Returns ``summary``."""
    _FINISHED.update(summary=summary, files=[Path(f) for f in files if f is not None])
    return summary


def say_default_model(request: Any) -> None:
    """Name the model an audit uses when the user gave no ``--model`` (a default nobody chose is said, never silent)."""
    if getattr(request, "model_defaulted", False):
        notice(f"notice: no --model given: auditing {request.model}, the default (--model NAME chooses; audit train "
               f"--model {request.model} trains it ahead if it is not trained yet)")


def conclude(summary: dict, output: Path | None, json_out: bool, *, files: Any = None) -> bool:
    """The end every results-writing command shares: say where the results are (``output``), hand the summary and
    the ``files`` it wrote (default: ``output``) to ``--track`` (:func:`finished`) and, with ``--json``, print it;
    True when it was printed (the command is done)."""
    if output:
        notice(f"results: {output}")
    finished(summary, [output] if files is None else files)
    if json_out:
        emit_json(summary)
    return json_out


def finished_run(run: Any, track: str | None = None) -> None:
    """Hand ``--track`` a whole run (:class:`textaudit.track.TrackRun`: a suite's, with its nested runs; or a
    function that builds it, called only when the run is logged);
    ``track``: the tracker the command's own settings ask for (a suite's ``[suite] track``), logged even
    without ``--track``."""
    _FINISHED.update(run=run, track=track)


def _log_finished(command: str, options: dict, target: Any) -> None:
    """Log what the command handed :func:`finished` (a warning, never an error, when the tracker fails)."""
    if "run" in _FINISHED:
        run = _FINISHED["run"]() if callable(_FINISHED["run"]) else _FINISHED["run"]
    elif "summary" in _FINISHED:
        opts = {k: str(v) if isinstance(v, Path) else v for k, v in options.items() if k != "json_out"}
        run = run_of_summary(command, _FINISHED["summary"], opts, _FINISHED.get("files", []),
                             [options["api_key_env"]] if options.get("api_key_env") else [])
    else:
        return
    if run.start_ms is None and "started_ms" in _FINISHED:  # the audit's own time, not the logging's
        run.start_ms, run.end_ms = _FINISHED["started_ms"], _FINISHED.get("ended_ms")
    try:
        rid = log_run(run, target)
    except TextAuditError as e:
        kept = next((Path(a) for a in run.artifacts if Path(a).exists()), None)
        where = "rerun with --output FILE to keep what audit track can log later"
        if kept is not None:
            try:
                where = f"kept in {keep_pending(run, kept)}: audit track {kept} logs it"
            except (TextAuditError, OSError) as why:  # a file of the user's own under that name stays as it is
                where = f"not kept ({why}); audit track {kept} logs it from its records"
        notice(f"warning: not logged to MLflow ({e}); the audit's results are complete; {where}")
        return
    notice(f"tracked: MLflow run {rid}" + (f" (nested in {target.parent_run_id})" if target.parent_run_id else ""))


def emit_json(obj: Any) -> None:
    """Print ``obj`` as one JSON line on stdout (the last line of a ``--json`` command)."""
    typer.echo(json.dumps(obj, default=str))


#: the width a table is laid out in when stdout is not a terminal (a CI log, a pipe) ...
TABLE_WIDTH = 120


#: ... widened to the table's natural width up to this (no cell wraps), and beyond it when a column's longest word
#: needs it: a log line may be long, a word is never broken
LOG_WIDTH = 200


def print_table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """Print a rich table on stdout: at the terminal's width; else (a log) at :data:`TABLE_WIDTH`, widened to the
    table's natural width up to :data:`LOG_WIDTH` and to its minimum (each column as wide as its longest word)."""
    from rich.console import Console
    from rich.measure import Measurement
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*["" if v is None else str(v) for v in r])
    terminal = wide_terminal()
    console = Console(width=terminal or TABLE_WIDTH)
    if not terminal:  # (a terminal folds at its own width)
        need = Measurement.get(console, console.options.update_width(10_000), table)
        console = Console(width=max(TABLE_WIDTH, min(need.maximum, LOG_WIDTH), need.minimum))
    console.print(table)


def wide_terminal(columns: int = 0) -> int:
    """The width of the terminal stdout is, when it is one at least ``columns`` wide; else 0 (a log, a pipe)."""
    import shutil

    if not sys.stdout.isatty():
        return 0
    width = shutil.get_terminal_size((0, 0)).columns
    return width if width >= max(columns, 1) else 0


def notice(msg: str) -> None:
    """Print a one-line notice on stderr."""
    typer.echo(msg, err=True)


def print_margins(rate: str, tests: list[tuple[str, str, dict]]) -> None:
    """The non-inferiority table of ``rate`` (higher is worse) for ``(model, baseline, non_inferiority(...))``
    triples (:mod:`textaudit.formats.margins`: the report shows the same), then each verdict as a sentence."""
    print_table(margin_title(rate, tests), MARGIN_COLUMNS, margin_rows(tests))
    for line in margin_verdicts(tests):
        typer.echo(line)


def print_sampled(sampled: dict, what: str = "findings") -> None:
    """hit@k of findings on an endpoint that samples N answers per text: the mean flip rate and hit@k for
    k ≤ N with their intervals (:func:`textaudit.stats.hit_rates`)."""
    ks = list(sampled["hit_at_k"])
    rows = [["flip rate", sampled["flip_rate"], format_ci(sampled["flip_rate_ci95"])]]
    rows += [[f"hit@{k}", sampled["hit_at_k"][k], format_ci(sampled["hit_at_k_ci95"][k])] for k in ks]
    print_table(f"{sampled['findings']} {what} over {sampled['draws']} sampled answers each: hit@k = the chance that at "
                f"least one of k draws flips ({sampled['ci_method']})", ["", "mean", "95% CI"], rows)
