"""Counterfactual token bias B_{p,k} for protected word pairs."""
