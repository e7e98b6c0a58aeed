"""Counterfactual token bias B_{p,k} for protected word pairs (Double Perturbation §4)."""

from textaudit.fairness.bias import CounterfactualBias, report, run_bias
from textaudit.fairness.estimates import BiasEstimate, clustered_mean
from textaudit.fairness.pairs import GENDER_PAIRS, GROUPS, Source, find_sources, load_pairs_file, parse_pair

__all__ = ["GENDER_PAIRS", "GROUPS", "BiasEstimate", "CounterfactualBias", "Source", "clustered_mean",
           "find_sources", "load_pairs_file", "parse_pair", "run_bias", "report"]
