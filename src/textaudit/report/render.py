"""Render the report's sections with jinja2: ``report.html.j2`` (inline CSS, figures as ``data:``
URIs, a few lines of plain JavaScript to sort tables; nothing is fetched from the network) or
``report.md.j2``."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Iterable, Sequence

from textaudit.errors import TextAuditError
from textaudit.files import atomic_path
from textaudit.report.load import Loaded, load_inputs
from textaudit.report.sections import build_sections, headline_rows

__all__ = ["render_report", "write_report", "FORMATS", "HEADLINE_COLUMNS"]

FORMATS = ("html", "md")
HEADLINE_COLUMNS = ["audit", "model", "what", "masked LM", "data", "seed", "headline (95% CI)"]


def _environment(fmt: str):
    import jinja2
    from markupsafe import Markup, escape

    env = jinja2.Environment(loader=jinja2.PackageLoader("textaudit.report", "templates"),
                             autoescape=fmt == "html", trim_blocks=False, lstrip_blocks=False,
                             undefined=jinja2.StrictUndefined)

    def words(tokens: Sequence[tuple[str, bool]], cls: str = "") -> Markup:
        attr = f' class="{cls}"' if cls else ""
        return Markup(" ".join(f"<mark{attr}>{escape(w)}</mark>" if changed else str(escape(w))
                               for w, changed in tokens))

    def words_md(tokens: Sequence[tuple[str, bool]]) -> str:
        return " ".join(f"**{w}**" if changed else w for w, changed in tokens)

    def table(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
        cell = lambda v: str(v).replace("|", "\\|").replace("\n", " ")  # noqa: E731
        lines = ["| " + " | ".join(map(cell, columns)) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(map(cell, r)) + " |" for r in rows]
        return "\n".join(lines)

    env.filters.update(words=words, words_md=words_md)
    env.globals.update(table=table)
    return env


def render_report(inputs: Iterable[str | Path] | Sequence[Loaded], fmt: str = "html", title: str | None = None,
                  checks: Sequence | None = None, where: str | Path | None = None) -> str:
    """The report of ``inputs`` (paths, or already :func:`~textaudit.report.load.load_inputs`-ed) as
    one HTML or Markdown string; ``checks``: the thresholds of an ``audit run`` suite
    (:class:`textaudit.suite.Check`), shown first; ``where``: the folder the report is written to
    (the files it names are shown relative to it)."""
    from textaudit import __version__

    if fmt not in FORMATS:
        raise TextAuditError(f"unknown --format '{fmt}'; use one of {', '.join(FORMATS)}")
    inputs = list(inputs)
    items = inputs if inputs and all(isinstance(i, Loaded) for i in inputs) else load_inputs(inputs)  # type: ignore[arg-type]
    sections = build_sections(items, where)
    models = list(dict.fromkeys(str(i.config.get("model")) for i in items if i.config.get("model")))
    title = title or ("textaudit report" + (f": {', '.join(models)}" if models else ""))
    return _environment(fmt).get_template(f"report.{fmt}.j2").render(
        title=title, version=__version__, items=items, sections=sections, headline_columns=HEADLINE_COLUMNS,
        headline=headline_rows(items), checks=list(checks or []), generated=_dt.datetime.now().strftime("%Y-%m-%d %H:%M"))


def write_report(inputs: Iterable[str | Path], out: str | Path, fmt: str | None = None, title: str | None = None,
                 checks: Sequence | None = None) -> Path:
    """Write the report of ``inputs`` to ``out`` (format from ``fmt``, else from its suffix; written
    atomically) and return the path."""
    out = Path(out)
    fmt = fmt or ("md" if out.suffix.lower() in (".md", ".markdown") else "html")
    if out.is_dir():
        raise TextAuditError(f"--out {out} is a directory; give a file name, e.g. {out / f'report.{fmt}'}")
    text = render_report(inputs, fmt, title, checks, where=out.resolve().parent)
    with atomic_path(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return out
