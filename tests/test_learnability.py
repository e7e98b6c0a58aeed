"""Perturbations (exact seeded outputs, asymmetry) and the learnability estimators on planted cases."""

from __future__ import annotations

import json
import math
import random

import pytest

from textaudit.data import load_dataset
from textaudit.errors import TextAuditError
from textaudit.perturbations.noise import NOISE_PERTURBATIONS, get_perturbation, register_perturbation
from textaudit.robustness.learnability import (
    average_learnability,
    learnability_at,
    robustness_and_augmentation,
    zoo_fitter,
)

T = "Please tell me, are you really going to the movie tonight? It is great!"
EXPECTED_SEED0 = {
    "whitespace_perturbation": "Please tell me, are you really going  to t he movie tonight? It is great!",
    "shuffle_word": "tell tonight? movie really It me, are to the you Please is going great!",
    "duplicate_punctuations": "Please tell me, are you really going to the movie tonight? It is great!!",
    "butter_fingers_perturbation": "Please tell me, are you really going to the mpvie tonight? It is great!",
    "random_upper_transformation": "Please tell me, are you really goinG to The movie toNight? It is great!",
    "insert_abbreviation": "Please tell me, are u rly going to the movie 2nite? It is great!",
    "visual_attack_letters": "Pleaѕe tell me, áŕe уou really ġoiňg tо thë movie tonigĥţ? It iš greaţ!",
    "leet_letters": "Ple45e 7e11 me, are y0u rea1ly goin9 to th3 m0v1e ton1gh7? It 1s 9rea7!",
}


@pytest.mark.parametrize("name", list(EXPECTED_SEED0))
def test_exact_seeded_outputs(name):
    assert NOISE_PERTURBATIONS[name](T, random.Random(0)) == EXPECTED_SEED0[name]
    assert NOISE_PERTURBATIONS[name](T, random.Random(0)) == NOISE_PERTURBATIONS[name](T, random.Random(0))


@pytest.mark.parametrize("name", list(EXPECTED_SEED0))
def test_asymmetric(name):
    g = NOISE_PERTURBATIONS[name]
    rng = random.Random(1)
    assert any(g(g(T, rng), rng) != T for _ in range(5))


def test_registry():
    register_perturbation("shout", lambda text, rng: text.upper() + "!!")
    assert get_perturbation("shout")("hi", random.Random(0)) == "HI!!"
    assert get_perturbation("leet_letters", prob=1.0)("tool", random.Random(0)) == "7001"
    with pytest.raises(TextAuditError, match="unknown perturbation 'nope'"):
        get_perturbation("nope")
    NOISE_PERTURBATIONS.pop("shout")


def test_average_learnability_trapezoid_on_log_p():
    ps = [0.001, 0.01, 0.1, 1.0]
    assert average_learnability(ps, [0.5] * 4) == pytest.approx(0.5)
    # v = (log10 p + 3) / 3 is linear in log p from 0 to 1: its mean over [-3, 0] is 0.5
    assert average_learnability(ps, [(math.log10(p) + 3) / 3 for p in ps]) == pytest.approx(0.5)
    # a step: 0 until 0.1, then 1 at 1.0 -> only the last trapezoid (width 1 of 3) has area 0.5
    assert average_learnability(ps, [0, 0, 0, 1]) == pytest.approx(0.5 / 3)
    with pytest.raises(TextAuditError):
        average_learnability([0.0, 1.0], [0, 1])


@pytest.fixture(scope="module")
def small():
    tr = load_dataset("sst2:train", limit=1500)["text"]
    te = load_dataset("sst2:dev", limit=300)["text"]
    return tr, te


def test_planted_visible_token_is_fully_learnable_and_noop_is_not(small):
    tr, te = small
    fit = zoo_fitter("cnn")
    planted = lambda text, rng: text + " zzplanted"  # an unknown word: the model sees it as <unk>
    hi = learnability_at(fit, tr, te, planted, 1.0, seed=0)
    assert hi["learnability"] > 0.9 and hi["prob_ate"] > 0.8
    assert hi["acc_perturbed"] > 0.95 and hi["acc_clean"] < 0.1
    noop = learnability_at(fit, tr, te, lambda text, rng: text, 1.0, seed=0)
    assert noop["learnability"] == 0.0 and noop["prob_ate"] == 0.0
    low = learnability_at(fit, tr, te, planted, 0.001, seed=0)
    assert abs(low["learnability"]) < 0.1 < hi["learnability"]
    # a perturbation that applies to only some texts: measured on the texts it changes (the treated)
    some = lambda text, rng: text + " zzplanted" if len(text.split()) % 2 == 0 else text
    part = learnability_at(fit, tr, te, some, 1.0, seed=0)
    assert 0.3 * part["n_test"] < part["n_changed"] < 0.7 * part["n_test"]
    assert part["acc_perturbed"] > 0.95 and part["learnability"] > 0.8
    assert noop["n_changed"] == 0 and hi["n_changed"] == hi["n_test"]


def test_robustness_and_augmentation_on_a_destructive_perturbation(small):
    tr, te = small
    ytr = load_dataset("sst2:train", limit=1500)["label"]
    yte = load_dataset("sst2:dev", limit=300)["label"]
    fit = zoo_fitter("bow")
    leet = get_perturbation("leet_letters", prob=1.0)
    r = robustness_and_augmentation(fit, tr, ytr, te, yte, leet, seed=0)
    assert r["robustness"] < -0.1  # every word changes: the clean model loses accuracy
    assert r["post_aug_delta"] > 0.05  # training on leet copies gives much of it back
    assert r["robustness"] == pytest.approx(r["acc_perturbed"] - r["acc_clean"], abs=1e-4)


def test_cli_learnability_resumable(cli, tmp_path):
    out = tmp_path / "runs.jsonl"
    args = ["learnability", "--model", "bow", "--perturbation", "leet_letters,duplicate_punctuations,shuffle_word",
            "--train-size", "600", "--probabilities", "0.1,1.0", "--output", str(out)]
    r = cli(*args, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(d["results"]) == 3 and set(d["spearman"]) == {"learnability_vs_robustness", "learnability_vs_post_aug"}
    first = out.read_text().splitlines()
    assert len(first) == 1 + 3 * 3  # the header, then 3 perturbations × (2 p + robustness)
    r = cli(*args, "--resume", "--json", "--plot", str(tmp_path / "plots"))
    assert r.exit_code == 0, r.output[-800:]
    assert out.read_text().splitlines() == first  # nothing recomputed, nothing duplicated
    assert json.loads(r.stdout.strip().splitlines()[-1]) == d
    assert (tmp_path / "plots" / "learnability_curves.png").is_file()
    r = cli("learnability", "--model", "gpt", "--perturbation", "leet_letters")
    assert r.exit_code == 2 and "unknown model 'gpt'" in r.output
    r = cli("learnability", "--perturbation", "nope")
    assert r.exit_code == 2 and "unknown perturbation 'nope'" in r.output


def test_a_data_file_without_eval_data_is_one_line_and_with_it_the_study_tests_there(cli, tmp_path):
    """A file names no split to hold out: learnability said "unknown dataset 'f.tsv:dev'" after loading the training
    texts; now one line before anything trains, and --eval-data is where the models are tested (its header says so)."""
    import json

    def rows(n: int, start: int) -> str:
        return "label\ttext\n" + "".join(f"{i % 2}\t{'good fine nice' if i % 2 else 'bad dull poor'} film {i} .\n"
                                          for i in range(start, start + n))

    (tmp_path / "train.tsv").write_text(rows(40, 0))
    (tmp_path / "dev.tsv").write_text(rows(8, 100))
    r = cli("learnability", "--model", "bow", "--data", str(tmp_path / "train.tsv"), "--train-size", "40")
    assert r.exit_code == 2 and "give --eval-data" in r.output and "Traceback" not in r.output, r.output
    out = tmp_path / "l.jsonl"
    r = cli("learnability", "--model", "bow", "--data", str(tmp_path / "train.tsv"), "--eval-data",
            str(tmp_path / "dev.tsv"), "--train-size", "40", "--probabilities", "1.0", "--perturbation",
            "butter_fingers_perturbation", "--output", str(out), "--json")
    assert r.exit_code == 0, r.output
    header = json.loads(out.read_text().splitlines()[0])["header"]["config"]
    assert header["eval_data"] == "dev.tsv" and header["data"] == "train.tsv"
    assert json.loads(r.stdout.strip().splitlines()[-1])["results"][0]["model"] == "bow"
