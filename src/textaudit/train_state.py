"""Resumable training: the full state of a run, written atomically, and read back only by the same run.

Used by the zoo (:func:`textaudit.models.zoo.train.fit`) and by ``minilm-mlm`` training
(:mod:`textaudit.neighborhoods.train_mlm`). A state carries a ``fingerprint`` of what the run
depends on (data, hyper-parameters); a state from another run, or a truncated/corrupt file, is
never fatal: the run starts afresh with a one-line notice.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["load_train_state", "save_train_state"]


def load_train_state(path: str | Path | None, fingerprint: str) -> dict | None:
    """Return the state saved at ``path`` by a run with this ``fingerprint``, else ``None``."""
    import torch

    if path is None or not Path(path).is_file():
        return None
    try:  # on CPU: torch RNG states must stay CPU tensors; load_state_dict moves the rest
        saved = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001 - a truncated/corrupt file: never fatal, just start afresh
        print(f"notice: cannot read {path} ({type(e).__name__}); starting afresh", file=sys.stderr)
        return None
    if not isinstance(saved, dict) or saved.get("fingerprint") != fingerprint:
        print(f"notice: {path} belongs to another run (data or config differ); starting afresh", file=sys.stderr)
        return None
    return saved


def save_train_state(path: str | Path, fingerprint: str, state: dict) -> None:
    """Write ``state`` (plus ``fingerprint``) to ``path`` atomically: a kill mid-write keeps the old one."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    torch.save({"fingerprint": fingerprint, **state}, tmp)
    tmp.replace(path)
