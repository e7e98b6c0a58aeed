"""CUDA paths (run where a GPU is present; skipped on CPU-only machines such as CI).

Each test compares the GPU result with the CPU one through the same public function."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

WORDS = "a the film movie picture good great fine bad awful poor plot story dull boring fun".split()


def _module(arch="cnn"):
    from textaudit.models.zoo.architectures import build_module
    from textaudit.models.zoo.vocab import Vocab, WordTokenizer

    torch.manual_seed(0)
    vocab = Vocab(WORDS)
    return build_module(arch, torch.randn(len(vocab), 50), 2).eval(), vocab, WordTokenizer(vocab)


def test_ibp_bounds_take_cpu_ids_for_a_cuda_model():
    from textaudit.models.ibp import logit_bounds, substitution_table

    module, vocab, tok = _module()
    table = substitution_table(vocab, {"film": ["movie", "picture"], "good": ["great", "fine"]})
    ids = tok(["a good film", "the plot is dull"])["input_ids"]
    lo_c, hi_c = logit_bounds(module, ids, table)
    lo_g, hi_g = logit_bounds(module.cuda(), ids, table)
    assert lo_g.is_cuda and torch.allclose(lo_g.cpu(), lo_c, atol=1e-4) and torch.allclose(hi_g.cpu(), hi_c, atol=1e-4)


def test_wrapper_probabilities_match_cpu():
    from textaudit.models.torch_backend import torch_classifier

    module, _, tok = _module("lstm")
    texts = ["a good film", "the plot is dull and boring", "fun"]
    cpu = torch_classifier(module, tok, device="cpu", num_classes=2).predict_proba(texts)
    gpu = torch_classifier(module, tok, device="cuda", num_classes=2).predict_proba(texts)
    assert np.allclose(cpu, gpu, atol=1e-4)


def test_masked_lm_on_cuda_matches_cpu():
    from textaudit.neighborhoods.minilm_mlm import load_minilm_mlm

    q = [("a deep and [MASK] film .".split(), 3), ("the [MASK] is a total mess .".split(), 1)]
    cpu = load_minilm_mlm(device="cpu").candidates(q, top=10)
    gpu_mlm = load_minilm_mlm(device="cuda")
    gpu = gpu_mlm.candidates(q, top=10)
    assert gpu_mlm.device == "cuda"
    for a, b in zip(cpu, gpu):
        assert len({w for w, _ in a[:5]} & {w for w, _ in b[:5]}) >= 4


def test_identical_text_has_epsilon_zero_on_cuda():
    from textaudit.models.torch_backend import torch_classifier
    from textaudit.robustness.perturbscore import differentiable, find_epsilon, model_shift

    module, _, tok = _module()
    sm = differentiable(torch_classifier(module, tok, device="cuda", num_classes=2))
    x = "a good film and a great story"
    assert find_epsilon(sm, x, model_shift(sm, x, x)) == (0.0, 0.0)
