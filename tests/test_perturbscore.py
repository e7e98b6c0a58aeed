"""PerturbScore: PGD shift vs ε, ε search, inline marking, tuple building and the scorer."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from textaudit.errors import TextAuditError
from textaudit.results import read_jsonl
from textaudit.robustness.perturbscore import (
    differentiable,
    edit_distance,
    find_epsilon,
    mark,
    model_shift,
    pgd_shifts,
    unmark,
)

WORDS = "a the film movie good bad great awful plot acting story fun dull and is was it".split()


@pytest.fixture(scope="module", params=["cnn", "lstm"])
def tiny(request):
    from textaudit.models.torch_backend import torch_classifier
    from textaudit.models.zoo.architectures import build_module
    from textaudit.models.zoo.vocab import Vocab, WordTokenizer

    torch.manual_seed(0)
    vocab = Vocab(WORDS)
    emb = torch.randn(len(vocab), 50) * 0.5
    module = build_module(request.param, emb, 2).eval()
    return torch_classifier(module, WordTokenizer(vocab), name=f"tiny-{request.param}", device="cpu", num_classes=2)


def test_pgd_shift_grows_with_epsilon(tiny):
    sm = differentiable(tiny)
    s = pgd_shifts(sm, "a good film and a great story", [0.001, 0.01, 0.05, 0.1, 0.3, 1.0])
    assert (np.diff(s) > 0).all() and s[0] < 0.01 and s[-1] > 0.01


def test_identical_text_has_epsilon_zero_and_a_real_swap_gets_one(tiny):
    sm = differentiable(tiny)
    x = "a good film and a great story"
    assert model_shift(sm, x, x) == pytest.approx(0.0, abs=1e-6)
    assert find_epsilon(sm, x, model_shift(sm, x, x)) == (0.0, 0.0)
    d = model_shift(sm, x, "a bad film and a great story")
    assert d > 0
    eps, at = find_epsilon(sm, x, d, max_eps=2.0)
    if eps is not None:
        assert 0 < eps <= 2.0 and abs(at - d) <= 0.005
    else:
        assert at < d or at - d > 0.005


def test_mark_round_trips_and_edit_distance():
    x, y = "it 's a good film , really .", "it 's a bad movie , really ."
    m = mark(x, y)
    assert m == "it 's a good [bad] film [movie] , really ."
    assert unmark(m) == (x, y)
    assert edit_distance(x, y) == 2 and edit_distance(x, x) == 0 and edit_distance("a b c", "a c") == 1
    with pytest.raises(TextAuditError, match="word-for-word"):
        mark("a b", "a b c")


def test_non_torch_model_is_refused():
    from textaudit.models import as_classifier

    with pytest.raises(TextAuditError, match="not a torch model"):
        differentiable(as_classifier(lambda t: [[0.5, 0.5]] * len(t)))


def test_build_tuples_resumes_without_duplicates(tiny, tmp_path):
    from textaudit.robustness.perturbscore import build_tuples

    texts = ["a good film and a great story", "the plot is dull and the acting awful", "it was fun"]
    out = tmp_path / "t.jsonl"
    build_tuples(tiny, texts, n=4, output=out, progress=False, max_eps=2.0)
    first = out.read_text().splitlines()
    recs = build_tuples(tiny, texts, n=7, output=out, resume=True, progress=False, max_eps=2.0)
    ids = [r["id"] for r in read_jsonl(out)]
    assert len(ids) == 7 == len(set(ids)) and out.read_text().splitlines()[:5] == first  # header + 4
    assert all(r["edit_distance"] >= 1 for r in recs if r["kept"])
    assert all((r["eps"] is None) != r["kept"] for r in recs)


def test_max_words_sets_the_edit_distances_spanned(tiny, tmp_path):
    from textaudit.robustness.perturbscore import build_tuples

    texts = ["a good film and a great story with fun acting and a dull plot"]
    few = build_tuples(tiny, texts, n=12, progress=False, max_eps=2.0)
    many = build_tuples(tiny, texts, n=12, progress=False, max_eps=2.0, max_words=8, output=tmp_path / "t.jsonl")
    assert max(r["edit_distance"] for r in few) <= 3 < max(r["edit_distance"] for r in many) <= 8
    assert json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])["header"]["config"]["max_words"] == 8
    with pytest.raises(TextAuditError, match="--max-words must be at least 1"):
        build_tuples(tiny, texts, n=1, progress=False, max_words=0)


def test_scorer_trains_saves_and_reloads(tmp_path):
    from textaudit.robustness.perturbscore import PerturbScorer, evaluate_scorer

    rng = np.random.default_rng(0)
    base = ["a good film and a great story", "the plot is dull and the acting awful", "it was fun and good"]
    tuples = []
    for i in range(24):
        x = base[i % 3]
        toks = x.split()
        k = 1 + i % 3
        for j in rng.choice(len(toks), k, replace=False):
            toks[j] = WORDS[int(rng.integers(len(WORDS)))]
        tuples.append({"x": x, "x_prime": " ".join(toks), "edit_distance": edit_distance(x, " ".join(toks)),
                       "eps": 0.1 * k, "kept": True})
    sc = PerturbScorer(device="cpu")
    before = np.mean((sc.predict([mark(t["x"], t["x_prime"]) for t in tuples]) - 0.2) ** 2)
    sc.fit(tuples, epochs=4, lr=1e-4, batch_size=8, progress=False)
    pred = sc.predict([mark(t["x"], t["x_prime"]) for t in tuples])
    assert np.mean((pred - np.array([t["eps"] for t in tuples])) ** 2) < before
    sc.save(tmp_path / "s")
    again = PerturbScorer(tmp_path / "s", device="cpu")
    assert again.score(tuples[0]["x"], tuples[0]["x_prime"]) == pytest.approx(float(pred[0]), abs=1e-4)
    res = evaluate_scorer(again, tuples)
    assert set(res["methods"]) == {"perturbscorer", "edit_distance", "embedding_distance"}
    assert res["methods"]["edit_distance"]["spearman"] > 0.6  # ε was planted as 0.1 × words changed
    with pytest.raises(TextAuditError, match="not a PerturbScorer directory"):
        PerturbScorer(tmp_path)


def test_cli_perturbscore_errors(cli, tmp_path):
    r = cli("perturbscore", "train", "--tuples", str(tmp_path / "none.jsonl"))
    assert r.exit_code == 2 and "run 'audit perturbscore build" in r.output
    r = cli("perturbscore", "score", "a good film", "a bad film", "--scorer", str(tmp_path))
    assert r.exit_code == 2 and "not a PerturbScorer directory" in r.output
    r = cli("perturbscore", "build", "--model", "nope")
    assert r.exit_code == 2 and "unknown model 'nope'" in r.output
    r = cli("perturbscore", "build", "--perturbation", "shuffle")
    assert r.exit_code == 2 and "--perturbation must be random-swap or synonym-swap (got 'shuffle')" in r.output
    r = cli("perturbscore", "build", "--space", "logits")
    assert r.exit_code == 2 and "--space must be hidden or probs" in r.output


def test_split_keeps_each_sentence_on_one_side():
    from textaudit.robustness.perturbscore import split_tuples

    recs = [{"x": f"s{i % 7}", "x_prime": "y", "eps": 0.1, "kept": True} for i in range(50)]
    recs.append({"x": "dropped", "kept": False})
    tr, te = split_tuples(recs)
    assert len(tr) + len(te) == 50 and not {r["x"] for r in tr} & {r["x"] for r in te}
    assert 0.1 <= len(te) / 50 <= 0.35
    with pytest.raises(TextAuditError, match="only 0 usable tuples"):
        split_tuples([{"x": "a", "kept": False}])


def test_a_float_noise_shift_counts_as_zero(tiny):
    """On a GPU 1 − cos(h, h) is ~1e-7, not 0: that is no shift, so ε = 0 without a search."""
    sm = differentiable(tiny)
    assert find_epsilon(sm, "a good film", 1e-7) == (0.0, 0.0)
    assert find_epsilon(sm, "a good film", 0.05)[0] != 0.0


def test_half_precision_encoder_weights_still_score(tmp_path, monkeypatch):
    """Weights saved in fp16 load as fp16 under transformers 5; the scorer and the similarity encoder
    must still run (fp32 head) — this failed with 'mat1 and mat2 must have the same dtype'."""
    from transformers import AutoModel, AutoTokenizer

    from textaudit.models.encoders import SentenceEncoder
    from textaudit.resources import resolve
    from textaudit.robustness.perturbscore import PerturbScorer

    half = tmp_path / "data" / "minilm"
    AutoModel.from_pretrained(resolve("minilm")).half().save_pretrained(half)
    AutoTokenizer.from_pretrained(resolve("minilm")).save_pretrained(half)
    (half / "vocab.txt").write_bytes((resolve("minilm") / "vocab.txt").read_bytes())
    monkeypatch.setenv("TEXTAUDIT_DATA", str(tmp_path / "data"))
    assert resolve("minilm") == half
    sc = PerturbScorer(device="cpu")
    assert next(sc.encoder.parameters()).dtype == torch.float32
    assert np.isfinite(sc.predict([mark("a good film", "a great film")])).all()
    enc = SentenceEncoder(device="cpu")
    assert next(enc.model.parameters()).dtype == torch.float32
