"""``audit compare``: the Table-2 matrix — every method on every model, one resumable results file
per cell, success rates with Wilson intervals and paired McNemar tests."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from textaudit.attacks.compare import SUMMARY, run_compare
from textaudit.cli.app import (
    AuditCommand,
    DataOpt,
    JsonOpt,
    LabelMapOpt,
    LimitOpt,
    MlmOpt,
    SeedOpt,
    app,
    emit_json,
    finished,
    format_ci,
    notice,
    print_margins,
    print_table,
    with_model_options,
    with_store_option,
    with_track_option,
)
from textaudit.data import parse_label_map
from textaudit.errors import TextAuditError


def _names(value: str, what: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise TextAuditError(f"--{what} needs at least one name, comma-separated")
    if len(set(names)) != len(names):
        raise TextAuditError(f"--{what} names one twice: {value}")
    return names


@app.command(cls=AuditCommand)
@with_track_option
@with_store_option
@with_model_options
def compare(
    models: str = typer.Option(..., "--models", help="Models, comma-separated (e.g. cnn,lstm,cnn-ibp)."),
    methods: str = typer.Option("so-beam,so-enum,genetic,bae", "--methods", help="Attack methods, comma-separated."),
    output_dir: Path = typer.Option(..., "--output-dir", help="One results file per cell (<model>.<method>.jsonl) "
                                    "and compare.json; a rerun reuses (resumes) every cell."),
    data: DataOpt = "sst2:dev",
    label_map: LabelMapOpt = None,
    limit: LimitOpt = None,
    k: Optional[int] = typer.Option(None, "--k", min=0, help="k of the neighbourhood methods (default: each method's own)."),
    mlm: MlmOpt = None,
    ppl: bool = typer.Option(False, "--ppl/--no-ppl", help="Perplexities of successes (SmolLM2); off by default."),
    margin: Optional[float] = typer.Option(None, "--margin", help=(
        "A non-inferiority margin m, a share (0.02 = 2 points): under each method, is every model's success rate no "
        "worse than the first model's by m or more (one-sided test at α = 0.05, Newcombe's paired interval), and "
        "equivalent within ±m (TOST)? Harmful and beneficial flips beside it.")),
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
) -> None:
    """Run (or reuse) every method on every model and print the comparison matrix with 95% intervals."""

    model_names, method_names = _names(models, "models"), _names(methods, "methods")
    result = run_compare(model_names, method_names, output_dir, data=data, limit=limit, k=k, mlm=mlm, ppl=ppl, seed=seed,
                         margin=margin, label_map=parse_label_map(label_map))
    notice(f"cells: {output_dir}/<model>.<method>.jsonl; summary: {output_dir / SUMMARY}")
    finished(result, [output_dir])
    if json_out:
        emit_json(result)
        return
    print_compare(result)


def print_compare(result: dict) -> None:
    """The matrix (success rate [95% CI] per model × method), the per-cell table and the paired tests."""
    cells = result["cells"]
    methods = list(dict.fromkeys(c["method"] for c in cells))
    models = list(dict.fromkeys(c["model"] for c in cells))
    by = {(c["model"], c["method"]): c for c in cells}

    def rate(c: dict | None) -> str:
        return "-" if not c or c["success_rate"] is None else f"{c['success_rate']:.2f} {format_ci(c['success_rate_ci95'], 2)}"

    print_table(f"success rate [95% CI] on {result['data']}", ["model", *methods],
                [[m, *(rate(by.get((m, a))) for a in methods)] for m in models])
    print_table("per cell", ["model", "method", "k", "attacked", "success rate", "95% CI", "mean ℓ0", "s/example",
                             "queries/example"],
                [[c["model"], c["method"], c["k"], c["attacked"], c["success_rate"], format_ci(c["success_rate_ci95"]),
                  c["mean_l0"], c["sec_per_example"], c["queries_per_example"]] for c in cells])
    if result["paired"]:
        print_table("paired: McNemar's exact test on the examples both attacked", ["a", "b", "n", "rate a", "rate b",
                                                                                  "only a", "only b", "p"],
                    [[p["a"], p["b"], p["n"], p["rate_a"], p["rate_b"], p["only_a"], p["only_b"], p["p"]]
                     for p in result["paired"]])
    tests = [(p["b"], p["a"], p["non_inferiority"]) for p in result["paired"] if "non_inferiority" in p]
    if tests:
        print_margins("success rate", tests)
    if result.get("accuracy"):
        print_margins("error rate (1 − accuracy)", [(t["b"], t["a"], t["non_inferiority"]) for t in result["accuracy"]])
