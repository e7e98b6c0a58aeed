"""The zoo's model names, as a static table (nothing is registered at import time).

``<arch>[-gender-swap][-ibp]``: an architecture of :data:`ARCHS`, optionally trained with
gender-swap augmentation and/or certified (IBP) training; :data:`ZOO_MODELS` lists every name
``--model`` accepts.
"""

from __future__ import annotations

from pathlib import Path

from textaudit.resources import cache_dir

__all__ = ["ARCHS", "AUGMENTATIONS", "ROBUST", "ROBUST_ARCHS", "ZOO_MODELS", "parse_name", "split_robust",
           "checkpoint_dir"]

ARCHS = ("bow", "cnn", "lstm", "transformer", "minilm")
AUGMENTATIONS = ("gender-swap",)
ROBUST = ("ibp",)
#: architectures IBP can certify (:mod:`textaudit.models.zoo.ibp`)
ROBUST_ARCHS = ("bow", "cnn", "lstm")
ZOO_MODELS: tuple[str, ...] = tuple(
    [n for a in ARCHS for n in (a, *(f"{a}-{aug}" for aug in AUGMENTATIONS))] + [f"{a}-ibp" for a in ROBUST_ARCHS])


def split_robust(name: str) -> tuple[str, str | None]:
    """Split ``cnn-ibp`` into ``("cnn", "ibp")`` (certified-robust training, :mod:`textaudit.models.zoo.ibp`)."""
    for r in ROBUST:
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
