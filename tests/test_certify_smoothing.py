"""``audit certify --method safer``: randomized-smoothing certificates (SAFER) on planted models whose certificates
the theory gives, determinism under --in-flight and a killed run resumed, and the figures' bookkeeping."""

from __future__ import annotations

import json
import math

import pytest

from textaudit.robustness.smoothing import SAFER, PerturbationSets, certified_radius, delta, lower_bound

#: film/movie/picture: one synonym class whose sets are equal (q = 1); good → fine → nice: overlapping sets
LEXICON = {"film": ["movie", "picture"], "movie": ["film", "picture"], "picture": ["film", "movie"],
           "good": ["fine"], "fine": ["good", "nice"]}
PLUGINS = '''
def on_class(texts):  # positive while any word of the film/movie/picture class is there: constant on the class
    return [[0.2, 0.8] if {"film", "movie", "picture"} & set(t.lower().split()) else [0.8, 0.2] for t in texts]

def on_film(texts):  # positive only with "film" itself: one synonym flips it
    return [[0.2, 0.8] if "film" in t.lower().split() else [0.8, 0.2] for t in texts]
'''
ROWS = [(1, "a good film and a movie ."), (1, "a fine film ."), (0, "a dull plot ."), (1, "the picture is good .")]


def test_q_delta_and_the_radius_follow_the_theorem():
    sets = PerturbationSets(LEXICON, hops=1)
    assert sets.T("good") == ("good", "fine") and sets.T("fine") == ("fine", "good", "nice")
    assert sets.q("film") == 1.0  # the class's sets are equal: a substitution moves nothing
    assert sets.q("good") == pytest.approx(2 / 3) and sets.q("fine") == pytest.approx(1 / 3)
    assert delta([1.0, 2 / 3], 1) == pytest.approx(1 / 3) and delta([1.0, 2 / 3], 2) == pytest.approx(1 / 3)
    assert certified_radius(0.99, [1.0, 2 / 3]) == 2  # 0.99 − 1/3 > ½ at R = 1 and 2
    assert certified_radius(0.99, [1 / 3]) == 0 and certified_radius(0.5, [1.0]) is None  # ½ is no majority: abstain
    assert lower_bound(200, 200, 0.05) == pytest.approx(0.05 ** (1 / 200))  # Clopper–Pearson, k = n
    two = PerturbationSets(LEXICON, hops=2)
    assert set(two.T("good")) == {"good", "fine", "nice"} and two.q("good") == 1.0  # two hops: larger overlaps


@pytest.fixture()
def world(tmp_path):
    (tmp_path / "m.py").write_text(PLUGINS)
    (tmp_path / "syn.json").write_text(json.dumps(LEXICON))
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(f"{y}\t{t}\n" for y, t in ROWS))
    return tmp_path


def _certify(cli, w, model, *extra):
    r = cli("certify", "--model", f"{w}/m.py:{model}", "--method", "safer", "--data", str(w / "d.tsv"), "--synonyms",
            str(w / "syn.json"), "--hops", "1", "--samples", "200", "--selection", "20", "--json", *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout.strip().splitlines()[-1])


def _records(path):
    return sorted((json.loads(x) for x in path.read_text().splitlines()[1:]), key=lambda r: r["id"])


def test_a_model_constant_on_a_synonym_class_is_certified_at_the_radius_the_theory_gives(cli, world):
    out = _certify(cli, world, "on_class", "--output", str(world / "c.jsonl"))
    recs = {r["text"]: r for r in _records(world / "c.jsonl")}
    p = 0.05 ** (1 / 200)  # every draw votes the class: n_A = n
    a = recs["a good film and a movie ."]  # good (q = 2/3), film and movie (q = 1): 0.985 − 1/3 > ½ at R = 3
    assert (a["prediction"], a["n_a"], a["words"], a["radius"]) == (1, 200, 3, 3) and a["p_a_lower"] == pytest.approx(p, abs=1e-6)
    b = recs["a fine film ."]  # fine (q = 1/3) is the worst: R = 1 takes it, 0.985 − 2/3 < ½ → radius 0
    assert (b["prediction"], b["words"], b["radius"]) == (1, 2, 0)
    assert recs["the picture is good ."]["radius"] == 2 and recs["a dull plot ."]["radius"] == 0  # (no substitutable word)
    assert out["curve"][:4] == [
        {"radius": 0, "certified": 4, "n": 4, "certified_accuracy": 1.0, "certified_accuracy_ci95": [0.5101, 1.0]},
        {"radius": 1, "certified": 2, "n": 4, "certified_accuracy": 0.5, "certified_accuracy_ci95": [0.1500, 0.8500]},
        {"radius": 2, "certified": 2, "n": 4, "certified_accuracy": 0.5, "certified_accuracy_ci95": [0.1500, 0.8500]},
        {"radius": 3, "certified": 1, "n": 4, "certified_accuracy": 0.25, "certified_accuracy_ci95": [0.0456, 0.6994]}]
    assert out["accuracy"] == 1.0 and out["abstain"] == 0


def test_a_model_that_flips_on_one_synonym_is_not_certified_beyond_radius_0(cli, world):
    out = _certify(cli, world, "on_film", "--output", str(world / "f.jsonl"))
    recs = {r["text"]: r for r in _records(world / "f.jsonl")}
    # "film" is drawn a third of the time from {film, movie, picture}: with one class word the smoothed vote is
    # negative (wrong); with two, "film" comes up in 5/9 of the draws: right, but p_A's bound (0.56) is too close to
    # ½ to survive one substitution — nothing is certified beyond radius 0
    assert [(recs[t]["prediction"], recs[t]["radius"]) for _, t in ROWS] == [(1, 0), (0, 0), (0, 0), (0, 0)]
    assert 5 / 9 - 0.1 < recs[ROWS[0][1]]["n_a"] / 200 < 5 / 9 + 0.1
    assert all(row["certified"] == 0 for row in out["curve"][1:]) and out["certified_accuracy_r0"] == 0.5
    # the table says so: "certified" at radius 0 is only "right" (#67: it read as a certified model)
    r = cli("certify", "--model", f"{world}/m.py:on_film", "--method", "safer", "--data", str(world / "d.tsv"),
            "--synonyms", str(world / "syn.json"), "--hops", "1", "--samples", "200", "--selection", "20")
    assert r.exit_code == 0, r.output
    assert "0 (right; nothing certified)" in r.stdout
    assert "no input is certified against any substitution: radius 0 means only that the smoothed prediction is right" \
        in " ".join(r.stderr.split())
    r = cli("certify", "--model", f"{world}/m.py:on_class", "--method", "safer", "--data", str(world / "d.tsv"),
            "--synonyms", str(world / "syn.json"), "--hops", "1", "--samples", "200", "--selection", "20")
    assert r.exit_code == 0 and "no input is certified" not in r.stderr  # radius 3 certified there


def test_certificates_do_not_depend_on_in_flight_or_on_a_killed_run_resumed(cli, world):
    _certify(cli, world, "on_class", "--output", str(world / "one.jsonl"), "--in-flight", "1")
    _certify(cli, world, "on_class", "--output", str(world / "four.jsonl"), "--in-flight", "4")
    assert _records(world / "one.jsonl") == _records(world / "four.jsonl")
    lines = (world / "one.jsonl").read_text().splitlines()
    (world / "cut.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][: len(lines[3]) // 2])  # killed mid-record
    _certify(cli, world, "on_class", "--output", str(world / "cut.jsonl"), "--resume", "--in-flight", "3")
    assert _records(world / "cut.jsonl") == _records(world / "one.jsonl")
    r = cli("certify", "--model", f"{world}/m.py:on_class", "--method", "safer", "--data", str(world / "d.tsv"),
            "--synonyms", str(world / "syn.json"), "--hops", "1", "--samples", "100", "--selection", "20",
            "--output", str(world / "one.jsonl"), "--resume")
    assert r.exit_code == 2 and "samples" in r.stderr and len(r.stderr.strip().splitlines()) == 1  # other settings


def test_a_label_only_model_votes_and_its_unknown_answers_never_win():
    import numpy as np

    from textaudit.models import as_classifier

    class LabelOnly:  # a label-only model as the endpoints are: one-hot rows, "unknown" a last class
        name, num_classes, unknown_class, fingerprint = "labels", 3, 2, "x"

        def predict_proba(self, texts):
            return np.eye(3)[[2 if "movie" in t else 1 for t in texts]]

    safer = SAFER(LabelOnly(), PerturbationSets(LEXICON, hops=1), samples=300, selection=30)
    from textaudit.engine.scheduler import run_now

    cert = run_now(safer.ask_certify("a fine film .", "0"))
    assert cert["prediction"] == 1 and cert["votes"][1] == cert["n_a"] and sum(cert["votes"]) < 300  # unknowns voted nothing
    assert math.isclose(cert["n_a"] / 300, 2 / 3, abs_tol=0.1)  # film or picture, not movie
    plain = as_classifier(lambda texts: [[0.5, 0.5] for _ in texts], name="tie")
    tie = run_now(SAFER(plain, PerturbationSets(LEXICON, hops=1), samples=50, selection=10).ask_certify("a film .", "0"))
    assert tie["abstain"] and tie["prediction"] is None and tie["radius"] is None  # a tie is no vote: abstain


def test_a_safer_file_reads_back_and_renders_with_its_curve(cli, world):
    out = _certify(cli, world, "on_class", "--output", str(world / "c.jsonl"))
    from textaudit.results import load

    back = load(world / "c.jsonl")
    assert {k: v for k, v in back.summary().items() if k != "model"} == {k: v for k, v in out.items() if k != "model"}
    assert len(back.to_pandas()) == len(ROWS)
    r = cli("report", str(world / "c.jsonl"), "--out", str(world / "r.html"))
    assert r.exit_code == 0, r.output
    page = (world / "r.html").read_text()
    assert "Randomized smoothing (SAFER)" in page and "Certified accuracy vs radius" in page and "data:image/png" in page


def test_the_second_order_view_certifies_natural_neighbours_of_certified_inputs(cli, world, tiny_mlm):
    """--neighbors 1: each certified input's natural neighbours (a real, tiny masked LM's) are certified in turn, and
    synonym patches are tried on those that are not; the summary's shares count exactly the records'."""
    from textaudit.sentence import Sentence

    tiny_mlm.model.save_pretrained(world / "mlm")
    tiny_mlm.tokenizer.save_pretrained(world / "mlm")
    out = _certify(cli, world, "on_class", "--output", str(world / "s.jsonl"), "--neighbors", "1", "--mlm",
                   str(world / "mlm"), "--neighbor-sample", "5", "--patches", "3", "--view-radius", "1")
    recs = _records(world / "s.jsonl")
    viewed = [r for r in recs if "neighbors" in r]
    assert [r["text"] for r in viewed] == sorted((r["text"] for r in recs if r["correct"] and (r["radius"] or 0) >= 1),
                                                 key=lambda t: [x["text"] for x in recs].index(t))
    so = out["second_order"]
    assert so["certified_inputs"] == len(viewed) == 2 and so["neighbors"] == sum(len(r["neighbors"]) for r in viewed)
    assert so["all_neighbors_certified"] == sum(r["all_neighbors_certified"] for r in viewed)
    assert so["with_patch_flip"] == sum(r["patch_flip"] for r in viewed)
    for r in viewed:
        x0 = Sentence.parse(r["text"])
        assert 1 <= len(r["neighbors"]) <= 5
        for nb in r["neighbors"]:
            assert len(Sentence.parse(nb["text"]).diff(x0)) == 1  # a natural neighbour: one word changed
            assert nb["certified"] == (nb["prediction"] == r["label"] and (nb["radius"] or 0) >= 1)
            if "flip" in nb:  # a synonym patch of the lexicon that changes the smoothed prediction (radius 0 only)
                assert (nb["radius"] or 0) < 1
                w1, w2 = nb["flip"]["pair"]
                assert w2 in LEXICON[w1] and nb["flip"]["prediction"] != nb["prediction"]
    r = cli("report", str(world / "s.jsonl"), "--out", str(world / "s.md"), "--format", "md")
    assert r.exit_code == 0 and "natural neighbour" in (world / "s.md").read_text(), r.output
    out = _certify(cli, world, "on_class", "--output", str(world / "s0.jsonl"), "--neighbors", "1", "--mlm",
                   str(world / "mlm"), "--neighbor-sample", "2", "--patches", "1")  # the default view radius, 0
    assert out["second_order"]["certified_inputs"] == sum(r["correct"] for r in _records(world / "s0.jsonl")) == 4


# --- RanMASK: smoothing over masked words (any replacement of up to d words) ---------------------------------------

RANMASK_PLUGINS = '''
def always(texts):  # positive whatever it reads: p_A = 1 everywhere
    return [[0.2, 0.8] for _ in texts]

def sees_dull(texts):  # negative while the word "dull" is left unmasked: one word decides it
    return [[0.8, 0.2] if "dull" in t.split() else [0.2, 0.8] for t in texts]
'''


def test_ranmask_delta_and_radius_follow_the_theorem():
    from textaudit.robustness.smoothing import kept_words, ranmask_delta, ranmask_radius

    assert kept_words(20, 0.9) == 2 and kept_words(3, 0.9) == 2 and kept_words(1, 0.9) == 1 and kept_words(10, 0.5) == 5
    assert kept_words(10, 0.0) == 10  # nothing masked: the classifier itself
    assert ranmask_delta(5, 2, 1) == pytest.approx(1 - 6 / 10) and ranmask_delta(5, 2, 2) == pytest.approx(1 - 3 / 10)
    assert ranmask_delta(20, 2, 0) == 0.0 and ranmask_delta(20, 2, 19) == 1.0 and ranmask_delta(4, 2, 5) == 1.0
    # h = 20, k = 2: Δ_d = 1 − C(20 − d, 2)/190 → 0.100, 0.195, 0.284, 0.368, 0.447, 0.521: 0.99 survives d = 5
    assert ranmask_radius(0.99, 20, 2) == 5 and ranmask_radius(0.62, 20, 2) == 1 and ranmask_radius(0.55, 20, 2) == 0
    assert ranmask_radius(0.5, 20, 2) is None  # no majority: abstain
    assert ranmask_radius(0.99, 10, 10) == 0  # nothing masked: any one word is seen, nothing certified beyond 0


@pytest.fixture()
def masked_world(tmp_path):
    (tmp_path / "m.py").write_text(RANMASK_PLUGINS)
    rows = [(1, "a good film and a movie ."), (0, "a dull plot ."),
            (1, "one of the most moving and beautifully made films of the year , a joy to watch .")]
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(f"{y}\t{t}\n" for y, t in rows))
    return tmp_path


def _ranmask(cli, w, model, *extra):
    r = cli("certify", "--model", f"{w}/m.py:{model}", "--method", "ranmask", "--data", str(w / "d.tsv"),
            "--samples", "300", "--selection", "30", "--neighbors", "0", "--json", *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_ranmask_certifies_a_constant_model_at_the_radius_the_theorem_gives(cli, masked_world):
    from textaudit.robustness.smoothing import kept_words, ranmask_radius

    out = _ranmask(cli, masked_world, "always", "--output", str(masked_world / "a.jsonl"))
    p = 0.05 ** (1 / 300)  # every draw votes positive
    for r in _records(masked_world / "a.jsonl"):
        h = sum(any(c.isalnum() for c in t) for t in r["text"].split())
        assert (r["words"], r["kept"], r["p_a_lower"]) == (h, kept_words(h, 0.9), pytest.approx(p, abs=1e-6))
        assert r["radius"] == ranmask_radius(p, h, kept_words(h, 0.9)) and r["prediction"] == 1
    long = max(_records(masked_world / "a.jsonl"), key=lambda r: r["words"])
    # h = 16, k = 2: Δ_d = 1 − C(16 − d, 2)/120; Δ_4 = 1 − 66/120 = 0.450, Δ_5 = 1 − 55/120 = 0.542; p_A ≥ 0.990
    assert (long["words"], long["kept"], long["radius"]) == (16, 2, 4) and long["radius_share"] == 0.25
    assert out["method"] == "ranmask" and out["accuracy"] == pytest.approx(2 / 3, abs=1e-4)  # the negative row is wrong


def test_ranmask_draws_mask_all_but_k_words_and_a_one_word_model_is_not_certified_beyond_0(cli, masked_world):
    from textaudit.models import as_classifier
    from textaudit.robustness.smoothing import RanMASK

    clf = as_classifier(lambda texts: [[0.5, 0.5] for _ in texts], name="tie")
    text = "a good film , and a movie !"
    draws = RanMASK(clf, rate=0.5, seed=3).draws(text, "0", 400, 1)
    for d in draws:  # h = 6 words (punctuation stays), k = 6 − round(3) = 3 kept, the others [MASK]
        toks = d.split()
        assert len(toks) == 8 and toks[3] == "," and toks[7] == "!" and toks.count("[MASK]") == 3
        assert all(t == o for t, o in zip(toks, text.split()) if t != "[MASK]")
    kept_good = sum("good" in d.split() for d in draws) / len(draws)  # each word is kept with probability k/h
    assert abs(kept_good - 3 / 6) < 0.08
    assert draws == RanMASK(clf, rate=0.5, seed=3).draws(text, "0", 400, 1) != RanMASK(clf, rate=0.5, seed=4).draws(
        text, "0", 400, 1)  # seeded
    _ranmask(cli, masked_world, "sees_dull", "--output", str(masked_world / "d.jsonl"))
    dull = next(r for r in _records(masked_world / "d.jsonl") if "dull" in r["text"])
    # h = 3, k = 2: "dull" is kept in 2/3 of the draws → negative, right, p_A ≈ 2/3, but Δ_1 = 1 − C(2, 2)/C(3, 2) = 2/3
    assert (dull["prediction"], dull["radius"], dull["kept"]) == (0, 0, 2) and abs(dull["n_a"] / 300 - 2 / 3) < 0.1


def test_ranmask_runs_resume_and_render(cli, masked_world):
    _ranmask(cli, masked_world, "sees_dull", "--output", str(masked_world / "one.jsonl"), "--in-flight", "1")
    _ranmask(cli, masked_world, "sees_dull", "--output", str(masked_world / "three.jsonl"), "--in-flight", "3")
    assert _records(masked_world / "one.jsonl") == _records(masked_world / "three.jsonl")
    lines = (masked_world / "one.jsonl").read_text().splitlines()
    (masked_world / "cut.jsonl").write_text("\n".join(lines[:2]) + "\n" + lines[2][:40])  # killed mid-record
    _ranmask(cli, masked_world, "sees_dull", "--output", str(masked_world / "cut.jsonl"), "--resume")
    assert _records(masked_world / "cut.jsonl") == _records(masked_world / "one.jsonl")
    r = cli("certify", "--model", f"{masked_world}/m.py:sees_dull", "--method", "ranmask", "--data",
            str(masked_world / "d.tsv"), "--samples", "300", "--selection", "30", "--neighbors", "0", "--mask-rate", "0.5",
            "--output", str(masked_world / "one.jsonl"), "--resume")
    assert r.exit_code == 2 and "mask_rate" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = cli("report", str(masked_world / "one.jsonl"), "--out", str(masked_world / "r.md"), "--format", "md")
    page = (masked_world / "r.md").read_text()
    assert r.exit_code == 0 and "Randomized smoothing (RanMASK)" in page and "words replaced" in page, r.output
    from textaudit.errors import TextAuditError
    from textaudit.results import load

    assert load(masked_world / "one.jsonl").summary()["method"] == "ranmask"
    # a line pasted twice would count an input twice: every reader refuses the file, in one line naming both lines
    pasted = masked_world / "pasted.jsonl"
    pasted.write_text("\n".join([*lines, lines[1]]) + "\n")
    repeat = f"pasted.jsonl:{len(lines) + 1} repeats the record of line 2"
    with pytest.raises(TextAuditError, match=repeat):
        load(pasted)
    for args in (["report", str(pasted), "--out", str(masked_world / "p.md")],
                 ["merge", str(masked_world / "m.jsonl"), str(pasted)]):
        r = cli(*args)
        assert r.exit_code == 2 and repeat in " ".join(r.output.split()) and "Traceback" not in r.output, r.output
    assert not (masked_world / "m.jsonl").exists() and not (masked_world / "p.md").exists()
    before = pasted.read_bytes()
    r = cli("certify", "--model", f"{masked_world}/m.py:sees_dull", "--method", "ranmask", "--data",
            str(masked_world / "d.tsv"), "--samples", "300", "--selection", "30", "--neighbors", "0",
            "--output", str(pasted), "--resume")
    assert r.exit_code == 2 and repeat in " ".join(r.output.split()) and pasted.read_bytes() == before, r.output


def test_a_smoothed_classifier_that_answers_one_class_is_said_to_be_a_constant(cli, masked_world):
    """RanMASK at ρ = 0.9 on a model that never saw masks can answer one class whatever the text: its certificates
    are a constant's, and the run says so (--json 'warnings', a line on stderr) — the records are kept all the same."""
    rows = [(i % 2, f"a {'dull' if i % 2 == 0 else 'good'} plot number {i} .") for i in range(24)]
    (masked_world / "d.tsv").write_text("label\ttext\n" + "".join(f"{y}\t{t}\n" for y, t in rows))
    out = _ranmask(cli, masked_world, "always")
    assert out["accuracy"] == 0.5 and len(out["warnings"]) == 1 and "answers '1' for 100% of the texts" in out["warnings"][0]
    assert "--mask-rate" in out["warnings"][0]
    out = _ranmask(cli, masked_world, "sees_dull", "--mask-rate", "0.0")  # nothing masked: it reads every word
    assert out["accuracy"] == 1.0 and "warnings" not in out


def test_a_report_of_smoothing_and_ibp_puts_them_side_by_side(cli, tmp_path):
    """A report given an IBP certification and a smoothing one of the same examples has one section with both:
    the table (smoothing by radius, IBP every word at once) and one curve with IBP as a level."""
    from textaudit.models.zoo import train_model

    for name in ("bow-ibp", "bow"):
        train_model(name, max_train=1500, epochs=1, progress=False)
    r = cli("certify", "--model", "bow-ibp", "--limit", "30", "--output", str(tmp_path / "ibp.jsonl"), "--json")
    assert r.exit_code == 0, r.output
    ibp = json.loads(r.stdout.strip().splitlines()[-1])
    out = _ranmask_cli(cli, "bow", "--limit", "30", "--output", str(tmp_path / "rm.jsonl"))
    r = cli("report", str(tmp_path / "ibp.jsonl"), str(tmp_path / "rm.jsonl"), "--out", str(tmp_path / "r.md"),
            "--format", "md")
    page = (tmp_path / "r.md").read_text()
    assert r.exit_code == 0 and "Certified accuracy side by side" in page, r.output
    side = page[page.index("Certified accuracy side by side"):]
    assert "bow (RanMASK)" in side and "bow-ibp (IBP)" in side and str(ibp["certified_accuracy"]) in side
    assert str(out["accuracy"]) in side
    r = cli("report", str(tmp_path / "rm.jsonl"), "--out", str(tmp_path / "one.md"), "--format", "md")
    assert r.exit_code == 0 and "side by side" not in (tmp_path / "one.md").read_text()  # one certification: no pair


def _ranmask_cli(cli, model, *extra):
    r = cli("certify", "--model", model, "--method", "ranmask", "--samples", "100", "--selection", "10",
            "--neighbors", "0", "--json", *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout.strip().splitlines()[-1])


SLOW = '''
import time

def on_class(texts):  # a model that takes its time: 20 ms a batch
    time.sleep(0.02)
    return [[0.2, 0.8] if {"film", "movie", "picture"} & set(t.lower().split()) else [0.8, 0.2] for t in texts]
'''


def test_certify_says_its_time_and_its_progress_moves_with_the_texts_answered(world):
    """Before the draws: their time at the pace measured here; while every example is in flight (their draws
    in one call, answered batch by batch) the progress line's texts grow (#67: the bar sat at 0/5 for minutes)."""
    import os
    import re
    import subprocess
    import sys

    (world / "slow.py").write_text(SLOW)
    env = {**os.environ, "TEXTAUDIT_PROGRESS_SECONDS": "0.2", "TEXTAUDIT_CACHE": str(world / "cache")}
    # SST-2 sentences and the counter-fitted synonyms: thousands of distinct draws, answered 128 a batch
    r = subprocess.run([sys.executable, "-m", "textaudit", "certify", "--model", f"{world}/slow.py:on_class", "--method",
                        "safer", "--data", "sst2:dev", "--limit", "4", "--samples", "3000", "--selection", "100",
                        "--neighbors", "0", "--json"], capture_output=True, text=True, env=env, timeout=1800, cwd=world)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stderr.splitlines()
    cost = next(i for i, x in enumerate(lines) if x.startswith("cost: up to 12,400 texts"))
    time_line = next(i for i, x in enumerate(lines) if x.startswith("time: the draws take up to "))
    # four examples: all of them are the first, timed ones — no estimate of a rest
    assert re.search(r" at [\d,]+ texts/s measured here; the progress line follows", lines[time_line])
    assert not any(x.startswith("time: about ") for x in lines)
    first = next(i for i, x in enumerate(lines) if x.startswith("certify (SAFER): "))
    assert cost < time_line < first
    seen = [(int(m.group(1)), int(m.group(2).replace(",", "")))
            for m in re.finditer(r"certify \(SAFER\): (\d)/4 ex .*asked=([\d,]+)", r.stderr)]
    assert seen and [a for _, a in seen] == sorted(a for _, a in seen)  # the work only grows
    # it moves between two lines with no more examples done
    assert any(a[0] == b[0] < 4 and b[1] > a[1] for a, b in zip(seen, seen[1:])), r.stderr[-3000:]
    assert seen[-1][1] <= 12_400


def test_a_synonyms_file_is_read_as_the_data_is_and_a_resume_needs_its_content(cli, world):
    """#63: keys with capitals were silently unused (an input certified at a radius a listed swap breaks) and a
    key without a letter could never apply; a resume after the file changed mixed two threat models (the header
    held its path). Now keys are normalised as the data is, a key that can never apply is one line, and the
    header holds the table's content digest."""
    _certify(cli, world, "on_film", "--output", str(world / "lower.jsonl"))
    shouted = {k.upper() if k in ("film", "good") else k: [v.title() for v in vs] for k, vs in LEXICON.items()}
    (world / "shout.json").write_text(json.dumps(shouted))
    r = cli("certify", "--model", f"{world}/m.py:on_film", "--method", "safer", "--data", str(world / "d.tsv"),
            "--synonyms", str(world / "shout.json"), "--hops", "1", "--samples", "200", "--selection", "20",
            "--output", str(world / "shout.jsonl"), "--json")
    assert r.exit_code == 0, r.output
    # FILM and Good are film and good: the same draws, the same radii (film's swaps break the on_film model)
    assert _records(world / "shout.jsonl") == _records(world / "lower.jsonl")
    assert [x["radius"] for x in _records(world / "shout.jsonl")] == [0, 0, 0, 0]
    (world / "digits.json").write_text(json.dumps({**LEXICON, "1990s": ["nineties"], "2": ["two"]}))
    r = cli("certify", "--model", f"{world}/m.py:on_film", "--method", "safer", "--data", str(world / "d.tsv"),
            "--synonyms", str(world / "digits.json"))
    assert r.exit_code == 2 and "the key '2' holds no letter" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    changed = {**LEXICON, "film": ["movie"]}  # picture is no longer film's substitute: another threat model
    (world / "syn.json").write_text(json.dumps(changed))
    r = cli("certify", "--model", f"{world}/m.py:on_film", "--method", "safer", "--data", str(world / "d.tsv"),
            "--synonyms", str(world / "syn.json"), "--hops", "1", "--samples", "200", "--selection", "20",
            "--output", str(world / "lower.jsonl"), "--resume")
    assert r.exit_code == 2 and "synonyms_digest" in r.stderr


def test_votes_on_a_sampling_endpoint_are_its_samples_and_the_summary_says_how_many_distinct_answers(tmp_path):
    """#63 (misleading): a label-only endpoint that samples its answer ("positive" with probability 0.7 for a text
    holding "movie": a real completions server on 127.0.0.1) under a threat model with nothing to substitute: every
    one of the 200 draws is the same text, answered once (cached). Its votes were that one answer's mode counted 200
    times (n_a = 200, p_A ≥ 0.98: certain); each vote is now one of its sampled completions (n_a ≈ 140), and the
    record and the summary say the votes rest on one distinct answer."""
    from test_decisions import SAMPLING_PROMPT, _sampling_server

    from textaudit.engine.scheduler import run_now
    from textaudit.models import load_classifier
    from textaudit.models.options import ModelOptions
    from textaudit.robustness.smoothing import lower_bound, summarize_certify

    srv = _sampling_server()
    try:
        (tmp_path / "prompt.toml").write_text(SAMPLING_PROMPT)
        clf = load_classifier(f"http://127.0.0.1:{srv.server_address[1]}/v1/completions",
                              options=ModelOptions(prompt_file=tmp_path / "prompt.toml", scores="labels", samples=20))
        safer = SAFER(clf, PerturbationSets({}, hops=1), samples=200, selection=20, seed=0)
        cert = run_now(safer.ask_certify("a good movie here", "0"))
    finally:
        srv.shutdown()
        srv.server_close()
    assert cert["answers"] == 1 and cert["prediction"] == 1
    assert 110 <= cert["n_a"] <= 170 and cert["p_a_lower"] == pytest.approx(lower_bound(cert["n_a"], 200, 0.05), abs=1e-6)
    assert cert["p_a_lower"] < 0.8  # not the certainty of one answer counted 200 times
    again = run_now(safer.ask_certify("a good movie here", "0"))
    assert again["n_a"] == cert["n_a"]  # the votes' draws are seeded: the same record on a rerun
    summary = summarize_certify([{**cert, "label": 1, "correct": True}])
    assert summary["distinct_answers"] == 1 and summary["votes"] == sum(cert["votes"])
    assert summary["distinct_answers_per_vote"] == pytest.approx(1 / sum(cert["votes"]), abs=1e-4)


def test_a_label_only_endpoint_that_answers_by_turns_is_never_certified_from_one_answer(tmp_path):
    """#82 (WRONG): a label-only endpoint whose answer to one text alternates between requests (temperature 0, yet not
    deterministic: a real completions server on 127.0.0.1 that answers by turns) was certified from one cached answer
    counted as 200 votes (the record said ``answers: 1``, the certificate stood). The repeated draws are asked again,
    fresh: an answer that varies makes the certificate abstain, and the record and the summary say why."""
    from test_decisions import SAMPLING_PROMPT, completions_server

    from textaudit.engine.scheduler import run_now
    from textaudit.models import load_classifier
    from textaudit.models.options import ModelOptions
    from textaudit.robustness.smoothing import summarize_certify

    turns = {"n": 0}

    def by_turns(text: str, body: dict) -> str:  # positive, negative, positive, … whatever the text
        turns["n"] += 1
        return " positive" if turns["n"] % 2 else " negative"

    srv = completions_server(by_turns)
    try:
        (tmp_path / "prompt.toml").write_text(SAMPLING_PROMPT)
        clf = load_classifier(f"http://127.0.0.1:{srv.server_address[1]}/v1/completions",
                              options=ModelOptions(prompt_file=tmp_path / "prompt.toml", scores="labels"))
        safer = SAFER(clf, PerturbationSets({}, hops=1), samples=200, selection=20, seed=0)
        cert = run_now(safer.ask_certify("a good movie here", "0"))
    finally:
        srv.shutdown()
        srv.server_close()
    assert cert["answers"] == 1 and cert["varying"] == 1  # one text drawn 200 times; asked again, it answered otherwise
    assert cert["abstain"] and cert["radius"] is None and cert["prediction"] is None
    summary = summarize_certify([{**cert, "label": 1, "correct": False}])
    assert summary["varying_answers"] == 1 and summary["abstain"] == 1


def test_the_certify_estimate_comes_from_its_first_examples_and_the_share_they_view(monkeypatch):
    """The first examples (a fifth: 4 of 20) run alone and are timed: the rest cost their draws (n0 + n texts) and,
    for the share of inputs viewed ((v + 1) / (n + 2): 2 of 4 → ½), the view's texts and contexts measured on them,
    at the pace measured — the old line said the draws' time alone, while the view is up to 40× more. As the run goes
    the share is re-made from the examples past their draws, those in their view counted viewed."""
    import textaudit.progress as progress_module
    from textaudit.robustness.certify_clock import CertifyClock, first_examples

    now = [50.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now[0])
    asked = [0.0, 0.0, 0.0, 0.0]
    clock = CertifyClock(lambda: tuple(asked), todo=20, draws=120, neighbors=8)
    assert clock.first == first_examples(20) == 4 and first_examples(3) == 3 and first_examples(200) == 16
    assert clock.remaining() is None and clock.estimate_line() is None
    # the four: 4 × 120 draws; two of them viewed, 500 texts and 10 contexts each; 0.01 s a text, 0.1 s a context
    asked[:] = [4 * 120 + 2 * 500, 20.0, 0.01 * 1480, 0.1 * 20]
    now[0] += 16.8
    for i, viewed in enumerate([True, False, True, False]):
        assert clock.add({"neighbors": [{"text": "x"}] if viewed else None}) == (i == 3)
    assert clock.expected == pytest.approx((20 * (120 + 0.5 * 500), 20 * 0.5 * 10))
    assert clock.remaining() == pytest.approx((7400 - 1480) * 0.01 + (100 - 20) * 0.1)
    assert clock.estimate_line() == ("time: about 1m07s more for the other 16 examples — the first 4 took 17s, 2 of them "
                                     "certified and viewed (the view: 500 texts and 10 contexts each; expected for 50% "
                                     "of the inputs); the progress line's ETA follows the texts and contexts asked")
    # later, the share is re-made from every example past its draws: the unviewed finish first, and counted alone
    # they would read it low (2 of 8 finished viewed: 3/10); the three in their view are counted viewed (6/13)
    views, mine = [0], [0.0, 0.0, 0.0, 0.0]
    live = CertifyClock(lambda: tuple(mine), todo=20, draws=120, neighbors=8, views=lambda: views[0])
    views[0], mine[:] = 2, asked[:]  # the first four as above, two of them viewed
    for viewed in [True, False, True, False]:
        live.add({"neighbors": [{"text": "x"}] if viewed else None})
        live.finish({"neighbors": [{"text": "x"}] if viewed else None})
    for _ in range(4):
        live.finish({})
    assert live.share() == pytest.approx(3 / 10)
    views[0] += 3
    assert live.share() == pytest.approx(6 / 13)
    live.remaining()
    assert live.expected == pytest.approx((20 * (120 + 6 / 13 * 500), 20 * 6 / 13 * 10))
    # more asked than projected while examples remain: no ETA rather than "ETA 0s"
    asked[0] += 10_000
    assert clock.remaining() == pytest.approx((100 - 20) * 0.1 * (16.8 / (14.8 + 2)))  # the contexts left (the host:
    # the texts' seconds did not grow, 16.8 s of wall over 16.8 s of forwards)
    asked[1] += 1_000
    assert clock.remaining() is None
    # none of the first viewed: a view costs at least its neighbours' draws; without the view, the draws alone
    none = CertifyClock(lambda: tuple(asked), todo=20, draws=120, neighbors=8)
    for _ in range(4):
        none.add({})
    assert none.per_view == (8 * 120, 0.0) and none.share() == pytest.approx(1 / 6)
    off = CertifyClock(lambda: tuple(asked), todo=20, draws=120)
    for _ in range(4):
        off.add({})
    assert off.expected == (20 * 120, 0.0)


def test_a_certified_one_word_input_skips_the_second_order_view_without_ending_the_run(cli, world, tiny_mlm):
    """The view asks the masked LM for natural neighbours, which a one-word text ("cool ?") has none of: the run goes
    on, the record says why it has no view, and the summary counts it apart from the certified inputs it viewed."""
    tiny_mlm.model.save_pretrained(world / "mlm")
    tiny_mlm.tokenizer.save_pretrained(world / "mlm")
    (world / "d.tsv").write_text("label\ttext\n" + "".join(f"{y}\t{t}\n" for y, t in [*ROWS, (1, "film !")]))
    out = _certify(cli, world, "on_class", "--output", str(world / "short.jsonl"), "--neighbors", "1", "--mlm",
                   str(world / "mlm"), "--neighbor-sample", "2", "--patches", "1")
    short = [r for r in _records(world / "short.jsonl") if r["text"] == "film !"]
    assert short and short[0]["correct"] and "fewer than two words" in short[0]["view_skipped"]
    assert "neighbors" not in short[0]
    so = out["second_order"]
    assert so["skipped_too_short"] == 1 and so["certified_inputs"] == 4  # the four of ROWS, viewed as before
