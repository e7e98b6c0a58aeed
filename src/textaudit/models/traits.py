"""What a classifier's answers depend on, declared in one place: :class:`AnswerTraits`.

A kept answer (the score cache on disk, :mod:`textaudit.neighborhoods.store`) may be served for a text only to
a model whose answer to that text it is. That is a contract, not a convention: :func:`answer_key` derives the
key of every kept answer from the model's :class:`AnswerTraits` alone, and ``tests/test_score_cache.py`` checks
that changing any trait changes the key. The traits:

- ``fingerprint``: the weights or code (a zoo checkpoint's files, an ``hf:`` directory, a plug-in's file *and*
  the object named in it — ``two.py:pos`` and ``two.py:neg`` are two models —, an ``llm:`` model's weights and
  prompt, an endpoint's own fingerprint or URL and prompt);
- ``obj``: the object a plug-in spec names (``file.py:obj``), again, so that no fingerprint loader can forget it;
- ``output``: how raw values become probabilities (``probs`` as they are, ``logits`` through a softmax/sigmoid);
- ``labels`` and ``multilabel``: the class names in the model's order, and whether labels are independent;
- ``scores``, ``samples``, ``temperature``: how an endpoint scores (log-probabilities, one label, N draws);
- ``precision`` and ``device``: the forward's numeric format and the kind of device it runs on;
- ``kind``: who may keep the answers (``weights``, ``code``, ``remote``).

A label view (``--label NAME``) answers from its model's forward; its threshold only moves the binary row built
from the kept probability, so the model's key is the view's key (the view's own fingerprint holds ``[label@t]``
for results headers).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from textaudit.models.batched import placement, traits_of

__all__ = ["AnswerTraits", "answer_traits", "answer_key"]


@dataclass(frozen=True)
class AnswerTraits:
    """Everything a classifier's answer to a text is a function of (see the module docstring)."""

    fingerprint: str
    obj: str | None = None
    output: str = "probs"
    labels: tuple[str, ...] | None = None
    multilabel: bool = False
    scores: str | None = None
    samples: int = 1
    temperature: float = 0.0
    precision: str | None = None
    device: str | None = None
    kind: str = "weights"


def _number(value: Any, default: float) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def answer_traits(clf: Any) -> AnswerTraits | None:
    """The declared traits of ``clf`` (a :class:`~textaudit.models.batched.BatchedClassifier`), or None when it
    has no fingerprint (nothing identifies its answers: they are never kept)."""
    t = traits_of(clf)  # (the model's declared traits: models.batched.ModelTraits)
    if not t.fingerprint:
        return None
    precision, device = placement(clf)
    return AnswerTraits(
        fingerprint=str(t.fingerprint), obj=t.plugin_object, output=str(t.output),
        labels=tuple(map(str, t.labels)) if t.labels is not None else None, multilabel=t.multilabel,
        scores=t.scores if isinstance(t.scores, str) else None, samples=int(_number(t.samples, 1)),
        temperature=_number(t.temperature, 0.0), precision=precision, device=device, kind=str(t.score_kind))


def answer_key(traits: AnswerTraits, version: int) -> str:
    """The key of every answer a model with ``traits`` gives (``version``: the kept rows' format): the
    fingerprint, readable, then a digest of every trait."""
    digest = hashlib.sha256(json.dumps(asdict(traits), sort_keys=True, default=list).encode()).hexdigest()[:24]
    return f"{traits.fingerprint}|{digest}|scores-{version}"
