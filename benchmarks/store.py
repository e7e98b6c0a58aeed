"""The neighbourhood store, measured side by side in one run (issue #54; figures in benchmarks/store.md).

Each audit runs as its own ``audit`` process, as a user runs them, with a store file of this run's own:

1. **bias**: ``audit bias --group gender --k 2`` on cnn with the store (it fills it), then on lstm in a new
   process with that store (warm) and with ``--store off`` (cold): the wall-clock ratio cold / warm, and B
   of every pair and k equal to 1e-9.
2. **attacks**: SO-Enum k = 2 and SO-Beam k = 6 on the first ``--limit`` dev sentences, on lstm after cnn:
   the hit rate, cold / warm wall, and the records identical in every field but seconds.
3. **harden**: killed (SIGKILL) once its before-audit is written and resumed in a new process: the masked-LM
   forwards of the after-audit against the before-audit's (each computed context is one new store entry).
4. **lookups**: warm ``get`` of the entries this run stored, in batches of 256 (lookups per second), and the
   bytes per entry (the file's growth over the entries it gained).

    python benchmarks/store.py [--max-sources 1] [--limit 50] [--threads 1] [--skip attacks] [--skip harden]

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


def _entries(store: Path) -> int:
    import sqlite3

    if not store.exists():
        return 0
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as c:
        return c.execute("SELECT COUNT(*) FROM entries").fetchone()[0]


def _watch(proc, mark: dict, method: str, store: Path) -> None:
    """Drain a harden's stderr; when its evaluation starts (after mining and training), note how many entries
    the store holds (mining's)."""
    for line in proc.stderr:
        if "before" not in mark and f"harden: {method}" in line and "before and after" in line:
            mark["before"] = _entries(store)


def bench_harden(tmp: Path, args) -> None:
    """A harden killed (SIGKILL) once its before-audit is written, resumed in a new process: the masked-LM
    forwards of its after-audit (the store's new entries: each miss is computed once and kept) against
    the before-audit's."""
    import signal

    for attack in args.harden_attacks:
        out, store = tmp / f"harden-{attack.replace(':', '')}", tmp / f"harden-{attack.replace(':', '')}.sqlite"
        cmd = ["audit", "--threads", str(args.threads), "harden", "--model", "cnn", "--method", "augment",
               "--train-sample", "20", "--max-train", "1000", "--epochs", "1", "--eval-limit", str(args.harden_limit),
               "--eval-attack", attack, "--store", str(store), "--out", str(out)]
        method = attack.split(":")[0]
        import threading

        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        mark: dict = {}

        threading.Thread(target=_watch, args=(proc, mark, method, store), daemon=True).start()
        done = sorted(out.glob(f"before.{method}*.jsonl"))
        while proc.poll() is None:
            done = done or sorted(out.glob(f"before.{method}*.jsonl"))
            if done and sum(1 for _ in open(done[0], encoding="utf-8")) > args.harden_limit:  # header + every example
                if sorted(out.glob(f"after.{method}*.jsonl")):
                    break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before_forwards = _entries(store) - mark.get("before", 0)
        for f in out.glob(f"after.{method}*.jsonl"):
            f.unlink()  # killed as the after-audit began: it starts anew in the new process
        at_resume = _entries(store)
        r = subprocess.run(cmd + ["--json"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"harden resume failed:\n{r.stderr[-2000:]}")
        after_forwards = _entries(store) - at_resume
        print(f"harden (cnn, augment, eval {attack} on {args.harden_limit} dev) killed after its before-audit, resumed in "
              f"a new process: the after-audit computed {after_forwards} masked contexts, the before-audit "
              f"{before_forwards}: {after_forwards / max(1, before_forwards):.1%}")


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
    ap.add_argument("--skip", action="append", default=[], choices=["bias", "attacks", "harden"])
    ap.add_argument("--harden-attacks", nargs="+", default=["so-enum:1", "so-beam:6"], help="harden: evaluation attacks")
    ap.add_argument("--harden-limit", type=int, default=50, help="harden: held-out dev examples")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if "bias" not in args.skip:
            bench_bias(tmp, args)
        if "attacks" not in args.skip:
            bench_attacks(tmp, args)
        if "harden" not in args.skip:
            bench_harden(tmp, args)
        bench_lookups(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
