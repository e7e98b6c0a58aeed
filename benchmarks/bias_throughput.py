"""Throughput of the counterfactual-bias estimator: scored neighbourhood sentence pairs per minute.

    TEXTAUDIT_DATA=../shared/data python benchmarks/bias_throughput.py [--model lstm] [--pair he,she]
        [--sources 4] [--k 2]

Enumerates {x} ∪ Neighbor_k(x) (κ = 20, δ = 3, gender words blacklisted) for the first N sources
of X_p on SST-2 dev and scores every sentence pair (x with p(1), x with p(2)). Prints the pairs
per minute end to end (target ≥ 20,000/min for lstm on this CPU), and the split of the wall time
between the masked LM's forwards, the classifier's forwards and the rest.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="lstm")
    ap.add_argument("--pair", default="he,she")
    ap.add_argument("--sources", type=int, default=4)
    ap.add_argument("--k", type=int, default=2)
    args = ap.parse_args()

    from textaudit.data import load_dataset
    from textaudit.fairness import CounterfactualBias, parse_pair
    from textaudit.fairness.estimates import aggregate
    from textaudit.models import load_classifier
    from textaudit.neighborhoods import load_mlm

    clf = load_classifier(args.model)
    mlm = load_mlm()
    pair = parse_pair(args.pair)
    est = CounterfactualBias(clf, mlm, enumerate_k=args.k)
    texts = list(load_dataset("sst2:dev")["text"])
    sources = est.sources(texts, pair)[: args.sources]
    clf.reset_stats()
    mlm.forward_seconds = 0.0
    t0 = time.perf_counter()
    units = [est.score_unit(s, pair, args.k, None)[0] for s in sources]
    wall = time.perf_counter() - t0
    pairs = sum(len(u.F) for u in units)
    by_k = aggregate(units, pair, args.k, args.k)
    print(f"model={args.model} pair={pair[0]},{pair[1]} sources={len(sources)} k<={args.k} mlm={mlm.name}")
    print(f"scored sentence pairs: {pairs} in {wall:.1f} s = {pairs / wall * 60:,.0f} pairs/min (target >= 20,000)")
    print(f"masked-LM forwards {mlm.forward_seconds:.1f} s, classifier forwards {clf.stats.forward_seconds:.1f} s, "
          f"other {wall - mlm.forward_seconds - clf.stats.forward_seconds:.1f} s")
    for kk, e in by_k.items():
        print(f"  B_{{p,{kk}}} = {e.B:+.5f}  95% CI [{e.ci95[0]:+.5f}, {e.ci95[1]:+.5f}]  n={int(e.n)}")


if __name__ == "__main__":
    main()
