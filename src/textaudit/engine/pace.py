"""The pace of this machine: seconds per classifier text and per masked-LM context, measured on the data's own
first texts before long work starts (an attack's time estimate, a certification's, hardening's), so that an
estimate is this machine's and this model's, not a table's."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["Pace", "measure_pace", "PACE_TEXTS", "PACE_CONTEXTS"]

#: classifier texts timed for its pace (the data's first ones: the attack asks them first anyway)
PACE_TEXTS = 64
#: masked-LM contexts of the pace: the data's first sentences, each position masked; half warm the masked LM
#: up, half are timed in one call
PACE_CONTEXTS = 128


@dataclass
class Pace:
    """Seconds per classifier text and per masked-LM context, measured here (None: not measured)."""

    text_seconds: float
    context_seconds: float | None
    store_share: float | None = None  # contexts of the sample the store (or cache) already held
    #: seconds a context takes to compute, when the sample came mostly from the store: the run's other contexts
    #: (the neighbours') may not be there — the estimate is then a range
    computed_seconds: float | None = None



def measure_pace(classifier: Any, mlm: Any, texts: Sequence[str], kappa: int = 20) -> Pace | None:
    """Time the classifier on up to :data:`PACE_TEXTS` of ``texts`` (after a one-text warm-up) and the masked
    LM on up to :data:`PACE_CONTEXTS` contexts of the first texts (each position masked in turn; the first
    half warms it up), and the share of the timed contexts its cache or the store already held. None for a
    remote model (its queries are not spent on a pace) or without texts."""
    sample = [t for t in texts[:PACE_TEXTS] if isinstance(t, str) and t.strip()]
    if not sample or getattr(classifier, "remote", False):
        return None
    classifier.predict_proba(sample[:1])  # a first call's set-up is not the pace
    rest = sample[1:] or sample
    t0 = time.perf_counter()
    classifier.predict_proba(rest)
    text_s = (time.perf_counter() - t0) / len(rest)
    ctx_s, share, computed = None, None, None
    queries = [(t.split(), i) for t in sample for i in range(len(t.split())) if len(t.split()) >= 2][:PACE_CONTEXTS]
    if mlm is not None and len(queries) >= 2:
        # its set-up (the first forward's kernels, the store's fingerprint) is not the pace: the first half of the
        # contexts warms it up (real ones, which the run asks anyway: nothing foreign reaches the store), the
        # second half is timed, in one batch as the engine asks them
        half = len(queries) // 2
        mlm.candidates(queries[:half], top=kappa)
        hits0 = getattr(mlm, "cache_hits", 0) + getattr(mlm, "store_hits", 0)
        t0 = time.perf_counter()
        mlm.candidates(queries[half:], top=kappa)
        n = len(queries) - half
        ctx_s = (time.perf_counter() - t0) / n
        share = (getattr(mlm, "cache_hits", 0) + getattr(mlm, "store_hits", 0) - hits0) / n
        computed = getattr(mlm, "seconds_per_context", lambda: None)() if share > 0.5 else None
    return Pace(text_s, ctx_s, share, computed if computed and computed > (ctx_s or 0) else None)
