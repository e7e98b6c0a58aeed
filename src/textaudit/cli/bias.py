"""``audit bias``: counterfactual token bias B_{p,k} for protected word pairs (:class:`BiasRequest`)."""

from __future__ import annotations

import math

import typer

from textaudit.backends import Backend
from textaudit.cli.options import JsonOpt, audit_command
from textaudit.cli.output import conclude, notice, print_table, say_default_model, wide_terminal
from textaudit.fairness.bias import BIAS_COLUMNS, CONTROL, DIFFERENCE, K0_NOTE, bias_rows
from textaudit.fairness.estimates import claim_status
from textaudit.fairness.plots import plot_bias
from textaudit.fairness.request import BiasOutcome, BiasRequest
from textaudit.models.batched import ALL_LABELS
from textaudit.request import EachLabel
from textaudit.stats import format_ci


@audit_command(BiasRequest, backend=True)
def bias(json_out: JsonOpt = False, runner: Backend = None, request: BiasRequest = None) -> None:
    """Measure B_{p,k}: the mean shift of f_soft when p(1) → p(2) over the k-neighbourhood of the data."""
    checked = request.check() if request.target_label != ALL_LABELS else None  # every one-line error first
    say_default_model(request)  # (after them: a bad input is one line)
    outcome = request.run(runner, checked=checked)
    if isinstance(outcome, EachLabel):
        _each_label(request, outcome, json_out)
        return
    out = outcome.summary
    if request.output:
        notice(f"scored sentence pairs: {request.output}")
    if request.plot:
        for path in plot_bias(outcome.results, request.plot):
            notice(f"plot: {path}")
    _say_outcome(outcome, len(checked.pairs))
    if "store_hits" in out:
        notice(f"neighbourhood store: {out['store_hits']} masked contexts answered from it, {out['store_misses']} "
               f"computed; {out['mlm_seconds_saved']} s of masked-LM time saved"
               + (f"; {out['score_hits']} classifier scores from it, {out['score_forwards']} computed"
                  if "score_hits" in out else ""))
    if conclude(out, None, json_out, files=[request.output]):
        return
    columns = BIAS_COLUMNS + (["B per class"] if outcome.classes else [])
    print_table(f"B_(p,k) on {request.data}{' (X_filter)' if request.filtered else ''}, mlm={out['mlm']}", columns,
                bias_rows(outcome.results, outcome.classes, outcome.controls))
    if any(kk == 0 for per_pair in outcome.results.values() for by_k in per_pair.values() for kk in by_k):
        typer.echo(K0_NOTE)


def _say_outcome(outcome: BiasOutcome, n_pairs: int) -> None:
    skipped = outcome.summary.get("skipped_pairs") or []
    if skipped:
        shown = ", ".join("/".join(p) for p in skipped[:8]) + (" …" if len(skipped) > 8 else "")
        notice(f"notice: {len(skipped)} of {n_pairs} pairs left out (no sentence of the data holds "
               f"exactly one of their words, or a model does not know one): {shown}")
    for w in outcome.summary.get("warnings", []):
        notice(w)


def _each_label(request: BiasRequest, outcome: EachLabel, json_out: bool) -> None:
    """``--label all``: B_{p,k} per label (rows prefixed by the label; each label's file named after it)."""
    outcomes = outcome.labels
    first = next(iter(outcomes.values()))
    if conclude(outcome.summary, None, json_out, files=outcome.files):
        return
    for o in outcomes.values():
        for w in o.summary.get("warnings", []):
            notice(w)
    title = f"B_(p,k) of every label of {request.model} on {request.data}, mlm={first.summary['mlm']}"
    rows = [[name, *row] for name, o in outcomes.items() for row in bias_rows(o.results, o.classes, o.controls)]
    if wide_terminal(FULL_TABLE_COLUMNS) or len(rows) <= len(outcomes):
        print_table(title, ["label", *BIAS_COLUMNS], rows)
        return
    print_table(title + f", one row per label (every pair and k: --json, or audit report {request.output or 'FILE'})",
                LABEL_COLUMNS, [label_row(name, o.results) for name, o in outcomes.items()])


#: the width of a terminal on which ``--label all`` prints every (label, pair, k) row; narrower, and in a log, one row
#: per label
FULL_TABLE_COLUMNS = 160

#: ``--label all``'s compact table
LABEL_COLUMNS = ["label", "pairs", "k", "claims at k", "largest |B| at k", "sources"]


def label_row(name: str, results: dict) -> list:
    """One label's row: at the largest k, how many pairs make a claim (an interval excluding 0 on enough sources), the
    pair with the largest |B| and its interval, and the fewest and most sources of a pair."""
    per_pair = next((v for n, v in results.items() if n not in (CONTROL, DIFFERENCE)), {})
    at = {p: by_k[max(by_k)] for p, by_k in per_pair.items() if by_k}
    if not at:
        return [name, 0, "–", "–", "–", "–"]
    k = max(e.k for e in at.values())
    top_pair, top = max(at.items(), key=lambda kv: abs(kv[1].B) if math.isfinite(kv[1].B) else -1.0)
    sources = sorted(e.sources for e in at.values())
    return [name, len(at), k, f"{sum(e.significant for e in at.values())} of {len(at)}",
            f"{top_pair[0]}→{top_pair[1]}: {top.B:+.4f} {format_ci(top.ci95, 4)} ({claim_status(top)})",
            f"{sources[0]}–{sources[-1]}" if sources[0] != sources[-1] else str(sources[0])]
