"""Results files read back for analysis: ``textaudit.results.load(path)``.

``load`` takes any results file a command wrote (``audit attack``, ``bias``, ``learnability``, …)
or an ``audit compare`` folder and returns a :class:`Results`: its ``command``, the header's
``config``, the ``records``, and

- ``.to_pandas()``: one row per record (a compare folder: every cell's records, with ``model`` and
  ``method`` columns); the header's settings are in ``df.attrs["config"]`` (and ``"command"``);
- ``.summary()``: what the command's own summary says, recomputed from the records (an attack's
  success rate with its Wilson interval, ``mean_l0``, …; B_{p,k} with its interval per model, pair
  and k for bias; the matrix and paired tests of a compare folder; learnability's per-(model,
  perturbation) table and Spearman correlations; certify's accuracies per model); other commands
  (word order): the count. The same as ``audit merge`` prints (:func:`textaudit.merge.summarize_records`);
- in Jupyter, the object shows itself as a small table (``_repr_html_``, every value escaped).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path

from textaudit.errors import TextAuditError

__all__ = ["Results", "load"]


@dataclass
class Results:
    """A results file (or an ``audit compare`` folder) read back; see the module docstring."""

    path: Path
    command: str | None
    config: dict
    records: list[dict]
    #: a compare folder: its cells, ``{(model, method): Results}``
    cells: dict[tuple[str, str], "Results"] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.records)

    def to_pandas(self):
        """One row per record; the header's settings in ``df.attrs`` (``config``, ``command``)."""
        import pandas as pd

        if self.cells:
            frames = [c.to_pandas().assign(model=m, method=a) for (m, a), c in self.cells.items()]
            df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        else:
            df = pd.DataFrame.from_records(self.records)
        df.attrs.update(command=self.command, config=dict(self.config), path=str(self.path))
        return df

    def summary(self) -> dict:
        """The command's summary, recomputed from the records (see the module docstring)."""
        if self.cells:
            from textaudit.attacks.compare import compare_cells

            return compare_cells({key: c.records for key, c in self.cells.items()})
        cfg = self.config
        if self.command == "bias" and ("k" not in cfg or "enumerate_k" not in cfg):
            raise TextAuditError(f"{self.path}: its header has no k or enumerate_k; is it a bias results file?")
        if self.command in ("attack", "bias", "learnability", "perturbscore build"):
            from textaudit.merge import summarize_records

            return summarize_records({"command": self.command, "config": cfg}, self.records)
        if self.command == "certify":
            return {r["id"]: {k: v for k, v in r.items() if k != "id"} for r in self.records}
        return {"records": len(self.records)}

    def _repr_html_(self) -> str:
        what = "compare" if self.cells else (self.command or "results")
        rows = [("file", str(self.path)), ("records", len(self.records) if not self.cells else
                                            sum(len(c) for c in self.cells.values()))]
        rows += [(k, v) for k, v in self.config.items() if k in ("model", "method", "k", "data", "seed", "model_scores")]
        try:
            summary = self.summary()
        except TextAuditError:
            summary = {}
        rows += [(k, v) for k, v in summary.items() if not isinstance(v, (dict, list)) or k.endswith("ci95")]
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(str(k))}</th><td>{html.escape(json.dumps(v))}</td></tr>"
                       for k, v in rows)
        return f"<table><caption>textaudit {html.escape(what)}</caption>{body}</table>"

    def __repr__(self) -> str:
        n = sum(len(c) for c in self.cells.values()) if self.cells else len(self.records)
        return f"Results({str(self.path)!r}, command={self.command!r}, records={n})"


def load(path: str | Path) -> Results:
    """Read a results file or an ``audit compare`` folder (see the module docstring); a path that is
    neither is a one-line error."""
    from textaudit.results import check_results, read_header, read_jsonl

    p = Path(path).expanduser()
    if p.is_dir():
        from textaudit.attacks.compare import SUMMARY

        if not (p / SUMMARY).is_file():
            raise TextAuditError(f"{p} is a folder without {SUMMARY}: give a results file or an audit compare folder")
        from textaudit.attacks.compare import cell_path

        try:
            summary = json.loads((p / SUMMARY).read_text(encoding="utf-8"))
            keys = [(str(c["model"]), str(c["method"])) for c in summary["cells"]]
        except (ValueError, KeyError, TypeError) as e:
            raise TextAuditError(f"{p / SUMMARY} is not an audit compare summary ({type(e).__name__}: {e})") from None
        cells = {key: load(cell_path(p, *key)) for key in keys}  # in the matrix's order, as audit compare named them
        config = {k: v for k, v in summary.items() if k in ("data", "mlm", "seed")}
        return Results(p, "compare", config, [], cells)
    if not p.is_file():
        raise TextAuditError(f"results file {p} does not exist")
    header = read_header(p)
    if header is None:
        raise TextAuditError(f"{p} has no textaudit header line: is it a results file written by audit?")
    records = read_jsonl(p)
    check_results(p, header, records)
    return Results(p, header.get("command"), dict(header["config"]), records)
