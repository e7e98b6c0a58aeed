"""``audit perturbscore build`` stated once: :class:`TuplesRequest` holds every option of building PerturbScore's
(x, x′, edit distance, d, ε) tuples (:func:`~textaudit.robustness.perturbscore.tuples.build_tuples`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from textaudit.backends import Backend
from textaudit.data import load_dataset
from textaudit.errors import TextAuditError
from textaudit.models import load_classifier
from textaudit.request import Outcome, option, shared, written
from textaudit.robustness.perturbscore.tuples import TUPLE_PERTURBATIONS, build_tuples, summarize_tuples
from textaudit.runner import check_sharded_output
from textaudit.shards import Shard

__all__ = ["TuplesRequest", "SPACES"]

#: where the model shift d is measured: the pooled representation the output layer reads, or the probabilities
SPACES = ("hidden", "probs")


@dataclass
class TuplesRequest:
    """Every option of ``audit perturbscore build`` with its default, range and help (:mod:`textaudit.request`)."""

    model: str = option("cnn", flags=("--model", "-m"),
                        help="A zoo model or hf: classifier (needs input embeddings).")
    perturbation: str = option("random-swap", choices=tuple(TUPLE_PERTURBATIONS), help="random-swap | synonym-swap")
    n: int = option(1000, low=1, help="Perturbations to try (dropped ones included).")
    data: str = shared("data", "sst2:dev")
    output: Path = option(Path("runs/perturbscore_tuples.jsonl"), flags=("--output", "-o"), scope="command",
                          help="JSONL of tuples, written as it goes.")
    resume: bool = shared("resume", False)
    shard: str | None = shared("shard")
    space: str = option("hidden", choices=SPACES, help="hidden (pooled representation) | probs")
    steps: int = option(5, low=1, help="PGD steps per ε.")
    max_eps: float = option(1.0, low=0.01, help="Largest ε of the grid (step 0.01).")
    tolerance: float = option(0.005, low=0.0, help="Drop a tuple whose closest shift is off by more.")
    max_words: int = option(3, low=1, help="Words a perturbation changes: 1 to this many (the edit distances spanned).")
    seed: int = shared("seed", 0)

    def check(self) -> Shard | None:
        """Every one-line error before anything loads; returns the shard."""
        if self.space not in SPACES:
            raise TextAuditError(f"--space must be hidden or probs (got {self.space})")
        if self.perturbation not in TUPLE_PERTURBATIONS:
            raise TextAuditError(f"unknown perturbation '{self.perturbation}'; use one of "
                                 f"{', '.join(TUPLE_PERTURBATIONS)}")
        return check_sharded_output(self.output, self.resume, self.shard, dict(
            perturbation=self.perturbation, seed=self.seed, space=self.space, steps=self.steps, max_eps=self.max_eps,
            tolerance=self.tolerance, **({"max_words": self.max_words} if self.max_words != 3 else {})))

    def run(self, backend: Backend | None = None, *, checked: Shard | None = None, progress: bool = True) -> Outcome:
        """Build the tuples into ``output``; the outcome: their summary, the tuples (``checked``: :meth:`check`'s
        answer, the shard)."""
        shard = self.check() if checked is None else checked
        ds = load_dataset(self.data, default_split="dev", require_labels=False)
        if backend is not None:
            backend.start()  # workers import their libraries while the models load here
        clf = load_classifier(self.model)
        t0 = time.perf_counter()
        recs = build_tuples(clf, list(ds["text"]), perturbation=self.perturbation, n=self.n, seed=self.seed,
                            output=self.output, resume=self.resume, space=self.space, steps=self.steps,
                            max_eps=self.max_eps, tolerance=self.tolerance, ids=ds["id"], shard=shard, backend=backend,
                            progress=progress, max_words=self.max_words)
        return Outcome({"model": clf.name, "perturbation": self.perturbation, **summarize_tuples(recs),
                        "seconds": round(time.perf_counter() - t0, 1), "output": str(self.output)}, recs,
                       written(self.output))
