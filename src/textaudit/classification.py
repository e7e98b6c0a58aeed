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

from textaudit.decision import TIE
from textaudit.errors import TextAuditError
from textaudit.model_traits import traits_of
from textaudit.stats import CONFIDENCE, wilson

__all__ = ["confusion_matrix", "classification_metrics", "multilabel_metrics", "metrics_from_records", "label_confusions",
           "N_RESAMPLES", "below_chance", "one_class_warning"]

#: resamples of the paired bootstrap of F1 and the macro averages
N_RESAMPLES = 2000


def below_chance(right: int, n: int, classes: int) -> str | None:
    """The warning a two-class accuracy gets when its whole 95% (Wilson) interval lies below chance (½): a model that is
    wrong more often than a coin most likely reads the labels the other way round (a swapped ``--label-map``, class
    names in another order than the model's). ``None`` otherwise, and for more than two classes."""
    ci = wilson(right, n) if classes == 2 and n > 0 else None
    if ci is None or ci[1] >= 0.5:
        return None
    return (f"warning: accuracy {right / n:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] on {n} examples is below chance (0.5) for two "
            "classes: the label map may be inverted (the data's 0 read as the model's 1); check the model's class names "
            "or --label-map")


def confusion_matrix(labels: Sequence[int], pred: Sequence[int], classes: int) -> np.ndarray:
    """``M[t, p]``: how many examples of true class t the model put in class p (rows: truth; columns: prediction)."""
    y, p = np.asarray(labels, dtype=np.int64), np.asarray(pred, dtype=np.int64)
    decided = (p >= 0) & (p < classes) & (y >= 0) & (y < classes)  # a tie (-1) is no decision: in no cell
    return np.bincount(y[decided] * classes + p[decided], minlength=classes * classes).reshape(classes, classes)


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


def label_confusions(truth: np.ndarray, decided: np.ndarray, names: Sequence[str]) -> list[tuple[str, list[str], list]]:
    """A multi-label model's confusion per label: ``(label, ["not label", "label"], its 2×2 matrix)`` of the data's
    0/1 ``truth`` against the model's 0/1 ``decided`` (an (n, L) array each; a panel each in the figure)."""
    T, D = np.asarray(truth, dtype=int), np.asarray(decided, dtype=int)
    return [(name, [f"not {name}", name], confusion_matrix(T[:, j], D[:, j], 2).tolist()) for j, name in enumerate(names)]


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


def multilabel_metrics(truth: np.ndarray, decided: np.ndarray, names: Sequence[str], *, seed: int = 0,
                       n_resamples: int = N_RESAMPLES) -> dict:
    """The metrics of a multi-label model's decisions (``decided``: an (n, L) 0/1 array, a label on when its
    probability is above the threshold; ``truth`` the data's): per label, precision, recall and F1 of the label
    being on; their micro averages (every decision pooled) and macro averages (the labels' mean); the subset accuracy
    (every label of an example right) and the Hamming loss (the share of wrong decisions). Intervals: Wilson for
    a label's precision and recall, the micro precision and recall and the subset accuracy (proportions); a paired
    bootstrap over the examples (seeded) for the F1s, the macro averages and the Hamming loss (whose decisions are
    not independent within an example)."""
    from scipy.stats import bootstrap

    Y, D = np.asarray(truth, dtype=bool), np.asarray(decided, dtype=bool)
    n, L = Y.shape

    def counts(y: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (y & d).sum(-2), d.sum(-2), y.sum(-2)

    def stat(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        y, d = Y[idx], D[idx]  # (..., n, L)
        tp, pr, tr = counts(y, d)
        P, R, F = _prf(tp, pr, tr)
        _, _, micro_f = _prf(tp.sum(-1), pr.sum(-1), tr.sum(-1))
        return np.concatenate([np.moveaxis(F, -1, 0), P.mean(-1)[None], R.mean(-1)[None], F.mean(-1)[None],
                               micro_f[None], (y != d).mean((-2, -1))[None]])

    tp, pr, tr = counts(Y, D)
    P, R, F = _prf(tp, pr, tr)
    mP, mR, mF = _prf(tp.sum(), pr.sum(), tr.sum())
    ci = None
    if n >= 2:
        res = bootstrap((np.arange(n),), stat, vectorized=True, n_resamples=n_resamples, method="percentile",
                        confidence_level=CONFIDENCE, random_state=np.random.default_rng(seed), batch=200)
        ci = np.stack([np.asarray(res.confidence_interval.low), np.asarray(res.confidence_interval.high)], 1)
    per_label = [{"label": names[j], "support": int(tr[j]), "predicted": int(pr[j]),
                  "precision": round(float(P[j]), 4), "precision_ci95": list(wilson(int(tp[j]), int(pr[j])) or ()),
                  "recall": round(float(R[j]), 4), "recall_ci95": list(wilson(int(tp[j]), int(tr[j])) or ()),
                  "f1": round(float(F[j]), 4), "f1_ci95": _ci(ci[j]) if ci is not None else []} for j in range(L)]
    subset = int((Y == D).all(1).sum())
    out = {"per_label": per_label,
           "macro": {"precision": round(float(P.mean()), 4), "recall": round(float(R.mean()), 4),
                     "f1": round(float(F.mean()), 4)},
           "micro": {"precision": round(float(mP), 4), "precision_ci95": list(wilson(int(tp.sum()), int(pr.sum())) or ()),
                     "recall": round(float(mR), 4), "recall_ci95": list(wilson(int(tp.sum()), int(tr.sum())) or ()),
                     "f1": round(float(mF), 4), "f1_ci95": _ci(ci[L + 3]) if ci is not None else []},
           "subset_accuracy": round(subset / n, 4) if n else None,
           "subset_accuracy_ci95": list(wilson(subset, n) or ()),
           "hamming_loss": round(float((Y != D).mean()), 4) if n else None,
           "hamming_loss_ci95": _ci(ci[L + 4]) if ci is not None else []}
    if ci is not None:
        for i, k in enumerate(("precision", "recall", "f1")):
            out["macro"][f"{k}_ci95"] = _ci(ci[L + i])
    return out


def metrics_from_records(config: dict, records: list[dict]) -> dict:
    """``audit evaluate --output``'s summary recomputed from its records: single-label records
    ``{"id", "label", "prediction"}`` (class ids; the names in ``config["labels"]``) give
    :func:`classification_metrics` with the accuracy; a multi-label file's ``{"id", "truth", "decided"}`` (0/1 per
    label) gives :func:`multilabel_metrics`. The same seed as the run: the same bootstrap intervals."""
    try:
        return _metrics_from_records(config, records)
    except (KeyError, TypeError, ValueError, IndexError):  # a file edited by hand or written by another tool
        raise TextAuditError("a record of these predictions lacks its label and prediction (or, multi-label, its "
                             "truth and decided 0/1 per label), or names a class the header does not: was the file "
                             "edited? rerun audit evaluate --output") from None


def _metrics_from_records(config: dict, records: list[dict]) -> dict:
    names, seed = list(config.get("labels") or []), int(config.get("seed", 0))
    base = {"model": config.get("model"), "data": config.get("data"), "n": len(records)}
    if config.get("multilabel"):
        truth = np.array([r["truth"] for r in records], dtype=int).reshape(len(records), len(names))
        decided = np.array([r["decided"] for r in records], dtype=int).reshape(len(records), len(names))
        return {**base, "labels": names, "multilabel": True, "threshold": config.get("threshold"),
                **multilabel_metrics(truth, decided, names, seed=seed)}
    y = np.array([r["label"] for r in records], dtype=np.int64)
    p = np.array([r["prediction"] for r in records], dtype=np.int64)
    if len(y) and (y.min() < 0 or p.min() < TIE or max(y.max(), p.max()) >= len(names)):  # a tie: no decision
        raise ValueError("a class outside the header's")
    right = int((y == p).sum())
    return {**base, "labels": names, "accuracy": round(right / len(y), 4) if len(y) else None,
            "accuracy_ci95": list(wilson(right, len(y)) or ()), **classification_metrics(y, p, names, seed=seed)}


def one_class_warning(clf, pred: np.ndarray, labels: np.ndarray, names: list[str], share: float = 0.95) -> str | None:
    """A model that answers one class for nearly every text (≥ ``share``) where the data holds far fewer of it:
    its answers barely depend on the text (a chat endpoint that ignores the prompt, a broken plug-in), and an
    audit of it says little. ``None`` when the predictions look like the data, or too few texts were scored."""
    if len(pred) < 20:
        return None
    values, counts = np.unique(pred, return_counts=True)
    top = int(values[counts.argmax()])
    got, truth = counts.max() / len(pred), float((labels == top).mean())
    if got < share or truth > 0.8:
        return None
    name = names[top] if 0 <= top < len(names) else "unknown"
    hint = ("; a chat endpoint may not follow the prompt: try the server's /v1/completions, or a --prompt-file"
            if traits_of(clf).protocol == "chat" else "")
    return (f"warning: {clf.name} answers '{name}' for {got:.0%} of the texts, which the data holds {truth:.0%} of: its "
            f"answers barely depend on the text, and an audit of it says little{hint}")
