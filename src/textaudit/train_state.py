"""Resumable training: the full state of a run, written atomically, and read back only by the same run.

Used by the zoo (:func:`textaudit.models.zoo.train.fit`) and by ``minilm-mlm`` training
(:mod:`textaudit.neighborhoods.train_mlm`). A state carries a ``fingerprint`` of what the run
depends on (data, hyper-parameters); a state from another run, or a truncated/corrupt file, is
never fatal: the run starts afresh with a one-line notice. torch's zip files carry no checksum a
reader verifies (a flipped bit inside a tensor loads as another weight), so a state carries one
(:func:`state_digest`, over every tensor's bytes and every value) and one that disagrees is damaged.

The state file sits next to the output (``.<name>.train-state.pt``), where anyone who can write
that directory could plant one. It is therefore read with ``torch.load(weights_only=True)``:
tensors, numbers, strings, lists, tuples and dicts only, so a planted pickle cannot run code; a
file that needs anything else is refused like a corrupt one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import textaudit.notices as notices
from textaudit.files import atomic_path

__all__ = ["Resumable", "load_train_state", "save_train_state", "state_digest"]


def state_digest(obj) -> str:
    """A checksum of a state (dicts, lists, tuples, tensors, numbers, strings): every tensor's dtype,
    shape and bytes, every other value's ``repr``, in order (dict keys sorted)."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)

    def walk(o) -> None:
        if isinstance(o, dict):
            h.update(b"{")
            for k in sorted(o, key=repr):
                h.update(repr(k).encode() + b":")
                walk(o[k])
            h.update(b"}")
        elif isinstance(o, (list, tuple)):
            h.update(b"[" if isinstance(o, list) else b"(")
            for v in o:
                walk(v)
            h.update(b"]")
        elif hasattr(o, "detach") and hasattr(o, "dtype"):  # a tensor
            import torch

            t = o.detach().cpu().contiguous()
            h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
            if t.numel():
                h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        else:
            h.update(repr(o).encode("utf-8", "surrogatepass"))

    walk(obj)
    return h.hexdigest()


def load_train_state(path: str | Path | None, fingerprint: str, keys: Iterable[str] = ()) -> dict | None:
    """Return the state saved at ``path`` by a run with this ``fingerprint`` (and holding every
    one of ``keys``), else ``None``."""
    import torch

    if path is None or not Path(path).is_file():
        return None
    try:  # on CPU: torch RNG states must stay CPU tensors; load_state_dict moves the rest
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - truncated, corrupt, or not plain data: never fatal, start afresh
        if "weights_only" in str(e) or "Unsupported" in str(e):
            notices.notice(f"refusing {path}: it holds more than plain data (never unpickled); starting afresh")
        else:
            notices.notice(f"cannot read {path} ({type(e).__name__}); starting afresh")
        return None
    if not isinstance(saved, dict) or saved.get("fingerprint") != fingerprint:
        notices.notice(f"{path} belongs to another run (data or config differ); starting afresh")
        return None
    checksum = saved.pop("checksum", None)
    if checksum != state_digest(saved):
        notices.notice(f"{path} is damaged (its checksum disagrees with its content); starting afresh")
        return None
    missing = [k for k in keys if k not in saved]
    if missing:
        notices.notice(f"{path} lacks {', '.join(missing)}; starting afresh")
        return None
    return saved


def save_train_state(path: str | Path, fingerprint: str, state: dict) -> None:
    """Write ``state`` (plus ``fingerprint``) to ``path`` atomically, under a unique temporary name:
    a kill mid-write keeps the old one, and two processes never share a temporary file."""
    import torch

    plain = _plain({"fingerprint": fingerprint, **state})
    with atomic_path(path, unmarked="a training state: the run's own file beside its output") as tmp:
        torch.save({**plain, "checksum": state_digest(plain)}, tmp)


def _plain(obj):
    """``obj`` with numpy scalars made Python numbers, so that ``weights_only`` loading accepts it."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(v) for v in obj)
    if type(obj).__module__ == "numpy" and hasattr(obj, "item") and getattr(obj, "ndim", 1) == 0:
        return obj.item()
    return obj


class Resumable:
    """One training run's resumable state, shared by the zoo (:func:`textaudit.models.zoo.train.fit`) and
    ``minilm-mlm`` (:mod:`textaudit.neighborhoods.train_mlm`): the file at ``path`` (None: nothing is kept), the
    run's ``fingerprint``, and what every loop restores alike — its ``optimisers`` (optimisers and schedulers;
    None entries allowed), its numpy ``rng``, torch's RNG and, on CUDA, the device's. What else a loop keeps (the
    weights, the step, the best score, the history, the seconds) it passes to :meth:`save` and reads back from
    :meth:`restore`."""

    def __init__(self, path: str | Path | None, fingerprint: str, *, rng, optimisers: Sequence,
                 device: str = "cpu"):
        self.path, self.fingerprint, self.rng, self.optimisers = path, fingerprint, rng, list(optimisers)
        self.device = str(device)

    @property
    def _cuda(self) -> bool:
        return self.device.startswith("cuda")

    def restore(self, keys: Iterable[str]) -> dict | None:
        """The saved state of this run holding ``keys`` — its optimisers and RNGs already restored — or None (no
        state, another run's, or damaged: start afresh)."""
        import torch

        saved = load_train_state(self.path, self.fingerprint, keys=(*keys, "optims", "rng", "torch_rng"))
        if saved is None:
            return None
        for o, st in zip(self.optimisers, saved["optims"]):
            if o is not None and st is not None:
                o.load_state_dict(st)
        self.rng.bit_generator.state = saved["rng"]
        torch.set_rng_state(saved["torch_rng"])
        if self._cuda and saved.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(saved["cuda_rng"], self.device)
        return saved

    def save(self, **state) -> None:
        """Write ``state`` with the optimisers and the RNGs (nothing without a path)."""
        import torch

        if self.path is None:
            return
        save_train_state(self.path, self.fingerprint, {
            **state, "optims": [None if o is None else o.state_dict() for o in self.optimisers],
            "rng": self.rng.bit_generator.state, "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(self.device) if self._cuda else None})
