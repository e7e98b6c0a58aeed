"""Calibration under perturbation (``audit evaluate --perturbed``): does a model keep its calibration
on perturbed versions of its inputs, not only its labels?

For n labelled examples (x_i, y_i) and one perturbed version x̃_i of each — a noise perturbation, a
masked-LM neighbour one word away, or the vulnerable example an attack found for x_i — the model's
class probabilities on x and on x̃ are scored against the *same* label y (the perturbation is assumed to
keep the label, as a threat model does). Each side gets the expected calibration error ECE over B
equal-width bins of the top-label confidence, the Brier score, the mean confidence and the accuracy;
the difference (perturbed − original) of each gets a percentile bootstrap interval that resamples
the examples in pairs (:func:`textaudit.stats.paired_calibration`).
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Sequence

from textaudit.errors import TextAuditError
from textaudit.neighborhoods.builder import NeighborhoodBuilder
from textaudit.neighborhoods.mlm import load_mlm
from textaudit.perturbations.noise import NOISE_PERTURBATIONS, get_perturbation
from textaudit.plotting import pyplot, save_figure
from textaudit.sentence import Sentence
from textaudit.stats import format_ci, paired_calibration

__all__ = ["NEIGHBORS", "perturbation_methods", "perturb", "calibration_under_perturbation", "summarize_calibration",
           "plot_reliability", "calibration_rows", "CALIBRATION_COLUMNS"]

#: the method that replaces each text by one of its masked-LM neighbours one word away
NEIGHBORS = "neighbors"


def perturbation_methods() -> list[str]:
    """Every METHOD ``--perturbed`` takes: ``neighbors`` and the noise perturbations."""
    return [NEIGHBORS, *NOISE_PERTURBATIONS]


def _rng(seed: int, text: str) -> random.Random:
    """The seeded draw of one text (the same whatever the order or batch of the texts)."""
    return random.Random(int(hashlib.md5(f"{seed}|{text}".encode()).hexdigest()[:12], 16))


def perturb(texts: Sequence[str], method: str, *, seed: int = 0, mlm=None, kappa: int = 20, delta: float = 3.0) -> list[str]:
    """One perturbed version of each text: a noise perturbation, or (``neighbors``) a neighbour drawn
    uniformly from Neighbor_1(x) of the masked LM ``mlm`` (a loaded one, a name or path, None: the default;
    κ, δ as the neighbourhoods'; a text without any keeps itself); seeded per text."""
    if method == NEIGHBORS:
        masked_lm = mlm if mlm is not None and not isinstance(mlm, (str, Path)) else load_mlm(mlm and str(mlm))
        builder = NeighborhoodBuilder(masked_lm, kappa=kappa, delta=delta, seed=seed)
        sents = [Sentence.parse(t) for t in texts]
        out = []
        for t, nbrs in zip(texts, builder.neighbors1(sents)):  # one batched masked-LM pass for every text
            out.append(nbrs[_rng(seed, t).randrange(len(nbrs))].text() if nbrs else t)
        return out
    if method not in NOISE_PERTURBATIONS:
        raise TextAuditError(f"unknown --perturbed '{method}': give a results file of audit attack, or one of "
                             f"{', '.join(perturbation_methods())}")
    fn = get_perturbation(method)
    return [fn(t, _rng(seed, t)) for t in texts]


def calibration_under_perturbation(classifier, texts: Sequence, perturbed: Sequence, labels: Sequence[int],
                                   bins: int = 10, seed: int = 0, ids: Sequence[str] | None = None
                                   ) -> tuple[dict, list[dict]]:
    """``(summary, records)``: ECE, Brier score, mean confidence and accuracy of ``classifier`` on ``texts``
    and on ``perturbed`` (their perturbed versions, same ``labels``), with the paired differences and their
    intervals (see the module docstring), and one record per example (both texts, both probability rows,
    the label); one batched call for both sides."""
    if len(texts) != len(perturbed) or len(texts) != len(labels):
        raise TextAuditError("calibration under perturbation needs one perturbed text and one label per text")
    if not len(texts):
        raise TextAuditError("no example to measure calibration on (empty data, or no finding with a label)")
    if bins < 1:
        raise TextAuditError(f"--bins must be at least 1 (got {bins})")
    probs = classifier.predict_proba(list(texts) + list(perturbed))
    n = len(texts)
    records = [{"id": str(ids[i]) if ids is not None else str(i), "label": int(labels[i]), "text": texts[i],
                "perturbed": perturbed[i], "probs": [round(float(x), 6) for x in probs[i]],
                "perturbed_probs": [round(float(x), 6) for x in probs[n + i]]} for i in range(n)]
    return summarize_calibration(records, bins, seed), records


def summarize_calibration(records: Sequence[dict], bins: int = 10, seed: int = 0) -> dict:
    """The summary of :func:`calibration_under_perturbation` from its records alone (a results file read back)."""
    out = paired_calibration([r["probs"] for r in records], [r["perturbed_probs"] for r in records],
                             [r["label"] for r in records], bins, seed=seed)
    out["changed"] = sum(r["text"] != r["perturbed"] for r in records)
    return out


def plot_reliability(result: dict, path: str | Path, title: str = "") -> Path:
    """The reliability diagram of :func:`calibration_under_perturbation`: accuracy against mean confidence per
    bin (a marker's area: the bin's share of the examples), originals and perturbed, the diagonal being
    perfect calibration."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    ax.plot([0, 1], [0, 1], color="gray", lw=0.8, ls=":", label="perfect calibration")
    n = max(1, result["n"])
    for key, marker, ls, color in (("original", "o", "-", "tab:blue"), ("perturbed", "s", "--", "tab:orange")):
        rows = [r for r in result[key]["reliability"] if r["n"]]
        x, y = [r["confidence"] for r in rows], [r["accuracy"] for r in rows]
        ax.plot(x, y, ls=ls, color=color, lw=1, label=f"{key}: ECE {result[key]['ece']:.3f}, Brier {result[key]['brier']:.3f}")
        ax.scatter(x, y, s=[8 + 300 * r["n"] / n for r in rows], marker=marker, color=color, zorder=3)  # area ∝ bin size
    ax.set_xlabel("confidence (top class, per bin)")
    ax.set_ylabel("accuracy (per bin)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(title or "reliability diagram", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=120)
    return path


#: the rows of a calibration table: metric key, shown name
CALIBRATION_METRICS = (("ece", "ECE"), ("brier", "Brier score"), ("confidence", "mean confidence"), ("accuracy", "accuracy"))
#: its columns (the CLI's and the report's)
CALIBRATION_COLUMNS = ["metric", "original", "95% CI", "perturbed", "95% CI", "difference", "95% CI"]


def calibration_rows(res: dict) -> list[list]:
    """Each metric on the originals, on the perturbed texts, and their difference, with intervals."""
    o, p, d = res["original"], res["perturbed"], res["difference"]
    return [[name, f"{o[k]:.4f}", format_ci(o[f"{k}_ci95"]), f"{p[k]:.4f}", format_ci(p[f"{k}_ci95"]), f"{d[k]:+.4f}",
             format_ci(d[f"{k}_ci95"])] for k, name in CALIBRATION_METRICS]
