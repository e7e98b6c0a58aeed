"""RanMASK's certificate as ``audit certify`` computes it beside the rule of its authors' code, one factor at a time,
recomputed from the records of a RanMASK run (issue #83; figures in benchmarks/certify.md).

    TEXTAUDIT_DATA=../shared/data python benchmarks/certify_rule.py RUN.jsonl [RUN2.jsonl ...] [--radii 1,2,5] [--json]

``audit certify --method ranmask`` certifies x against any d changed words while p_A's lower bound − Δ_d > ½
(RanMASK's Theorem 1 with β = 1: Δ_d = 1 − C(h − d, k) / C(h, k), h the words the draws may mask, k the words each
draw keeps). The authors' repository (github.com/zjiehang/RanMASK: ``classifier.py``'s ``certify`` and
``utils/certify.py``, its default ``certify_lambda = True``) computes it otherwise, in four ways each a factor here:

* ``beta``: Δ_d times λ = the share of the votes for the class (p̂_A) in place of 1 — an estimate, not a bound;
* ``h``: h counts every whitespace token (``len(text.split())``; punctuation too) where ours counts the words with a
  letter or digit, the positions the draws mask;
* ``k``: k = h − round(ρ·h) in the bound with no floor, while their draws keep at least 2 words (``min_keep = 2``);
  ours floors both at 2;
* ``first``: the radius their certify returns is the first d that is *not* certified (their metric's docstring:
  "sentence with perturbed numbers smaller than radius is certified"); ours is the largest d that is.

Each factor is applied alone to the same records (the same votes: nothing is classified again), then the three of the
bound together (``bound``) and all four (``authors``). A record wrong or abstaining certifies nothing under every
rule. What cannot be recomputed from records is said, not estimated: their draws mask punctuation tokens too, and they
take 5,000 votes (``audit certify --samples``; its n = 200 → 1,000 step is measured in certify.md).

Prints a Markdown table per file (certified accuracy at each radius with Wilson 95% intervals, and the median radius
over every input, −1 for a wrong or abstaining one: the statistic the authors' certify prints); ``--json`` adds one
object as the last line. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from textaudit.robustness.smoothing import kept_words, ranmask_radius
from textaudit.stats import wilson

FACTORS = ("beta", "h", "k", "first")
RULES: dict[str, frozenset[str]] = {
    "ours": frozenset(),
    **{f"+{f}": frozenset({f}) for f in FACTORS},
    "bound": frozenset({"beta", "h", "k"}),
    "authors": frozenset(FACTORS),
}
LABELS = {
    "ours": "textaudit (β = 1, h words, k ≥ 2, largest certified d)",
    "+beta": "β = p̂_A (the vote share)",
    "+h": "h = every whitespace token",
    "+k": "k = h − round(ρh), no floor, in the bound",
    "+first": "radius = the first uncertified d",
    "bound": "the authors' bound (β, h, k), largest certified d",
    "authors": "the authors' certify as it prints (β, h, k, first)",
}


def rule_radius(record: Mapping, rule: Iterable[str], rate: float, min_keep: int = 2) -> int | None:
    """A RanMASK record's radius under ``rule`` (a set of :data:`FACTORS`); None when the smoothed prediction is wrong
    or abstains (certified at no radius)."""
    rule = set(rule)
    if record.get("abstain") or not record.get("correct"):
        return None
    votes = record["votes"]
    n = sum(votes)
    h = len(record["text"].split()) if "h" in rule else int(record["words"])
    k = kept_words(h, rate, 0 if "k" in rule else min_keep)
    beta = record["n_a"] / n if "beta" in rule else 1.0
    d = ranmask_radius(float(record["p_a_lower"]), h, k, beta=beta)
    if d is None:
        return None
    return d + 1 if "first" in rule else d


def load(path: Path) -> tuple[dict, list[dict]]:
    """The header's config and the records, read and checked as every reader of a certify file does
    (``formats.jsonl``; ``kinds.check_records``: a damaged or repeated record is one line naming file:line)."""
    from textaudit.formats.jsonl import read_header, read_jsonl
    from textaudit.kinds import check_records

    header = read_header(path) or {}
    config = header.get("config") or {}
    if config.get("method") != "ranmask":
        raise SystemExit(f"error: {path} is a {config.get('method')} run; this script reads RanMASK runs")
    records = read_jsonl(path)
    check_records(path, header, records)
    return config, records


def table(records: Sequence[Mapping], rate: float, radii: Sequence[int], min_keep: int = 2) -> list[dict]:
    """One row per rule: certified accuracy at each radius (share of all records, Wilson 95%) and the median radius."""
    rows = []
    n = len(records)
    for name, rule in RULES.items():
        rs = [rule_radius(r, rule, rate, min_keep) for r in records]
        row: dict = {"rule": name, "what": LABELS[name], "n": n}
        for R in radii:
            c = sum(1 for d in rs if d is not None and d >= R)
            lo, hi = wilson(c, n)
            row[f"radius_{R}"] = [c, round(c / n, 4), [round(lo, 4), round(hi, 4)]]
        row["median_radius"] = statistics.median(-1 if d is None else d for d in rs)
        rows.append(row)
    return rows


def markdown(rows: Sequence[Mapping], radii: Sequence[int]) -> str:
    head = "| rule | " + " | ".join(f"radius {R}" for R in radii) + " | median radius |"
    out = [head, "| --- |" + " --- |" * (len(radii) + 1)]
    for row in rows:
        cells = [f"{row[f'radius_{R}'][1]:.3f} [{row[f'radius_{R}'][2][0]:.3f}, {row[f'radius_{R}'][2][1]:.3f}]"
                 for R in radii]
        out.append(f"| {row['what']} | " + " | ".join(cells) + f" | {row['median_radius']} |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="results files of audit certify --method ranmask")
    ap.add_argument("--radii", default="1,2,5")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    radii = [int(r) for r in args.radii.split(",")]
    out = {}
    for path in args.runs:
        config, records = load(path)
        rate = float(config["mask_rate"])
        rows = table(records, rate, radii, int(config.get("min_keep", 2)))
        print(f"\n{path}: {config.get('model')} ({config.get('model_fingerprint')}), ρ {rate}, n = {config.get('samples')} "
              f"votes, {len(records)} inputs")
        print(markdown(rows, radii), flush=True)
        out[str(path)] = {"model": config.get("model"), "fingerprint": config.get("model_fingerprint"),
                          "samples": config.get("samples"), "rows": rows}
    if args.json:
        print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
