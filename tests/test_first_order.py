"""First-order baselines (Genetic, BAE-R) on planted classifiers, the tiny masked LM and the real
MiniLM sentence encoder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from textaudit.attacks import BAEAttack, GeneticAttack, make_attack
from textaudit.models import as_classifier
from textaudit.models.encoders import SentenceEncoder
from textaudit.results import read_jsonl

X = "a deep and meaningful film ."
NEIGHBORS = {"film": ["movie", "picture"], "deep": ["profound", "thick"], "meaningful": ["significant"]}


def flips_on(word: str, name: str = "planted"):
    """P(positive) = 0.9, but 0.1 once ``word`` occurs (a synonym the model misreads)."""

    def f(texts):
        return np.array([[0.9, 0.1] if word in t.split() else [0.1, 0.9] for t in texts])

    return as_classifier(f, name=name)


@pytest.fixture(scope="module")
def encoder():
    return SentenceEncoder(device="cpu")


def test_genetic_finds_the_flipping_synonym():
    atk = GeneticAttack(flips_on("picture"), neighbors=NEIGHBORS, population=8, generations=5, seed=1)
    r = atk.attack(X, label=1)
    assert r.status == "success" and r.vulnerable == "a deep and meaningful picture ." and r.l0 == 1
    assert r.prediction == 1 and r.vulnerable_prediction == 0 and r.queries > 0


def test_genetic_needs_two_words_when_one_is_not_enough():
    def f(texts):
        return np.array([[0.9, 0.1] if {"picture", "profound"} <= set(t.split()) else
                         [0.4, 0.6] if "picture" in t.split() else [0.1, 0.9] for t in texts])

    atk = GeneticAttack(as_classifier(f), neighbors=NEIGHBORS, population=10, generations=10, max_perturb_ratio=0.5)
    r = atk.attack(X, label=1)
    assert r.status == "success" and r.l0 == 2 and {"picture", "profound"} <= set(r.vulnerable.split())
    # at most 20% of the 5 words may change: one word, so the same model cannot be fooled
    r = GeneticAttack(as_classifier(f), neighbors=NEIGHBORS, population=10, generations=10).attack(X, label=1)
    assert r.status == "failed" and r.reason == "no adversarial example found"


def test_genetic_skips_and_errors():
    atk = GeneticAttack(flips_on("picture"), neighbors=NEIGHBORS, population=4, generations=2)
    assert atk.attack("the of and .", label=1).status == "skipped"  # stop words only
    r = atk.attack(X, label=0)
    assert r.status == "skipped" and r.reason == "already misclassified"
    assert atk.attack("", label=1).status == "error"


def test_sentence_encoder_similarity(encoder):
    sim = encoder.similarity("a great film .", ["a great film .", "a great movie .", "the tax office closes at noon ."])
    assert sim[0] == pytest.approx(1.0, abs=1e-5) and sim[1] > 0.8 > sim[2]


def test_bae_replaces_the_important_word_with_an_mlm_candidate(tiny_mlm, encoder):
    from textaudit.sentence import Sentence

    words = [w for w, _ in tiny_mlm.candidates([(list(Sentence.parse(X).tokens), 3)], top=50)[0]
             if w.isalpha() and w not in X.split()]
    trigger = words[0]
    clf = flips_on(trigger)
    r = BAEAttack(clf, mlm=tiny_mlm, encoder=encoder, threshold=0.0).attack(X, label=1)
    assert r.status == "success" and r.l0 == 1 and trigger in r.vulnerable.split()
    strict = BAEAttack(clf, mlm=tiny_mlm, encoder=encoder, threshold=0.99999).attack(X, label=1)
    assert strict.status == "failed"  # the similarity constraint rejects every candidate


def test_make_attack_and_cli_run_first_order(cli, tmp_path, tiny_mlm):
    assert isinstance(make_attack("genetic", flips_on("picture")), GeneticAttack)
    (tmp_path / "p.py").write_text(
        "def clf(texts):\n    return [[0.9, 0.1] if 'movie' in t.split() else [0.1, 0.9] for t in texts]\n")
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta deep and meaningful film .\n1\tthe of and .\n0\tgood film .\n")
    r = cli("attack", "--model", f"{tmp_path}/p.py:clf", "--method", "genetic", "--data", str(tmp_path / "d.tsv"),
            "--no-ppl", "--json", "--output", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["method"] == "genetic" and s["n"] == 3 and s["skipped"] == 2 and s["success"] == 1
    lines = sorted(read_jsonl(tmp_path / "o.jsonl"), key=lambda l: l["id"])  # written as they finish
    assert [l["status"] for l in lines] == ["success", "skipped", "skipped"]
    assert lines[0]["vulnerable"] == "a deep and meaningful movie ." and lines[0]["l0"] == 1



@pytest.mark.slow
def test_genetic_lm_constraint_keeps_the_likeliest_synonyms():
    from textaudit.engine.scheduler import run_now
    from textaudit.lm import load_causal_lm
    from textaudit.sentence import Sentence

    lm = load_causal_lm(device="cpu")
    many = {"film": ["movie", "films", "cinema", "picture", "kino"]}
    windows = {w: f"and meaningful {w} ." for w in many["film"]}
    ppl = dict(zip(windows, lm.perplexity(list(windows.values()))))
    top2 = sorted(ppl, key=ppl.get)[:2]
    worst = max(ppl, key=ppl.get)
    x0 = Sentence.parse(X)
    # with the constraint, a model fooled only by the least likely synonym is never fooled
    atk = GeneticAttack(flips_on(worst), neighbors=many, population=4, generations=3, lm=lm, lm_top=2, lm_window=2)
    assert atk.attack(X, label=1).status == "failed"
    kept = run_now(atk._perturb([x0] * 4, x0, {4: many["film"]}, 1, 1, np.random.default_rng(0)))
    assert all(m.tokens[4] in top2 for m in kept)
    assert GeneticAttack(flips_on(top2[0]), neighbors=many, population=4, generations=3, lm=lm,
                         lm_top=2, lm_window=2).attack(X, label=1).status == "success"
