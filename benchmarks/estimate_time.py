"""How close ``audit attack``'s time estimate comes to the run's wall time (issue #67, item 2).

    TEXTAUDIT_DATA=../shared/data python benchmarks/estimate_time.py --limit 40

Runs ``audit attack`` (SO-Beam, k = 6) with two plug-in classifiers whose own cost is nothing next to
the masked LM's (the case the old estimate missed 16× by counting the classifier alone), and the README's
command 1 model (the zoo's cnn, trained already), each from an empty store (a temporary
``TEXTAUDIT_CACHE``), and prints, per model: the estimate said before the run, every revision, the wall
time, and the ratio wall / estimate — side by side, in one run.
Both resist many searches (a robust model's case, which a prior from an SST-2 model underestimates):
the estimate comes from a first round (k = 1) on a fifth of the examples, how many it settles.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLUGINS = {
    "lexicon": '''
import numpy as np
POS = {"good", "great", "best", "fun", "love", "beautiful", "funny", "moving", "wonderful", "brilliant", "enjoyable"}
NEG = {"bad", "worst", "dull", "boring", "awful", "mess", "poor", "stupid", "fails", "lack", "tedious"}
def classify(texts):
    out = []
    for t in texts:
        w = t.lower().split()
        s = sum(x in POS for x in w) - sum(x in NEG for x in w) + 0.3 * (len(w) % 2) - 0.15
        p = 1 / (1 + np.exp(-2 * s))
        out.append([1 - p, p])
    return np.array(out)
''',
    "stubborn": '''
import numpy as np
POS = {"good", "great", "wonderful", "moving", "best", "fun", "love", "beautiful", "funny", "brilliant"}
NEG = {"bad", "worst", "dull", "boring", "awful", "mess", "poor", "stupid", "fails", "lack"}
def classify(texts):
    out = []
    for t in texts:
        w = t.lower().split()
        s = sum(x in POS for x in w) - sum(x in NEG for x in w) + 0.1 * (len(w) % 3 - 1)
        p = 1 / (1 + np.exp(-2 * s))
        out.append([1 - p, p])
    return np.array(out)
''',
}


def seconds(text: str) -> float:
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    if not m:
        return float("nan")
    h, mi, s = (int(x) if x else 0 for x in m.groups())
    return 3600 * h + 60 * mi + s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--plugins", default="lexicon,stubborn,cnn",
                    help="plug-ins of this script, or zoo models (trained already: their checkpoints are linked into "
                         "the empty cache)")
    args = ap.parse_args()
    rows = []
    for name in args.plugins.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            if name in PLUGINS:
                plugin = Path(tmp) / f"{name}.py"
                plugin.write_text(PLUGINS[name])
                model = f"{plugin}:classify"
            else:  # a zoo model, trained: its checkpoint, not the store, comes along
                from textaudit.resources import cache_dir

                (Path(tmp) / "cache" / "models").mkdir(parents=True)
                (Path(tmp) / "cache" / "models" / name).symlink_to(cache_dir() / "models" / name)
                model = name
            env = {**os.environ, "TEXTAUDIT_CACHE": str(Path(tmp) / "cache"), "TEXTAUDIT_PROGRESS_SECONDS": "30"}
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "textaudit", "attack", "--model", model,
                                "--data", "sst2:dev", "--limit", str(args.limit), "--no-ppl", "--json"],
                               capture_output=True, text=True, env=env)
            wall = time.perf_counter() - t0
        said = [ln for ln in r.stderr.splitlines() if ln.startswith("time: ")]
        first = re.match(r"time: about (\S+)(?: to (\S+))? ", said[0]) if said else None
        # a range (the store held the first sentences): its middle, as the revisions measure it
        est = (seconds(first.group(1)) if not first.group(2) else (seconds(first.group(1)) * seconds(first.group(2))) ** 0.5
               ) if first else float("nan")
        ok = re.search(r'"success": (\d+)', r.stdout)
        rows.append((name, est, wall, len(said) - 1, ok.group(1) if ok else "?"))
        for ln in said:
            print(f"[{name}] {ln}")
        if r.returncode:
            print(r.stderr[-2000:])
    print(f"\n| model | estimate s | wall s (process) | wall / estimate | revisions | successes of {args.limit} |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, est, wall, rev, ok in rows:
        print(f"| {name} | {est:.0f} | {wall:.0f} | {wall / est:.2f} | {rev} | {ok} |")


if __name__ == "__main__":
    main()
