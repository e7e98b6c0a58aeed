"""Scale-out overhead: the same `audit attack` serial and on Ray workers, side by side in one run.

SO-Beam (k = 6, β = 20, minilm-mlm, --no-ppl) on the zoo's cnn over the first N SST-2 dev examples,
run end to end as a user runs it (a fresh process: imports, model loading, search, writing), once
serial and once with ``--backend ray --workers W``. Prints seconds, examples/s, the ratio
Ray / serial, and how the records compare (seconds and query counters aside). On a 2-core machine
expect ≈ 1× (the point is overhead). This machine's speed drifts by ±15 % from one minute to the next,
so the two runs alternate for ``--rounds`` rounds and the ratio is that of the medians. With a GPU
lent, ``--gpus-per-worker 0.25 --workers 4`` against ``--workers 1`` measures four workers sharing one GPU.

    TEXTAUDIT_DATA=../shared/data python benchmarks/scale_out.py [--limit 50] [--workers 2] [--gpus-per-worker 0] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VOLATILE = ("seconds", "queries", "mlm_queries", "ppl_seconds")


def audit(*args: str) -> tuple[float, dict]:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "textaudit", *args, "--json"], capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr[-2000:])
    return time.perf_counter() - t, json.loads(r.stdout.splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--gpus-per-worker", type=float, default=0.0)
    ap.add_argument("--cpus-per-worker", type=float, default=1.0)
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from textaudit.results import read_jsonl

    tmp = Path(tempfile.mkdtemp())
    base = ["attack", "--model", args.model, "--k", "6", "--mlm", "minilm-mlm", "--limit", str(args.limit), "--no-ppl"]
    audit(*base[:-3], "--limit", "1", "--no-ppl", "--output", str(tmp / "warm.jsonl"))  # first-use training, caches
    ray_args = ["--backend", "ray", "--workers", str(args.workers), "--gpus-per-worker", str(args.gpus_per_worker),
                "--cpus-per-worker", str(args.cpus_per_worker)]
    n = args.limit
    print(f"audit attack: SO-Beam k=6 on {args.model}, {n} SST-2 dev examples, end to end in a fresh process; "
          f"{args.workers} Ray workers ({args.cpus_per_worker} CPU, {args.gpus_per_worker} GPU each)")
    print(f"{'round':<6} {'serial s':>9} {'ray s':>8} {'ray / serial':>13}")
    times: dict[str, list[float]] = {"serial": [], "ray": []}
    for r in range(args.rounds):
        for name, extra in (("serial", []), ("ray", ray_args)):
            (tmp / f"{name}.jsonl").unlink(missing_ok=True)
            t, summary = audit(*base, "--output", str(tmp / f"{name}.jsonl"), *extra)
            times[name].append(t)
            assert summary["attacked"] == n, summary
        print(f"{r + 1:<6} {times['serial'][-1]:9.1f} {times['ray'][-1]:8.1f} {times['ray'][-1] / times['serial'][-1]:12.2f}x")
    t_serial, t_ray = statistics.median(times["serial"]), statistics.median(times["ray"])
    print(f"{'median':<6} {t_serial:9.1f} {t_ray:8.1f} {t_ray / t_serial:12.2f}x   "
          f"({n / t_serial:.2f} vs {n / t_ray:.2f} examples/s)")
    serial = {r["id"]: r for r in read_jsonl(tmp / "serial.jsonl")}
    diff = [(r["id"], k, serial[r["id"]].get(k), r.get(k)) for r in read_jsonl(tmp / "ray.jsonl") for k in r
            if k not in VOLATILE and r.get(k) != serial[r["id"]].get(k)]
    floats = [d for d in diff if isinstance(d[2], float) and isinstance(d[3], float)]
    print(f"records: {len(serial)}; fields that differ: {len(diff)}, of which floats {len(floats)} (largest gap "
          f"{max((abs(a - b) for *_, a, b in floats), default=0):.1e}; one torch thread per worker vs two serially "
          "sums in another order)")
    for d in diff[:5]:
        print("differs:", d)


if __name__ == "__main__":
    main()
