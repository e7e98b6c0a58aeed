"""Entry point of the ``audit`` console script and ``python -m textaudit``.

The app, its error handling and the shared options live in :mod:`textaudit.cli.app`; each command
lives in the module of its area (``attack``, ``bias``, ``models``, ...), imported here so that it
registers on the app. Command modules import their heavy libraries inside the command.
"""

from __future__ import annotations

import sys
from typing import Optional

from textaudit.cli import (  # noqa: F401
    attack,
    bias,
    cite,
    compare,
    doctor,
    harden,
    learnability,
    merge,
    models,
    neighbors,
    perturbscore,
    replay,
    report,
    run,
    serve,
    store,
    track,
    wordorder,
)
from textaudit.cli.app import app
from textaudit.cli.generic import add_missing
from textaudit.environment import tune_garbage_collector

__all__ = ["app", "main"]

add_missing()  # every audit of textaudit.audits.AUDITS a command: those without one of their own get the generic one


def main(argv: Optional[list[str]] = None) -> None:
    """Run the ``audit`` command line on ``argv`` (default: ``sys.argv[1:]``)."""
    tune_garbage_collector()
    app(args=argv, prog_name="audit")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
