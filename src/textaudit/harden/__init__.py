"""Hardening: train the weaknesses the audits find out of a model, and prove it on held-out examples.

>>> from textaudit.harden import HardenRequest
>>> result = HardenRequest(model="cnn", method="augment", out="runs/cnn-augment").run().summary  # doctest: +SKIP
>>> result["before"]["success_rate"], result["after"]["success_rate"], result["mcnemar_p"]  # doctest: +SKIP

See :mod:`textaudit.harden.run` (the request, the methods and the results folder),
:mod:`textaudit.harden.before_after` (the held-out audit) and ``audit harden --help``.
"""

from textaudit.harden.run import METHODS, HardenRequest, harden, parse_eval_attacks

__all__ = ["HardenRequest", "harden", "METHODS", "parse_eval_attacks"]
