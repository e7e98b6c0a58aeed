"""What identifies a masked LM's answers, and a memo of it: the store's key for an MLM (its fingerprint over weights,
vocabulary, piece scheme, precision and device kind), remembered per artifact in
``$TEXTAUDIT_CACHE/mlm-fingerprints.json`` so that a masked LM whose answers are all in the store need not load its
weights to be recognised (the weights, when they do load, are checked against it)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Sequence

from textaudit.neighborhoods.store import FORMAT
from textaudit.resources import cache_dir

__all__ = ["mlm_fingerprint", "recall_fingerprint", "remember_fingerprint", "forget_fingerprint"]


def mlm_fingerprint(model, vocab: Sequence[str], *, scheme: str, precision: str, device: str) -> str:
    """What identifies a masked LM's answers: its weights (every tensor of its state, in order), its
    vocabulary and piece scheme, its precision and the kind of device (CPU and CUDA logits may differ in
    the last bits, which can reorder near-ties)."""
    import torch

    h = hashlib.blake2b(digest_size=20)
    h.update(f"{FORMAT}|{scheme}|{precision}|{str(device).split(':')[0]}|".encode())
    h.update(json.dumps(list(vocab), ensure_ascii=False).encode("utf-8", "surrogatepass"))
    for name, t in model.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(f"|{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _fingerprints_path() -> Path:
    return cache_dir() / "mlm-fingerprints.json"


def _read_fingerprints() -> dict:
    try:
        got = json.loads(_fingerprints_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def _write_fingerprints(table: dict) -> None:
    path = _fingerprints_path()
    try:  # written whole and renamed: a reader sees the old table or the new one, never half of one
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(table, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # a read-only cache: the fingerprint is computed again next time
        pass


def recall_fingerprint(key: str | None) -> str | None:
    """The masked-LM fingerprint remembered for ``key`` (what its files are: contents, sizes and times, the
    code that builds it, precision, device kind), or None. It spares loading the weights of a masked LM whose
    answers are all in the store; the weights, when they do load, are checked against it."""
    if not key:
        return None
    got = _read_fingerprints().get(key)
    return got if isinstance(got, str) else None


def remember_fingerprint(key: str | None, fingerprint: str) -> None:
    """Remember ``fingerprint`` for ``key`` in ``$TEXTAUDIT_CACHE/mlm-fingerprints.json`` (at most 64 keys)."""
    if not key:
        return
    table = _read_fingerprints()
    if table.get(key) == fingerprint:
        return
    table.pop(key, None)
    table[key] = fingerprint
    while len(table) > 64:
        table.pop(next(iter(table)))
    _write_fingerprints(table)


def forget_fingerprint(key: str | None) -> None:
    """Drop what :func:`remember_fingerprint` kept for ``key``."""
    table = _read_fingerprints()
    if key and table.pop(key, None) is not None:
        _write_fingerprints(table)
