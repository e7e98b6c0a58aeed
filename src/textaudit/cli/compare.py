"""``audit compare``: the Table-2 matrix — every method on every model, one resumable results file
per cell, success rates with Wilson intervals and paired McNemar tests."""

from __future__ import annotations

from textaudit.attacks.compare import SUMMARY
from textaudit.attacks.request import CompareRequest
from textaudit.cli.app import format_ci
from textaudit.cli.options import JsonOpt, audit_command
from textaudit.cli.output import conclude, notice, print_margins, print_table
from textaudit.stats import format_p


@audit_command(CompareRequest)
def compare(json_out: JsonOpt = False, request: CompareRequest = None) -> None:
    """Run (or reuse) every method on every model and print the comparison matrix with 95% intervals."""
    result = request.run().summary
    notice(f"cells: {request.output_dir}/<model>.<method>.jsonl; summary: {request.output_dir / SUMMARY}")
    if not conclude(result, None, json_out, files=[request.output_dir]):
        print_compare(result)


def found_cell(c: dict | None) -> str:
    """A cell's share of every input with a finding and its interval ("–" for a summary written before it was)."""
    if not c or c.get("found_share") is None:
        return "–"
    return f"{c['found_share']:.2f} {format_ci(c.get('found_share_ci95'), 2)}"


def print_compare(result: dict) -> None:
    """The matrix (success rate [95% CI] per model × method), the per-cell table and the paired tests."""
    cells = result["cells"]
    methods = list(dict.fromkeys(c["method"] for c in cells))
    models = list(dict.fromkeys(c["model"] for c in cells))
    by = {(c["model"], c["method"]): c for c in cells}

    print_table(f"found for [95% CI], of every input, on {result['data']}", ["model", *methods],
                [[m, *(found_cell(by.get((m, a))) for a in methods)] for m in models])
    print_table("per cell", ["model", "method", "k", "n", "found", "found share [95% CI]", "skipped", "attacked",
                             "success rate (of the attacked)", "95% CI", "mean ℓ0", "s/example", "queries/example"],
                [[c["model"], c["method"], c["k"], c["n"], c.get("success", "–"), found_cell(c), c.get("skipped", "–"),
                  c["attacked"], c["success_rate"], format_ci(c["success_rate_ci95"]), c["mean_l0"], c["sec_per_example"],
                  c["queries_per_example"]] for c in cells])
    if result["paired"]:
        print_table("paired: McNemar's exact test on the examples both attacked", ["a", "b", "n", "rate a", "rate b",
                                                                                  "only a", "only b", "p"],
                    [[p["a"], p["b"], p["n"], p["rate_a"], p["rate_b"], p["only_a"], p["only_b"], format_p(p["p"])]
                     for p in result["paired"]])
    tests = [(p["b"], p["a"], p["non_inferiority"]) for p in result["paired"] if "non_inferiority" in p]
    if tests:
        print_margins("success rate", tests)
    if result.get("accuracy"):
        print_margins("error rate (1 − accuracy)", [(t["b"], t["a"], t["non_inferiority"]) for t in result["accuracy"]])
