"""``audit learnability``: learnability, robustness and post-augmentation Δ of perturbations."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from textaudit.backends import Backend
from textaudit.cli.app import (
    AuditCommand,
    JsonOpt,
    OutputOpt,
    ResumeOpt,
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
from textaudit.data import dataset_id
from textaudit.errors import TextAuditError
from textaudit.perturbations.noise import NOISE_PERTURBATIONS
from textaudit.robustness.learnability import DEFAULT_PROBABILITIES, run_study
from textaudit.robustness.plots import plot_study

PERTURBATION_HELP = "A perturbation, a comma list, or all: " + ", ".join(NOISE_PERTURBATIONS) + "."


@app.command(cls=AuditCommand)
@with_track_option
@with_backend_options
def learnability(
    model: str = typer.Option("bow", "--model", "-m", help="Comma-separated zoo architectures, e.g. bow,cnn."),
    perturbation: str = typer.Option("all", "--perturbation", help=PERTURBATION_HELP),
    train_size: Optional[int] = typer.Option(10_000, "--train-size", min=1, help="Training texts sampled from SST-2 train."),
    seeds: int = typer.Option(1, "--seeds", min=1, help="Seeds averaged per (model, perturbation)."),
    probabilities: Optional[str] = typer.Option(None, "--probabilities", help="Comma list of p (default 0.001,...,1.0)."),
    data: str = typer.Option("sst2", "--data"),
    output: OutputOpt = None,
    resume: ResumeOpt = False,
    shard: ShardOpt = None,
    plot: Optional[Path] = typer.Option(None, "--plot", help="Directory for the curves and scatter plots."),
    json_out: JsonOpt = False,
    runner: Backend = None,  # from --backend and its options (with_backend_options)
) -> None:
    """Measure how learnable each perturbation is and relate it to robustness and augmentation gain."""

    part = check_output(output, resume, shard, train_size=train_size, data=dataset_id(data, "train"))
    perts = list(NOISE_PERTURBATIONS) if perturbation == "all" else [p.strip() for p in perturbation.split(",") if p.strip()]
    try:
        probs = [float(p) for p in probabilities.split(",")] if probabilities else list(DEFAULT_PROBABILITIES)
    except ValueError:
        raise TextAuditError(f"--probabilities must be comma-separated numbers (got '{probabilities}')") from None
    study = run_study([m.strip() for m in model.split(",")], perts, train_size=train_size, seeds=seeds,
                      probabilities=probs, data=data, output=output, resume=resume, shard=part,
                      backend=runner)
    if plot is not None:
        for p in plot_study(study, plot):
            notice(f"plot: {p}")
    for w in study["warnings"]:
        notice(f"warning: {w}")
    finished(study, [output])
    if json_out:
        emit_json(study)
        return
    print_table("perturbation learnability", ["model", "perturbation", "avg learnability", "learnability@1.0",
                                              "robustness", "post-aug Δ"],
                [[r["model"], r["perturbation"], r["avg_learnability"], r["learnability_at"].get("1.0"),
                  r["robustness"], r["post_aug_delta"]] for r in study["results"]])
    if study["spearman"]:
        print_table("Spearman correlation over model × perturbation", ["pair", "ρ", "p"],
                    [[k, v["rho"], v["p"]] for k, v in study["spearman"].items()])
