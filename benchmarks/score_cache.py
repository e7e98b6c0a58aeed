"""The score cache (#64): what a rerun costs when the classifiers' answers are kept on disk.

    TEXTAUDIT_DATA=../shared/data python benchmarks/score_cache.py [--model cnn] [--limit 200] [--enum-limit 20] [--json]

In one process, one store file (fresh), the same examples (the first ``--limit`` SST-2 dev), ppl off;
every run has its own classifier and masked-LM objects (empty memory caches, as a new process has):

0. ``cold, scores off``: SO-Beam (k = 6), empty store of its own, ``--score-cache off``: what a first run
   costs without the score cache (its writes are the cache's cost);
1. ``cold``: SO-Beam (k = 6), empty store: the masked LM and the classifier compute everything;
2. ``mlm warm``: SO-Beam again, ``--score-cache off``: the masked LM's answers from the store, the
   classifier computes (what a rerun cost before the score cache);
3. ``warm``: SO-Beam again with the score cache: both from the store.

Then SO-Enum (k = 2) on the first ``--enum-limit`` of those examples, each on its own copy of the store
as it is after step 3: ``enum, scores off`` vs ``enum after so-beam`` (the SO-Beam runs' scores there):
its score hit rate and the speed-up. Records of 1–3 are compared (every field but the seconds), and of
the two SO-Enum runs. Prints seconds and ratios measured side by side in this one run; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path


def attack(model: str, method: str, texts, labels, ids, store: Path, scores: str, k: int | None = None) -> dict:
    from textaudit.attacks import make_attack
    from textaudit.attacks.run import run_attack
    from textaudit.models import load_classifier
    from textaudit.neighborhoods import load_mlm
    from textaudit.neighborhoods.score_cache import use_score_cache
    from textaudit.neighborhoods.store import close_stores, use_store

    with use_store(str(store)), use_score_cache(scores):
        t0 = time.perf_counter()
        clf = load_classifier(model)
        mlm = load_mlm("minilm-mlm", quiet=True)
        atk = make_attack(method, clf, mlm=mlm, seed=0, **({"k": k} if k is not None else {}))
        if hasattr(atk, "rank_patch_words"):
            atk.rank_patch_words(texts)
        _, records = run_attack(atk, texts, labels, ids=ids, progress=False)
        wall = time.perf_counter() - t0
        stats = clf.stats
        out = {"seconds": round(wall, 2), "forwards": stats.unique_forwards, "score_hits": stats.store_hits,
               "score_hit_rate": round(stats.store_hits / max(stats.store_hits + stats.unique_forwards, 1), 4),
               "mlm_forwards": mlm.forwards, "records": [{k: v for k, v in r.items() if k != "seconds"} for r in records]}
    close_stores()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--enum-limit", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from textaudit.data import load_dataset
    from textaudit.progress import quiet_third_party_bars

    quiet_third_party_bars()
    ds = load_dataset("sst2:dev", limit=args.limit)
    texts, labels, ids = list(ds["text"]), list(ds["label"]), list(ds["id"])
    tmp = Path(tempfile.mkdtemp(prefix="score-cache-"))
    store = tmp / "store.sqlite"
    runs = {}
    for name, scores in (("cold, scores off", "off"), ("cold", "auto"), ("mlm warm", "off"), ("warm", "auto")):
        runs[name] = attack(args.model, "so-beam", texts, labels, ids, tmp / "other.sqlite" if name == "cold, scores off"
                            else store, scores)
        print(f"so-beam {name}: {runs[name]['seconds']} s, forwards {runs[name]['forwards']}, "
              f"score hits {runs[name]['score_hits']}", flush=True)
    n = args.enum_limit
    for name, scores in (("enum, scores off", "off"), ("enum after so-beam", "auto")):
        copy = tmp / f"{name.replace(' ', '_').replace(',', '')}.sqlite"
        shutil.copy(store, copy)
        runs[name] = attack(args.model, "so-enum", texts[:n], labels[:n], ids[:n], copy, scores)
        print(f"{name}: {runs[name]['seconds']} s, forwards {runs[name]['forwards']}, "
              f"score hits {runs[name]['score_hits']} ({runs[name]['score_hit_rate']:.1%})", flush=True)
    same = (runs["cold, scores off"]["records"] == runs["cold"]["records"] == runs["mlm warm"]["records"]
            == runs["warm"]["records"])
    same_enum = runs["enum, scores off"]["records"] == runs["enum after so-beam"]["records"]
    c, m, w = (runs[k]["seconds"] for k in ("cold", "mlm warm", "warm"))
    eo, ew = runs["enum, scores off"]["seconds"], runs["enum after so-beam"]["seconds"]
    print(f"\n{args.model}, SO-Beam k=6 on the first {args.limit} SST-2 dev examples (one process, fresh store):")
    print("| run | seconds | classifier forwards | score hits | masked-LM forwards |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for k in ("cold, scores off", "cold", "mlm warm", "warm", "enum, scores off", "enum after so-beam"):
        r = runs[k]
        print(f"| {k} | {r['seconds']} | {r['forwards']:,} | {r['score_hits']:,} | {r['mlm_forwards']:,} |")
    c0 = runs["cold, scores off"]["seconds"]
    print(f"\nwarm / cold speed-up: {c / w:.1f}x; warm / mlm-warm: {m / w:.1f}x; a first run with the cache / "
          f"without: {c / c0:.2f}x; records identical: {same}")
    print(f"SO-Enum (first {n}) after SO-Beam: score hit rate {runs['enum after so-beam']['score_hit_rate']:.1%}, "
          f"speed-up {eo / ew:.2f}x; records identical: {same_enum}")
    if args.json:
        print(json.dumps({"model": args.model, "limit": args.limit, "enum_limit": n, "records_identical": same,
                          "enum_records_identical": same_enum, "speedup_warm_vs_cold": round(c / w, 2),
                          "speedup_warm_vs_mlm_warm": round(m / w, 2), "enum_speedup": round(eo / ew, 2),
                          "first_run_cost": round(c / c0, 3),
                          "runs": {k: {x: v for x, v in r.items() if x != "records"} for k, r in runs.items()}}))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
