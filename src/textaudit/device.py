"""Which torch device textaudit runs on: one rule for every model, masked LM and encoder."""

from __future__ import annotations

import os

__all__ = ["pick_device"]


def pick_device(device: str | None = None) -> str:
    """Return the torch device to use: ``device`` if given, else ``$TEXTAUDIT_DEVICE``, else
    ``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    if device:
        return device
    env = os.environ.get("TEXTAUDIT_DEVICE")
    if env:
        return env
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
