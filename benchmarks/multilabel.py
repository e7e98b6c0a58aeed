"""``--label all`` against one run per label, side by side in one run of this script (issue #65).

A six-label model (``benchmarks/data/toxicity_plugin.py``, the Jigsaw labels) audited for B_{p,k} (he → she, k ≤
``--k``, the offline masked LM, ``--store off``) on the first ``--sources`` SST-2 dev sentences holding "he", each
way as a user runs it — its own ``audit`` process: once with ``--label all`` (the masked LM and the model loaded
once: each masked context asked once, each text forwarded once) and six times with ``--label NAME``. Prints the
wall times, their ratio, the model forwards of each way, and whether every label's records are equal (they must be).

    python benchmarks/multilabel.py [--sources 60] [--k 1] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLUGIN = Path(__file__).resolve().parent / "data" / "toxicity_plugin.py"
LABELS = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]


def audit(args: list[str], threads: int) -> tuple[float, dict]:
    """``audit --threads T ARGS --json`` in its own process: (wall seconds, its summary)."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "textaudit", "--threads", str(threads), *args, "--json"],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"audit {' '.join(args)} failed:\n{r.stderr[-2000:]}")
    return wall, json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", type=int, default=60)
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    common = ["bias", "--model", f"{PLUGIN}:clf", "--pair", "he,she", "--data", "sst2:dev", "--k", str(args.k),
              "--max-sources", str(args.sources), "--mlm", "minilm-mlm", "--store", "off"]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        t_all, every = audit([*common, "--label", "all", "--output", str(out / "all.jsonl")], args.threads)
        t_one = 0.0
        for name in LABELS:
            wall, _ = audit([*common, "--label", name, "--output", str(out / f"one.{name}.jsonl")], args.threads)
            t_one += wall
        equal = all((out / f"all.{n}.jsonl").read_text().splitlines() == (out / f"one.{n}.jsonl").read_text().splitlines()
                    for n in LABELS)
        texts = sum(1 for line in (out / "all.toxic.jsonl").read_text().splitlines() if '"text"' in line)
    print(json.dumps({"labels": len(LABELS), "sources": args.sources, "k": args.k, "threads": args.threads,
                      "label_all_seconds": round(t_all, 2), "one_per_label_seconds": round(t_one, 2),
                      "speedup": round(t_one / t_all, 2), "model_forwards_label_all": every.get("forwards"),
                      "model_forwards_one_per_label": 2 * texts * len(LABELS), "records_equal": equal}, indent=1))


if __name__ == "__main__":
    main()
