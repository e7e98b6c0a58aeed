"""Which torch device textaudit runs on, and with how many CPU threads: one rule for every model,
masked LM and encoder (each of them calls :func:`pick_device`)."""

from __future__ import annotations

import os

from textaudit.errors import TextAuditError

__all__ = ["pick_device", "cpu_threads"]


def pick_device(device: str | None = None) -> str:
    """Return the torch device to use: ``device`` if given, else ``$TEXTAUDIT_DEVICE``, else
    ``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    import torch

    _apply_threads(torch)
    if device:
        return device
    env = os.environ.get("TEXTAUDIT_DEVICE")
    if env:
        return env
    return "cuda" if torch.cuda.is_available() else "cpu"


_applied: list[int] = []


def free_cores() -> int | None:
    """CPU cores not busy with other work: the core count minus the 1-minute load average (at least 1;
    None where the load is unknown).

    ``benchmarks/threads.py`` on 2 cores: idle, 2 threads beat 1 (masked LM 0.63×, SO-Beam 0.77× the
    time); with one other busy process, 2 threads lose badly (SmolLM2 perplexity 2.66×, SO-Beam
    1.97×, masked LM 1.28× the time). Threads beyond the free cores only wait for each other."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    cores = os.cpu_count() or 1
    return max(1, min(cores, int(cores - load + 0.5)))


def cpu_threads() -> int | None:
    """The intra-op CPU threads torch should use: ``$TEXTAUDIT_THREADS`` (``audit --threads``), else
    :func:`free_cores` (None: torch's own default, one per core)."""
    env = os.environ.get("TEXTAUDIT_THREADS")
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise TextAuditError(f"TEXTAUDIT_THREADS must be a whole number >= 1 (got '{env}')")
        return n
    return free_cores()


def _apply_threads(torch) -> None:
    n = cpu_threads()
    if n is not None and _applied != [n]:
        torch.set_num_threads(n)
        _applied[:] = [n]
