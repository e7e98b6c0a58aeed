"""``audit harden`` stated once: :class:`~textaudit.harden.run.HardenRequest`, next to the run it describes.

The command line, a suite's ``[harden]`` section and a notebook build the same request: every option with its
default, range and help; :meth:`~textaudit.harden.run.HardenRequest.check` raises every one-line error before
anything loads, :meth:`~textaudit.harden.run.HardenRequest.record` is what a run keeps in ``settings.json`` (what a
resume must repeat) and :meth:`~textaudit.harden.run.HardenRequest.run` mines, trains and audits before/after into
``out``. It lives in :mod:`textaudit.harden.run` because the run reads it (one declaration, no second settings class);
this module is where the other audits' requests are found.
"""

from __future__ import annotations

from textaudit.harden.run import HardenRequest

__all__ = ["HardenRequest"]
