"""The ``audit`` command line (typer); see :mod:`textaudit.cli.main`."""
