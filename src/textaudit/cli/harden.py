"""``audit harden``: train the found weaknesses out of a model and prove it on held-out examples."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from textaudit.cli.app import (
    AuditCommand,
    DataOpt,
    InFlightOpt,
    JsonOpt,
    MlmOpt,
    ModelOpt,
    SeedOpt,
    app,
    emit_json,
    finished,
    notice,
    print_table,
    with_store_option,
    with_track_option,
)
from textaudit.fairness import parse_pair
from textaudit.formats import harden as ba
from textaudit.harden.run import HardenSettings, parse_eval_attacks
from textaudit.harden.run import harden as run_harden
from textaudit.stats import format_p


@app.command(cls=AuditCommand)
@with_track_option
@with_store_option
def harden(
    model: ModelOpt = "cnn",
    method: str = typer.Option(..., "--method", help=(
        "augment (attack a training sample, add every x̃ and x̃ ⊕ p with the gold label, fine-tune), adversarial "
        "(the same, a fresh sample each round with the current model) or consistency (symmetric-KL loss between "
        "f(x̃) and f(x̃ ⊕ p); with --pair/--group: counterfactual consistency).")),
    out: Path = typer.Option(..., "--out", help=(
        "Results folder: mined weaknesses, the hardened model (out/model: give it to --model), before/after files, "
        "harden.json (audit report renders it). A rerun with the same settings resumes.")),
    attack: str = typer.Option("so-beam", "--attack", help="Attack that mines the training split (augment, adversarial)."),
    k: int = typer.Option(3, "--k", min=1, help="k of the mining attack."),
    data: DataOpt = "sst2",
    train_sample: int = typer.Option(500, "--train-sample", min=1, help=(
        "Training examples attacked (split over the rounds of adversarial), or the sources of consistency pairs.")),
    max_train: Optional[int] = typer.Option(None, "--max-train", min=1, help="Fine-tune on the first N training examples."),
    epochs: int = typer.Option(2, "--epochs", min=1, help="Fine-tuning epochs (augment, consistency)."),
    rounds: int = typer.Option(2, "--rounds", min=1, help="Attack-and-train rounds of adversarial (one epoch each)."),
    lr: Optional[float] = typer.Option(None, "--lr", min=0.0, help="Learning rate (default: the architecture's)."),
    consistency_weight: float = typer.Option(1.0, "--consistency-weight", min=0.0, help="λ of the consistency loss."),
    found_weight: int = typer.Option(1, "--found-weight", min=1, help=(
        "augment, adversarial: each found example is trained on this many times (found examples are few beside "
        "the training split).")),
    neighbors: int = typer.Option(4, "--neighbors", min=0, help="Neighbor_1 sentences per consistency source."),
    pairs_per_sentence: int = typer.Option(1, "--pairs-per-sentence", min=1, help=(
        "consistency without --pair: the best-ranked patch pairs p of each source sentence (1: the one the "
        "second-order attacks choose).")),
    pair: Optional[str] = typer.Option(None, "--pair", help="Protected pair, e.g. he,she: consistency pairs and B before/after."),
    group: Optional[str] = typer.Option(None, "--group", help="A protected group's pairs (gender, nationality, …)."),
    eval_data: str = typer.Option("sst2:dev", "--eval-data", help="Held-out examples of the before/after audit."),
    eval_limit: Optional[int] = typer.Option(200, "--eval-limit", min=1, help="Use the first N held-out examples."),
    eval_attack: str = typer.Option("so-enum:1", "--eval-attack", help=(
        "Attacks of the before/after audit, method[:k] comma-separated (e.g. so-enum:1,so-beam:6,genetic); the "
        "first is the headline.")),
    max_queries: Optional[int] = typer.Option(None, "--max-queries", min=1, help="Query budget per attacked example."),
    mlm: MlmOpt = None,
    lora: bool = typer.Option(False, "--lora", help="hf: models: train LoRA adapters (peft), merged into the saved model."),
    from_findings: Optional[list[Path]] = typer.Option(None, "--from", help=(
        "augment, adversarial: train on the successes of these attack results files (or compare / harden folders), "
        "mined by any run, instead of mining the first round; repeat for several. Findings holding a held-out "
        "sentence are left out.")),
    in_flight: InFlightOpt = None,
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
) -> None:
    """Harden a model against the weaknesses the audits find, then audit it and the original on the same held-out examples."""
    evals = parse_eval_attacks(eval_attack)
    settings = HardenSettings(model=model, method=method, attack=attack, k=k, data=data, train_sample=train_sample,
                              max_train=max_train, epochs=epochs, rounds=rounds, lr=lr,
                              consistency_weight=consistency_weight, found_weight=found_weight, neighbors=neighbors,
                              pairs_per_sentence=pairs_per_sentence,
                              pairs=[list(parse_pair(pair))] if pair else None, group=group, eval_data=eval_data,
                              eval_limit=eval_limit, eval_attacks=[[m, kk] for m, kk in evals],
                              max_queries=max_queries, mlm=mlm, lora=lora, seed=seed,
                              from_findings=[str(p) for p in from_findings] if from_findings else None)
    result = run_harden(settings, out, in_flight=in_flight)
    notice(f"hardened model: {result['model']} (use it as --model {result['model']}); report: audit report {out}")
    finished(result, [out])
    if json_out:
        emit_json(result)
        return
    print_before_after(result)


def print_before_after(result: dict) -> None:
    """The before/after tables: clean accuracy, every evaluation attack, B_(p,k), and the cost."""
    print_table(f"{result['from']} → {result['method']} on {result['held_out']['eval_examples']} held-out examples of "
                f"{result['eval_data']}", ba.SUMMARY_COLUMNS, ba.summary_rows(result))
    if result["bias"]:
        print_table("B_(p,k) before and after", ba.BIAS_COLUMNS, ba.bias_rows(result))
    rp = result.get("replay_found")
    if rp:
        notice(f"the {rp['findings']} findings it trained on, replayed: {rp['baseline_still']} held before, {rp['still']} "
               f"after ({rp['fixed_by_model']} fixed, {rp['regressed']} regressed; McNemar p {format_p(rp['mcnemar_p'])})")
    print_table("cost (seconds)", ba.COST_COLUMNS, ba.cost_rows(result))
    for w in result.get("warnings", []):  # said again under the tables: nothing found, too few sources
        notice(w)
