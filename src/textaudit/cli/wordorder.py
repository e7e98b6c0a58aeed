"""``audit wordorder``: accuracy under word/subword/character reorderings, with DND and IDC."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from textaudit.cli.app import (
    AuditCommand,
    DataOpt,
    JsonOpt,
    LimitOpt,
    ModelOpt,
    OutputOpt,
    SeedOpt,
    app,
    check_output,
    emit_json,
    finished,
    notice,
    print_table,
    with_model_options,
    with_track_option,
)
from textaudit.data import align_labels, check_labels, dataset_id, load_dataset
from textaudit.errors import TextAuditError
from textaudit.formats.jsonl import write_results
from textaudit.models import load_classifier
from textaudit.perturbations.wordorder import LEVELS, REORDERINGS
from textaudit.robustness.plots import plot_wordorder
from textaudit.robustness.wordorder import evaluate_reordering, sweep


@app.command(cls=AuditCommand)
@with_track_option
@with_model_options
def wordorder(
    model: ModelOpt,
    data: DataOpt = "sst2:dev",
    perturbation: str = typer.Option("neighbor_flip", "--perturbation", help="full_shuffle | phrase_shuffle | neighbor_flip"),
    level: str = typer.Option("word", "--level", help="word | subword | char"),
    rho: float = typer.Option(0.5, "--rho", min=0.0, max=1.0, help="ρ of phrase_shuffle / neighbor_flip."),
    sweep_grid: bool = typer.Option(False, "--sweep", help="Run the whole grid and correlate accuracy with DND and IDC."),
    limit: LimitOpt = None,
    plot: Optional[Path] = typer.Option(None, "--plot", help="Directory for accuracy-vs-DND/IDC plots (with --sweep)."),
    seed: SeedOpt = 0,
    output: OutputOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Accuracy on reordered text, with the DND (local) and IDC (global) order metrics."""

    if perturbation not in REORDERINGS:
        raise TextAuditError(f"unknown --perturbation '{perturbation}'; use one of {', '.join(REORDERINGS)}")
    if level not in LEVELS:
        raise TextAuditError(f"unknown --level '{level}'; use one of {', '.join(LEVELS)}")
    if plot is not None and plot.exists() and not plot.is_dir():
        raise TextAuditError(f"--plot must be a directory, '{plot}' is a file")
    config = {"data": dataset_id(data, "dev"), "seed": seed, "sweep": sweep_grid,
              **({} if sweep_grid else {"perturbation": perturbation, "level": level, "rho": rho})}
    check_output(output, None, **config)
    ds = load_dataset(data, default_split="dev", limit=limit)
    clf = load_classifier(model)
    ds, _ = align_labels(ds, clf)  # class names by the model's, never by their sort order
    check_labels(ds["label"], clf.num_classes, clf.name)

    def save(rows: list[dict], extra: dict) -> None:
        if output:
            records = [{"id": f"{r['perturbation']}:{r['level']}:{r['rho']}", "model": clf.name, **r} for r in rows]
            write_results(output, records, command="wordorder",
                          config={**config, "model": clf.name, "model_fingerprint": clf.fingerprint, **extra})
            notice(f"results: {output}")

    if not sweep_grid:
        row = evaluate_reordering(clf, ds["text"], ds["label"], perturbation, level, rho, seed)
        row["model"] = clf.name
        save([row], {})
        finished(row, [output])
        if json_out:
            emit_json(row)
            return
        print_table(f"{perturbation} ({level}, ρ={rho}) on {clf.name}", ["metric", "value"],
                    [[k, v] for k, v in row.items()])
        return
    rows, corr = sweep(clf, ds["text"], ds["label"], seed=seed)
    save(rows, {"correlations": corr})
    if plot is not None:
        plot_wordorder(rows, corr, plot, clf.name)
        notice(f"plots written to {plot}")
    out = finished({"model": clf.name, "data": data, "n": len(ds),
                    "rows": [{k: v for k, v in r.items() if k != "example"} for r in rows], **corr}, [output])
    if json_out:
        emit_json(out)
        return
    print_table(f"word-order sweep on {clf.name} ({data}, clean accuracy {corr['clean_accuracy']})",
                ["perturbation", "level", "ρ", "accuracy", "DND", "IDC", "Levenshtein", "BLEU-4"],
                [[r["perturbation"], r["level"], r["rho"], r["accuracy"], r["dnd"], r["idc"], r["levenshtein"], r["bleu4"]]
                 for r in rows])
    print_table("Spearman correlation of accuracy with each metric", ["metric", "ρ", "p"],
                [[k.replace("accuracy_vs_", ""), v["rho"], v["p"]] for k, v in corr.items() if k != "clean_accuracy"])
