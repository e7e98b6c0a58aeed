"""Records identical before and after a change: a fixed set of audits run by another commit and by this checkout.

    TEXTAUDIT_DATA=../shared/data python benchmarks/records_vs_commit.py --base 434d923
    TEXTAUDIT_DATA=../shared/data python benchmarks/records_vs_commit.py --base 434d923 --change HEAD --only so-beam,bias

The base commit is checked out into a temporary git worktree (removed after); each audit of :data:`CASES` runs
twice, once with the base's ``src/`` and once with this checkout's, each in its own process and its own output
folder, with ``--store off --score-cache off`` so neither run answers from the other's work. Every JSON and
JSONL file the audit wrote is then compared record by record, every field but the clocks (:func:`comparable`:
keys naming seconds, a wall or a rate per second); a results file's header is compared apart (a difference
there is said beside the verdict), textaudit's version aside, and the side's own folder reads ``<out>``.

The set is the one [1/7] names: SO-Beam, SO-Enum, Genetic, BAE, bias with ``--group``, certify (IBP, SAFER,
RanMASK), harden, replay, compare and a suite (and word order, evaluate, learnability, PerturbScore's tuples: every
audit), each small (a few SST-2 dev examples on the zoo's cnn and cnn-ibp,
which must be trained: ``audit train --model cnn-ibp``). Prints one line per audit (``same`` or the first
difference), and exits 1 when any differs.
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

ROOT = Path(__file__).resolve().parents[1]

#: name → the audit's arguments; {out} is the case's output folder, {prev} the SO-Beam case's (for replay)
CASES: dict[str, list[str]] = {
    "so-beam": ["attack", "--model", "cnn", "--method", "so-beam", "--k", "2", "--beam", "4", "--limit", "6",
                "--no-ppl", "--output", "{out}/r.jsonl"],
    "so-enum": ["attack", "--model", "cnn", "--method", "so-enum", "--k", "1", "--limit", "6", "--no-ppl",
                "--output", "{out}/r.jsonl"],
    "genetic": ["attack", "--model", "cnn", "--method", "genetic", "--limit", "3", "--max-queries", "300",
                "--no-ppl", "--output", "{out}/r.jsonl"],
    "bae": ["attack", "--model", "cnn", "--method", "bae", "--limit", "4", "--no-ppl", "--output", "{out}/r.jsonl"],
    "bias": ["bias", "--model", "cnn", "--group", "gender", "--k", "1", "--max-sources", "4", "--output",
             "{out}/r.jsonl"],
    "certify-ibp": ["certify", "--model", "cnn-ibp", "--limit", "30", "--output", "{out}/r.jsonl"],
    "certify-safer": ["certify", "--model", "cnn", "--method", "safer", "--samples", "40", "--selection", "10",
                      "--limit", "4", "--output", "{out}/r.jsonl"],
    "certify-ranmask": ["certify", "--model", "cnn", "--method", "ranmask", "--samples", "40", "--selection", "10",
                        "--limit", "4", "--output", "{out}/r.jsonl"],
    "replay": ["replay", "{prev}/r.jsonl", "--model", "bow", "--baseline", "cnn", "--output", "{out}/r.jsonl"],
    "compare": ["compare", "--models", "cnn,bow", "--methods", "so-enum", "--k", "1", "--limit", "3",
                "--output-dir", "{out}/cmp"],
    "harden": ["harden", "--model", "bow", "--method", "augment", "--attack", "so-enum", "--k", "1", "--train-sample", "6", "--max-train",
               "300", "--epochs", "1", "--eval-limit", "4", "--eval-attack", "so-enum:1", "--out", "{out}/h"],
    "suite": ["run", "{out}/suite.toml"],
    "wordorder": ["wordorder", "--model", "cnn", "--sweep", "--limit", "40", "--output", "{out}/r.jsonl"],
    "evaluate": ["evaluate", "--model", "cnn", "--limit", "60", "--output", "{out}/r.jsonl"],
    "learnability": ["learnability", "--model", "bow", "--perturbation", "butter_fingers_perturbation",
                     "--train-size", "300", "--probabilities", "1.0", "--output", "{out}/r.jsonl"],
    "perturbscore": ["perturbscore", "build", "--model", "cnn", "--n", "6", "--steps", "2", "--output", "{out}/r.jsonl"],
}
SUITE = """[suite]
name = "records before and after"
data = "sst2:dev"
limit = 3
output_dir = "runs"
seed = 0

[compare]
models = ["cnn"]
methods = ["so-enum"]
mlm = "minilm-mlm"

[bias]
model = "cnn"
pairs = ["he,she"]
k = 1
mlm = "minilm-mlm"
max_sources = 3

[thresholds]
so_enum.success_rate_max = 1.0
"""
#: fields that are clocks, not results
CLOCK_WORDS = ("seconds", "wall", "_per_s", "per_second", "sec_per_", "elapsed", "started_ms", "ended_ms")


def comparable(obj):
    """``obj`` without its clocks (any key naming seconds, a wall or a rate per second) and textaudit's version."""
    if isinstance(obj, dict):
        return {k: comparable(v) for k, v in obj.items()
                if not any(w in k for w in CLOCK_WORDS) and k not in ("textaudit", "version")}
    if isinstance(obj, list):
        return [comparable(v) for v in obj]
    return obj


def read_outputs(folder: Path, side_root: Path) -> tuple[dict[str, object], dict[str, object]]:
    """Every JSON and JSONL file under ``folder`` (by its path inside it): ``(records, headers)`` — the records of
    each file in a fixed order, and each results file's header apart. The side's own folder, which a record may
    name (a replay's finding names its file), reads ``<out>``."""
    records: dict[str, object] = {}
    headers: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        if path.suffix not in (".jsonl", ".json"):
            continue
        text = path.read_text().replace(str(side_root), "<out>")
        name = str(path.relative_to(folder))
        if path.suffix == ".jsonl":
            rows = [comparable(json.loads(line)) for line in text.splitlines() if line.strip()]
            headers[name] = [r for r in rows if "header" in r]
            records[name] = sorted((r for r in rows if "header" not in r), key=lambda r: json.dumps(r, sort_keys=True))
        else:
            records[name] = comparable(json.loads(text))
    return records, headers


def first_difference(a, b, where: str = "") -> str | None:
    if type(a) is not type(b):
        return f"{where}: {json.dumps(a)[:120]} ≠ {json.dumps(b)[:120]}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{where}.{k}: only in the {'base' if k in a else 'change'}"
            d = first_difference(a[k], b[k], f"{where}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} ≠ {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{where}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{where}: {json.dumps(a)[:120]} ≠ {json.dumps(b)[:120]}"


def run_case(src: Path, argv: list[str], out: Path, prev: Path) -> tuple[int, float, str]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "suite.toml").write_text(SUITE)
    args = [a.format(out=out, prev=prev) for a in argv] + ["--store", "off", "--score-cache", "off"]
    if argv[0] in ("replay", "wordorder", "evaluate", "learnability", "perturbscore"):
        args = args[:-4]  # no neighbourhood: no store options (the environment turns the score cache off)
    code = f"import sys; sys.path.insert(0, {str(src)!r}); from textaudit.cli.main import main; main({args!r})"
    env = {**os.environ, "TEXTAUDIT_PROGRESS_SECONDS": "600", "TEXTAUDIT_SCORE_CACHE": "off"}
    if env.get("TEXTAUDIT_DATA"):  # each audit runs in its own folder: a relative path would point elsewhere
        env["TEXTAUDIT_DATA"] = str(Path(env["TEXTAUDIT_DATA"]).resolve())
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=out)
    (out / "suite.toml").unlink(missing_ok=True)
    return r.returncode, time.perf_counter() - t0, (r.stderr.strip().splitlines() or [""])[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit before the change (a revision git knows)")
    parser.add_argument("--change", help="the commit after the change (default: this checkout as it is on disk)")
    parser.add_argument("--only", help="comma-separated cases (default: all)")
    parser.add_argument("--keep", type=Path, help="keep both sides' outputs in this folder")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(CASES)
    work = Path(args.keep or tempfile.mkdtemp(prefix="records-vs-commit-"))
    trees = {}
    for side, rev in (("base", args.base), ("change", args.change)):
        if rev is None:
            trees[side] = ROOT
            continue
        trees[side] = Path(tempfile.mkdtemp(prefix=f"{side}-")) / side
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(trees[side]), rev], check=True,
                       capture_output=True)
    differ = 0
    try:
        print(f"base {args.base} vs {args.change or 'this checkout'}; outputs under {work}")
        for name in names:
            sides = {}
            for side, src in (("base", trees["base"] / "src"), ("change", trees["change"] / "src")):
                rc, seconds, last = run_case(src, CASES[name], work / side / name, work / side / "so-beam")
                sides[side] = (rc, seconds, last, *read_outputs(work / side / name, work / side))
            (rc_a, s_a, last_a, out_a, head_a), (rc_b, s_b, last_b, out_b, head_b) = sides["base"], sides["change"]
            if rc_a != rc_b:
                verdict = f"exit {rc_a} ≠ {rc_b} ({last_a!r} / {last_b!r})"
            elif not out_a:
                verdict = f"no output (exit {rc_a}: {last_a!r})"
            else:
                verdict = first_difference(out_a, out_b) or f"same records ({len(out_a)} files, exit {rc_a})"
                header = first_difference(head_a, head_b)
                if header and verdict.startswith("same"):
                    verdict += f"; a header differs: {header}"
            differ += not verdict.startswith("same")
            print(f"{name:16s} {verdict}   [{s_a:.0f} s / {s_b:.0f} s]", flush=True)
    finally:
        for tree in trees.values():
            if tree != ROOT:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    print(f"{len(names) - differ} of {len(names)} audits give the same records")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
