"""``audit perturbscore build|train|score``: the continuous-equivalent size ε of discrete perturbations."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from textaudit.backends import Backend
from textaudit.cli.app import AuditCommand, AuditGroup, app
from textaudit.cli.options import JsonOpt, SeedOpt, audit_command
from textaudit.cli.output import conclude, emit_json, notice, print_table
from textaudit.errors import TextAuditError
from textaudit.files import check_folder
from textaudit.formats.jsonl import read_jsonl
from textaudit.robustness.perturbscore import (
    PerturbScorer,
    evaluate_scorer,
    mark,
    split_tuples,
)
from textaudit.robustness.perturbscore.request import TuplesRequest

ps_app = typer.Typer(cls=AuditGroup, no_args_is_help=True, help="PerturbScore: ε of discrete perturbations.")
app.add_typer(ps_app, name="perturbscore")


# it needs the model's input embeddings: no endpoint's transport options
@audit_command(TuplesRequest, backend=True, store=False, model_options=False, group=ps_app, name="build")
def build(json_out: JsonOpt = False, runner: Backend = None, request: TuplesRequest = None) -> None:
    """Build (x, x′, edit distance, d, ε) tuples with PGD in the model's embedding space."""
    summary = request.run(runner).summary
    notice(f"tuples: {request.output}")
    if not conclude(summary, None, json_out, files=[request.output]):
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
    check_folder(out, "head.json", "give --out a new folder")  # before the training, not after it
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
