"""The zoo's model names, as a static table (nothing is registered at import time).

``<arch>[-gender-swap][-ibp]``: an architecture of :data:`ARCHS`, optionally trained with
gender-swap augmentation and/or certified (IBP) training; :data:`ZOO_MODELS` lists every name
``--model`` accepts.
"""

from __future__ import annotations

from pathlib import Path

from textaudit.errors import TextAuditError
from textaudit.resources import cache_dir

__all__ = ["check_zoo_label", "ARCHS", "AUGMENTATIONS", "ROBUST", "ROBUST_ARCHS", "JIA_ARCHS", "ZOO_MODELS", "parse_name",
           "split_robust", "checkpoint_dir"]

ARCHS = ("bow", "cnn", "lstm", "transformer", "minilm")
AUGMENTATIONS = ("gender-swap",)
#: certified (IBP) training: textaudit's recipe, and Jia et al. 2019's as published (``ibp.IBP_RECIPES``)
ROBUST = ("ibp", "ibp-jia")
#: architectures IBP can certify (:mod:`textaudit.models.zoo.ibp`)
ROBUST_ARCHS = ("bow", "cnn", "lstm")
#: ... and those Jia et al.'s recipe is built for here
JIA_ARCHS = ("lstm",)
ZOO_MODELS: tuple[str, ...] = tuple(
    [n for a in ARCHS for n in (a, *(f"{a}-{aug}" for aug in AUGMENTATIONS))] + [f"{a}-ibp" for a in ROBUST_ARCHS]
    + [f"{a}-ibp-jia" for a in JIA_ARCHS])


def split_robust(name: str) -> tuple[str, str | None]:
    """Split ``cnn-ibp`` into ``("cnn", "ibp")``, ``lstm-ibp-jia`` into ``("lstm", "ibp-jia")`` (certified-robust
    training, :mod:`textaudit.models.zoo.ibp`)."""
    for r in sorted(ROBUST, key=len, reverse=True):
        if name.endswith("-" + r):
            return name[: -len(r) - 1], r
    return name, None


def parse_name(name: str) -> tuple[str, str | None]:
    """Split a zoo name such as ``lstm-gender-swap`` into ``("lstm", "gender-swap")`` (a ``-ibp``
    suffix is ignored here; see :func:`split_robust`)."""
    name = split_robust(name)[0]
    for aug in AUGMENTATIONS:
        if name.endswith("-" + aug):
            return name[: -len(aug) - 1], aug
    return name, None


def checkpoint_dir(name: str) -> Path:
    """Return the cache directory of zoo model ``name``."""
    return cache_dir() / "models" / name


def check_zoo_label(model: object, label: str | None) -> None:
    """``--label`` on a zoo model: one line before anything loads — a zoo model is single-label by its name (loading it
    to find out would train it first: a minute or more for an error)."""
    if label is None or not isinstance(model, str) or model.strip() not in ZOO_MODELS:
        return
    raise TextAuditError(f"--label {label}: model {model} is single-label (the zoo's classes exclude each other); "
                         "--label is for multi-label models")
