"""``audit harden``: train the found weaknesses out of a model and prove it on held-out examples
(:class:`~textaudit.harden.request.HardenRequest`)."""

from __future__ import annotations

from textaudit.cli.options import JsonOpt, audit_command
from textaudit.cli.output import conclude, notice, print_table
from textaudit.formats import harden as ba
from textaudit.harden.request import HardenRequest
from textaudit.stats import format_p


# a hardened model is trained here: llm: and http(s):// models (the transport options) cannot be
@audit_command(HardenRequest, model_options=False)
def harden(json_out: JsonOpt = False, request: HardenRequest = None) -> None:
    """Harden a model against the weaknesses the audits find, then audit it and the original on the same held-out examples."""
    result = request.run().summary
    notice(f"hardened model: {result['model']} (use it as --model {result['model']}); report: audit report {request.out}")
    if not conclude(result, None, json_out, files=[request.out]):
        print_before_after(result)


def print_before_after(result: dict) -> None:
    """The before/after tables: clean accuracy, every evaluation attack, B_(p,k), and the cost."""
    print_table(f"{result['from']} → {result['method']} on {result['held_out']['eval_examples']} held-out examples of "
                f"{result['eval_data']}", ba.SUMMARY_COLUMNS, ba.summary_rows(result))
    if result["bias"]:
        print_table("B_(p,k) before and after", ba.BIAS_COLUMNS, ba.bias_rows(result))
    rp = result.get("replay_found")
    if rp:
        notice(f"the {rp['findings']} findings it trained on, replayed: {rp['baseline_still']} held before, {rp['still']} "
               f"after ({rp['fixed_by_model']} fixed, {rp['regressed']} regressed; McNemar p {format_p(rp['mcnemar_p'])})")
    print_table("cost (seconds)", ba.COST_COLUMNS, ba.cost_rows(result))
    for w in result.get("warnings", []):  # said again under the tables: nothing found, too few sources
        notice(w)
