"""Render the report's sections with jinja2: ``report.html.j2`` (inline CSS, figures as ``data:``
URIs, a few lines of plain JavaScript to sort tables; nothing is fetched from the network) or
``report.md.j2``."""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path
from typing import Iterable, Sequence

from textaudit.errors import TextAuditError
from textaudit.files import REPORT_MARKERS, atomic_path
from textaudit.kinds import HEADLINE_COLUMNS
from textaudit.report.load import Loaded, load_inputs
from textaudit.report.sections import build_sections, headline_rows
from textaudit.secrets import redact
from textaudit.version import __version__

__all__ = ["render_report", "write_report", "FORMATS", "HEADLINE_COLUMNS"]

FORMATS = ("html", "md")


class _Markdown(str):
    """Text that is Markdown already (a table, marked words): the Markdown report's finalize leaves it as is."""


def md_text(value: object) -> _Markdown:
    """``value`` as Markdown text that stays text, whatever it holds (the report copies sentences, settings
    and ``--title`` from files and users): one line (a newline could start a heading or end a list), HTML
    as entities (``<script>``, a ``<!--`` that would hide the rest of the page), and the characters that
    make emphasis, links, images, code and table cells backslash-escaped."""
    import html

    text = html.escape(" ".join(str(value).split()), quote=False)
    return _Markdown(re.sub(r"([\\`*_\[\]|!])", r"\\\1", text))


def md_code(value: object) -> _Markdown:
    """``value`` as one inline code span (a backtick inside gets a longer fence, as CommonMark allows)."""
    text = " ".join(str(value).split())
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return _Markdown(f"{fence}{pad}{text}{pad}{fence}")


def _environment(fmt: str):
    import jinja2
    from markupsafe import Markup, escape

    # HTML: autoescape; Markdown: every value goes through md_text unless it is Markdown already
    finalize = None if fmt == "html" else (lambda v: v if isinstance(v, _Markdown) else md_text(v))
    env = jinja2.Environment(loader=jinja2.PackageLoader("textaudit.report", "templates"),
                             autoescape=fmt == "html", trim_blocks=False, lstrip_blocks=False,
                             undefined=jinja2.StrictUndefined, finalize=finalize)

    def words(tokens: Sequence[tuple[str, bool]], cls: str = "") -> Markup:
        attr = f' class="{cls}"' if cls else ""
        return Markup(" ".join(f"<mark{attr}>{escape(w)}</mark>" if changed else str(escape(w))
                               for w, changed in tokens))

    def words_md(tokens: Sequence[tuple[str, bool]]) -> _Markdown:
        return _Markdown(" ".join(f"**{md_text(w)}**" if changed else md_text(w) for w, changed in tokens))

    def table(columns: Sequence[str], rows: Sequence[Sequence]) -> _Markdown:
        lines = ["| " + " | ".join(map(md_text, columns)) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(map(md_text, r)) + " |" for r in rows]
        return _Markdown("\n".join(lines))

    env.filters.update(words=words, words_md=words_md, code=md_code)
    env.globals.update(table=table)
    return env


def render_report(inputs: Iterable[str | Path] | Sequence[Loaded], fmt: str = "html", title: str | None = None,
                  checks: Sequence | None = None, where: str | Path | None = None) -> str:
    """The report of ``inputs`` (paths, or already :func:`~textaudit.report.load.load_inputs`-ed) as
    one HTML or Markdown string; ``checks``: the thresholds of an ``audit run`` suite
    (:class:`textaudit.suite.Check`), shown first; ``where``: the folder the report is written to
    (the files it names are shown relative to it)."""
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


def is_report(path: Path) -> bool:
    """Whether ``path`` is a report this module wrote (a marker in its first 4 KB)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return any(m.search(head) for m in REPORT_MARKERS)  # textaudit.files: the marks of every file textaudit makes


def write_report(inputs: Iterable[str | Path], out: str | Path, fmt: str | None = None, title: str | None = None,
                 checks: Sequence | None = None) -> Path:
    """Write the report of ``inputs`` to ``out`` (format from ``fmt``, else from its suffix; written
    atomically) and return the path."""
    out = Path(out)
    fmt = fmt or ("md" if out.suffix.lower() in (".md", ".markdown") else "html")
    if out.is_dir():
        raise TextAuditError(f"--out {out} is a directory; give a file name, e.g. {out / f'report.{fmt}'}")
    if out.exists() and not is_report(out):
        raise TextAuditError(f"--out {out} exists and is not a textaudit report (a report only replaces an earlier "
                             "report); give another --out")
    text = render_report(inputs, fmt, title, checks, where=out.resolve().parent)
    with atomic_path(out) as tmp:
        tmp.write_text(redact(text), encoding="utf-8")  # a report shows what results files hold: no secret
    return out
