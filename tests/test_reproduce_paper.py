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
            "--pairs", "he,she", "--k", "1", "--epsilon", "10", "--no-ppl", "--no-progress", *extra]
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
    r = _run(d)
    assert r.returncode == 0, r.stderr[-3000:]
    assert {f: f.read_text() for f in files} == before  # nothing recomputed, nothing appended
    assert (out / "table2.md").read_text() == table2
    bad = _run(d, "--skip", "attacks,accuracy", "--pairs", "he,he")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "Traceback" not in bad.stderr
