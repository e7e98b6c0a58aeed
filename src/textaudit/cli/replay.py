"""``audit replay``: re-check an audit's findings on a model (a new version, a hardened one) in seconds."""

from __future__ import annotations

from textaudit.cli.options import JsonOpt, audit_command
from textaudit.cli.output import conclude, notice, print_margins, print_sampled, print_table
from textaudit.fairness.replay import REPLAY_COLUMNS, replay_row
from textaudit.findings import ReplayRequest
from textaudit.stats import format_ci, format_p

#: the replay table's columns: one row per method (per method and pair: --json, --output and the report)
COLUMNS = ["method", "findings", "still", "fixed", "not applicable", "regressed"]
#: what the table measures and what it does not (said under it: a replay after hardening is not a fresh audit)
FIXED_MEANS = ("fixed means only that this very x̃ (or adversarial example) no longer flips on the model; it says nothing "
               "of the neighbours an attack would find now: to know whether the model is more robust, attack it afresh "
               "on held-out examples (audit attack, or audit harden's before/after) and read both")
#: the title of the table of a bias run's findings
BIAS_TITLE = "B_(p,k) on the bias runs' own sentences (a finding: the run's 95% CI excluded 0)"


@audit_command(ReplayRequest, store=False)
def replay(json_out: JsonOpt = False, request: ReplayRequest = None) -> None:
    """Replay the vulnerable pairs and adversarial examples an attack found, and the sentences a bias run scored, on
    another model: no masked LM, no search."""
    checked = request.check()  # every file and option before any model loads
    outcome = request.run(checked=checked, progress=not json_out, say=notice)
    if request.output is not None:
        notice(f"replayed findings: {request.output}")
    result, out, again, baseline = outcome.replay, outcome.summary, outcome.fresh, request.baseline
    if conclude(out, None, json_out, files=[request.output]):
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
                  f"McNemar p = {format_p(out['mcnemar_p'])}")
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

