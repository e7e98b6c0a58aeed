"""B_{p,k} through the engine: one unit at a time (``--in-flight 1``) and many in flight, side by side.

    TEXTAUDIT_DATA=../shared/data python benchmarks/bias_throughput.py [--model lstm] [--group gender]
        [--k 2] [--max-sources 3] [--rounds 2] [--in-flight N] [--json]

Runs what ``audit bias --group gender --k 2 --max-sources 3 --model lstm`` runs (the group's pairs,
each pair's neighbourhood never adding a word of its group; κ = 20, δ = 3; Neighbor_2 enumerated)
on SST-2 dev, once with one unit in flight and once with the engine's default (32 on a CPU), in
palindromic order (A B B A) with empty caches before every pass, and prints per path: the scored
sentence pairs per second, the classifier texts and masked sentences per forward, where the time
went (inside the model forwards, or on the host), whether B agrees for every pair and k, and whether
the same sentences are scored with the same F (to 1e-6: a float32 probability may differ in its last
bit between batch compositions). Two-class models (F is a number). It asserts nothing (speed is not a test).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="lstm")
    ap.add_argument("--group", default="gender")
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--max-sources", type=int, default=3, help="sources X_p per pair")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--in-flight", type=int, default=None, help="the engine path's units in flight (default: the engine's)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from textaudit.data import load_dataset
    from textaudit.engine.scheduler import default_in_flight
    from textaudit.fairness import CounterfactualBias, run_bias
    from textaudit.fairness.groups import group_pairs
    from textaudit.models import load_classifier
    from textaudit.neighborhoods import load_mlm
    from textaudit.results import read_jsonl

    clf = load_classifier(args.model)
    mlm = load_mlm(quiet=True)
    pairs, blacklists = group_pairs(args.group, "reference")
    est = CounterfactualBias(clf, mlm, blacklists=blacklists, enumerate_k=args.k)
    texts = list(load_dataset("sst2:dev")["text"])
    engine_n = args.in_flight or default_in_flight(mlm.device)
    names = {"one": 1, "in_flight": engine_n}
    totals = {p: {"wall": 0.0, "device": 0.0, "texts": 0, "batches": 0, "masked": 0, "mlm_calls": 0, "pairs": 0}
              for p in names}
    results, rows = {}, {}
    order = [p for r in range(args.rounds) for p in (list(names) if r % 2 == 0 else list(names)[::-1])]
    with tempfile.TemporaryDirectory() as tmp:
        for j, p in enumerate(order):
            clf.clear_cache()
            mlm.clear_cache()
            st0 = (clf.stats.unique_forwards, clf.stats.batches, clf.stats.device_seconds)
            m0 = (mlm.forwards, mlm.clock.calls, mlm.clock.seconds)
            out = Path(tmp) / f"{p}-{j}.jsonl"
            t0 = time.perf_counter()
            res = run_bias(est, pairs, args.k, texts, max_sources=args.max_sources, output=out, progress=False,
                           in_flight=names[p])
            wall = time.perf_counter() - t0
            t = totals[p]
            t["wall"] += wall
            t["texts"] += clf.stats.unique_forwards - st0[0]
            t["batches"] += clf.stats.batches - st0[1]
            t["masked"] += mlm.forwards - m0[0]
            t["mlm_calls"] += mlm.clock.calls - m0[1]
            t["device"] += (clf.stats.device_seconds - st0[2]) + (mlm.clock.seconds - m0[2])
            scored = sorted((r["unit"], r["i"], r["text"], r["F"]) for r in read_jsonl(out) if "unit" in r)
            t["pairs"] += len(scored)
            results.setdefault(p, next(iter(res.values())))
            rows.setdefault(p, scored)
            print(f"pass {j + 1}/{len(order)} ({p}): {wall:.1f} s", file=sys.stderr)
    a, b = results["one"], results["in_flight"]
    max_dB = max(abs(a[pair][kk].B - b[pair][kk].B) for pair in a for kk in a[pair])
    same_sentences = [r[:3] for r in rows["one"]] == [r[:3] for r in rows["in_flight"]]
    dF = [abs(x[3] - y[3]) for x, y in zip(rows["one"], rows["in_flight"])]
    same_rows = same_sentences and max(dF, default=0.0) <= 1.5e-6
    figs = {}
    for p, t in totals.items():
        figs[p] = {"in_flight": names[p], "wall_s": round(t["wall"], 2), "pairs_per_s": round(t["pairs"] / t["wall"], 1),
                   "texts_per_forward": round(t["texts"] / max(t["batches"], 1), 1),
                   "masked_per_forward": round(t["masked"] / max(t["mlm_calls"], 1), 1),
                   "device_s": round(t["device"], 2), "host_s": round(max(t["wall"] - t["device"], 0.0), 2),
                   "pairs": t["pairs"]}
    print(f"\n{args.model}: audit bias --group {args.group} --k {args.k} --max-sources {args.max_sources} "
          f"({len(a)} pairs measured), {args.rounds} rounds per path; max |ΔB| = {max_dB:.2e}; "
          f"the same sentences scored: {same_sentences}; F equal to 1e-6: {same_rows} ({sum(d > 0 for d in dF)} of "
          f"{len(dF)} differ in the sixth decimal: float32 last bits between batch compositions)")
    keys = [("in flight", "in_flight"), ("scored pairs / s", "pairs_per_s"), ("texts / forward", "texts_per_forward"),
            ("masked / forward", "masked_per_forward"), ("wall s", "wall_s"), ("device s", "device_s"),
            ("host s", "host_s"), ("scored pairs", "pairs")]
    print(f"| {'':20} | {'one':>10} | {'in_flight':>10} | {'in_flight / one':>15} |")
    print(f"| {'-' * 20} | {'-' * 10}:| {'-' * 10}:| {'-' * 15}:|")
    for label, key in keys:
        x, y = figs["one"][key], figs["in_flight"][key]
        print(f"| {label:20} | {x:>10} | {y:>10} | {(y / x if x else 0):>15.2f} |")
    for pair, by_k in a.items():
        print(f"  {pair[0]}→{pair[1]}: " + ", ".join(f"B_{kk} = {e.B:+.6f}" for kk, e in by_k.items()))
    if args.json:
        print(json.dumps({"model": args.model, "group": args.group, "k": args.k, "max_sources": args.max_sources,
                          "max_abs_dB": max_dB, "same_sentences": same_sentences, "rows_identical_1e-6": same_rows,
                          "rows_last_digit": sum(d > 0 for d in dF), "paths": figs}))


if __name__ == "__main__":
    main()
