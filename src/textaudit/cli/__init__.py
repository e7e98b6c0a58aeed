"""The ``audit`` command line (typer); see :mod:`textaudit.cli.app` and :mod:`textaudit.cli.main`.

Other libraries' progress bars are switched off here, before any command module imports them
(:func:`textaudit.progress.quiet_third_party_bars`): textaudit reports progress itself.
"""

from textaudit.progress import quiet_third_party_bars

quiet_third_party_bars()
