"""Certified robustness by IBP: sound bounds, certification, training hooks and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from textaudit.models.ibp import certify, logit_bounds, substitution_table
from textaudit.models.zoo.architectures import build_module
from textaudit.models.zoo.vocab import Vocab, WordTokenizer

WORDS = "a the film movie picture good great fine bad awful poor plot story dull boring fun".split()
NEIGHBORS = {"film": ["movie", "picture"], "good": ["great", "fine"], "bad": ["awful", "poor"],
             "dull": ["boring"], "plot": ["story"]}


def test_substitution_table_rows():
    vocab = Vocab(WORDS)
    t = substitution_table(vocab, NEIGHBORS, max_subs=4)
    row = t[vocab.stoi["film"]].tolist()
    assert row == [vocab.stoi[w] for w in ("film", "movie", "picture", "film")]
    assert t[0].tolist() == [0] * 4 and t[1].tolist() == [1] * 4  # padding, unknown: only themselves


def _random_combinations(ids: torch.Tensor, table: torch.Tensor, n: int, rng) -> torch.Tensor:
    subs = table[ids]  # (T, S)
    pick = torch.from_numpy(rng.integers(0, subs.shape[1], size=(n, ids.shape[0])))
    return subs.gather(1, pick.t()).t()


@pytest.mark.parametrize("arch", ["bow", "cnn", "lstm"])
def test_bounds_contain_every_substitution_combination(arch):
    torch.manual_seed(0)
    vocab = Vocab(WORDS)
    module = build_module(arch, torch.randn(len(vocab), 50), 2).eval()
    table = substitution_table(vocab, NEIGHBORS)
    tok = WordTokenizer(vocab)
    ids = tok(["a good film but a dull plot"])["input_ids"]
    lo, hi = logit_bounds(module, ids, table)
    combos = _random_combinations(ids[0], table, 300, np.random.default_rng(0))
    with torch.no_grad():
        z = module(combos)
    assert (z >= lo - 1e-5).all() and (z <= hi + 1e-5).all()
    assert ((hi - lo) > 0).all()
    lo0, hi0 = logit_bounds(module, ids, table, scale=0.0)  # ε = 0: the box is the sentence itself
    assert torch.allclose(lo0, module(ids), atol=1e-5) and torch.allclose(hi0, module(ids), atol=1e-5)


JIA_LSTM = {"bidirectional": True, "hidden_layer": True, "input_dropout": False}


def test_bidirectional_lstm_bounds_hold_for_each_row_of_a_padded_batch():
    """Jia et al.'s LSTM (both directions, a hidden layer): the backward recursion runs over each row's own words
    reversed, so a short row padded in a batch gets the bounds it gets alone, and they hold every combination."""
    torch.manual_seed(0)
    vocab = Vocab(WORDS)
    module = build_module("lstm", torch.randn(len(vocab), 50), 2, **JIA_LSTM).eval()
    assert module.lstm.bidirectional and module.hidden.in_features == 200
    table = substitution_table(vocab, NEIGHBORS)
    tok = WordTokenizer(vocab)
    texts = ["a good film but a dull plot and a bad story", "a bad movie", "good fun"]
    batch = tok(texts)["input_ids"]
    lo, hi = logit_bounds(module, batch, table)
    rng = np.random.default_rng(0)
    for row, text in enumerate(texts):
        ids = tok([text])["input_ids"]
        alone = logit_bounds(module, ids, table)
        assert torch.allclose(alone[0][0], lo[row], atol=1e-5) and torch.allclose(alone[1][0], hi[row], atol=1e-5)
        with torch.no_grad():
            z = module(_random_combinations(ids[0], table, 300, rng))
        assert (z >= lo[row] - 1e-5).all() and (z <= hi[row] + 1e-5).all()
    # the backward direction reads a row from its last word: only the last word has substitutes, so at the first
    # position the forward states are exact and the backward ones are not
    from textaudit.models.zoo.ibp import _relu, lstm_state_bounds, word_box

    ids = tok(["a the film"])["input_ids"]
    s_lo, s_hi = lstm_state_bounds(module.lstm, *_relu(*word_box(module, ids, table)), ids != 0)
    width = (s_hi - s_lo)[0, 0]
    assert torch.all(width[:100] < 1e-6) and torch.all(width[100:] > 0)
    lo0, hi0 = logit_bounds(module, batch, table, scale=0.0)
    assert torch.allclose(lo0, module(batch), atol=1e-5) and torch.allclose(hi0, module(batch), atol=1e-5)


def test_jia_recipe_trains_a_bidirectional_lstm_as_published(tmp_path, cli):
    """``lstm-ibp-jia``: Jia et al. 2019's recipe (frozen vectors, bidirectional LSTM with a hidden layer, batch 32,
    weight decay 1e-4, gradients clipped to 0.25, κ → 0.8 with no warm-up), saved and loaded back as that model."""
    from textaudit.models.zoo import load_checkpoint, train_model
    from textaudit.models.zoo.ibp import JIA_SCHEDULE, ibp_schedule

    r = train_model("lstm-ibp-jia", max_train=1200, epochs=2, progress=False, out=tmp_path / "m", eval_data="sst2:dev")
    assert r["model"] == "lstm-ibp-jia"
    clf = load_checkpoint(tmp_path / "m")
    cfg = clf.config
    assert cfg["robust"] == "ibp-jia"
    assert {k: cfg["train"][k] for k in ("batch_size", "weight_decay", "clip_grad", "tune_embeddings", "arch_options")} \
        == {"batch_size": 32, "weight_decay": 1e-4, "clip_grad": 0.25, "tune_embeddings": False, "arch_options": JIA_LSTM}
    module, tok = clf.forward.module, clf.forward.tokenizer
    assert module.lstm.bidirectional and module.hidden is not None
    assert ibp_schedule(0.0, warmup=JIA_SCHEDULE["warmup"], ramp=JIA_SCHEDULE["ramp"]) == 0.0
    assert ibp_schedule(0.5, warmup=JIA_SCHEDULE["warmup"], ramp=JIA_SCHEDULE["ramp"]) == pytest.approx(0.75)
    table = substitution_table(tok.vocab)
    ids = tok(["the film is a dull and boring mess , but the acting is good"])["input_ids"]
    lo, hi = logit_bounds(module, ids, table)
    with torch.no_grad():
        z = module(_random_combinations(ids[0], table, 200, np.random.default_rng(2)).to(lo.device))
    assert (z >= lo - 1e-4).all() and (z <= hi + 1e-4).all()
    r = cli("train", "--model", "cnn", "--robust", "ibp-jia")
    assert r.exit_code == 2 and "is built for lstm, not cnn" in r.output


def test_trained_ibp_model_is_sound_and_certifies(tmp_path):
    from textaudit.data import load_dataset
    from textaudit.models.zoo import load_checkpoint, train_model

    r = train_model("cnn-ibp", max_train=2000, epochs=2, progress=False, out=tmp_path / "m", eval_data="sst2:dev")
    assert r["model"] == "cnn-ibp"
    clf = load_checkpoint(tmp_path / "m")
    assert clf.config["robust"] == "ibp"
    module, tok = clf.forward.module, clf.forward.tokenizer
    table = substitution_table(tok.vocab)
    dev = load_dataset("sst2:dev", limit=40)
    rng = np.random.default_rng(1)
    for text in dev["text"][:10]:
        ids = tok([text])["input_ids"]
        lo, hi = logit_bounds(module, ids, table)  # CPU ids; the model is on CUDA where there is one
        with torch.no_grad():
            z = module(_random_combinations(ids[0], table, 100, rng).to(lo.device))
        assert (z >= lo - 1e-4).all() and (z <= hi + 1e-4).all()
    res = certify(module, tok, table, dev["text"], dev["label"])
    assert res["n"] == 40 and 0 <= res["certified_accuracy"] <= res["accuracy"]


def test_cli_certify_and_train_errors(cli, tmp_path):
    r = cli("train", "--model", "transformer", "--robust", "ibp")
    assert r.exit_code == 2 and "supports bow, cnn, lstm, not transformer" in r.output
    r = cli("train", "--model", "cnn", "--robust", "crown")
    assert r.exit_code == 2 and "unknown robust training 'crown'" in r.output
    (tmp_path / "p.py").write_text("def clf(texts):\n    return [[0.5, 0.5]] * len(texts)\n")
    r = cli("certify", "--model", f"{tmp_path}/p.py:clf", "--limit", "3", "--method", "ibp")
    assert r.exit_code == 2 and "certify supports bow/cnn/lstm" in r.output  # IBP needs a zoo word model's layers
    # without --method a plug-in is certified by randomized smoothing (SAFER): a model that ties abstains everywhere
    r = cli("certify", "--model", f"{tmp_path}/p.py:clf", "--limit", "3", "--samples", "20", "--selection", "5",
            "--neighbors", "0", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert (out["method"], out["n"], out["abstain"], out["accuracy"]) == ("safer", 3, 3, 0.0)


def test_cli_certify_json(cli):
    from textaudit.models.zoo import train_model

    train_model("bow-ibp", max_train=1500, epochs=1, progress=False)
    r = cli("certify", "--model", "bow-ibp", "--limit", "30", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["model"] == "bow-ibp" and out["n"] == 30 and out["certified_accuracy"] <= out["accuracy"]


def test_schedule_and_selection_never_prefer_a_constant_model():
    from textaudit.models.ibp import ibp_hooks, ibp_schedule

    assert ibp_schedule(0.05, warmup=0.1, ramp=0.5) == 0.0  # clean warm-up
    assert ibp_schedule(0.35, warmup=0.1, ramp=0.5) == pytest.approx(0.5)
    assert ibp_schedule(0.9, warmup=0.1, ramp=0.5) == 1.0
    torch.manual_seed(0)
    vocab = Vocab(WORDS)
    tok = WordTokenizer(vocab)
    texts = ["a good film", "a great story", "a fine plot", "a bad film", "a dull story"]
    labels = [1, 1, 1, 0, 0]
    constant = build_module("bow", torch.randn(len(vocab), 50), 2).eval()
    with torch.no_grad():
        constant.out.weight.zero_()
        constant.out.bias.copy_(torch.tensor([0.0, 5.0]))  # always "positive": certified on every positive
    hooks = ibp_hooks(min_clean=0.75)
    hooks["on_tokenizer"](tok)
    table = substitution_table(vocab)
    res = certify(constant, tok, table, texts, labels)
    # Wilson 95% for 3/5: centre 0.5566, half-width 0.3258
    assert res == {"accuracy": 0.6, "certified_accuracy": 0.6, "n": 5, "accuracy_ci95": [0.2307, 0.8824],
                   "certified_accuracy_ci95": [0.2307, 0.8824]}
    score = hooks["select"](constant, tok, texts, labels)
    assert score == pytest.approx(0.6 - 1.0)  # below the clean-accuracy guard: ranks under any admissible model
