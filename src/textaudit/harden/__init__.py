"""Hardening: train the weaknesses the audits find out of a model, and prove it on held-out examples.

>>> from textaudit.harden import HardenSettings, harden
>>> result = harden(HardenSettings(model="cnn", method="augment"), "runs/cnn-augment")  # doctest: +SKIP
>>> result["before"]["success_rate"], result["after"]["success_rate"], result["mcnemar_p"]  # doctest: +SKIP

See :mod:`textaudit.harden.run` (the methods and the results folder), :mod:`textaudit.harden.before_after`
(the held-out audit) and ``audit harden --help``.
"""

from textaudit.harden.run import METHODS, HardenSettings, harden, parse_eval_attacks

__all__ = ["HardenSettings", "harden", "METHODS", "parse_eval_attacks"]
