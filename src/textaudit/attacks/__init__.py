"""Second-order attacks (SO-Enum, SO-Beam, random baseline) and first-order baselines.

>>> from textaudit.attacks import SOBeam                     # doctest: +SKIP
>>> SOBeam(load_classifier("cnn"), k=6).attack("a deep and meaningful film .", label=1)
"""

from textaudit.attacks.base import Attack, AttackResult, Budget, Found, Goal
from textaudit.attacks.first_order import BAEAttack, FirstOrderAttack, GeneticAttack
from textaudit.attacks.patch import Patch, PatchWords, apply_patch
from textaudit.attacks.registry import METHODS, MethodSpec, make_attack
from textaudit.attacks.run import run_attack, summarize
from textaudit.attacks.second_order import RandomBaseline, SecondOrderAttack, SOBeam, SOEnum, pair_loss

__all__ = ["Attack", "AttackResult", "Budget", "Found", "Goal", "Patch", "PatchWords", "apply_patch",
           "SecondOrderAttack", "SOEnum", "SOBeam", "RandomBaseline", "pair_loss", "run_attack", "summarize",
           "METHODS", "MethodSpec", "make_attack", "GeneticAttack", "BAEAttack", "FirstOrderAttack"]
