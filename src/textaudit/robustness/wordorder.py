"""Model accuracy under reorderings, with DND / IDC (and Levenshtein, BLEU-4 for comparison).

The question of Clouâtre et al.: does accuracy on reordered text track *local* order (DND) or
*global* order (IDC)? :func:`sweep` runs a grid of reorderings × granularities × ρ and returns
the Spearman correlation of accuracy with each metric.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from textaudit.data import align_labels, check_labels, dataset_id, load_dataset
from textaudit.errors import TextAuditError
from textaudit.formats.jsonl import RecordSpec, check_output, write_results
from textaudit.models import load_classifier
from textaudit.models.batched import Classifier
from textaudit.perturbations.wordorder import LEVELS, REORDERINGS, dnd, idc, perturb
from textaudit.progress import progress as progress_bar
from textaudit.request import Outcome, option, shared, written
from textaudit.stats import rank_correlation, wilson

__all__ = ["WordOrderRequest", "WordOrderOutcome", "evaluate_reordering", "evaluate_retrained", "sweep", "DEFAULT_GRID",
           "WORDORDER_RECORDS"]

#: a word-order sweep's records (its row of :data:`textaudit.kinds.KINDS`): one per (reordering, level, ρ)
WORDORDER_RECORDS = RecordSpec(fields={"*": {"id": (str, int)}})

DEFAULT_GRID: list[tuple[str, str, float]] = (
    [("full_shuffle", lv, 1.0) for lv in LEVELS]
    + [(p, lv, r) for p in ("phrase_shuffle", "neighbor_flip") for lv in LEVELS for r in (0.1, 0.25, 0.5, 0.9)]
)


def _text_metrics(original: str, perturbed: str) -> tuple[float, float]:
    try:
        from rapidfuzz.distance import Levenshtein
        from sacrebleu.metrics import BLEU
    except ImportError as e:
        raise TextAuditError(f"word-order metrics need rapidfuzz and sacrebleu ({e}); pip install 'textaudit[metrics]'") from None
    lev = Levenshtein.normalized_distance(original, perturbed)
    bleu = BLEU(effective_order=True).sentence_score(perturbed, [original]).score / 100.0
    return lev, bleu


def evaluate_reordering(classifier: Classifier, texts: Sequence[str], labels: Sequence[int], perturbation: str, level: str,
                        rho: float = 0.5, seed: int = 0) -> dict:
    """Return accuracy on the reordered texts (with its Wilson 95% interval) and the mean DND, IDC, normalised Levenshtein
    distance and sentence BLEU-4 between each original and its reordering."""
    if len(texts) == 0:
        raise TextAuditError("no examples to evaluate (empty dataset)")
    rng = random.Random(seed)
    out, ds, ics, levs, bleus = [], [], [], [], []
    for t in texts:
        p_text, perm = perturb(t, perturbation, level, rng, rho)
        out.append(p_text)
        ds.append(dnd(perm))
        ics.append(idc(perm))
        lev, bleu = _text_metrics(t, p_text)
        levs.append(lev)
        bleus.append(bleu)
    correct = int((classifier.predict(out) == np.asarray(labels)).sum())
    acc = correct / len(texts)
    return {"perturbation": perturbation, "level": level, "rho": rho, "n": len(texts), "accuracy": round(acc, 4),
            "accuracy_ci95": list(wilson(correct, len(texts)) or ()),
            "dnd": round(float(np.mean(ds)), 4), "idc": round(float(np.mean(ics)), 4),
            "levenshtein": round(float(np.mean(levs)), 4), "bleu4": round(float(np.mean(bleus)), 4),
            "example": out[0]}


def evaluate_retrained(fit: Callable[[list[str], list[int]], Classifier], train_texts: Sequence[str],
                       train_labels: Sequence[int], texts: Sequence[str], labels: Sequence[int], perturbation: str,
                       level: str, rho: float = 0.5, seed: int = 0) -> dict:
    """The paper's protocol (Clouâtre et al. §5: training and evaluation both on the perturbed data): reorder every
    training text (seeded by ``seed`` alone, so a setting's training set is the same whatever else runs), train
    a fresh model with ``fit(texts, labels)``, and return :func:`evaluate_reordering`'s row on the reordered
    ``texts`` plus ``train_seconds``."""
    if len(train_texts) == 0:
        raise TextAuditError("no training examples to reorder (empty dataset)")
    rng = random.Random(f"{seed}:train:{perturbation}:{level}:{rho}")
    reordered = [perturb(t, perturbation, level, rng, rho)[0] for t in train_texts]
    t0 = time.perf_counter()
    clf = fit(reordered, list(train_labels))
    seconds = time.perf_counter() - t0
    return {**evaluate_reordering(clf, texts, labels, perturbation, level, rho, seed), "train_seconds": round(seconds, 1)}


def sweep(classifier: Classifier, texts: Sequence[str], labels: Sequence[int], grid: Iterable[tuple[str, str, float]] = DEFAULT_GRID,
          seed: int = 0, progress: bool = True) -> tuple[list[dict], dict]:
    """Return ``(rows, correlations)``: one row per grid point (plus the clean accuracy) and the
    Spearman ρ (with p-value) of accuracy with DND, IDC, Levenshtein and BLEU-4 over the grid."""
    grid = list(grid)
    bar = progress_bar(total=len(grid), desc="word-order sweep", unit="setting", enabled=progress)
    rows = []
    for p, lv, r in grid:
        rows.append(evaluate_reordering(classifier, texts, labels, p, lv, r, seed))
        bar.update(1)
    bar.close()
    acc = [r["accuracy"] for r in rows]
    corr = {}
    for m in ("dnd", "idc", "levenshtein", "bleu4"):
        corr[f"accuracy_vs_{m}"] = rank_correlation(acc, [r[m] for r in rows])
    clean = float((classifier.predict(list(texts)) == np.asarray(labels)).mean())
    return rows, {"clean_accuracy": round(clean, 4), **corr}


@dataclass(kw_only=True)
class WordOrderOutcome(Outcome):
    """A finished word-order audit (:class:`~textaudit.request.Outcome`: its ``summary``, one record per reordering,
    its results file), the ``rows`` (one, or the grid's), the ``correlations`` of a sweep (None for one
    reordering), the ``classifier`` and the number of examples ``n``."""

    rows: list[dict]
    correlations: dict | None
    classifier: Any
    n: int


@dataclass
class WordOrderRequest:
    """Every option of ``audit wordorder`` with its default, range and help (:mod:`textaudit.request`)."""

    model: str = shared("model", ...)  # required
    data: str = shared("data", "sst2:dev")
    perturbation: str = option("neighbor_flip", choices=tuple(REORDERINGS),
                               help="full_shuffle | phrase_shuffle | neighbor_flip")
    level: str = option("word", choices=tuple(LEVELS), help="word | subword | char")
    rho: float = option(0.5, low=0.0, high=1.0, help="ρ of phrase_shuffle / neighbor_flip.")
    sweep_grid: bool = option(False, flags=("--sweep",),
                              help="Run the whole grid and correlate accuracy with DND and IDC.")
    limit: int | None = shared("limit")
    plot: Path | None = option(None, scope="command", help="Directory for accuracy-vs-DND/IDC plots (with --sweep).")
    seed: int = shared("seed", 0)
    output: Path | None = shared("output")

    @property
    def config(self) -> dict:
        """The results header's settings."""
        return {"data": dataset_id(self.data, "dev"), "seed": self.seed, "sweep": self.sweep_grid,
                **({} if self.sweep_grid else {"perturbation": self.perturbation, "level": self.level, "rho": self.rho})}

    def check(self) -> None:
        """Every one-line error before any data or model loads."""
        if self.perturbation not in REORDERINGS:
            raise TextAuditError(f"unknown --perturbation '{self.perturbation}'; use one of {', '.join(REORDERINGS)}")
        if self.level not in LEVELS:
            raise TextAuditError(f"unknown --level '{self.level}'; use one of {', '.join(LEVELS)}")
        if self.plot is not None and self.plot.exists() and not self.plot.is_dir():
            raise TextAuditError(f"--plot must be a directory, '{self.plot}' is a file")
        check_output(self.output, None, self.config)

    def run(self, *, checked: None = None, progress: bool = True, config: dict | None = None) -> WordOrderOutcome:
        """Accuracy on the reordered data (one reordering, or the grid with its correlations); the rows go to
        ``output`` (``config``: more of its header's settings, a suite's mark). The summary: one reordering's row,
        or the sweep's rows with its correlations."""
        self.check()
        ds = load_dataset(self.data, default_split="dev", limit=self.limit)
        clf = load_classifier(self.model)
        ds, _ = align_labels(ds, clf)  # class names by the model's, never by their sort order
        check_labels(ds["label"], clf.num_classes, clf.name)
        if self.sweep_grid:
            rows, corr = sweep(clf, ds["text"], ds["label"], seed=self.seed, progress=progress)
        else:
            rows = [evaluate_reordering(clf, ds["text"], ds["label"], self.perturbation, self.level, self.rho,
                                        self.seed)]
            rows[0]["model"] = clf.name
            corr = None
        records = [{"id": f"{r['perturbation']}:{r['level']}:{r['rho']}", "model": clf.name, **r} for r in rows]
        if self.output:
            write_results(self.output, records, command="wordorder",
                          config={**self.config, "model": clf.name, "model_fingerprint": clf.fingerprint,
                                  **({"correlations": corr} if corr is not None else {}), **(config or {})})
        summary = rows[0] if corr is None else {
            "model": clf.name, "data": self.data, "n": len(ds),
            "rows": [{k: v for k, v in r.items() if k != "example"} for r in rows], **corr}
        return WordOrderOutcome(summary, records, written(self.output), rows=rows, correlations=corr, classifier=clf,
                                n=len(ds))
