"""The command of an audit that has none of its own: every row of :data:`textaudit.audits.AUDITS` is a command of
``audit`` — its request's fields as options, run, its summary printed (``--json``: as one line) — whether it was
in the table when the command line loaded or :func:`textaudit.audits.register` added it later."""

from __future__ import annotations

import dataclasses
from typing import Any

from textaudit.audits import AUDITS, ON_REGISTER, AuditRow
from textaudit.cli.app import app
from textaudit.cli.options import JsonOpt, audit_command
from textaudit.cli.output import conclude, print_table

__all__ = ["add_command", "add_missing"]


def _commands() -> set[str]:
    """The names ``audit`` has: its commands' and its command groups'."""
    names = {c.name or c.callback.__name__ for c in app.registered_commands if c.callback is not None}
    return names | {g.name for g in app.registered_groups if g.name}


#: the commands this module gave, by audit name
_GIVEN: dict[str, Any] = {}


def add_command(row: AuditRow, *, removed: bool = False) -> None:
    """Give the audit of ``row`` a command named after it, unless ``audit`` has one of that name (``removed``: take
    the one it was given away again)."""
    if removed:
        if row.name in _GIVEN:
            app.registered_commands.remove(_GIVEN.pop(row.name))
        return
    if row.name in _commands():
        return
    fields = {f.name for f in dataclasses.fields(row.request)}

    def command(json_out: JsonOpt = False, request: Any = None) -> None:
        outcome = request.run()
        if conclude(outcome.summary, None, json_out, files=outcome.files):
            return
        print_table(f"{row.name}: {getattr(request, 'model', '') or ''}".rstrip(": "), ["metric", "value"],
                    [[k, v] for k, v in outcome.summary.items() if not isinstance(v, (dict, list))])

    command.__doc__ = (row.request.__doc__ or row.name).splitlines()[0]
    audit_command(row.request, store=False, model_options="model" in fields, name=row.name)(command)
    _GIVEN[row.name] = app.registered_commands[-1]


def add_missing() -> None:
    """A command for every row without one, and for every row registered later (:mod:`textaudit.cli.main` calls it
    once every command module has registered its own)."""
    for row in list(AUDITS):
        add_command(row)
    if add_command not in ON_REGISTER:
        ON_REGISTER.append(add_command)
