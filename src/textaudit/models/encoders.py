"""Sentence similarity with the MiniLM-L6 sentence encoder (mean pooled, cosine) — our offline
stand-in for the Universal Sentence Encoder that BAE uses (USE cannot be downloaded here)."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Sequence

import numpy as np

from textaudit.device import pick_device
from textaudit.resources import resolve

__all__ = ["SentenceEncoder"]


class SentenceEncoder:
    """``encode(texts) -> (n, d)`` unit vectors; ``similarity(a, texts) -> (n,)`` cosines.

    Mean pooling over the encoder's last hidden states (padding masked), then L2 normalisation, as
    all-MiniLM-L6-v2 is meant to be used. Batched, cached, CUDA when present.
    """

    def __init__(self, path: str | None = None, *, device: str | None = None, batch_size: int = 128,
                 cache_size: int = 50_000):
        from transformers import AutoModel, AutoTokenizer


        root = path or str(resolve("minilm"))
        self.device = pick_device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(root, trust_remote_code=False)
        self.model = AutoModel.from_pretrained(root, trust_remote_code=False).float().to(self.device).eval()
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.name = "minilm-l6-mean"
        self.seconds = 0.0  # of encoding (an attack's ETA prices the encoder a search asks)

    def clear_cache(self) -> None:
        """Forget every cached vector (a benchmark that times two searches over one encoder starts each cold)."""
        self._cache.clear()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        found = {t: self._cache[t] for t in dict.fromkeys(texts) if t in self._cache}
        order = sorted((t for t in dict.fromkeys(texts) if t not in found), key=len)
        t0 = time.perf_counter()
        for s in range(0, len(order), self.batch_size):
            chunk = order[s:s + self.batch_size]
            enc = self.tokenizer(chunk, padding=True, truncation=True, max_length=128, return_tensors="pt").to(self.device)
            with torch.inference_mode():
                h = self.model(**enc).last_hidden_state.float()
            m = enc["attention_mask"].unsqueeze(-1).float()
            v = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1).clamp(min=1.0), dim=-1).cpu().numpy()
            found.update(zip(chunk, v))
        self.seconds += time.perf_counter() - t0  # (nothing to compute: about 0)
        for t in order:
            self._cache[t] = found[t]
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        if not texts:
            return np.zeros((0, self.model.config.hidden_size), dtype=np.float32)
        return np.stack([found[t] for t in texts])

    def similarity(self, reference: str, texts: Sequence[str]) -> np.ndarray:
        """Cosine similarity of ``reference`` with each of ``texts``."""
        if not texts:
            return np.zeros(0)
        v = self.encode([reference, *texts])
        return v[1:] @ v[0]
