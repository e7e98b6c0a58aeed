"""Replaying findings against searching for them again (issue #49; figures in benchmarks/replay.md).

1. The findings: ``audit attack`` with SO-Beam (k = 6) and Genetic on the first ``--limit`` SST-2 dev
   sentences on ``--model`` (each as its own process, as a user runs it; its wall time is the cost of
   the search) into ``--findings DIR``, where an earlier run's so-beam.jsonl or genetic.jsonl is reused.
2. The replay on the same model, in this process after the model is loaded: every finding must still
   hold (the replay is exact), and its wall time beside the searches'.
3. With ``--hardened MODEL``: the replay on the hardened model paired with ``--model`` as the baseline
   (still / fixed / regressed, McNemar's exact p), beside a fresh SO-Beam and Genetic attack of the
   hardened model on the same examples (what replay stands in for).
4. With ``--bias GROUP``: ``audit bias --group GROUP --k BIAS_K`` on ``--model`` (its own process, timed;
   bias.jsonl in ``--findings``), its replay on the same model (B must come back to 1e-5) and, with
   ``--bias-other MODEL``, on that model paired with ``--model``, beside a fresh ``audit bias`` of it
   (the same sentences: same B to 1e-5).

    TEXTAUDIT_DATA=../shared/data python benchmarks/replay.py [--model cnn] [--limit 200] [--threads 1]
        [--findings DIR] [--hardened PATH] [--bias gender [--bias-k 1] [--bias-other cnn-gender-swap]] [--json]

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
    ap.add_argument("--bias", help="a group of pairs (gender, religion, …): replay a bias run's findings too")
    ap.add_argument("--bias-k", type=int, default=1)
    ap.add_argument("--bias-other", help="a second model to replay the bias findings on, beside its fresh bias run")
    ap.add_argument("--skip-attacks", action="store_true", help="the bias stage alone")
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
    for method, extra in () if args.skip_attacks else METHODS:
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
    if args.bias:
        out["bias"] = bias_stage(args, work, clf)
    if args.skip_attacks:
        print(f"files: {work}")
        if args.json:
            print(json.dumps(out))
        return
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


def bias(model: str, group: str, k: int, out: Path, threads: int) -> tuple[float, dict]:
    """One ``audit bias`` process; (wall seconds, its JSON summary)."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "textaudit", "--threads", str(threads), "bias", "--group", group,
                        "--model", model, "--k", str(k), "--output", str(out), "--store", "off", "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"audit bias failed:\n{r.stderr[-2000:]}")
    return time.perf_counter() - t0, json.loads(r.stdout.strip().splitlines()[-1])


def _b_of(summary: dict) -> dict[tuple[str, int], float]:
    return {("/".join(p["pair"]), int(k)): e["B"] for p in summary["pairs"] for k, e in p["by_k"].items()}


def bias_stage(args, work: Path, clf) -> dict:
    """The bias run on --model (or an earlier one in --findings), its replay on itself and on --bias-other."""
    from textaudit.findings import replay
    from textaudit.models import load_classifier

    out: dict = {}
    path = work / "bias.jsonl"
    if not path.is_file():
        wall, run = bias(args.model, args.bias, args.bias_k, path, args.threads)
        out["search_seconds"] = round(wall, 1)
        print(f"bias --group {args.bias} --k {args.bias_k} on {args.model}: {wall:.1f} s (masked LM, store off)", flush=True)
    t0 = time.perf_counter()
    same = replay(path, clf)
    wall = time.perf_counter() - t0
    s = same.summary()
    worst = max(abs(r["B"] - r["found_B"]) for r in same.records)
    out["replay_same"] = {"wall_seconds": round(wall, 3), "max_abs_dB": worst, **s}
    print(f"bias replay on {args.model} itself: {len(same.records)} (pair, k), {s['still'] + s['fixed']} findings, "
          f"{s['still']} still; max |ΔB| vs the run {worst:.1e}; {wall:.2f} s", flush=True)
    if args.bias_other:
        other = load_classifier(args.bias_other)
        t0 = time.perf_counter()
        rep = replay(path, other, baseline=clf)
        wall = time.perf_counter() - t0
        h = rep.summary()
        fresh_wall, fresh = bias(args.bias_other, args.bias, args.bias_k, work / "bias.other.jsonl", args.threads)
        fb = _b_of(fresh)
        worst = max(abs(r["B"] - fb[("/".join(r["pair"]), r["k"])]) for r in rep.records)
        out["replay_other"] = {"model": args.bias_other, "wall_seconds": round(wall, 3), "fresh_seconds": round(fresh_wall, 1),
                               "max_abs_dB_vs_fresh": worst, **h,
                               "rows": [{k: r.get(k) for k in ("pair", "k", "status", "found_B", "B", "ci95")}
                                        for r in rep.records]}
        print(f"bias replay on {args.bias_other} (baseline {args.model}): still {h['still']}, fixed {h['fixed']}, "
              f"not applicable {h['not_applicable']}, regressed {h['regressed']} in {wall:.2f} s; a fresh audit bias of it "
              f"took {fresh_wall:.1f} s, max |ΔB| replay vs fresh {worst:.1e}", flush=True)
        for r in rep.records:
            print(f"  {'/'.join(r['pair']):14s} k={r['k']}  found {r['found_B']:+.4f}  on {args.bias_other} "
                  f"{r['B']:+.4f} [{r['ci95'][0]:+.4f}, {r['ci95'][1]:+.4f}]  {r['status']}", flush=True)
    return out


if __name__ == "__main__":
    main()
