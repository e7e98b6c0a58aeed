"""CENT's headline on SST-2 (Zhang et al., "Causally Estimating the Sensitivity of Neural NLP Models to Spurious
Features", ``../shared/papers/cent-spurious-features.txt``; issue #80 item 2): the more sensitive a model is to a
spurious feature, the less robust it is to it, and the more data augmentation along it helps.

    TEXTAUDIT_DATA=../shared/data python benchmarks/paper_cent.py            # run the study if missing, then render
    TEXTAUDIT_DATA=../shared/data python benchmarks/paper_cent.py --render   # README from the committed study

CENT is the learnability paper's earlier version: the same randomised study (pseudo-labels, one pseudo-class
injected with the feature at probability p, a fresh model per p), read two ways — the accuracy-based ATE and the
probability-based ATE (mean P(l′ = 1 | g(x)) − mean P(l′ = 1 | x), CENT's Appendix B.1) on the treated test texts.
So this page reads the runs of ``benchmarks/paper_learnability.py`` (``paper/learnability``; it runs them when
they are missing): average sensitivity per model × feature as CENT's Table 1 (logAUC over log10 p), and its Table 3 —
the spread σ of Sensitivity@p and the Spearman ρ of Sensitivity@p and of the average with the average,
robustness and post-aug Δ over all model–feature pairs, accuracy- and probability-based — beside CENT's IMDB
numbers (its Figure 3's ρ: −0.643 and 0.756 accuracy-based, −0.652 and 0.727 probability-based).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import paper_learnability as learn  # noqa: E402

#: CENT's Table 3 (IMDB): σ, ρ with average sensitivity, robustness, post-aug Δ — accuracy-based then
#: probability-based, for the average ("avg") and each injection probability p
PAPER_TABLE3 = {
    "avg": ((0.375, 1.000, -0.643, 0.756), (0.288, 1.000, -0.652, 0.727)),
    0.001: ((0.182, 0.426, -0.265, 0.259), (0.114, 0.367, -0.279, 0.288)),
    0.005: ((0.235, 0.637, -0.383, 0.522), (0.192, 0.925, -0.620, 0.702)),
    0.01: ((0.263, 0.741, -0.530, 0.635), (0.192, 0.893, -0.567, 0.586)),
    0.02: ((0.257, 0.816, -0.636, 0.743), (0.192, 0.886, -0.686, 0.690)),
    0.05: ((0.236, 0.279, -0.158, 0.136), (0.121, 0.576, -0.371, 0.350)),
    0.1: ((0.241, 0.354, -0.162, 0.192), (0.115, 0.543, -0.288, 0.258)),
    0.5: ((0.094, 0.024, 0.155, -0.179), (0.037, -0.080, 0.114, -0.258)),
    1.0: ((0.011, -0.199, 0.252, -0.332), (0.019, -0.220, 0.294, -0.402)),
}


def _rho(x, y) -> str:
    from textaudit.stats import rank_correlation

    c = rank_correlation(list(x), list(y))
    if c["rho"] is None:
        return "–"
    return f"{c['rho']:+.3f}" + ("*" if c["p"] is not None and c["p"] < 0.05 else "")


def table3(entries_acc: list[dict], entries_prob: list[dict]) -> str:
    head = ("| Sensitivity@p | acc: σ | acc: ρ avg | acc: ρ robustness | acc: ρ post-aug | prob: σ | prob: ρ avg "
            "| prob: ρ robustness | prob: ρ post-aug | CENT IMDB (acc σ, ρ avg, ρ rob, ρ aug / prob …) |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    lines = [head]
    for p, (acc_paper, prob_paper) in PAPER_TABLE3.items():
        cells = []
        for entries in (entries_acc, entries_prob):
            if len(entries) < 3:
                cells.append("– | – | – | –")
                continue
            vals = [e["log_auc"] if p == "avg" else e["at"][p] for e in entries]
            avg = [e["log_auc"] for e in entries]
            cells.append(f"{np.std(vals):.3f} | {_rho(vals, avg)} | {_rho(vals, [e['robustness'] for e in entries])} | "
                         f"{_rho(vals, [e['post_aug_delta'] for e in entries])}")
        paper = ", ".join(f"{v:+.3f}" for v in acc_paper) + " / " + ", ".join(f"{v:+.3f}" for v in prob_paper)
        lines.append(f"| {'average' if p == 'avg' else p} | {cells[0]} | {cells[1]} | {paper} |")
    return "\n".join(lines)


def table1(entries_acc: list[dict], entries_prob: list[dict]) -> str:
    models = sorted({e["model"] for e in entries_acc})
    by_acc = {(e["model"], e["perturbation"]): e for e in entries_acc}
    by_prob = {(e["model"], e["perturbation"]): e for e in entries_prob}
    lines = ["| feature | " + " | ".join(f"{m}: acc | {m}: prob" for m in models) + " | CENT TextRNN | CENT, 4 models |",
             "| --- | " + " | ".join("--- | ---" for _ in models) + " | --- | --- |"]
    for g, (rnn, avg) in learn.PAPER_TABLE2.items():
        cells = []
        for m in models:
            a, b = by_acc.get((m, g)), by_prob.get((m, g))
            cells.append(f"{a['log_auc']:.3f} | {b['log_auc']:.3f}" if a and b else "| ")
        lines.append(f"| {g} | " + " | ".join(cells) + f" | {rnn:.3f} | {avg:.3f} |")
    return "\n".join(lines)


def claims(entries_acc: list[dict], entries_prob: list[dict]) -> str:
    lines = ["| average sensitivity | vs robustness [95%] | vs post-aug Δ [95%] | claim (ρ < 0 and ρ > 0, p < 0.05) "
             "| CENT IMDB | CENT's ρ inside our intervals? |", "| --- | --- | --- | --- | --- | --- |"]
    for label, entries, paper in (("accuracy-based", entries_acc, (-0.643, 0.756)),
                                  ("probability-based", entries_prob, (-0.652, 0.727))):
        shown = f"{paper[0]:+.3f} / {paper[1]:+.3f}"
        if len(entries) < 3:
            lines.append(f"| {label} | fewer than 3 finished pairs | | | {shown} | – |")
            continue
        c = learn.correlations(entries)
        ok = learn.verdict(c["robustness"], -1) == "holds" and learn.verdict(c["post_aug_delta"], +1) == "holds"
        inside = " / ".join("inside" if c[k].get("ci95") and c[k]["ci95"][0] <= v <= c[k]["ci95"][1] else "outside"
                            for k, v in zip(("robustness", "post_aug_delta"), paper))
        lines.append(f"| {label} | {learn.fmt_rho(c['robustness'])} | {learn.fmt_rho(c['post_aug_delta'])} | "
                     f"**{'holds' if ok else 'not shown'}** (n = {len(entries)}) | {shown} | {inside} |")
    return "\n".join(lines)


README = """# CENT: sensitivity to a spurious feature predicts robustness to it

Zhang et al., *Causally Estimating the Sensitivity of Neural NLP Models to Spurious Features* (arXiv 2021),
`../shared/papers/cent-spurious-features.txt`, on SST-2 with textaudit's `audit learnability` (whose records carry both
ATEs).

{doc}

## The claim (CENT's Figure 3)

{claims}

## Average sensitivity per model × feature (CENT's Table 1 form; logAUC, 0 to 3)

{table1}

## Sensitivity@p against the average (CENT's Table 3; * p < 0.05)

{table3}

Compute: none of its own — the study of `paper/learnability` (its README gives its time). What differs from CENT: the
data (SST-2, {train_size:,} training phrases, against IMDB), the models (the zoo's CNN
and BiLSTM against XLNet, RoBERTa, BERT and TextRNN), {n} model–feature pairs against 32, one seed —
`paper/learnability/README.md` says more. Run: `TEXTAUDIT_DATA=../shared/data python benchmarks/paper_cent.py`
(`--render` redraws this page from `paper/learnability`'s committed study, loading no model).
"""


def write(out: Path, study: Path) -> str:
    config: dict = {}
    rows = learn.records(study, config)
    acc, prob = learn.pairs(rows, "learnability"), learn.pairs(rows, "prob_ate")
    text = claims(acc, prob)
    out.mkdir(parents=True, exist_ok=True)
    (out / "README.md").write_text(README.format(doc="\n\n".join(__doc__.split("\n\n")[2:3]), claims=text,
                                                 table1=table1(acc, prob), table3=table3(acc, prob),
                                                 train_size=config.get("train_size") or 0, n=len(acc)))
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="cnn,lstm")
    ap.add_argument("--study", type=Path, default=learn.RUNS, help="paper_learnability.py's folder")
    ap.add_argument("--out", type=Path, default=ROOT / "paper" / "cent")
    ap.add_argument("--render", action="store_true")
    args = ap.parse_args(argv)
    if not args.render:
        learn.run_study(args.models.split(","), args.study, learn.TRAIN_SIZE)
    print(write(args.out, args.study))
    return 0


if __name__ == "__main__":
    sys.exit(main())
