"""What a report shows for each kind of results: a headline, tables, figures and examples.

A section is plain data (:class:`Section`): the HTML and Markdown templates render the same
sections. Figures come from the plotting functions the commands use (``audit bias --plot`` …),
drawn into a temporary directory and embedded as ``data:`` URIs, so the report is one file that
needs no network.
"""

from __future__ import annotations

import base64
import difflib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from textaudit.attacks.compare import cells_from_files, compare_cells
from textaudit.attacks.naturalness import most_natural_first, ppl_ratio
from textaudit.attacks.run import summarize
from textaudit.classification import label_confusions
from textaudit.evaluation import plot_confusion
from textaudit.fairness.bias import BIAS_COLUMNS, NOTHING_SCORED, bias_rows, estimates_from_records, small_samples
from textaudit.fairness.pairs import parse_pair
from textaudit.fairness.plots import plot_bias
from textaudit.fairness.replay import REPLAY_COLUMNS, replay_row
from textaudit.findings import Replay
from textaudit.formats import harden as ba
from textaudit.formats.margins import MARGIN_COLUMNS, margin_rows, margin_title, margin_verdicts
from textaudit.harden.plots import plot_before_after
from textaudit.kinds import BY_ID, shown_number, summarize_records
from textaudit.report.load import Loaded, kind_order
from textaudit.robustness.calibration import CALIBRATION_COLUMNS, calibration_rows, plot_reliability
from textaudit.robustness.plots import plot_certified_curve, plot_study, plot_wordorder
from textaudit.robustness.smoothing import SMOOTHING, summarize_certify
from textaudit.stats import format_ci, format_p

__all__ = ["Section", "Table", "Figure", "Example", "build_sections", "headline_rows", "marked"]

#: vulnerable examples shown per attack file
MAX_EXAMPLES = 12


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]]


@dataclass
class Figure:
    title: str
    data_uri: str


@dataclass
class Example:
    """x0 → x̃ (the words the attack changed marked), and x̃ ⊕ p (the swapped word marked), with the
    model's predictions; a first-order attack has no x̃ ⊕ p."""

    id: str
    label: Any
    original: list[tuple[str, bool]]
    prediction: Any
    vulnerable: list[tuple[str, bool]]
    vulnerable_prediction: Any
    patched: list[tuple[str, bool]] | None
    patched_prediction: Any
    pair: list[str] | None
    #: the measuring LM's perplexity of the less natural of x̃ and x̃ ⊕ p over x0's (None: not measured)
    ppl_ratio: float | None = None


@dataclass
class Section:
    id: str
    title: str
    kind: str
    settings: list[tuple[str, Any]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    examples: list[Example] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


#: the most words the report's word diff compares (beyond: the differing middle is marked whole)
MAX_DIFF_WORDS = 2000


def marked(before: str, after: str) -> list[tuple[str, bool]]:
    """The words of ``after``, each with True where it differs from ``before`` (word by word when
    both have as many words, else by a word-level diff)."""
    a, b = before.split(), after.split()
    if len(a) == len(b):
        return [(w, w != v) for w, v in zip(b, a)]
    # the common head and tail in linear time; the diff (quadratic on long repetitive texts: 8,000 words
    # took 4 s, 200,000 never ended) only for what lies between, and only when that is short
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    mid_a, mid_b = a[head:len(a) - tail], b[head:len(b) - tail]
    out = [(w, False) for w in b[:head]]
    if len(mid_a) + len(mid_b) > MAX_DIFF_WORDS:
        out.extend((w, True) for w in mid_b)
    else:
        for op, _, _, j1, j2 in difflib.SequenceMatcher(a=mid_a, b=mid_b, autojunk=False).get_opcodes():
            out.extend((w, op != "equal") for w in mid_b[j1:j2])
    return out + [(w, False) for w in b[len(b) - tail:]]


_num = shown_number


def _figures(draw: Callable[[Path], Sequence[Path]], titles: Callable[[Path], str] = lambda p: p.stem) -> tuple[list[Figure], list[str]]:
    """Run ``draw(tmpdir)`` (a textaudit plotting function) and embed the PNGs it writes."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return [], ["figures need matplotlib: pip install 'textaudit[plot]'"]
    with tempfile.TemporaryDirectory() as tmp:
        paths = draw(Path(tmp))
        figs = [Figure(titles(p), "data:image/png;base64," + base64.b64encode(Path(p).read_bytes()).decode("ascii"))
                for p in paths]
    return figs, []


def _settings(item: Loaded, keys: Sequence[str]) -> list[tuple[str, Any]]:
    cfg = item.config
    return [("file", item.path.name)] + [(k, cfg[k]) for k in keys if cfg.get(k) is not None]


# -- attack ----------------------------------------------------------------------------------------
def _attack(item: Loaded, n: int) -> Section:
    cfg = item.config
    s = summarize(item.records, cfg.get("method"), cfg.get("k"), cfg.get("labels"))
    sec = Section(f"attack-{n}", f"Attack: {cfg.get('method')} on {cfg.get('model')}", "attack",
                  _settings(item, ("model", "model_scores", "method", "k", "beam", "kappa", "delta", "mlm", "data",
                                   "seed", "max_queries", "time_budget")))
    sec.tables.append(Table("Summary", ["metric", "value"], [
        ["every input", s["headline"]],
        ["found (share of every input)", _num(s["found_share"])],
        ["95% CI (Wilson), every input", format_ci(s["found_share_ci95"], 3)],
        ["examples", s["n"]], ["attacked", s["attacked"]], ["successes", s["success"]],
        ["skipped, by reason", "; ".join(f"{why} ({c})" for why, c in s["skip_reasons"].items()) or "none"],
        [f"success rate (of the {s['attacked']} attacked only)", _num(s["success_rate"])],
        ["95% CI (Wilson), of the attacked", format_ci(s["success_rate_ci95"], 3)],
        ["mean ℓ0 of successes", _num(s["mean_l0"])], ["already vulnerable (ℓ0 = 0)", s["already_vulnerable"]],
        ["skipped", s["skipped"]], ["errors", s["errors"]], ["seconds / example", _num(s["sec_per_example"])],
        ["queries / example", _num(s["queries_per_example"], 1)],
        ["median perplexity, original → vulnerable",
         f"{s['median_ppl_original']} → {s['median_ppl_perturbed']}" if s["median_ppl_original"] else "–"],
        ["median perplexity, vulnerable ⊕ p", s.get("median_ppl_patched") or "–"],
        ["naturalness constraint", cfg.get("naturalness") or "off (the paper's search)"]]))
    found = most_natural_first(item.records)
    if len(found) > MAX_EXAMPLES:  # a subset: say so, and where the rest is
        sec.notes.append(f"showing the {MAX_EXAMPLES} most natural of {len(found)} vulnerable examples (the lowest "
                         f"perplexity ratio to their input first); every one is in {item.path.name}")
    for r in found[:MAX_EXAMPLES]:
        patched = r.get("vulnerable_patched")
        sec.examples.append(Example(
            r["id"], r.get("label"), [(w, False) for w in r["text"].split()], r.get("prediction"),
            marked(r["text"], r["vulnerable"]), r.get("vulnerable_prediction"),
            marked(r["vulnerable"], patched) if patched else None, r.get("vulnerable_patched_prediction"),
            r.get("pair"), ppl_ratio(r)))
    if not sec.examples:
        sec.notes.append("no vulnerable example was found")
    return sec


def shown_path(path: Path, where: str | Path | None) -> str:
    """``path`` as the report names it: relative to the report's folder ``where`` when given (a
    report moved with its results still reads right), else as given."""
    if where is None:
        return str(path)
    try:
        return os.path.relpath(Path(path).resolve(), Path(where).resolve())
    except ValueError:  # another drive (Windows)
        return str(path)


def _compare(item: Loaded, n: int, where: str | Path | None = None) -> Section:
    c = item.summary
    cells = c.get("cells", [])
    methods = list(dict.fromkeys(x["method"] for x in cells))
    models = list(dict.fromkeys(x["model"] for x in cells))
    by = {(x["model"], x["method"]): x for x in cells}

    def cell(x: dict | None) -> str:  # the share of every input found (an older summary lacks it: "–")
        return "–" if not x or x.get("found_share") is None else f"{x['found_share']:.2f} {format_ci(x.get('found_share_ci95'), 2)}"

    several = ", " in str(c.get("data") or "")  # (a compare summary is of one data set; so is each matrix built here)
    sec = Section(f"compare-{n}", "Comparison matrix" + ("" if several or not c.get("data") else f" on {c['data']}"), "compare",
                  [("summary", shown_path(item.path, where)), ("data", c.get("data")), ("mlm", c.get("mlm")), ("seed", c.get("seed"))])
    sec.tables.append(Table("Found for [95% CI], of every input (skipped and failed count as not found), model × method",
                            ["model", *methods], [[m, *(cell(by.get((m, a))) for a in methods)] for m in models]))
    sec.tables.append(Table("Every cell", ["model", "method", "data", "k", "inputs", "found [95% CI]", "skipped",
                                           "attacked", "success rate (of the attacked)", "95% CI", "mean ℓ0",
                                           "s / example", "queries / example"],
                            [[x["model"], x["method"], x.get("data") or c.get("data"), _num(x["k"]), x.get("n", "–"),
                              cell(x), x.get("skipped", "–"), x["attacked"], _num(x["success_rate"]),
                              format_ci(x["success_rate_ci95"], 3), _num(x["mean_l0"]), _num(x["sec_per_example"]),
                              _num(x["queries_per_example"], 1)] for x in cells]))
    if c.get("paired"):
        sec.tables.append(Table("Paired comparisons (McNemar's exact test on the examples both attacked)",
                                ["a", "b", "examples", "rate a", "rate b", "only a", "only b", "p"],
                                [[p["a"], p["b"], p["n"], p["rate_a"], p["rate_b"], p["only_a"], p["only_b"], format_p(p["p"])]
                                 for p in c["paired"]]))
    _margins(sec, "success rate", [(p["b"], p["a"], p["non_inferiority"]) for p in c.get("paired") or []
                                   if isinstance(p.get("non_inferiority"), dict)])
    _margins(sec, "error rate (1 − accuracy)", [(t["b"], t["a"], t["non_inferiority"]) for t in c.get("accuracy") or []
                                                if isinstance(t.get("non_inferiority"), dict)])
    return sec


def _margins(sec: Section, rate: str, tests: list[tuple[str, str, dict]]) -> None:
    """The non-inferiority verdicts the CLI prints (``--margin``), as its table and sentences."""
    if tests:
        sec.tables.append(Table(margin_title(rate, tests), MARGIN_COLUMNS, margin_rows(tests)))
        sec.notes.extend(margin_verdicts(tests))


# -- bias ------------------------------------------------------------------------------------------
def _bias(item: Loaded, n: int) -> Section:
    cfg = item.config
    results = estimates_from_records(item.records, cfg["k"], cfg["enumerate_k"])
    sec = Section(f"bias-{n}", f"Counterfactual token bias B_(p,k) of {cfg.get('model')}", "bias",
                  _settings(item, ("model", "model_scores", "compare", "k", "enumerate_k", "sample", "kappa", "delta",
                                   "mlm", "data", "seed")))
    labels = cfg.get("labels") or []
    classes = labels if len(labels) > 2 else None  # C > 2: B is the L1 norm of the per-class shifts, shown too
    controls = {parse_pair(p): parse_pair(c) for p, c in (cfg.get("controls") or {}).items()}
    sec.tables.append(Table("B_(p,k) with 95% intervals" + (" (control pairs: B_c on the same sentences, and B_p − B_c)"
                                                           if controls else ""),
                            BIAS_COLUMNS + (["B per class"] if classes else []), bias_rows(results, classes, controls)))
    sec.figures, sec.notes = _figures(lambda d: plot_bias(results, d), _bias_title)
    sec.notes.extend(small_samples(results))  # as audit bias warns: an interval on few sources is rough
    if not results:
        sec.notes.append(NOTHING_SCORED)
    return sec


def _bias_title(p: Path) -> str:
    if p.stem.startswith("hist_"):
        return "F_soft histograms per k (" + p.stem[5:].replace("_", " → ") + ")"
    return {"bias_vs_k": "B_(p,k) against k, with 95% intervals", "pairs_bar": "B_(p,k) per pair"}.get(p.stem, p.stem)


# -- word order, certification, learnability, PerturbScore -----------------------------------------
def _wordorder(item: Loaded, n: int) -> Section:
    rows = item.records
    cfg = item.config
    sec = Section(f"wordorder-{n}", f"Word order: {cfg.get('model')}", "wordorder",
                  _settings(item, ("model", "data", "seed", "perturbation", "level", "rho")))
    sec.tables.append(Table("Accuracy on reordered text", ["perturbation", "level", "ρ", "n", "accuracy", "95% CI", "DND",
                                                           "IDC", "Levenshtein", "BLEU-4"],
                            [[r["perturbation"], r["level"], r["rho"], r["n"], r["accuracy"], format_ci(r.get("accuracy_ci95"), 3),
                              r["dnd"], r["idc"], _num(r.get("levenshtein")), _num(r.get("bleu4"))] for r in rows]))
    corr = cfg.get("correlations")
    if corr:
        sec.tables.append(Table("Spearman correlation of accuracy with each metric", ["metric", "ρ", "p"],
                                [[k.replace("accuracy_vs_", ""), v["rho"], format_p(v["p"])] for k, v in corr.items()
                                 if isinstance(v, dict)]))
        sec.figures, sec.notes = _figures(lambda d: [plot_wordorder(rows, corr, d, str(cfg.get("model")))],
                                          lambda p: "Accuracy against DND and IDC")
    return sec


def _certify_ibp(item: Loaded, n: int) -> Section:
    sec = Section(f"certify-{n}", f"IBP certification: {item.config.get('model')}", "certify",
                  _settings(item, ("model", "data")))
    sec.tables.append(Table("Clean and certified accuracy", ["model", "n", "accuracy", "95% CI", "certified accuracy",
                                                            "95% CI"],
                            [[r.get("model"), r["n"], r["accuracy"], format_ci(r.get("accuracy_ci95"), 3), r["certified_accuracy"],
                              format_ci(r.get("certified_accuracy_ci95"), 3)] for r in item.records]))
    return sec


def _certify_safer(item: Loaded, n: int) -> Section:
    """Randomized smoothing's certificates (SAFER's or RanMASK's): the smoothed accuracy, abstentions and certified
    accuracy at every radius, and the curve."""
    cfg = item.config
    ranmask = cfg.get("method") == "ranmask"
    s = summarize_certify(item.records, str(cfg.get("method")))
    label = f"{cfg.get('model')} ({SMOOTHING[cfg['method']]})"
    sec = Section(f"certify-{n}", f"Randomized smoothing ({SMOOTHING[cfg['method']]}): {cfg.get('model')}",
                  "certify", _settings(item, ("model", "data", "samples", "selection", "alpha",
                                              *(("mask_rate", "mask_token") if ranmask else ("hops",)), "seed")))
    sec.tables.append(Table(f"Certified accuracy by radius (smoothed accuracy {_num(s['accuracy'])} "
                            f"{format_ci(s.get('accuracy_ci95'), 3)}, {s['abstain']} of {s['n']} abstained)",
                            [f"radius (words {'replaced' if ranmask else 'substituted'})", "certified", "n",
                             "certified accuracy", "95% CI"],
                            [[r["radius"], r["certified"], r["n"], _num(r["certified_accuracy"]),
                              format_ci(r["certified_accuracy_ci95"], 3)] for r in s["curve"]]))
    sec.notes.append("radius R: the smoothed prediction provably stays when any R words are replaced by any others "
                     f"(RanMASK's Theorem 1 at the confidence 1 − α; ρ = {cfg.get('mask_rate')} of the words masked in "
                     "each draw)" if ranmask else
                     "radius R: the smoothed prediction provably stays for any substitution of at most R words by "
                     "their counter-fitted neighbours (SAFER's Theorem 1 at the confidence 1 − α)")
    so = s.get("second_order")
    if so:  # the Double Perturbation question, asked of the certificates
        sec.notes.append(f"second order: of {so['certified_inputs']} certified inputs (right, radius ≥ "
                         f"{cfg.get('view_radius', 0)}), "
                         f"{so['all_neighbors_certified']} have every sampled natural neighbour certified "
                         f"({_num(so['all_neighbors_certified_share'])} {format_ci(so['all_neighbors_certified_ci95'], 3)}); "
                         f"{so['with_patch_flip']} have a neighbour whose smoothed prediction flips under a synonym patch "
                         f"({_num(so['with_patch_flip_share'])} {format_ci(so['with_patch_flip_ci95'], 3)})")
        for r in [r for r in item.records if r.get("patch_flip")][:MAX_EXAMPLES]:
            nb = next(n for n in r["neighbors"] if "flip" in n)
            sec.tables.append(Table(f"{r['id']}: certified (radius {r['radius']}), yet a natural neighbour flips under "
                                    f"p = {nb['flip']['pair'][0]}→{nb['flip']['pair'][1]}",
                                    ["", "text", "smoothed prediction"],
                                    [["x0", r["text"], r["prediction"]], ["x̃", nb["text"], nb["prediction"]],
                                     ["x̃ ⊕ p", nb["flip"]["patched"], nb["flip"]["prediction"]]]))
    figures, notes = _figures(lambda d: [plot_certified_curve({label: s["curve"]}, d)],
                              lambda p: "Certified accuracy vs radius, 95% intervals")
    sec.figures = figures
    sec.notes.extend(notes)
    return sec


def _learnability(item: Loaded, n: int) -> Section:
    study = summarize_records(item.header, item.records)
    sec = Section(f"learnability-{n}", "Learnability of perturbations", "learnability",
                  _settings(item, ("train_size", "data")))
    res = study["results"]
    ps = sorted({p for r in res for p in r["learnability_at"]}, key=float)
    sec.tables.append(Table("Learnability, robustness and augmentation gain (mean over seeds)",
                            ["model", "perturbation", *(f"p={p}" for p in ps), "robustness", "post-aug Δ"],
                            [[r["model"], r["perturbation"], *(_num(r["learnability_at"].get(p)) for p in ps),
                              _num(r.get("robustness")), _num(r.get("post_aug_delta"))] for r in res]))
    sec.notes.extend(study.get("warnings", []))
    sec.figures, notes = _figures(lambda d: plot_study(study, d))
    sec.notes.extend(notes)
    return sec


def _perturbscore(item: Loaded, n: int) -> Section:
    s = summarize_records(item.header, item.records)
    sec = Section(f"perturbscore-{n}", f"PerturbScore tuples: {s.get('perturbation')} on {s.get('model')}",
                  "perturbscore build", _settings(item, ("model", "perturbation", "seed", "space", "steps", "max_eps")))
    sec.tables.append(Table("Tuples", ["metric", "value"], [[k, _num(v)] for k, v in s.items()
                                                            if not isinstance(v, (list, dict))]))
    return sec


def _summary_section(item: Loaded, n: int) -> Section:
    """The section of a kind with none of its own (a new audit's): its summary, recomputed from its records by the
    kind's ``summarize``, as a table of its numbers, under the kind's title."""
    kind = BY_ID[item.kind]
    s = summarize_records(item.header, item.records) if kind.summarize is not None else {}
    sec = Section(f"{item.kind.replace(' ', '-')}-{n}", f"{kind.title[:1].upper()}{kind.title[1:]}: "
                  f"{item.config.get('model') or item.path.name}", item.kind,
                  _settings(item, tuple(k for k, v in item.config.items() if not isinstance(v, (list, dict)))))
    sec.tables.append(Table("Summary", ["metric", "value"], [[k, _num(v)] for k, v in s.items()
                                                             if not isinstance(v, (list, dict))]))
    return sec


def _harden(item: Loaded, n: int) -> Section:
    h = item.summary
    held = h.get("held_out", {})
    cfg = item.config
    sec = Section(f"harden-{n}", f"Hardening: {h.get('from')} → {h.get('method')} (before and after)", "harden",
                  [("summary", item.path.name), ("hardened model", shown_path(Path(str(h.get("model"))), item.path.parent)),
                   ("method", h.get("method")),
                   ("mining attack", f"{cfg.get('attack')} k={cfg.get('k')}" if h.get("method") in ("augment", "adversarial")
                    else None),
                   ("trained for", ", ".join(f"{k} {v}" for k, v in h["threat"].items()) if h.get("threat") else None),
                   ("training data", h.get("data")), ("held-out data", h.get("eval_data")), ("seed", cfg.get("seed"))])
    sec.settings = [(k, v) for k, v in sec.settings if v is not None]
    sec.tables.append(Table(f"Before and after on the same {held.get('eval_examples')} held-out examples "
                            "(Wilson 95% intervals; McNemar's exact test on the paired examples)",
                            ba.SUMMARY_COLUMNS, ba.summary_rows(h)))
    if h.get("bias"):
        sec.tables.append(Table("B_(p,k) before and after (the same sentences)", ba.BIAS_COLUMNS, ba.bias_rows(h)))
    rp = h.get("replay_found")
    if rp:  # the training findings themselves, replayed: what training fixed, beside the held-out audit above
        sec.tables.append(Table(
            f"The {rp['findings']} findings it trained on, replayed (on the training examples: compare with the "
            f"held-out audit above): still {rp['baseline_still']} before → {rp['still']} after; {rp['fixed_by_model']} "
            f"fixed, {rp['regressed']} regressed; McNemar p {format_p(rp['mcnemar_p'])}",
            ["method", "pair", "still after", "fixed after", "not applicable"],
            [[g["method"], "/".join(g["pair"]) if g.get("pair") else "–", g["still"], g["fixed"], g["not_applicable"]]
             for g in rp["by_method"]]))
    sec.tables.append(Table("What it cost (seconds)", ba.COST_COLUMNS, ba.cost_rows(h)))
    sec.notes.append(f"held out: harden attacked and trained only {h.get('data')} ({held.get('train_examples')} examples; "
                     f"{held.get('train_overlap_removed', 0)} that also occur in {h.get('eval_data')} left out)")
    cert = h.get("certificate")

    def draw(d):
        paths = [plot_before_after(h, d)]
        if cert:  # a hardening for a certificate: one curve before, one after, under the threat model it trained for
            name = SMOOTHING.get(cert["method"], cert["method"])
            paths.append(plot_certified_curve({f"{h.get('from')} (before)": cert["before"]["curve"],
                                               f"hardened (after, {h.get('method')})": cert["after"]["curve"]}, d,
                                              title=f"{name} certified accuracy, before and after"))
        return paths

    figures, notes = _figures(draw, lambda p: "Before and after, with 95% intervals" if p.name == "before_after.png"
                              else "Certified accuracy before and after (Wilson 95% bands)")
    sec.figures = figures
    sec.notes.extend(notes)
    sec.notes.extend(w for w in h.get("warnings", []) if isinstance(w, str))  # nothing found, too few sources
    return sec


def _replay_summary(item: Loaded) -> dict:
    cfg = item.config
    return Replay(str(cfg.get("model")), item.records, cfg.get("baseline"), cfg).summary()


def _replay(item: Loaded, n: int) -> Section:
    """Findings replayed on a model: still / fixed / not applicable (and regressed) by method and pair;
    the regressed examples first, then those still holding."""
    s = _replay_summary(item)
    cfg = item.config
    sec = Section(f"replay-{n}", f"Replay: {s['findings']} findings on {cfg.get('model')}", "replay",
                  [(k, v) for k, v in (("model", cfg.get("model")), ("baseline", cfg.get("baseline")),
                                       ("findings from", ", ".join(Path(str(f)).name for f in cfg.get("findings", []))))
                   if v])
    base = cfg.get("baseline") is not None
    rows = [[g["method"], "/".join(g["pair"]) if g.get("pair") else "–", g["still"], g["fixed"], g["not_applicable"],
             g["regressed"] if base else "–"] for g in s["by_method"]]
    sec.tables.append(Table(f"Still holding: {s['still']} of {s['still'] + s['fixed']} applicable "
                            f"({_num(s['still_share'])} {format_ci(s.get('still_share_ci95'), 3)})"
                            + (f"; vs {cfg.get('baseline')}: {s['fixed_by_model']} fixed, {s['regressed']} regressed, "
                               f"McNemar p {format_p(s['mcnemar_p'])}" if base else ""),
                            ["method", "pair", "still", "fixed", "not applicable", "regressed"], rows))
    if isinstance(s.get("non_inferiority"), dict):  # --margin: the verdict the CLI printed
        _margins(sec, "still-rate", [(str(cfg.get("model")), str(cfg.get("baseline")), s["non_inferiority"])])
    bias = [r for r in item.records if r.get("order") == "bias"]
    if bias:  # a bias run's (p, k′): B as found, on the model (and the baseline), on the run's own sentences

        sec.tables.append(Table("B_(p,k) on the bias run's own sentences (a finding: the run's 95% interval excluded 0)",
                                REPLAY_COLUMNS, [replay_row(r, base) for r in bias]))
    order = sorted((r for r in item.records if r["status"] == "still" and r.get("order") != "bias"),
                   key=lambda r: r.get("baseline_status") != "fixed")  # the regressions first
    if base and s["regressed"]:
        sec.notes.append(f"{s['regressed']} regressed (fixed on {cfg.get('baseline')}, holding again): shown first")
    if len(order) > MAX_EXAMPLES:
        sec.notes.append(f"showing {MAX_EXAMPLES} of the {len(order)} findings that still hold (regressions first); "
                         f"every one is in {item.path.name}")
    for r in order[:MAX_EXAMPLES]:
        second = r.get("vulnerable_patched") is not None
        pred = [max(range(len(p)), key=p.__getitem__) for p in r["probs"]]
        rid = r["id"] + (" (regressed)" if r.get("baseline_status") == "fixed" else "")
        sec.examples.append(Example(rid, r.get("label"), [(w, False) for w in r["text"].split()],
                                    None if second else pred[0], marked(r["text"], r["vulnerable"]),
                                    pred[0] if second else pred[1],
                                    marked(r["vulnerable"], r["vulnerable_patched"]) if second else None,
                                    pred[1] if second else None, r.get("pair")))
    if not sec.examples and len(bias) < len(item.records):
        sec.notes.append("no vulnerable or adversarial example still holds on this model")
    return sec


def _evaluate(item: Loaded, n: int) -> Section:
    """Calibration under perturbation: ECE, Brier score and confidence on the originals and the perturbed
    texts, their paired differences, and the reliability diagram."""
    cfg = item.config
    s = summarize_records(item.header, item.records)
    sec = Section(f"evaluate-{n}", f"Calibration of {cfg.get('model')} under perturbation", "evaluate",
                  _settings(item, ("model", "data", "perturbed_by", "bins", "seed")))
    sec.tables.append(Table(f"{s['n']} originals and {cfg.get('perturbed_by')}: ECE ({s['bins']} bins), Brier score, "
                            "confidence and accuracy, with 95% intervals (difference: perturbed − original, paired)",
                            CALIBRATION_COLUMNS, calibration_rows(s)))
    sec.figures, sec.notes = _figures(lambda d: [plot_reliability(s, Path(d) / "reliability.png",
                                                                  f"{cfg.get('model')}: originals vs perturbed")],
                                      lambda p: "Reliability diagram: accuracy against confidence per bin (area: the "
                                                "bin's share of the examples)")
    return sec


def _metrics(item: Loaded, n: int) -> Section:
    """The metrics people report: precision, recall and F1 per class (per label) with their intervals, the micro and
    macro averages, the confusion matrix as a table and a figure (multi-label: subset accuracy, Hamming loss and
    each label's 2×2)."""
    cfg = item.config
    s = summarize_records(item.header, item.records)
    sec = Section(f"metrics-{n}", f"Precision, recall and F1 of {cfg.get('model')}", "metrics",
                  _settings(item, ("model", "data", "threshold", "seed")))

    def cell(r: dict, k: str) -> str:
        return "–" if r.get(k) is None else f"{r[k]:.4f} {format_ci(r.get(f'{k}_ci95') or None, 4)}"

    multi = bool(s.get("multilabel"))
    rows = [[r["label" if multi else "class"], r["support"], r["predicted"], cell(r, "precision"), cell(r, "recall"),
             cell(r, "f1")] for r in s["per_label" if multi else "per_class"]]
    rows += [[avg, s["n"], "–", cell(s[avg], "precision"), cell(s[avg], "recall"), cell(s[avg], "f1")]
             for avg in ("micro", "macro")]
    what = "label (on: probability above the threshold)" if multi else "class"
    sec.tables.append(Table(f"{s['n']} examples: precision, recall and F1 per {what}, 95% intervals (Wilson for "
                            "proportions, a seeded paired bootstrap for F1 and the macro averages)",
                            [what.split(" ")[0], "in data", "predicted", "precision", "recall", "F1"], rows))
    if multi:
        sec.notes.append(f"subset accuracy (every label right): {cell(s, 'subset_accuracy')}; Hamming loss (share of "
                         f"wrong decisions): {cell(s, 'hamming_loss')}")
        truth = np.array([r["truth"] for r in item.records], dtype=int).reshape(len(item.records), -1)
        decided = np.array([r["decided"] for r in item.records], dtype=int).reshape(len(item.records), -1)
        panels = label_confusions(truth, decided, s["labels"])
    else:
        sec.notes.append(f"accuracy {cell(s, 'accuracy')}")
        classes, matrix = s["confusion"]["classes"], s["confusion"]["matrix"]
        sec.tables.append(Table("confusion matrix (rows: the data's class; columns: the model's)",
                                ["data \\ model", *classes], [[c, *row] for c, row in zip(classes, matrix)]))
        panels = [(str(cfg.get("model")), classes, matrix)]
    sec.figures, more = _figures(lambda d: [plot_confusion(panels, Path(d) / "confusion.png",
                                                           f"{cfg.get('model')} on {cfg.get('data')}")],
                                 lambda p: "Confusion matrix: counts, shaded by the share of the data's class (its "
                                           "recall on the diagonal)")
    sec.notes += more
    return sec


BUILDERS: dict[str, Callable[[Loaded, int], Section]] = {
    "replay": _replay, "harden": _harden, "compare": _compare, "attack": _attack, "bias": _bias, "wordorder": _wordorder,
    "certify": _certify_safer, "certify-ibp": _certify_ibp, "evaluate": _evaluate, "metrics": _metrics,
    "learnability": _learnability, "perturbscore build": _perturbscore}


def build_sections(items: Sequence[Loaded], where: str | Path | None = None) -> list[Section]:
    """One section per input, grouped by kind in :func:`~textaudit.report.load.kind_order`; attack
    files given without an ``audit compare`` summary get their matrix too (when there are two or more).
    ``where``: the report's folder (a compare summary is named relative to it)."""
    order = kind_order()
    ordered = sorted(enumerate(items), key=lambda t: (order.index(t[1].kind), t[0]))
    sections = [_compare(item, i, where) if item.kind == "compare" else BUILDERS.get(item.kind, _summary_section)(item, i)
                for i, item in ordered]
    attacks = [i for i in items if i.kind == "attack"]
    by_data: dict[str, list[Loaded]] = {}
    for i in attacks:  # one matrix per data set: a row never pools two data sets' examples
        by_data.setdefault(str(i.config.get("data")), []).append(i)
    if not any(i.kind == "compare" for i in items):
        at = 0
        for data, group in sorted(by_data.items()):
            if len(group) < 2:
                continue
            cells = cells_from_files((i.header, i.records, i.path) for i in group)
            mlm = sorted({str(i.config.get("mlm")) for i in group if i.config.get("mlm")})
            seeds = sorted({str(i.config.get("seed")) for i in group})
            summary = {"data": data, "mlm": ", ".join(mlm) or None, "seed": ", ".join(seeds), **compare_cells(cells)}
            sections.insert(at, _compare(Loaded("compare", Path(f"{len(group)} attack files"), {}, summary=summary),
                                         len(items) + at))
            at += 1
    certified = [i for i in items if i.kind in ("certify", "certify-ibp")]
    if any(i.kind == "certify" for i in certified) and len(certified) >= 2:
        at = next(n for n, sec in enumerate(sections) if sec.kind == "certify")
        sections.insert(at, _certify_side_by_side(certified))
    return sections


def _certify_side_by_side(items: Sequence[Loaded]) -> Section:
    """Every certification of the report on one curve and in one table: randomized smoothing's certified accuracy
    by radius (SAFER, RanMASK) beside IBP's (every word at once, a level)."""
    curves: dict[str, list[dict]] = {}
    ibp: dict[str, dict] = {}
    rows = []
    for item in items:
        cfg = item.config
        method = cfg.get("method")
        if item.kind == "certify":
            s = summarize_certify(item.records, method)
            name = f"{cfg.get('model')} ({SMOOTHING[method]})"
            curves[name] = s["curve"]
            at = {r["radius"]: r for r in s["curve"]}
            cells = [(f"{_num(at[R]['certified_accuracy'])} {format_ci(at[R]['certified_accuracy_ci95'], 3)}"
                      if R in at else "0") for R in (1, 2)]
            rows.append([name, s["n"], f"{_num(s['accuracy'])} {format_ci(s.get('accuracy_ci95'), 3)}", *cells, "–"])
        else:
            for r in item.records:
                name = f"{r.get('model')} (IBP)"
                ibp[str(r.get("model"))] = r
                rows.append([name, r["n"], f"{r['accuracy']} {format_ci(r.get('accuracy_ci95'), 3)}", "–", "–",
                             f"{r['certified_accuracy']} {format_ci(r.get('certified_accuracy_ci95'), 3)}"])
    sec = Section("certify-all", "Certified accuracy side by side", "certify")
    sec.tables.append(Table("Smoothing's certified accuracy by radius beside IBP's (every word at once)",
                            ["model (method)", "n", "smoothed / clean accuracy", "radius 1", "radius 2",
                             "every word (IBP)"], rows))
    sec.notes.append("SAFER certifies substitutions by counter-fitted neighbours, RanMASK any replacement of R words, "
                     "IBP every word substituted at once by its neighbours; the examples must be the same for the "
                     "numbers to compare (see each section's settings)")
    figures, notes = _figures(lambda d: [plot_certified_curve(curves, d, ibp=ibp or None)],
                              lambda p: "Certified accuracy vs radius, every certification (IBP: dashed levels)")
    sec.figures, sec.notes = figures, sec.notes + notes
    return sec


def headline_rows(items: Sequence[Loaded]) -> list[list[Any]]:
    """The summary table: one row per audit — what was audited, with what, and its headline number — each kind's
    own rows (:attr:`textaudit.kinds.Kind.headline`)."""
    return [row for item in items for row in BY_ID[item.kind].headline(item.config, item.records, item.summary)]
