"""The on-disk formats every command writes and every reader reads, checked in one place.

This is the bottom of the package's layers (see ``docs/architecture.md``): it knows the formats,
never the commands that write them, so any module may import it.

- :mod:`textaudit.formats.jsonl`: results files (JSON Lines, a header record first, appended and
  flushed per record, resumable, locked while written);
- :mod:`textaudit.formats.compare`: an ``audit compare`` folder's summary (``compare.json``) and the
  names of its cells;
- :mod:`textaudit.formats.harden`: an ``audit harden`` folder's summary (``harden.json``) and the
  tables read from it.

Users read results with :func:`textaudit.results.load`, which dispatches on what it finds.
"""
