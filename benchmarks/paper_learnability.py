"""The learnability paper's headline on SST-2 (Zhang et al., Findings of ACL 2022,
``../shared/papers/learnability-robustness.txt``; issue #80 item 1): a perturbation a model learns from little
evidence is one it is less robust to, and one that data augmentation helps more.

    TEXTAUDIT_DATA=../shared/data python benchmarks/paper_learnability.py --models cnn,lstm   # run what is missing
    TEXTAUDIT_DATA=../shared/data python benchmarks/paper_learnability.py --render            # README from the runs

The study is ``audit learnability``'s (``robustness/learnability.py``, the paper's Algorithm 1): for each zoo model
and each of the paper's 8 perturbations, learnability@p at p ∈ {0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0}
(pseudo-labels, one pseudo-class perturbed with probability p, a fresh model per p, the accuracy-based ATE on the
treated test texts), robustness (a model trained on clean data, tested on the perturbed dev set) and the
post-augmentation Δ (trained on train plus its perturbed copy) — 9 trainings per model–perturbation pair on a seeded
sample of 10,000 SST-2 training texts, tested on SST-2 dev. Average learnability is the area under learnability@p on
log10 p: the paper's logAUC, which is ours (normalised by the 3 decades) × 3. Over the model–perturbation pairs:
Spearman ρ(average learnability, robustness) and ρ(average learnability, post-aug Δ) with p-values and 95%
percentile-bootstrap intervals over the pairs, beside the paper's IMDB −0.643 and 0.756 (Table 3).
``benchmarks/paper_cent.py`` reads the same runs for the CENT paper's probability-based sensitivity.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

RUNS = ROOT / "paper" / "learnability"
TRAIN_SIZE = 10_000
#: the learnability paper's Table 2 (IMDB): average learnability (logAUC) per perturbation, TextRNN and the
#: average over its four models (XLNet, RoBERTa, BERT, TextRNN)
PAPER_TABLE2 = {
    "whitespace_perturbation": (0.878, 1.361), "shuffle_word": (0.594, 1.424),
    "duplicate_punctuations": (2.050, 1.495), "butter_fingers_perturbation": (1.563, 1.578),
    "random_upper_transformation": (2.039, 1.716), "insert_abbreviation": (2.219, 1.788),
    "visual_attack_letters": (2.094, 1.934), "leet_letters": (2.463, 2.065),
}
#: Table 3: Spearman ρ of average learnability with robustness and with post-aug Δ (IMDB, YELP, QQP)
PAPER_TABLE3 = {"robustness": (-0.643, -0.821, -0.695), "post_aug_delta": (0.756, 0.846, 0.750)}


def study_path(out: Path) -> Path:
    return out / "runs" / "study.jsonl"


def run_study(models: list[str], out: Path, train_size: int) -> dict:
    from textaudit.perturbations.noise import NOISE_PERTURBATIONS
    from textaudit.robustness.learnability import run_study as study

    path = study_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    return study(models, list(NOISE_PERTURBATIONS), train_size=train_size, output=path, resume=path.exists(),
                 progress=True)


def records(out: Path, header: dict | None = None) -> list[dict]:
    """The study's records (from ``runs/``, else the packed cell); ``header``, when given, receives its config."""
    from reproduce_paper import read_cell

    head, rows = read_cell(study_path(out), out / "cells" / "study.jsonl.gz")
    if header is not None and head is not None:
        header.update(head.get("config", {}))
    return rows


def pairs(rows: list[dict], key: str = "learnability") -> list[dict]:
    """One entry per model–perturbation pair with all 8 p and the robustness run: the average of ``key``
    (``learnability``: accuracy-based; ``prob_ate``: probability-based) over log10 p, its value at each p,
    robustness and post-aug Δ."""
    from textaudit.robustness.learnability import DEFAULT_PROBABILITIES, average_learnability

    out = []
    for m in sorted({r["model"] for r in rows}):
        for g in sorted({r["perturbation"] for r in rows}):
            mine = [r for r in rows if r["model"] == m and r["perturbation"] == g]
            at = {float(r["p"]): r[key] for r in mine if r["p"] != "robustness"}
            rob = [r for r in mine if r["p"] == "robustness"]
            if len(at) < len(DEFAULT_PROBABILITIES) or not rob:
                continue
            ps = sorted(at)
            avg = average_learnability(ps, [at[p] for p in ps])
            out.append({"model": m, "perturbation": g, "at": at, "average": avg,
                        "log_auc": avg * (math.log10(ps[-1]) - math.log10(ps[0])),
                        "robustness": rob[0]["robustness"], "post_aug_delta": rob[0]["post_aug_delta"]})
    return out


def correlations(entries: list[dict], y: str = "average") -> dict:
    from textaudit.stats import rank_correlations_with_intervals

    return rank_correlations_with_intervals([e[y] for e in entries], {
        "robustness": [e["robustness"] for e in entries], "post_aug_delta": [e["post_aug_delta"] for e in entries]})


def fmt_rho(c: dict) -> str:
    if c.get("rho") is None:
        return "undefined (" + c.get("note", "") + ")"
    ci = c.get("ci95")
    p = c.get("p")
    return (f"{c['rho']:+.3f}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "")
            + (f", p = {p:.2g}" if p is not None else ""))


def verdict(c: dict, sign: int) -> str:
    if c.get("rho") is None:
        return "undefined"
    ok = c["rho"] * sign > 0 and c["p"] is not None and c["p"] < 0.05
    return "holds" if ok else "not shown"


def render(out: Path) -> str:
    config: dict = {}
    rows = records(out, config)
    entries = pairs(rows)
    n_jobs = len(rows)
    models = sorted({e["model"] for e in entries})
    lines = ["| perturbation | " + " | ".join(f"{m}: logAUC | {m}: robustness | {m}: post-aug Δ" for m in models)
             + " | paper TextRNN | paper, average of 4 models |",
             "| --- | " + " | ".join("--- | --- | ---" for _ in models) + " | --- | --- |"]
    by = {(e["model"], e["perturbation"]): e for e in entries}
    for g, (rnn, avg) in PAPER_TABLE2.items():
        cells = []
        for m in models:
            e = by.get((m, g))
            cells.append(f"{e['log_auc']:.3f} | {e['robustness']:+.3f} | {e['post_aug_delta']:+.3f}" if e else "| |")
        lines.append(f"| {g} | " + " | ".join(cells) + f" | {rnn:.3f} | {avg:.3f} |")
    corr = correlations(entries) if len(entries) >= 3 else {}
    claim = ["| Spearman ρ over the model–perturbation pairs | ours, SST-2 [95% bootstrap] | claim | paper IMDB | YELP | QQP "
             "| the paper's IMDB ρ inside our interval? |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for key, label, sign in (("robustness", "average learnability vs robustness", -1),
                             ("post_aug_delta", "average learnability vs post-aug Δ", +1)):
        c = corr.get(key, {"rho": None, "note": "fewer than 3 finished pairs"})
        paper = PAPER_TABLE3[key]
        ci = c.get("ci95")
        inside = "–" if not ci else ("inside" if ci[0] <= paper[0] <= ci[1] else "outside")
        claim.append(f"| {label} | {fmt_rho(c)} (n = {len(entries)}) | {'ρ < 0' if sign < 0 else 'ρ > 0'} at p < 0.05: "
                     f"**{verdict(c, sign)}** | {paper[0]:+.3f} | {paper[1]:+.3f} | {paper[2]:+.3f} | {inside} |")
    seconds = sum(r.get("seconds", 0) for r in rows)
    return "\n".join(claim), "\n".join(lines), len(entries), n_jobs, seconds, config.get("train_size")


README = """# Learnability: a perturbation learned from little evidence is one a model is less robust to

Zhang, Pan, Tan, Kan. *Interpreting the Robustness of Neural NLP Models to Textual Perturbations* (Findings of ACL
2022), `../shared/papers/learnability-robustness.txt`, reproduced on SST-2 with textaudit's `audit learnability`.

{doc}

## The claim

{claim}

## Per model and perturbation (the paper's Table 2 form)

logAUC: the area under learnability@p over log10 p (the paper's scale: 0 to 3); robustness: accuracy on the
perturbed dev set minus on the clean one (a clean-trained model); post-aug Δ: the gain on the perturbed dev set from
training on train plus its perturbed copy. The paper's columns are IMDB's.

{table}

## What differs from the paper

- **Data**: SST-2 ({train_size:,} training phrases sampled with seed 0, the 872 dev sentences) in place of IMDB, YELP and
  QQP; SST-2's phrases are short, so a perturbation has fewer places to act on each. No package on PyPI ships the
  papers' data sets offline (checked 2026-11-29: `imdb` is an IMDb query client, `agnews` a news scraper;
  `torchtext` and `tensorflow-datasets` download the data at run time, which this machine cannot).
- **Models**: textaudit's zoo (GloVe-6B-50d CNN and BiLSTM, trained from scratch) in place of XLNet, RoBERTa, BERT
  and TextRNN; one seed (the paper's number of seeds is not stated in the text we have).
- **Points**: {n} model–perturbation pairs (the paper: 32), so the bootstrap intervals are wide.
- **Perturbations**: the paper's 8, as `perturbations/noise.py` implements them (NL-Augmenter's descriptions).
  `random_upper_transformation` cannot be learned by the zoo's word models: their tokenizer lower-cases, so it changes
  860 of the 872 dev sentences and none of the cnn's probabilities (measured: the largest difference is 0.0) — its
  logAUC, robustness and post-aug Δ are 0 by construction, not by the model (the paper's subword models see case).

Compute: {jobs} trainings, {minutes:.0f} min on this 2-core CPU (niced beside other runs). Run:
`TEXTAUDIT_DATA=../shared/data python benchmarks/paper_learnability.py --models cnn,lstm` (resumes; `--pack` packs
`runs/study.jsonl` into `cells/`, what is committed; `--render` redraws this page from it, loading no model).
"""


def write(out: Path) -> str:
    claim, table, n, jobs, seconds, train_size = render(out)
    doc = "\n\n".join(__doc__.split("\n\n")[2:3])
    (out / "README.md").write_text(README.format(doc=doc, claim=claim, table=table, n=n, jobs=jobs, minutes=seconds / 60,
                                                 train_size=train_size or 0))
    return claim


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="cnn,lstm")
    ap.add_argument("--train-size", type=int, default=TRAIN_SIZE)
    ap.add_argument("--out", type=Path, default=RUNS)
    ap.add_argument("--render", action="store_true", help="run nothing: write README.md from the runs there are")
    ap.add_argument("--pack", action="store_true", help="pack runs/study.jsonl into cells/ (what is committed)")
    args = ap.parse_args(argv)
    from reproduce_paper import pack_cells, unpack_cells

    restored = unpack_cells(args.out / "cells", args.out / "runs")
    if restored:
        print(f"restored {restored} cells; resuming from them", file=sys.stderr)
    if not args.render:
        run_study(args.models.split(","), args.out, args.train_size)
    if args.pack:
        print(f"packed {pack_cells(args.out / 'runs', args.out / 'cells')} cells", file=sys.stderr)
    print(write(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
