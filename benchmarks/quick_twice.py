"""``reproduce_paper.py --quick`` twice on one store: how much faster is the second bias stage (#64)?

    TEXTAUDIT_DATA=../shared/data python benchmarks/quick_twice.py [--work DIR] [--json]

Runs the ``--quick`` bias stage (B_{p,k} of lstm vs lstm-gender-swap on the six gender pairs, k ≤ 3,
50 sampled sentences per source at k = 3, X_filter at ε = 0.005) two times, each a new process with
its own fresh ``--out`` (so nothing is resumed from a results file) and the same fresh store file
(``TEXTAUDIT_STORE``: the masked LM's answers and, beside them, the classifiers' score cache). The
attacks and accuracy stages are skipped: they are not what this measures.

Prints the two runs' bias-stage seconds (results.json's own timing, and the process's wall time), the
ratio, and whether B is identical: every B_{p,k} of results.json and every record of ``runs/bias.jsonl``
in every field but the seconds. Measured side by side in one invocation; asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _records(path: Path) -> list[bytes]:
    """A digest of each of the bias run's records without its seconds (wall time differs run to run), sorted:
    the records are over a GB at the ``--quick`` scale, their digests a few tens of MB."""
    digests = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if "header" in row:
                continue
            row = {k: v for k, v in row.items() if "seconds" not in k}
            digests.append(hashlib.blake2b(json.dumps(row, sort_keys=True).encode(), digest_size=16).digest())
    return sorted(digests)


def run_once(out: Path, store: Path, extra: list[str], reuse: bool = False) -> dict:
    if reuse and (out / "results.json").exists():  # this folder's earlier run, read back (the figures are its own)
        report = json.loads((out / "results.json").read_text(encoding="utf-8"))
        return {"bias_seconds": report["seconds"]["bias"], "wall": None, "bias": report["bias"],
                "records": _records(out / "runs" / "bias.jsonl")}
    env = dict(os.environ, TEXTAUDIT_STORE=str(store))
    cmd = [sys.executable, str(HERE / "reproduce_paper.py"), "--quick", "--skip", "attacks,accuracy",
           "--out", str(out), "--no-progress", *extra]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL)  # (its errors reach stderr, one line each)
    if done.returncode:
        sys.exit(done.returncode)
    wall = time.perf_counter() - t0
    report = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return {"bias_seconds": report["seconds"]["bias"], "wall": round(wall, 1), "bias": report["bias"],
            "records": _records(out / "runs" / "bias.jsonl")}


def _took(run: dict) -> str:
    return f"process {run['wall']} s" if run["wall"] is not None else "read back"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, help="a new folder for the store and the two outputs (default: a temporary one)")
    ap.add_argument("--reuse", action="store_true",
                    help="read back the runs --work already finished (their own seconds) and run only what is missing")
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    ap.add_argument("extra", nargs="*", help="further reproduce_paper.py options (after --)")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="quick-twice-"))
    work.mkdir(parents=True, exist_ok=True)
    store = work / "store.sqlite"
    if not args.reuse and (store.exists() or (work / "first").exists()):
        print(f"error: {work} already holds a run; give --work a new folder", file=sys.stderr)
        sys.exit(2)
    first = run_once(work / "first", store, args.extra, args.reuse)
    print(f"first: bias stage {first['bias_seconds']} s ({_took(first)})", file=sys.stderr)
    second = run_once(work / "second", store, args.extra, args.reuse)
    print(f"second: bias stage {second['bias_seconds']} s ({_took(second)})", file=sys.stderr)
    same_b = first["bias"] == second["bias"]
    same_records = first["records"] == second["records"]
    ratio = first["bias_seconds"] / max(second["bias_seconds"], 1e-9)
    print("| run | bias stage (s) | process (s) |")
    print("| --- | ---: | ---: |")
    print(f"| first (empty store) | {first['bias_seconds']} | {first['wall'] or '–'} |")
    print(f"| second (same store) | {second['bias_seconds']} | {second['wall'] or '–'} |")
    print(f"\nsecond bias stage {ratio:.1f}x faster; B identical: {same_b}; "
          f"{len(first['records']):,} records identical (every field but the seconds): {same_records}")
    print(f"store file: {store} ({store.stat().st_size / 2**20:.0f} MiB)")
    if args.json:
        print(json.dumps({"first": first["bias_seconds"], "second": second["bias_seconds"], "ratio": round(ratio, 2),
                          "b_identical": same_b, "records_identical": same_records,
                          "records": len(first["records"])}))


if __name__ == "__main__":
    main()
