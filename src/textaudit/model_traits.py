"""What every layer reads of a model beyond its scores: :class:`ModelTraits`, declared in one place.

It sits below the models (:mod:`textaudit.models`) so that the engine, the statistics of a classification and the
audits read a model's traits alike, through :func:`traits_of`, never through its attributes one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["ModelTraits", "traits_of"]


@dataclass(frozen=True)
class ModelTraits:
    """What an audit reads of a model beyond its scores, declared in one place (:func:`traits_of` reads them; no
    reader asks a model's attributes itself). A model states each as an attribute of the same name —
    :class:`BatchedClassifier` has them all, an endpoint sets those it learns at load, a plain callable's are the
    defaults — and a view (``--label``, a sentence pair's) states its model's.

    ``name``, ``labels`` (class or label names, in the model's order; None: unnamed) and ``multilabel`` (labels are
    independent); ``fingerprint`` (its weights or code: None, nothing identifies it); ``scores`` (``logprobs``,
    ``labels`` — one-hot, read from a generated label — or None: its own probabilities), ``samples`` and
    ``temperature`` (label-only answers sampled N times at that temperature: their frequencies are the
    probabilities), ``unknown_class`` (the class meaning "no class": an answer that matched no label),
    ``scores_description`` (one line for a results header); ``remote`` (an endpoint: findings re-checked there, one
    search in flight, no pace spent on it) and ``protocol`` (its API: ``json``, ``completions``, ``chat``);
    ``score_kind`` (who may keep its answers on disk: ``weights``, ``code``, ``remote``), ``plugin_object`` (the
    object a ``file.py:obj`` spec names) and ``output`` (how its raw values become probabilities: ``probs`` as they
    are, ``logits`` through a softmax or sigmoid)."""

    name: str = "model"
    labels: Sequence[str] | None = None
    multilabel: bool = False
    fingerprint: str | None = None
    scores: str | None = None
    samples: int = 1
    temperature: float = 0.0
    unknown_class: int | None = None
    scores_description: str | None = None
    remote: bool = False
    protocol: str | None = None
    score_kind: str = "code"
    plugin_object: str | None = None
    output: str = "probs"


_TRAIT_DEFAULTS = ModelTraits()


def traits_of(classifier: object) -> ModelTraits:
    """The :class:`ModelTraits` ``classifier`` declares (the defaults for those it does not); ``remote`` and
    ``protocol`` are a pair view's model's (the view sends its model's queries)."""
    def get(obj: object, name: str) -> Any:
        return getattr(obj, name, getattr(_TRAIT_DEFAULTS, name))

    inner = getattr(classifier, "classifier", classifier)  # a PairView's model
    return ModelTraits(
        name=get(classifier, "name"), labels=get(classifier, "labels"), multilabel=bool(get(classifier, "multilabel")),
        fingerprint=get(classifier, "fingerprint"), scores=get(classifier, "scores"), samples=get(classifier, "samples"),
        temperature=get(classifier, "temperature"), unknown_class=get(classifier, "unknown_class"),
        scores_description=get(classifier, "scores_description"), remote=bool(get(inner, "remote")),
        protocol=get(inner, "protocol"), score_kind=get(classifier, "score_kind"),
        plugin_object=get(classifier, "plugin_object"), output=get(classifier, "output"))
