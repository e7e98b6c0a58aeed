"""The ``audit`` app and what every command shares: one error handler, the common options, output.

Results go to stdout (a readable table, or with ``--json`` one JSON object as the last line);
progress and notices go to stderr. A :class:`~textaudit.errors.TextAuditError` raised anywhere
below becomes ``error: <one line>`` on stderr and exit code 2 — here, in :class:`AuditGroup`,
and nowhere else.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import sys
import time
import typing
from pathlib import Path
from typing import Annotated, Any, Callable, Iterator, NoReturn, Optional, Sequence

import typer
from typer.core import TyperCommand, TyperGroup
from typer.exceptions import TyperException

from textaudit.backends import make_backend
from textaudit.environment import check_environment
from textaudit.errors import TextAuditError
from textaudit.formats.margins import MARGIN_COLUMNS, margin_rows, margin_title, margin_verdicts
from textaudit.kinds import resumable_commands
from textaudit.models.options import ModelOptions, use_model_options
from textaudit.models.prompt import load_prompt
from textaudit.models.registry import check_model_options
from textaudit.models.zoo.names import check_zoo_label, split_robust
from textaudit.neighborhoods.store import use_score_cache, use_store
from textaudit.request import SHARED, Spec, flags_of, from_command, specs
from textaudit.secrets import RedactingStream, register_env, register_url
from textaudit.stats import format_ci  # noqa: F401 - the commands import it from here
from textaudit.track import Target, check_tracker, keep_pending, log_run, run_of_summary

__all__ = ["AuditGroup", "fail", "AuditCommand", "app", "emit_json", "print_table", "notice", "ModelOpt",
           "DataOpt", "TextColumnOpt", "LabelColumnOpt", "LimitOpt", "SampleOpt", "PairColumnOpt",
           "MlmOpt", "LanguageOpt", "OutputOpt", "ResumeOpt", "SeedOpt", "ShardOpt", "JsonOpt",
           "format_ci",
           "MODEL_HELP", "with_model_options", "with_store_option", "StoreOpt", "with_track_option",
           "finished", "finished_run", "conclude", "TrackExperimentOpt", "TrackRunIdOpt", "option_group", "with_backend_options",
           "with_request", "audit_command",
           "BACKEND_OPTIONS"]

#: what an interrupted command keeps, and how to continue: commands with a results file (--output)
INTERRUPT_HINT = "results written so far are kept; rerun with --resume to continue"
#: ... the same commands run without --output
INTERRUPT_NO_OUTPUT = "nothing was kept (no --output was given); pass --output FILE to keep results as they come"
INTERRUPT_HINTS = {
    "train": "the last finished epoch is kept; run the same command again to resume",
    "train-mlm": "the best checkpoint so far is kept at --out; run the same command again to resume",
    "mlm-corpus": "the batches generated so far are kept; run the same command again to resume",
}


def typer_annotation(hint: Any, name: str, spec: Any) -> Any:
    """The typer option of a request field or a shared option (:mod:`textaudit.request`): its flags, help, range
    (a ``sep`` list: one string, ``--models cnn,lstm``)."""
    # (click's bounds are inclusive: an open range is the request's own check, one line in its words)
    bounds = {} if spec.open else {k: v for k, v in (("min", spec.low), ("max", spec.high)) if v is not None}
    if spec.sep:
        hint = str
    if spec.argument:
        return Annotated[hint, typer.Argument(help=spec.help, **bounds)]
    return Annotated[hint, typer.Option(*flags_of(name, spec), help=spec.help, **bounds)]


def _shared(hint: Any, name: str) -> Any:
    return typer_annotation(hint, name, SHARED[name])


MODEL_HELP = SHARED["model"].help
ModelOpt = _shared(str, "model")
DataOpt = _shared(str, "data")
TextColumnOpt = _shared(Optional[str], "text_column")
LabelColumnOpt = _shared(Optional[str], "label_column")
LabelMapOpt = _shared(Optional[str], "label_map")
LimitOpt = _shared(Optional[int], "limit")
SampleOpt = _shared(Optional[int], "sample")
PairColumnOpt = _shared(Optional[str], "pair_column")
OutputOpt = _shared(Optional[Path], "output")
ResumeOpt = _shared(bool, "resume")
SeedOpt = _shared(int, "seed")
ShardOpt = _shared(Optional[str], "shard")
MlmOpt = _shared(Optional[str], "mlm")
LanguageOpt = _shared(Optional[str], "language")
#: the options of the command groups (where the work runs, the store, tracking, how a result prints), each stated
#: once beside the audits' shared options (textaudit.request.SHARED)
GROUPS: dict[str, Spec] = {
    "backend": Spec("serial (here, one example after another) or ray (Ray workers)."),
    "address": Spec("Ray cluster to use (auto, ray://host:10001); default: start a local Ray."),
    "workers": Spec("Ray workers (each loads the models once).", low=1),
    "gpus_per_worker": Spec("GPUs per Ray worker (0.25: four share one).", low=0.0),
    "cpus_per_worker": Spec("CPUs per Ray worker.", low=0.01),
    "json_out": Spec("Print one JSON object as the last line of stdout.", ("--json",)),
    "store": Spec("The neighbourhood store: masked-LM answers kept on disk and shared by every run, model, process and "
                  "worker (default: $TEXTAUDIT_CACHE/neighborhoods.sqlite, or TEXTAUDIT_STORE); a file path, or off."),
    "score_cache": Spec("The classifiers' scores kept in the store across runs: auto (models with fingerprinted weights: "
                        "zoo, hf:, llm:), all (plug-ins and endpoints too), off. Default: TEXTAUDIT_SCORE_CACHE, else "
                        "auto."),
    "track": Spec("Log the audit as a run of an experiment tracker: mlflow (where: MLFLOW_TRACKING_URI, else MLflow's "
                  "own default in the working folder: ./mlflow.db, or ./mlruns before MLflow 3). A tracker that is "
                  "down costs a warning, never the audit; audit track logs it later."),
    "track_experiment": Spec("The tracker's experiment (created if missing; default: MLFLOW_EXPERIMENT_NAME, else the "
                             "parent run's, else the tracker's default)."),
    "track_run_id": Spec("Log the audit as a nested run of this existing run (e.g. the run that trained the model)."),
}


def _group(hint: Any, name: str) -> Any:
    return typer_annotation(hint, name, GROUPS[name])


JsonOpt = _group(bool, "json_out")


_PANEL = "LLM and HTTP models"
_ENGINE = "Engine"
#: the options :func:`with_model_options` adds: name -> (annotation, default)
MODEL_OPTIONS: dict[str, tuple[Any, Any]] = {
    "prompt_file": (Annotated[Optional[Path], typer.Option("--prompt-file", rich_help_panel=_PANEL, help=(
        "TOML prompt of an llm: model or OpenAI-compatible endpoint: template with {text}, \\[labels] verbalisers, "
        "optional \\[\\[examples]] (default: the built-in sentiment prompt)."))], None),
    "api_key_env": (Annotated[Optional[str], typer.Option("--api-key-env", rich_help_panel=_PANEL, help=(
        "Environment variable holding the endpoint's API key (default: OPENAI_API_KEY or TEXTAUDIT_API_KEY "
        "when set); never logged or written."))], None),
    "concurrency": (Annotated[int, typer.Option("--concurrency", min=1, rich_help_panel=_PANEL, help=(
        "HTTP requests in flight at once."))], 4),
    "timeout": (Annotated[float, typer.Option("--timeout", min=0.001, max=86400.0, rich_help_panel=_PANEL, help=(
        "Seconds one HTTP request may take, all of it: connecting, sending and the whole answer."))], 60.0),
    "retries": (Annotated[int, typer.Option("--retries", min=0, rich_help_panel=_PANEL, help=(
        "Retries of a request that got 429, 5xx, a timeout or a dropped connection (exponential backoff)."))], 4),
    "query_budget": (Annotated[Optional[int], typer.Option("--query-budget", min=1, rich_help_panel=_PANEL, help=(
        "Stop (results kept, --resume continues) before sending more texts than this to the endpoint."))], None),
    "cost_budget": (Annotated[Optional[float], typer.Option("--cost-budget", min=0.0, rich_help_panel=_PANEL, help=(
        "Stop once the tokens the endpoint reports cost this much (with --cost-per-1k-tokens)."))], None),
    "cost_per_1k_tokens": (Annotated[Optional[float], typer.Option("--cost-per-1k-tokens", min=0.0, rich_help_panel=_PANEL,
                                                                     help="Price of 1,000 tokens, for --cost-budget.")], None),
    "scores": (Annotated[str, typer.Option("--scores", rich_help_panel=_PANEL, help=(
        "OpenAI-compatible endpoints: logprobs (class scores from next-token log-probabilities), labels (the class "
        "read from the generated text: SO-Enum, SO-Beam and bias run on labels; Genetic, BAE and TextAttack recipes "
        "need --samples) or auto (one probe request at load decides)."))], "auto"),
    "samples": (Annotated[int, typer.Option("--samples", min=1, rich_help_panel=_PANEL, help=(
        "Label-only endpoints: probabilities are the frequencies of N completions sampled at --temperature."))], 1),
    "temperature": (Annotated[Optional[float], typer.Option("--temperature", min=0.0, max=2.0, rich_help_panel=_PANEL, help=(
        "Label-only completions' temperature (default: 0, or 1.0 with --samples)."))], None),
    "prompts_per_request": (Annotated[Optional[int], typer.Option("--prompts-per-request", min=1, rich_help_panel=_PANEL, help=(
        "Prompts in one /completions request (1 for servers that refuse a list; default: 16, and 1 after the "
        "first refusal)."))], None),
    "precision": (Annotated[Optional[str], typer.Option("--precision", rich_help_panel=_ENGINE, help=(
        "fp32 or bf16 (autocast) for torch classifiers and the masked LM (default: bf16 on CUDA, fp32 on a CPU)."))], None),
    "batch_tokens": (Annotated[Optional[int], typer.Option("--batch-tokens", min=1, rich_help_panel=_ENGINE, help=(
        "Padded tokens per forward of a torch classifier or the masked LM (default: 4096 on a CPU, 65536 on a GPU)."))],
                     None),
}


def option_group(command: Callable, options: dict[str, tuple[Any, Any]],
                 around: Callable[[dict[str, Any], dict[str, Any], Callable[..., Any]], Any], *,
                 into: str | None = None, first: bool = False) -> Callable:
    """Give ``command`` a group of options declared once (``options``: name → (annotation, default)).

    At each call the group's values are taken out of the command's arguments and handed to
    ``around(values, arguments, go)`` (``arguments``: the command's own, to read), which checks them, sets up
    what they ask for and calls ``go()`` to run the command.
    ``into``: the name of one of the command's own parameters (not an option) that receives what ``around``
    passes to ``go(value)`` — e.g. the backend the options describe — and that typer never sees. ``first``: the
    group's options come before the command's own in its help (a request's fields before ``--json``)."""
    sig = inspect.signature(command, eval_str=True)
    hints = typing.get_type_hints(command, include_extras=True)

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in options}

        def go(built: Any = None) -> Any:
            return command(*args, **kwargs, **({into: built} if into else {}))

        return around(values, kwargs, go)

    kept = [p for name, p in sig.parameters.items() if name != into]
    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=ann)
             for name, (ann, default) in options.items()]
    if first:  # typer passes every option by name: the command's own become keyword-only behind the group's
        kept = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in kept]
    run.__signature__ = sig.replace(parameters=[*extra, *kept] if first else [*kept, *extra])  # type: ignore[attr-defined]
    run.__annotations__ = {**{k: v for k, v in hints.items() if k != into}, **{p.name: p.annotation for p in extra}}
    return run


def with_model_options(command: Callable | None = None, *, exclude: tuple[str, ...] = ()) -> Callable:
    """Give a command that takes ``--model`` the options of ``llm:`` and ``http(s)://`` models
    (:data:`MODEL_OPTIONS`, in their own help panel) and put them in effect while it runs
    (:func:`textaudit.models.options.use_model_options`), for every model it loads. ``exclude``: options
    the command does not take (one of its own has the name: ``audit certify --samples``), left at their default."""
    if command is None:
        return functools.partial(with_model_options, exclude=exclude)

    def around(values: dict[str, Any], arguments: dict[str, Any], go: Callable[..., Any]) -> Any:
        opts = ModelOptions(**values)
        if isinstance(arguments.get("model"), str):
            check_model_options(arguments["model"], opts)  # before any data or masked LM loads
        if opts.prompt_file is not None:
            load_prompt(opts.prompt_file)  # a broken prompt file, too
        with use_model_options(opts):
            return go()

    return option_group(command, {n: MODEL_OPTIONS[n] for n in MODEL_OPTIONS if n not in exclude}, around)


StoreOpt = _group(Optional[str], "store")


def with_store_option(command: Callable) -> Callable:
    """Give a command that builds neighbourhoods ``--store PATH|off`` and put it in effect while it runs
    (:class:`textaudit.neighborhoods.store.use_store`) for every masked LM it loads; a bad value is a
    one-line error before anything loads."""

    def around(values: dict[str, Any], arguments: dict[str, Any], go: Callable[..., Any]) -> Any:
        with use_store(values["store"]), use_score_cache(values["score_cache"]):
            return go()

    return option_group(command, {"store": (StoreOpt, None),
                                  "score_cache": (_group(Optional[str], "score_cache"), None)}, around)


def with_request(cls: type, *, into: str = "request") -> Callable:
    """Give a command every field of the request class ``cls`` as an option (same default, range and help) and
    hand the command one ``cls`` built from them in its parameter ``into``."""
    options = {name: (typer_annotation(hint, name, spec),
                      spec.sep.join(default) if spec.sep and isinstance(default, list) else default)
               for name, (hint, default, spec) in specs(cls).items()}

    def decorate(command: Callable) -> Callable:
        def around(values: dict[str, Any], arguments: dict[str, Any], go: Callable[..., Any]) -> Any:
            request = from_command(cls, values)
            models = getattr(request, "models", None)
            for model in [getattr(request, "model", None), *(models if isinstance(models, list) else [])]:
                check_zoo_label(model, getattr(request, "target_label", None))
            return go(request)

        return option_group(command, options, around, into=into, first=True)

    return decorate


def audit_command(cls: type, *, backend: bool = False, store: bool = True, exclude: tuple[str, ...] = (),
                  model_options: bool = True, group: Any = None, name: str | None = None) -> Callable:
    """An audit's command in one line: its request's fields as options (:func:`with_request`), the option groups
    it takes — ``backend`` (``--backend`` …), the model's transport (``model_options``, less ``exclude``),
    ``store`` (``--store``, ``--score-cache``) and tracking — and its registration under ``name`` (default: the
    function's) in ``group`` (a sub-command group; default: ``audit`` itself). The command itself is check → run →
    print."""

    def decorate(command: Callable) -> Callable:
        wrapped = with_request(cls)(command)
        if backend:
            wrapped = with_backend_options(wrapped)
        if model_options:
            wrapped = with_model_options(exclude=exclude)(wrapped)
        if store:
            wrapped = with_store_option(wrapped)
        return (group or app).command(name, cls=AuditCommand)(with_track_option(wrapped))

    return decorate


#: the options of where the work runs, declared once (:func:`with_backend_options`)
BACKEND_OPTIONS: dict[str, tuple[Any, Any]] = {
    name: (_group(hint, name), default) for name, hint, default in (
        ("backend", str, "serial"), ("address", Optional[str], None), ("workers", int, 2),
        ("gpus_per_worker", float, 0.0), ("cpus_per_worker", float, 1.0))}


def with_backend_options(command: Callable) -> Callable:
    """Give a command that runs jobs ``--backend serial|ray`` with ``--address``, ``--workers``,
    ``--gpus-per-worker`` and ``--cpus-per-worker``; the command's own parameter ``runner`` receives the backend
    (:func:`textaudit.backends.make_backend`: checked, not started — a bad value is a one-line error before
    anything loads)."""

    def around(values: dict[str, Any], arguments: dict[str, Any], go: Callable[..., Any]) -> Any:
        return go(make_backend(values.pop("backend"), **values))

    return option_group(command, BACKEND_OPTIONS, around, into="runner")


TrackExperimentOpt = _group(Optional[str], "track_experiment")
TrackRunIdOpt = _group(Optional[str], "track_run_id")
_TRACK_OPTIONS = {"track": _group(Optional[str], "track"), "track_experiment": TrackExperimentOpt,
                  "track_run_id": TrackRunIdOpt}
#: what the running command hands the tracker (:func:`finished`): its summary and files, or a whole run
_FINISHED: dict[str, Any] = {}


def finished(summary: dict, files: Any = ()) -> dict:
    """Hand a tracked command's result to ``--track``: its summary (the ``--json`` object: its numbers become
    the run's metrics) and the results files or folders it wrote (``None`` left out). Returns ``summary``."""
    _FINISHED.update(summary=summary, files=[Path(f) for f in files if f is not None])
    return summary


def say_default_model(request: Any) -> None:
    """Name the model an audit uses when the user gave no ``--model`` (a default nobody chose is said, never silent)."""
    if getattr(request, "model_defaulted", False):
        notice(f"notice: no --model given: auditing {request.model}, the default (--model NAME chooses; audit train "
               f"--model {request.model} trains it ahead if it is not trained yet)")


def conclude(summary: dict, output: Path | None, json_out: bool, *, files: Any = None) -> bool:
    """The end every results-writing command shares: say where the results are (``output``), hand the summary and
    the ``files`` it wrote (default: ``output``) to ``--track`` (:func:`finished`) and, with ``--json``, print it;
    True when it was printed (the command is done)."""
    if output:
        notice(f"results: {output}")
    finished(summary, [output] if files is None else files)
    if json_out:
        emit_json(summary)
    return json_out


def finished_run(run: Any, track: str | None = None) -> None:
    """Hand ``--track`` a whole run (:class:`textaudit.track.TrackRun`: a suite's, with its nested runs; or a
    function that builds it, called only when the run is logged);
    ``track``: the tracker the command's own settings ask for (a suite's ``[suite] track``), logged even
    without ``--track``."""
    _FINISHED.update(run=run, track=track)


def _log_finished(command: str, options: dict, target: Any) -> None:
    """Log what the command handed :func:`finished` (a warning, never an error, when the tracker fails)."""
    if "run" in _FINISHED:
        run = _FINISHED["run"]() if callable(_FINISHED["run"]) else _FINISHED["run"]
    elif "summary" in _FINISHED:
        opts = {k: str(v) if isinstance(v, Path) else v for k, v in options.items() if k != "json_out"}
        run = run_of_summary(command, _FINISHED["summary"], opts, _FINISHED.get("files", []),
                             [options["api_key_env"]] if options.get("api_key_env") else [])
    else:
        return
    if run.start_ms is None and "started_ms" in _FINISHED:  # the audit's own time, not the logging's
        run.start_ms, run.end_ms = _FINISHED["started_ms"], _FINISHED.get("ended_ms")
    try:
        rid = log_run(run, target)
    except TextAuditError as e:
        kept = next((Path(a) for a in run.artifacts if Path(a).exists()), None)
        where = "rerun with --output FILE to keep what audit track can log later"
        if kept is not None:
            try:
                where = f"kept in {keep_pending(run, kept)}: audit track {kept} logs it"
            except (TextAuditError, OSError) as why:  # a file of the user's own under that name stays as it is
                where = f"not kept ({why}); audit track {kept} logs it from its records"
        notice(f"warning: not logged to MLflow ({e}); the audit's results are complete; {where}")
        return
    notice(f"tracked: MLflow run {rid}" + (f" (nested in {target.parent_run_id})" if target.parent_run_id else ""))


def with_track_option(command: Callable) -> Callable:
    """Give an audit command ``--track mlflow``, ``--track-experiment`` and ``--track-run-id``: the command runs
    as always, then what it handed :func:`finished` is logged as one run (:mod:`textaudit.track`) — also when
    it exits 1 (a suite's failed threshold). A missing MLflow is a one-line error before anything runs."""

    def around(values: dict[str, Any], arguments: dict[str, Any], go: Callable[..., Any]) -> Any:
        ctx = values.pop("_track_ctx")
        track, experiment, parent = (values[k] for k in _TRACK_OPTIONS)

        check_tracker(track)  # before anything runs
        name, target = " ".join(ctx.command_path.split()[1:]), Target(experiment, parent)
        _FINISHED.clear()

        def log() -> None:
            if track is not None or _FINISHED.get("track"):
                _log_finished(name, arguments, target)
            elif experiment or parent:
                notice("warning: --track-experiment and --track-run-id go with --track mlflow; nothing was logged")

        started = int(time.time() * 1000)
        try:
            result = go()
        except typer.Exit as e:
            if e.exit_code in (0, 1):  # finished (1: a failed threshold): the run is still worth logging
                _FINISHED.update(started_ms=started, ended_ms=int(time.time() * 1000))
                log()
            raise
        _FINISHED.update(started_ms=started, ended_ms=int(time.time() * 1000))
        log()
        return result

    options = {name: (annotation, None) for name, annotation in _TRACK_OPTIONS.items()}
    return option_group(command, {**options, "_track_ctx": (typer.Context, inspect.Parameter.empty)}, around)


class _FlagsShowNoType:
    """``--help`` shows no ``<bool>`` type on flags (a flag takes no value), and a bounded number as
    ``<int>``/``<float>`` rather than ``<int range> [x>=1]`` (the bound is in the error message),
    which would squeeze the help column."""

    def get_params(self, ctx):  # type: ignore[override]
        params = super().get_params(ctx)  # type: ignore[misc]
        for p in params:
            if getattr(p, "is_flag", False) and p.metavar is None:
                p.metavar = ""
            elif p.metavar is None and (getattr(p, "min", None) is not None or getattr(p, "max", None) is not None):
                p.metavar = "<int>" if str(p.bare_type()) == "int" else "<float>"
        return params


def fail(message: str) -> NoReturn:
    """Print ``error: <message>`` (one line) on stderr and exit with code 2."""
    typer.echo("error: " + " ".join(str(message).split()), err=True)
    raise typer.Exit(2)


def usage_message(e: TyperException) -> str:
    """A typer usage error (unknown command or option, a value of the wrong type, a missing option)
    as one line, with where to read more."""
    ctx = getattr(e, "ctx", None)
    where = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
    return e.format_message().rstrip() + where


def _is_help(e: TyperException) -> bool:
    """``audit`` (or a group) with no arguments: typer shows the help, which is what the user wants."""
    return type(e).__name__ == "NoArgsIsHelpError"  # typer's own test; the class is not public


def os_error_message(e: OSError) -> str:
    """An ``OSError`` (an unwritable --output, a full disk, a directory where a file is expected) as one line."""
    what = e.strerror or type(e).__name__
    return f"{e.filename}: {what}" if e.filename else f"{what}: {e}"


@contextlib.contextmanager
def redacted_streams(argv: Sequence[str] = ()) -> Iterator[None]:
    """Run a command with its stdout and stderr passing :func:`textaudit.secrets.redact`: the secrets of the
    environment (API keys, tracker tokens) and of every URL among ``argv`` (a model spec's user:password@
    and credential query values) are known before the command reads any of them."""
    register_env()
    for a in argv:
        for part in str(a).split(","):  # --models a,b,c
            if "://" in part:
                register_url(part.strip())
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(out), RedactingStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


#: the group's own options (``audit --threads 1 attack ...``), also taken where users put options: after the command
GLOBAL_OPTIONS = {"--threads": True, "--trust-remote-code": False}  # name: takes a value


def hoist_global_options(args: list[str], own: Callable[[str], set[str]] = lambda command: set()) -> list[str]:
    """``audit attack --threads 1 ...`` as ``audit --threads 1 attack ...``: the group's options given after the
    command are moved before it, unless the command has an option of that name itself (``own(command)``:
    ``audit train-mlm --threads`` is its own)."""
    first, i = None, 0
    while i < len(args):  # the command: the first word that is no option's value
        a = args[i]
        if not a.startswith("-"):
            first = i
            break
        i += 2 if GLOBAL_OPTIONS.get(a) else 1
    if first is None:
        return args
    mine = own(args[first])
    head, tail, moved = args[:first], [], []
    i = first
    while i < len(args):
        a = args[i]
        name = a.split("=", 1)[0]
        if a == "--":  # what follows is the command's, whatever it looks like
            tail += args[i:]
            break
        if name in GLOBAL_OPTIONS and name not in mine and i > first:
            takes = GLOBAL_OPTIONS[name] and "=" not in a
            moved += args[i:i + 1 + takes]
            i += 1 + takes
            continue
        tail.append(a)
        i += 1
    return head + moved + tail


class AuditGroup(_FlagsShowNoType, TyperGroup):
    """The one place that turns every failure the user can fix into one line on stderr and exit 2:
    :class:`TextAuditError` from the library (bad input, a model that raised), typer/click usage
    errors (unknown command, ``--k abc``, a missing ``--model``) and ``OSError`` on our files."""

    def make_context(self, info_name, args, parent=None, **extra):  # type: ignore[override]
        if parent is None:
            args = hoist_global_options(list(args), self._own_options)
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except TyperException as e:  # the group's own options, e.g. --threads abc
            if _is_help(e):
                raise
            fail(usage_message(e))

    def _own_options(self, name: str) -> set[str]:
        """The option names of command ``name`` (none for an unknown one: its error comes later)."""
        cmd = self.commands.get(name)
        return {o for p in getattr(cmd, "params", []) for o in getattr(p, "opts", [])} if cmd is not None else set()

    def invoke(self, ctx):  # type: ignore[override]
        argv = [*getattr(ctx, "_protected_args", []), *ctx.args]  # the subcommand and its arguments
        with redacted_streams(argv):  # every line the command prints passes the one redaction
            return self._invoke(ctx, argv)

    def _invoke(self, ctx, argv: list[str]):
        check_numbers(ctx)  # the group's own (--threads)
        try:
            return super().invoke(ctx)
        except TyperException as e:
            if _is_help(e):
                raise
            fail(usage_message(e))
        except TextAuditError as e:
            fail(str(e))
        except OSError as e:
            fail(os_error_message(e))
        except KeyboardInterrupt:
            typer.echo(f"interrupted: {interrupt_hint(argv)}", err=True)
            raise typer.Exit(130) from None


#: options where ±inf means something: δ = inf keeps the top κ candidates however far below the best logit
INFINITE_OK = frozenset({"delta"})
#: the largest sensible value of an option, where a larger one can only be a slip (10 ** 30 workers, a
#: thread pool of a million, k beyond any sentence's length); every other integer is at most INT_LIMIT
NUMBER_LIMITS: dict[str, float] = {
    "k": 100, "enumerate_k": 100, "kappa": 100_000, "beam": 100_000,
    "workers": 10_000, "threads": 4_096, "concurrency": 1_024, "retries": 100, "samples": 10_000,
    "prompts_per_request": 10_000, "epochs": 100_000, "rounds": 10_000, "seeds": 100_000,
    "gpus_per_worker": 1_024, "cpus_per_worker": 100_000, "lr": 100.0, "alpha": 1e6, "rank": 100_000,
    "max_new_tokens": 1_000_000, "synthetic_batches": 10_000_000,
}
#: integers beyond this are refused whatever the option (a seed, a size, a count of 10 ** 30)
INT_LIMIT = 2**31 - 1
#: options a command checks itself, NaN, ±inf and absurd sizes included, with a message that says more
#: (harden's ranges say what λ weighs and what is usual): :func:`check_numbers` leaves them to it
OWN_CHECKS: dict[str, frozenset[str]] = {
    "harden": frozenset({"train_sample", "epochs", "rounds", "neighbors", "found_weight", "pairs_per_sentence",
                         "eval_limit", "max_train", "consistency_weight", "lr"}),
    "store prune": frozenset({"max_gb"}),
}


def check_numbers(ctx: typer.Context) -> None:
    """Refuse, in one line, a number no option can mean: NaN; ±inf (but where :data:`INFINITE_OK`); a value
    beyond :data:`NUMBER_LIMITS` or :data:`INT_LIMIT`. Runs after parsing, before a command does anything;
    each option's own range (``--limit`` at least 1, ...) is checked by the parser before, and the options
    of :data:`OWN_CHECKS` by their command."""
    import math

    own = OWN_CHECKS.get(" ".join(ctx.command_path.split()[1:]), frozenset())
    for p in ctx.command.params:
        value = ctx.params.get(p.name or "")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not getattr(p, "opts", None) or p.name in own:
            continue
        name = p.opts[0]
        if isinstance(value, float) and math.isnan(value):
            fail(f"{name} nan is not a number; give a finite value")
        if isinstance(value, float) and math.isinf(value):
            if p.name in INFINITE_OK:
                continue
            fail(f"{name} {value} is not finite; give a number (or leave {name} out for its default)")
        cap = NUMBER_LIMITS.get(p.name or "", INT_LIMIT)
        if abs(value) > cap:
            shown = f"{value:.3g}" if isinstance(value, float) or abs(value) > 10**12 else str(value)
            fail(f"{name} {shown} is too large (at most {cap:g}); is it a slip?")


class AuditCommand(_FlagsShowNoType, TyperCommand):
    """A command of ``audit`` (its flags show no type in ``--help``; its numbers are checked by
    :func:`check_numbers` before it runs)."""

    def invoke(self, ctx):  # type: ignore[override]
        check_numbers(ctx)
        return super().invoke(ctx)


app = typer.Typer(
    cls=AuditGroup,
    name="audit",
    help="Audit NLP text classifiers beyond their test set.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _global_options(
    ctx: typer.Context,
    threads: Optional[int] = typer.Option(None, "--threads", help=(
        "CPU threads torch uses, before or after the command (default: $TEXTAUDIT_THREADS, else one per core; on a "
        "busy machine inference uses the free cores and a notice says so, training keeps the count: "
        "benchmarks/threads.py measures it)."), show_default=False),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help=(
        "Let a HuggingFace model you name (hf:<dir-or-id>, --mlm) run the Python code it ships (auto_map in "
        "its config.json). Off by default: such a model is refused with a one-line error.")),
) -> None:
    """Audit NLP text classifiers beyond their test set."""
    if ctx.invoked_subcommand != "doctor":  # doctor is how one finds out what is wrong with them
        check_environment()
    if trust_remote_code:
        os.environ["TEXTAUDIT_TRUST_REMOTE_CODE"] = "1"
    if threads is not None:
        if threads < 1:
            raise TextAuditError(f"--threads must be at least 1 (got {threads})")
        os.environ["TEXTAUDIT_THREADS"] = str(threads)


def _ibp_certification(argv: list[str]) -> bool:
    """``audit certify`` by IBP (one pass, nothing resumes): --method ibp, or a zoo *-ibp(-jia) model without --method."""
    if argv[:1] != ["certify"]:
        return False
    methods = [b for a, b in zip(argv, argv[1:]) if a == "--method"] + [a.split("=", 1)[1] for a in argv
                                                                        if a.startswith("--method=")]
    return methods[-1:] == ["ibp"] or (not methods and any(split_robust(a)[1] for a in argv))


def interrupt_hint(argv: list[str]) -> str:
    """What an interrupt of ``audit <argv>`` kept and how to continue."""
    command = argv[0] if argv else ""
    if command in INTERRUPT_HINTS:
        return INTERRUPT_HINTS[command]
    line = " ".join(argv[:2])
    if not any(line == c or line.startswith(c + " ") for c in resumable_commands()) or _ibp_certification(argv):
        return "nothing to keep"
    has_output = any(a in ("--output", "-o") or a.startswith("--output=") for a in argv)
    return INTERRUPT_HINT if has_output else INTERRUPT_NO_OUTPUT


def emit_json(obj: Any) -> None:
    """Print ``obj`` as one JSON line on stdout (the last line of a ``--json`` command)."""
    typer.echo(json.dumps(obj, default=str))


#: the width a table is laid out in when stdout is not a terminal (a CI log, a pipe) ...
TABLE_WIDTH = 120
#: ... widened to the table's natural width up to this (no cell wraps), and beyond it when a column's longest word
#: needs it: a log line may be long, a word is never broken
LOG_WIDTH = 200


def print_table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """Print a rich table on stdout: at the terminal's width; else (a log) at :data:`TABLE_WIDTH`, widened to the
    table's natural width up to :data:`LOG_WIDTH` and to its minimum (each column as wide as its longest word)."""
    from rich.console import Console
    from rich.measure import Measurement
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*["" if v is None else str(v) for v in r])
    terminal = wide_terminal()
    console = Console(width=terminal or TABLE_WIDTH)
    if not terminal:  # (a terminal folds at its own width)
        need = Measurement.get(console, console.options.update_width(10_000), table)
        console = Console(width=max(TABLE_WIDTH, min(need.maximum, LOG_WIDTH), need.minimum))
    console.print(table)


def wide_terminal(columns: int = 0) -> int:
    """The width of the terminal stdout is, when it is one at least ``columns`` wide; else 0 (a log, a pipe)."""
    import shutil

    if not sys.stdout.isatty():
        return 0
    width = shutil.get_terminal_size((0, 0)).columns
    return width if width >= max(columns, 1) else 0


def notice(msg: str) -> None:
    """Print a one-line notice on stderr."""
    typer.echo(msg, err=True)


def print_margins(rate: str, tests: list[tuple[str, str, dict]]) -> None:
    """The non-inferiority table of ``rate`` (higher is worse) for ``(model, baseline, non_inferiority(...))``
    triples (:mod:`textaudit.formats.margins`: the report shows the same), then each verdict as a sentence."""
    print_table(margin_title(rate, tests), MARGIN_COLUMNS, margin_rows(tests))
    for line in margin_verdicts(tests):
        typer.echo(line)


def print_sampled(sampled: dict, what: str = "findings") -> None:
    """hit@k of findings on an endpoint that samples N answers per text: the mean flip rate and hit@k for
    k ≤ N with their intervals (:func:`textaudit.stats.hit_rates`)."""
    ks = list(sampled["hit_at_k"])
    rows = [["flip rate", sampled["flip_rate"], format_ci(sampled["flip_rate_ci95"])]]
    rows += [[f"hit@{k}", sampled["hit_at_k"][k], format_ci(sampled["hit_at_k_ci95"][k])] for k in ks]
    print_table(f"{sampled['findings']} {what} over {sampled['draws']} sampled answers each: hit@k = the chance that at "
                f"least one of k draws flips ({sampled['ci_method']})", ["", "mean", "95% CI"], rows)
