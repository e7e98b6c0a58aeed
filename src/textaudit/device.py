"""Which torch device textaudit runs on, and with how many CPU threads: one rule for every model,
masked LM and encoder (each of them calls :func:`pick_device`)."""

from __future__ import annotations

import contextlib
import os
import re
import sys

import textaudit.notices as notices
from textaudit.errors import TextAuditError

__all__ = ["pick_device", "check_device", "cpu_threads", "free_cores", "busy_notice", "notice_if_busy", "small_batch_threads",
           "keep_threads"]


def pick_device(device: str | None = None) -> str:
    """Return the torch device to use: ``device`` if given, else ``$TEXTAUDIT_DEVICE``, else
    ``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    import torch

    _apply_threads(torch)
    if device:
        return check_device(device, "--device")
    env = os.environ.get("TEXTAUDIT_DEVICE")
    if env:
        return check_device(env, "TEXTAUDIT_DEVICE")
    return "cuda" if torch.cuda.is_available() else "cpu"


_DEVICE = re.compile(r"(cpu|mps|cuda)(:\d+)?")


def check_device(spec: str, where: str = "TEXTAUDIT_DEVICE") -> str:
    """Return ``spec`` if torch can run on it, else raise a one-line error: a name torch does not
    know (``garbage``), CUDA on a machine without a visible GPU, ``cuda:N`` beyond the GPUs there."""
    spec = spec.strip()
    if not _DEVICE.fullmatch(spec):
        raise TextAuditError(f"{where}={spec} is not a device; use cpu, cuda or cuda:N")
    if spec.startswith("cuda"):
        import torch

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise TextAuditError(f"{where}={spec} asks for a GPU, but torch {torch.__version__} sees none; use cpu "
                                 "(or unset it: CUDA is used by default when present)")
        index = int(spec.partition(":")[2] or 0)
        if index >= n:
            raise TextAuditError(f"{where}={spec}: there {'is' if n == 1 else 'are'} only {n} GPU{'s' if n > 1 else ''} "
                                 f"(cuda:0{f'..cuda:{n - 1}' if n > 1 else ''})")
    return spec


_applied: list[int] = []
_noticed: list[bool] = []
#: set by work that trains after it infers (audit harden): a busy machine then gets advice, never fewer threads
_keep: list[bool] = []


def keep_threads() -> None:
    """This process trains (perhaps after inferring): leave torch's thread count as it is, whatever the load —
    training's floats depend on it, and the same seed must keep giving the same model."""
    _keep[:] = [True]


def free_cores() -> int | None:
    """CPU cores not busy with other work: the core count minus the 1-minute load average (at least 1;
    None where the load is unknown)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    cores = os.cpu_count() or 1
    return max(1, min(cores, int(cores - load + 0.5)))


def cpu_threads() -> int | None:
    """The intra-op CPU threads torch uses: ``$TEXTAUDIT_THREADS`` (``audit --threads``), else None
    (torch's own default, one per core).

    Measured (``benchmarks/threads.py``, 2 cores): idle, 2 threads take 0.63× (masked LM) and 0.77×
    (SO-Beam) the time of 1; beside another busy process 1.28× and 1.97×. The default stays fixed per
    machine rather than following the load, because training's floats depend on the thread count
    (the same seed must give the same model); a busy machine gets a notice suggesting ``--threads 1``
    when long work starts instead (:func:`notice_if_busy`). Inference here gave bit-identical outputs with 1 and 2 threads."""
    env = os.environ.get("TEXTAUDIT_THREADS")
    if not env:
        return None
    try:
        n = int(env)
    except ValueError:
        n = 0
    if n < 1:
        raise TextAuditError(f"TEXTAUDIT_THREADS must be a whole number >= 1 (got '{env}')")
    return n


def busy_notice(torch_threads: int) -> str | None:
    """A one-line suggestion when other work leaves fewer free cores than torch's threads."""
    free = free_cores()
    if free is not None and free < torch_threads:
        return (f"notice: the machine is busy ({free} of {os.cpu_count()} cores free) and torch uses "
                f"{torch_threads} threads; fewer is likely faster: audit --threads {free} <command> ..., or "
                f"TEXTAUDIT_THREADS={free}")
    return None


@contextlib.contextmanager
def small_batch_threads(torch):
    """Run a block of small matrix products (SmolLM2 perplexity of two sentences) on one thread unless
    ``$TEXTAUDIT_THREADS`` says otherwise: 2 threads never helped it (0.99× idle) and cost 2.66× the
    time beside another busy process (``benchmarks/threads.py``)."""
    before = torch.get_num_threads()
    torch.set_num_threads(cpu_threads() or 1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _apply_threads(torch) -> None:
    n = cpu_threads()
    if n is not None and _applied != [n]:
        torch.set_num_threads(n)
        _applied[:] = [n]


def notice_if_busy(apply: bool = True) -> None:
    """When long work starts on a busy machine (other work leaves fewer free cores than torch's threads), once per
    process: with ``apply``, torch uses the free cores for the rest of the run (inference gives bit-identical
    outputs with 1 and 2 threads; ``benchmarks/threads.py``: 1.97× faster beside another busy process) and a
    notice says so; for training (``apply=False``: its floats depend on the thread count, so the same seed must
    keep giving the same model) only the advice. Never when a thread count was set (``--threads``,
    ``TEXTAUDIT_THREADS``), nor before a bad input's one-line error (it is called when long work starts)."""
    torch = sys.modules.get("torch")
    if _noticed or torch is None or os.environ.get("TEXTAUDIT_THREADS"):
        return
    _noticed.append(True)
    threads = torch.get_num_threads()
    msg = busy_notice(threads)
    if not msg:
        return
    free = free_cores() or 1
    if apply and not _keep and free < threads:
        torch.set_num_threads(free)
        notices.notice(f"the machine is busy ({free} of {os.cpu_count()} cores free): torch uses {free} thread"
                       f"{'s' if free != 1 else ''} for this run instead of {threads} (the numbers do not change; "
                       "audit --threads N chooses)")
        return
    notices.say(msg)
