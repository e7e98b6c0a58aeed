"""``audit report``: one self-contained HTML (or Markdown) page from any mix of results files.

>>> from textaudit.report import write_report                     # doctest: +SKIP
>>> write_report(["runs/cnn.so-beam.jsonl", "runs/bias.jsonl"], "report.html")
"""

from textaudit.report.render import FORMATS, render_report, write_report

__all__ = ["render_report", "write_report", "FORMATS"]
