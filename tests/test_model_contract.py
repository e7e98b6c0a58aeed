"""#81 item 7: ``textaudit.testing.check_model`` — the contract battery a plug-in author runs on their model. Every
model kind textaudit builds passes it (the zoo's architectures, a tiny real HF model, a plug-in file, a multi-label
plug-in); models with the real bugs it exists for fail the check that names the bug, and only that one."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from textaudit.errors import TextAuditError
from textaudit.testing import EDGE_TEXTS, ModelCheckError, check_model

WORDS = "a the film movie good bad great deep moving plot thin acting wooden not at all it runs and".split()
CHECKS = ["scores", "labels", "decisions", "batch invariance", "determinism", "empty batch", "edge texts"]


@pytest.mark.parametrize("arch", ["bow", "cnn", "lstm", "transformer"])
def test_every_zoo_architecture_passes(arch):
    from textaudit.models.torch_backend import torch_classifier
    from textaudit.models.zoo.architectures import build_module
    from textaudit.models.zoo.vocab import Vocab, WordTokenizer

    torch.manual_seed(0)
    vocab = Vocab(WORDS)
    module = build_module(arch, torch.randn(len(vocab), 50) * 0.5, 2).eval()
    clf = torch_classifier(module, WordTokenizer(vocab), name=f"tiny-{arch}", device="cpu", num_classes=2,
                           labels=["negative", "positive"])
    report = check_model(clf)
    assert report.ok and [c.name for c in report.checks] == CHECKS, str(report)


def test_a_tiny_hf_model_passes_through_its_spec(tmp_path):
    from transformers import BertTokenizerFast, DistilBertConfig, DistilBertForSequenceClassification

    from textaudit.resources import resolve

    tok = BertTokenizerFast.from_pretrained(resolve("minilm"))
    torch.manual_seed(0)
    cfg = DistilBertConfig(vocab_size=tok.vocab_size, dim=32, hidden_dim=64, n_layers=1, n_heads=2, num_labels=3,
                           id2label={0: "neg", 1: "neu", 2: "pos"}, label2id={"neg": 0, "neu": 1, "pos": 2})
    DistilBertForSequenceClassification(cfg).eval().save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    report = check_model(f"hf:{tmp_path / 'tiny'}")
    assert report.ok, str(report)


PLUGIN = '''
import math
labels = ["negative", "positive"]
def clf(texts):
    return [[1 - (p := 1 / (1 + math.exp(-len(t) / 10 + 2))), p] for t in texts]
clf.labels = labels
'''
MULTILABEL = '''
class Tags:
    multilabel = True
    labels = ["toxic", "insult", "threat"]
    def predict_proba(self, texts):
        return [[min(1.0, t.count("bad") / 3), 0.1, 0.0 if "!" in t else 0.2] for t in texts]
'''


def test_a_plugin_file_and_a_multilabel_plugin_pass(tmp_path):
    (tmp_path / "p.py").write_text(PLUGIN)
    (tmp_path / "m.py").write_text(MULTILABEL)
    assert check_model(f"{tmp_path}/p.py:clf").ok
    report = check_model(f"{tmp_path}/m.py:Tags")  # three independent labels: rows need not sum to 1
    assert report.ok and [c.name for c in report.checks] == CHECKS, str(report)
    (tmp_path / "m2.py").write_text(MULTILABEL.replace('"threat"]', '"threat", "spam"]'))  # 4 names, 3 columns
    with pytest.raises(TextAuditError, match="label"):
        check_model(f"{tmp_path}/m2.py:Tags")


def _length_score(texts):
    return np.array([[1 - (p := 1 / (1 + np.exp(-len(t) / 10 + 2))), p] for t in texts])


def test_a_score_that_depends_on_the_batch_fails_batch_invariance_alone():
    def by_batch(texts):  # scores each text against the batch's mean length: the batch-norm-in-training bug
        mean = np.mean([len(t) for t in texts])
        p = 1 / (1 + np.exp(-(np.array([len(t) for t in texts]) - mean) / 10))
        return np.stack([1 - p, p], 1)

    report = check_model(by_batch, strict=False)
    assert [c.name for c in report.failed] == ["batch invariance"], str(report)
    assert "differs from its score in a batch by" in report.failed[0].detail
    with pytest.raises(ModelCheckError, match="by_batch failed 1 check"):
        check_model(by_batch)


def test_a_random_model_fails_determinism_alone():
    rng = random.Random(0)

    def noisy(texts):  # dropout left on, or sampling: each call answers differently
        return [[1 - (p := 0.3 + 0.4 * rng.random()), p] for t in texts]

    report = check_model(noisy, strict=False)
    assert "determinism" in [c.name for c in report.failed]
    assert "asked again, scores differ" in next(c.detail for c in report.failed if c.name == "determinism")


def test_an_exception_on_an_edge_text_fails_edge_texts_and_a_one_line_refusal_does_not():
    def crashes_on_empty(texts):
        if any(not t.strip() for t in texts):
            raise IndexError("list index out of range")
        return _length_score(texts)

    report = check_model(crashes_on_empty, strict=False)
    assert [c.name for c in report.failed] == ["edge texts"], str(report)
    assert "raised TextAuditError" not in report.failed[0].detail and "IndexError" in report.failed[0].detail

    def refuses_empty(texts):
        if any(not t.strip() for t in texts):
            raise TextAuditError("empty text: give at least one word")
        return _length_score(texts)

    assert check_model(refuses_empty).ok


def test_rows_that_are_not_probabilities_fail_scores_and_nothing_else_runs():
    def unnormalised(texts):
        return [[0.7, 0.7] for _ in texts]

    report = check_model(unnormalised, strict=False)
    assert report.failed[0].name == "scores" and "sum" in report.failed[0].detail
    assert all(c.detail.startswith("not run") for c in report.failed[1:]) and len(report.failed) == len(CHECKS)
    def logits(texts):
        return [[0.0, len(t) / 10] for t in texts]

    logits.output = "logits"  # a plug-in declaring logits is softmaxed, and passes
    assert check_model(logits).ok
    with pytest.raises(TextAuditError, match="at least two texts"):
        check_model(_length_score, texts=["one"])
    assert len(EDGE_TEXTS) == 4
