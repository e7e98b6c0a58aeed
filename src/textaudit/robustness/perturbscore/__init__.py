"""PerturbScore: the continuous-equivalent size ε of a discrete perturbation (Li et al., "PerturbScore:
Connecting Discrete and Continuous Perturbations in NLP").

* Model shift of a discrete perturbation x → x′: d = 1 − cos(h(x′), h(x)) on the pooled
  representation h that the output layer reads (``space="hidden"``, as the reference does), or on
  the output probabilities (``space="probs"``).
* Continuous counterpart: PGD in the input-embedding space of x within an L∞ ball of radius ε
  (absolute, in the units of the model's input vectors, as the reference does),
  maximising 1 − cos(h(e + δ), h(e)) (``steps`` sign-gradient steps of size 2.5·ε/steps). ε runs
  over a grid (step 0.01): the smallest ε whose PGD shift reaches d is x′'s ε; the tuple is dropped
  when that shift overshoots d by more than ``tolerance`` (0.005) or no ε on the grid reaches d.
  All grid points of one sentence are one batch.
* PerturbScorer: MiniLM-L6 + a regression head reading x with every substitution marked inline as
  ``orig [new]`` (:func:`mark`), trained on (x, x′, ε) tuples; evaluated by Kendall τ / Spearman ρ
  with ε next to the edit distance and the sentence-embedding distance (paper Table 3).

Modules: ``shift`` (the model shift d and its ε by PGD), ``tuples`` (the discrete perturbations
and the resumable tuple builder), ``scorer`` (the PerturbScorer and its evaluation).
"""

from textaudit.robustness.perturbscore.scorer import PerturbScorer, evaluate_scorer, spearman_kendall
from textaudit.robustness.perturbscore.shift import (
                                                     SHIFT_ATOL,
                                                     ShiftModel,
                                                     differentiable,
                                                     find_epsilon,
                                                     model_shift,
                                                     pgd_shifts,
)
from textaudit.robustness.perturbscore.tuples import (
                                                     TUPLE_PERTURBATIONS,
                                                     build_tuples,
                                                     edit_distance,
                                                     mark,
                                                     random_swap,
                                                     split_tuples,
                                                     synonym_swap,
                                                     unmark,
)

__all__ = ["SHIFT_ATOL", "ShiftModel", "differentiable", "find_epsilon", "model_shift", "pgd_shifts", "TUPLE_PERTURBATIONS", "build_tuples",
           "edit_distance", "mark", "unmark", "random_swap", "synonym_swap", "split_tuples", "PerturbScorer",
           "evaluate_scorer", "spearman_kendall"]
