"""textaudit's first-order baselines vs TextAttack's, side by side in one run.

    pip install -e ".[dev,textattack]"
    TEXTAUDIT_DATA=../shared/data python benchmarks/vs_textattack.py [--recipe paper|relaxed] [--model cnn] [--n 50]

Same model, same first N SST-2 dev examples, same substitution sets, and the constraints of ``--recipe`` on both
sides, applied by the *same objects* (``textaudit.attacks.textattack_interop`` hands them to TextAttack's constraint
classes):

- Genetic: textaudit ``GeneticAttack`` vs TextAttack's ``AlzantotGeneticAlgorithm`` (population 60, 40 generations,
  ≤ 8 counter-fitted synonyms per word through a ``WordEmbedding`` whose nearest-neighbour matrix *is* the
  counter-fitted lists, stop words protected, ≤ 20 % of words). ``paper`` (the default; TextAttack's
  ``faster-alzantot``): log P of the 6 words around a swap within 5 nats of the original's, by one SmolLM2.
- BAE-R: textaudit ``BAEAttack`` vs TextAttack's ``WordSwapMaskedLM(method="bae")`` + ``GreedyWordSwapWIR("delete")``
  with the same masked LM object (top 50) and the same MiniLM sentence encoder and threshold. ``paper`` (TextAttack's
  ``bae``): the part-of-speech filter by one TextBlob tagger, and the similarity of the 15 words around the swap.
``relaxed`` leaves out the LM, the tagger and the window on both sides.

Each attack gets a freshly loaded classifier (cold prediction cache) and an empty LM and tag cache; the masked LM,
the sentence encoder, the causal LM and the tagger are loaded once, before timing. Prints success rate with its
Wilson 95% interval, the paired difference (Newcombe 95%) and McNemar's p over the examples both attacked, mean ℓ0,
seconds and classifier queries per attacked example, each helper's seconds (and the LM's texts scored), and the
ratios (TextAttack ÷ textaudit seconds: the speed-up).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def ratio_line(ours: str, a: dict, b: dict, outcomes: dict[str, dict[str, bool]] | None = None) -> str:
    """How much faster textaudit's ``ours`` is than TextAttack's recipe, both success rates with their Wilson
    intervals, and (with each example's ``outcomes``: id → success) the paired difference over the examples both
    attacked, with Newcombe's interval and McNemar's p."""
    from textaudit.stats import format_ci, format_p, mcnemar, paired_difference

    speed = b["sec_per_attacked"] / a["sec_per_attacked"] if a["sec_per_attacked"] else float("nan")
    line = (f"{ours}: textaudit is {speed:.1f}x faster than TextAttack; success {a['success_rate']} "
            f"{format_ci(a.get('wilson'))} vs {b['success_rate']} {format_ci(b.get('wilson'))}")
    theirs = f"textattack:{ours}"
    if outcomes and ours in outcomes and theirs in outcomes:
        both = sorted(set(outcomes[ours]) & set(outcomes[theirs]))
        x, y = [outcomes[ours][i] for i in both], [outcomes[theirs][i] for i in both]
        d = paired_difference(x, y)
        line += (f"; paired difference (TextAttack − textaudit) {d['difference']:+.4f} {format_ci(d['ci'], signed=True)} over {len(both)}, "
                 f"McNemar p {format_p(mcnemar(x, y)['p'])}")
    return line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--methods", default="genetic,textattack:genetic,bae,textattack:bae")
    ap.add_argument("--recipe", default="paper", choices=("paper", "relaxed"),
                    help="the constraints both sides apply (default: the published recipes)")
    ap.add_argument("--no-repeat", action="store_true",
                    help="textaudit's Genetic substitutes a word once and none past its 20%% cap (TextAttack's "
                         "RepeatModification; default: a changed word may change again)")
    ap.add_argument("--output", type=Path, default=None, help="directory for one JSONL per method (resumable)")
    args = ap.parse_args()

    from textaudit.attacks import make_attack, run_attack
    from textaudit.attacks.pos import PartOfSpeech, load_tagger
    from textaudit.attacks.registry import method_spec
    from textaudit.attacks.textattack_interop import import_textattack
    from textaudit.data import load_dataset
    from textaudit.lm import load_causal_lm
    from textaudit.models import load_classifier
    from textaudit.models.encoders import SentenceEncoder
    from textaudit.neighborhoods import load_mlm
    from textaudit.stats import wilson

    os.environ["TEXTAUDIT_STORE"] = "off"  # the masked LM computes every answer: no store warm from an earlier run
    import_textattack()
    ds = load_dataset("sst2:dev", limit=args.n)
    mlm, encoder = load_mlm(quiet=True), SentenceEncoder()
    encoder.encode(["warm up the encoder ."])
    paper = args.recipe == "paper"
    lm = load_causal_lm() if paper else None
    tagger = load_tagger() if paper else None
    if lm is not None:
        lm.log_likelihood(["warm up the language model ."])
    rows, outcomes = {}, {}
    methods = args.methods.split(",")
    started = time.perf_counter()
    for done, method in enumerate(methods, 1):
        clf = load_classifier(args.model)
        # each side starts cold: no LM window, masked-LM answer or sentence vector carried from the side before
        # (until 2026-11-30 the encoder's and the masked LM's caches were not cleared: the side run second found the
        # first side's answers, and the neighbourhood store answered both)
        for helper in (lm, mlm, encoder):
            if helper is not None and hasattr(helper, "clear_cache"):
                helper.clear_cache()
        # each method takes the components its table entry names; a fresh tag cache over the one tagger
        shared = {"mlm": mlm, "encoder": encoder, "recipe": args.recipe, "lm": lm,
                  "pos": PartOfSpeech(tagger) if tagger is not None else None}
        if args.no_repeat and method == "genetic":
            shared["repeat"] = False
        atk = make_attack(method, clf, seed=0, **{k: v for k, v in shared.items()
                                                   if k in method_spec(method).options and v is not None})
        out = args.output / f"{method.replace(':', '_')}.jsonl" if args.output else None
        if out:
            out.parent.mkdir(parents=True, exist_ok=True)
        helpers0 = {h: (getattr(h, "forwards", None), h.seconds) for h in atk.helpers() if hasattr(h, "seconds")}
        t0 = time.perf_counter()
        summary, records = run_attack(atk, ds["text"], ds["label"], ids=[f"sst2:dev:{i}" for i in range(len(ds))],
                                      output=out, resume=out is not None, progress=True)
        attacked = [r for r in records if r["status"] in ("success", "failed")]
        secs = sum(r["seconds"] for r in attacked)
        outcomes[method] = {r["id"]: r["status"] == "success" for r in attacked}
        wins = sum(outcomes[method].values())
        rows[method] = {"success_rate": summary["success_rate"], "wilson": wilson(wins, len(attacked)),
                        "mean_l0": summary["mean_l0"],
                        "attacked": len(attacked), "sec_per_attacked": round(secs / max(1, len(attacked)), 3),
                        "queries_per_attacked": round(sum(r.get("queries") or 0 for r in attacked) / max(1, len(attacked)), 1),
                        "wall_seconds": round(time.perf_counter() - t0, 1),
                        # where the seconds went: each helper's (LM, encoder, tagger) seconds and LM texts scored
                        "helpers": {str(getattr(h, "name", type(h).__name__)): {
                            "seconds": round(h.seconds - s0, 1),
                            **({"scored": h.forwards - f0} if f0 is not None else {})}
                            for h, (f0, s0) in helpers0.items()}}
        print(method, json.dumps(rows[method]), flush=True)
        pair = (method, f"textattack:{method}") if not method.startswith("textattack:") else (method.split(":", 1)[1], method)
        if all(m in rows for m in pair):  # a ratio as soon as both sides are measured
            print(ratio_line(pair[0], rows[pair[0]], rows[pair[1]], outcomes), flush=True)
        elapsed = time.perf_counter() - started
        if done < len(methods):
            print(f"elapsed {elapsed:.0f} s; about {elapsed / done * (len(methods) - done):.0f} s left "
                  f"({len(methods) - done} method{'s' if len(methods) - done > 1 else ''} to go)", flush=True)
    print(f"\nmodel={args.model} n={args.n} (first SST-2 dev examples) recipe={args.recipe} (both sides)")
    print(f"{'method':22} {'success':>8} {'mean l0':>8} {'s/example':>10} {'queries':>9}")
    for m, r in rows.items():
        print(f"{m:22} {r['success_rate']!s:>8} {r['mean_l0']!s:>8} {r['sec_per_attacked']:>10} {r['queries_per_attacked']:>9}")
    for ours in ("genetic", "bae"):
        theirs = f"textattack:{ours}"
        if ours in rows and theirs in rows:
            print(ratio_line(ours, rows[ours], rows[theirs], outcomes))
    print(json.dumps({"model": args.model, "n": args.n, "recipe": args.recipe, "results": rows}))


if __name__ == "__main__":
    main()
