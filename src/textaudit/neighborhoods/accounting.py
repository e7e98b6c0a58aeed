"""What an audit's summary says its work cost, the same whoever runs the audit (a command, a suite, a notebook):
the neighbourhood store's answers, the score cache's, an endpoint's requests; and ``--label all``'s summary over
every label's outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textaudit.models.batched import each_label
from textaudit.request import EachLabel, Outcome, written

__all__ = ["store_fields", "score_fields", "http_fields", "work_fields", "each_label_outcome"]


def store_fields(mlm: Any) -> dict:
    """A summary's store fields: ``store_hits``, ``store_misses``, ``store_hit_rate``, ``mlm_seconds_saved``
    of the masked LM ``mlm`` (or the one it re-ranks), or nothing without a store."""
    inner = getattr(mlm, "mlm", mlm)
    s = inner.store_summary() if hasattr(inner, "store_summary") else None
    if not s:
        return {}
    return {"store_hits": s["hits"], "store_misses": s["misses"], "store_hit_rate": s["hit_rate"],
            "mlm_seconds_saved": s["mlm_seconds_saved"]}


def score_fields(classifier: Any) -> dict:
    """A summary's score-cache fields: ``score_hits`` (texts the store answered) and ``score_forwards``
    (texts the model computed), or nothing when the classifier's scores are not kept."""
    if getattr(classifier, "score_cache", None) is None:
        return {}
    st = classifier.stats
    return {"score_hits": st.store_hits, "score_forwards": st.unique_forwards}


def http_fields(classifier: Any) -> dict:
    """A remote model's cost to its endpoint: ``http_requests``, ``http_retries`` (and ``http_tokens`` when the
    endpoint counts them); nothing for a local model."""
    st = getattr(classifier, "stats", None)
    if not getattr(st, "requests", 0):
        return {}
    return {"http_requests": st.requests, "http_retries": st.retries, **({"http_tokens": st.tokens} if st.tokens else {})}


def work_fields(classifier: Any, mlm: Any = None) -> dict:
    """Every cost field of a run with ``classifier`` and the masked LM ``mlm``."""
    return {**store_fields(mlm), **score_fields(classifier), **http_fields(classifier)}


def each_label_outcome(outcomes: dict[str, Outcome], output: Path | None, masked_lm: Any = None) -> EachLabel:
    """``--label all``'s outcome: ``{"labels": {label: its summary}, "forwards": the model's forwards, counted once
    for every label, and the run's cost fields}`` (the model and masked LM are shared: their counts are every label's,
    so they are here once and in no label's summary), every label's results file
    (:func:`~textaudit.models.batched.each_label`)."""
    model = next(iter(outcomes.values())).classifier.model  # the views' model: its counters are every label's
    files = each_label(model, output)
    summary = {"labels": {name: o.summary for name, o in outcomes.items()}, "forwards": model.stats.unique_forwards,
               **work_fields(model, masked_lm)}
    return EachLabel(summary, [], written(*files.values()), labels=outcomes)
