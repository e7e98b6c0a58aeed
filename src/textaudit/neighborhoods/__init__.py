"""Neighbourhood builder: masked-LM single-word replacements applied up to k words away."""
