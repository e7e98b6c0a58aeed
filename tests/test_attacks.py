"""Second-order attacks on a tiny real masked LM and planted classifiers."""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from textaudit.attacks import PatchWords, pair_loss, run_attack
from textaudit.attacks import RandomBaseline as _RandomBaseline
from textaudit.attacks import SOBeam as _SOBeam
from textaudit.attacks import SOEnum as _SOEnum
from textaudit.errors import TextAuditError
from textaudit.models import as_classifier
from textaudit.neighborhoods import NeighborhoodBuilder
from textaudit.results import read_jsonl
from textaudit.sentence import Sentence

# the paper's search, the naturalness constraint off: these tests plant flaws on a tiny random masked LM, which
# knows nothing of natural English (the constraint's own tests: tests/test_naturalness.py)
SOBeam, SOEnum, RandomBaseline = (functools.partial(c, naturalness=False) for c in (_SOBeam, _SOEnum, _RandomBaseline))
PAPER = ("--naturalness", "off")
X = "a deep and meaningful film ."
PAIRS = [("film", "movie")]


def _words_proposed(tiny_mlm, text, position):
    b = NeighborhoodBuilder(tiny_mlm, kappa=5, delta=1e9)
    x = Sentence.parse(text)
    return [nb.sentence.tokens[position] for nb in b.neighbors(text, 1, protected=[4]) if x.diff(nb.sentence) == [position]]


def planted(trigger_all: list[str], partial: dict[str, float] | None = None):
    """P(positive) = 0.8, but 0.2 when 'movie' and every trigger word occur (a second-order flaw);
    partial[w] lowers it (only with 'movie') to guide the beam."""

    def f(texts):
        out = []
        for t in texts:
            w = set(t.split())
            p = 0.8
            if "movie" in w and all(tw in w for tw in trigger_all):
                p = 0.2
            elif "movie" in w and partial:
                p = min([p] + [v for k, v in partial.items() if k in w])
            out.append([1 - p, p])
        return np.array(out)

    return as_classifier(f, name="planted")


def test_pair_loss_matches_eq4():
    px, pxp = np.array([[0.2, 0.8]]), np.array([[0.4, 0.6]])
    assert pair_loss(px, pxp, 1)[0] == pytest.approx(-np.log(1 - 0.6) - np.log(0.8))
    assert pair_loss(px, pxp, 0)[0] == pytest.approx(pair_loss(px, pxp, 1)[0])  # symmetric for 2 classes


def test_so_enum_and_beam_find_a_planted_distance_one_example(tiny_mlm):
    t = _words_proposed(tiny_mlm, X, 1)[0]
    clf = planted([t])
    for atk in (SOEnum(clf, k=1, mlm=tiny_mlm, kappa=5, delta=1e9, patch_words=PatchWords(clf, PAIRS)),
                SOBeam(clf, k=2, mlm=tiny_mlm, kappa=5, delta=1e9, patch_words=PatchWords(clf, PAIRS))):
        r = atk.attack(X, label=1)
        assert r.status == "success", r
        assert r.pair == ["film", "movie"] and r.l0 == 1
        assert r.vulnerable.split()[1] == t and r.vulnerable_patched.split()[4] == "movie"
        assert (r.vulnerable_prediction, r.vulnerable_patched_prediction) == (1, 0)
        assert r.f_soft == pytest.approx(-0.6)
        assert r.sentences_scored >= 1 and r.mlm == "tiny-distilbert"
        # queries: the distinct texts this example asked for (x0, each scored x and x ⊕ p), whatever the
        # cache held: attacking it again, every answer cached, reports the same count
        assert r.queries >= 2 * r.sentences_scored
        forwards = clf.stats.unique_forwards
        assert atk.attack(X, label=1).queries == r.queries and clf.stats.unique_forwards == forwards


def test_beam_follows_the_loss_to_a_distance_two_example(tiny_mlm):
    t1 = _words_proposed(tiny_mlm, X, 1)[0]
    t3 = _words_proposed(tiny_mlm, X, 3)[0]
    clf = planted([t1, t3], partial={t1: 0.6})
    pw = PatchWords(clf, PAIRS)
    r = SOBeam(clf, k=3, beam=1, mlm=tiny_mlm, kappa=5, delta=1e9, patch_words=pw).attack(X, 1)
    assert r.status == "success" and r.l0 == 2
    assert r.vulnerable.split()[1] == t1 and r.vulnerable.split()[3] == t3
    # without the loss signal a beam of 1 is lost
    blind = planted([t1, t3])
    r2 = SOBeam(blind, k=3, beam=1, mlm=tiny_mlm, kappa=5, delta=1e9, patch_words=PatchWords(blind, PAIRS)).attack(X, 1)
    assert r2.status == "failed"
    # SO-Enum at k = 2 finds it exhaustively
    r3 = SOEnum(blind, k=2, mlm=tiny_mlm, kappa=5, delta=1e9, patch_words=PatchWords(blind, PAIRS)).attack(X, 1)
    assert r3.status == "success" and r3.l0 == 2


def test_skipped_failed_and_already_vulnerable(tiny_mlm):
    clf = planted(["zzzz-never"])
    atk = SOBeam(clf, k=2, mlm=tiny_mlm, kappa=3, delta=1e9, patch_words=PatchWords(clf, PAIRS))
    assert atk.attack("a deep and meaningful story .").status == "skipped"
    failed = atk.attack(X)
    assert failed.status == "failed" and failed.reason == "no vulnerable example found"
    assert atk.attack("a film , a film .").status == "skipped"  # w1 must occur exactly once
    flat = as_classifier(lambda ts: np.array([[0.9, 0.1] if "movie" in t else [0.1, 0.9] for t in ts]))
    r = SOBeam(flat, k=2, mlm=tiny_mlm, patch_words=PatchWords(flat, PAIRS)).attack(X)
    assert r.status == "success" and r.l0 == 0 and r.vulnerable == X
    err = atk.attack("film")
    assert err.status == "error" and "fewer than two words" in err.reason


def test_budgets_and_random_baseline(tiny_mlm):
    clf = planted(["zzzz-never"])
    r = SOBeam(clf, k=6, mlm=tiny_mlm, kappa=5, delta=1e9, max_queries=10, patch_words=PatchWords(clf, PAIRS)).attack(X)
    assert r.status == "failed" and r.reason == "query budget exhausted"
    rb = RandomBaseline(clf, k=3, mlm=tiny_mlm, kappa=5, delta=1e9, patch_words=PatchWords(clf, PAIRS), seed=1)
    r = rb.attack(X)
    assert r.status == "failed" and r.sentences_scored == 1 + 3  # x0, then one random neighbour per round
    with pytest.raises(TextAuditError, match="supports k <= 2"):
        SOEnum(clf, k=3, mlm=tiny_mlm)


def test_budget_stops_a_round_between_chunks(tiny_mlm):
    """The budget is checked inside a round too: with chunks of 4 sentences, a 10-query budget stops
    the first round after a few chunks instead of scoring all of Neighbor_1."""
    clf = planted(["zzzz-never"])
    pw = PatchWords(clf, PAIRS)
    whole = SOBeam(clf, k=1, mlm=tiny_mlm, kappa=5, delta=1e9, patch_words=pw).attack(X)
    assert whole.status == "failed" and whole.sentences_scored >= 20
    for cls in (SOBeam, SOEnum):  # a fresh classifier each: cached texts cost no queries
        fresh = planted(["zzzz-never"])
        atk = cls(fresh, k=1 if cls is SOEnum else 6, mlm=tiny_mlm, kappa=5, delta=1e9, max_queries=10,
                  patch_words=PatchWords(fresh, PAIRS))
        atk.chunk = 4
        r = atk.attack(X)
        assert r.status == "failed" and r.reason == "query budget exhausted"
        assert 1 + 4 <= r.sentences_scored <= 1 + 4 * 3 < whole.sentences_scored


def test_multiclass_model_is_attacked(tiny_mlm):
    t = _words_proposed(tiny_mlm, X, 1)[0]

    def f(texts):
        out = []
        for s in texts:
            w = set(s.split())
            out.append([0.1, 0.2, 0.7] if not ("movie" in w and t in w) else [0.6, 0.3, 0.1])
        return np.array(out)

    clf = as_classifier(f)
    r = SOBeam(clf, k=2, mlm=tiny_mlm, kappa=5, delta=1e9, patch_words=PatchWords(clf, PAIRS)).attack(X)
    assert r.status == "success" and (r.vulnerable_prediction, r.vulnerable_patched_prediction) == (2, 0)


def test_patch_words_rank_by_single_word_gap():
    clf = as_classifier(lambda ts: np.array([[0.5, 0.5] if t not in ("film", "movie", "cinema")
                                             else {"film": [0.1, 0.9], "movie": [0.6, 0.4], "cinema": [0.2, 0.8]}[t]
                                             for t in ts]))
    pw = PatchWords(clf).fit()  # the real counter-fitted lists
    top = pw.ranking(3)
    assert ("film", "movie") in [(a, b) for a, b, _ in top] and top[0][2] == pytest.approx(0.5)
    p = pw.select(Sentence.parse("a long film about cinema ."))
    assert (p.w1, p.w2, p.position) == ("film", "movie", 2)
    assert pw.select(Sentence.parse("a long film about movie .")).w2 != "movie"
    # cached on disk: a second instance reads the scores back without querying the model per word
    clf.reset_stats()
    PatchWords(clf).fit()
    assert clf.stats.unique_forwards == 0 and clf.stats.texts <= 8


def test_run_attack_writes_jsonl_and_resumes(tiny_mlm, tmp_path):
    t = _words_proposed(tiny_mlm, X, 1)[0]
    clf = planted([t])
    texts = [X, "a deep and meaningful story .", X.replace("deep", "long"), X.replace("a ", "the ", 1), X]
    mk = lambda: SOBeam(clf, k=2, mlm=tiny_mlm, kappa=5, delta=1e9, patch_words=PatchWords(clf, PAIRS))
    out = tmp_path / "r.jsonl"
    s1, _ = run_attack(mk(), texts[:2], [1, 1], output=out, progress=False)
    assert s1["n"] == 2 and s1["skipped"] == 1
    with pytest.raises(TextAuditError, match="already exists; pass --resume"):
        run_attack(mk(), texts, [1] * 5, output=out, progress=False)
    # a kill in the middle of writing leaves half a line: resume drops it and redoes that example
    with open(out, "a") as f:
        f.write('{"id": "2", "status": "succ')
    s2, recs = run_attack(mk(), texts, [1] * 5, output=out, resume=True, progress=False)
    header, *lines = [json.loads(l) for l in out.read_text().splitlines()]
    assert header["header"]["command"] == "attack" and header["header"]["config"]["k"] == 2
    assert header["header"]["config"]["beam"] == 20 and header["header"]["config"]["method"] == "so-beam"
    # each example once, written as it finished (completion order: many examples are in flight);
    # the records returned are in input order
    assert sorted(r["id"] for r in lines) == ["0", "1", "2", "3", "4"]
    assert [r["id"] for r in recs] == ["0", "1", "2", "3", "4"]
    assert s2["n"] == 5 and s2["success"] + s2["failed"] + s2["skipped"] == 5
    assert s2["success_rate"] == round(s2["success"] / s2["attacked"], 4)
    assert all(set(r) >= {"id", "text", "label", "prediction", "pair", "status", "vulnerable", "l0", "queries",
                          "seconds", "mlm"} for r in lines)



PLUGIN = '''
import time
def clf(texts):
    if len(texts) <= 2:
        time.sleep(0.4)
    out = []
    for t in texts:
        w = set(t.split())
        p = 0.9 if "film" in w else 0.6
        if "film" not in w and "TRIGGER" in w:  # whichever synonym replaced "film"
            p = 0.1
        out.append([1 - p, p])
    return out
'''


@pytest.mark.slow
def test_cli_attack_kill_and_resume(tiny_mlm, tmp_path):
    tiny_mlm.model.save_pretrained(tmp_path / "mlm")
    tiny_mlm.tokenizer.save_pretrained(tmp_path / "mlm")
    t = _words_proposed(tiny_mlm, X, 1)[0]
    (tmp_path / "p.py").write_text(PLUGIN.replace("TRIGGER", t))
    rows = [X, "a long and meaningful film .", "xyzzy plugh quux .", "the film is deep and meaningful .",
            "one more film that is deep ."] * 2
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(f"1\t{r}\n" for r in rows))
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "textaudit", "attack", "--model", f"{tmp_path}/p.py:clf", "--mlm", str(tmp_path / "mlm"),
           "--data", str(tmp_path / "d.tsv"), "--k", "2", "--method", "so-beam", "--kappa", "5", "--delta", "1e9",
           "--output", str(out), "--no-ppl", *PAPER]
    # one example in flight for the run that is killed (slow enough to be killed part-way); the resume
    # runs with the default number in flight, which the results file's header does not record
    proc = subprocess.Popen(cmd + ["--in-flight", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ))
    deadline = time.time() + 120
    while time.time() < deadline and (not out.exists() or len(read_jsonl(out)) < 3):
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    n_before = len(read_jsonl(out))
    assert 3 <= n_before < len(rows)
    r = subprocess.run(cmd + ["--resume", "--json"], capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    ids = [r["id"] for r in read_jsonl(out)]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == len(rows)
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["n"] == 10 and summary["skipped"] == 2 and summary["success"] >= 2
    assert set(summary) >= {"method", "k", "n", "attacked", "success", "skipped", "success_rate", "mean_l0",
                            "median_ppl_original", "median_ppl_perturbed", "sec_per_example", "queries_per_example"}


def _open_files() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads the open files from /proc")
def test_finished_cli_runs_keep_no_lock_handle(cli, tiny_mlm, tmp_path):
    """The command checks --output (taking the lock) and the run writes it (taking it again): once
    it returns, no handle on the lock stays open in the process (a notebook or a server runs many)."""
    tiny_mlm.model.save_pretrained(tmp_path / "mlm")
    tiny_mlm.tokenizer.save_pretrained(tmp_path / "mlm")
    (tmp_path / "p.py").write_text(PLUGIN.replace("TRIGGER", "xyzzy").replace("time.sleep(0.4)", "pass"))
    (tmp_path / "d.tsv").write_text("label\ttext\n" + f"1\t{X}\n1\tthe film is deep and meaningful .\n")
    locks = []
    for i in range(3):
        out = tmp_path / f"out{i}.jsonl"
        r = cli("attack", "--model", f"{tmp_path}/p.py:clf", "--mlm", str(tmp_path / "mlm"), "--data",
                str(tmp_path / "d.tsv"), "--k", "1", "--kappa", "3", "--output", str(out), "--no-ppl", *PAPER)
        assert r.exit_code == 0, r.output
        locks.append(str((tmp_path / f".out{i}.jsonl.lock").resolve()))
    assert not set(locks) & set(_open_files())


def test_cli_attack_says_its_method_and_cost_before_it_runs_and_shows_what_it_found(cli, tiny_mlm, tmp_path):
    from textaudit.attacks.registry import estimate_queries

    tiny_mlm.model.save_pretrained(tmp_path / "mlm")
    tiny_mlm.tokenizer.save_pretrained(tmp_path / "mlm")
    t = _words_proposed(tiny_mlm, X, 1)[0]
    (tmp_path / "p.py").write_text(PLUGIN.replace("TRIGGER", t).replace("time.sleep(0.4)", "pass"))
    (tmp_path / "d.tsv").write_text("label\ttext\n" + f"1\t{X}\n")
    base = ["attack", "--model", f"{tmp_path}/p.py:clf", "--mlm", str(tmp_path / "mlm"), "--data", str(tmp_path / "d.tsv"),
            "--kappa", "5", "--delta", "1e9", "--no-ppl", *PAPER]
    r = cli(*base, "--k", "1")
    assert r.exit_code == 0, r.output
    assert "method: so-enum (the default for k <= 2; choose with --method)" in r.stderr
    # "a deep and meaningful film ." has 5 words (the median of one sentence), κ = 5: 2·(1 + 5·5) = 52
    assert "cost: up to 52 classifier queries per example" in r.stderr and "--max-queries" in r.stderr
    # what it found, readable under the table: x̃ with its prediction, x̃ ⊕ p with the flipped one
    lines = r.stdout.splitlines()
    at = lines.index(next(ln for ln in lines if ln.startswith("vulnerable examples")))
    assert lines[at + 1].split() == ["x̃", "→", "1", *X.replace("deep", t).split()]
    assert lines[at + 2].startswith("  x̃ ⊕ p → 0  ") and re.search(r"\(p = film→[a-z]+\)$", lines[at + 2])
    r = cli(*base, "--k", "3", "--method", "so-beam", "--beam", "2")
    assert r.exit_code == 0 and "method:" not in r.stderr  # chosen, so not announced
    n, _ = estimate_queries("so-beam", 3, 5, beam=2, kappa=5)
    assert n == 2 * (1 + 25 + 2 * 25 + 2 * 25) and f"cost: up to {n:,} classifier queries" in r.stderr
    assert estimate_queries("genetic", 1, 5) is None


def test_cli_attack_bad_inputs(cli, tmp_path):
    r = cli("attack", "--model", "nope", "--no-ppl")
    assert r.exit_code == 2 and "unknown model 'nope'" in r.output
    (tmp_path / "e.tsv").write_text("label\ttext\n")
    r = cli("attack", "--model", "cnn", "--data", str(tmp_path / "e.tsv"), "--no-ppl")
    assert r.exit_code == 2 and "has no rows" in r.output
    (tmp_path / "n.tsv").write_text("text\nfine\n")
    r = cli("attack", "--model", "cnn", "--data", str(tmp_path / "n.tsv"), "--no-ppl")
    assert r.exit_code == 2 and "no label column" in r.output
    r = cli("attack", "--model", "cnn", "--resume", "--no-ppl")
    assert r.exit_code == 2 and "--resume needs --output" in r.output
    r = cli("attack", "--model", "cnn", "--method", "genetic-x", "--no-ppl", "--limit", "1")
    assert r.exit_code == 2 and "unknown attack method" in r.output
    r = cli("attack", "--model", "cnn", "--method", "bae", "--lm-constraint", "--no-ppl")
    assert r.exit_code == 2 and "--lm-constraint applies to --method genetic only" in r.output
    r = cli("attack", "--model", "cnn", "--method", "genetic", "--threshold", "0.9", "--no-ppl")
    assert r.exit_code == 2 and "--threshold applies to --method bae" in r.output
    r = cli("attack", "--model", "cnn", "--method", "textattack:genetic", "--time-budget", "5", "--no-ppl")
    assert r.exit_code == 2 and ("use --max-queries" in r.output or "TextAttack is not installed" in r.output)
    from textaudit.models.zoo import checkpoint_dir

    assert not checkpoint_dir("cnn").exists()  # every bad option was refused before a model was trained


TIES = '''
POS = {"good", "great", "fine", "moving", "deep"}
NEG = {"bad", "dull", "boring", "thin"}

def clf(texts):  # exactly neutral (a tie) when it knows no word, as VADER and TextBlob are on many sentences
    out = []
    for t in texts:
        s = sum(w in POS for w in t.split()) - sum(w in NEG for w in t.split())
        out.append([0.5, 0.5] if s == 0 else [0.2, 0.8] if s > 0 else [0.8, 0.2])
    return out
'''


@pytest.mark.parametrize("method", ["so-enum", "genetic"])
def test_a_tie_is_no_flip_and_no_misclassification(tmp_path, cli, method):
    """#53: a plug-in that answers exactly 0.5 / 0.5 has made no decision. argmax read a tie as class 0, so
    a neighbour going from positive to neutral counted as a flip; now every success crosses the boundary
    strictly on both sides, and an input that ties is skipped as such."""
    from textaudit.models.batched import TIE, as_classifier, decisions

    (tmp_path / "ties.py").write_text(TIES)
    rows = ["a good film .", "a deep and moving story .", "the plot is thin .", "an ordinary day at the office ."]
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(f"{1 if i < 2 else 0}\t{r}\n" for i, r in enumerate(rows)))
    r = cli("attack", "--model", f"{tmp_path}/ties.py:clf", "--method", method, "--data", str(tmp_path / "d.tsv"),
            "--no-ppl", "--store", "off", "--output", str(tmp_path / "r.jsonl"), *(["--k", "1"] if method == "so-enum" else []),
            *PAPER)
    assert r.exit_code == 0, r.output
    records = {rec["text"]: rec for rec in read_jsonl(tmp_path / "r.jsonl")}
    tie = records["an ordinary day at the office ."]
    assert tie["status"] == "skipped" and "tie" in tie["reason"]
    import importlib.util

    spec = importlib.util.spec_from_file_location("ties", tmp_path / "ties.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    clf = as_classifier(mod.clf)
    assert list(decisions(clf.predict_proba(["a good film", "a film", "a bad film"]))) == [1, TIE, 0]
    successes = [rec for rec in records.values() if rec["status"] == "success"]
    for rec in successes:
        texts = [rec["vulnerable"]] + ([rec["vulnerable_patched"]] if method == "so-enum" else [])
        assert TIE not in decisions(clf.predict_proba(texts)), rec
    if method == "so-enum":
        assert all(rec["vulnerable_prediction"] != rec["vulnerable_patched_prediction"] for rec in successes)


def test_seconds_spent_outside_the_engine_count_once_in_a_record_written_in_that_step_or_a_later_one(monkeypatch):
    """A blocking search's seconds reach the meter when its engine step ends: a success, whose record is written one
    ask later (its verification), read them twice before the fix — TextAttack's records summed to 1.4–1.8× the run's
    wall (benchmarks/data/vs_textattack-*); a failure's record, written in the same step, read them once."""
    from textaudit.attacks.base import Attack, Found
    from textaudit.attacks.run import run_attack
    from textaudit.models import as_classifier
    from textaudit.sentence import Sentence

    clock = [1000.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])  # only the search's work moves it

    class Blocking(Attack):
        method = "blocking"

        def search(self, x0, goal, budget, rng):
            t0 = time.perf_counter()
            clock[0] += 5.0  # the work TextAttack does with its own model calls
            budget.add_outside_seconds(time.perf_counter() - t0)
            if "flip" in x0.text():
                return Found(Sentence.parse(x0.text().replace("flip", "flop")), 1 - goal.c)
            return None

    clf = as_classifier(lambda texts: [[0.2, 0.8] if "flop" in t else [0.8, 0.2] for t in texts], name="flop")
    summary, records = run_attack(Blocking(clf), ["a flip here .", "nothing here ."], [0, 0], progress=False,
                                  in_flight=2)
    by_text = {r["text"]: r for r in records}
    assert by_text["a flip here ."]["status"] == "success" and by_text["nothing here ."]["status"] == "failed"
    assert [by_text[t]["seconds"] for t in ("a flip here .", "nothing here .")] == [5.0, 5.0]
