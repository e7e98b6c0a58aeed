"""``audit wordorder``: accuracy under word/subword/character reorderings, with DND and IDC."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from textaudit.cli.main import app, emit_json, notice, print_table
from textaudit.errors import TextAuditError


@app.command()
def wordorder(
    model: str = typer.Option(..., "--model", "-m", help="Zoo name, hf:<dir-or-id>, checkpoint dir or file.py:obj."),
    data: str = typer.Option("sst2:dev", "--data"),
    perturbation: str = typer.Option("neighbor_flip", "--perturbation", help="full_shuffle | phrase_shuffle | neighbor_flip"),
    level: str = typer.Option("word", "--level", help="word | subword | char"),
    rho: float = typer.Option(0.5, "--rho", help="ρ of phrase_shuffle / neighbor_flip."),
    sweep_grid: bool = typer.Option(False, "--sweep", help="Run the whole grid and correlate accuracy with DND and IDC."),
    limit: Optional[int] = typer.Option(None, "--limit"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Directory for accuracy-vs-DND/IDC plots (with --sweep)."),
    seed: int = typer.Option(0, "--seed"),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object as the last line."),
) -> None:
    """Accuracy on reordered text, with the DND (local) and IDC (global) order metrics."""
    from textaudit.data import load_dataset
    from textaudit.models import load_classifier
    from textaudit.robustness.wordorder import evaluate_reordering, sweep

    ds = load_dataset(data, default_split="dev", limit=limit)
    clf = load_classifier(model)
    if not sweep_grid:
        row = evaluate_reordering(clf, ds["text"], ds["label"], perturbation, level, rho, seed)
        row["model"] = clf.name
        if json_out:
            emit_json(row)
            return
        print_table(f"{perturbation} ({level}, ρ={rho}) on {clf.name}", ["metric", "value"],
                    [[k, v] for k, v in row.items()])
        return
    if plot is not None and plot.exists() and not plot.is_dir():
        raise TextAuditError(f"--plot must be a directory, '{plot}' is a file")
    rows, corr = sweep(clf, ds["text"], ds["label"], seed=seed)
    if plot is not None:
        _plot(rows, corr, plot, clf.name)
        notice(f"plots written to {plot}")
    if json_out:
        emit_json({"model": clf.name, "data": data, "n": len(ds), "rows": [{k: v for k, v in r.items() if k != "example"}
                                                                           for r in rows], **corr})
        return
    print_table(f"word-order sweep on {clf.name} ({data}, clean accuracy {corr['clean_accuracy']})",
                ["perturbation", "level", "ρ", "accuracy", "DND", "IDC", "Levenshtein", "BLEU-4"],
                [[r["perturbation"], r["level"], r["rho"], r["accuracy"], r["dnd"], r["idc"], r["levenshtein"], r["bleu4"]]
                 for r in rows])
    print_table("Spearman correlation of accuracy with each metric", ["metric", "ρ", "p"],
                [[k.replace("accuracy_vs_", ""), v["rho"], f"{v['p']:.2g}"] for k, v in corr.items() if k != "clean_accuracy"])


def _plot(rows, corr, out: Path, name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    markers = {"word": "o", "subword": "s", "char": "^"}
    for ax, metric in zip(axes, ("dnd", "idc")):
        for lv, mk in markers.items():
            pts = [(r[metric], r["accuracy"]) for r in rows if r["level"] == lv]
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=mk, label=lv)
        c = corr[f"accuracy_vs_{metric}"]
        ax.set_xlabel(metric.upper())
        ax.set_title(f"Spearman ρ = {c['rho']:.2f}")
        ax.axhline(corr["clean_accuracy"], color="grey", ls="--", lw=1)
    axes[0].set_ylabel("accuracy")
    axes[0].legend()
    fig.suptitle(f"{name}: accuracy under reorderings")
    fig.tight_layout()
    fig.savefig(out / "accuracy_vs_dnd_idc.png", dpi=120)
    plt.close(fig)
