"""Replaying findings against searching for them again (issue #49; figures in benchmarks/replay.md).

1. The findings: ``audit attack`` with SO-Beam (k = 6) and Genetic on the first ``--limit`` SST-2 dev
   sentences on ``--model`` (each as its own process, as a user runs it; its wall time is the cost of
   the search) into ``--findings DIR``, where an earlier run's so-beam.jsonl or genetic.jsonl is reused.
2. The replay on the same model, in this process after the model is loaded: every finding must still
   hold (the replay is exact), and its wall time beside the searches'.
3. With ``--hardened MODEL``: the replay on the hardened model paired with ``--model`` as the baseline
   (still / fixed / regressed, McNemar's exact p), beside a fresh SO-Beam and Genetic attack of the
   hardened model on the same examples (what replay stands in for).

    TEXTAUDIT_DATA=../shared/data python benchmarks/replay.py [--model cnn] [--limit 200] [--threads 1]
        [--findings DIR] [--hardened PATH] [--json]

Prints the figures (``--json``: one object as the last line); asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

METHODS = (("so-beam", ["--k", "6"]), ("genetic", []))


def attack(model: str, method: str, extra: list[str], limit: int, out: Path, threads: int) -> tuple[float, dict]:
    """One ``audit attack`` process; (wall seconds, its JSON summary)."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "textaudit", "--threads", str(threads), "attack", "--model", model,
                        "--method", method, *extra, "--limit", str(limit), "--no-ppl", "--output", str(out), "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"audit attack {method} failed:\n{r.stderr[-2000:]}")
    return time.perf_counter() - t0, json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--findings", type=Path, help="a folder for so-beam.jsonl and genetic.jsonl: those already there "
                    "(an earlier run's) are replayed as they are, the others searched into it")
    ap.add_argument("--hardened", help="a hardened model to replay on (with --model as the baseline)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from textaudit.findings import replay
    from textaudit.models import load_classifier

    work = args.findings or Path(tempfile.mkdtemp(prefix="replay-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    out: dict = {"model": args.model, "limit": args.limit, "threads": args.threads, "search": {}}
    files = []
    for method, extra in METHODS:
        path = work / f"{method}.jsonl"
        if not path.is_file():
            wall, summary = attack(args.model, method, extra, args.limit, path, args.threads)
            out["search"][method] = {"wall_seconds": round(wall, 1), "success": summary["success"],
                                     "attacked": summary["attacked"]}
            print(f"{method:8s} search: {summary['success']} findings of {summary['attacked']} attacked in {wall:.1f} s",
                  flush=True)
        files.append(path)

    t0 = time.perf_counter()
    clf = load_classifier(args.model)
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    same = replay(files, clf)
    wall = time.perf_counter() - t0
    s = same.summary()
    out["replay_same"] = {"wall_seconds": round(wall, 3), "model_load_seconds": round(load, 2), **s}
    searched = sum(v["wall_seconds"] for v in out["search"].values())
    ratio = f"; the searches took {searched:.0f} s: {searched / wall:,.0f}× the replay" if searched else ""
    print(f"replay on {args.model} itself: {s['still']} of {s['findings']} still hold ({s['still_share']}), "
          f"{wall:.2f} s after the model loaded ({load:.1f} s){ratio}", flush=True)

    if args.hardened:
        hard = load_classifier(args.hardened)
        t0 = time.perf_counter()
        h = replay(files, hard, baseline=clf).summary()
        out["replay_hardened"] = {"wall_seconds": round(time.perf_counter() - t0, 3), **h}
        print(f"replay on {args.hardened} (baseline {args.model}): still {h['still']}, fixed {h['fixed']}, "
              f"not applicable {h['not_applicable']}, regressed {h['regressed']}, McNemar p {h['mcnemar_p']}", flush=True)
        for method, extra in METHODS:
            wall, summary = attack(args.hardened, method, extra, args.limit, work / f"{method}.hardened.jsonl",
                                   args.threads)
            out.setdefault("fresh_hardened", {})[method] = {"wall_seconds": round(wall, 1), **{
                k: summary.get(k) for k in ("success", "attacked", "success_rate", "success_rate_ci95")}}
            print(f"fresh {method} on {args.hardened}: success {summary['success']} of {summary['attacked']} "
                  f"({summary['success_rate']}) in {wall:.0f} s", flush=True)
    print(f"files: {work}")
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
