"""The pace of this machine: seconds per classifier text and per masked-LM context, measured on the data's own
first texts before long work starts (an attack's time estimate, a certification's, hardening's), so that an
estimate is this machine's and this model's, not a table's."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

from textaudit.model_traits import traits_of
from textaudit.sentence import Sentence

__all__ = ["Pace", "measure_pace", "fastest", "PACE_TEXTS", "PACE_CONTEXTS", "PACE_NEIGHBORS"]

#: classifier texts timed for its pace (the data's first ones: the attack asks them first anyway)
PACE_TEXTS = 64
#: masked-LM contexts of the pace: the data's first sentences, each position masked; half warm the masked LM
#: up, half are timed in one call
PACE_CONTEXTS = 128
#: classifier texts timed beside the data's first ones: their neighbours, one word replaced by the masked LM's
#: candidate (texts a search asks first). A run asks thousands of texts a call: timed on ten a call, the pace was
#: the call's overhead — 1,078 texts/s on a busy machine where the run went at 14,227, and 'about 1m28s' for 39 s
PACE_NEIGHBORS = 256
#: the neighbours are timed only where the data's first texts say they take at most this long (a model slow per text,
#: an LLM's prompt, is timed on its texts alone: its calls' overhead is no part of its pace)
PACE_NEIGHBOR_SECONDS = 2.0


@dataclass
class Pace:
    """Seconds per classifier text and per masked-LM context, measured here (None: not measured)."""

    text_seconds: float
    context_seconds: float | None
    store_share: float | None = None  # contexts of the sample the store (or cache) already held
    #: seconds a context takes to compute, when the sample came mostly from the store: the run's other contexts
    #: (the neighbours') may not be there — the estimate is then a range
    computed_seconds: float | None = None



def fastest(call: Any, items: Sequence[Any]) -> float:
    """Seconds per item of ``call`` over ``items``, timed in two halves (different items: a second call of the same
    would be answered from a cache) and the faster half kept — a busy machine's other process, scheduled in during
    one call, made a 15 ms call take 1.4 s and an estimate 12× too long (timeit keeps the fastest for this reason)."""
    if len(items) < 2:
        t0 = time.perf_counter()
        call(items)
        return (time.perf_counter() - t0) / max(len(items), 1)
    half = len(items) // 2
    times = []
    for part in (items[:half], items[half:]):
        t0 = time.perf_counter()
        call(part)
        times.append((time.perf_counter() - t0) / len(part))
    return min(times)


def measure_pace(classifier: Any, mlm: Any, texts: Sequence[str], kappa: int = 20, language: str = "en") -> Pace | None:
    """Time the classifier on up to :data:`PACE_TEXTS` of ``texts`` (after a one-text warm-up) and the masked
    LM on up to :data:`PACE_CONTEXTS` contexts of the first texts (each position masked in turn; the first
    half warms it up), and the share of the timed contexts its cache or the store already held. None for a
    remote model (its queries are not spent on a pace) or without texts."""
    sample = [t for t in texts[:PACE_TEXTS] if isinstance(t, str) and t.strip()]
    if not sample or traits_of(classifier).remote:
        return None
    classifier.predict_proba(sample[:1])  # a first call's set-up is not the pace
    ctx_s, share, computed = None, None, None
    sentences = [Sentence.parse(t, language) for t in sample]  # (split as the search splits them)
    queries = [(list(s.tokens), i) for s in sentences if len(s.tokens) >= 2 for i in range(len(s.tokens))][:PACE_CONTEXTS]
    neighbors: list[str] = []
    if mlm is not None and len(queries) >= 2:
        # its set-up (the first forward's kernels, the store's fingerprint) is not the pace: the first half of the
        # contexts warms it up (real ones, which the run asks anyway: nothing foreign reaches the store), the
        # second half is timed, in one batch as the engine asks them
        half = len(queries) // 2
        answers = mlm.candidates(queries[:half], top=kappa)
        hits0 = getattr(mlm, "cache_hits", 0) + getattr(mlm, "store_hits", 0)
        ctx_s = fastest(lambda q: mlm.candidates(q, top=kappa), queries[half:])
        n = len(queries) - half
        share = (getattr(mlm, "cache_hits", 0) + getattr(mlm, "store_hits", 0) - hits0) / n
        computed = getattr(mlm, "seconds_per_context", lambda: None)() if share > 0.5 else None
        neighbors = _neighbor_texts(sentences, queries[:half], answers)
    text_s = fastest(classifier.predict_proba, sample[1:] or sample)
    if neighbors and text_s * len(neighbors) <= PACE_NEIGHBOR_SECONDS:  # (a slow model's pace is its texts')
        text_s = min(text_s, fastest(classifier.predict_proba, neighbors))
    return Pace(text_s, ctx_s, share, computed if computed and computed > (ctx_s or 0) else None)


def _neighbor_texts(sentences: Sequence[Sentence], queries: Sequence[tuple[list[str], int]],
                    answers: Sequence[Sequence[tuple[str, float]]]) -> list[str]:
    """Up to :data:`PACE_NEIGHBORS` distinct texts of ``sentences`` with one word replaced by a candidate of its
    masked context (``answers``): the first neighbours a search scores, written as it writes them."""
    by_words = {tuple(s.tokens): s for s in sentences}
    out: dict[str, None] = {}
    for (words, i), cands in zip(queries, answers):
        s = by_words.get(tuple(words))
        for word, _ in cands:
            if s is not None and word.isalpha() and word != words[i]:
                out.setdefault(s.replace(i, word).text())
            if len(out) >= PACE_NEIGHBORS:
                return list(out)
    return list(out)
