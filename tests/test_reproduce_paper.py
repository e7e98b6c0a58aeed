"""``benchmarks/reproduce_paper.py`` at its smallest setting: real attacks and a real bias run on tiny
models (files the script loads as ``file.py:obj``), a tiny masked LM and an eight-sentence data file;
the tables agree with the results files, and a second run resumes without recomputing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_report import WEAK  # positive only while "film" is there

from textaudit.attacks.compare import cell_path
from textaudit.results import read_jsonl
from textaudit.stats import wilson

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "reproduce_paper.py"

ROBUST = '''
def clf(texts):  # always negative, whatever the words
    return [[0.7, 0.3] for t in texts]
'''
SHE = '''
import math
def clf(texts):  # "she" adds one logit to P(positive), whatever else the sentence says
    out = []
    for t in texts:
        z = 1.0 * ("she" in t.split()) - 0.5
        p = 1 / (1 + math.exp(-z))
        out.append([1 - p, p])
    return out
'''
ROWS = [(1, "a deep and meaningful film ."), (1, "the film is long but good ."), (1, "one more film that is deep ."),
        (1, "a warm and funny film here ."), (1, "this film works ."),
        (0, "he said the story was slow ."), (0, "the plot is dull but he makes it work ."),
        (0, "she gives a flat performance here .")]


def _run(d: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TEXTAUDIT_CACHE": str(d / "cache")}
    args = [sys.executable, str(SCRIPT), "--out", str(d / "paper"), "--data", str(d / "data.tsv"), "--mlm", str(d / "mlm"),
            "--models", f"{d}/weak.py:clf,{d}/robust.py:clf", "--methods", "genetic,so-beam", "--attack-k", "1",
            "--few-methods", "genetic", "--few-limit", "5", "--bias-model", f"{d}/she.py:clf", "--bias-compare", f"{d}/robust.py:clf",
            "--pairs", "he,she", "--k", "1", "--epsilon", "10", "--no-ppl", "--no-progress",
            *(() if "--recipe" in extra else ("--recipe", "relaxed")), *extra]
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=d, timeout=1800)


@pytest.fixture(scope="module")
def paper(tiny_mlm, tmp_path_factory):
    d = tmp_path_factory.mktemp("paper")
    tiny_mlm.model.save_pretrained(d / "mlm")
    tiny_mlm.tokenizer.save_pretrained(d / "mlm")
    for name, body in (("weak.py", WEAK), ("robust.py", ROBUST), ("she.py", SHE)):
        (d / name).write_text(body)
    (d / "data.tsv").write_text("label\ttext\n" + "".join(f"{y}\t{t}\n" for y, t in ROWS))
    r = _run(d)
    assert r.returncode == 0, r.stderr[-3000:]
    return d, r


def test_tables_agree_with_the_results_files(paper):
    d, _ = paper
    out = d / "paper"
    weak = f"{d}/weak.py:clf"
    beam = read_jsonl(cell_path(out / "runs" / "attacks", weak, "so-beam"))
    genetic = read_jsonl(cell_path(out / "runs" / "few", weak, "genetic"))
    assert len(beam) == len(ROWS) and len(genetic) == 5  # Genetic has its own, smaller example set
    ok = sum(r["status"] == "success" for r in beam)
    ran = sum(r["status"] in ("success", "failed") for r in beam)
    assert ran == len(ROWS)  # the weak model classifies all eight right ("film" ⇔ positive here): none skipped
    assert ok >= 1
    lo, hi = wilson(ok, ran)
    table2 = (out / "table2.md").read_text()
    row = next(line for line in table2.splitlines() if line.startswith(f"| {weak} "))
    assert f"**{100 * ok / ran:.1f}** [{100 * lo:.1f}, {100 * hi:.1f}] {ok}/{ran} (–)" in row
    robust_row = next(line for line in table2.splitlines() if "robust.py" in line)
    assert "**0.0**" in robust_row  # a constant model cannot be flipped
    results = json.loads((out / "results.json").read_text())
    acc = results["accuracy"][weak]
    assert acc["accuracy"] == 1.0 and acc["n"] == len(ROWS)  # "film" ⇔ positive in this data
    assert "mean ℓ0" in (out / "table3.md").read_text()


def test_the_readme_gives_each_cells_compute_and_its_examples(paper):
    """paper/README.md: every Table 2 cell's own compute (its records' seconds, whichever machine ran them) and the
    examples it is over — Genetic its first 5 here, SO-Beam all 8."""
    d, _ = paper
    out = d / "paper"
    readme = (out / "README.md").read_text()
    for method, runs, examples in (("so-beam", "attacks", f"all {len(ROWS)}"), ("genetic", "few", "the first 5")):
        recs = read_jsonl(cell_path(out / "runs" / runs, f"{d}/weak.py:clf", method))
        sec = sum(r["seconds"] + (r.get("ppl_seconds") or 0) for r in recs)
        assert f"| {d}/weak.py:clf | {method} | {examples} | {sec:,.0f} | fp32 |" in readme
    assert "Other stages, seconds over the invocations that computed them: accuracy " in readme


def test_bias_table_and_figures(paper):
    d, _ = paper
    out = d / "paper"
    results = json.loads((out / "results.json").read_text())
    table5 = (out / "table5.md").read_text()
    # X_p of he/she: two sentences with "he", one with "she" (scored reversed); ε = 10 keeps them all
    assert "| pair | size of X_p | size of X_filter, she.py:clf | size of X_filter, robust.py:clf |" in table5
    assert next(line for line in table5.splitlines() if line.startswith("| he/she ")).startswith("| he/she | 3 | 3 | 3 |")
    base = results["bias"]["pairs"][0]["by_k"]
    comp = results["bias"]["compare"]["pairs"][0]["by_k"]
    z = 1 / (1 + np.exp(-0.5)) - 1 / (1 + np.exp(0.5))  # "she" adds one logit around −0.5: F = σ(0.5) − σ(−0.5)
    assert base["0"]["B"] == pytest.approx(z, abs=1e-5) and base["0"]["ci95"][0] > 0
    assert comp["0"]["B"] == 0 and comp["1"]["B"] == 0  # the constant model has no bias at any k
    for f in results["figures"]:
        assert (out / f).read_bytes()[:4] == b"\x89PNG"
    assert any("hist_he_she" in f for f in results["figures"])


def test_a_second_run_resumes_and_bad_input_is_one_line(paper):
    d, _ = paper
    out = d / "paper"
    files = sorted((out / "runs").rglob("*.jsonl"))
    before = {f: f.read_text() for f in files}
    table2 = (out / "table2.md").read_text()
    stages = json.loads((out / "results.json").read_text())["stage_seconds"]
    assert set(stages) == {"accuracy", "bias"} and stages["bias"] > 0  # the first run computed both
    r = _run(d)
    assert r.returncode == 0, r.stderr[-3000:]
    assert {f: f.read_text() for f in files} == before  # nothing recomputed, nothing appended
    assert (out / "table2.md").read_text() == table2
    assert json.loads((out / "results.json").read_text())["stage_seconds"] == stages  # a resume that finds them done adds nothing
    bad = _run(d, "--skip", "attacks,accuracy", "--pairs", "he,he")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "Traceback" not in bad.stderr


def test_render_shows_a_partial_cell_with_its_bounds_and_attacks_nothing(paper):
    """A cell that finished only some of its examples (a GPU run stopped at its deadline): ``--render``
    reads it as it is, gives the rate over what finished and the bounds over all of the examples."""
    import shutil

    d, _ = paper
    part = d / "partial"
    shutil.copytree(d / "paper" / "runs", part / "runs")
    cell = cell_path(part / "runs" / "attacks", f"{d}/weak.py:clf", "so-beam")
    lines = cell.read_text().splitlines(keepends=True)
    cell.write_text("".join(lines[:-3]))  # the header and the first five records
    kept = [r for r in read_jsonl(cell)]
    before = cell.read_text()
    r = _run(d, "--render", "--skip", "accuracy,bias", "--out", str(part))
    assert r.returncode == 0, r.stderr[-3000:]
    assert cell.read_text() == before  # nothing attacked, nothing appended
    ok = sum(x["status"] == "success" for x in kept)
    ran = sum(x["status"] in ("success", "failed") for x in kept)
    row = next(line for line in (part / "table2.md").read_text().splitlines() if line.startswith(f"| {d}/weak.py:clf"))
    lo, hi = ok / (ran + 3), (ok + 3) / (ran + 3)
    assert f"{ok}/{ran} (–); partial: {len(kept)} of {len(ROWS)} examples finished, so over all of them between " \
           f"{100 * lo:.1f} and {100 * hi:.1f}" in row


PAPER_TEXT = REPO.parent / "shared" / "papers" / "double-perturbation-naacl2021.txt"


@pytest.mark.skipif(not PAPER_TEXT.is_file(), reason="the paper's text is not beside the repository")
def test_the_paper_numbers_are_the_papers():
    """Every Table 2 and Table 3 cell of ``double_perturbation_paper.toml`` is read back from the
    paper's own text (its tables come out column by column: five base models, then four robust)."""
    import re

    try:
        import tomllib
    except ImportError:  # Python 3.10: the backport
        import tomli as tomllib

    numbers = tomllib.loads((REPO / "benchmarks" / "data" / "double_perturbation_paper.toml").read_text())
    text = PAPER_TEXT.read_text()
    table = text[text.index("Attack Success Rate ( % ) Genetic BAE"):text.index("Table 2 : The average rates")]
    runs = [[float(x) for x in line.split()] for line in table.splitlines() if re.fullmatch(r"[\d. ]+", line.strip())]
    base = ["bow", "cnn", "lstm", "transformer", "minilm"]
    robust = ["bow-ibp", "cnn-ibp", "lstm-ibp"]  # the paper's fourth robust row (Transformer) has no model here
    t2 = {m: r for m, r in numbers["table2"].items() if m != "range"}
    assert set(t2) == set(base + robust)
    # success rates: (base, robust) pairs of runs for Genetic, BAE, SO-Enum, SO-Beam, in that order
    for i, method in enumerate(("genetic", "bae", "so-enum", "so-beam")):
        b, r = runs[2 * i], runs[2 * i + 1]
        assert [t2[m][method] for m in base] == b
        assert [t2[m][method] for m in robust] == r[:3]
    # Table 3: ℓ0 SO-Enum, PPL pert. SO-Enum, ℓ0 SO-Beam, PPL orig. SO-Enum, PPL pert. SO-Beam, PPL orig. SO-Beam
    t3 = numbers["table3"]
    order = [("so-enum", "l0"), ("so-enum", "ppl_perturbed"), ("so-beam", "l0"), ("so-enum", "ppl_original"),
             ("so-beam", "ppl_perturbed"), ("so-beam", "ppl_original")]
    for j, (method, key) in enumerate(order):
        b, r = runs[8 + 2 * j], runs[8 + 2 * j + 1]
        assert [t3[m][method][key] for m in base] == b
        assert [t3[m][method][key] for m in robust] == r[:3]


def test_packed_cells_restore_a_run_on_a_fresh_clone(paper):
    """--pack keeps every results file gzip-compressed in <out>/cells (committed as a long run grows); a run
    without the ignored runs/ folder (a fresh clone) restores them and resumes: nothing is recomputed."""
    import shutil

    d, _ = paper
    out = d / "clone"
    shutil.copytree(d / "paper" / "runs", out / "runs")
    r = _run(d, "--render", "--pack", "--skip", "accuracy,bias", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    files = {f.relative_to(out / "runs"): f.read_bytes() for f in (out / "runs").rglob("*.jsonl")}
    assert files and sorted(p.relative_to(out / "cells") for p in (out / "cells").rglob("*.jsonl.gz")) == sorted(
        p.with_suffix(".jsonl.gz") for p in files)
    table2 = (out / "table2.md").read_text()
    shutil.rmtree(out / "runs")
    r = _run(d, "--skip", "accuracy,bias", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"restored {len(files)} results files" in r.stderr
    assert {f.relative_to(out / "runs"): f.read_bytes() for f in (out / "runs").rglob("*.jsonl")} == files
    assert (out / "table2.md").read_text() == table2


def test_fill_ppl_adds_table_3s_perplexities_to_cells_run_without_them(paper):
    """Cells run with --no-ppl (a GPU the causal LM did not travel to): --fill-ppl adds SmolLM2's
    perplexities of each success's original and vulnerable sentence — those a run with them computes —
    marks the header, leaves every other field as it was, and a second --fill-ppl has nothing to do."""
    import shutil

    from textaudit.lm import LazyCausalLM

    d, _ = paper
    out = d / "filled"
    shutil.copytree(d / "paper" / "runs", out / "runs")
    before = {f: read_jsonl(f) for f in sorted((out / "runs").rglob("*.jsonl")) if "so-beam" in f.name or "genetic" in f.name}
    cut = next(iter(before))  # a cell stopped at a deadline mid-write: its last line cut off
    with cut.open("a", encoding="utf-8") as fh:
        fh.write('{"id": "cut", "text": "a line the stop cut')
    r = _run(d, "--render", "--fill-ppl", "--skip", "accuracy,bias", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    lm = LazyCausalLM()
    filled = 0
    for f, old in before.items():
        new = read_jsonl(f)
        assert len(new) == len(old)
        for a, b in zip(old, new):
            assert {k: v for k, v in b.items() if not k.startswith("ppl_")} == {k: v for k, v in a.items() if not k.startswith("ppl_")}
            if b["status"] == "success":
                po, pp = lm.perplexity([b["text"], b["vulnerable"]])
                assert (b["ppl_original"], b["ppl_perturbed"]) == (round(po, 3), round(pp, 3))
                filled += 1
            else:
                assert "ppl_original" not in b
        assert json.loads(f.read_text().splitlines()[0])["header"]["config"]["ppl"] is True
    assert filled and r.stderr.count("perplexities added to") == len(before)
    again = _run(d, "--render", "--fill-ppl", "--skip", "accuracy,bias", "--out", str(out))
    assert again.returncode == 0 and "perplexities added" not in again.stderr


def test_a_random_subset_cell_stands_in_for_an_unfinished_one(paper):
    """Where a whole-set cell cannot run (SO-Enum on minilm on a CPU), ``--random --limit N`` attacks N examples drawn
    uniformly at random with --seed into runs/random-N/: each record is the whole run's for that example (the
    subset estimates the whole set's rate), and the table shows it, saying so, in place of the unfinished cell."""
    import shutil

    from textaudit.data import load_dataset

    d, _ = paper
    out = d / "random"
    shutil.copytree(d / "paper" / "runs", out / "runs")
    weak = f"{d}/weak.py:clf"
    cell = cell_path(out / "runs" / "attacks", weak, "so-beam")
    whole = {r["id"]: r for r in read_jsonl(cell)}
    cell.write_text("".join(cell.read_text().splitlines(keepends=True)[:4]))  # the header and three records
    r = _run(d, "--random", "--limit", "4", "--methods", "so-beam", "--skip", "accuracy,bias", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    drawn = load_dataset(str(d / "data.tsv"), sample=4, seed=0)["id"]
    sub = read_jsonl(cell_path(out / "runs" / "random-4", weak, "so-beam"))
    assert sorted(x["id"] for x in sub) == sorted(drawn) and sorted(drawn) != sorted(whole)[:4]
    header = json.loads(cell_path(out / "runs" / "random-4", weak, "so-beam").read_text().splitlines()[0])["header"]
    assert header["config"]["data_sample"] == 4  # as audit attack --sample records it: a resume with another N is refused
    from textaudit.attacks.compare import run_compare
    from textaudit.errors import TextAuditError

    with pytest.raises(TextAuditError, match=r"other settings \(data_sample: 4 → 3\)"):
        run_compare([weak], ["so-beam"], out / "runs" / "random-4", data=str(d / "data.tsv"), sample=3, mlm=str(d / "mlm"),
                    naturalness=False)
    timing = ("seconds", "ppl_seconds")
    for x in sub:  # the same search on the same example: the whole run's record
        assert {k: v for k, v in x.items() if k not in timing} == {k: v for k, v in whole[x["id"]].items() if k not in timing}
    ok = sum(x["status"] == "success" for x in sub)
    ran = sum(x["status"] in ("success", "failed") for x in sub)
    lo, hi = wilson(ok, ran)
    table2 = (out / "table2.md").read_text()
    row = next(line for line in table2.splitlines() if line.startswith(f"| {weak} "))
    assert f"**{100 * ok / ran:.1f}** [{100 * lo:.1f}, {100 * hi:.1f}] {ok}/{ran} (–); a uniformly random 4 of the 8 " \
           f"(seed 0)" in row and "partial" not in row
    robust = next(line for line in table2.splitlines() if "robust.py" in line)
    assert "random" not in robust and f"0/{len(ROWS)}" in robust  # its whole-set cell stays
    rendered = _run(d, "--render", "--methods", "so-beam", "--skip", "accuracy,bias", "--out", str(out))
    assert rendered.returncode == 0 and (out / "table2.md").read_text() == table2  # the render finds it by itself
    subset = cell_path(out / "runs" / "random-4", weak, "so-beam")
    subset.write_text("".join(subset.read_text().splitlines(keepends=True)[:4]))  # stopped after 3 of its 4
    cell.unlink()  # and no cell over the whole set: the partial subset is shown, with its bounds over its 4
    rendered = _run(d, "--render", "--methods", "so-beam", "--skip", "accuracy,bias", "--out", str(out))
    assert rendered.returncode == 0, rendered.stderr[-3000:]
    row = next(line for line in (out / "table2.md").read_text().splitlines() if line.startswith(f"| {weak} "))
    assert "; partial: 3 of 4 examples finished, so over all of them between " in row
    assert row.endswith("; a uniformly random 4 of the 8 (seed 0) | so-beam – |")
    bad = _run(d, "--random", "--methods", "so-beam", "--skip", "accuracy,bias", "--out", str(out))
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1] == \
        "error: --random draws --limit (and --few-limit) examples at random: give the N"


def _fresh_clone(src: Path, dest: Path) -> None:
    """What a clone holds of a paper/ folder: the packed cells, results.json and what was rendered — no runs/."""
    import shutil

    sys.path.insert(0, str(REPO / "benchmarks"))
    from reproduce_paper import pack_cells

    dest.mkdir()
    pack_cells(src / "runs", dest / "cells")
    for f in src.iterdir():
        if f.is_file():
            shutil.copy(f, dest / f.name)


def test_a_fresh_clone_renders_every_table_and_figure_from_committed_files_loading_no_model(paper):
    """``--render`` on a clone (packed cells and results.json, no runs/, an empty cache) writes the same Tables 2, 3
    and 5 and the figures — with the models' files gone, so none can be loaded (nor trained); the README differs only
    in its command/date and seconds lines."""
    d, _ = paper
    fresh = d / "fresh"
    _fresh_clone(d / "paper", fresh)
    (fresh / "figures").mkdir(exist_ok=False)  # (figures are drawn again from results.json's histograms)
    hidden = [d / n for n in ("weak.py", "robust.py", "she.py")]
    for f in hidden:
        f.rename(f.with_suffix(".hidden"))
    try:
        env = {**os.environ, "TEXTAUDIT_CACHE": str(d / "empty-cache")}
        r = subprocess.run([sys.executable, str(SCRIPT), "--render", "--out", str(fresh), "--data", str(d / "data.tsv"),
                            "--k", "1", "--no-progress"], capture_output=True, text=True, env=env, cwd=d, timeout=600)
    finally:
        for f in hidden:
            f.with_suffix(".hidden").rename(f)
    assert r.returncode == 0, r.stderr[-3000:]
    for table in ("table2.md", "table3.md", "table5.md"):
        assert (fresh / table).read_bytes() == (d / "paper" / table).read_bytes(), table
    figures = json.loads((d / "paper" / "results.json").read_text())["figures"]
    assert figures and all((fresh / f).read_bytes()[:4] == b"\x89PNG" for f in figures)
    assert not (d / "empty-cache" / "models").exists()
    old, new = ((p / "README.md").read_text().splitlines() for p in (d / "paper", fresh))
    changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
    assert len(old) == len(new) and all(new[i].startswith(("`", "Seconds per stage")) for i in changed), changed
    saved = json.loads((fresh / "results.json").read_text())
    assert saved["device"] == json.loads((d / "paper" / "results.json").read_text())["device"]  # not the render's


def test_the_committed_paper_renders_from_a_fresh_clone(tmp_path, monkeypatch):
    """The committed paper/ (its cells and results.json only) renders its committed Tables 2, 3 and 5 byte for byte,
    loading no model and no masked LM (a fresh clone has none: it would train bow first)."""
    import shutil

    import textaudit.models
    import textaudit.neighborhoods.mlm

    def refuse(*a, **k):
        raise AssertionError("the render loaded a model")

    monkeypatch.setattr(textaudit.models, "load_classifier", refuse)
    monkeypatch.setattr(textaudit.neighborhoods.mlm, "load_mlm", refuse)
    monkeypatch.setenv("TEXTAUDIT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "paper"
    shutil.copytree(REPO / "paper" / "cells", out / "cells")
    shutil.copy(REPO / "paper" / "results.json", out / "results.json")
    sys.path.insert(0, str(REPO / "benchmarks"))
    from reproduce_paper import main

    assert main(["--render", "--out", str(out), "--no-progress"]) == 0
    for table in ("table2.md", "table3.md", "table5.md"):
        assert (out / table).read_text() == (REPO / "paper" / table).read_text(), table


def test_a_stage_left_out_keeps_what_results_json_said_of_it(paper):
    """Rerunning one stage (``--skip attacks,accuracy``: the bias run again) replaces only what it computed:
    results.json keeps Table 2's cells and the accuracy, and the README its compute table."""
    import shutil

    d, _ = paper
    out = d / "only-bias"
    shutil.copytree(d / "paper", out)
    before = json.loads((out / "results.json").read_text())
    r = _run(d, "--skip", "attacks,accuracy", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    after = json.loads((out / "results.json").read_text())
    assert after["table2"] == before["table2"] and after["accuracy"] == before["accuracy"]
    assert after["bias"] == before["bias"] and after["bias_histograms"] == before["bias_histograms"]
    assert "| model | method | examples | compute s | precision |" in (out / "README.md").read_text()


def test_the_published_recipe_has_cells_of_its_own_and_a_relaxed_cell_says_so(paper):
    """``--recipe paper`` (the default) runs Genetic and BAE with every published constraint into runs/recipe-paper/;
    Table 2 shows a recipe's cell where it ran, and a relaxed cell — saying so — where it did not yet."""
    import shutil

    d, _ = paper
    out = d / "recipes"
    shutil.copytree(d / "paper", out)
    r = _run(d, "--recipe", "paper", "--methods", "bae", "--skip", "accuracy,bias", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    weak = f"{d}/weak.py:clf"
    cell = cell_path(out / "runs" / "recipe-paper" / "attacks", weak, "bae")
    config = json.loads(cell.read_text().splitlines()[0])["header"]["config"]
    assert config["recipe"] == "paper" and config["pos_filter"] is True and config["window"] == 15
    assert not (out / "runs" / "attacks" / cell.name).exists()  # the relaxed cells are not touched
    r = _run(d, "--render", "--recipe", "paper", "--methods", "genetic,bae", "--skip", "accuracy,bias", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    row = next(line for line in (out / "table2.md").read_text().splitlines() if line.startswith(f"| {weak} "))
    genetic, bae = row.split(" | ")[4:6]
    assert genetic.endswith("— relaxed recipe") and "relaxed" not in bae, row
    assert "*Relaxed recipe*" in (out / "table2.md").read_text()
