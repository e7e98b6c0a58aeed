"""``audit attack``: second-order attacks over a dataset, resumable, with a summary table."""

from __future__ import annotations

import typer

from textaudit.attacks.naturalness import most_natural_first, ppl_ratio
from textaudit.attacks.request import AttackRequest
from textaudit.backends import Backend
from textaudit.cli.app import format_ci
from textaudit.cli.options import JsonOpt, audit_command
from textaudit.cli.output import conclude, notice, print_sampled, print_table
from textaudit.models.batched import ALL_LABELS
from textaudit.request import EachLabel


@audit_command(AttackRequest, backend=True)
def attack(json_out: JsonOpt = False, runner: Backend = None, request: AttackRequest = None) -> None:
    """Search each example's neighbourhood for a vulnerable example (Double Perturbation)."""
    checked = request.check() if request.target_label != ALL_LABELS else None  # every one-line error first
    outcome = request.run(runner, checked=checked, say=notice)
    if isinstance(outcome, EachLabel):
        _each_label(request, outcome, json_out)
        return
    clf, summary = outcome.classifier, outcome.summary
    for w in summary.get("warnings", []):
        notice(w)
    if conclude(summary, request.output, json_out):
        return
    per_class = summary.pop("per_class", None)
    sampled = summary.pop("sampled", None)
    k = outcome.attack.k
    print_table(f"{summary['method']} on {clf.name} ({f'k={k}, ' if k else ''}{request.data})", ["metric", "value"],
                summary_rows(summary))
    typer.echo(summary["headline"])
    if per_class:
        print_table("per gold class", ["class", "attacked", "success", "success rate", "95% CI"],
                    [[c, v["attacked"], v["success"], v["success_rate"], format_ci(tuple(v["success_rate_ci95"] or ()) or None)]
                     for c, v in per_class.items()])
    if sampled:
        print_sampled(sampled)
    show_examples(outcome.records, clf.labels)


def summary_rows(summary: dict) -> list[list]:
    """The summary table's rows: every field, each rate beside the inputs it is over (the share found over every
    input; the success rate over the attacked only), the skips by reason; the headline is printed below it."""
    subset = {"found_share": f"of all {summary.get('n')} inputs",
              "success_rate": f"of the {summary.get('attacked')} attacked only",
              "mean_l0": f"of the {summary.get('success')} found"}
    rows = []
    for key, v in summary.items():
        if key in ("headline", "warnings"):  # (printed below the table; on stderr)
            continue
        if key == "skip_reasons":
            v = "; ".join(f"{why} ({c})" for why, c in v.items()) if v else None
        elif key in subset and v is not None:
            v = f"{v} ({subset[key]})"
        rows.append([key, "-" if v is None else v])
    return rows


def show_examples(records: list[dict], labels, n: int = 3) -> None:
    """``n`` successes as a reader wants to see them, the most natural first (:func:`most_natural_first`, with each
    one's perplexity ratio): the vulnerable sentence and its prediction, and (second order) the same sentence under
    the swap p with the prediction it flips to."""
    found = most_natural_first(records)[:n]
    if not found:
        return

    def name(c) -> str:
        return str(labels[c]) if labels and c is not None and 0 <= c < len(labels) else str(c)

    second = found[0].get("pair") is not None
    w = max(len(name(r.get(key))) for r in found for key in ("vulnerable_prediction", "vulnerable_patched_prediction",
                                                                 "prediction"))
    typer.echo("vulnerable examples (x̃ natural, near the input; x̃ ⊕ p: the same with one synonym swapped):" if second
               else "adversarial examples (x′ near the input, predicted differently):")
    for r in found:
        if second:
            w1, w2 = r["pair"]
            typer.echo(f"  x̃     → {name(r['vulnerable_prediction']):>{w}}  {r['vulnerable']}")
            ratio = ppl_ratio(r)
            typer.echo(f"  x̃ ⊕ p → {name(r['vulnerable_patched_prediction']):>{w}}  {r['vulnerable_patched']}   (p = {w1}→{w2}"
                       + (f"; perplexity ×{ratio:.2f} of the input's" if ratio is not None else "") + ")")
        else:
            typer.echo(f"  x′ → {name(r['vulnerable_prediction']):>{w}} (was {name(r['prediction'])})  {r['vulnerable']}")


def _each_label(request: AttackRequest, outcome: EachLabel, json_out: bool) -> None:
    """``--label all``: one row per label (its results file named after it), the model's forwards counted once."""
    summary = outcome.summary
    if conclude(summary, None, json_out, files=outcome.files):
        return
    print_table(f"{request.method or 'attack'} on every label of {request.model} ({request.data})",
                ["label", "found (of all inputs)", "95% CI", "success rate (of the attacked)", "results"],
                [[name, f"{s.get('success')} of {s.get('n')}: {s.get('found_share')}",
                  format_ci(tuple(s.get("found_share_ci95") or ()) or None),
                  f"{s.get('success_rate')} of {s.get('attacked')}" if s.get("attacked") else "– (none attacked)",
                  (outcome.labels[name].files or ["–"])[0]]
                 for name, s in summary["labels"].items()])
