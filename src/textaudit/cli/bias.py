"""``audit bias``: counterfactual token bias B_{p,k} for protected word pairs (:class:`BiasRequest`)."""

from __future__ import annotations

import typer

from textaudit.backends import Backend
from textaudit.cli.app import (
    JsonOpt,
    audit_command,
    conclude,
    each_label_summary,
    notice,
    print_table,
    score_fields,
    store_fields,
)
from textaudit.fairness.bias import BIAS_COLUMNS, K0_NOTE, bias_rows
from textaudit.fairness.plots import plot_bias
from textaudit.fairness.request import BiasOutcome, BiasRequest
from textaudit.models.batched import ALL_LABELS


@audit_command(BiasRequest, backend=True)
def bias(json_out: JsonOpt = False, runner: Backend = None, request: BiasRequest = None) -> None:
    """Measure B_{p,k}: the mean shift of f_soft when p(1) → p(2) over the k-neighbourhood of the data."""
    if request.target_label == ALL_LABELS:
        _each_label(request, runner, json_out)
        return
    checked = request.check()  # every one-line error before anything loads
    outcome = request.run(runner, checked=checked)
    out = outcome.summary
    if request.output:
        notice(f"scored sentence pairs: {request.output}")
    if request.plot:
        for path in plot_bias(outcome.results, request.plot):
            notice(f"plot: {path}")
    _say_outcome(outcome, len(checked.pairs))
    out.update(store_fields(outcome.masked_lm))
    out.update(score_fields(outcome.classifier))
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


def _each_label(request: BiasRequest, runner: Backend, json_out: bool) -> None:
    """``--label all``: B_{p,k} per label (rows prefixed by the label; each label's file named after it)."""
    outcomes = request.run_each_label(runner)
    first = next(iter(outcomes.values()))
    out, files = each_label_summary(outcomes, request.output, first.masked_lm)
    if conclude(out, None, json_out, files=[f for f in files.values() if f is not None]):
        return
    rows = [[name, *row] for name, o in outcomes.items() for row in bias_rows(o.results, o.classes, o.controls)]
    print_table(f"B_(p,k) of every label of {request.model} on {request.data}, mlm={first.summary['mlm']}",
                ["label", *BIAS_COLUMNS], rows)
