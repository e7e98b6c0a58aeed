"""``audit replay``: re-check an audit's findings on a model (a new version, a hardened one) in seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from textaudit.cli.app import (
    AuditCommand,
    JsonOpt,
    ModelOpt,
    app,
    emit_json,
    finished,
    notice,
    print_margins,
    print_sampled,
    print_table,
    with_model_options,
    with_track_option,
)
from textaudit.errors import TextAuditError
from textaudit.fairness.pairs import load_pairs_file
from textaudit.fairness.replay import REPLAY_COLUMNS, replay_row
from textaudit.findings import fresh_attacks, read_findings
from textaudit.findings import replay as run_replay
from textaudit.formats.jsonl import check_output, write_results
from textaudit.stats import check_margin, format_ci, format_p

#: the replay table's columns: one row per method (per method and pair: --json, --output and the report)
COLUMNS = ["method", "findings", "still", "fixed", "not applicable", "regressed"]
#: the title of the table of a bias run's findings
#: what the table measures and what it does not (said under it: a replay after hardening is not a fresh audit)
FIXED_MEANS = ("fixed means only that this very x̃ (or adversarial example) no longer flips on the model; it says nothing "
               "of the neighbours an attack would find now: to know whether the model is more robust, attack it afresh "
               "on held-out examples (audit attack, or audit harden's before/after) and read both")
BIAS_TITLE = "B_(p,k) on the bias runs' own sentences (a finding: the run's 95% CI excluded 0)"


@app.command(cls=AuditCommand)
@with_track_option
@with_model_options
def replay(
    findings: list[Path] = typer.Argument(..., help="Results files of audit attack or audit bias (--output), or audit "
                                                    "compare / audit harden folders: an attack's successes are its "
                                                    "findings; a bias run's, the sentences it scored (B_{p,k} on them)."),
    model: ModelOpt = ...,  # type: ignore[assignment]
    baseline: Optional[str] = typer.Option(None, "--baseline", help=(
        "A second model (the previous version): the findings are replayed on both and paired — fixed by --model, "
        "regressed (fixed on the baseline, holding again), McNemar's exact p.")),
    margin: Optional[float] = typer.Option(None, "--margin", help=(
        "With --baseline: a non-inferiority margin m, a share (0.02 = 2 points). Says whether the model's still-rate "
        "is no worse than the baseline's by m or more (the one-sided test at α = 0.05 on Newcombe's paired interval) "
        "and whether the two are equivalent within ±m (TOST); the harmful and beneficial flips beside it.")),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="JSONL file: one record per finding (must not exist)."),
    fresh: Optional[int] = typer.Option(None, "--fresh", min=1, help=(
        "Beside the replay, attack --model afresh on N examples drawn from each attack file's attacked examples, with "
        "the file's method and settings: its success rate now beside the file's own on the same examples (McNemar) — "
        "whether the model is more robust, which the replay alone does not say.")),
    pairs_file: Optional[Path] = typer.Option(None, "--pairs-file", help=(
        "With --fresh: the synonym pairs 'w1,w2' the patch words come from, as the attack was given them (default: the "
        "counter-fitted neighbours).")),
    json_out: JsonOpt = False,
) -> None:
    """Replay the vulnerable pairs and adversarial examples an attack found, and the sentences a bias run scored, on
    another model: no masked LM, no search."""
    check_margin(margin, baseline is not None)
    found = read_findings(findings)  # every file checked before any model loads
    if output is not None:
        check_output(output, None)  # never over a file: refused before anything runs
    if pairs_file is not None and fresh is None:
        raise TextAuditError("--pairs-file goes with --fresh (the patch words of the fresh attack)")
    pairs = None
    if pairs_file is not None:  # read before anything runs

        pairs = load_pairs_file(str(pairs_file))
    result = run_replay(found, model, baseline, margin=margin)
    again = None
    if fresh is not None:
        notice(f"fresh attack: {fresh} examples of each attack file, on {result.model} …")
        again = fresh_attacks(findings, model, fresh, pairs=pairs, progress=not json_out)
    if output is not None:
        write_results(output, result.records, command="replay", config=result.config)
        notice(f"replayed findings: {output}")
    out = result.summary()
    if again is not None:
        out["fresh"] = again
    finished(out, [output])
    if json_out:
        emit_json(out)
        return
    per: dict[str, list[int]] = {}
    for g in out["by_method"]:
        row = per.setdefault(g["method"], [0, 0, 0, 0, 0])
        for i, key in enumerate(("still", "fixed", "not_applicable", "regressed")):
            row[i + 1] += g[key]
        row[0] += g["still"] + g["fixed"] + g["not_applicable"]
    rows = [[m, *r[:4], r[4] if baseline else "–"] for m, r in per.items()]
    share = "–" if out["still_share"] is None else f"{out['still_share']:.3f}"
    title = f"{out['findings']} findings replayed on {out['model']}: {out['still']} still hold ({share} of the applicable)"
    if baseline:
        title += (f"; vs {out['baseline']}: {out['fixed_by_model']} fixed, {out['regressed']} regressed, "
                  f"McNemar p = {out['mcnemar_p']:.4g}")
    print_table(title, COLUMNS, rows)
    notice(FIXED_MEANS)
    if again:
        print_table(f"fresh attack on {result.model}, beside each file's own records on the same examples",
                    ["method", "examples", "then (model)", "success then", "success now", "McNemar p"],
                    [[f"{g['method']}{'' if g['k'] is None else ' k=' + str(g['k'])}", g["paired"], g["then_model"],
                      f"{g['then_success']}/{g['paired']} {format_ci(g['then_ci95'] or None)}",
                      f"{g['now_success']}/{g['paired']} {format_ci(g['now_ci95'] or None)}", format_p(g["mcnemar_p"])]
                     for g in again])
    if "sampled" in out:
        print_sampled(out["sampled"], "applicable findings")
    if "non_inferiority" in out:
        print_margins("still-rate", [(out["model"], out["baseline"], out["non_inferiority"])])
    bias = [r for r in result.records if r.get("order") == "bias"]
    if bias:
        print_table(BIAS_TITLE, REPLAY_COLUMNS, [replay_row(r, baseline is not None) for r in bias])

