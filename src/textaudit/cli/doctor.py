"""``audit doctor``: where every resource resolves from, or why not."""

from __future__ import annotations

from typing import Optional

import typer

from textaudit import resources
from textaudit.cli.app import AuditCommand, app
from textaudit.cli.options import JsonOpt
from textaudit.cli.output import emit_json, print_table


def _human_size(n: Optional[int]) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(n)


@app.command(cls=AuditCommand)
def doctor(
    json_out: JsonOpt = False,
    network: bool = typer.Option(True, "--network/--no-network", help="Check whether public sources are reachable."),
) -> None:
    """Show where every resource resolves from (or why not), without downloading anything."""
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


