"""PerturbScore's headline on SST-2 (Li et al., Findings of EMNLP 2023, ``../shared/papers/perturbscore.txt``;
issue #80 item 3): a trained PerturbScorer ranks discrete perturbations by their continuous-equivalent ε better
than the edit distance or a sentence encoder's similarity does.

    TEXTAUDIT_DATA=../shared/data python benchmarks/paper_perturbscore.py      # build, train, evaluate what is missing
    TEXTAUDIT_DATA=../shared/data python benchmarks/paper_perturbscore.py --render

For each discrete perturbation — ``random-swap`` (the paper's "Rand. Perturb") and ``synonym-swap`` (counter-fitted
synonyms, standing in for its TextFooler tuples) — ``audit perturbscore build`` makes (x, x′, ε) tuples on the zoo
``cnn`` from SST-2 *training* sentences (1 to 6 words changed), the PerturbScorer (MiniLM-L6 + a regression head,
``audit perturbscore train``) learns ε from 80% of them (split by sentence), and on the held-out 20% Kendall τ and
Spearman ρ with ε are computed for the edit distance, the sentence encoder's distance 1 − cos (MiniLM, in USE's and
BERTScore's role) and the scorer, each τ with a 95% percentile-bootstrap interval over the held-out tuples and the
scorer's τ minus the edit distance's with its interval from the same resamples: the claim holds when that interval
lies above 0. Tuples are JSONL under ``paper/perturbscore/runs`` (appended as built; a killed build resumes), packed
gzip into ``cells`` with ``--pack`` together with each evaluation; the scorers themselves are not committed (retrained
from the cells with the same seed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

PERTURBATIONS = ("random-swap", "synonym-swap")
METHODS = ("edit_distance", "embedding_distance", "perturbscorer")
#: the paper's Table 3, IMDB and AG's News, BERT (normally fine-tuned): (Kendall, Spearman) per method
PAPER = {
    ("IMDB", "random-swap"): {"edit_distance": (0.4891, 0.635), "bertscore": (0.5952, 0.7745), "use": (0.577, 0.755),
                              "perturbscorer": (0.7092, 0.8648)},
    ("IMDB", "synonym-swap"): {"edit_distance": (0.5153, 0.6683), "bertscore": (0.5497, 0.7302), "use": (0.4932, 0.6697),
                               "perturbscorer": (0.7975, 0.9342)},
    ("AG's News", "random-swap"): {"edit_distance": (0.4377, 0.5785), "bertscore": (0.4652, 0.6352),
                                   "use": (0.4372, 0.6031), "perturbscorer": (0.7647, 0.9141)},
    ("AG's News", "synonym-swap"): {"edit_distance": (0.5055, 0.6585), "bertscore": (0.5279, 0.7166),
                                    "use": (0.5013, 0.6851), "perturbscorer": (0.821, 0.9477)},
}


CONTRASTS = (("perturbscorer", "edit_distance"), ("perturbscorer", "embedding_distance"))


def kendall_intervals(columns: dict[str, list[float]], eps: list[float], *, contrasts=CONTRASTS,
                      n_resamples: int = 2000, seed: int = 0) -> dict:
    """A percentile bootstrap over the held-out tuples (resampled together) of each column's Kendall τ with ε and
    of τ_a − τ_b for each of ``contrasts``. (scipy's ``bootstrap`` would do it but turns the interval NaN whenever
    a resample is constant; here such a resample is left out.)"""
    import warnings

    from scipy.stats import kendalltau

    names = list(columns)
    e = np.asarray(eps, dtype=float)
    cols = {k: np.asarray(v, dtype=float) for k, v in columns.items()}
    rng = np.random.default_rng(seed)
    draws = np.full((n_resamples, len(names) + len(contrasts)), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for b in range(n_resamples):
            idx = rng.integers(0, len(e), len(e))
            taus = [kendalltau(cols[k][idx], e[idx]).statistic for k in names]
            draws[b] = taus + [taus[names.index(a)] - taus[names.index(c)] for a, c in contrasts]

    def ci(k: int) -> list[float]:
        col = draws[:, k][~np.isnan(draws[:, k])]
        return [round(float(np.percentile(col, 2.5)), 4), round(float(np.percentile(col, 97.5)), 4)]

    return {**{k: ci(i) for i, k in enumerate(names)},
            **{f"{a}-{c}": ci(len(names) + j) for j, (a, c) in enumerate(contrasts)}}


def run(perturbations: list[str], out: Path, n: int, max_words: int, epochs: int, model: str, data: str) -> None:
    from textaudit.formats.jsonl import read_jsonl
    from textaudit.robustness.perturbscore import PerturbScorer, evaluate_scorer, split_tuples
    from textaudit.robustness.perturbscore.request import TuplesRequest

    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    for pert in perturbations:
        tuples = runs / f"tuples.{pert}.jsonl"
        req = TuplesRequest(model=model, perturbation=pert, n=n, data=data, output=tuples, resume=tuples.exists(),
                            max_words=max_words)
        print(f"[{pert}] tuples: {req.run().summary}", file=sys.stderr)
        evaluation = runs / f"eval.{pert}.json"
        if evaluation.exists():
            continue
        tr, te = split_tuples(read_jsonl(tuples), seed=0)
        t0 = time.perf_counter()
        scorer = PerturbScorer().fit(tr, epochs=epochs, seed=0)
        res = evaluate_scorer(scorer, te, keep_scores=True)
        res.update(n_train=len(tr), epochs=epochs, train_seconds=round(time.perf_counter() - t0, 1))
        evaluation.write_text(json.dumps(res) + "\n")
        print(f"[{pert}] held-out: {res['methods']}", file=sys.stderr)


def _tuples(path: Path) -> list[dict]:
    from reproduce_paper import read_cell

    return read_cell(path, path.parent.parent / "cells" / (path.name + ".gz"))[1]


def render(perturbations: list[str], out: Path) -> tuple[str, str, str]:
    lines = ["| perturbation | tuples kept / tried | held-out | method | Kendall τ [95%] | Spearman ρ | paper IMDB τ / ρ "
             "| paper AG's News τ / ρ | the paper's τ inside our interval? |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    claims = ["| perturbation | τ(PerturbScorer) − τ(edit distance) [95%] | the paper's claim | τ(PerturbScorer) − "
              "τ(1 − cos, MiniLM) [95%] | scorer above the encoder (the paper: above USE and BERTScore)? |",
              "| --- | --- | --- | --- | --- |"]
    paper_name = {"edit_distance": "edit_distance", "embedding_distance": "use", "perturbscorer": "perturbscorer"}
    compute = []
    for pert in perturbations:
        tuples = _tuples(out / "runs" / f"tuples.{pert}.jsonl")
        path = out / "runs" / f"eval.{pert}.json"
        packed = out / "cells" / f"eval.{pert}.json"
        source = path if path.exists() else packed
        if not source.exists():
            lines.append(f"| {pert} | {sum(1 for r in tuples if r.get('kept'))} / {len(tuples)} | not evaluated | | | | | | |")
            continue
        res = json.loads(source.read_text())
        cis = kendall_intervals(res["scores"], res["eps"])
        compute.append(f"{pert}: the tuples' ε searches {sum(r.get('seconds') or 0 for r in tuples) / 60:.0f} min, the "
                       f"scorer's training {res.get('train_seconds', 0) / 60:.0f} min")
        kept = sum(1 for r in tuples if r.get("kept"))
        for m in METHODS:
            c = res["methods"][m]
            imdb, ag = PAPER[("IMDB", pert)][paper_name[m]], PAPER[("AG's News", pert)][paper_name[m]]
            label = {"edit_distance": "edit distance", "embedding_distance": "1 − cos, MiniLM (paper: USE)",
                     "perturbscorer": "PerturbScorer"}[m]
            inside = ", ".join(f"{name} {'inside' if cis[m][0] <= tau <= cis[m][1] else 'outside'}"
                               for name, tau in (("IMDB", imdb[0]), ("AG", ag[0])))
            lines.append(f"| {pert} | {kept} / {len(tuples)} | {res['n_test']} | {label} | {c['kendall']:.4f} "
                         f"[{cis[m][0]:.2f}, {cis[m][1]:.2f}] | {c['spearman']:.4f} | {imdb[0]} / {imdb[1]} | {ag[0]} / {ag[1]} "
                         f"| {inside} |")
        cells = []
        for other in ("edit_distance", "embedding_distance"):
            lo, hi = cis[f"perturbscorer-{other}"]
            diff = res["methods"]["perturbscorer"]["kendall"] - res["methods"][other]["kendall"]
            verdict = "holds" if lo > 0 else ("reversed" if hi < 0 else "not shown (the interval spans 0)")
            cells += [f"{diff:+.4f} [{lo:+.3f}, {hi:+.3f}]", f"**{verdict}**"]
        claims.append(f"| {pert} | " + " | ".join(cells) + " |")
    return "\n".join(claims), "\n".join(lines), "; ".join(compute) or "nothing run yet"


README = """# PerturbScore: a learned scorer ranks discrete perturbations by their continuous ε

Li et al., *PerturbScore: Connecting Discrete and Continuous Perturbations in NLP* (Findings of EMNLP 2023),
`../shared/papers/perturbscore.txt`, reproduced on SST-2 with textaudit's `audit perturbscore`.

{doc}

## The claim: the scorer's τ above the edit distance's

{claims}

## Table 3, beside the paper's (its BERT rows)

{table}

## What differs from the paper

- **Data and model**: SST-2 training sentences and the zoo CNN (GloVe-6B-50d) in place of IMDB / AG's News and BERT;
  ε is found by PGD in the CNN's input-embedding space (as the paper does in BERT's).
- **Perturbations**: 1–6 words changed (SST-2's sentences are short; the paper's edit distances run 1–30 on IMDB,
  1–15 on AG's News); synonym swaps over the counter-fitted neighbours stand in for TextFooler's tuples.
- **Similarity**: MiniLM's sentence-embedding distance stands in for USE and BERTScore (neither installs offline).
- **The scorer**: MiniLM-L6 (the paper: a BERT-size model on 4 GPUs), {epochs} epochs, learning rate 5e-5 — the
  same MiniLM whose sentence distance is the encoder baseline here, so "above the encoder" asks what 3 epochs on a
  thousand tuples add to it.
- **Tuples kept**: a tuple is kept when PGD's shift at the ε found on the grid (step 0.01) is within 0.005 of d (the
  second column); the paper discards "a small proportion" with a tolerance its text does not give.
- **Not explained yet**: the edit distance's τ is far below the paper's (table above); no factor has been varied to
  find why — the range of edit distances (1–6 here) is the first to vary (`--max-words`).

Compute (this 2-core CPU, niced beside other runs): {compute}.
Run: `TEXTAUDIT_DATA=../shared/data python benchmarks/paper_perturbscore.py` (resumes the tuples; `--pack` packs the
tuples and the evaluations into `cells/`, what is committed; `--render` redraws this page from them, loading no
model).
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--perturbations", default=",".join(PERTURBATIONS))
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--data", default="sst2:train", help="the sentences perturbed (never SST-2 dev or test)")
    ap.add_argument("--n", type=int, default=1500, help="perturbations tried per kind")
    ap.add_argument("--max-words", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "paper" / "perturbscore")
    ap.add_argument("--render", action="store_true")
    ap.add_argument("--pack", action="store_true")
    args = ap.parse_args(argv)
    from reproduce_paper import pack_cells, unpack_cells

    perts = args.perturbations.split(",")
    runs, cells = args.out / "runs", args.out / "cells"
    unpack_cells(cells, runs)
    for f in sorted(cells.glob("eval.*.json")) if cells.is_dir() else []:
        if not (runs / f.name).exists():
            runs.mkdir(parents=True, exist_ok=True)
            (runs / f.name).write_bytes(f.read_bytes())
    if not args.render:
        run(perts, args.out, args.n, args.max_words, args.epochs, args.model, args.data)
    if args.pack:
        pack_cells(runs, cells)
        for f in sorted(runs.glob("eval.*.json")):
            (cells / f.name).write_bytes(f.read_bytes())
    claims, table, compute = render(perts, args.out)
    (args.out / "README.md").write_text(README.format(doc="\n\n".join(__doc__.split("\n\n")[2:3]), claims=claims,
                                                      table=table, epochs=args.epochs, compute=compute))
    print(claims)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
