"""Word-level fill-mask accuracy: how often the masked word is the top-1 / in the top-10 candidates.

The masking rule (shared by training-time early stopping and ``benchmarks/mlm_quality.py``):
every position whose word is lowercase, alphabetic and a *single* token of the MLM's vocabulary
is masked once, on its own.
"""

from __future__ import annotations

import time
from typing import Iterable, Sequence

__all__ = ["mask_queries", "fill_mask_accuracy"]


def mask_queries(sentences: Iterable[str], vocab: set[str] | dict, *, content_only: bool = False,
                 stopwords: set[str] | None = None) -> list[tuple[list[str], int, str]]:
    """Return ``(words, position, target)`` for every maskable position of whitespace-tokenised sentences."""
    out = []
    for s in sentences:
        words = s.split()
        for i, w in enumerate(words):
            if w.isalpha() and w.islower() and w in vocab:
                if content_only and stopwords and w in stopwords:
                    continue
                out.append((words, i, w))
    return out


def fill_mask_accuracy(mlm, queries: Sequence[tuple[list[str], int, str]], *, ks: tuple[int, ...] = (1, 10),
                       batch: int = 512) -> dict:
    """Return ``{"n", "top1", "top10", "seconds", "masked_per_s"}`` of ``mlm`` on ``queries``."""
    hits = {k: 0 for k in ks}
    t0 = time.perf_counter()
    for s in range(0, len(queries), batch):
        chunk = queries[s:s + batch]
        cands = mlm.candidates([(w, p) for w, p, _ in chunk], top=max(ks))
        for (_, _, target), c in zip(chunk, cands):
            words = [w for w, _ in c]
            for k in ks:
                hits[k] += target in words[:k]
    secs = time.perf_counter() - t0
    n = max(1, len(queries))
    return {"n": len(queries), **{f"top{k}": round(hits[k] / n, 4) for k in ks}, "seconds": round(secs, 2),
            "masked_per_s": round(len(queries) / secs, 1) if secs > 0 else float("inf")}
