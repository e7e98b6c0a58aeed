"""Declared audits with thresholds (``audit run suite.toml``): the CI gate.

A suite file's ``[suite]`` section holds the shared settings (data, limit, seed, ``output_dir``, report, tracker); each
audit of :data:`textaudit.audits.AUDITS` is a section whose keys are its request's fields; ``[thresholds]`` names the
gates by each audit's grammar (:mod:`textaudit.gates`). :func:`load_suite` reads and checks all of it before anything
runs; :func:`run_suite` runs (or resumes) every section into the suite's folder, writes the report and checks the
gates. The file format, with an example of every section: ``docs/guides/suites.md``.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from textaudit.audits import AUDITS as ROWS
from textaudit.audits import BY_NAME, gates_of, limits_of
from textaudit.data import dataset_id, load_dataset
from textaudit.errors import TextAuditError
from textaudit.fairness.pairs import check_some_source
from textaudit.formats.compare import cell_path, check_distinct_files, file_part
from textaudit.formats.jsonl import check_output, read_header, read_jsonl
from textaudit.gates import Check, flatten, split_threshold
from textaudit.models import load_classifier
from textaudit.report import write_report
from textaudit.report.render import is_report
from textaudit.request import from_mapping, specs
from textaudit.robustness.request import CertifyRequest

__all__ = ["Suite", "Check", "load_suite", "run_suite", "check_thresholds"]

#: [suite], each audit's section (its request's fields and the row's own keys: textaudit.audits.AUDITS; from_mapping
#: checks them) and [thresholds]
SUITE_SECTION = {"name", "data", "limit", "output_dir", "report", "seed", "track", "note"}


def sections() -> dict[str, set[str] | None]:
    """Every section a suite may declare: ``[suite]``'s keys, each audit's (None: its request's), ``[thresholds]``."""
    return {"suite": SUITE_SECTION, **{row.name: None for row in ROWS}, "thresholds": None}
_NAME = lambda v: isinstance(v, str) and v.strip() != ""  # noqa: E731
#: [suite]'s keys: what each must be, and the check (the other sections' values are checked where they are read)
SUITE_KEYS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "name": ("a string", _NAME),
    "data": ("a data spec string (sst2:dev, a file, hf:...)", _NAME),
    "limit": ("a whole number >= 1", lambda v: isinstance(v, int) and v >= 1),
    "output_dir": ("a folder name", _NAME),
    "report": ("a file name ending in .html or .md", lambda v: _NAME(v) and Path(v).suffix.lower() in (".html", ".md")
               and Path(v).name == v),
    "seed": ("a whole number >= 0", lambda v: isinstance(v, int) and v >= 0),
    "track": ("mlflow (log the suite as a run with one nested run per audit)", lambda v: v == "mlflow"),
    "note": ("a string (printed under the verdict: what the suite shows)", _NAME),
}
@dataclass
class Suite:
    path: Path
    spec: dict

    @property
    def output_dir(self) -> Path:
        out = Path(self.spec["suite"].get("output_dir", self.path.stem))
        return out if out.is_absolute() else self.path.parent / out

    @property
    def report_path(self) -> Path:
        return self.output_dir / self.get("suite", "report", "report.html")

    def get(self, section: str, key: str, default: Any = None) -> Any:
        return self.spec.get(section, {}).get(key, default)

    def request(self, name: str, *, values: dict | None = None, **fixed: Any) -> Any:
        """Section ``[name]`` as the request its command builds (:data:`textaudit.audits.AUDITS`' row: the
        request's fields, less the row's own keys; ``values``: more of them, e.g. one model of ``[certify]``),
        into the suite's results path (resumed when it is there and the request resumes); the ``[suite]`` keys the
        row inherits fill the fields the section leaves out; paths are relative to the suite file. ``fixed``:
        fields the caller decides (the output, resume)."""
        row = BY_NAME[name]
        section = {k: v for k, v in self.spec[name].items() if k not in row.own_keys}
        for key in row.paths:
            if isinstance(section.get(key), str):
                section[key] = [section[key]]
            if isinstance(section.get(key), list):
                section[key] = [str(Path(f) if Path(f).is_absolute() else self.path.parent / f) for f in section[key]]
        inherited = {field: self.spec["suite"][key] for key, field in row.inherits.items()
                     if key in self.spec.get("suite", {}) and field not in section}
        output = self.results_path(name, (values or {}).get("model"))
        fields = {f.name for f in dataclasses.fields(row.request)}
        where: dict[str, Any] = {row.output: output} if row.output in fields else {}  # (an audit that writes no file)
        if "resume" in fields and where and not row.replaced:
            where["resume"] = True  # (none there yet: a fresh file; --label all: each label's file resumed)
        return from_mapping(row.request, {**inherited, **section, **(values or {})}, self.path, name,
                            aliases=row.aliases, **{**where, **fixed})

    def results_path(self, audit: str, model: str | None = None) -> Path:
        """Where the suite keeps ``audit``'s results (a certify file per ``model``): the one place :func:`run_suite`
        writes them and a gate's JUnit case names them from."""
        # (a plug-in's or an endpoint's name holds / or :)
        return self.output_dir / BY_NAME[audit].results.format(model=file_part(str(model)))


def _toml(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise TextAuditError(f"cannot read suite {path}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise TextAuditError(f"{path} is not valid TOML: {e}") from None
    except (RecursionError, ValueError) as e:  # nested 100,000 deep; an integer of more digits than Python converts
        what = "nested too deeply" if isinstance(e, RecursionError) else "a value too large"
        raise TextAuditError(f"{path} is not valid TOML: {what} to read") from None


def load_suite(path: str | Path) -> Suite:
    """Read and check a suite file (every name and option) before anything runs."""
    path = Path(path)
    if not path.is_file():
        raise TextAuditError(f"suite file {path} does not exist; see examples/ for suites to start from")
    spec = _toml(path)
    _check_keys(path, spec)
    audits = list(BY_NAME)
    if not any(s in spec for s in audits):
        raise TextAuditError(f"{path} declares no audit; add {', '.join(f'[{s}]' for s in audits[:-1])} or "
                             f"[{audits[-1]}]")
    suite = Suite(path, spec)
    try:  # the sections' own keys (a margin, max_still) first
        limits_of(spec)
    except TextAuditError as e:
        raise TextAuditError(f"{path}: {e}") from None
    for section in audits:  # each audit's request, built and checked now, with the command's ranges
        if section in spec:
            _check_section(suite, section)
    _thresholds(suite)  # names checked now, values once the audits ran

    report = suite.report_path
    if report.is_dir() or (report.exists() and not is_report(report)):
        raise TextAuditError(f"{path}: [suite] report = {str(spec['suite'].get('report', 'report.html'))!r} would replace "
                             f"{report}, which is not a textaudit report; name another file")
    return suite


def _check_keys(path: Path, spec: dict) -> None:
    """Every section known and a table; the keys of the sections with a fixed set, and their single values."""
    for section, content in spec.items():
        known = sections()
        if section not in known:
            raise TextAuditError(f"{path}: unknown section [{section}]; use {', '.join(f'[{s}]' for s in known)}")
        if not isinstance(content, dict):
            raise TextAuditError(f"{path}: [{section}] must be a table")
        allowed = known[section]
        if allowed is not None:
            extra = sorted(set(content) - allowed)
            if extra:
                raise TextAuditError(f"{path}: unknown key '{extra[0]}' in [{section}]; use {', '.join(sorted(allowed))}")
    spec.setdefault("suite", {})
    for key, value in spec["suite"].items():
        want, ok = SUITE_KEYS[key]
        if isinstance(value, bool) or not ok(value):
            raise TextAuditError(f"{path}: [suite] {key} must be {want} (got {value!r})")


def _in_section(suite: Suite, section: str, check: Callable[[], Any]) -> None:
    """Run a request's ``check``; its one-line error names the suite file and the section."""
    try:
        check()
    except TextAuditError as e:
        raise TextAuditError(str(e) if str(e).startswith(str(suite.path)) else f"{suite.path}: [{section}] {e}") from None


def _check_section(suite: Suite, name: str) -> None:
    """Section ``[name]``'s request built and checked, with its command's ranges (a file the suite writes afresh
    each run is left out: its previous run's is the suite's own; a section of ``models`` once per model)."""
    row, path, section = BY_NAME[name], suite.path, suite.spec[name]
    for key in row.required:
        if not isinstance(section.get(key), str):
            raise TextAuditError(f"{path}: [{name}] needs {key} = \"<name>\"")
    if not row.per_model:  # (no results file yet, or one written afresh: checked without one, so nothing is made)
        fields = specs(row.request)
        fresh = row.replaced or not suite.results_path(name).exists()
        unmade = {row.output: None, **({"resume": False} if "resume" in fields else {})} \
            if row.output in fields and fields[row.output][1] is not ... and fresh else {}
        _in_section(suite, name, lambda: suite.request(name, **unmade).check())
        return
    models = section.get("models")
    if not isinstance(models, list) or not models or not all(isinstance(x, str) for x in models):
        raise TextAuditError(f"{path}: [{name}] models must be a non-empty list of names")
    if "model" in section:
        raise TextAuditError(f"{path}: [{name}] takes models = [\"<name>\", …], each audited alike")
    check_distinct_files(models, f"{path}: [{name}] models")
    for m in models:
        _in_section(suite, name, lambda m=m: suite.request(name, values={"model": m}, output=None,
                                                           resume=False).check())


def _certify(request: CertifyRequest, progress: bool) -> dict:
    """One model of ``[certify]``: its summary. A finished IBP certification is reused when its settings are the
    suite's (one pass: a suite run again with another limit certifies again); smoothing resumes its file."""
    config = {"limit": request.limit}  # the examples certified are part of the settings
    path = request.output
    if request.chosen_method == "ibp" and path.exists():
        clf = load_classifier(request.model)
        check_output(path, True, {"model": request.model, "model_fingerprint": clf.fingerprint,
                                  "data": dataset_id(request.data, "dev"), **config}, exact=True)
        return read_jsonl(path)[0]
    if request.chosen_method != "ibp":
        request = dataclasses.replace(request, resume=path.exists())
    table = request.check()
    return request.run(checked=table, progress=progress, config=config).summary


def _thresholds(suite: Suite) -> list[tuple[str, str, float, Callable[[dict], float | None]]]:
    """``(name, op, limit, value_of(results))`` for each threshold (its audit's grammar: :func:`textaudit.audits.
    gates_of`) and each gate a section's own keys set; a bad name is an error now."""
    out = []
    for keys, limit in flatten(suite.spec.get("thresholds", {})):
        name = ".".join(keys)
        if not isinstance(limit, (int, float)) or isinstance(limit, bool):
            raise TextAuditError(f"threshold {name} must be a number (got {limit!r})")
        metric, op = split_threshold(keys[-1])
        out += [(gate, op, float(limit), value_of) for gate, value_of in gates_of(suite.spec, tuple(keys), metric)]
    return out + limits_of(suite.spec)


def check_thresholds(suite: Suite, results: dict) -> list[Check]:
    """Every threshold of ``suite`` against ``results`` (see :func:`run_suite`); a missing value fails. Each check
    names the results file its value is read from and, for B_{p,k}, audit bias's warning when it rests on few
    sources (the gate still passes or fails on its value: the note says what that value is worth)."""
    checks = []
    for name, op, limit, value_of in _thresholds(suite):
        v = value_of(results)
        ok = v is not None and {"<=": v <= limit, ">=": v >= limit, "<": v < limit, ">": v > limit}[op]
        file, note = _gate_source(suite, name, results)
        checks.append(Check(name, None if v is None else round(float(v), 6), op, limit, bool(ok),
                            None if file is None else str(file), note))
    return checks


def _gate_source(suite: Suite, name: str, results: dict) -> tuple[Path | None, str | None]:
    """The results file a gate named ``name`` reads (the JUnit case's file), and its note."""
    head, *rest = name.split(".")
    middle = name[len(head) + 1:name.rindex(".")] if rest else ""  # a model's name may hold a dot
    if head in BY_NAME:
        row = BY_NAME[head]
        note = row.note(name, results.get(head)) if row.note is not None else None
        return suite.results_path(head, middle if row.per_model else None), note
    methods = suite.get("compare", "methods", [])
    method = next((m for m in methods if m == head or m.replace("-", "_") == head), None)
    if method is not None and middle in suite.get("compare", "models", []):
        return cell_path(suite.results_path("compare"), middle, method), None
    return None, None


def _run_section(suite: Suite, name: str, mark: dict, progress: bool) -> tuple[Any, list[Path]]:
    """Section ``[name]`` run into the suite's folder (a file it writes afresh: the previous run's replaced, this
    run's carrying the suite's ``mark``; a section of ``models``: one run each); what its gates read, its files."""
    row = BY_NAME[name]
    if row.per_model:
        runs = {m: _certify(suite.request(name, values={"model": m}, resume=False), progress)
                for m in suite.get(name, "models")}
        return runs, [suite.results_path(name, m) for m in runs]
    if row.replaced:
        suite.results_path(name).unlink(missing_ok=True)  # (run_suite checked it is this suite's own)
    request = suite.request(name)
    config = mark if row.replaced else {"limit": request.limit} if row.header_limit and request.limit else None
    outcome = request.run(progress=progress, **({"config": config} if config is not None else {}))
    return getattr(outcome, row.reads), outcome.files


def run_suite(suite: Suite, progress: bool = True) -> tuple[dict, list[Check], Path, list[Path]]:
    """Run (or resume) every audit of ``suite`` into its output directory, write the report, and
    return ``(results, checks, report path, the audits' results files and folders)``."""
    out = suite.output_dir
    if out.exists() and not out.is_dir():
        raise TextAuditError(f"output_dir {out} is a file; give a directory")
    mark = {"suite": str(suite.path.resolve())}  # a file this suite writes afresh, and may replace, carries it
    for row in ROWS:
        path = suite.results_path(row.name)
        if row.replaced and row.name in suite.spec and path.exists() and \
                ((read_header(path) or {}).get("config") or {}).get("suite") != mark["suite"]:
            raise TextAuditError(f"{path} was not written by this suite ({suite.path.name}): it is left as it is; "
                                 "move it, or give the suite another output_dir")
    results: dict[str, Any] = {}
    inputs: list[Path] = []
    if "bias" in suite.spec:  # data that holds no pair is said before any audit runs, not after the attacks
        bias = suite.request("bias")
        checked = bias.check()
        bias_data = load_dataset(bias.data, text_column=bias.text_column, default_split="dev", limit=bias.limit,
                                 require_labels=False)
        check_some_source(checked.pairs, list(bias_data["text"]), bias_data["id"], None, limit=bias.limit,
                          limit_name="[bias] limit =", bound="[bias] max_sources = N")
    for row in ROWS:  # in the table's order
        if row.name in suite.spec:
            results[row.name], files = _run_section(suite, row.name, mark, progress)
            inputs += files
    checks = check_thresholds(suite, results)
    report = suite.report_path
    write_report(inputs, report, title=suite.get("suite", "name"), checks=checks)
    return results, checks, report, inputs
