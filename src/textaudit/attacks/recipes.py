"""The first-order attacks' recipes, as table entries: ``RECIPES``, method → recipe name → :class:`Recipe`.

``paper`` is the recipe as published and as TextAttack builds it (the implementation the Double Perturbation paper
ran, §5): each constraint it applies, with textaudit's offline component where the original cannot be had here —
each such stand-in named in :attr:`Recipe.stand_ins`, so a cell that used one says so. ``relaxed`` is the search
without the constraints that need a tagger or a causal LM (textaudit's default for ``audit attack``: it loads
nothing more than the model and the masked LM).

The recipe is an option like any other (``audit attack --method bae --recipe paper``; ``make_attack("bae", clf,
recipe="paper")``), recorded in the results header with the attack's settings; ``--resume`` of a file made with
another recipe is refused, as for any other setting.

>>> sorted(RECIPES["bae"])
['paper', 'relaxed']
>>> RECIPES.get("genetic").get("paper").options.get("lm_rule")
'jia'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textaudit.errors import TextAuditError

__all__ = ["Recipe", "RECIPES", "RECIPE_NAMES", "DEFAULT_RECIPE", "recipe_options"]

#: the recipes every first-order method has
RECIPE_NAMES = ("paper", "relaxed")
#: ``audit attack``'s (``benchmarks/reproduce_paper.py`` runs ``paper``)
DEFAULT_RECIPE = "relaxed"


@dataclass(frozen=True)
class Recipe:
    """One recipe of one method: the options it sets (the rest are the method's defaults), what it is, and the
    offline stand-ins it uses for the published components."""

    method: str
    name: str
    options: dict[str, Any]
    summary: str
    stand_ins: tuple[str, ...] = field(default=())


RECIPES: dict[str, dict[str, Recipe]] = {
    "bae": {
        "paper": Recipe("bae", "paper", {"pos": True, "window": 15},
                        "BAE-R as TextAttack's bae recipe: top 50 masked-LM words, the part-of-speech filter (noun ↔ "
                        "verb allowed), sentence similarity of the 15 words around the swap (sentences of fewer "
                        "words not compared)",
                        ("MiniLM-L6 at cosine ≥ 0.85 (benchmarks/calibrate_similarity.py) for USE at ≥ 0.936",
                         "TextBlob's Pattern tagger for NLTK's averaged perceptron",
                         "the offline masked LM (minilm-mlm; distilbert-base-uncased online) for BERT-base")),
        "relaxed": Recipe("bae", "relaxed", {"pos": False, "window": None},
                          "BAE-R without the part-of-speech filter, similarity of whole sentences",
                          ("MiniLM-L6 at cosine ≥ 0.85 for USE at ≥ 0.936",
                           "the offline masked LM (minilm-mlm) for BERT-base")),
    },
    "genetic": {
        "paper": Recipe("genetic", "paper", {"lm_rule": "jia", "lm": True, "repeat": False},
                        "Genetic as TextAttack's faster-alzantot recipe (Jia et al. 2019): population 60, 40 "
                        "generations, 8 counter-fitted synonyms, ≤ 20% of the words, each substituted once "
                        "(RepeatModification), a candidate kept when log P of the 6 words around it is within 5 nats "
                        "of x0's",
                        ("SmolLM2-135M for the 1-billion-word Learning-to-Write LM",)),
        "relaxed": Recipe("genetic", "relaxed", {"lm": False},
                          "Genetic without a language-model constraint"),
    },
}


def recipe_options(method: str, recipe: str | None) -> dict[str, Any]:
    """The options ``recipe`` sets for ``method`` (None: :data:`DEFAULT_RECIPE`), or a one-line error."""
    if recipe is None:
        recipe = DEFAULT_RECIPE
    if recipe not in RECIPE_NAMES:
        raise TextAuditError(f"--recipe must be one of {', '.join(RECIPE_NAMES)} (got {recipe!r})")
    if method not in RECIPES:
        raise TextAuditError(f"--recipe applies to --method {', '.join(RECIPES)} only, not to {method}")
    return dict(RECIPES[method][recipe].options)
