"""textaudit's first-order baselines vs TextAttack's, side by side in one run.

    pip install -e ".[dev,textattack]"
    TEXTAUDIT_DATA=../shared/data python benchmarks/vs_textattack.py [--model cnn] [--n 50] [--output DIR]

Same model, same first N SST-2 dev examples, same substitution sets and constraints:

- Genetic: textaudit ``GeneticAttack`` vs TextAttack's ``AlzantotGeneticAlgorithm`` (population 60,
  40 generations, ≤ 8 counter-fitted synonyms per word through a ``WordEmbedding`` whose
  nearest-neighbour matrix *is* the counter-fitted lists, stop words protected, ≤ 20 % of words;
  no LM constraint on either side).
- BAE-R: textaudit ``BAEAttack`` vs TextAttack's ``WordSwapMaskedLM(method="bae")`` +
  ``GreedyWordSwapWIR("delete")`` with the same masked LM object (top 50) and the same MiniLM
  sentence encoder and threshold (no POS filter on either side).

Each attack gets a freshly loaded classifier (cold prediction cache); the masked LM and the sentence
encoder are loaded once, before timing. Prints success rate, mean ℓ0, seconds and classifier
queries per attacked example, and the ratios (TextAttack ÷ textaudit seconds: the speed-up).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def ratio_line(ours: str, a: dict, b: dict) -> str:
    """How much faster textaudit's ``ours`` is than TextAttack's recipe, and both success rates."""
    speed = b["sec_per_attacked"] / a["sec_per_attacked"] if a["sec_per_attacked"] else float("nan")
    return (f"{ours}: textaudit is {speed:.1f}x faster than TextAttack; success {a['success_rate']} vs "
            f"{b['success_rate']} (difference {round((a['success_rate'] or 0) - (b['success_rate'] or 0), 4):+})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--methods", default="genetic,textattack:genetic,bae,textattack:bae")
    ap.add_argument("--output", type=Path, default=None, help="directory for one JSONL per method (resumable)")
    args = ap.parse_args()

    from textaudit.attacks import make_attack, run_attack
    from textaudit.attacks.registry import method_spec
    from textaudit.attacks.textattack_interop import import_textattack
    from textaudit.data import load_dataset
    from textaudit.models import load_classifier
    from textaudit.models.encoders import SentenceEncoder
    from textaudit.neighborhoods import load_mlm

    import_textattack()
    ds = load_dataset("sst2:dev", limit=args.n)
    mlm, encoder = load_mlm(quiet=True), SentenceEncoder()
    encoder.encode(["warm up the encoder ."])
    rows = {}
    methods = args.methods.split(",")
    started = time.perf_counter()
    for done, method in enumerate(methods, 1):
        clf = load_classifier(args.model)
        shared = {"mlm": mlm, "encoder": encoder}  # each method takes the components its table entry names
        atk = make_attack(method, clf, seed=0, **{k: v for k, v in shared.items() if k in method_spec(method).options})
        out = args.output / f"{method.replace(':', '_')}.jsonl" if args.output else None
        if out:
            out.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        summary, records = run_attack(atk, ds["text"], ds["label"], ids=[f"sst2:dev:{i}" for i in range(len(ds))],
                                      output=out, resume=out is not None, progress=True)
        attacked = [r for r in records if r["status"] in ("success", "failed")]
        secs = sum(r["seconds"] for r in attacked)
        rows[method] = {"success_rate": summary["success_rate"], "mean_l0": summary["mean_l0"],
                        "attacked": len(attacked), "sec_per_attacked": round(secs / max(1, len(attacked)), 3),
                        "queries_per_attacked": round(sum(r.get("queries") or 0 for r in attacked) / max(1, len(attacked)), 1),
                        "wall_seconds": round(time.perf_counter() - t0, 1)}
        print(method, json.dumps(rows[method]), flush=True)
        pair = (method, f"textattack:{method}") if not method.startswith("textattack:") else (method.split(":", 1)[1], method)
        if all(m in rows for m in pair):  # a ratio as soon as both sides are measured
            print(ratio_line(pair[0], rows[pair[0]], rows[pair[1]]), flush=True)
        elapsed = time.perf_counter() - started
        if done < len(methods):
            print(f"elapsed {elapsed:.0f} s; about {elapsed / done * (len(methods) - done):.0f} s left "
                  f"({len(methods) - done} method{'s' if len(methods) - done > 1 else ''} to go)", flush=True)
    print(f"\nmodel={args.model} n={args.n} (first SST-2 dev examples)")
    print(f"{'method':22} {'success':>8} {'mean l0':>8} {'s/example':>10} {'queries':>9}")
    for m, r in rows.items():
        print(f"{m:22} {r['success_rate']!s:>8} {r['mean_l0']!s:>8} {r['sec_per_attacked']:>10} {r['queries_per_attacked']:>9}")
    for ours in ("genetic", "bae"):
        theirs = f"textattack:{ours}"
        if ours in rows and theirs in rows:
            print(ratio_line(ours, rows[ours], rows[theirs]))
    print(json.dumps({"model": args.model, "n": args.n, "results": rows}))


if __name__ == "__main__":
    main()
