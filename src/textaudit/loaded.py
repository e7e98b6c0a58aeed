"""Results files read back for analysis: ``textaudit.results.load(path)``.

This module sits above every audit (it recomputes their summaries) and reads the files through the
format readers of :mod:`textaudit.formats`; nothing in the package imports it but the facade
:mod:`textaudit.results`.

``load`` takes any results file a command wrote (``audit attack``, ``bias``, ``learnability``, …),
an ``audit compare`` folder or an ``audit harden`` folder and returns a :class:`Results`: its
``command``, the header's ``config``, the ``records``, and

- ``.to_pandas()``: one row per record (a compare folder: every cell's records, with ``model`` and
  ``method`` columns; a harden folder: every evaluation attack's records on the held-out examples,
  with ``role`` — ``before`` or ``after`` — and ``attack`` columns); the header's settings are in
  ``df.attrs["config"]`` (and ``"command"``);
- ``.summary()``: what the command's own summary says, recomputed from the records (an attack's
  success rate with its Wilson interval, ``mean_l0``, …; B_{p,k} with its interval per model, pair
  and k for bias; the matrix and paired tests of a compare folder; learnability's per-(model,
  perturbation) table and Spearman correlations; certify's accuracies per model); other commands
  (word order): the count. The same as ``audit merge`` prints (:func:`textaudit.kinds.summarize_records`).
  A harden folder: its ``harden.json`` (clean accuracy is not in any results file, so it is read, not
  recomputed). The folder's other files (``found*.jsonl``, ``bias.jsonl``) are results files ``load`` reads;
- in Jupyter, the object shows itself as a small table (``_repr_html_``, every value escaped).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path

from textaudit.attacks.compare import compare_cells
from textaudit.errors import TextAuditError
from textaudit.formats.compare import SUMMARY as COMPARE_SUMMARY
from textaudit.formats.compare import cell_path, folder_file, read_compare
from textaudit.formats.harden import SUMMARY as HARDEN_SUMMARY
from textaudit.formats.harden import read_harden_folder
from textaudit.formats.jsonl import read_header, read_jsonl
from textaudit.kinds import BY_ID, check_records, kind_of

__all__ = ["Results", "load"]


@dataclass
class Results:
    """A results file (or an ``audit compare`` folder) read back; see the module docstring."""

    path: Path
    command: str | None
    config: dict
    records: list[dict]
    #: a compare folder: its cells, ``{(model, method): Results}``; a harden folder: ``{(role, attack): Results}``
    cells: dict[tuple[str, str], "Results"] = field(default_factory=dict)
    #: the two columns the cells' keys become in :meth:`to_pandas`
    cell_columns: tuple[str, str] = ("model", "method")
    #: a summary the command wrote that the records cannot give back (harden's ``harden.json``)
    stored_summary: dict | None = None

    def __len__(self) -> int:
        return len(self.records)

    def to_pandas(self):
        """One row per record; the header's settings in ``df.attrs`` (``config``, ``command``)."""
        import pandas as pd

        if self.cells:
            first, second = self.cell_columns
            frames = [c.to_pandas().assign(**{first: m, second: a}) for (m, a), c in self.cells.items()]
            df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        else:
            df = pd.DataFrame.from_records(self.records)
        df.attrs.update(command=self.command, config=dict(self.config), path=str(self.path))
        return df

    def summary(self) -> dict:
        """The command's summary, recomputed from the records (see the module docstring)."""
        if self.stored_summary is not None:
            return dict(self.stored_summary)
        if self.cells:
            return compare_cells({key: c.records for key, c in self.cells.items()})
        try:
            kind = kind_of({"command": self.command, "config": self.config})
        except TextAuditError:  # a header of a command that keeps no summary: the count
            return {"records": len(self.records)}
        if kind.summarize is None:
            return {"records": len(self.records)}
        try:
            return kind.summarize(self.config, self.records)
        except TextAuditError as e:
            raise TextAuditError(f"{self.path}: {e}") from None

    def _repr_html_(self) -> str:
        what = self.command if self.cells else (self.command or "results")
        rows = [("file", str(self.path)), ("records", len(self.records) if not self.cells else
                                            sum(len(c) for c in self.cells.values()))]
        rows += [(k, v) for k, v in self.config.items() if k in ("model", "method", "k", "data", "seed", "model_scores")]
        try:
            summary = self.summary()
        except TextAuditError:
            summary = {}
        if self.command == "harden":  # the headline: both sides of the first evaluation attack, and the hardened model
            rows += [("hardened model", summary.get("model")), ("before", summary.get("before")),
                     ("after", summary.get("after")), ("mcnemar_p", summary.get("mcnemar_p"))]
        else:
            rows += [(k, v) for k, v in summary.items() if not isinstance(v, (dict, list)) or k.endswith("ci95")]
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(str(k))}</th><td>{html.escape(json.dumps(v))}</td></tr>"
                       for k, v in rows)
        return f"<table><caption>textaudit {html.escape(what)}</caption>{body}</table>"

    def __repr__(self) -> str:
        n = sum(len(c) for c in self.cells.values()) if self.cells else len(self.records)
        return f"Results({str(self.path)!r}, command={self.command!r}, records={n})"


def load(path: str | Path) -> Results:
    """Read a results file, an ``audit compare`` folder or an ``audit harden`` folder (see the module
    docstring); a path that is none of them is a one-line error."""
    p = Path(path).expanduser()
    if p.name == HARDEN_SUMMARY and p.is_file():
        p = p.parent
    if p.is_dir() and (p / HARDEN_SUMMARY).is_file():
        return _load_harden(p)
    if p.is_dir():
        if not (p / COMPARE_SUMMARY).is_file():
            raise TextAuditError(f"{p} is a folder without {COMPARE_SUMMARY} or {HARDEN_SUMMARY}: give a results file, an "
                                 "audit compare folder or an audit harden folder")
        summary = read_compare(p / COMPARE_SUMMARY)
        keys = [(c["model"], c["method"]) for c in summary["cells"]]
        cells = {key: load(folder_file(p, cell_path(p, *key).name, f"the cell {key[0]} × {key[1]}"))
                 for key in keys}  # in the matrix's order, as audit compare named them
        config = {k: v for k, v in summary.items() if k in ("data", "mlm", "seed")}
        return Results(p, "compare", config, [], cells)
    if not p.is_file():
        raise TextAuditError(f"results file {p} does not exist")
    header = read_header(p)
    if header is None:
        raise TextAuditError(f"{p} has no textaudit header line: is it a results file written by audit?")
    records = read_jsonl(p)
    check_records(p, header, records)
    return Results(p, header.get("command"), dict(header["config"]), records)


def _load_harden(folder: Path) -> Results:
    """An ``audit harden`` folder: its summary (checked as ``audit report`` checks it) and the
    before/after results file of each evaluation attack."""
    content, files = read_harden_folder(folder, BY_ID["attack"].records)  # checked there: every file the folder's own and agreeing
    cells = {}
    for a in content["attacks"]:
        label = a["method"] + ("" if a.get("k") is None else f" k={a['k']}")
        for role, name in zip(("before", "after"), a["files"]):
            header, records = files[name]
            cells[(role, label)] = Results(folder / name, header.get("command"), dict(header["config"]), records)
    summary = {k: v for k, v in content.items() if k != "header"}
    return Results(folder, "harden", dict(content["header"].get("config", {})), [], cells,
                   cell_columns=("role", "attack"), stored_summary=summary)
