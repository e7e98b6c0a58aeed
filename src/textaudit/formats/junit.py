"""A suite's gates as JUnit XML (``audit run --junit FILE``), the file CI systems read (GitHub, GitLab and Jenkins
show it as test results): one ``<testsuite>`` per suite, one ``<testcase>`` per gate, a failed gate a ``<failure>``.
Each case carries the gate's value, its threshold and the results file the value was read from (``file``, and the
properties ``value``, ``threshold``, ``file``, ``note``).

Written with the standard library's :mod:`xml.etree.ElementTree`: the format is a few elements, and the tests read it
back with an independent JUnit parser (junitparser), so the writer is not also the judge."""

from __future__ import annotations

import datetime as _dt
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Sequence

from textaudit.files import atomic_path
from textaudit.secrets import redact
from textaudit.version import __version__

__all__ = ["write_junit", "junit_tree"]


def _gate_class(suite: str, name: str) -> str:
    """The case's class name: the suite, then the audit the gate reads (``attack``, ``bias``, a method …)."""
    return ".".join(["textaudit", re.sub(r"[^\w-]+", "_", suite), name.split(".", 1)[0]])


def junit_tree(suite: str, checks: Sequence, *, seconds: float = 0.0, report: str | None = None) -> ET.ElementTree:
    """The XML tree of ``checks`` (:class:`textaudit.suite.Check`) of the suite named ``suite``."""
    failed = sum(not c.passed for c in checks)
    root = ET.Element("testsuites", {"name": f"textaudit suite {suite}", "tests": str(len(checks)),
                                     "failures": str(failed), "errors": "0", "time": f"{seconds:.3f}"})
    ts = ET.SubElement(root, "testsuite", {"name": suite, "tests": str(len(checks)), "failures": str(failed),
                                           "errors": "0", "skipped": "0", "time": f"{seconds:.3f}",
                                           "timestamp": _dt.datetime.now().isoformat(timespec="seconds")})
    props = ET.SubElement(ts, "properties")
    for k, v in (("generator", f"textaudit {__version__}"), ("report", report)):
        if v is not None:
            ET.SubElement(props, "property", {"name": k, "value": str(v)})
    for c in checks:
        value = "missing" if c.value is None else repr(c.value)
        attrs = {"classname": _gate_class(suite, c.name), "name": c.name, "time": "0"}
        if c.file:
            attrs["file"] = c.file
        case = ET.SubElement(ts, "testcase", attrs)
        cp = ET.SubElement(case, "properties")
        for k, v in (("value", value), ("threshold", f"{c.op} {c.limit}"), ("file", c.file), ("note", c.note)):
            if v is not None:
                ET.SubElement(cp, "property", {"name": k, "value": str(v)})
        said = f"{c.name} = {value}, must be {c.op} {c.limit}" + (f" (read from {c.file})" if c.file else "")
        if not c.passed:
            failure = ET.SubElement(case, "failure", {"type": "threshold", "message": said})
            failure.text = said + (f"\nnote: {c.note}" if c.note else "")
        ET.SubElement(case, "system-out").text = said + (f"\nnote: {c.note}" if c.note else "")
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(path: str | Path, suite: str, checks: Sequence, *, seconds: float = 0.0,
                report: str | None = None) -> Path:
    """Write the JUnit XML of ``checks`` to ``path`` (atomically; an existing file only when textaudit made it; without
    a secret this process knows, as every output: a gate's name may hold an endpoint's URL)."""
    path = Path(path)
    text = ET.tostring(junit_tree(suite, checks, seconds=seconds, report=report).getroot(), encoding="unicode",
                       xml_declaration=True)
    with atomic_path(path) as tmp:
        tmp.write_text(redact(text) + "\n", encoding="utf-8")
    return path
