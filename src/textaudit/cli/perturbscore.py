"""``audit perturbscore build|train|score``: the continuous-equivalent size ε of discrete perturbations."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from textaudit.backends import Backend
from textaudit.cli.app import (
    AuditCommand,
    AuditGroup,
    DataOpt,
    JsonOpt,
    ResumeOpt,
    SeedOpt,
    ShardOpt,
    app,
    check_output,
    emit_json,
    finished,
    notice,
    print_table,
    with_backend_options,
    with_track_option,
)
from textaudit.data import load_dataset
from textaudit.errors import TextAuditError
from textaudit.formats.jsonl import read_jsonl
from textaudit.models import load_classifier
from textaudit.robustness.perturbscore import (
    TUPLE_PERTURBATIONS,
    PerturbScorer,
    build_tuples,
    evaluate_scorer,
    mark,
    split_tuples,
)
from textaudit.robustness.perturbscore.tuples import summarize_tuples

ps_app = typer.Typer(cls=AuditGroup, no_args_is_help=True, help="PerturbScore: ε of discrete perturbations.")
app.add_typer(ps_app, name="perturbscore")


@ps_app.command("build", cls=AuditCommand)
@with_track_option
@with_backend_options
def build(
    model: str = typer.Option("cnn", "--model", "-m", help="A zoo model or hf: classifier (needs input embeddings)."),
    perturbation: str = typer.Option("random-swap", "--perturbation", help="random-swap | synonym-swap"),
    n: int = typer.Option(1000, "--n", min=1, help="Perturbations to try (dropped ones included)."),
    data: DataOpt = "sst2:dev",
    output: Path = typer.Option(Path("runs/perturbscore_tuples.jsonl"), "--output", "-o", help="JSONL of tuples, written as it goes."),
    resume: ResumeOpt = False,
    shard: ShardOpt = None,
    space: str = typer.Option("hidden", "--space", help="hidden (pooled representation) | probs"),
    steps: int = typer.Option(5, "--steps", min=1, help="PGD steps per ε."),
    max_eps: float = typer.Option(1.0, "--max-eps", min=0.01, help="Largest ε of the grid (step 0.01)."),
    tolerance: float = typer.Option(0.005, "--tolerance", min=0.0, help="Drop a tuple whose closest shift is off by more."),
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
    runner: Backend = None,  # from --backend and its options (with_backend_options)
) -> None:
    """Build (x, x′, edit distance, d, ε) tuples with PGD in the model's embedding space."""


    if space not in ("hidden", "probs"):
        raise TextAuditError(f"--space must be hidden or probs (got {space})")
    if perturbation not in TUPLE_PERTURBATIONS:
        raise TextAuditError(f"unknown perturbation '{perturbation}'; use one of {', '.join(TUPLE_PERTURBATIONS)}")
    part = check_output(output, resume, shard, perturbation=perturbation, seed=seed, space=space, steps=steps, max_eps=max_eps,
                 tolerance=tolerance)
    ds = load_dataset(data, default_split="dev", require_labels=False)
    runner.start()  # workers import their libraries while the models load here
    clf = load_classifier(model)
    t0 = time.perf_counter()
    recs = build_tuples(clf, list(ds["text"]), perturbation=perturbation, n=n, seed=seed, output=output,
                        resume=resume, space=space, steps=steps, max_eps=max_eps, tolerance=tolerance,
                        ids=ds["id"], shard=part, backend=runner)
    summary = {"model": clf.name, "perturbation": perturbation, **summarize_tuples(recs),
               "seconds": round(time.perf_counter() - t0, 1), "output": str(output)}
    notice(f"tuples: {output}")
    finished(summary, [output])
    if json_out:
        emit_json(summary)
    else:
        print_table("PerturbScore tuples", ["metric", "value"], [[k, v] for k, v in summary.items()])


@ps_app.command("train", cls=AuditCommand)
def train(
    tuples: Path = typer.Option(Path("runs/perturbscore_tuples.jsonl"), "--tuples", help="Output of perturbscore build."),
    out: Path = typer.Option(Path("runs/perturbscorer"), "--out", help="Directory for the trained scorer."),
    epochs: int = typer.Option(3, "--epochs", min=1),
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
) -> None:
    """Train the PerturbScorer on 80% of the tuples; report Kendall τ / Spearman ρ on the other 20%."""

    if not tuples.is_file():
        raise TextAuditError(f"{tuples} not found; run 'audit perturbscore build --output {tuples}' first")
    t0 = time.perf_counter()
    tr, te = split_tuples(read_jsonl(tuples), seed=seed)
    scorer = PerturbScorer().fit(tr, epochs=epochs, seed=seed)
    scorer.save(out)
    res = evaluate_scorer(scorer, te)
    res.update({"n_train": len(tr), "path": str(out), "train_seconds": round(time.perf_counter() - t0, 1)})
    if res.get("note"):
        notice(f"warning: {res['note']}")
    if json_out:
        emit_json(res)
        return
    rows = [[m, v["kendall"], v["spearman"]] for m, v in res["methods"].items()]
    print_table(f"correlation with ε on {res['n_test']} held-out tuples", ["method", "Kendall τ", "Spearman ρ"], rows)


@ps_app.command("score", cls=AuditCommand)
def score(
    original: str = typer.Argument(..., help="The original text."),
    perturbed: str = typer.Argument(..., help="The perturbed text (word-for-word substitutions)."),
    scorer: Path = typer.Option(Path("runs/perturbscorer"), "--scorer", help="Directory written by perturbscore train."),
    json_out: JsonOpt = False,
) -> None:
    """Print the predicted ε of original → perturbed."""

    marked = mark(original, perturbed)
    eps = PerturbScorer(scorer).score(original, perturbed)
    if json_out:
        emit_json({"eps": round(eps, 5), "marked": marked})
        return
    print_table("PerturbScore", ["original", "perturbed", "marked", "ε"], [[original, perturbed, marked, f"{eps:.4f}"]])
