"""The masked LM's share in Table 5's neighbourhood sizes (issue #79, item 3), measured on the sources themselves.

    TEXTAUDIT_DATA=../shared/data python benchmarks/masked_lm_share.py [--mlm minilm-mlm]

Table 5's |Neighbor_3(X_filter)| is 10–96× the paper's per source sentence. A neighbourhood grows with the words a
masked LM keeps at each position: of its top κ = 20, those within δ = 3 of the best logit (the word itself and, with
the naturalness rule, a repeat of a word beside it are not kept). For the sources X_p of the paper's six gender pairs
in SST-2 dev — X_filter is a subset of them, chosen by the model; the candidates do not depend on it — with the
builder the bias stage uses (the pair's word protected, its words never proposed), this prints:

* per pair: the sources, their replaceable positions L, the candidates kept per position (mean, and the share of
  positions where all κ are kept), |Neighbor_1| per source (enumerated: Σ of the kept counts);
* what the paper's Table 5 implies, under the model |Neighbor_3| ≈ C(L, 3)·c³ (positions independent, c kept at each):
  the c that gives the paper's |Neighbor_3(X_filter)| / |X_filter| at our sources' L — an inference from their counts,
  not a measurement of DistilBERT (the hub is unreachable here); the same model applied to our c, beside our Table 5,
  says how far the model itself is off.

A masked LM the hub or a GPU allows (``--mlm distilbert-base-uncased``) prints the same rows for it.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlm", default=None, help="the masked LM (default: the offline one)")
    ap.add_argument("--kappa", type=int, default=20)
    ap.add_argument("--delta", type=float, default=3.0)
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = ap.parse_args(argv)

    from reproduce_paper import GENDER_PAIRS, _paper_numbers

    from textaudit.data import load_dataset
    from textaudit.fairness.pairs import measurable_sources
    from textaudit.neighborhoods.builder import NeighborhoodBuilder
    from textaudit.neighborhoods.mlm import load_mlm

    mlm = load_mlm(args.mlm)
    ds = load_dataset("sst2:dev", require_labels=False)
    paper = _paper_numbers().get("table5", {})
    ours = {tuple(t["pair"]): t for t in json.loads((ROOT / "paper" / "results.json").read_text()).get("table5", [])}
    sizes = {}
    for p in json.loads((ROOT / "paper" / "results.json").read_text()).get("bias", {}).get("pairs", []):
        e3 = p["by_k"].get("3")
        if e3:
            sizes[tuple(p["pair"])] = (e3["neighborhood_size"], e3["sources"])
    rows, t0 = [], time.perf_counter()
    for spec in GENDER_PAIRS.split(";"):
        pair = tuple(spec.split(","))
        sources = measurable_sources(list(ds["text"]), pair, list(ds["id"]), None, "en")
        # (the pair's words blacklisted, as the bias stage does; it also blacklists the gender lexicon: a few fewer)
        builder = NeighborhoodBuilder(mlm, kappa=args.kappa, delta=args.delta, blacklist=set(pair))
        kept, n1, lengths = [], [], []
        for s in sources:
            per = builder.candidates_at([s.sentence], protected=[s.position])[0]
            kept += [len(ws) for _, ws in per]
            n1.append(sum(len(ws) for _, ws in per))
            lengths.append(len(per))
        L = statistics.mean(lengths)
        c = statistics.mean(kept)
        ref = paper.get(spec)
        implied = None
        if ref:  # C(L, 3)·c³ = the paper's per-source |Neighbor_3|  →  c = (N3 / C(L, 3))^(1/3)
            implied = (ref[1] / ref[0] / math.comb(round(L), 3)) ** (1 / 3)
        n3, n_src = sizes.get(pair, (None, None))
        rows.append({"pair": spec, "sources": len(sources), "L": round(L, 1), "kept_mean": round(c, 2),
                     "kept_all_kappa": round(sum(k == args.kappa for k in kept) / len(kept), 3),
                     "neighbor1_per_source": round(statistics.mean(n1), 1),
                     "model_neighbor3_per_source": round(math.comb(round(L), 3) * c ** 3),
                     "table5_neighbor3_per_source": round(n3 / n_src) if n3 else None,
                     "paper_neighbor3_per_source": round(ref[1] / ref[0]) if ref else None,
                     "paper_implied_kept": round(implied, 2) if implied else None,
                     "X_p": (ours.get(pair) or {}).get("X_p")})
    name = getattr(mlm, "name", args.mlm)
    print(f"masked LM {name}, κ = {args.kappa}, δ = {args.delta}: {time.perf_counter() - t0:.0f} s\n")
    head = ["pair", "sources (X_p)", "positions L", "kept per position (of κ)", "all κ kept", "Neighbor_1 / source",
            "C(L,3)·c³", "Table 5: Neighbor_3 / source", "paper: Neighbor_3 / source", "c the paper's count implies"]
    print("| " + " | ".join(head) + " |\n|" + " ---: |" * len(head))
    for r in rows:
        print(f"| {r['pair']} | {r['sources']} | {r['L']} | {r['kept_mean']} | {100 * r['kept_all_kappa']:.0f}% | "
              f"{r['neighbor1_per_source']:,} | {r['model_neighbor3_per_source']:,} | "
              f"{r['table5_neighbor3_per_source'] or '–':,} | {r['paper_neighbor3_per_source'] or '–':,} | "
              f"{r['paper_implied_kept'] or '–'} |")
    if args.json:
        args.json.write_text(json.dumps({"mlm": name, "kappa": args.kappa, "delta": args.delta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
