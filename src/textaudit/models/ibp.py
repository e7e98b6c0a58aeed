"""Interval Bound Propagation for the zoo's models: :mod:`textaudit.models.zoo.ibp`, importable here as
it always was (``from textaudit.models.ibp import certify_classifier``)."""

from textaudit.models.zoo.ibp import *  # noqa: F403
from textaudit.models.zoo.ibp import __all__  # noqa: F401
