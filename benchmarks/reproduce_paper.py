"""Regenerate the Double Perturbation paper's tables and figures from this project alone.

    TEXTAUDIT_DATA=../shared/data python benchmarks/reproduce_paper.py            # the paper's scale
    TEXTAUDIT_DATA=../shared/data python benchmarks/reproduce_paper.py --quick    # a CPU subset, minutes

Writes into ``--out`` (default ``paper/``, where the paper's scale is committed and grows; ``paper/quick/``
with ``--quick``):

- ``table2.md``: attack success rates (successes / attacked, Wilson 95% interval) of Genetic, BAE,
  SO-Enum (k = 2) and SO-Beam (k = 6) on every model, with the models' dev accuracy and, for the
  certified (``-ibp``) models, their certified accuracy; the paper's numbers beside ours.
- ``table3.md``: mean ℓ0 of the successes and the median perplexity (SmolLM2) of the original and
  the vulnerable/adversarial sentences, per model and method.
- ``table5.md``: per gender pair, |X_p|, |X_filter| (|F_soft| < ε at k = 0) under the base and the
  gender-swap model, and |Neighbor_k(X_filter)| for k = 1..3.
- ``figures/``: Figure 5 (B_{p,k} on X_filter, k = 0 vs k = 3, base vs gender-swap:
  ``pairs_bar.png``), Figure 6 (F_soft histograms per k, e.g. ``hist_actor_actress.png``, and
  ``bias_vs_k.png``).
- ``results.json``: every number above, the settings and the seconds of each stage.
- ``runs/``: the results files (attack cells, certifications, the bias run). Every stage resumes
  from them: a killed run continues where it stopped, and a finished one only re-renders.

Scales. The paper's (default): every SST-2 dev example (872), Genetic on the first 100 as in the
paper, bow/cnn/lstm/transformer/minilm and the certified bow/cnn/lstm, bias k ≤ 3 with 200 sampled
sentences per source at k = 3. ``--quick`` (this 2-core CPU; a first run also trains the zoo models
it lacks): bow, cnn, lstm, cnn-ibp and lstm-ibp on the first 30 dev examples, SO-Enum (the slow
method on a CPU: it scores every sentence within k = 2) on the first 10, and 50 sampled sentences per
source at k = 3. Each cell counts only its own first N examples, so a quick run after a full one
(or the reverse) reuses the results files.
Every setting can be overridden (``--models``, ``--limit``, ...), e.g. to run it on your own models.
A cell that cannot run whole on the machine at hand (SO-Enum on minilm on a CPU) runs with ``--random``:
``--limit N`` examples drawn uniformly at random with ``--seed`` (``runs/random-N/``); the tables show the
largest such subset, saying so, wherever the whole set's cell is unfinished.
The paper's numbers are those in ``benchmarks/data/double_perturbation_paper.toml`` (see there
which cells are known offline).

Recipes. Genetic and BAE run as published (``--recipe paper``, the default: TextAttack's recipes, which the paper
ran — :mod:`textaudit.attacks.recipes` names the offline stand-ins) into ``runs/recipe-paper/``; ``--recipe
relaxed`` is the search without the LM constraint and the part-of-speech filter that paper/ ran first (``runs/``).
Table 2 shows a relaxed cell, saying so, where the recipe's has not run; ``benchmarks/ablation.py`` measures what
each constraint changes (``paper/ablation.md``). ``--render`` computes nothing and loads no model: a fresh clone
renders every table and figure from the committed cells and results.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAPER_NUMBERS = HERE / "data" / "double_perturbation_paper.toml"
METHODS = ("genetic", "bae", "so-enum", "so-beam")
GENDER_PAIRS = "he,she;his,her;him,her;men,women;man,woman;actor,actress"


@dataclass
class Scale:
    """What one run covers (the paper's scale, or ``--quick``)."""

    models: list[str]
    limit: int | None  # first N examples of --data for the methods (None: all)
    few_methods: list[str]  # the slow methods, run on fewer examples
    few_limit: int | None  # ... the first N (the paper ran Genetic on 100: 31.9 s per example on a GPU)
    sample: int  # sentences drawn per source sentence at each sampled k of the bias run
    methods: list[str] = field(default_factory=lambda: list(METHODS))


PAPER = Scale(models=["bow", "cnn", "lstm", "transformer", "minilm", "bow-ibp", "cnn-ibp", "lstm-ibp"],
              limit=None, few_methods=["genetic"], few_limit=100, sample=200)
# on a 2-core CPU SO-Enum (every sentence within k = 2) is the slow one, Genetic is fast
QUICK = Scale(models=["bow", "cnn", "lstm", "cnn-ibp", "lstm-ibp"], limit=30, few_methods=["so-enum"], few_limit=10,
              sample=50)


def _paper_numbers() -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: the tomli backport (a dependency there)
        import tomli as tomllib

    return tomllib.loads(PAPER_NUMBERS.read_text(encoding="utf-8"))


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _paper_model(paper: dict, model: str, table: str) -> str:
    """The model whose entries in the paper's ``table`` are ``model``'s: itself, or another of the same paper row
    (``lstm-ibp-jia`` is the paper's robust LSTM, as ``lstm-ibp``)."""
    if model in paper.get(table, {}):
        return model
    rows = paper.get("rows", {})
    return next((m for m, row in rows.items() if row == rows.get(model) and m in paper.get(table, {})), model)


def _paper_value(paper: dict, model: str, method: str) -> float | None:
    """The paper's Table 2 success rate (%) of ``model``'s row under ``method`` (None: no such cell)."""
    v = paper.get("table2", {}).get(_paper_model(paper, model, "table2"), {}).get(method)
    return float(v) if isinstance(v, (int, float)) else None


def _paper_cell(paper: dict, model: str, method: str) -> str:
    v = _paper_value(paper, model, method)
    return "–" if v is None else f"{v:.1f}"


def _inside(paper: dict, model: str, method: str, cell: dict) -> str:
    """Whether the paper's success rate lies inside our Wilson 95% interval: ``✓``, ``✗`` or ``–``."""
    v, ci = _paper_value(paper, model, method), cell.get("success_rate_ci95")
    if v is None or not ci:
        return "–"
    return "✓" if ci[0] <= v / 100 <= ci[1] else "✗"


def _partial(c: dict) -> str:
    """For a cell that finished fewer examples than it was given: how many, and the bounds of the
    whole set's rate whatever the unfinished ones would give (each one a success, or a failure)."""
    left = c.get("requested", 0) - c.get("finished", 0)
    if left <= 0:
        return ""
    n = c["attacked"] + left
    return (f"; partial: {c['finished']} of {c['requested']} examples finished, so over all of them between "
            f"{_pct(c['success'] / n)} and {_pct((c['success'] + left) / n)}")


def _subset(c: dict) -> str:
    """Which examples a cell is over, in words (the README's compute table)."""
    if c.get("random"):
        return f"a uniformly random {c['random']} of the {c['whole_set']} (seed {c['random_seed']})"
    if c["finished"] < c["requested"]:
        return f"partial: {c['finished']} of {c['requested']}"
    return f"all {c['requested']}" if c.get("limit") is None else f"the first {c['requested']}"


def _random(c: dict) -> str:
    """For a cell over examples drawn at random (``--random``): how many, of how many."""
    return f"; {_subset(c)}" if c.get("random") else ""


def pack_cells(runs: Path, cells: Path) -> int:
    """Copy every results file under ``runs`` into ``cells`` gzip-compressed (what is committed: a full-scale
    run grows over days and machines, and no computed cell may be lost); return the files packed."""
    import gzip

    n = 0
    for f in sorted(runs.rglob("*.jsonl")):
        dest = cells / f.relative_to(runs).with_suffix(".jsonl.gz")
        dest.parent.mkdir(parents=True, exist_ok=True)
        data = f.read_bytes()
        data = data[:data.rfind(b"\n") + 1]  # a line still being written stays out
        with gzip.GzipFile(dest, "wb", mtime=0) as g:  # the same bytes give the same file (no churn in git)
            g.write(data)
        n += 1
    return n


def read_cell(path: Path, packed: Path | None = None) -> tuple[dict | None, list[dict]]:
    """A results file's header and records, from ``path`` or else its packed copy ``packed`` (``pack_cells``): a line a
    kill cut short is left out (its work runs again on a resume); nothing there: ``(None, [])``."""
    import gzip

    if path.exists():
        text = path.read_text()
    elif packed is not None and packed.exists():
        text = gzip.decompress(packed.read_bytes()).decode()
    else:
        return None, []
    header, rows = None, []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "header" in rec:
            header = rec["header"]
        else:
            rows.append(rec)
    return header, rows


def unpack_cells(cells: Path, runs: Path) -> int:
    """Restore the committed cells (``pack_cells``) whose results file ``runs`` lacks (a fresh clone or
    machine), so that the run resumes from them; a results file that exists is never touched."""
    import gzip

    n = 0
    for g in sorted(cells.rglob("*.jsonl.gz")) if cells.is_dir() else []:
        dest = runs / g.relative_to(cells).with_suffix("")
        if dest.exists():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(gzip.decompress(g.read_bytes()))
        n += 1
    return n


def _markdown(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _cell_summaries(out: Path, models: list[str], methods: list[str], ids: set[str]) -> dict[tuple[str, str], dict]:
    """The Table 2/3 figures of every cell file under ``out`` for ``models`` × ``methods``, over its records whose id is
    one of ``ids`` (a cell file may hold more: a larger run before)."""
    import os

    from textaudit.attacks.compare import cell_path, compare_cells
    from textaudit.attacks.run import summarize
    from textaudit.formats.jsonl import read_header
    from textaudit.results import read_jsonl

    records = {(model, method): [r for r in read_jsonl(cell_path(out, model, method)) if r.get("id") in ids]
               for model in models for method in methods if os.path.isfile(cell_path(out, model, method))}
    records = {key: recs for key, recs in records.items() if recs}
    cells = {}
    for c in compare_cells(records)["cells"] if records else []:
        recs = records[(c["model"], c["method"])]
        s = summarize(recs, c["method"], c["k"])  # the perplexities and counts too
        cells[(c["model"], c["method"])] = {**c, "success": s["success"], "median_ppl_original": s["median_ppl_original"],
                                            "median_ppl_perturbed": s["median_ppl_perturbed"],
                                            "finished": len({r.get("id") for r in recs}), "requested": len(ids),
                                            # the searches' and the perplexities' own seconds, on whichever machine ran them
                                            "compute_seconds": round(sum((r.get("seconds") or 0) + (r.get("ppl_seconds") or 0)
                                                                         for r in recs), 1),
                                            **{k: (read_header(cell_path(out, c["model"], c["method"])) or {})
                                               .get("config", {}).get(k) for k in ("precision", "model_fingerprint")}}
    return cells


def _whole(c: dict | None) -> bool:
    return c is not None and c["finished"] >= c["requested"]


#: the methods with recipes (textaudit.attacks.recipes): their cells are kept per recipe
FIRST_ORDER = ("genetic", "bae")


def recipe_dir(runs: Path, recipe: str) -> Path:
    """Where the first-order cells of ``recipe`` are: ``runs/`` for the relaxed search (the cells paper/ ran first),
    ``runs/recipe-<name>/`` for another."""
    return runs if recipe == "relaxed" else runs / f"recipe-{recipe}"


def random_dir(runs: Path, n: int) -> Path:
    """Where ``--random`` keeps the cells of ``n`` examples drawn uniformly at random (never mixed with the cells of
    the first N: a file holds one kind of subset)."""
    return runs / f"random-{n}"


def run_attacks(scale: Scale, args, runs: Path) -> dict:
    """Table 2/3 cells: ``{(model, method): summary}``, each over its own first N examples (the slow methods over
    fewer), or with ``--random`` over N drawn uniformly at random with ``--seed`` (cells under :func:`random_dir`).
    A cell that is not whole over the whole set gives way to a whole random-subset cell (the largest), which says so
    (``random``: its N); where neither is whole, the whole set's partial cell is shown, else a partial subset's (with
    its bounds over its N). A cell file may hold more examples than it is asked for: only those count."""
    from textaudit.attacks.compare import run_compare
    from textaudit.data import load_dataset
    from textaudit.errors import TextAuditError

    # the first-order methods' cells of the published recipe live apart from the relaxed ones paper/ ran first
    groups = []
    for base in dict.fromkeys([runs, recipe_dir(runs, args.recipe)]):
        here = [m for m in scale.methods if (recipe_dir(runs, args.recipe) if m in FIRST_ORDER else runs) == base]
        groups.append(([m for m in here if m not in scale.few_methods], scale.limit, base / "attacks"))
        groups.append(([m for m in here if m in scale.few_methods], scale.few_limit, base / "few"))
    groups = [g for g in groups if g[0]]
    if args.random and not args.render and any(limit is None for _, limit, _ in groups):
        raise TextAuditError("--random draws --limit (and --few-limit) examples at random: give the N")
    if not args.render:
        for methods, limit, out in groups:
            run_compare(scale.models, methods, random_dir(runs, limit) if args.random else out, data=args.data,
                        limit=None if args.random else limit, sample=limit if args.random else None, k=args.attack_k,
                        mlm=args.mlm, ppl=not args.no_ppl, seed=args.seed, progress=not args.no_progress,
                        in_flight=args.in_flight, recipe=args.recipe,
                        naturalness=False)  # the paper's search exactly (#68: the constraint is textaudit's default)
    cells: dict[tuple[str, str], dict] = {}
    for methods, limit, out in groups:  # (with --random, N is the subsets': these cells are over the whole set)
        limit = None if args.random else limit
        ids = set(load_dataset(args.data, default_split="dev", limit=limit)["id"])
        cells.update({key: {**c, "limit": limit} for key, c in _cell_summaries(out, scale.models, methods, ids).items()})
    sizes = sorted((int(d.name.split("-", 1)[1]) for d in runs.glob("random-*") if d.name.split("-", 1)[1].isdigit()),
                   reverse=True)
    whole_set = len(load_dataset(args.data, default_split="dev")) if sizes else 0
    subsets = {}  # (model, method) -> the random-subset cells, the largest N first
    for n in sizes:
        ids = set(load_dataset(args.data, default_split="dev", sample=n, seed=args.seed)["id"])
        for key, c in _cell_summaries(random_dir(runs, n), scale.models, scale.methods, ids).items():
            subsets.setdefault(key, []).append({**c, "random": n, "random_seed": args.seed, "whole_set": whole_set})
    for key, found in subsets.items():  # whole set > a whole random subset > the whole set's partial > a partial subset
        if _whole(cells.get(key)):
            continue
        whole = [c for c in found if _whole(c)]
        if whole or key not in cells:
            cells[key] = whole[0] if whole else max(found, key=lambda c: c["finished"])
    for key, c in cells.items():
        if key[1] in FIRST_ORDER:
            c["recipe"] = args.recipe
    if args.recipe != "relaxed":  # a first-order cell not run with the recipe yet: the relaxed one, said to be so
        for method in [m for m in scale.methods if m in FIRST_ORDER]:
            few = method in scale.few_methods
            limit = scale.few_limit if few else scale.limit
            ids = set(load_dataset(args.data, default_split="dev", limit=None if args.random else limit)["id"])
            for key, c in _cell_summaries(runs / ("few" if few else "attacks"), scale.models, [method], ids).items():
                cells.setdefault(key, {**c, "limit": limit, "recipe": "relaxed"})
    return cells


def fill_perplexities(runs: Path) -> dict[str, int]:
    """Add SmolLM2's perplexities of the original and the vulnerable sentence (Table 3) to every
    success of the attack cells under ``runs`` that were run with ``--no-ppl`` (a GPU that the causal
    LM did not travel to): ``{cell file: successes filled}``. Each file is rewritten whole, through
    a temporary file (a kill leaves the old one), with ``"ppl": true`` in its header, so that a later
    run with perplexities resumes it; the records are otherwise unchanged."""
    from textaudit.files import atomic_path
    from textaudit.formats.jsonl import read_header, read_jsonl
    from textaudit.kinds import check_records
    from textaudit.lm import LazyCausalLM

    lm, filled = None, {}
    for path in sorted([*runs.glob("attacks/*.jsonl"), *runs.glob("few/*.jsonl"), *runs.glob("random-*/*.jsonl")]):
        header = read_header(path) or {}
        config = header.get("config") or {}
        if header.get("command") != "attack" or config.get("ppl") is not False:
            continue
        records = read_jsonl(path)  # a line cut off by a stop at a deadline is left out, as a resume does
        check_records(path, header, records)  # a damaged record: the file and line, before anything is rewritten
        todo = [r for r in records if r.get("status") == "success" and r.get("ppl_original") is None]
        lm = lm or LazyCausalLM()
        for r in todo:
            t0 = time.perf_counter()
            r["ppl_original"], r["ppl_perturbed"] = (round(x, 3) for x in lm.perplexity([r["text"], r["vulnerable"]]))
            r["ppl_seconds"] = round(time.perf_counter() - t0, 3)
        config["ppl"] = True
        with atomic_path(path) as tmp:
            tmp.write_text("".join(json.dumps(x) + "\n" for x in [{"header": header}, *records]), encoding="utf-8")
        filled[str(path)] = len(todo)
    return filled


def model_accuracy(scale: Scale, args, runs: Path) -> dict:
    """Accuracy of every model, and certified accuracy of the certified ones (IBP bounds), on all of
    ``--data`` (cheap next to the attacks; the paper reports them on the whole dev set)."""
    from textaudit.attacks.compare import cell_path
    from textaudit.data import dataset_id, load_dataset
    from textaudit.models import load_classifier
    from textaudit.models.zoo.names import ZOO_MODELS
    from textaudit.models.zoo.train import accuracy
    from textaudit.results import check_output, read_jsonl, write_results

    out = {}
    if args.render:  # the committed files as they are: no model is loaded (a fresh clone trains none)
        for model in scale.models:
            path = cell_path(runs, model, "accuracy")
            if path.exists():
                out[model] = {**read_jsonl(path)[0], "model_fingerprint": _fingerprint(path)}
        return out
    ds = load_dataset(args.data, default_split="dev")
    for model in scale.models:
        path = cell_path(runs, model, "accuracy")  # <model>.accuracy.jsonl, the name made file-safe
        clf = load_classifier(model)
        config = {"model": model, "model_fingerprint": clf.fingerprint, "data": dataset_id(args.data, "dev")}
        if path.exists():
            check_output(path, True, config, exact=True)
            out[model] = {**read_jsonl(path)[0], "model_fingerprint": _fingerprint(path)}
            continue
        row = {"id": model, "accuracy": round(accuracy(clf, ds["text"], ds["label"]), 4), "n": len(ds)}
        if model in ZOO_MODELS and model.endswith("-ibp"):  # the certified zoo models (bow/cnn/lstm-ibp)
            from textaudit.models.ibp import certify_classifier

            c = certify_classifier(clf, ds["text"], ds["label"])
            row.update(certified_accuracy=c["certified_accuracy"], certified_accuracy_ci95=c["certified_accuracy_ci95"])
        write_results(path, [row], command="accuracy", config=config)
        out[model] = {**row, "model_fingerprint": clf.fingerprint}
    return out


def run_gender_bias(scale: Scale, args, runs: Path) -> tuple[dict, dict]:
    """Table 5 and Figures 5–6: B_{p,k} on X_filter for the base and the gender-swap model."""
    from textaudit.data import dataset_id, load_dataset
    from textaudit.errors import TextAuditError
    from textaudit.fairness import CounterfactualBias, parse_pair, run_bias
    from textaudit.models import load_classifier
    from textaudit.neighborhoods.mlm import load_mlm

    pairs = [parse_pair(p) for p in args.pairs.split(";")]
    ds = load_dataset(args.data, default_split="dev", require_labels=False)  # every dev sentence: X_p is small
    mlm = load_mlm(args.mlm)
    base = CounterfactualBias(load_classifier(args.bias_model), mlm, sample=scale.sample, seed=args.seed)
    swap = CounterfactualBias(load_classifier(args.bias_compare), mlm, sample=scale.sample, seed=args.seed)
    path = runs / "bias.jsonl"
    results = run_bias(base, pairs, args.k, list(ds["text"]), ids=ds["id"], compare=swap, output=path,
                       resume=path.exists(), filtered=True, epsilon=args.epsilon, progress=not args.no_progress,
                       config={"data": dataset_id(args.data, "dev")}, in_flight=args.in_flight)
    sizes = {}
    for pair in pairs:
        try:
            sizes[pair] = len(base.sources(list(ds["text"]), pair, ids=ds["id"]))
        except TextAuditError:
            sizes[pair] = 0
    return results, sizes


def bias_histograms(results: dict) -> dict:
    """``{model: {"w1,w2": {"k": [edges, counts]}}}``: each estimate's F_soft values binned as Figure 6 draws them —
    what results.json keeps of the millions of scored sentences (a fresh clone renders the figures from it)."""
    import numpy as np

    from textaudit.fairness.plots import HIST_BINS  # (Figure 6's, as plot_bias draws them from the values)

    out: dict = {}
    for name, per in results.items():
        for pair, by_k in per.items():
            for kk, e in by_k.items():
                # (rounded as the results file keeps F: a resumed run, which reads them back, bins the same values)
                counts, edges = np.histogram(np.round(np.asarray(e.values, dtype=float), 6), bins=HIST_BINS)
                out.setdefault(name, {}).setdefault(",".join(pair), {})[str(kk)] = [edges.tolist(), counts.tolist()]
    return out


def bias_from_report(bias: dict, histograms: dict | None) -> dict:
    """``{model: {pair: {k: BiasEstimate}}}`` read back from results.json's ``bias`` (``fairness.report``'s object)
    and ``bias_histograms``: what Table 5, the B table and the figures are drawn from — after a run as after
    ``--render``, so both write the same bytes."""
    from textaudit.fairness.estimates import BiasEstimate

    out: dict = {}
    for part in (bias, bias.get("compare")):
        if not part or not part.get("model"):
            continue
        hist = (histograms or {}).get(part["model"], {})
        out[part["model"]] = {
            tuple(p["pair"]): {int(kk): BiasEstimate.from_dict(tuple(p["pair"]), int(kk), d,
                                                               _hist(hist.get(",".join(p["pair"]), {}).get(kk)))
                               for kk, d in p["by_k"].items()}
            for p in part["pairs"]}
    return out


def _hist(h: list | None) -> tuple | None:
    return (h[0], h[1]) if h else None


def _saved_report(out: Path) -> dict:
    """results.json as committed (empty when there is none)."""
    try:
        return json.loads((out / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _fingerprint(path: Path) -> str | None:
    """The model fingerprint a cell's header records (which training of the model it ran on)."""
    from textaudit.formats.jsonl import read_header

    return ((read_header(path) or {}).get("config") or {}).get("model_fingerprint")


def table2(scale: Scale, cells: dict, acc: dict, paper: dict) -> str:
    from textaudit.models.zoo.names import split_robust

    header = (["model", "paper's row", "accuracy (paper)", "certified acc."] + [f"{m} (paper)" for m in scale.methods]
              + ["paper inside our 95% interval"])
    rows, retrained = [], []
    for model in scale.models:
        a = acc.get(model, {})
        paper_acc = paper.get("accuracy", {}).get(model)
        row = [model, paper.get("rows", {}).get(model, "–"),
               f"{_pct(a.get('accuracy'))} ({paper_acc if paper_acc is not None else '–'})",
               _pct(a.get("certified_accuracy")) if "certified_accuracy" in a else ""]
        inside = []
        for method in scale.methods:
            c = cells.get((model, method))
            if c is None or not c.get("attacked"):
                row.append("–")
                continue
            lo, hi = c["success_rate_ci95"] or (None, None)
            relaxed = " — relaxed recipe" if c.get("recipe") == "relaxed" else ""
            other = c.get("model_fingerprint") and a.get("model_fingerprint") and \
                c["model_fingerprint"] != a["model_fingerprint"]
            if other:
                retrained.append(f"{model}'s {method} ({c['model_fingerprint'][:8]}; the row's "
                                 f"{a['model_fingerprint'][:8]})")
            row.append(f"**{_pct(c['success_rate'])}** [{_pct(lo)}, {_pct(hi)}] {c['success']}/{c['attacked']} "
                       f"({_paper_cell(paper, model, method)}){_partial(c)}{_random(c)}{relaxed}{' ‡' if other else ''}")
            inside.append(f"{method} {_inside(paper, model, method, c)}")
        rows.append(row + [" · ".join(inside) or "–"])
    rng = paper.get("table2", {}).get("range", {}).get("so-beam")
    foot = ("\nAccuracy and certified accuracy (%): all of the data. Success rate (%) = successes / attacked "
            "examples (examples the model already misclassifies are skipped), Wilson 95% interval, "
            "successes/attacked; the paper's number in parentheses (– : the paper has no such model; "
            "`benchmarks/data/double_perturbation_paper.toml` gives the source of each), ✓ when it lies inside our "
            "interval. minilm stands in for the paper's BERT-base (a smaller model: compare with care). A partial "
            "cell finished only some of its examples: its rate is over those, and the bounds say where the whole "
            "set's would lie whatever the rest gave. A random-subset cell (where the whole set's could not run here) is "
            "over examples drawn uniformly at random: its interval is that subset's, an estimate of the whole set's rate.")
    if rng:
        foot += f" The paper's abstract: SO-Beam {rng[0]}–{rng[1]}% on base and robust CNNs and Transformers."
    if any(split_robust(m)[1] for m in scale.models):
        foot += (" No robust Transformer row (the paper's is Xu et al. 2020's certified Transformer): it is trained with "
                 "auto_LiRPA, whose only PyPI releases (0.2 and 0.3, by its authors) require torch < 1.13, which has no "
                 "build for this Python 3.11 (pip finds none), and whose training script is in its GitHub repository, "
                 "not in the wheel. The robust rows beside Jia et al.'s recipe: [robust.md](robust.md).")
    if any(c.get("recipe") == "relaxed" for c in cells.values()):
        foot += (" *Relaxed recipe*: a Genetic or BAE cell run without the published constraints (Genetic: no LM "
                 "constraint; BAE: no part-of-speech filter, whole-sentence similarity), shown until the published "
                 "recipe's cell is run (`--recipe paper`, the default); what each constraint changes is measured in "
                 "[ablation.md](ablation.md).")
    if retrained:
        foot += (" ‡ Run on another training of the row's model (its fingerprint, the weights and training record, "
                 f"differs): {', '.join(retrained)}. [ablation.md](ablation.md) sets each such training's relaxed cell "
                 "beside the row's, record by record.")
    return _markdown(header, rows) + foot + "\n"


def table3(scale: Scale, cells: dict, paper: dict | None = None) -> str:
    header = ["model", "method", "success", "mean ℓ0 (paper)", "median ppl original", "median ppl perturbed", "ratio",
              "paper's ratio (GPT-2)", "s / example"]
    rows = []
    for model in scale.models:
        for method in scale.methods:
            c = cells.get((model, method))
            if c is None:
                continue
            po, pp = c.get("median_ppl_original"), c.get("median_ppl_perturbed")
            dash = lambda v: "–" if v is None else v  # noqa: E731
            ref = (paper or {}).get("table3", {}).get(_paper_model(paper or {}, model, "table3"), {}).get(method, {})
            paper_ratio = (f"{ref['ppl_perturbed'] / ref['ppl_original']:.2f} ({ref['ppl_perturbed']}/{ref['ppl_original']})"
                           if ref else "–")
            rows.append([model, method, f"{c['success']}/{c['attacked']}",
                         f"{dash(c.get('mean_l0'))} ({ref.get('l0', '–')})", dash(po), dash(pp),
                         f"{pp / po:.2f}" if po and pp else "–", paper_ratio, dash(c.get("sec_per_example"))])
    foot = ("\nℓ0: words changed from the original (second-order: the words x̃ changed from x0 — the swap p is not "
            "counted, as in the paper). Perplexity: SmolLM2-135M; ratio = perturbed / original (lower is more "
            "natural).\n")
    secs = (paper or {}).get("seconds_per_example") or {}
    if secs:
        ours = {m: (cells.get(("lstm", m)) or {}).get("sec_per_example") for m in scale.methods}
        foot += ("\nSeconds per example on the base LSTM, the paper's (a GPU, §3.3.2) beside ours (s / example above: "
                 "the device each cell ran on): " + "; ".join(
                     f"{m} {secs[m]} vs {ours[m] if ours.get(m) is not None else '–'}" for m in scale.methods
                     if m in secs) + ".\n")
    return _markdown(header, rows) + foot


def table5(results: dict, sizes: dict, k: int, paper: dict | None = None) -> str:
    names = list(results)
    theirs = (paper or {}).get("table5", {})
    # (no "|" in a Markdown table cell: sizes are written "size of ...")
    header = ["pair", "size of X_p"] + [f"size of X_filter, {n}" for n in names] + [
        f"size of Neighbor_{kk}(X_filter), {names[0]}" for kk in range(1, k + 1)] + (
        ["paper: X_filter, Neighbor_3(X_filter)", "ours / paper, Neighbor_3 per source"] if theirs else [])
    rows = []
    for pair, n_p in sizes.items():
        row = [f"{pair[0]}/{pair[1]}", n_p]
        for n in names:
            e0 = results[n].get(pair, {}).get(0)
            row.append(e0.sources if e0 is not None else 0)
        by_k = results[names[0]].get(pair, {})
        row += [f"{int(round(by_k[kk].size)):,}" + (" (est.)" if by_k[kk].sampled else "") if kk in by_k else "–"
                for kk in range(1, k + 1)]
        if theirs:
            ref = theirs.get(",".join(pair))
            ours = by_k.get(3)
            row += [f"{ref[0]}, {ref[1]:,}" if ref else "–",
                    f"{(ours.size / ours.sources) / (ref[1] / ref[0]):.0f}×" if ref and ours and ours.sources else "–"]
        rows.append(row)
    return _markdown(header, rows) + ("\nX_p: dev sentences with one p(1) and no p(2) (or the reverse, swapped "
                                      "back); X_filter: those with |F_soft| < ε at k = 0 under each model. "
                                      "Sampled levels give an estimated size.\n")


def bias_table(results: dict) -> str:
    from textaudit.fairness.bias import BIAS_COLUMNS, bias_rows

    return _markdown(BIAS_COLUMNS, bias_rows(results))


def _device() -> str:
    import platform

    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def _readme(report: dict, out: Path) -> str:
    s = report["settings"]
    files = [f for f in ("table2.md", "table3.md", "table5.md") if (out / f).exists()]
    first = lambda n: f"the first {n}" if n else "all"  # noqa: E731
    lines = ["# The Double Perturbation paper, regenerated", "",
             f"`{report['command']}` on {report['device']}, {report['date']}; scale: **{report['scale']}** "
             f"(models {', '.join(s['models'])}; {first(s['limit'])} examples of {s['data']}, "
             f"{'/'.join(s['few_methods']) or 'no method'} on {first(s['few_limit'])}; "
             f"bias {s['bias_model']} vs {s['bias_compare']}, k <= {s['k']}, "
             f"{s['sample']} sampled sentences per source at sampled k).", "",
             "Seconds per stage in this invocation (a resumed run counts only what it computed): "
             + (", ".join(f"{k} {v:.0f}" for k, v in report["seconds"].items()) or "none") + ".", ""]
    cells = report.get("table2") or []
    if cells:
        total = sum(c.get("compute_seconds") or 0 for c in cells)
        lines += ["Compute of each Table 2 cell: the seconds its records took to search (and to score their perplexities), "
                  "summed over every invocation and machine that added to it; the examples it is over.", "",
                  "| model | method | examples | compute s | precision |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {c['model']} | {c['method']} | {_subset(c)} | {c.get('compute_seconds', 0):,.0f} | "
                  f"{(c.get('precision') or {}).get('model', 'fp32')} |" for c in cells]
        lines += ["", f"All cells: {total:,.0f} s ({total / 3600:.1f} h).", ""]
    stages = report.get("stage_seconds") or {}
    if stages:
        lines += ["Other stages, seconds over the invocations that computed them: "
                  + ", ".join(f"{k} {v:,.0f}" for k, v in stages.items()) + ".", ""]
    lines += [f"- [{f}]({f})" for f in files]
    lines += [f"- [{f}]({f})" for f in report.get("figures", [])]
    lines += ["- [results.json](results.json): every number, the settings and the timings", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the documented CPU subset (see the docstring)")
    ap.add_argument("--out", type=Path, default=None,
                    help="output directory (default: paper/, where the paper's scale is committed; paper/quick/ with --quick)")
    ap.add_argument("--models", help="comma-separated models of Tables 2-3 (default: the scale's)")
    ap.add_argument("--methods", help=f"comma-separated methods (default: {','.join(METHODS)})")
    ap.add_argument("--limit", type=int, help="first N examples for BAE/SO-Enum/SO-Beam")
    ap.add_argument("--few-methods", help="comma-separated slow methods run on fewer examples (default: the scale's)")
    ap.add_argument("--few-limit", type=int, help="first N examples for the slow methods")
    ap.add_argument("--random", action="store_true",
                    help="draw --limit/--few-limit examples uniformly at random (--seed) instead of the first N "
                         "(cells under runs/random-N/; a table shows one where the whole set's cell is not finished)")
    ap.add_argument("--attack-k", type=int, help="k of SO-Enum and SO-Beam (default: theirs, 2 and 6)")
    ap.add_argument("--recipe", choices=("paper", "relaxed"), default="paper",
                    help="Genetic's and BAE's (textaudit.attacks.recipes): paper, every published constraint (default), "
                         "or relaxed, the search paper/ ran first; each recipe's cells are kept apart (runs/recipe-paper/), "
                         "and Table 2 shows a relaxed cell, saying so, where the recipe's is not run yet")
    ap.add_argument("--data", default="sst2:dev")
    ap.add_argument("--mlm", default=None, help="masked LM of the neighbourhoods (default: the offline one)")
    ap.add_argument("--bias-model", default="lstm")
    ap.add_argument("--bias-compare", default="lstm-gender-swap")
    ap.add_argument("--pairs", default=GENDER_PAIRS, help="';'-separated pairs (default: the paper's six)")
    ap.add_argument("--k", type=int, default=3, help="bias levels 0..k")
    ap.add_argument("--sample", type=int, help="sentences per source at each sampled k")
    ap.add_argument("--epsilon", type=float, default=0.005, help="ε of X_filter")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-ppl", action="store_true", help="skip the perplexities of Table 3")
    ap.add_argument("--fill-ppl", action="store_true",
                    help="add Table 3's perplexities to the cells run with --no-ppl (e.g. on a GPU without the LM)")
    ap.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto",
                    help="of the classifiers and the masked LM (auto: bf16 on CUDA, fp32 on a CPU; a cell's "
                         "header keeps it, and a resume needs the same)")
    ap.add_argument("--skip", default="", help="comma-separated stages to leave out: attacks, accuracy, bias")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--pack", action="store_true",
                    help="also pack every results file into <out>/cells/ (gzip; what is committed as the run grows)")
    ap.add_argument("--render", action="store_true",
                    help="attack nothing: render Tables 2-3 from the cells' files as they are (a run in progress, a partial cell)")
    ap.add_argument("--default-gc", action="store_true",
                    help="leave Python's garbage-collector thresholds (to measure textaudit's tuning beside them)")
    ap.add_argument("--in-flight", type=int, default=None,
                    help="examples (bias: units) searched at once by the engine (default: 32 on a CPU, 256 on a GPU)")
    args = ap.parse_args(argv)
    if not args.default_gc:
        from textaudit.environment import tune_garbage_collector

        tune_garbage_collector()

    from textaudit.errors import TextAuditError
    from textaudit.progress import quiet_third_party_bars

    quiet_third_party_bars()  # as the audit command does: only textaudit's own progress lines

    base = QUICK if args.quick else PAPER
    if args.out is None:
        args.out = Path("paper/quick") if args.quick else Path("paper")
    if args.render:  # the settings the committed run was rendered with, for every one not given here
        kept = _saved_report(args.out).get("settings") or {}
        join = lambda v: ",".join(v) if isinstance(v, list) else v  # noqa: E731
        names = ["models", "methods", "few_methods", "data", "k", "epsilon", "pairs", "bias_model", "bias_compare", "recipe"]
        if not kept.get("random"):  # (a --random run's N is its subsets', not the whole-set cells')
            names += ["limit", "few_limit"]
        for name in names:
            if getattr(args, name) == ap.get_default(name) and kept.get(name) is not None:
                setattr(args, name, join(kept[name]))
    scale = Scale(models=args.models.split(",") if args.models else list(base.models),
                  limit=args.limit if args.limit is not None else base.limit,
                  few_methods=args.few_methods.split(",") if args.few_methods is not None else list(base.few_methods),
                  few_limit=args.few_limit if args.few_limit is not None else base.few_limit,
                  sample=args.sample or base.sample,
                  methods=args.methods.split(",") if args.methods else list(base.methods))
    skip = {s for s in args.skip.split(",") if s}
    out, runs = args.out, args.out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    restored = unpack_cells(out / "cells", runs)
    if restored:
        print(f"restored {restored} results files from {out / 'cells'} (the committed cells); resuming from them",
              file=sys.stderr)
    paper = _paper_numbers()
    seconds: dict[str, float] = {}
    report: dict = {"scale": "quick" if args.quick else "paper", "settings": {**asdict(scale), "data": args.data,
                    "mlm": args.mlm, "bias_model": args.bias_model, "bias_compare": args.bias_compare,
                    "pairs": args.pairs, "k": args.k, "epsilon": args.epsilon, "seed": args.seed, "recipe": args.recipe,
                    **({"random": True} if args.random else {})},
                    "command": "python benchmarks/reproduce_paper.py " + " ".join(sys.argv[1:] if argv is None else argv)}
    from textaudit.models.options import ModelOptions, use_model_options

    try:
        with use_model_options(ModelOptions(precision=None if args.precision == "auto" else args.precision)):
            return _run(args, scale, skip, out, runs, paper, seconds, report)
    except TextAuditError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _stage_seconds(out: Path) -> dict[str, float]:
    """The seconds the accuracy and bias stages took over the earlier invocations that computed them (results.json's
    ``stage_seconds``: a render or a resumed run that finds them done adds nothing)."""
    try:
        return dict(json.loads((out / "results.json").read_text(encoding="utf-8")).get("stage_seconds") or {})
    except (OSError, ValueError):
        return {}


def _stage_sizes(runs: Path) -> dict[str, int]:
    """What the accuracy and bias stages have written under ``runs`` (bytes): a change means this invocation computed."""
    size = lambda fs: sum(f.stat().st_size for f in fs if f.is_file())  # noqa: E731
    return {"accuracy": size(runs.glob("*.accuracy.jsonl")), "bias": size([runs / "bias.jsonl"])}


def _run(args, scale: Scale, skip: set[str], out: Path, runs: Path, paper: dict, seconds: dict, report: dict) -> int:
    if args.fill_ppl:
        t0 = time.perf_counter()
        for path, n in fill_perplexities(runs).items():
            print(f"perplexities added to {n} successes of {path}", file=sys.stderr)
        seconds["fill_ppl"] = round(time.perf_counter() - t0, 1)
    cells, acc = {}, {}
    stages = _stage_seconds(out)
    grew = _stage_sizes(runs)
    if "attacks" not in skip:
        t0 = time.perf_counter()
        print(f"[1/3] attacks: {', '.join(scale.methods)} on {', '.join(scale.models)}", file=sys.stderr)
        cells = run_attacks(scale, args, runs)
        seconds["attacks"] = round(time.perf_counter() - t0, 1)
    if "accuracy" not in skip:
        t0 = time.perf_counter()
        print("[2/3] dev accuracy and certified accuracy", file=sys.stderr)
        acc = model_accuracy(scale, args, runs)
        seconds["accuracy"] = round(time.perf_counter() - t0, 1)
    if cells:  # (a run that skips the attacks keeps the tables it finds)
        (out / "table2.md").write_text("# Table 2: attack success rates\n\n" + table2(scale, cells, acc, paper))
        (out / "table3.md").write_text("# Table 3: ℓ0 and perplexity\n\n" + table3(scale, cells, paper))
    saved = _saved_report(out)
    # a stage left out (--skip) keeps what results.json said of it: only what ran here is replaced
    report["table2"] = ([{"model": m, "method": a, **c} for (m, a), c in cells.items()] if "attacks" not in skip
                        else saved.get("table2", []))
    report["accuracy"] = acc if "accuracy" not in skip else saved.get("accuracy", {})
    if "bias" in skip:
        report.update({key: saved[key] for key in ("bias", "table5", "figures", "bias_histograms") if key in saved})
    if "bias" not in skip:
        from textaudit.fairness import report as bias_report
        from textaudit.fairness.plots import plot_bias

        t0 = time.perf_counter()
        if args.render:  # from results.json as committed: the millions of scored sentences are not in the repository
            print("[3/3] bias: Table 5 and the figures from results.json", file=sys.stderr)
            bias, histograms = saved.get("bias"), saved.get("bias_histograms")
            sizes = {tuple(t["pair"]): t["X_p"] for t in saved.get("table5") or []}
        else:
            print(f"[3/3] bias: {args.bias_model} vs {args.bias_compare}, k <= {args.k}, X_filter", file=sys.stderr)
            computed, sizes = run_gender_bias(scale, args, runs)
            bias, histograms = bias_report(computed), bias_histograms(computed)
        seconds["bias"] = round(time.perf_counter() - t0, 1)
        if bias and bias.get("model"):
            results = bias_from_report(bias, histograms)  # (read back as a render reads it: the same bytes either way)
            (out / "table5.md").write_text("# Table 5: X_filter and neighbourhood sizes\n\n"
                                           + table5(results, sizes, args.k, paper)
                                           + "\n## B_{p,k} on X_filter\n\n" + bias_table(results))
            report["bias"] = bias
            report["table5"] = [{"pair": list(p), "X_p": n} for p, n in sizes.items()]
            if histograms:
                report["bias_histograms"] = histograms
                report["figures"] = [str(f.relative_to(out)) for f in plot_bias(results, out / "figures")]
            else:  # a results.json from before the histograms were kept: its figures stay as they are
                report["figures"] = saved.get("figures", [])
                print("bias: results.json keeps no histograms (a run before they were kept): the figures are left as "
                      "they are; rerun the bias stage to redraw them", file=sys.stderr)
    if args.pack:
        print(f"packed {pack_cells(runs, out / 'cells')} results files into {out / 'cells'}", file=sys.stderr)
    report["seconds"] = seconds
    for stage, size in _stage_sizes(runs).items():  # a stage that computed something adds its seconds
        if size != grew[stage] and stage in seconds:
            stages[stage] = round(stages.get(stage, 0.0) + seconds[stage], 1)
    report["stage_seconds"] = stages
    # a render computes nothing: the device is the one the numbers were computed on
    report["device"] = saved.get("device", "unknown") if args.render else _device()
    report["date"] = time.strftime("%Y-%m-%d")
    (out / "results.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (out / "README.md").write_text(_readme(report, out))
    for table in ("table2.md", "table5.md"):
        if (out / table).exists():
            print((out / table).read_text())
    print(f"wrote {out}/ ({', '.join(f'{k} {v:.0f} s' for k, v in seconds.items())})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
