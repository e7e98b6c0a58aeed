"""The naturalness constraint against the paper's search, side by side in one run of this script (issues #68, #85).

On the first ``--limit`` SST-2 dev sentences, for each model of ``--models`` and each method of ``--methods`` (SO-Beam
k = 6 by default; SO-Enum k = 2), ``audit attack`` runs as a user runs it (its own process, the offline masked LM,
SmolLM2's perplexities) with the default ``--naturalness on``, with ``--naturalness off`` (the paper's search) and
with the default of commit ``--previous`` (default :data:`PREVIOUS`, checked out into a git worktree: the constraint
as it was before #85 chose p among every pair instead of the ten best; ``none`` leaves it out). Each cell has its
own store, so each is cold: its wall time and masked-LM contexts are what a first run costs. Each cell's results file
is kept in ``--out`` and resumed, so a cut run goes on where it stopped. It prints, per cell:

* **found / all**: the share of *all* the sentences with a finding (skipped and failed count as not found) with its
  Wilson interval, then the success rate among the attacked with its interval, and the skips;
* the measuring LM's median perplexities (SmolLM2 — the constraint asks only the masked LM, so the figure that
  measures is not the score that filtered): x̃ / x0 (``median_ppl_perturbed / median_ppl_original``, the paper's
  Table 3 ratio) and x̃ ⊕ p / x̃;
* findings whose x̃ or x̃ ⊕ p repeats a word within two words of itself where x0 does not;
* a second judge, independent of both LMs: findings whose x̃ ⊕ p holds a word rarer than Zipf 3 (wordfreq: about
  once per million words) that x0 does not — the foreign and archaic swaps of the counter-fitted lists (largo,
  lange);
* the cost: the cold wall seconds, search seconds per example and masked-LM contexts per example; then a warm rerun
  of the first model's "on" (and "previous") cell on its own store: its wall time and the store's misses.

It also writes ``blind.tsv`` (``--blind`` pairs, original and the shown x̃ ⊕ p, drawn at random from the successes,
half from the default and half from the paper's search, shuffled, without saying which) and ``blind-key.json``
(which setting each came from, and the judges' verdicts), for a reader who wants to judge the pairs by hand before
looking.

    python benchmarks/naturalness.py [--limit 200] [--models cnn,lstm] [--methods so-beam] [--previous REV|none]
                                     [--out runs/naturalness] [--blind 100]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
K = {"so-enum": 2, "so-beam": 6}
RARE = 3.0  # Zipf frequency: about once per million words
#: the default's last commit before #85 chose p among every synonym pair (the "previous" cells)
PREVIOUS = "9185027"


def attack(args: list[str], out: Path, src: Path) -> tuple[float, dict]:
    """``audit attack ARGS --output OUT --json`` in its own process, from the sources ``src`` (resumed when OUT
    exists): its wall seconds and its summary."""
    resume = ["--resume"] if out.exists() else []
    argv = ["attack", *args, "--output", str(out), *resume, "--json"]
    code = f"import sys; sys.path.insert(0, {str(src)!r}); from textaudit.cli.main import main; main({argv!r})"
    env = {**os.environ, "TEXTAUDIT_PROGRESS_SECONDS": "600"}
    if env.get("TEXTAUDIT_DATA"):
        env["TEXTAUDIT_DATA"] = str(Path(env["TEXTAUDIT_DATA"]).resolve())
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"audit attack {' '.join(args)} failed:\n{r.stderr[-2000:]}")
    return time.perf_counter() - t0, json.loads(r.stdout.strip().splitlines()[-1])


def _repeated(text: str, window: int = 2) -> set[str]:
    """Words that occur again within ``window`` words of themselves (punctuation skipped)."""
    words = [w.lower() for w in text.split() if any(c.isalnum() for c in w)]
    return {w for i, w in enumerate(words) if w in words[i + 1:i + 1 + window]}


def repeats(original: str, shown: str) -> bool:
    """``shown`` repeats a word within two words of itself ("a meaningful and meaningful film", "regret , regret")
    where ``original`` does not (an input's own "more and more" is not the attack's)."""
    return bool(_repeated(shown) - _repeated(original))


def rare_new_word(original: str, shown: str) -> bool:
    """x̃ ⊕ p holds a word rarer than :data:`RARE` that x0 does not."""
    from wordfreq import zipf_frequency

    before = {w.lower() for w in original.split()}
    return any(w.isalpha() and w.lower() not in before and zipf_frequency(w.lower(), "en") < RARE for w in shown.split())


def judge(records: list[dict]) -> dict:
    """The figures of one cell from its records (see the module docstring)."""
    from textaudit.stats import wilson

    succ = [r for r in records if r.get("status") == "success"]
    attacked = sum(r.get("status") in ("success", "failed") for r in records)

    def med(key: str) -> float | None:
        vals = [r[key] for r in succ if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    po, pp, pq = med("ppl_original"), med("ppl_perturbed"), med("ppl_patched")
    lo, hi = wilson(len(succ), attacked) or (None, None)
    flo, fhi = wilson(len(succ), len(records)) or (None, None)
    return {
        "n": len(records), "attacked": attacked, "skipped": sum(r.get("status") == "skipped" for r in records),
        "success": len(succ), "success_rate": round(len(succ) / attacked, 4) if attacked else None,
        "success_rate_ci95": [round(lo, 4), round(hi, 4)] if lo is not None else None,
        "found_share": round(len(succ) / len(records), 4) if records else None,
        "found_share_ci95": [round(flo, 4), round(fhi, 4)] if flo is not None else None,
        "median_ppl_original": po, "median_ppl_perturbed": pp, "median_ppl_patched": pq,
        "ratio_perturbed_original": round(pp / po, 3) if po and pp else None,
        "ratio_patched_perturbed": round(pq / pp, 3) if pp and pq else None,
        "repeated_word": sum(repeats(r["text"], r["vulnerable"]) or repeats(r["text"], r.get("vulnerable_patched") or "")
                             for r in succ),
        "rare_new_word": sum(rare_new_word(r["text"], r.get("vulnerable_patched") or r["vulnerable"]) for r in succ),
        "unnatural_refused": sum(int(r.get("unnatural") or 0) for r in records),
        "sec_per_example": round(sum(r.get("seconds") or 0 for r in records) / max(attacked, 1), 3),
        "mlm_queries": sum(int(r.get("mlm_queries") or 0) for r in records),
    }


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()[1:] if '"status"' in line]


@contextlib.contextmanager
def worktree(rev: str, where: Path) -> Iterator[Path]:
    """The sources of commit ``rev``, checked out into ``where`` while the cells run, then removed (the repository's
    list of worktrees is left as it was; a cut run checks it out again)."""
    if not where.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev], check=True,
                       capture_output=True)
    try:
        yield where / "src"
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--models", default="cnn,lstm")
    ap.add_argument("--methods", default="so-beam", help="so-beam (k = 6), so-enum (k = 2) or both, comma-separated")
    ap.add_argument("--previous", default=PREVIOUS, help=f"also run the default of this commit (default {PREVIOUS}: "
                    "the last before #85 chose p among every pair; 'none' to leave it out)")
    ap.add_argument("--out", type=Path, default=Path("runs/naturalness"))
    ap.add_argument("--blind", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cells-only", action="store_true", help="run the cells and stop (no warm rerun, no blind file)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sources = {"on": ROOT / "src", "off": ROOT / "src"}
    if args.previous == "none":
        args.previous = None
    elif subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{args.previous}^{{commit}}"],
                        capture_output=True).returncode != 0:
        print(f"commit {args.previous} is not in this clone (a shallow one?): the previous default is left out",
              file=sys.stderr)
        args.previous = None
    with contextlib.ExitStack() as stack:
        if args.previous:
            sources["previous"] = stack.enter_context(worktree(args.previous, (args.out / f"src-{args.previous}").resolve()))
        _run(args, sources)


def _run(args: argparse.Namespace, sources: dict[str, Path]) -> None:
    rows, cost = {}, {}
    for model in args.models.split(","):
        for method in args.methods.split(","):
            for setting, src in sources.items():
                cell = f"{model}.{method}.{setting}"
                path, store = args.out / f"{cell}.jsonl", args.out / f"{cell}.sqlite"
                fresh = not path.exists()
                wall, summary = attack(["--model", model, "--method", method, "--k", str(K[method]), "--data",
                                        "sst2:dev", "--limit", str(args.limit), "--mlm", "minilm-mlm", "--naturalness",
                                        "off" if setting == "off" else "on", "--seed", str(args.seed),
                                        "--store", str(store)], path, src)
                recs = read(path)
                rows[(model, method, setting)] = judge(recs)
                contexts = (summary.get("store_hits") or 0) + (summary.get("store_misses") or 0)
                kept = args.out / f"{cell}.cost.json"  # a cell's cold cost, kept for a later run of this script
                if fresh:
                    kept.write_text(json.dumps({"cold_wall_s": round(wall, 1),
                                                "contexts_per_example": round(contexts / max(len(recs), 1), 1)}))
                cost[cell] = json.loads(kept.read_text()) if kept.exists() else {"cold_wall_s": None,
                                                                                 "contexts_per_example": None}
    if args.cells_only:
        return
    # warm reruns of the first model's "on" and "previous" cells, each on its own (now warm) store
    warm = {}
    model, method = args.models.split(",")[0], args.methods.split(",")[0]
    for setting in [s for s in ("on", "previous") if s in sources]:
        cell = f"{model}.{method}.{setting}"
        with tempfile.TemporaryDirectory() as tmp:
            wall, summary = attack(["--model", model, "--method", method, "--k", str(K[method]), "--data", "sst2:dev",
                                    "--limit", str(args.limit), "--mlm", "minilm-mlm", "--no-ppl", "--seed",
                                    str(args.seed), "--store", str(args.out / f"{cell}.sqlite")],
                                   Path(tmp) / "warm.jsonl", sources[setting])
        warm[cell] = {"wall_s": round(wall, 1), "store_misses": summary.get("store_misses"),
                      "score_forwards": summary.get("score_forwards")}
    # the blind check: half of the pairs from the default, half from the paper's search, shuffled, the setting apart
    rng = random.Random(args.seed)
    pools = {s: [(m, a, r) for (m, a, s2), _ in rows.items() if s2 == s
                 for r in read(args.out / f"{m}.{a}.{s}.jsonl") if r.get("status") == "success"] for s in ("on", "off")}
    picked = [(s, item) for s in ("on", "off") for item in rng.sample(pools[s], min(args.blind // 2, len(pools[s])))]
    rng.shuffle(picked)
    lines, key = ["#\toriginal\tshown (x̃ ⊕ p)"], []
    for n, (setting, (m, a, r)) in enumerate(picked, 1):
        shown = r.get("vulnerable_patched") or r["vulnerable"]
        lines.append(f"{n}\t{r['text']}\t{shown}")
        ratio = (r["ppl_patched"] / r["ppl_original"]) if r.get("ppl_patched") and r.get("ppl_original") else None
        key.append({"#": n, "setting": setting, "model": m, "method": a, "id": r["id"],
                    "lm_ratio": None if ratio is None else round(ratio, 3), "repeated_word": repeats(r["text"], shown),
                    "rare_new_word": rare_new_word(r["text"], shown)})
    (args.out / "blind.tsv").write_text("\n".join(lines) + "\n")
    (args.out / "blind-key.json").write_text(json.dumps(key, indent=1))
    blind = {}
    for s in ("on", "off"):
        mine = [x for x in key if x["setting"] == s]
        ratios = [x["lm_ratio"] for x in mine if x["lm_ratio"] is not None]
        blind[s] = {"pairs": len(mine), "median_lm_ratio": round(statistics.median(ratios), 3) if ratios else None,
                    "lm_ratio_above_1.5": sum(x > 1.5 for x in ratios),
                    "repeated_word": sum(x["repeated_word"] for x in mine),
                    "rare_new_word": sum(x["rare_new_word"] for x in mine)}
    print(f"first {args.limit} SST-2 dev, masked LM minilm-mlm, perplexities SmolLM2 (paper, Table 3: about 1.2); "
          f"previous = {args.previous or '(not run)'}")
    head = ["model", "method", "naturalness", "found / all [95% CI]", "attacked", "skipped", "success among attacked "
            "[95% CI]", "x̃/x0 ppl", "x̃⊕p/x̃ ppl", "repeats", "rare word", "refused", "s/ex", "cold wall s",
            "contexts/ex"]
    print(" | ".join(head))
    for (m, a, s), v in rows.items():
        ci = v["success_rate_ci95"] or ["–", "–"]
        fci = v["found_share_ci95"] or ["–", "–"]
        c = cost[f"{m}.{a}.{s}"]
        print(" | ".join(str(x) for x in [
            m, a, s, f"{v['success']} of {v['n']} = {v['found_share']} [{fci[0]}, {fci[1]}]", v["attacked"],
            v["skipped"], f"{v['success_rate']} [{ci[0]}, {ci[1]}]", v["ratio_perturbed_original"],
            v["ratio_patched_perturbed"], v["repeated_word"], v["rare_new_word"], v["unnatural_refused"],
            v["sec_per_example"], c["cold_wall_s"], c["contexts_per_example"]]))
    for cell, w in warm.items():
        cold = cost[cell]["cold_wall_s"]
        ratio = f"cold / warm = {cold / w['wall_s']:.1f}x" if cold and w["wall_s"] else "cold wall not measured here"
        print(f"warm rerun {cell}: {w['wall_s']} s, store misses {w['store_misses']}, classifier forwards "
              f"{w['score_forwards']} ({ratio})")
    print(json.dumps({"cells": {"/".join(k): {**v, **cost["/".join(k).replace("/", ".")]} for k, v in rows.items()},
                      "blind": blind, "warm_rerun": warm}, indent=1))


if __name__ == "__main__":
    main()
