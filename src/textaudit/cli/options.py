"""The options every command shares, declared once: an audit's request as its options (:func:`with_request`), the
option groups an audit takes — where it runs, an endpoint's transport, the store, tracking — and
:func:`audit_command`, which registers an audit's command with all of them."""

from __future__ import annotations

import functools
import inspect
import time
import typing
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

from textaudit.backends import make_backend
from textaudit.cli.app import AuditCommand, app
from textaudit.cli.output import _FINISHED, _log_finished, notice
from textaudit.models.options import ModelOptions, use_model_options
from textaudit.models.prompt import load_prompt
from textaudit.models.registry import check_model_options
from textaudit.models.zoo.names import check_zoo_label
from textaudit.neighborhoods.score_cache import use_score_cache
from textaudit.neighborhoods.store import use_store
from textaudit.request import SHARED, Spec, flags_of, from_command, specs
from textaudit.stats import format_ci  # noqa: F401 - the commands import it from here
from textaudit.track import Target, check_tracker

__all__ = ["typer_annotation", "MODEL_HELP", "ModelOpt", "DataOpt", "TextColumnOpt", "LabelColumnOpt", "LabelMapOpt",
           "LimitOpt", "SampleOpt", "PairColumnOpt", "OutputOpt", "ResumeOpt", "SeedOpt", "ShardOpt", "MlmOpt",
           "LanguageOpt", "GROUPS", "JsonOpt", "MODEL_OPTIONS", "option_group", "with_model_options", "StoreOpt",
           "with_store_option", "with_request", "audit_command", "BACKEND_OPTIONS", "with_backend_options",
           "TrackExperimentOpt", "TrackRunIdOpt", "with_track_option"]


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
