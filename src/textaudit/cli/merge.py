"""``audit merge``: join the results files of a run's shards and print the run's summary."""

from __future__ import annotations

from pathlib import Path

import typer

from textaudit.cli.app import AuditCommand, app
from textaudit.cli.options import JsonOpt
from textaudit.cli.output import emit_json, notice, print_table
from textaudit.fairness.bias import BIAS_COLUMNS, bias_rows, estimates_from_records
from textaudit.merge import merge_results, summarize_records


@app.command(cls=AuditCommand)
def merge(
    output: Path = typer.Argument(..., help="The merged JSONL results file (must not exist)."),
    shards: list[Path] = typer.Argument(..., help="The shards' --output files (--shard 0/N … N-1/N)."),
    json_out: JsonOpt = False,
) -> None:
    """Join the --output files of one run's shards (same settings, records de-duplicated) and summarize."""
    header, records = merge_results(output, shards)
    n = header["shards"][0].split("/")[1] if header["shards"] else None
    missing = [f"{i}/{n}" for i in range(int(n))] if n else []
    missing = [s for s in missing if s not in header["shards"]]
    if missing:
        notice(f"warning: shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing: the summary covers "
               f"{len(header['shards'])} of {n}")
    summary = summarize_records(header, records)
    notice(f"merged {len(records)} records into {output}")
    if json_out:
        emit_json(summary)
        return
    if header["command"] == "bias":
        results = estimates_from_records(records, header["config"]["k"], header["config"]["enumerate_k"])
        print_table(f"B_(p,k) of the merged run ({output})", BIAS_COLUMNS, bias_rows(results))
        return
    rows = [[k, "-" if v is None else v] for k, v in summary.items() if not isinstance(v, (list, dict))]
    print_table(f"{header['command']} (merged: {output})", ["metric", "value"], rows)

