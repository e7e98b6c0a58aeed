"""The neighbourhood store, measured side by side in one run (issue #54; figures in benchmarks/store.md).

Each audit runs as its own ``audit`` process, as a user runs them, with a store file of this run's own:

1. **bias**: ``audit bias --group gender --k 2`` on cnn with the store (it fills it), then on lstm in a new
   process with that store (warm) and with ``--store off`` (cold): the wall-clock ratio cold / warm, and B
   of every pair and k equal to 1e-9.
2. **attacks**: SO-Enum k = 2 and SO-Beam k = 6 on the first ``--limit`` dev sentences, on lstm after cnn:
   the hit rate, cold / warm wall, and the records identical in every field but seconds.
3. **lookups**: warm ``get`` of the entries this run stored, in batches of 256 (lookups per second), and the
   bytes per entry (the file's growth over the entries it gained).

    python benchmarks/store.py [--max-sources 1] [--limit 50] [--threads 1] [--skip attacks]

Needs cnn and lstm trained in ``$TEXTAUDIT_CACHE`` (``audit train --model cnn``, ``--model lstm``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IGNORED = {"seconds", "sec", "queries_seconds", "device_seconds", "host_seconds", "ppl_seconds"}


def audit(args: list[str], threads: int) -> tuple[float, dict]:
    """Run ``audit --threads T ARGS --json``; return (wall seconds, the JSON summary)."""
    t0 = time.perf_counter()
    r = subprocess.run(["audit", "--threads", str(threads), *args, "--json"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"audit {' '.join(args)} failed:\n{r.stderr[-2000:]}")
    return wall, json.loads(r.stdout.strip().splitlines()[-1])


def b_values(summary: dict) -> dict:
    return {(tuple(p["pair"]), k): v["B"] for p in summary["pairs"] for k, v in p["by_k"].items()}


def records(path: Path) -> list[dict]:
    from textaudit.results import read_jsonl

    def strip(r: dict) -> dict:
        return {k: (strip(v) if isinstance(v, dict) else v) for k, v in r.items() if k not in IGNORED}

    return sorted((strip(r) for r in read_jsonl(path)), key=lambda r: str(r.get("id")))


def bench_bias(tmp: Path, args) -> None:
    store = tmp / "bias.sqlite"
    common = ["bias", "--group", "gender", "--k", "2", "--max-sources", str(args.max_sources)]
    fill, _ = audit([*common, "--model", "cnn", "--store", str(store)], args.threads)
    cold, off = audit([*common, "--model", "lstm", "--store", "off"], args.threads)
    warm, on = audit([*common, "--model", "lstm", "--store", str(store)], args.threads)
    diff = max(abs(b_values(on)[key] - b_values(off)[key]) for key in b_values(off))
    print(f"bias --group gender --k 2 --max-sources {args.max_sources}: cnn filling the store {fill:.1f} s; lstm "
          f"--store off {cold:.1f} s, lstm with the store {warm:.1f} s: {cold / warm:.2f}x faster "
          f"(hit rate {on.get('store_hit_rate')}, {on.get('mlm_seconds_saved')} masked-LM s saved); "
          f"largest |ΔB| {diff:.1e} over {len(b_values(off))} (pair, k)")


def bench_attacks(tmp: Path, args) -> None:
    for method, k in (("so-enum", 2), ("so-beam", 6)):
        store = tmp / f"{method}.sqlite"
        common = ["attack", "--method", method, "--k", str(k), "--limit", str(args.limit), "--no-ppl"]
        audit([*common, "--model", "cnn", "--store", str(store), "--output", str(tmp / f"{method}-cnn.jsonl")],
              args.threads)
        cold, _ = audit([*common, "--model", "lstm", "--store", "off", "--output", str(tmp / f"{method}-off.jsonl")],
                        args.threads)
        warm, on = audit([*common, "--model", "lstm", "--store", str(store), "--output", str(tmp / f"{method}-on.jsonl")],
                         args.threads)
        same = records(tmp / f"{method}-off.jsonl") == records(tmp / f"{method}-on.jsonl")
        print(f"{method} k={k} on the first {args.limit} dev, lstm after cnn: --store off {cold:.1f} s, with the store "
              f"{warm:.1f} s: {cold / warm:.2f}x; hit rate {on.get('store_hit_rate')}; records identical but seconds: {same}")


def bench_lookups(tmp: Path) -> None:
    from textaudit.neighborhoods.store import NeighborhoodStore

    paths = sorted(tmp.glob("*.sqlite"))
    if not paths:
        return
    path = max(paths, key=lambda p: p.stat().st_size)
    store = NeighborhoodStore(path, quiet=True)
    conn = store._connection()
    mlm, = [m["id"] for m in store.mlms()][:1]
    keys = [k for (k,) in conn.execute("SELECT k FROM entries WHERE mlm = ?", (mlm,))]
    store.get(mlm, keys[:256], 20)  # warm the page cache
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for s in range(0, len(keys), 256):
            store.get(mlm, keys[s:s + 256], 20)
        best = min(best, time.perf_counter() - t0)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    empty = tmp / "empty.sqlite"
    e = NeighborhoodStore(empty, quiet=True)
    e.mlm_id("x" * 40, "x", store.vocabulary(mlm))
    e.close()
    per = (path.stat().st_size - empty.stat().st_size) / len(keys)
    print(f"warm lookups: {len(keys)} entries in batches of 256: {len(keys) / best:,.0f} per second; "
          f"{per:.0f} bytes per entry (the file over an empty store holding the vocabulary)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-sources", type=int, default=1, help="bias: sentences of X_p per pair")
    ap.add_argument("--limit", type=int, default=50, help="attacks: first N dev sentences")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TEXTAUDIT_THREADS", "0") or 0) or os.cpu_count())
    ap.add_argument("--skip", action="append", default=[], choices=["bias", "attacks"])
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if "bias" not in args.skip:
            bench_bias(tmp, args)
        if "attacks" not in args.skip:
            bench_attacks(tmp, args)
        bench_lookups(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
