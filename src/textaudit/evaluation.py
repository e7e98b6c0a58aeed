"""``audit evaluate`` stated once: :class:`EvaluateRequest` — a model's accuracy on labelled data, overall and per
class with Wilson intervals, and with ``perturbed`` its calibration on the originals and on perturbed versions of
them (:mod:`textaudit.robustness.calibration`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from textaudit.classification import (
    below_chance,
    classification_metrics,
    label_confusions,
    multilabel_metrics,
    one_class_warning,
)
from textaudit.data import (
    align_labels,
    as_pairs,
    check_labels,
    dataset_id,
    label_lists,
    load_dataset,
    pairs_of,
    parse_label_map,
)
from textaudit.decision import TIE, decisions
from textaudit.errors import TextAuditError
from textaudit.findings import label_on, read_findings
from textaudit.formats.jsonl import check_output, read_jsonl, write_results
from textaudit.model_traits import traits_of
from textaudit.models import load_classifier
from textaudit.models.batched import check_label_threshold, label_only_report, label_view
from textaudit.models.zoo.names import ZOO_MODELS
from textaudit.notices import say as say_line
from textaudit.plotting import pyplot, save_figure
from textaudit.request import Outcome, option, shared, written
from textaudit.robustness.calibration import (
    calibration_under_perturbation,
    perturb,
    perturbation_methods,
    plot_reliability,
)
from textaudit.stats import wilson

__all__ = ["EvaluateRequest", "one_class_warning", "plot_confusion"]


def plot_confusion(panels: Sequence[tuple[str, Sequence[str], Sequence[Sequence[int]]]], path: str | Path,
                   title: str = "") -> Path:
    """Confusion matrices side by side, one panel per ``(title, classes, matrix)`` (a multi-label model: one 2×2
    panel per label): rows the data's class, columns the model's, each cell's count written in it and its shade the
    share of its row (the class's recall on the diagonal), so a rare class reads as clearly as a common one."""
    plt = pyplot()
    k = len(panels)
    size = max(2.6, 0.55 * max(len(c) for _, c, _ in panels) + 1.6)
    fig, axes = plt.subplots(1, k, figsize=(size * k, size), squeeze=False)
    for ax, (name, classes, matrix) in zip(axes[0], panels):
        m = np.asarray(matrix, dtype=float)
        share = m / np.maximum(m.sum(1, keepdims=True), 1)
        ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
        for (t, q), v in np.ndenumerate(m):
            ax.text(q, t, f"{int(v)}", ha="center", va="center", fontsize=8,
                    color="white" if share[t, q] > 0.6 else "black")
        ax.set_xticks(range(len(classes)), [str(c) for c in classes], rotation=30, ha="right", fontsize=7)
        ax.set_yticks(range(len(classes)), [str(c) for c in classes], fontsize=7)
        ax.set_xlabel("model's class", fontsize=8)
        ax.set_ylabel("data's class", fontsize=8)
        if k > 1:
            ax.set_title(name, fontsize=8)
    fig.suptitle(title or "confusion matrix", fontsize=9)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, path, dpi=120)


@dataclass
class EvaluateRequest:
    """Every option of ``audit evaluate`` with its default, range and help (:mod:`textaudit.request`)."""

    model: str = shared("model", ...)  # required
    data: str = shared("data", "sst2:dev")
    text_column: str | None = shared("text_column")
    label_column: str | None = shared("label_column")
    label_map: str | None = shared("label_map")
    target_label: str | None = shared("target_label")
    label_threshold: float = shared("label_threshold", 0.5)
    label_columns: str | None = option(None, help=(
        "A multi-label model evaluated on every label at once (without --label): the data's 0/1 columns, one per "
        "label, named as the model's labels (default: all of them), e.g. toxic,insult; or one column of label lists "
        "(a list, a JSON list, or names separated by , ; |). Per-label precision, recall and F1, their micro and macro "
        "averages, the subset accuracy and the Hamming loss."))
    pair_column: str | None = shared("pair_column")
    limit: int | None = shared("limit")
    sample: int | None = shared("sample")
    perturbed: str | None = option(None, help=(
        "Calibration under perturbation: METHOD (neighbors: a masked-LM neighbour one word away; or a noise "
        "perturbation: whitespace_perturbation, butter_fingers_perturbation, …) or FILE (an audit attack results "
        "file: each finding's original beside its vulnerable example). ECE, Brier score and mean confidence on the "
        "originals and the perturbed texts, paired, with 95% intervals; the perturbed text keeps the original's "
        "label."))
    bins: int = option(10, low=1, help="With --perturbed: the equal-width confidence bins of the ECE.")
    plot: Path | None = option(None, scope="command", help=(
        "A directory for the figures: the confusion matrix (confusion.png; a multi-label model: each label's), and "
        "with --perturbed the reliability diagram."))
    output: Path | None = shared("output")
    mlm: str | None = shared("mlm")
    seed: int = shared("seed", 0)

    def check(self) -> None:
        """Every one-line error before any data or model loads."""
        if self.output is not None:
            check_output(self.output, None)  # never over a file: refused before anything runs
        if self.label_columns is not None:
            self.label_column_names()  # its one line, before anything loads
        if self.perturbed is not None and not Path(self.perturbed).exists():
            if self.perturbed not in perturbation_methods():
                raise TextAuditError(f"--perturbed {self.perturbed!r} is neither a results file nor a method; use a file "
                                     f"of audit attack --output or one of {', '.join(perturbation_methods())}")

    def label_column_names(self) -> list[str] | None:
        """``--label-columns``: the names it lists (None: not given), each once; an empty list or a name twice is
        one line (a label counted twice would weigh twice in the micro averages)."""
        if self.label_columns is None:
            return None
        names = [c.strip() for c in self.label_columns.split(",")]
        if not any(names):
            raise TextAuditError(f"--label-columns {self.label_columns!r} names no column: give the data's 0/1 columns, "
                                 "e.g. toxic,insult, or one column of label lists")
        names = [c for c in names if c]
        twice = next((c for i, c in enumerate(names) if c in names[:i]), None)
        if twice is not None:
            raise TextAuditError(f"--label-columns names {twice!r} twice: give each label's column once")
        return names

    def run(self, *, checked: None = None, progress: bool = True, say: Callable[[str], None] = say_line,
            config: dict | None = None) -> Outcome:
        """The outcome; its summary: ``accuracy`` with its interval, ``per_class``, ``macro``, ``micro``,
        ``confusion``, an endpoint's label report, warnings, and with ``perturbed`` the ``calibration`` (its records
        to ``output``, its diagram to ``plot``); without ``perturbed``, ``output`` gets each example's label and
        prediction (``audit report`` and ``results.load`` recompute the metrics from them) and ``plot`` the confusion
        matrix. Its records are the file's (none without ``output``); ``config``: more of the results header's
        settings (a suite's mark)."""
        self.check()
        summary = self._summary(say, dict(config or {}))
        return Outcome(summary, read_jsonl(self.output) if self.output is not None else [], written(self.output))

    def _summary(self, say: Callable[[str], None], header: dict) -> dict:
        """The summary (``header``: more of the results file's header settings)."""
        columns = dict(text_column=self.text_column, label_column=self.label_column, pair_column=self.pair_column,
                       default_split="dev", limit=self.limit, sample=self.sample, seed=self.seed)
        zoo = str(self.model) in ZOO_MODELS  # never multi-label: data without labels is refused before it trains
        ds = load_dataset(self.data, **columns, require_labels=zoo)  # a multi-label model's data: a column per label
        model = load_classifier(self.model)
        multi = traits_of(model).multilabel
        if self.label_columns is not None and not multi:
            raise TextAuditError(f"--label-columns goes with a multi-label model; model {model.name} is single-label: "
                                 "remove it (--label-column names the one label column)")
        if self.label_columns is not None and self.target_label is not None:
            raise TextAuditError(f"--label-columns evaluates every label at once and --label {self.target_label} one "
                                 "label: give one of them")
        if multi and self.target_label is None:
            if self.perturbed is not None:
                raise TextAuditError(f"--perturbed calibrates one label of multi-label model {model.name} at a time: add "
                                     f"--label NAME (its labels: {', '.join(model.labels or [])})")
            return self._multilabel(model, say, header)
        if (np.asarray(ds["label"]) < 0).any():
            ds = load_dataset(self.data, **columns)  # no label column: its one line
        clf = label_view(model, self.target_label, self.label_threshold)
        ds, classes = align_labels(ds, clf, parse_label_map(self.label_map))
        probs = clf.predict_proba(as_pairs(ds["text"], pairs_of(ds)))  # C from the model's own answer (pairs too)
        check_labels(ds["label"], probs.shape[1], clf.name)
        labels = np.asarray(ds["label"])
        pred = decisions(probs)  # a tie decides nothing: never right, never a class's prediction
        right = pred == labels
        names = classes or [str(i) for i in range(probs.shape[1])]
        per_class = [{"class": names[c], "n": int((labels == c).sum()),
                      "accuracy": round(float(right[labels == c].mean()), 4),
                      "accuracy_ci95": list(wilson(int(right[labels == c].sum()), int((labels == c).sum())) or ())}
                     for c in range(probs.shape[1]) if (labels == c).any()]
        extra = label_only_report(clf, pred)
        ties = int((pred == TIE).sum())
        if ties:  # counted as wrong and in no class's column: say so, with the count
            extra["ties"] = ties
            say(f"note: {ties} of {len(pred)} texts tie between classes (no decision): counted as not right")
        warnings = [w for w in (one_class_warning(clf, pred, labels, names),
                                below_chance(int(right.sum()), len(right), probs.shape[1])) if w]
        for w in warnings:
            say(w)
        if warnings:
            extra["warnings"] = warnings
        if self.perturbed is not None:
            extra["calibration"] = self._calibration(clf, ds, say, header)
        metrics = classification_metrics(labels, pred, names, seed=self.seed)
        for row, m in zip(per_class, (m for m in metrics["per_class"] if m["support"])):
            row.update({k: v for k, v in m.items() if k != "class"})  # the same class: rows of classes the data holds
        if self.perturbed is None:
            self._keep([{"id": str(i), "label": int(y), "prediction": int(q)} for i, y, q in zip(ds["id"], labels, pred)],
                       clf, names, [(clf.name, names, metrics["confusion"]["matrix"])], say, header)
        return {"model": clf.name, "data": self.data, "accuracy": round(float(right.mean()), 4),
                "accuracy_ci95": list(wilson(int(right.sum()), len(ds)) or ()), "n": len(ds), "labels": classes,
                "per_class": per_class, "macro": metrics["macro"], "micro": metrics["micro"],
                "confusion": metrics["confusion"], **extra}

    def _multilabel(self, model, say: Callable[[str], None], header: dict) -> dict:
        """Every label of a multi-label model at once: the data's 0/1 column of each label against the label's
        decision (its probability above ``label_threshold``, strictly) — :func:`multilabel_metrics`."""
        names = self.label_column_names() or list(model.labels)
        if len(names) == 1 and names[0] not in model.labels:  # one column of label lists
            return self._multilabel_lists(model, names[0], say, header)
        unknown = [c for c in names if c not in model.labels]
        if unknown:
            raise TextAuditError(f"--label-columns {unknown[0]}: model {model.name} has no label {unknown[0]!r}; its "
                                 f"labels: {', '.join(model.labels)}")
        truth, ds = [], None
        for name in names:  # one column a label: each read as the data's labels are (missing: one line)
            ds = load_dataset(self.data, text_column=self.text_column, label_column=name, default_split="dev",
                              limit=self.limit, sample=self.sample, seed=self.seed)
            y = np.asarray(ds["label"])
            if not set(np.unique(y).tolist()) <= {0, 1}:
                raise TextAuditError(f"column {name} of {self.data} must hold 0 or 1 (the label off or on) in every row")
            truth.append(y)
        return self._multilabel_summary(model, ds, np.stack(truth, 1), names, say, header)

    def _multilabel_lists(self, model, column: str, say: Callable[[str], None], header: dict) -> dict:
        """Every label of the model against the data's one column of label lists (a label listed: on)."""
        lists = label_lists(self.data, column, limit=self.limit, sample=self.sample, seed=self.seed)
        unknown = sorted({x for row in lists for x in row} - set(model.labels))
        if unknown:
            raise TextAuditError(f"column {column} of {self.data} lists {unknown[0]!r}, which is not a label of model "
                                 f"{model.name} ({', '.join(model.labels)})")
        ds = load_dataset(self.data, text_column=self.text_column, default_split="dev", limit=self.limit,
                          sample=self.sample, seed=self.seed, require_labels=False)
        truth = np.array([[name in row for name in model.labels] for row in lists], dtype=int)
        return self._multilabel_summary(model, ds, truth, list(model.labels), say, header)

    def _multilabel_summary(self, model, ds, truth: np.ndarray, names: list[str], say: Callable[[str], None],
                            header: dict) -> dict:
        texts = list(ds["text"])
        check_label_threshold(self.label_threshold)
        probs = model.predict_proba(texts)
        decided = probs[:, [model.labels.index(n) for n in names]] > self.label_threshold
        out = multilabel_metrics(truth, decided, names, seed=self.seed)
        self._keep([{"id": str(i), "truth": [int(v) for v in t], "decided": [int(v) for v in d]}
                    for i, t, d in zip(ds["id"], truth, decided)], model, names, label_confusions(truth, decided, names),
                   say, {"multilabel": True, "threshold": self.label_threshold, **header})
        return {"model": model.name, "data": self.data, "n": len(texts), "labels": names, "multilabel": True,
                "threshold": self.label_threshold, **out}

    def _keep(self, records: list[dict], clf, names: list[str], panels: list[tuple[str, list[str], list]],
              say: Callable[[str], None], header: dict) -> None:
        """``--output``: the predictions as a results file (its header names the classes, the seed of the intervals
        and ``header``'s settings: multi-label, the threshold; a suite's mark); ``--plot``: the confusion matrices of
        ``panels`` (title, classes, matrix)."""
        if self.output is not None:
            write_results(self.output, records, command="evaluate", config={
                "model": clf.name, "model_fingerprint": getattr(clf, "fingerprint", None),
                "data": dataset_id(self.data, "dev"), "labels": names, "seed": self.seed, **header})
            say(f"predictions: {self.output}")
        if self.plot is not None:
            say(f"plot: {plot_confusion(panels, Path(self.plot) / 'confusion.png', f'{clf.name} on {self.data}')}")

    def _calibration(self, clf, ds, say: Callable[[str], None], header: dict) -> dict:
        """The originals and their perturbed versions (a method's, or a results file's findings), scored and
        compared (:func:`~textaudit.robustness.calibration.calibration_under_perturbation`); ``output``: their
        records as a results file (``audit report`` draws its reliability diagram)."""
        perturbed = str(self.perturbed)
        if pairs_of(ds) is not None:
            raise TextAuditError("--perturbed takes single texts for now, not sentence pairs")
        if Path(perturbed).exists():
            found = [f for f in read_findings([perturbed], bias=False) if f.label is not None]
            texts, ids = [f.text for f in found], [f.id for f in found]
            labels = [label_on(f, clf) for f in found]  # by class name where both name their classes
            changed = [f.vulnerable_patched or f.vulnerable for f in found]
            check_labels(labels, clf.num_classes, clf.name)  # another task's findings: one line, not an IndexError
            source = f"the findings of {Path(perturbed).name} (x beside x' or x̃ ⊕ p)"
        else:
            texts, labels, ids = list(ds["text"]), list(ds["label"]), list(ds["id"])
            changed = perturb(texts, perturbed, seed=self.seed, mlm=self.mlm)
            source = f"{perturbed} of each text (seed {self.seed})"
        res, records = calibration_under_perturbation(clf, texts, changed, labels, self.bins, self.seed, ids)
        res["perturbed_by"] = source
        if self.output is not None:
            write_results(self.output, records, command="evaluate", config={
                "model": clf.name, "model_fingerprint": getattr(clf, "fingerprint", None),
                "data": dataset_id(self.data, "dev"), "perturbed": perturbed, "perturbed_by": source, "bins": self.bins,
                "seed": self.seed, **header})
            say(f"calibration records: {self.output}")
        if self.plot is not None:
            path = plot_reliability(res, Path(self.plot) / "reliability.png", f"{clf.name}: originals vs {perturbed}")
            say(f"plot: {path}")
        return res
