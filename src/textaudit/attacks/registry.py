"""The attack methods, as one table: ``METHODS = {name: MethodSpec}``.

A method is a table entry, not a code path: its class, whether it needs the masked LM, and the
options it accepts. The library (:func:`make_attack`) and the CLI (``audit attack``) read the
same table, so which option goes with which method is written once. ``textattack:<recipe>``
names any TextAttack recipe (extra ``textaudit[textattack]``); its spec is made from the name.

>>> sorted(METHODS)
['bae', 'genetic', 'random', 'so-beam', 'so-enum']
>>> method_spec("so-enum").options >= {"k", "kappa", "delta"}
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textaudit.attacks.base import Attack, check_budgets
from textaudit.attacks.first_order import BAEAttack, GeneticAttack
from textaudit.attacks.second_order import RandomBaseline, SecondOrderAttack, SOBeam, SOEnum, check_beam
from textaudit.attacks.textattack_interop import TextAttackRecipe, require_textattack
from textaudit.errors import TextAuditError
from textaudit.models.batched import Classifier

__all__ = ["MethodSpec", "METHODS", "method_spec", "default_method", "check_options", "make_attack", "option_flag",
           "estimate_queries"]

#: options of every method (the budgets and the seed)
_COMMON = frozenset({"max_queries", "time_budget", "seed"})
#: options of the neighbourhood search: k words away, κ, δ, the masked LM, the patch words, words never
#: introduced, how sentences split into words
_NEIGHBORHOOD = frozenset({"k", "kappa", "delta", "mlm", "patch_words", "blacklist", "language", "naturalness"})


@dataclass(frozen=True)
class MethodSpec:
    """One attack method: ``cls(classifier, **options)`` builds it; ``options`` are the keyword
    options it accepts; ``needs_mlm``: it queries the masked LM (load one before building)."""

    name: str
    cls: type[Attack]
    needs_mlm: bool
    options: frozenset[str]
    summary: str
    recipe: str | None = None  # textattack:<recipe>

    def build(self, classifier: Classifier, **options: Any) -> Attack:
        if self.recipe is not None:
            return self.cls(classifier, self.recipe, **options)
        return self.cls(classifier, **options)


METHODS: dict[str, MethodSpec] = {
    "so-beam": MethodSpec("so-beam", SOBeam, True, _COMMON | _NEIGHBORHOOD | {"beam"},
                          "SO-Beam (Alg. 2): beam search of width β, up to k words away"),
    "so-enum": MethodSpec("so-enum", SOEnum, True, _COMMON | _NEIGHBORHOOD,
                          "SO-Enum: Neighbor_k enumerated, k <= 2"),
    "random": MethodSpec("random", RandomBaseline, True, _COMMON | _NEIGHBORHOOD,
                         "random walk of k steps (App. A.1 baseline)"),
    "genetic": MethodSpec("genetic", GeneticAttack, False, _COMMON | {"lm", "neighbors", "recipe", "lm_rule", "repeat"},
                          "first-order Genetic (Alzantot et al.; Jia et al.'s variant)"),
    "bae": MethodSpec("bae", BAEAttack, True, _COMMON | {"mlm", "threshold", "encoder", "recipe", "pos", "window"},
                      "first-order BAE-R (Garg & Ramakrishnan)"),
}

#: the CLI flag of an option whose flag is not ``--`` + its name with dashes
_FLAGS = {"lm": "--lm-constraint", "mlm": "--mlm", "patch_words": "--pairs-file"}


def option_flag(option: str) -> str:
    """The ``audit attack`` flag of a library option (``max_queries`` → ``--max-queries``)."""
    return _FLAGS.get(option, "--" + option.replace("_", "-"))


def default_method(k: int | None) -> str:
    """The method ``audit attack`` runs without ``--method``: SO-Enum for k ≤ 2, else SO-Beam."""
    return "so-enum" if k is not None and k <= 2 else "so-beam"


def estimate_queries(method: str, k: int, words: int, *, beam: int = 20, kappa: int = 20) -> tuple[int, str] | None:
    """An upper bound on one example's classifier queries for ``method`` on a sentence of ``words``
    replaceable words, and how it is counted (None for methods without one). A search usually stops
    far earlier, at its first vulnerable example; the bound says what a robust example costs."""
    nb = max(words, 1) * kappa  # |Neighbor_1| at most: every position, κ candidates
    if method == "so-beam":
        width, total = 1, 1
        for _ in range(k):
            total += width * nb
            width = min(beam, width * nb)
        return 2 * total, f"k={k} rounds of β={beam} sentences × {words} words × κ={kappa} candidates, each with x ⊕ p"
    if method == "so-enum":
        return 2 * (1 + nb + (nb * nb // 2 if k >= 2 else 0)), f"Neighbor_{k} of {words} words × κ={kappa}, each with x ⊕ p"
    if method == "random":
        return 2 * (1 + k), f"{k} random steps, each with x ⊕ p"
    return None


def method_spec(method: str) -> MethodSpec:
    """The :class:`MethodSpec` of ``method``, or a one-line error naming the methods there are."""
    if method in METHODS:
        return METHODS[method]
    if method.startswith("textattack:") and method != "textattack:":
        require_textattack()
        recipe = method.split(":", 1)[1]
        options = frozenset({"max_queries", "seed", "mlm", "encoder", "neighbors"}
                            | ({"threshold", "recipe", "pos"} if recipe == "bae" else set())
                            | ({"recipe", "lm"} if recipe == "genetic" else set()))
        return MethodSpec(method, TextAttackRecipe, recipe == "bae", options, f"TextAttack recipe {recipe}", recipe)
    raise TextAuditError(f"unknown attack method '{method}'; use one of {', '.join(METHODS)}, or textattack:<recipe>")


def check_options(method: str, options: dict[str, Any]) -> MethodSpec:
    """Validate ``options`` for ``method`` before any model is loaded and return its spec.

    An option set to None means "not given". A given option the method does not accept is a
    one-line error naming the methods that do; values are checked (k, β, budgets) too."""
    spec = method_spec(method)
    for name, value in options.items():
        if value is None or value is False or name in spec.options:
            continue
        users = [m for m, s in METHODS.items() if name in s.options]
        if name == "recipe":  # (textaudit's recipes of TextAttack's searches: textattack_interop.OFFLINE_RECIPES)
            users += [f"textattack:{m}" for m in users]
        where = f"--method {', '.join(users)}" if users else "no method"
        if name == "time_budget":
            where += " (a TextAttack search cannot be stopped by time; use --max-queries)"
        raise TextAuditError(f"{option_flag(name)} applies to {where} only, not to {method}")
    check_budgets(options.get("max_queries"), options.get("time_budget"))
    if issubclass(spec.cls, SecondOrderAttack):
        k = options.get("k")
        spec.cls.check_k(spec.cls.default_k if k is None else k)
    if options.get("beam") is not None:
        check_beam(options["beam"])
    if options.get("kappa") is not None and options["kappa"] < 1:
        raise TextAuditError(f"--kappa (κ) must be at least 1 (got {options['kappa']})")
    if options.get("delta") is not None and options["delta"] < 0:
        raise TextAuditError(f"--delta (δ) must be >= 0 (got {options['delta']})")
    return spec


def make_attack(method: str | None, classifier: Classifier, **options: Any) -> Attack:
    """Return the attack object for ``method`` (None: :func:`default_method` of ``k``) on
    ``classifier``; options set to None take the method's defaults (see :data:`METHODS`)."""
    method = method or default_method(options.get("k"))
    spec = check_options(method, options)
    return spec.build(classifier, **{k: v for k, v in options.items() if v is not None and k in spec.options})
