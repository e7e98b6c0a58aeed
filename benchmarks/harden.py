"""Does ``audit harden`` work? Before and after, side by side, for each method, in one run.

For every method: the original and the hardened model on the *same* first ``--eval-limit`` SST-2 dev
examples (harden never attacks or trains on dev): clean accuracy, SO-Enum k=1 success with McNemar's
exact test (the headline), and beside it SO-Beam k=6 success and its mean ℓ0, Genetic success
(does hardening against second-order weaknesses move the vulnerable example further away, and does
it transfer to a first-order attack?). Then ``--method consistency --group gender`` on ``--bias-model``
with B_{he,she},1 and B_{his,her},1 before and after, with their intervals.

    python benchmarks/harden.py                       # cnn augment, adversarial, consistency; lstm gender
    python benchmarks/harden.py --methods augment --eval-limit 50 --no-bias    # a quick look
    python benchmarks/harden.py --methods augment,adversarial --train-sample 3000 --rounds 3 \
        --eval-attacks so-enum:1 --no-bias --out-dir runs/harden-bench-large       # larger mining budgets

On a busy machine set TEXTAUDIT_THREADS=1: two processes with two torch threads each on two cores
train an LSTM ~100× slower (measured: 0.1 vs 10 batches/s).

Every run is an ``audit harden`` folder under ``--out-dir`` (resumable: rerun the same command).
Acceptance (#37): augment and adversarial each lower SO-Enum k=1 success by >= 10 points with
McNemar p < 0.01 at a clean accuracy loss <= 1.5 points.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _ci(ci) -> str:
    return "–" if not ci else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--methods", default="augment,adversarial,consistency")
    ap.add_argument("--attack", default="so-beam", help="mining attack")
    ap.add_argument("--k", type=int, default=1, help="k of the mining attack")
    ap.add_argument("--train-sample", type=int, default=2000)
    ap.add_argument("--found-weight", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--eval-limit", type=int, default=200)
    ap.add_argument("--eval-attacks", default="so-enum:1,so-beam:6,genetic")
    ap.add_argument("--bias-model", default="lstm")
    ap.add_argument("--bias-epochs", type=int, default=1, help="epochs of the bias model's consistency training")
    ap.add_argument("--no-bias", action="store_true")
    ap.add_argument("--consistency-weight", type=float, default=10.0)
    ap.add_argument("--consistency-epochs", type=int, default=3)
    ap.add_argument("--pairs-per-sentence", type=int, default=8)
    ap.add_argument("--neighbors", type=int, default=2)
    ap.add_argument("--mlm", default="minilm-mlm")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", default="runs/harden-bench")
    args = ap.parse_args()

    from textaudit.harden import HardenRequest, harden, parse_eval_attacks

    evals = [[m, k] for m, k in parse_eval_attacks(args.eval_attacks)]
    out = Path(args.out_dir)
    results = {}
    first: Path | None = None
    for method in [m.strip() for m in args.methods.split(",") if m.strip()]:
        folder = out / f"{args.model}-{method}"
        s = HardenRequest(model=args.model, method=method, out=folder, attack=args.attack, k=args.k,
                          train_sample=args.train_sample, rounds=args.rounds, found_weight=args.found_weight,
                          **(dict(epochs=args.consistency_epochs, consistency_weight=args.consistency_weight,
                                  pairs_per_sentence=args.pairs_per_sentence, neighbors=args.neighbors)
                             if method == "consistency" else dict(epochs=args.epochs)),
                          eval_limit=args.eval_limit, eval_attack=args.eval_attacks, mlm=args.mlm, seed=args.seed)
        if first is not None and not folder.exists():
            # the original model's side of the before/after is the same run for every method (same model,
            # examples, attacks and seed; each file's header is checked on resume): attacked once, shared
            folder.mkdir(parents=True)
            (folder / "settings.json").write_text(json.dumps(s.record(), indent=1))
            for f in first.glob("before.*.jsonl"):
                shutil.copy(f, folder / f.name)
        results[method] = harden(s, folder)
        first = first or folder

    print(f"\n## {args.model}: before → after on the first {args.eval_limit} SST-2 dev examples (percent, 95% CI)\n")
    print("| method | clean acc before | after | Δ | McNemar p (acc) |" +
          "".join(f" {m}{'' if k is None else f' k={k}'} before | after | Δ | McNemar p | ℓ0 before → after |"
                  for m, k in evals) + " mining s | training s |")
    print("|---" * (5 + 5 * len(evals) + 2) + "|")
    for method, r in results.items():
        acc = r["accuracy"]
        row = [method, f"{_pct(acc['before']['rate'])} {_ci(acc['before']['ci95'])}",
               f"{_pct(acc['after']['rate'])} {_ci(acc['after']['ci95'])}",
               f"{100 * (acc['after']['rate'] - acc['before']['rate']):+.1f}", str(acc["mcnemar"]["p"])]
        for a in r["attacks"]:
            b, f = a["before"], a["after"]
            row += [f"{_pct(b['success_rate'])} {_ci(b['ci95'])}", f"{_pct(f['success_rate'])} {_ci(f['ci95'])}",
                    f"{100 * (f['success_rate'] - b['success_rate']):+.1f}", str(a["mcnemar"]["p"]),
                    f"{b['mean_l0']} → {f['mean_l0']}"]
        row += [str(r["cost"].get("attack_train_seconds", 0)), str(r["cost"].get("train_seconds", 0))]
        print("| " + " | ".join(row) + " |")
    for method, r in results.items():
        head = r["attacks"][0]
        drop = 100 * (head["before"]["success_rate"] - head["after"]["success_rate"])
        loss = 100 * (r["accuracy"]["before"]["rate"] - r["accuracy"]["after"]["rate"])
        ok = drop >= 10 and (head["mcnemar"]["p"] or 1) < 0.01 and loss <= 1.5
        print(f"{method}: {head['method']} success {-drop:+.1f} points (McNemar p {head['mcnemar']['p']}), clean accuracy "
              f"{-loss:+.1f} points → acceptance {'met' if ok else 'NOT met'}")

    if not args.no_bias:
        s = HardenRequest(model=args.bias_model, method="consistency", out=out / f"{args.bias_model}-consistency-gender",
                          group="gender", train_sample=args.train_sample, epochs=args.bias_epochs,
                          consistency_weight=args.consistency_weight, neighbors=args.neighbors, eval_limit=None,
                          eval_attack="so-enum:1", mlm=args.mlm, seed=args.seed)
        r = harden(s, s.out)
        print(f"\n## {args.bias_model} consistency --group gender: B_(p,1) on SST-2 dev before → after\n")
        print("| pair | B before [95% CI] | B after [95% CI] | |B| lower | after's interval excludes before |")
        print("|---|---|---|---|---|")
        for b in r["bias"]:
            if tuple(b["pair"]) in {("he", "she"), ("his", "her")} or len(r["bias"]) <= 6:
                print(f"| {b['pair'][0]}→{b['pair'][1]} | {b['before']['B']:+.5f} {b['before']['ci95']} | "
                      f"{b['after']['B']:+.5f} {b['after']['ci95']} | {b['abs_B_lower']} | {b['interval_excludes_before']} |")
        acc = r["accuracy"]
        print(f"\nclean accuracy {_pct(acc['before']['rate'])} → {_pct(acc['after']['rate'])} (McNemar p {acc['mcnemar']['p']});"
              f" gender-pair SO-Enum k=1 success {_pct(r['before']['success_rate'])} → {_pct(r['after']['success_rate'])}"
              f" (p {r['mcnemar_p']})")
    print("\n" + json.dumps({m: {"before": r["before"], "after": r["after"], "mcnemar_p": r["mcnemar_p"]}
                             for m, r in results.items()}))


if __name__ == "__main__":
    main()
