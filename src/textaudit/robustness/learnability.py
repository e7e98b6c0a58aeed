"""Perturbation learnability, robustness and post-augmentation gain ("Interpreting the Robustness of
Neural NLP Models to Textual Perturbations", and its earlier CENT version).

- Learnability@p (Alg. 1): draw pseudo-labels l′ ~ Bernoulli(0.5) for the training and the test
  texts (the true labels are ignored); perturb each pseudo-positive training text with probability
  p; train a fresh model on (texts, l′). On the pseudo-positive test texts that g changes
  (g(x) ≠ x: the treated units; ``n_changed`` of ``n_test``),
  learnability@p = acc(perturbed) − acc(unperturbed)   (the average treatment effect of the
  perturbation on being predicted positive), and the probability-based ATE (CENT App. B.1) is
  mean P(l′=1 | g(x)) − mean P(l′=1 | x). A perturbation that changes no test text has ATE 0.
- Average learnability over p_1 < … < p_K (trapezoid rule on log10 p, normalised by the range):
  avg = Σ_{i<K} (log10 p_{i+1} − log10 p_i)·(v_i + v_{i+1})/2  /  (log10 p_K − log10 p_1).
- Robustness (Exp. 1) = acc(perturbed test) − acc(clean test) of a model trained on clean data.
- Post-augmentation Δ (Exp. 2) = acc(perturbed test) of a model trained on the training set plus a
  perturbed copy of it − Exp. 1's acc(perturbed test).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from textaudit.backends import Backend
from textaudit.data import CORPORA, dataset_id, load_dataset
from textaudit.decision import decisions
from textaudit.errors import TextAuditError
from textaudit.formats.jsonl import RecordSpec, read_jsonl
from textaudit.models.batched import Classifier
from textaudit.models.zoo.names import ARCHS
from textaudit.models.zoo.train import DEFAULTS, TrainConfig, fit_classifier
from textaudit.perturbations.noise import NOISE_PERTURBATIONS, get_perturbation
from textaudit.request import Outcome, option, shared, written
from textaudit.runner import ResumableRun, check_sharded_output
from textaudit.shards import Shard
from textaudit.stats import rank_correlation

__all__ = ["LearnabilityRequest", "DEFAULT_PROBABILITIES", "average_learnability", "learnability_at", "robustness_and_augmentation",
           "zoo_fitter", "LEARNABILITY_RECORDS"]

#: a learnability study's records (its row of :data:`textaudit.kinds.KINDS`): one per (model, perturbation, seed,
#: probability p or "robustness") job, once (a repeat would count a training twice)
LEARNABILITY_RECORDS = RecordSpec(fields={"*": {"id": (str,), "model": (str,), "perturbation": (str,),
                                                "p": (str, int, float)}}, unique=True)

DEFAULT_PROBABILITIES = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0)
#: fewer training texts than this and the study says its numbers mean little
SMALL_TRAIN = 1000

Fit = Callable[[Sequence[str], Sequence[int]], object]


def average_learnability(probabilities: Sequence[float], values: Sequence[float]) -> float:
    """Return the trapezoid-rule area under learnability vs log10(p), divided by the log10 range
    (so a constant curve v gives v)."""
    if len(probabilities) != len(values) or len(values) == 0:
        raise TextAuditError("need one learnability value per probability")
    pairs = sorted(zip(probabilities, values))
    if any(p <= 0 for p, _ in pairs):
        raise TextAuditError("probabilities must be > 0 (they are placed on a log scale)")
    if len(pairs) == 1:
        return float(pairs[0][1])
    x = [math.log10(p) for p, _ in pairs]
    v = [val for _, val in pairs]
    area = sum((x[i + 1] - x[i]) * (v[i] + v[i + 1]) / 2 for i in range(len(x) - 1))
    return float(area / (x[-1] - x[0]))


def zoo_fitter(arch: str, seed: int = 0) -> Fit:
    """Return ``fit(texts, labels) -> Classifier`` that trains a fresh zoo model ``arch`` (quietly)."""

    def fit(texts, labels):
        cfg = TrainConfig(arch=arch, seed=seed, **DEFAULTS[arch])
        return fit_classifier(arch, list(texts), list(labels), config=cfg, progress=False, num_classes=2)

    return fit


def _acc(clf: Classifier, texts: Sequence[str], labels: Sequence[int] | int) -> float:
    y = np.full(len(texts), labels) if isinstance(labels, int) else np.asarray(labels)
    return float((clf.predict(list(texts)) == y).mean())


def learnability_at(fit: Fit, train_texts: Sequence[str], test_texts: Sequence[str], perturb, p: float,
                    seed: int = 0) -> dict:
    """Return ``{"learnability", "prob_ate", "acc_perturbed", "acc_clean", "n_test", "seconds"}`` for one p."""
    if not 0 < p <= 1:
        raise TextAuditError(f"injection probability p must be in (0, 1] (got {p})")
    t0 = time.perf_counter()
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    y_train = nrng.integers(0, 2, len(train_texts))
    y_test = nrng.integers(0, 2, len(test_texts))
    x_train = [perturb(t, rng) if y == 1 and rng.random() < p else t for t, y in zip(train_texts, y_train)]
    clf = fit(x_train, y_train.tolist())
    pos = [t for t, y in zip(test_texts, y_test) if y == 1]
    if not pos:
        raise TextAuditError("no pseudo-positive test examples; use more test data")
    pert = [perturb(t, rng) for t in pos]
    # the ATE on the treated: a text g leaves unchanged receives no treatment (its effect is 0 by
    # definition) and would only pull the average towards 0 by the share g cannot perturb
    changed = [i for i, (a, b) in enumerate(zip(pos, pert)) if a != b]
    if not changed:
        return {"learnability": 0.0, "prob_ate": 0.0, "acc_perturbed": None, "acc_clean": None, "n_test": len(pos),
                "n_changed": 0, "seconds": round(time.perf_counter() - t0, 2)}
    probs_p = clf.predict_proba([pert[i] for i in changed])
    probs_c = clf.predict_proba([pos[i] for i in changed])
    acc_p, acc_c = float((decisions(probs_p) == 1).mean()), float((decisions(probs_c) == 1).mean())
    return {"learnability": round(acc_p - acc_c, 4), "prob_ate": round(float(probs_p[:, 1].mean() - probs_c[:, 1].mean()), 4),
            "acc_perturbed": round(acc_p, 4), "acc_clean": round(acc_c, 4), "n_test": len(pos), "n_changed": len(changed),
            "seconds": round(time.perf_counter() - t0, 2)}


def robustness_and_augmentation(fit: Fit, train_texts: Sequence[str], train_labels: Sequence[int],
                                test_texts: Sequence[str], test_labels: Sequence[int], perturb, seed: int = 0,
                                clean_model=None) -> dict:
    """Return robustness (Exp. 1) and post-augmentation Δ (Exp. 2) with the accuracies behind them.

    ``clean_model``: a model already trained on the clean training set (shared across perturbations).
    """
    t0 = time.perf_counter()
    rng = random.Random(seed)
    clean = clean_model if clean_model is not None else fit(train_texts, train_labels)
    pert_test = [perturb(t, rng) for t in test_texts]
    acc_clean = _acc(clean, test_texts, test_labels)
    acc_pert = _acc(clean, pert_test, test_labels)
    aug = fit(list(train_texts) + [perturb(t, rng) for t in train_texts], list(train_labels) * 2)
    acc_pert_aug = _acc(aug, pert_test, test_labels)
    return {"robustness": round(acc_pert - acc_clean, 4), "post_aug_delta": round(acc_pert_aug - acc_pert, 4),
            "acc_clean": round(acc_clean, 4), "acc_perturbed": round(acc_pert, 4),
            "acc_perturbed_after_aug": round(acc_pert_aug, 4), "seconds": round(time.perf_counter() - t0, 2)}


class StudyJob:
    """The work of one (model, perturbation, p or "robustness", seed) run, as a worker does it; a
    worker trains each (model, seed)'s clean model once and reuses it."""

    def __init__(self, perts: dict, tr_x: list[str], tr_y: list[int], te_x: list[str], te_y: list[int]):
        self.perts, self.tr_x, self.tr_y, self.te_x, self.te_y = perts, tr_x, tr_y, te_x, te_y
        self.clean: dict[tuple, object] = {}

    def __call__(self, job: tuple[str, str, int, float | str]) -> dict:
        m, g, s, p = job
        fit = zoo_fitter(m, seed=s)
        if p != "robustness":
            return learnability_at(fit, self.tr_x, self.te_x, self.perts[g], float(p), seed=s)
        if (m, s) not in self.clean:
            self.clean[(m, s)] = fit(self.tr_x, self.tr_y)
        return robustness_and_augmentation(fit, self.tr_x, self.tr_y, self.te_x, self.te_y, self.perts[g], seed=s,
                                           clean_model=self.clean[(m, s)])


def held_out_of(data: str, eval_data: str | None = None) -> str:
    """The study's test texts: ``eval_data``, else a corpus's dev split (``sst2`` → ``sst2:dev``); a file or an
    ``hf:`` dataset names no split to hold out, and says so in one line."""
    if eval_data is not None:
        return eval_data
    name = str(data).strip().partition(":")[0].lower()
    if name in CORPORA:
        return f"{name}:dev"
    raise TextAuditError(f"learnability tests on held-out texts: give --eval-data (a file or an hf: split kept apart "
                         f"from {data}); only a corpus ({', '.join(CORPORA)}) has a dev split to take them from")


def run_study(models: Sequence[str], perturbations: Sequence[str], *, train_size: int | None = 10_000,
              seeds: int = 1, probabilities: Sequence[float] = DEFAULT_PROBABILITIES, data: str = "sst2",
              output=None, resume: bool = False, progress: bool = True, shard: Shard | None = None,
              backend: Backend | None = None, eval_data: str | None = None) -> dict:
    """Run learnability@p, robustness and post-augmentation Δ for every model × perturbation, resumable
    per (model, perturbation, p, seed), and return ``{"results": [...], "spearman": {...}}`` (seeds averaged).

    Training texts: a seeded sample of ``train_size`` texts of ``data``'s train split; test texts: its
    dev split, or ``eval_data`` (true labels only for robustness; learnability uses pseudo-labels). ``"warnings"`` says
    when the sample is too small for the numbers to mean anything.
    """
    if train_size is not None and train_size < 1:
        raise TextAuditError(f"--train-size must be at least 1 (got {train_size})")

    if seeds < 1:
        raise TextAuditError(f"--seeds must be at least 1 (got {seeds})")
    perts = {name: get_perturbation(name) for name in perturbations}
    for m in models:
        if m not in ARCHS:
            raise TextAuditError(f"learnability trains fresh zoo models; unknown model '{m}' (use {', '.join(ARCHS)})")
    train = load_dataset(data, default_split="train")
    test = load_dataset(held_out_of(data, eval_data), default_split="dev")
    idx = np.random.default_rng(0).permutation(len(train))[: train_size or len(train)]
    tr_x, tr_y = [train["text"][i] for i in idx], [train["label"][i] for i in idx]
    te_x, te_y = list(test["text"]), list(test["label"])
    jobs = [(f"{m}|{g}|{p}|{s}", (m, g, s, p)) for m in models for g in perts for s in range(seeds)
            for p in [*probabilities, "robustness"]]
    settings = {"train_size": train_size, "data": dataset_id(data, "train"),
                **({"eval_data": dataset_id(eval_data, "dev")} if eval_data is not None else {})}
    with ResumableRun(output, resume=resume, progress=progress, command="learnability", config=settings,
                      shard=shard, spec=LEARNABILITY_RECORDS) as run:
        make_worker = lambda: StudyJob(perts, tr_x, tr_y, te_x, te_y)  # noqa: E731
        job_of = dict(jobs)
        for rid, rec in run.results(jobs, make_worker, desc="learnability", unit="run", backend=backend):
            m, g, s, p = job_of[rid]
            run.write({"id": rid, "model": m, "perturbation": g, "p": p, "seed": s, **rec})
            run.show(model=m, perturbation=g, p=p)
        study = aggregate(run.records, models, list(perts), probabilities)
    if train_size is not None and train_size < SMALL_TRAIN:
        study["warnings"].append(f"--train-size {train_size} is small: models trained on so few texts learn little, "
                                 f"so learnability is near 0 everywhere (use at least {SMALL_TRAIN})")
    return study


def aggregate(records: Sequence[dict], models: Sequence[str], perturbations: Sequence[str],
              probabilities: Sequence[float]) -> dict:
    """Average the seeds of each (model, perturbation) and compute the Spearman correlations."""
    results = []
    for m in models:
        for g in perturbations:
            rows = [r for r in records if r["model"] == m and r["perturbation"] == g]
            at = {}
            for p in probabilities:
                vals = [r["learnability"] for r in rows if r["p"] != "robustness" and float(r["p"]) == float(p)]
                if vals:
                    at[str(p)] = round(float(np.mean(vals)), 4)
            rob = [r for r in rows if r["p"] == "robustness"]
            if not at or not rob:
                continue
            results.append({
                "model": m, "perturbation": g, "learnability_at": at,
                "avg_learnability": round(average_learnability([float(k) for k in at], list(at.values())), 4),
                "robustness": round(float(np.mean([r["robustness"] for r in rob])), 4),
                "post_aug_delta": round(float(np.mean([r["post_aug_delta"] for r in rob])), 4),
            })
    spear = {}
    if len(results) >= 3:
        avg = [r["avg_learnability"] for r in results]
        for key, other in (("learnability_vs_robustness", "robustness"), ("learnability_vs_post_aug", "post_aug_delta")):
            spear[key] = rank_correlation(avg, [r[other] for r in results])
    warns = []
    if results and all(v == 0 for r in results for v in r["learnability_at"].values()):
        warns.append("every learnability is 0: the models learned nothing the perturbation changes (train on more texts)")
    warns += [f"{k}: {v['note']}" for k, v in spear.items() if v.get("note")]
    return {"results": results, "spearman": spear, "warnings": warns}


@dataclass
class LearnabilityRequest:
    """Every option of ``audit learnability`` with its default, range and help (:mod:`textaudit.request`)."""

    model: list[str] = option(["bow"], flags=("--model", "-m"), sep=",",
                              help="Comma-separated zoo architectures, e.g. bow,cnn.")
    perturbation: str = option("all", help="A perturbation, a comma list, or all: " + ", ".join(NOISE_PERTURBATIONS)
                               + ".")
    train_size: int | None = option(10_000, low=1, help="Training texts sampled from SST-2 train.")
    seeds: int = option(1, low=1, help="Seeds averaged per (model, perturbation).")
    probabilities: str | None = option(None, help="Comma list of p (default 0.001,...,1.0).")
    data: str = shared("data", "sst2")
    eval_data: str | None = option(None, help=(
        "Held-out texts the models are tested on (default: the corpus's dev split: sst2 → sst2:dev); a file or an "
        "hf: dataset given as --data needs it."))
    output: Path | None = shared("output")
    resume: bool = shared("resume", False)
    shard: str | None = shared("shard")
    plot: Path | None = option(None, scope="command", help="Directory for the curves and scatter plots.")

    @property
    def perturbations(self) -> list[str]:
        return list(NOISE_PERTURBATIONS) if self.perturbation == "all" else \
            [p.strip() for p in self.perturbation.split(",") if p.strip()]

    def check(self) -> tuple[Shard | None, list[float]]:
        """Every one-line error before anything trains; returns the shard and the probabilities p."""
        held_out_of(self.data, self.eval_data)  # a file without --eval-data: its one line now
        part = check_sharded_output(self.output, self.resume, self.shard,
                                    {"train_size": self.train_size, "data": dataset_id(self.data, "train"),
                                     **({"eval_data": dataset_id(self.eval_data, "dev")} if self.eval_data else {})})
        try:
            probs = [float(p) for p in self.probabilities.split(",")] if self.probabilities else \
                list(DEFAULT_PROBABILITIES)
        except ValueError:
            raise TextAuditError(f"--probabilities must be comma-separated numbers (got '{self.probabilities}')") from None
        return part, probs

    def run(self, backend: Backend | None = None, *, checked: tuple[Shard | None, list[float]] | None = None,
            progress: bool = True) -> Outcome:
        """The study (:func:`run_study`): per model × perturbation, learnability, robustness, post-augmentation Δ
        (the outcome's summary); its records are the results file's (none without ``output``)."""
        part, probs = self.check() if checked is None else checked
        study = run_study(self.model, self.perturbations, train_size=self.train_size, seeds=self.seeds,
                          probabilities=probs, data=self.data, output=self.output, resume=self.resume, shard=part,
                          progress=progress, backend=backend, eval_data=self.eval_data)
        return Outcome(study, read_jsonl(self.output) if self.output is not None else [], written(self.output))
