"""How many CPU threads should torch use? 1 vs 2 intra-op threads, on an idle machine and with another
job running (one busy process per core taken), side by side in one run.

Workloads, each in a fresh process with TEXTAUDIT_THREADS=n (timed after loading):
- ppl: SmolLM2 perplexity of 40 (original, vulnerable) pairs, 2 sentences a call (what an attack does);
- mlm: minilm-mlm candidates for 400 masked positions of SST-2 dev sentences, one batched call;
- attack: SO-Beam k=6 on cnn (trained on first use), first 10 SST-2 dev sentences, --no-ppl;
- llm: llm:smollm2 (built-in prompt) classifying 96 SST-2 dev sentences in batches of 16.
Prints seconds per workload and the ratio 2 threads / 1 thread (> 1: one thread is faster).

    TEXTAUDIT_DATA=../shared/data python benchmarks/threads.py [--hogs 0,1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CHILD = r'''
import json, sys, time
work = sys.argv[1]
from textaudit.data import load_dataset
texts = list(load_dataset("sst2:dev", limit=400)["text"])
if work == "ppl":
    from textaudit.lm import load_causal_lm
    lm = load_causal_lm()
    lm.perplexity(["warm up ."])
    t = time.perf_counter()
    for i in range(40):
        lm.perplexity([texts[i], texts[i + 40]])
elif work == "mlm":
    from textaudit.neighborhoods.mlm import load_mlm
    from textaudit.sentence import Sentence
    mlm = load_mlm("minilm-mlm", quiet=True)
    qs = []
    for t_ in texts:
        toks = list(Sentence.parse(t_).tokens)
        qs.append((toks, len(toks) // 2))
    mlm.candidates(qs[:8], top=20)
    mlm._cache.clear() if hasattr(mlm, "_cache") else None
    t = time.perf_counter()
    mlm.candidates(qs, top=20)
elif work == "llm":
    from textaudit.models import load_classifier
    clf = load_classifier("llm:smollm2")
    clf.predict_proba(["warm up ."])
    t = time.perf_counter()
    clf.predict_proba(texts[:96])
else:
    from textaudit.attacks import SOBeam, run_attack
    from textaudit.models import load_classifier
    from textaudit.neighborhoods.mlm import load_mlm
    clf = load_classifier("cnn")
    atk = SOBeam(clf, k=6, mlm=load_mlm("minilm-mlm", quiet=True))
    atk.patch_words.fit()
    t = time.perf_counter()
    run_attack(atk, texts[:10], None, progress=False)
print(json.dumps({"seconds": time.perf_counter() - t}))
'''


def run(work: str, threads: int, hogs: int) -> float:
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
    try:
        env = {**os.environ, "TEXTAUDIT_THREADS": str(threads), "TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        out = subprocess.run([sys.executable, "-c", CHILD, work], env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]
    finally:
        for p in procs:
            p.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hogs", default="0,1", help="busy processes running beside the workload (comma list)")
    ap.add_argument("--work", default="ppl,mlm,attack,llm")
    args = ap.parse_args()
    print(f"{os.cpu_count()} CPUs; seconds per workload (lower is better)")
    print(f"{'workload':8} {'other jobs':>10} {'1 thread':>9} {'2 threads':>10} {'2/1':>6}")
    for hogs in [int(h) for h in args.hogs.split(",")]:
        for work in args.work.split(","):
            t1, t2 = run(work, 1, hogs), run(work, 2, hogs)
            print(f"{work:8} {hogs:>10} {t1:9.2f} {t2:10.2f} {t2 / t1:6.2f}", flush=True)
            time.sleep(1)


if __name__ == "__main__":
    main()
