"""Neighbourhood builder: masked-LM single-word replacements applied up to k words away.

>>> from textaudit.neighborhoods import NeighborhoodBuilder, load_mlm
>>> nb = NeighborhoodBuilder(load_mlm(), kappa=20, delta=3.0)   # κ, δ of Double Perturbation
>>> [n.text for n in nb.neighbors("a deep and meaningful film .", k=1)][:3]  # doctest: +SKIP
"""

from textaudit.neighborhoods.builder import Neighbor, NeighborhoodBuilder
from textaudit.neighborhoods.mlm import HFMaskedLM, MaskedLM, load_mlm

__all__ = ["NeighborhoodBuilder", "Neighbor", "MaskedLM", "HFMaskedLM", "load_mlm"]
