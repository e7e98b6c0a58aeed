"""The classification metrics people report, with intervals: precision, recall and F1 per class, their macro and
micro averages, and the confusion matrix (``audit evaluate``).

Intervals (95 %): a per-class precision or recall, and a micro average, is a proportion of examples — tp out of the
predicted (precision) or the true (recall) members of the class — with a Wilson interval
(:func:`textaudit.stats.wilson`); an F1 and every macro average is not a proportion, so its interval is a paired
percentile bootstrap over the examples (``scipy.stats.bootstrap``, seeded: the same interval on a rerun). A class the
model never predicts has precision 0 (scikit-learn's ``zero_division=0``), and one the data never holds recall 0:
both are shown as such, with no interval. Single-label: micro precision = micro recall = micro F1 = accuracy.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from textaudit.stats import CONFIDENCE, wilson

__all__ = ["confusion_matrix", "classification_metrics", "N_RESAMPLES"]

#: resamples of the paired bootstrap of F1 and the macro averages
N_RESAMPLES = 2000


def confusion_matrix(labels: Sequence[int], pred: Sequence[int], classes: int) -> np.ndarray:
    """``M[t, p]``: how many examples of true class t the model put in class p (rows: truth; columns: prediction)."""
    y, p = np.asarray(labels, dtype=np.int64), np.asarray(pred, dtype=np.int64)
    return np.bincount(y * classes + p, minlength=classes * classes).reshape(classes, classes)


def _prf(tp: np.ndarray, predicted: np.ndarray, true: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision, recall and F1 from counts (any leading shape), 0 where a denominator is 0 (``zero_division=0``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(predicted > 0, tp / np.maximum(predicted, 1), 0.0)
        recall = np.where(true > 0, tp / np.maximum(true, 1), 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-300), 0.0)
    return precision, recall, f1


def _counts(labels: np.ndarray, pred: np.ndarray, classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """tp, predicted and true counts per class over the last axis (resamples along the leading ones)."""
    onehot_y = labels[..., None] == np.arange(classes)
    onehot_p = pred[..., None] == np.arange(classes)
    return (onehot_y & onehot_p).sum(axis=-2), onehot_p.sum(axis=-2), onehot_y.sum(axis=-2)


def _bootstrap(labels: np.ndarray, pred: np.ndarray, classes: int, seed: int, n_resamples: int) -> dict[str, np.ndarray]:
    """Percentile intervals of every class's F1 and of the macro precision, recall and F1 (paired resamples)."""
    from scipy.stats import bootstrap

    def stat(y: np.ndarray, p: np.ndarray, axis: int = -1) -> np.ndarray:
        P, R, F = _prf(*_counts(np.moveaxis(y, axis, -1), np.moveaxis(p, axis, -1), classes))
        return np.concatenate([np.moveaxis(F, -1, 0), P.mean(-1)[None], R.mean(-1)[None], F.mean(-1)[None]])

    res = bootstrap((labels, pred), stat, paired=True, vectorized=True, n_resamples=n_resamples, method="percentile",
                    confidence_level=CONFIDENCE, random_state=np.random.default_rng(seed), batch=200)
    low, high = np.asarray(res.confidence_interval.low), np.asarray(res.confidence_interval.high)
    return {"f1": np.stack([low[:classes], high[:classes]], 1), "macro_precision": np.array([low[-3], high[-3]]),
            "macro_recall": np.array([low[-2], high[-2]]), "macro_f1": np.array([low[-1], high[-1]])}


def _ci(pair: Sequence[float]) -> list[float]:
    return [round(float(pair[0]), 4), round(float(pair[1]), 4)]


def classification_metrics(labels: Sequence[int], pred: Sequence[int], names: Sequence[str], *, seed: int = 0,
                           n_resamples: int = N_RESAMPLES) -> dict:
    """``{"per_class": [{"class", "support", "predicted", "precision", "recall", "f1", …_ci95}], "macro": {…},
    "micro": {…}, "confusion": {"classes", "matrix"}}`` of single-label predictions (see the module docstring)."""
    y, p = np.asarray(labels, dtype=np.int64), np.asarray(pred, dtype=np.int64)
    classes = len(names)
    tp, predicted, true = _counts(y, p, classes)
    P, R, F = _prf(tp, predicted, true)
    boot = _bootstrap(y, p, classes, seed, n_resamples) if len(y) >= 2 else None
    per_class = []
    for c in range(classes):
        per_class.append({
            "class": names[c], "support": int(true[c]), "predicted": int(predicted[c]),
            "precision": round(float(P[c]), 4), "precision_ci95": list(wilson(int(tp[c]), int(predicted[c])) or ()),
            "recall": round(float(R[c]), 4), "recall_ci95": list(wilson(int(tp[c]), int(true[c])) or ()),
            "f1": round(float(F[c]), 4), "f1_ci95": _ci(boot["f1"][c]) if boot is not None else []})
    right = int(tp.sum())
    micro = list(wilson(right, len(y)) or ())
    out = {"per_class": per_class,
           "macro": {k: round(float(v.mean()), 4) for k, v in (("precision", P), ("recall", R), ("f1", F))},
           "micro": {"precision": round(right / len(y), 4) if len(y) else None, "precision_ci95": micro,
                     "recall": round(right / len(y), 4) if len(y) else None, "recall_ci95": micro,
                     "f1": round(right / len(y), 4) if len(y) else None, "f1_ci95": micro},
           "confusion": {"classes": list(names), "matrix": confusion_matrix(y, p, classes).tolist()}}
    if boot is not None:
        for k in ("precision", "recall", "f1"):
            out["macro"][f"{k}_ci95"] = _ci(boot[f"macro_{k}"])
    return out
