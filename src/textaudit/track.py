"""Audits as runs of the user's experiment tracker (``--track mlflow``; ``audit track RESULTS...``).

One audit is one MLflow run: its **params** (the run's settings — the results file's header config,
or the command's options where it wrote no file — and the textaudit version), its **metrics** (every
number of the command's ``--json`` summary, flattened: ``success_rate``, an interval ``x_ci95`` as
``x_ci95_low`` and ``x_ci95_high``, B_{p,k} as ``pairs.he-she.by_k.1.B``, McNemar's p, the seconds …),
**tags** (``textaudit.command``, the model) and **artifacts** (the results files and, where they make
one, the HTML report). A suite (``audit run``) is a parent run with one nested run per audit.

Where the run goes is MLflow's own business: ``MLFLOW_TRACKING_URI`` (else MLflow's local default,
``./mlruns``), ``MLFLOW_EXPERIMENT_NAME`` / ``MLFLOW_EXPERIMENT_ID`` or ``--track-experiment``;
``--track-run-id`` makes the audit a nested run of an existing one (the training run of the model).

The audit never depends on the tracker: it is logged after it finished, and a tracker that is down or
refuses costs one warning — the run's content is then kept beside the first results file
(``<file>.track.json``) and ``audit track <file>`` logs exactly it later. No secret reaches the
tracker: URLs lose their user:password@ and query, and every secret the process knows (the API-key
and tracker variables', a model URL's credentials: :mod:`textaudit.secrets`) is replaced by ``***`` in
every form :func:`textaudit.secrets.secret_forms` knows — in params, metric names, tags, the run's name,
the kept file and the tracker's own error messages.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from textaudit.errors import TextAuditError
from textaudit.files import atomic_path, fingerprint_dir, loads_json, sha256_file
from textaudit.formats.compare import SUMMARY as COMPARE_SUMMARY
from textaudit.formats.harden import SUMMARY as HARDEN_SUMMARY
from textaudit.formats.jsonl import read_header
from textaudit.loaded import load
from textaudit.report import write_report
from textaudit.secrets import public_url, redact_obj, register, register_env
from textaudit.secrets import redact as redact_secrets
from textaudit.version import __version__

__all__ = ["TRACKERS", "TrackRun", "Target", "check_tracker", "metrics_of", "params_of", "run_of_summary",
           "run_of_files", "uploads", "log_run", "suite_run", "pending_path", "keep_pending", "read_pending", "INSTALL_HINT"]

#: the trackers ``--track`` knows
TRACKERS = ("mlflow",)
INSTALL_HINT = 'pip install "textaudit[track]" (or pip install mlflow)'
#: MLflow's limits: a param's value (characters), metrics or params in one log_batch call
MAX_PARAM = 500
BATCH = 900
#: environment variables whose values are API keys (plus the one --api-key-env names)
KEY_VARIABLES = ("OPENAI_API_KEY", "TEXTAUDIT_API_KEY", "MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD")


def check_tracker(name: str | None) -> str | None:
    """``--track NAME``: a tracker textaudit knows and whose library is installed (one line otherwise)."""
    if name is None:
        return None
    if name not in TRACKERS:
        raise TextAuditError(f"--track {name}: textaudit logs to {', '.join(TRACKERS)}; give --track mlflow")
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise TextAuditError(f"--track mlflow needs MLflow, which is not installed: {INSTALL_HINT}") from None
    return name


@dataclass
class Target:
    """Where runs go: an experiment (name) and a parent run to nest under (MLflow's environment decides the rest)."""

    experiment: str | None = None
    parent_run_id: str | None = None


@dataclass
class TrackRun:
    """The content of one tracked run, before it is logged (and as ``<file>.track.json`` keeps it)."""

    name: str
    command: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    artifacts: list[str] = field(default_factory=list)
    children: list["TrackRun"] = field(default_factory=list)
    #: when the audit itself began and ended (Unix ms): the run's duration is the audit's, not the logging's
    start_ms: int | None = None
    end_ms: int | None = None

    def to_json(self) -> dict:
        return redact_obj(asdict(self))

    @classmethod
    def from_json(cls, d: Mapping) -> "TrackRun":
        kids = [cls.from_json(c) for c in d.get("children", [])]
        ms = lambda v: int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None  # noqa: E731
        return cls(str(d["name"]), str(d["command"]), dict(d["params"]), {k: float(v) for k, v in d["metrics"].items()},
                   dict(d["tags"]), list(d.get("artifacts", [])), kids, ms(d.get("start_ms")), ms(d.get("end_ms")))


# -- what a run holds ----------------------------------------------------------------------------------------

def _key(name: str) -> str:
    """A metric or param name MLflow takes: letters, digits, _ - . / and spaces."""
    return re.sub(r"[^A-Za-z0-9_\-./ ]", "_", name).strip(".")[:250] or "_"


def _label(item: Mapping, i: int) -> str:
    """The name of one entry of a list of records (a pair, a method, a model …), else its index."""
    parts = []
    for k in ("pair", "model", "method", "perturbation", "name", "class", "id"):
        v = item.get(k)
        if isinstance(v, (list, tuple)) and all(isinstance(x, (str, int)) for x in v):
            parts.append("-".join(map(str, v)))
        elif isinstance(v, (str, int)) and not isinstance(v, bool):
            parts.append(str(v))
    return "/".join(parts) if parts else str(i)


def _numbers(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def metrics_of(summary: Any, prefix: str = "") -> dict[str, float]:
    """Every finite number of a summary, flattened to ``a.b.c`` names; a two-number interval (a key holding
    ``ci``) becomes ``<key>_low`` and ``<key>_high``; a list of records is named by each record's pair,
    model, method … (:func:`_label`). Booleans and strings are not metrics."""
    out: dict[str, float] = {}
    if isinstance(summary, Mapping):
        for k, v in summary.items():
            name = f"{prefix}.{k}" if prefix else str(k)
            if "ci" in str(k).lower() and isinstance(v, (list, tuple)) and len(v) == 2 and all(_numbers(x) for x in v):
                out.update(metrics_of(v[0], name + "_low"))
                out.update(metrics_of(v[1], name + "_high"))
            else:
                out.update(metrics_of(v, name))
    elif isinstance(summary, (list, tuple)) and summary and all(isinstance(x, Mapping) for x in summary):
        for i, item in enumerate(summary):
            out.update(metrics_of(item, f"{prefix}.{_label(item, i)}" if prefix else _label(item, i)))
    elif _numbers(summary) and math.isfinite(float(summary)) and prefix:
        out[_key(redact(prefix))] = float(summary)  # a metric's name may hold a model's spec
    return out


def _secrets(extra_env: Iterable[str] = ()) -> list[str]:
    """The values of the API-key and tracker variables set here (and of ``extra_env``), made known to
    :func:`textaudit.secrets.redact`; returned for the callers that list them."""
    register_env((*KEY_VARIABLES, *extra_env))
    return [os.environ[n].strip() for n in (*KEY_VARIABLES, *extra_env) if len(os.environ.get(n, "").strip()) >= 4]


def redact(value: str, secrets: Sequence[str] = ()) -> str:
    """``value`` with URLs' user:password@ and query removed and every known secret (and ``secrets``)
    replaced by ``***`` (:func:`textaudit.secrets.redact`)."""
    register(*secrets)
    return redact_secrets(re.sub(r"https?://[^\s\"',]+", lambda m: public_url(m.group(0)), value))


def params_of(config: Mapping[str, Any], secrets: Sequence[str] = ()) -> dict[str, str]:
    """A run's settings as MLflow params: one per key (a table or list as JSON), None left out, redacted,
    cut to MLflow's length."""
    out = {}
    for k, v in config.items():
        if v is None:
            continue
        text = v if isinstance(v, str) else json.dumps(v, default=str, sort_keys=True)
        text = redact(text, secrets)
        out[_key(str(k))] = text if len(text) <= MAX_PARAM else text[: MAX_PARAM - 1] + "…"
    return out


def run_of_summary(command: str, summary: Mapping, options: Mapping[str, Any], files: Sequence[Path] = (),
                   secret_env: Iterable[str] = ()) -> TrackRun:
    """The run of a command that just finished: its ``--json`` summary's numbers as metrics; its params the
    results file's header settings where it wrote one, else its options."""
    secrets = _secrets(secret_env)
    config = dict(options)
    for f in files:
        header = read_header(f) if Path(f).is_file() else None
        if header and isinstance(header.get("config"), dict):
            config = {**header["config"]}
            break
    model = summary.get("model") if isinstance(summary.get("model"), str) else config.get("model")
    params = params_of({**config, "command": command, "textaudit_version": __version__}, secrets)
    tags = {"textaudit.command": command, "textaudit.version": __version__}
    if model:
        tags["textaudit.model"] = redact(str(model), secrets)
    name = redact(f"{command} {model}" if model else command, secrets)
    return TrackRun(name, command, params, metrics_of(summary), tags, [str(Path(f).resolve()) for f in files])


def run_of_files(path: Path) -> TrackRun:
    """The run of a finished results file or folder (``audit track``): the content kept beside it when its
    live logging failed (:func:`read_pending`), else its header settings and its summary recomputed from its
    records."""
    kept = pending_path(path)
    if kept.is_file():
        return read_pending(kept, path)
    res = load(path)
    command = res.command or "results"
    return run_of_summary(command, res.summary(), {}, [path])


def uploads(path: Path) -> list[Path]:
    """What ``audit track`` and ``--track`` upload for a results path, by textaudit's own naming rules alone (never
    by what a kept file says): a results file itself; a results folder (compare, harden, a suite's audits): its
    summary (``compare.json``, ``harden.json``) and the folder's own ``*.jsonl`` results files (regular files, not
    links, each with a textaudit header); a report (``.html``, ``.md``) itself. A ``secret.env`` planted beside or
    inside them is never one of them."""
    path = Path(path)
    if path.is_symlink():
        return []
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []
    out = [path / name for name in (COMPARE_SUMMARY, HARDEN_SUMMARY)
           if (path / name).is_file() and not (path / name).is_symlink()]
    for f in sorted(path.glob("*.jsonl")):
        if f.is_file() and not f.is_symlink() and f.resolve().parent == path.resolve() and _has_header(f):
            out.append(f)
    return out


def _has_header(path: Path) -> bool:
    try:
        return read_header(path) is not None
    except (TextAuditError, OSError, ValueError):
        return False


def pending_path(path: Path) -> Path:
    """Where the content of a run that could not be logged is kept: beside the results file (or in the folder)."""
    path = Path(path)
    return path / "track.json" if path.is_dir() else path.with_name(path.name + ".track.json")


#: the mark of a kept run's file (``<file>.track.json``): what :func:`keep_pending` writes
PENDING_FORMAT = "textaudit-track/2"


def _inside(base: Path, name: str) -> Path | None:
    """``name`` (relative to ``base``) as a path inside ``base`` once every link is followed, else None."""
    if not isinstance(name, str) or not name or Path(name).is_absolute():
        return None
    p = (base / name).resolve()
    return p if p.is_relative_to(base.resolve()) else None


def _artifact_names(run: TrackRun) -> list[str]:
    return [*run.artifacts, *(a for c in run.children for a in _artifact_names(c))]


def _digest(run_json: Mapping, base: Path) -> str | None:
    """SHA-256 of a kept run's content and of the bytes of every artifact it names (inside ``base``); None when one
    is outside ``base`` or missing."""
    h = hashlib.sha256(json.dumps(run_json, sort_keys=True).encode())
    for name in sorted(set(_artifact_names(TrackRun.from_json(run_json)))):
        p = _inside(base, name)
        if p is None or not p.exists():
            return None
        h.update(name.encode() + b"\0" + (fingerprint_dir(p) if p.is_dir() else sha256_file(p)).encode())
    return h.hexdigest()


def _relative(run: TrackRun, base: Path) -> TrackRun:
    """``run`` with its artifacts named relative to ``base``, those outside it left out (never uploaded later)."""
    names = [str(Path(a).resolve().relative_to(base.resolve())) for a in run.artifacts
             if Path(a).resolve().is_relative_to(base.resolve()) and Path(a).exists()]
    return TrackRun(run.name, run.command, run.params, run.metrics, run.tags, names,
                    [_relative(c, base) for c in run.children], run.start_ms, run.end_ms)


def keep_pending(run: TrackRun, results: Path) -> Path:
    """Keep ``run`` beside ``results`` for a later ``audit track``: redacted, its artifacts named relative to the
    results' folder, and a digest of its content and of those artifacts' bytes (:func:`read_pending` honours the
    file only while they match)."""
    kept = pending_path(results)
    base = kept.parent
    content = _relative(run, base).to_json()
    with atomic_path(kept) as tmp:
        tmp.write_text(json.dumps({"format": PENDING_FORMAT, "run": redact_obj(content), "sha256": _digest(content, base)},
                                  indent=1), encoding="utf-8")
    return kept


def read_pending(kept: Path, results: Path) -> TrackRun:
    """The run kept in ``kept`` — an untrusted file: honoured only when it is one :func:`keep_pending` wrote, every
    artifact it names lies inside the results' own folder, and its digest matches its content and those
    artifacts' bytes as they are now; else one line and nothing is logged. Its text passes the redaction again.
    Its digest is a checksum anyone can recompute, not a signature: so nothing the file says decides what is
    uploaded — the run's artifacts are ``results`` itself (:func:`uploads` at logging), its nested runs' none."""
    base = kept.parent

    def refuse(why: str) -> TextAuditError:
        return TextAuditError(f"{kept} does not describe the results beside it ({why}); nothing was logged: remove "
                              f"it to log {results} from its records")

    try:
        doc = loads_json(kept.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise refuse(f"not JSON: {type(e).__name__}") from None
    if not isinstance(doc, dict) or doc.get("format") != PENDING_FORMAT or not isinstance(doc.get("run"), dict):
        raise refuse("not a run textaudit kept")
    try:
        run = TrackRun.from_json(doc["run"])
    except (ValueError, KeyError, TypeError, AttributeError):
        raise refuse("damaged") from None
    outside = [a for a in _artifact_names(run) if _inside(base, a) is None]
    if outside:
        raise refuse(f"it names {redact_secrets(str(outside[0]))!r}, outside {base}")
    if _digest(doc["run"], base) != doc.get("sha256"):
        raise refuse("its digest does not match its content and the files it names")
    return TrackRun.from_json(redact_obj(_derived(doc["run"], [str(Path(results).resolve())])))


def _derived(run_json: Mapping, artifacts: list[str]) -> dict:
    """A kept run with its artifacts replaced by ``artifacts`` (its nested runs' by none): what was read from the
    kept file never names a file to upload."""
    return {**run_json, "artifacts": artifacts, "children": [_derived(c, []) for c in run_json.get("children", [])]}


# -- logging -------------------------------------------------------------------------------------------------

def _client():
    import mlflow
    from mlflow import MlflowClient

    # a tracker that is down answers in seconds, not after MLflow's default minutes of retries (the user's own
    # settings of these variables stand)
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
    return mlflow, MlflowClient()


def _experiment_id(client, target: Target) -> str:
    """The experiment: --track-experiment, else the parent run's, else MLflow's environment, else its default."""
    name = target.experiment or (None if target.parent_run_id else os.environ.get("MLFLOW_EXPERIMENT_NAME"))
    if name:
        exp = client.get_experiment_by_name(name)
        return exp.experiment_id if exp is not None else client.create_experiment(name)
    if target.parent_run_id:
        return client.get_run(target.parent_run_id).info.experiment_id
    return os.environ.get("MLFLOW_EXPERIMENT_ID", "0")


def _report(paths: Sequence[str], where: Path) -> Path | None:
    """The HTML report of the run's results files, if they make one."""
    files = [p for p in paths if Path(p).exists() and not str(p).endswith(".track.json")]
    if not files:
        return None
    try:
        return write_report(files, where / "report.html")
    except TextAuditError:
        return None  # files no report reads (a tracked run without its own report is still a run)


def _log(client, run: TrackRun, experiment_id: str, parent: str | None) -> str:
    from mlflow.entities import Metric, Param

    tags = dict(run.tags)
    if parent:
        tags["mlflow.parentRunId"] = parent
    r = client.create_run(experiment_id, start_time=run.start_ms, tags=tags, run_name=run.name)
    rid = r.info.run_id
    now = int(time.time() * 1000)
    params = [Param(k, v) for k, v in run.params.items()]
    metrics = [Metric(k, v, now, 0) for k, v in run.metrics.items()]
    for i in range(0, max(len(params), len(metrics), 1), BATCH):
        client.log_batch(rid, metrics=metrics[i:i + BATCH], params=params[i:i + BATCH])
    with tempfile.TemporaryDirectory(prefix="textaudit-track-") as tmp:
        (Path(tmp) / "summary.json").write_text(json.dumps(redact_obj({"metrics": run.metrics, "params": run.params}), indent=1))
        client.log_artifact(rid, str(Path(tmp) / "summary.json"))
        report = _report(run.artifacts, Path(tmp))
        if report is not None:
            client.log_artifact(rid, str(report))
        for a in run.artifacts:
            p = Path(a)
            if p.is_dir():  # only the folder's own results files (uploads), never whatever else lies in it
                for f in uploads(p):
                    client.log_artifact(rid, str(f), artifact_path=p.name)
            elif p.suffix in (".html", ".md") and p.is_file() and not p.is_symlink():  # a report (a suite's)
                client.log_artifact(rid, str(p))
            elif p.is_file() and not p.is_symlink():
                client.log_artifact(rid, str(p), artifact_path="results")
    for child in run.children:
        _log(client, child, experiment_id, rid)
    client.set_terminated(rid, "FINISHED", end_time=run.end_ms)
    return rid


def log_run(run: TrackRun, target: Target) -> str:
    """Log ``run`` (and its nested runs) and return its run id; any failure of the tracker is a TextAuditError."""
    import contextlib
    import sys

    import mlflow

    try:  # the client too: MLflow builds its store from the tracking URI there, and a URI it refuses raises
        with contextlib.redirect_stdout(sys.stderr):  # MLflow prints its links: stdout's last line stays the --json one
            _, client = _client()
            return _log(client, run, _experiment_id(client, target), target.parent_run_id)
    except TextAuditError:
        raise
    except Exception as e:  # MLflow's own errors, a refused connection, a timeout, a URI it refuses: "not logged"
        msg = " ".join(str(e).split())
        if any(w in msg for w in ("Max retries exceeded", "Connection refused", "NewConnectionError", "timed out")):
            raise TextAuditError(f"the tracking server at {redact(mlflow.get_tracking_uri(), [])} did not answer") from None
        raise TextAuditError(f"{type(e).__name__}: {redact(msg)[:200]}") from None  # a server may echo a credential


def suite_run(name: str, checks: Sequence, config: Mapping[str, Any], inputs: Sequence[Path], report: Path | None
              ) -> TrackRun:
    """A suite's run: the thresholds as metrics (value and passed), the report as artifact, and one nested run
    per audit it ran, each what ``audit track`` gives of that audit's files."""
    metrics = {}
    for c in checks:
        if c.value is not None:
            metrics[_key(f"check.{c.name}")] = float(c.value)
        metrics[_key(f"check.{c.name}.passed")] = float(bool(c.passed))
    metrics["checks_failed"] = float(sum(not c.passed for c in checks))
    run = TrackRun(f"suite {name}", "run", params_of({**config, "textaudit_version": __version__}, _secrets()),
                   metrics, {"textaudit.command": "run", "textaudit.version": __version__},
                   [str(report)] if report is not None else [])
    run.children = [run_of_files(p) for p in inputs]
    return run
