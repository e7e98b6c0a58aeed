"""``audit wordorder``: accuracy under word/subword/character reorderings, with DND and IDC
(:class:`~textaudit.robustness.wordorder.WordOrderRequest`)."""

from __future__ import annotations

from textaudit.cli.options import JsonOpt, audit_command
from textaudit.cli.output import conclude, notice, print_table
from textaudit.robustness.plots import plot_wordorder
from textaudit.robustness.wordorder import WordOrderRequest
from textaudit.stats import format_p


@audit_command(WordOrderRequest, store=False)
def wordorder(json_out: JsonOpt = False, request: WordOrderRequest = None) -> None:
    """Accuracy on reordered text, with the DND (local) and IDC (global) order metrics."""
    outcome = request.run()
    rows, corr, name = outcome.rows, outcome.correlations, outcome.classifier.name
    if corr is None:
        if conclude(outcome.summary, request.output, json_out):
            return
        print_table(f"{request.perturbation} ({request.level}, ρ={request.rho}) on {name}", ["metric", "value"],
                    [[k, v] for k, v in outcome.summary.items()])
        return
    if request.plot is not None:
        plot_wordorder(rows, corr, request.plot, name)
        notice(f"plots written to {request.plot}")
    if conclude(outcome.summary, request.output, json_out):
        return
    print_table(f"word-order sweep on {name} ({request.data}, clean accuracy {corr['clean_accuracy']})",
                ["perturbation", "level", "ρ", "accuracy", "DND", "IDC", "Levenshtein", "BLEU-4"],
                [[r["perturbation"], r["level"], r["rho"], r["accuracy"], r["dnd"], r["idc"], r["levenshtein"], r["bleu4"]]
                 for r in rows])
    print_table("Spearman correlation of accuracy with each metric", ["metric", "ρ", "p"],
                [[k.replace("accuracy_vs_", ""), v["rho"], format_p(v["p"])] for k, v in corr.items() if k != "clean_accuracy"])
