"""Where SO-Beam spends its time: share of wall time inside model forwards (MLM + classifier).

    TEXTAUDIT_DATA=../shared/data python benchmarks/attack_profile.py [--model cnn] [--k 6] [--n 30]

Runs SO-Beam (β = 20, κ = 20, δ = 3) on the first N SST-2 dev examples with the default offline
MLM and prints seconds per example, the time inside the masked LM's forwards, inside the
classifier's forwards, and their share of the wall time (target ≥ 80%).
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--n", type=int, default=30)
    args = ap.parse_args()

    from textaudit.attacks import SOBeam, run_attack
    from textaudit.data import load_dataset
    from textaudit.models import load_classifier
    from textaudit.neighborhoods import load_mlm

    clf = load_classifier(args.model)
    mlm = load_mlm()
    atk = SOBeam(clf, args.k, mlm=mlm)
    atk.patch_words.fit()
    ds = load_dataset("sst2:dev", limit=args.n)
    clf.reset_stats()
    mlm.forward_seconds = 0.0
    t0 = time.perf_counter()
    summary, _ = run_attack(atk, ds["text"], ds["label"], progress=False)
    wall = time.perf_counter() - t0
    inside = mlm.forward_seconds + clf.stats.forward_seconds
    print(f"model={args.model} k={args.k} n={args.n} success_rate={summary['success_rate']} mean_l0={summary['mean_l0']}")
    print(f"wall {wall:.1f} s = {wall / args.n:.2f} s/example")
    print(f"masked-LM forwards {mlm.forward_seconds:.1f} s, classifier forwards {clf.stats.forward_seconds:.1f} s")
    print(f"share of wall time inside model forwards = {inside / wall:.2f}  (target >= 0.80)")


if __name__ == "__main__":
    main()
