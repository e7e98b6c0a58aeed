"""Model-zoo commands: ``audit train`` and ``audit evaluate``.

Each command is thin: parse, call the library, print (table or ``--json`` last line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from textaudit.cli.main import app, emit_json, notice, print_table
from textaudit.errors import TextAuditError

MODEL_HELP = "Zoo name (bow, cnn, lstm, transformer, minilm[-gender-swap]), hf:<dir-or-id>, checkpoint dir or file.py:obj."


@app.command()
def train(
    model: str = typer.Option(..., "--model", "-m", help="Zoo architecture: bow, cnn, lstm, transformer, minilm."),
    data: str = typer.Option("sst2", "--data", help="Corpus whose train split is used (dev is only reported)."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Maximum epochs (early stopping on held-out train)."),
    seed: int = typer.Option(0, "--seed"),
    augment: Optional[str] = typer.Option(None, "--augment", help="Training-set augmentation: gender-swap."),
    robust: Optional[str] = typer.Option(None, "--robust", help="Certified training: ibp (bow, cnn); saves <model>-ibp."),
    out: Optional[Path] = typer.Option(None, "--out", help="Checkpoint directory (default: the user cache)."),
    eval_data: Optional[str] = typer.Option(None, "--eval-data", help="Reported only (default: sst2:dev for sst2)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object as the last line."),
) -> None:
    """Train a zoo model on SST-2 train, save its checkpoint and report dev accuracy."""
    from textaudit.models.zoo import ARCHS, parse_name, train_model

    if parse_name(model)[0] not in ARCHS:
        raise TextAuditError(f"audit train trains zoo models ({', '.join(ARCHS)}); got '{model}'")
    notice(f"training {model} on {data} (train split; dev is only reported) ...")
    r = train_model(model, data=data, epochs=epochs, seed=seed, augment=augment, out=out, eval_data=eval_data,
                    robust=robust)
    if json_out:
        emit_json({k: r[k] for k in ("model", "dev_accuracy", "path", "train_seconds")} | {
            "n_train": r["n_train"], "holdout_accuracy": r["holdout_accuracy"]})
        return
    print_table(f"trained {r['model']}", ["model", "dev accuracy", "held-out train acc.", "train seconds", "checkpoint"],
                [[r["model"], "-" if r["dev_accuracy"] is None else f"{r['dev_accuracy']:.4f}",
                  f"{r['holdout_accuracy']:.4f}", r["train_seconds"], r["path"]]])


@app.command()
def evaluate(
    model: str = typer.Option(..., "--model", "-m", help=MODEL_HELP),
    data: str = typer.Option("sst2:dev", "--data", help="sst2[:train|dev|test] or a .csv/.tsv/.jsonl file."),
    text_column: Optional[str] = typer.Option(None, "--text-column"),
    label_column: Optional[str] = typer.Option(None, "--label-column"),
    limit: Optional[int] = typer.Option(None, "--limit", help="Use only the first N examples."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object as the last line."),
) -> None:
    """Report a model's accuracy on a labelled dataset."""
    from textaudit.data import load_dataset
    from textaudit.models import load_classifier
    from textaudit.models.zoo import accuracy

    ds = load_dataset(data, text_column=text_column, label_column=label_column, default_split="dev", limit=limit)
    clf = load_classifier(model)
    if max(ds["label"]) >= clf.num_classes:
        raise TextAuditError(f"{data} has label {max(ds['label'])} but model '{clf.name}' has only "
                             f"{clf.num_classes} classes; check --label-column")
    acc = accuracy(clf, ds["text"], ds["label"])
    if json_out:
        emit_json({"model": clf.name, "data": data, "accuracy": round(acc, 4), "n": len(ds)})
        return
    print_table(f"accuracy of {clf.name}", ["model", "data", "n", "accuracy"], [[clf.name, data, len(ds), f"{acc:.4f}"]])


@app.command()
def certify(
    model: str = typer.Option(..., "--model", "-m", help="A certified-robust zoo model: bow-ibp or cnn-ibp."),
    data: str = typer.Option("sst2:dev", "--data", help="sst2[:split] or a .csv/.tsv/.jsonl file."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Use the first N examples."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object as the last line."),
) -> None:
    """Clean accuracy and IBP-certified accuracy under every combination of counter-fitted synonym swaps."""
    from textaudit.data import load_dataset
    from textaudit.models import load_classifier
    from textaudit.models.robust import certify as run_certify
    from textaudit.models.robust import substitution_table

    clf = load_classifier(model)
    fwd = getattr(clf, "forward", None)
    tok = getattr(fwd, "tokenizer", None)
    if tok is None or not hasattr(tok, "vocab") or not hasattr(fwd.module, "input_vectors"):
        raise TextAuditError(f"'{model}' is not a zoo word model; certify supports bow/cnn (e.g. cnn-ibp)")
    ds = load_dataset(data, default_split="dev", limit=limit)
    res = run_certify(fwd.module, tok, substitution_table(tok.vocab), list(ds["text"]), list(ds["label"]),
                      device=str(fwd.device))
    res["model"] = model
    if json_out:
        emit_json(res)
        return
    print_table(f"IBP certification of {model} on {data}", ["metric", "value"], [[k, v] for k, v in res.items()])
