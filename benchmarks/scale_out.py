"""Scale-out overhead: the same attack serial and on Ray workers, side by side in one run.

SO-Beam (k = 6, β = 20, minilm-mlm, --no-ppl) on the zoo's cnn over the first N SST-2 dev examples,
once with the serial backend and once with ``RayBackend(workers=W)``; prints seconds, examples/s,
the ratio Ray / serial (Ray's start-up reported apart), and whether the records agree (seconds and
query counters aside). On a 2-core machine expect ≈ 1× (the point is overhead); with a GPU lent,
``--gpus-per-worker 0.25 --workers 4`` against ``--workers 1`` measures sharing one GPU.

    TEXTAUDIT_DATA=../shared/data python benchmarks/scale_out.py [--limit 50] [--workers 2] [--gpus-per-worker 0]
"""

from __future__ import annotations

import argparse
import json
import time


def stable(records):
    volatile = ("seconds", "queries", "mlm_queries", "ppl_seconds")
    return sorted(json.dumps({k: v for k, v in r.items() if k not in volatile}, sort_keys=True) for r in records)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--gpus-per-worker", type=float, default=0.0)
    ap.add_argument("--cpus-per-worker", type=float, default=1.0)
    ap.add_argument("--model", default="cnn")
    args = ap.parse_args()

    import ray

    from textaudit.attacks import SOBeam, run_attack
    from textaudit.backends import RayBackend
    from textaudit.data import load_dataset
    from textaudit.models import load_classifier
    from textaudit.neighborhoods.mlm import load_mlm

    ds = load_dataset("sst2:dev", limit=args.limit)
    clf = load_classifier(args.model)
    mlm = load_mlm("minilm-mlm")
    atk = SOBeam(clf, k=6, mlm=mlm)
    atk.patch_words.fit()
    ids = [f"sst2:dev:{i}" for i in range(len(ds))]

    clf.clear_cache(), mlm.clear_cache()  # both runs start cold (patch-word scoring warmed them)
    t = time.perf_counter()
    _, serial = run_attack(atk, ds["text"], ds["label"], ids=ids, progress=False)
    t_serial = time.perf_counter() - t

    t = time.perf_counter()
    ray.init(num_cpus=max(2, int(args.workers * args.cpus_per_worker + 0.999)), include_dashboard=False,
             log_to_driver=False, configure_logging=False)
    t_start = time.perf_counter() - t
    backend = RayBackend(workers=args.workers, gpus_per_worker=args.gpus_per_worker, cpus_per_worker=args.cpus_per_worker)
    clf.clear_cache(), mlm.clear_cache()  # (copies sent to workers start empty anyway)
    t = time.perf_counter()
    _, parallel = run_attack(SOBeam(clf, k=6, mlm=mlm, patch_words=atk.patch_words), ds["text"], ds["label"], ids=ids,
                             progress=False, backend=backend)
    t_ray = time.perf_counter() - t
    ray.shutdown()

    n = len(ds)
    print(f"SO-Beam k=6 on {args.model}, {n} SST-2 dev examples, {args.workers} Ray workers "
          f"({args.cpus_per_worker} CPU, {args.gpus_per_worker} GPU each)")
    print(f"{'backend':<10} {'seconds':>8} {'examples/s':>11}")
    print(f"{'serial':<10} {t_serial:8.1f} {n / t_serial:11.2f}")
    print(f"{'ray':<10} {t_ray:8.1f} {n / t_ray:11.2f}   (+ {t_start:.1f} s to start Ray; of the {t_ray:.1f} s, "
          f"{backend.startup_seconds:.1f} s until the workers had their models)")
    print(f"ray / serial: {t_ray / t_serial:.2f}x; without the workers' start-up: "
          f"{(t_ray - backend.startup_seconds) / t_serial:.2f}x")
    by_id = {r["id"]: r for r in parallel}
    volatile = ("seconds", "queries", "mlm_queries", "ppl_seconds")
    diff = [(r["id"], k, r.get(k), by_id[r["id"]].get(k)) for r in serial for k in r
            if k not in volatile and r.get(k) != by_id[r["id"]].get(k)]
    floats = [d for d in diff if isinstance(d[2], float) and isinstance(d[3], float)]
    print(f"records: {len(serial)}; fields that differ: {len(diff)}, of which floats {len(floats)} "
          f"(largest gap {max((abs(a - b) for *_, a, b in floats), default=0):.1e}: one thread per worker vs two in "
          "the serial run sums in another order)")
    for d in diff[:5]:
        print("differs:", d)


if __name__ == "__main__":
    main()
