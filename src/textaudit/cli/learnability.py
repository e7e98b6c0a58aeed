"""``audit learnability``: learnability, robustness and post-augmentation Δ of perturbations
(:class:`~textaudit.robustness.learnability.LearnabilityRequest`)."""

from __future__ import annotations

from textaudit.backends import Backend
from textaudit.cli.options import JsonOpt, audit_command
from textaudit.cli.output import conclude, notice, print_table
from textaudit.robustness.learnability import LearnabilityRequest
from textaudit.robustness.plots import plot_study
from textaudit.stats import format_p


# it trains fresh zoo models: no endpoint's transport options, no neighbourhood store
@audit_command(LearnabilityRequest, backend=True, store=False, model_options=False)
def learnability(json_out: JsonOpt = False, runner: Backend = None, request: LearnabilityRequest = None) -> None:
    """Measure how learnable each perturbation is and relate it to robustness and augmentation gain."""
    study = request.run(runner).summary
    if request.plot is not None:
        for p in plot_study(study, request.plot):
            notice(f"plot: {p}")
    for w in study["warnings"]:
        notice(f"warning: {w}")
    if conclude(study, None, json_out, files=[request.output]):
        return
    print_table("perturbation learnability", ["model", "perturbation", "avg learnability", "learnability@1.0",
                                              "robustness", "post-aug Δ"],
                [[r["model"], r["perturbation"], r["avg_learnability"], r["learnability_at"].get("1.0"),
                  r["robustness"], r["post_aug_delta"]] for r in study["results"]])
    if study["spearman"]:
        print_table("Spearman correlation over model × perturbation", ["pair", "ρ", "p"],
                    [[k, v["rho"], format_p(v["p"])] for k, v in study["spearman"].items()])
