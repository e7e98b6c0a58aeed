"""``audit cite``: what to cite for a command (the software and the papers it implements), as BibTeX."""

from __future__ import annotations

from typing import Optional

import typer

from textaudit.citations import COMMANDS, PAPERS, bibtex, keys_for, software_bibtex
from textaudit.cli.app import AuditCommand, app
from textaudit.cli.options import JsonOpt
from textaudit.cli.output import emit_json
from textaudit.errors import TextAuditError


@app.command(cls=AuditCommand)
def cite(
    command: Optional[str] = typer.Argument(None, help=f"A command ({', '.join(sorted(COMMANDS))}); none: everything."),
    json_out: JsonOpt = False,
) -> None:
    """Print BibTeX for textaudit and the papers a command implements (redirect it into your .bib file)."""
    if command is not None and command not in COMMANDS:
        raise TextAuditError(f"audit cite knows no command '{command}': use one of {', '.join(sorted(COMMANDS))}, "
                             "or no argument for every paper")
    if json_out:
        emit_json({"software": software_bibtex(), "papers": {k: PAPERS[k] for k in keys_for(command)}})
        return
    typer.echo(bibtex(command), nl=False)
