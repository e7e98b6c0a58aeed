"""Fill-mask quality and speed of every available masked LM (issue: offline masked LM).

    TEXTAUDIT_DATA=../shared/data python benchmarks/mlm_quality.py [--mlm minilm-mlm] [--max-sst N]

For each MLM (distilbert-base-uncased if available offline, and minilm-mlm) it prints word-level
top-1 / top-10 accuracy when masking, one at a time, every lowercase alphabetic single-token word of
(a) SST-2 dev (≈13k positions), (b) SST-2 dev content words only (function words excluded), and
(c) a general-English held-out set never trained on (WordNet held-out examples + everyday
sentences, benchmarks/data/), (d) the real-world held-out set of ``build_heldout.py`` — product
reviews, news editorials, tweets and a software manual, one masked word per sentence, 300 per
domain, sources never trained on — overall and per domain, plus batched masked sentences per second, and the top-10 for three
probe sentences. Side by side on the same 3,000 masked sentences: ``candidates`` (batches sorted by
length, less padding) against the same queries batched in input order (ratio sorted / input order).
Targets for the default offline MLM: SST-2 dev top-10 >= 0.60; real-world top-10 >= 0.55 with no
domain below 0.45; general top-10 >= 0.45; >= 150 masked sentences/s.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBES = ["a deep and [MASK] film .", "the [MASK] is a total mess .", "heavy [MASK] caused flooding across several northern towns ."]


def realworld_queries() -> dict[str, list[tuple[list[str], int, str]]]:
    """The real-world held-out set as ``{domain: [(words, position, target)]}`` (every masked word counts,
    whether or not an MLM's vocabulary holds it)."""
    out: dict[str, list] = {}
    for line in (HERE / "data" / "realworld_heldout.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        out.setdefault(r["domain"], []).append((r["text"].split(), r["position"], r["target"]))
    return out


def choose_rerank(base_name: str, lm_name: str, n: int = 250) -> dict:
    """Pick the quality mode's pool P and weight λ (:mod:`textaudit.neighborhoods.rerank`) on the
    training-time dev sets only — WordNet dev examples and the SST-2 *train* hold-out, ``n`` masked
    words each (seed 1234) — by mean top-10. One pass scores the largest pool; smaller pools are its
    prefixes (the MLM's own order), and every λ recombines the same two scores."""
    import numpy as np

    from textaudit.lm import load_causal_lm
    from textaudit.neighborhoods.mlm import load_mlm
    from textaudit.neighborhoods.mlm_eval import mask_queries
    from textaudit.neighborhoods.rerank import _filled
    from textaudit.neighborhoods.train_mlm import TrainMLMConfig, sst_corpus, wordnet_corpus

    mlm, lm = load_mlm(base_name, quiet=True), load_causal_lm(lm_name)
    vocab = mlm.tokenizer.get_vocab()
    rng = np.random.default_rng(1234)
    sets = {"wordnet-dev": mask_queries(wordnet_corpus(TrainMLMConfig().wordnet_dir)["dev"], vocab),
            "sst2-train-dev": mask_queries(sst_corpus()["dev"], vocab)}
    sets = {k: [qs[i] for i in sorted(rng.permutation(len(qs))[:n])] for k, qs in sets.items()}
    pools, weights = (10, 20, 30, 50), (0.0, 0.25, 0.5, 1.0, 2.0)
    hits = {(p, w): [] for p in pools for w in weights}
    for qs in sets.values():
        props = mlm.candidates([(w, i) for w, i, _ in qs], top=max(pools))
        ll = iter(lm.log_likelihood([_filled(w, i, c) for (w, i, _), ps in zip(qs, props) for c, _ in ps]))
        scored = [[(c, next(ll), logit) for c, logit in ps] for ps in props]
        for p in pools:
            for lam in weights:
                ok = sum(t in [c for c, _, _ in sorted(sc[:p], key=lambda x: -(x[1] + lam * x[2]))[:10]]
                         for (_, _, t), sc in zip(qs, scored))
                hits[(p, lam)].append(ok / len(qs))
    table = {f"P={p} λ={w}": [round(h, 4) for h in v] + [round(float(np.mean(v)), 4)] for (p, w), v in hits.items()}
    best = max(hits, key=lambda k: (np.mean(hits[k]), -k[0]))
    print("\nquality-mode choice on the training dev sets (top-10: wordnet-dev, sst2-train-dev, mean)")
    for k, v in table.items():
        print(f"  {k:14s} {v}")
    print(f"chosen: P={best[0]} λ={best[1]}")
    return {"table": table, "pool": best[0], "weight": best[1]}


def sorting_ratio(mlm, queries) -> dict:
    """Masked sentences/s of ``candidates`` (length-sorted batches) vs input-order batches, best of two each."""
    keys = [(tuple(w[:i]), tuple(w[i + 1:]), 10) for w, i, _ in queries]

    def input_order() -> float:
        t0 = time.perf_counter()
        for s in range(0, len(keys), mlm.batch_size):
            mlm._predict(keys[s:s + mlm.batch_size], 10)
        return time.perf_counter() - t0

    def length_sorted() -> float:
        mlm.clear_cache()
        t0 = time.perf_counter()
        mlm.candidates([(w, i) for w, i, _ in queries], top=10)
        return time.perf_counter() - t0

    t_in, t_sorted = [], []
    for _ in range(2):  # alternate, so both see the same machine state
        t_in.append(input_order())
        t_sorted.append(length_sorted())
    n = len(queries)
    return {"input_order_per_s": round(n / min(t_in), 1), "sorted_per_s": round(n / min(t_sorted), 1),
            "ratio": round(min(t_in) / min(t_sorted), 2)}


def main() -> None:
    from textaudit.progress import quiet_third_party_bars

    quiet_third_party_bars()  # textaudit's own progress lines only, as under the audit command
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlm", action="append", help="MLM name(s); default: every available one")
    ap.add_argument("--max-sst", type=int, default=None, help="use at most N SST-2 dev positions")
    ap.add_argument("--max-per-set", type=int, default=None,
                    help="at most the first N positions of every set and real-world domain (the quality mode is slow on a CPU)")
    ap.add_argument("--speed-n", type=int, default=3000, help="masked SST-2 dev sentences timed for the throughput")
    ap.add_argument("--choose-rerank", action="store_true",
                    help="choose the quality mode's P and λ on the training dev sets, then stop")
    args = ap.parse_args()
    if args.choose_rerank:
        print(json.dumps(choose_rerank("minilm-mlm", "smollm2")))
        return

    from textaudit.data import load_dataset
    from textaudit.neighborhoods.mlm import load_mlm
    from textaudit.neighborhoods.mlm_eval import fill_mask_accuracy, mask_queries
    from textaudit.resources import locate
    from textaudit.text import STOPWORDS

    names = args.mlm or (["distilbert-base-uncased"] if locate("distilbert-base-uncased", download=False).found else []) + ["minilm-mlm"]
    dev = load_dataset("sst2:dev")["text"]
    general = [l.strip() for f in ("wordnet_heldout_examples.txt", "everyday_sentences.txt")
               for l in (HERE / "data" / f).read_text().splitlines() if l.strip()]
    rows = []
    for name in names:
        mlm = load_mlm(name)
        vocab = mlm.tokenizer.get_vocab()
        sets = {"sst2-dev": mask_queries(dev, vocab),
                "sst2-dev-content": mask_queries(dev, vocab, content_only=True, stopwords=set(STOPWORDS)),
                "general-heldout": mask_queries(general, vocab)}
        sets.update({f"realworld-{d}": qs for d, qs in realworld_queries().items()})
        if args.max_sst:
            sets = {k: (v[: args.max_sst] if k.startswith("sst2") else v) for k, v in sets.items()}
        if args.max_per_set:
            sets = {k: v[: args.max_per_set] for k, v in sets.items()}
        row = {"mlm": name}
        for k, qs in sets.items():
            mlm.clear_cache()
            row[k] = fill_mask_accuracy(mlm, qs)
        domains = [row[k] for k in sets if k.startswith("realworld-")]
        n = sum(r["n"] for r in domains)  # all domains together: every masked word counts once
        row["realworld"] = {"n": n, **{t: round(sum(r[t] * r["n"] for r in domains) / n, 4) for t in ("top1", "top10")}}
        sets = {**sets, "realworld": []}
        # throughput on a fresh cache: masked sentences per second, batched
        mlm.clear_cache()
        row["masked_per_s"] = fill_mask_accuracy(mlm, sets["sst2-dev"][: args.speed_n])["masked_per_s"]
        if hasattr(mlm, "_predict"):  # a single masked LM (not the quality mode)
            row["sorted_vs_input_order"] = sorting_ratio(mlm, sets["sst2-dev"][: args.speed_n])
        row["probes"] = {}
        for p in PROBES:
            w = p.split()
            row["probes"][p] = [c for c, _ in mlm.candidates([(w, w.index("[MASK]"))], top=10)[0]]
        rows.append(row)
        print(f"\n== {name}")
        for k in sets:
            r = row[k]
            print(f"{k:18s} n={r['n']:6d}  top-1 {r['top1']:.3f}  top-10 {r['top10']:.3f}")
        print(f"throughput: {row['masked_per_s']:.1f} masked sentences/s (batched, CPU threads as torch default)")
        if "sorted_vs_input_order" in row:
            r = row["sorted_vs_input_order"]
            print(f"batching: length-sorted {r['sorted_per_s']:.0f} vs input order {r['input_order_per_s']:.0f} "
                  f"masked sentences/s -> ratio {r['ratio']:.2f}")
        for p, c in row["probes"].items():
            print(f"probe: {p}\n   -> {', '.join(c)}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
