"""--precision: bf16 autocast agrees with fp32 on the zoo models' predictions except within 1e-2 of
the decision boundary (bf16 autocast runs on a CPU too), and bad values are one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

from textaudit.data import load_dataset
from textaudit.errors import TextAuditError
from textaudit.models.options import ModelOptions
from textaudit.models.torch_backend import check_precision, torch_classifier
from textaudit.models.zoo import TrainConfig, fit
from textaudit.models.zoo.checkpoint import batch_encoder, id_encoder
from textaudit.sentence import Sentence


@pytest.fixture(scope="module")
def data():
    texts = [t for t in load_dataset("sst2:train", limit=4000)["text"] if len(t.split()) >= 5]
    labels = [int(any(w in t.split() for w in ("good", "best", "fun", "great", "funny", "love"))) for t in texts]
    return texts[:400], labels[:400], texts[400:700]


@pytest.mark.parametrize("arch, epochs, lr", [("bow", 2, 5e-3), ("cnn", 2, 5e-3), ("lstm", 2, 5e-3),
                                              ("transformer", 2, 2e-3), ("minilm", 1, 1e-4)])
@pytest.mark.slow
def test_bf16_agrees_with_fp32_away_from_the_boundary(arch, epochs, lr, data):
    texts, labels, held = data
    cfg = TrainConfig(arch=arch, epochs=epochs, lr=lr, batch_size=16, holdout=0.0, max_len=64)
    res = fit(arch, texts, labels, config=cfg, progress=False, device="cpu")
    models = {p: torch_classifier(res.module, batch_encoder(arch, res.tokenizer, 64), device="cpu", precision=p,
                                  ids=id_encoder(arch, res.tokenizer, 64)) for p in ("fp32", "bf16")}
    xs = [Sentence.parse(t) for t in held]
    p32, p16 = (models[p].predict_proba(xs) for p in ("fp32", "bf16"))
    assert models["bf16"].forward.precision == "bf16" and models["fp32"].forward.precision == "fp32"
    assert not np.array_equal(p32, p16)  # bf16 really ran: the numbers differ in low bits
    margin = np.abs(p32[:, 1] - 0.5)
    away = margin >= 1e-2
    assert away.mean() > 0.5, f"{arch}: too few predictions away from the boundary to compare"
    agree = p32.argmax(1) == p16.argmax(1)
    assert agree[away].all(), f"{arch}: bf16 disagrees at margins {margin[away & ~agree]}"


def test_bf16_masked_lm_proposes_the_same_words_mostly(tiny_mlm):
    from textaudit.neighborhoods.masked_lm import HFMaskedLM

    bf16 = HFMaskedLM(tiny_mlm.model, tiny_mlm.tokenizer, name="tiny-bf16", device="cpu", precision="bf16")
    q = [("a deep and meaningful film .".split(), i) for i in range(4)]
    a, b = tiny_mlm.candidates(q, top=10), bf16.candidates(q, top=10)
    assert all(len(x) == 10 for x in b)
    overlap = np.mean([len({w for w, _ in x} & {w for w, _ in y}) / 10 for x, y in zip(a, b)])
    assert overlap >= 0.5


def test_precision_values_are_checked(cli):
    assert check_precision(None, "cpu") == "fp32" and check_precision(None, "cuda") == "bf16"
    assert check_precision("bf16", "cpu") == "bf16"
    with pytest.raises(TextAuditError, match="fp32 or bf16"):
        check_precision("fp16", "cpu")
    with pytest.raises(TextAuditError, match="--batch-tokens"):
        ModelOptions(batch_tokens=0)
    r = cli("predict", "--model", "cnn", "--precision", "fp16", "a fine film")
    assert r.exit_code == 2 and "error: --precision must be fp32 or bf16" in r.output and "Traceback" not in r.output
    r = cli("predict", "--model", "cnn", "--batch-tokens", "0", "a fine film")
    assert r.exit_code == 2 and "error: Invalid value for '--batch-tokens'" in r.output and "Traceback" not in r.output
