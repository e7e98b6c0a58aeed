"""Table 2's first-order cells, one factor at a time (issue #79): what each published constraint does to the rate.

    TEXTAUDIT_DATA=../shared/data python benchmarks/ablation.py --models cnn,lstm          # run what is missing
    TEXTAUDIT_DATA=../shared/data python benchmarks/ablation.py --render                   # the table, from the cells

For each model, BAE over all 872 SST-2 dev examples and Genetic over the first 100 (the paper's), each **factor** a
cell of its own, changed alone from the relaxed search that ``paper/`` ran — rerun here as the baseline (``relaxed``)
on the model as trained here: ``paper/cells``' relaxed cell, of the same model trained on another machine, is shown
beside it (the training run is a factor too). A model retrained on another machine has other weights (its fingerprint,
in every cell's header, in parentheses after the model's name): its cells are a training of their own, each factor
compared with the relaxed cell of its own training, never another's:

* BAE: ``+pos`` (TextAttack's part-of-speech filter), ``+window`` (similarity of the 15 words around the swap,
  shorter sentences not compared), ``paper`` (both: the published recipe), ``paper@0.936`` (MiniLM held to USE's
  published threshold);
* Genetic: ``+lm-alzantot`` (SmolLM2 keeps the 4 likeliest synonyms in ±5 words), ``+lm-jia`` (Jia et al.'s rule:
  the 6-word window within 5 nats of x0's), ``+no-repeat`` (TextAttack's RepeatModification: a word substituted
  once, none past the 20% cap), ``paper`` (both: TextAttack's ``faster-alzantot``, the published recipe of this
  search; before session 38 the ``paper`` cells were ``+lm-jia``'s — TextAttack's searches with the same LM asked
  half its LM windows, and the repeats were why: ``benchmarks/data/vs_textattack-*``).

Each factor's Δ in points is against the relaxed cell on the same examples (paired: Newcombe's interval, McNemar's
p), each rate with its Wilson 95% interval; the paper's value beside. Cells are JSONL under ``paper/ablation/runs``
(appended as examples finish; a killed run resumes), packed gzip into ``paper/ablation/cells`` with ``--pack`` (what
is committed, with ``reproduce_paper.py``'s packing; a fresh clone restores them and resumes); ``paper/ablation.md``
is rendered from whatever is there (a partial cell says how far it got).
The masked LM is a factor only where a second one can run: offline there is one (``minilm-mlm``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: factor → the options it changes from the relaxed search (``make_attack`` keywords)
FACTORS: dict[str, dict[str, dict]] = {
    "genetic": {"relaxed": {}, "paper": {"recipe": "paper"}, "+lm-jia": {"recipe": "paper", "repeat": True},
                "+no-repeat": {"repeat": False}, "+lm-alzantot": {"lm": "alzantot"}},
    "bae": {"relaxed": {}, "paper": {"recipe": "paper"}, "+pos": {"pos": True}, "+window": {"window": 15},
            "paper@0.936": {"recipe": "paper", "threshold": 0.936}},
}
#: the examples each method is run on: the first N of SST-2 dev (None: all 872), as in the paper
LIMITS = {"bae": None, "genetic": 100}
#: where paper/'s relaxed cells are (its Table 2 run, on the models as trained there)
BASELINE = {"bae": "attacks", "genetic": "few"}


def cell_name(model: str, method: str, factor: str) -> str:
    slug = factor.replace("+", "plus-").replace("@", "-at-")
    return f"{model}.{method}.{slug}.jsonl"


def _training(path: Path) -> str | None:
    """The model fingerprint a cell's header records (which training of the model it ran on)."""
    from reproduce_paper import _fingerprint

    return _fingerprint(path)


def cell_path(runs: Path, model: str, method: str, factor: str, fingerprint: str | None) -> Path:
    """Where the cell of this training of ``model`` is: the flat name when free or already this training's, else a
    folder ``<model>@<fingerprint>`` of its own — a cell of another training (another machine's) is never resumed
    into, moved or overwritten: it stays a row of its own training."""
    name = cell_name(model, method, factor)
    flat = runs / name
    for p in [flat, *sorted(runs.glob(f"*/{name}"))]:
        if p.exists() and _training(p) == fingerprint:
            return p
    return flat if not flat.exists() else runs / f"{model}@{fingerprint}" / name


def trainings(runs: Path, model: str, method: str) -> list[tuple[str | None, dict[str, Path]]]:
    """Every training of ``model`` with ``method`` cells under ``runs``: (fingerprint, {factor: cell}), the training
    with the most cells first — each factor's Δ is against the relaxed cell *of the same training*."""
    slugs = {cell_name(model, method, f): f for f in FACTORS[method]}
    found: dict[str | None, dict[str, Path]] = {}
    for p in sorted(runs.rglob("*.jsonl")):
        if p.name in slugs:
            found.setdefault(_training(p), {})[slugs[p.name]] = p
    return sorted(found.items(), key=lambda kv: (-len(kv[1]), str(kv[0])))


def build(method: str, clf, factor: dict, mlm, lm):
    from textaudit.attacks.pos import PartOfSpeech
    from textaudit.attacks.registry import make_attack

    options = dict(factor)
    if options.get("pos") is True:
        options["pos"] = PartOfSpeech()
    if options.get("lm") == "alzantot":
        options.update(lm=lm, lm_rule="alzantot")
    elif method == "genetic" and options.get("recipe") == "paper":
        options["lm"] = lm
    return make_attack(method, clf, **options, **({"mlm": mlm} if method == "bae" else {}))


def run(models: list[str], only: set[str] | None, runs: Path, in_flight: int | None) -> None:
    from textaudit.attacks.run import run_attack
    from textaudit.data import data_config, dataset_id, load_dataset
    from textaudit.lm import LazyCausalLM
    from textaudit.models import load_classifier
    from textaudit.neighborhoods.mlm import load_mlm

    runs.mkdir(parents=True, exist_ok=True)
    mlm, lm = None, LazyCausalLM()
    for model in models:
        clf = load_classifier(model)
        for method, factors in FACTORS.items():
            ds = load_dataset("sst2:dev", limit=LIMITS[method])
            for factor, options in factors.items():
                if only and f"{method}:{factor}" not in only:
                    continue
                if method == "bae" and mlm is None:
                    mlm = load_mlm(None)
                path = cell_path(runs, model, method, factor, clf.fingerprint)
                path.parent.mkdir(parents=True, exist_ok=True)
                atk = build(method, clf, options, mlm, lm)
                print(f"[ablation] {model} {method} {factor} → {path}", file=sys.stderr, flush=True)
                t0 = time.perf_counter()
                run_attack(atk, ds["text"], ds["label"], ids=ds["id"], output=path, resume=path.exists(), ppl=None,
                           config=data_config(dataset_id("sst2:dev", "dev"), None), in_flight=in_flight)
                print(f"[ablation] {model} {method} {factor}: {time.perf_counter() - t0:.0f} s", file=sys.stderr,
                      flush=True)


def _cell(path: Path) -> tuple[dict, int, dict[str, bool], dict[str, tuple]] | None:
    """(header config, examples finished, {id: success} of those attacked — the skipped left out, {id: (status,
    prediction, the adversarial text)} of every record) of a cell, or None."""
    from textaudit.formats.jsonl import read_header
    from textaudit.results import read_jsonl

    if not path.exists():
        return None
    recs = read_jsonl(path)  # (checked as every results file is: a damaged line is one error, not a wrong rate)
    return (read_header(path) or {}).get("config", {}), len(recs), {
        r["id"]: r.get("status") == "success" for r in recs if r.get("status") in ("success", "failed")}, {
        r["id"]: (r.get("status"), r.get("prediction"), r.get("vulnerable")) for r in recs}


THEIRS = "relaxed, paper/'s cell (Table 2's; trained elsewhere)"


def _tag(model: str, fingerprint: str | None) -> str:
    return f"{model} ({fingerprint[:8]})" if fingerprint else model


def render(models: list[str], runs: Path, baseline: Path) -> str:
    """The table: ``models``' cells (a factor not run yet says so), then those of any other model with cells under
    ``runs`` (a model whose published recipe's cell Table 2 shows)."""
    from reproduce_paper import _paper_numbers, _paper_value

    from textaudit.stats import format_p, mcnemar, paired_difference, wilson

    paper = _paper_numbers()
    rows = []

    def row(model: str, method: str, factor: str, f: dict[str, bool], b: dict[str, bool] | None, done: int, want: int,
            pv: float | None, versus: str = "relaxed") -> list[str]:
        left = want - done
        ok = sum(f.values())
        # a partial cell: the quick searches finish first, so its rate leans high; the bounds hold whatever the rest give
        n = f"{len(f)}" + (f" (partial: {done} of {want} examples; over all, between {100 * ok / (len(f) + left):.1f} "
                           f"and {100 * (ok + left) / (len(f) + left):.1f})" if left > 0 else "")
        ci = wilson(sum(f.values()), len(f)) if f else None
        out = [model, method, factor, n, f"{100 * sum(f.values()) / len(f):.1f}" if f else "–",
               f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else "–"]
        ids = [i for i in f if b is not None and i in b]
        if ids and factor != versus:
            d = paired_difference([b[i] for i in ids], [f[i] for i in ids])
            p = mcnemar([b[i] for i in ids], [f[i] for i in ids])["p"]
            out += [f"{100 * d['difference']:+.1f} [{100 * d['ci'][0]:+.1f}, {100 * d['ci'][1]:+.1f}] over {len(ids)}",
                    format_p(p)]
        else:
            out += ["", ""]
        return out + ["–" if pv is None else f"{pv:.1f}"]

    others = sorted({p.name.split(".")[0] for p in runs.rglob("*.jsonl")} - set(models))
    for model in [*models, *others]:
        for method, factors in FACTORS.items():
            want = 872 if LIMITS[method] is None else LIMITS[method]
            pv = _paper_value(paper, model, method)
            groups = trainings(runs, model, method)
            if not groups and model not in models:
                continue
            groups = groups or [(None, {})]
            theirs = _cell(baseline / BASELINE[method] / f"{model}.{method}.jsonl")  # (unpacked by main)
            for g, (fp, cells) in enumerate(groups):  # (g: the first shows paper/'s)
                found = {factor: _cell(path) for factor, path in cells.items()}
                b = found["relaxed"][2] if "relaxed" in found else None
                tag = _tag(model, fp)
                if g == 0 and theirs is not None:
                    rows.append(row(_tag(model, theirs[0].get("model_fingerprint")), method, THEIRS, theirs[2], None,
                                    theirs[1], want, pv))
                for factor in factors:
                    if factor == "relaxed" and factor in found and theirs is not None:  # the training as a factor
                        same = sum(found[factor][3].get(i) == v for i, v in theirs[3].items())
                        label = f"relaxed (Δ: vs paper/'s cell; {same} of {len(theirs[3])} records identical)"
                        rows.append(row(tag, method, label, found[factor][2], theirs[2], found[factor][1], want, pv,
                                        versus=""))
                    elif factor in found:
                        rows.append(row(tag, method, factor, found[factor][2], b, found[factor][1], want, pv))
            ran = {factor for _, cells in groups for factor in cells}
            if model in models:
                rows += [[model, method, factor, "not run", "", "", "", "", ""] for factor in factors if factor not in ran]
    header = ["model (training)", "method", "factor", "attacked", "success %", "Wilson 95%",
              "Δ vs the same training's relaxed cell, points (Newcombe 95%)", "McNemar p", "paper"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="cnn,lstm")
    ap.add_argument("--only", help="comma-separated method:factor cells to run (default: every one missing)")
    ap.add_argument("--out", type=Path, default=ROOT / "paper" / "ablation")
    ap.add_argument("--baseline", type=Path, default=ROOT / "paper" / "cells", help="the relaxed cells (paper/'s)")
    ap.add_argument("--render", action="store_true", help="run nothing: write the table from the cells there are")
    ap.add_argument("--pack", action="store_true", help="pack the runs' cells into <out>/cells (what is committed)")
    ap.add_argument("--in-flight", type=int, default=None)
    args = ap.parse_args(argv)
    import tempfile

    from reproduce_paper import pack_cells, unpack_cells

    models = args.models.split(",")
    runs, cells = args.out / "runs", args.out / "cells"
    # the committed cells restored where runs/ lacks them (a fresh clone): a run resumes from them, a render reads them
    restored = unpack_cells(cells, runs)
    if restored:
        print(f"restored {restored} cells from {cells}; resuming from them", file=sys.stderr)
    if not args.render:
        run(models, set(args.only.split(",")) if args.only else None, runs, args.in_flight)
    if args.pack:
        print(f"packed {pack_cells(runs, cells)} cells into {cells}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:  # paper/'s relaxed cells, as committed (gzip)
        unpack_cells(args.baseline, Path(tmp))
        table = render(models, runs, Path(tmp))
    (args.out.parent / "ablation.md").write_text(
        "# Table 2's first-order cells, one factor at a time\n\n" + "\n\n".join(__doc__.split("\n\n")[2:5]) +
        "\n\nRun: `TEXTAUDIT_DATA=../shared/data python benchmarks/ablation.py --models cnn` (this CPU, niced: 2 h of "
        "one core for cnn's eight cells).\n\n" + table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
