"""The one rule for "the model decided class c", read by every audit.

A single-label model decides the class with the *strictly* largest probability; where two classes share the
largest (a binary model answering exactly 0.5 / 0.5) it decides nothing: :data:`TIE`. A tie is never right
(evaluate's accuracy, calibration's correctness), never a class's prediction (a confusion matrix has no cell
for it), never a flip and never a misclassification (attacks, replay), and never a vote (certify). A label of a
multi-label model is on when its probability is strictly above its threshold (``p = t`` is off): the label view
(:func:`textaudit.models.batched.label_view`) makes that row ``[1 − q, q]`` with q = 1/2 exactly at p = t — a tie
under this same rule. ``tests/test_decisions.py`` runs every audit on a model that ties.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TIE", "decisions"]

#: what :func:`decisions` gives an input whose top probabilities tie (no class is predicted)
TIE = -1


def decisions(probs: np.ndarray) -> np.ndarray:
    """The decided class of each row of ``probs``: the class with the strictly largest probability, or
    :data:`TIE` (-1) where two classes share the largest. A tie is no decision (see the module docstring)."""
    probs = np.asarray(probs)
    pred = probs.argmax(1)
    if probs.shape[1] > 1:
        top2 = np.partition(probs, -2, axis=1)[:, -2:]
        pred = np.where(top2[:, 1] > top2[:, 0], pred, TIE)
    return pred
