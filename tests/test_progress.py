"""Long work is visible in logs: with stderr not a terminal, plain progress lines, no third-party bars."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from textaudit.progress import LogProgress


@pytest.fixture(scope="module")
def mlm_dir(tiny_mlm, tmp_path_factory):
    """The tiny real masked LM on disk (``--mlm DIR``): the audits below measure progress and estimates, not the
    masked LM's quality, and run in seconds with it (with minilm-mlm on an empty cache they took 1–2.5 min each)."""
    d = tmp_path_factory.mktemp("mlm")
    tiny_mlm.model.save_pretrained(d)
    tiny_mlm.tokenizer.save_pretrained(d)
    return d

PLUGIN = '''
import numpy as np

def classify(texts):
    return np.array([[0.9, 0.1] if "dull" in t.split() else [0.1, 0.9] for t in texts])
'''


def test_log_progress_lines_have_count_rate_and_eta(capsys):
    bar = LogProgress(total=4, desc="so-beam k=6", unit="ex", interval=0)
    bar.update(1)
    bar.set_postfix(success="1/1")
    bar.update(1)
    bar.close()
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == "so-beam k=6: 0/4 ex (0%), 0 ex/s, elapsed 0s"  # said when the work starts
    assert lines[1].startswith("so-beam k=6: 1/4 ex (25%), ") and "ex/s" in lines[1] and "ETA" in lines[1]
    assert lines[-1].startswith("so-beam k=6: 2/4 ex (50%), ") and lines[-1].endswith("success=1/1")


def test_a_long_first_unit_is_not_silent(capsys, monkeypatch):
    """Nothing finished yet: a line when the work starts and another within FIRST_LINE_SECONDS (here
    shortened), from the timer, without waiting for the first unit."""
    import time

    import textaudit.progress as progress_module

    monkeypatch.setattr(progress_module, "FIRST_LINE_SECONDS", 0.3)
    bar = LogProgress(total=3, desc="bias k<=2", unit="unit", interval=60)
    err, deadline = "", time.monotonic() + 30  # however busy the machine: the timer's line, long before 60 s
    while err.count("\n") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
        err += capsys.readouterr().err
    bar.close()
    lines = err.splitlines()
    # the start line, then the timer's (long before the 60 s interval), and no third
    assert len(lines) == 2 and all(ln.startswith("bias k<=2: 0/3 unit (0%), 0 unit/s, elapsed ") for ln in lines), err
    assert lines[0].endswith("elapsed 0s")


def test_the_eta_is_weighted_by_cost_so_it_does_not_jump(monkeypatch):
    """One cheap unit of two done in 10 s, the other 99 times its cost: the ETA says 16m30s, not the
    count's 10 s (a bias unit's neighbourhood grows with its sentence's length)."""
    import textaudit.progress as progress_module

    bar = LogProgress(total=2, desc="bias k<=2", unit="unit", interval=1e9)
    now = bar.t0 + 10.0  # a clock that stands still 10 s after the start: the figures are exact
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now)
    bar.update(1)
    assert "ETA 10s" in bar.line()
    bar.weigh(1, 99)
    assert "ETA 16m30s" in bar.line()
    bar.close()


def test_an_attack_says_its_time_before_it_spends_it(tmp_path):
    """After the cost line (queries), once the model is loaded: its pace measured here and what the
    queries make in time — before the first progress line; the patch-word ranking says when it is done."""
    (tmp_path / "p.py").write_text(PLUGIN)
    data = tmp_path / "d.csv"
    data.write_text("text,label\na moving and wonderful film,1\nan honest and moving story,1\n")
    env = {**os.environ, "TEXTAUDIT_PROGRESS_SECONDS": "0"}
    r = subprocess.run([sys.executable, "-m", "textaudit", "attack", "--model", f"{tmp_path / 'p.py'}:classify",
                        "--method", "so-enum", "--k", "1", "--kappa", "5", "--data", str(data), "--no-ppl"],
                       capture_output=True, text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    cost = next(i for i, ln in enumerate(lines) if ln.startswith("cost: up to "))
    queries = int(lines[cost].split("up to ")[1].split(" ")[0].replace(",", ""))
    time_line = next(i for i, ln in enumerate(lines) if ln.startswith("time: about "))
    # both parts of the work, each at its pace measured here: the classifier's and the masked LM's
    m = re.search(r"time: about (\S+) for 2 examples here(?: \([^)]*\))?: classifier (\S+) at ([\d,]+) texts/s; "
                  r"masked LM (\S+) at ([\d,]+) contexts/s$", lines[time_line])
    assert m, lines[time_line]
    assert queries > 0 and int(m.group(3).replace(",", "")) > 0 and int(m.group(5).replace(",", "")) > 0
    ranking = next(i for i, ln in enumerate(lines) if ln.startswith("ranking patch words for p.py:classify"))
    ranked = next(i for i, ln in enumerate(lines) if re.match(r"ranked patch words for p\.py:classify in [\d.]+ s; attacking", ln))
    first_progress = next(i for i, ln in enumerate(lines) if ln.startswith("so-enum k=1: "))
    assert cost < ranking < ranked < time_line < first_progress, r.stderr


STUBBORN = '''
import numpy as np

def classify(texts):  # no swap flips it: every search runs its whole neighbourhood
    return np.array([[0.2, 0.8] for t in texts])
'''


def test_progress_moves_while_every_example_is_in_flight(tmp_path, mlm_dir):
    """32 in flight, none finishes until its whole neighbourhood is searched: the progress lines still move
    — the texts and contexts asked so far grow between two lines with the same count of examples."""
    (tmp_path / "p.py").write_text(STUBBORN)
    env = {**os.environ, "TEXTAUDIT_PROGRESS_SECONDS": "0.2", "TEXTAUDIT_CACHE": str(tmp_path / "cache")}  # an empty store
    r = subprocess.run([sys.executable, "-m", "textaudit", "attack", "--model", f"{tmp_path / 'p.py'}:classify",
                        "--method", "so-beam", "--k", "2", "--data", "sst2:dev", "--limit", "6", "--in-flight", "32",
                        "--no-ppl", "--seed", "0", "--naturalness", "off", "--mlm", str(mlm_dir)],  # every example
                       # searched: none skipped
                       capture_output=True, text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stderr
    seen = [(int(m.group(1)), int(m.group(2).replace(",", "")), int(m.group(3).replace(",", "")))
            for m in re.finditer(r"so-beam k=2: (\d)/6 ex .*asked=([\d,]+), contexts=([\d,]+)", r.stderr)]
    assert seen, r.stderr
    assert [c for _, _, c in seen] == sorted(c for _, _, c in seen)  # the work only grows
    moved = [a for a, b in zip(seen, seen[1:]) if a[0] == b[0] < 6 and b[2] > a[2]]
    assert moved, r.stderr  # a line with no more examples done, but more contexts asked
    assert seen[-1][0] == 6 and "failed" in r.stdout
    # before the run, a first round (k = 1) on the examples: no swap flips this model, so it settles none, and
    # every example is costed as a search that finds nothing
    line = " ".join(ln for ln in r.stderr.splitlines() if ln.startswith("time: "))
    assert re.search(r"a first round \(k = 1\) on the first 4 examples settled 0 of the \d attacked in ", line), line
    assert "later rounds" in line, line


def test_a_bias_unit_in_progress_shows_its_contexts_growing(tmp_path, mlm_dir):
    """#67: a bias unit sat at 0/3 for 40 s; its masked-LM contexts now grow on the line while it runs."""
    (tmp_path / "p.py").write_text(PLUGIN)
    env = {**os.environ, "TEXTAUDIT_PROGRESS_SECONDS": "0.1", "TEXTAUDIT_CACHE": str(tmp_path / "cache")}  # an empty store
    r = subprocess.run([sys.executable, "-m", "textaudit", "bias", "--model", f"{tmp_path / 'p.py'}:classify", "--pair",
                        "he,she", "--data", "sst2:dev", "--k", "2", "--max-sources", "1", "--mlm", str(mlm_dir)],
                       capture_output=True, text=True,
                       env=env, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    seen = [(int(m.group(1)), int(m.group(2).replace(",", "")))
            for m in re.finditer(r"bias k<=2: (\d)/\d+ unit .*contexts=([\d,]+)", r.stderr)]
    assert seen and [c for _, c in seen] == sorted(c for _, c in seen)
    assert any(a[0] == b[0] and b[1] > a[1] for a, b in zip(seen, seen[1:])), r.stderr[-3000:]


LEXICON_PLUGIN = '''
import numpy as np
POS = {"good", "great", "best", "fun", "love", "beautiful", "funny", "moving", "wonderful", "brilliant", "enjoyable"}
NEG = {"bad", "worst", "dull", "boring", "awful", "mess", "poor", "stupid", "fails", "lack", "tedious"}

def classify(texts):  # a word-list model: cheap, so the masked LM's work is nearly all of an audit's
    out = []
    for t in texts:
        w = t.lower().split()
        s = sum(x in POS for x in w) - sum(x in NEG for x in w) + 0.3 * (len(w) % 2) - 0.15
        p = 1 / (1 + np.exp(-2 * s))
        out.append([1 - p, p])
    return np.array(out)
'''


@pytest.mark.parametrize("mlm, naturalness", [("minilm-mlm", "on"), ("tiny", "off")])
def test_the_estimate_of_a_plugin_audit_is_within_3x_of_the_masked_lm_work_it_did(tmp_path, mlm_dir, mlm, naturalness):
    """#67: a plug-in audit said 'up to 26 s' and took 7.5 min, 420 s of it the masked LM's. The estimate now
    counts the masked LM's contexts: the contexts it expects (per word × the examples' words, after its first
    round) are within 3× of those the run asked — work, not seconds, so a busy machine does not move it (the
    seconds are measured beside the wall time in benchmarks/estimate_time.py). The shipped masked LM with the
    default constraint (a minute or two), and the tiny one with the paper's search (seconds; with the constraint on, the
    tiny random LM's patch words fit almost nothing, its first round settles all four probes as skipped and the estimate
    is too low — a probe too small for a run that is mostly skips)."""
    from textaudit.results import read_jsonl

    (tmp_path / "p.py").write_text(LEXICON_PLUGIN)
    out = tmp_path / "o.jsonl"
    env = {**os.environ, "TEXTAUDIT_CACHE": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "textaudit", "attack", "--model", f"{tmp_path / 'p.py'}:classify",
                        "--method", "so-beam", "--k", "3", "--data", "sst2:dev", "--limit", "12", "--no-ppl",
                        "--output", str(out), "--json", "--mlm", str(mlm_dir) if mlm == "tiny" else mlm,
                        "--naturalness", naturalness], capture_output=True, text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    line = " ".join(ln for ln in r.stderr.splitlines() if ln.startswith("time: "))
    m = re.search(r"([\d.]+) texts and ([\d.]+) contexts per word", line)
    assert m and "masked LM" in line, line
    records = read_jsonl(out)
    # per word of the examples attacked: those the model got wrong are skipped at once, asking nothing
    words = sum(len(x["text"].split()) for x in records if x.get("status") != "skipped")
    expected, asked = float(m.group(2)) * words, sum(x.get("mlm_queries") or 0 for x in records)
    assert asked > 0 and 1 / 3 <= expected / asked <= 3, (expected, asked, line)


def test_certify_times_its_first_examples_and_says_the_rest(tmp_path, mlm_dir):
    """#84: certify said the draws' time alone (the second-order view, up to 40× more, was 'and its masked LM's
    own time'). Now the first 4 of 10 run alone and are timed, then the time of the other 6 is said — with how many of
    the first were certified and viewed, as their records say — before the fifth finishes."""
    import json

    (tmp_path / "p.py").write_text(PLUGIN)
    out = tmp_path / "c.jsonl"
    env = {**os.environ, "TEXTAUDIT_PROGRESS_SECONDS": "0", "TEXTAUDIT_CACHE": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "textaudit", "certify", "--model", f"{tmp_path / 'p.py'}:classify",
                        "--method", "safer", "--data", "sst2:dev", "--limit", "10", "--samples", "200", "--selection",
                        "20", "--neighbor-sample", "2", "--patches", "1", "--mlm", str(mlm_dir), "--output", str(out)],
                       capture_output=True, text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stderr.splitlines()
    before = next(i for i, ln in enumerate(lines) if ln.startswith("time: the draws take up to "))
    assert lines[before].endswith("the first 4 examples run first and are timed for an estimate of the rest"), lines[before]
    said = next(i for i, ln in enumerate(lines) if ln.startswith("time: about "))
    records = [json.loads(x) for x in out.read_text().splitlines()[1:]]  # in completion order: the first 4 first
    viewed = sum(bool(x.get("neighbors")) for x in records[:4])
    assert re.match(rf"time: about \S+ more for the other 6 examples — the first 4 took \S+, {viewed} of them certified "
                    r"and viewed \(the view: [\d,]+ texts and [\d,]+ contexts each", lines[said]), lines[said]
    fifth = next(i for i, ln in enumerate(lines) if re.match(r"certify \(SAFER\): ([5-9]|10)/10 ex", ln))
    assert before < said < fifth
    assert len(records) == 10 and sum(bool(x.get("neighbors")) for x in records) >= viewed
