"""Forward functions for torch modules: device choice, padding to the longest item, inference mode.

:class:`TorchForward` turns ``(module, tokenizer)`` into the ``forward(list[str]) -> logits``
function that :class:`~textaudit.models.batched.BatchedClassifier` batches and caches.

- ``tokenizer(texts) -> Mapping[str, Tensor]``, already padded to the longest text of the batch
  (never to a fixed 512); HuggingFace tokenizers are adapted by :func:`hf_tokenize`.
- ``module(**encoded)`` returns logits, or an object with ``.logits`` (HF models).
"""

from __future__ import annotations

import time
from typing import Callable, Mapping

import numpy as np

from textaudit.device import pick_device
from textaudit.errors import TextAuditError
from textaudit.models.batched import BatchedClassifier
from textaudit.models.options import current_model_options
from textaudit.token_ids import PieceIds, default_batch_tokens, pad

__all__ = ["TorchForward", "DeviceClock", "hf_tokenize", "torch_classifier", "check_precision", "autocast", "to_device"]


def hf_tokenize(tokenizer, max_length: int = 512) -> Callable[[list[str]], Mapping]:
    """Adapt a HuggingFace tokenizer: pad to the longest text in the batch, truncate at ``max_length``.
    Sentence pairs ``(first, second)`` get the tokenizer's own pair encoding (segment ids included)."""

    def encode(texts: list):
        kinds = {isinstance(t, str) for t in texts}
        if kinds == {False}:
            return tokenizer([t[0] for t in texts], [t[1] for t in texts], padding="longest", truncation=True,
                             max_length=max_length, return_tensors="pt")
        if kinds == {False, True}:
            raise TextAuditError("one batch mixes single texts and sentence pairs; give the model one kind")
        return tokenizer(texts, padding="longest", truncation=True, max_length=max_length, return_tensors="pt")

    return encode


def forward_inputs(module) -> set[str] | None:
    """The keyword inputs ``module.forward`` accepts (None when it takes ``**kwargs``).

    A BERT tokenizer in front of a model without segment embeddings (DistilBERT) also returns
    ``token_type_ids``, which transformers 4.x models reject; callers keep only these keys."""
    import inspect

    params = inspect.signature(module.forward).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return set(params)


def only_inputs(enc: Mapping, accepted: set[str] | None) -> dict:
    """``enc`` restricted to the ``accepted`` keys (all of it when ``accepted`` is None)."""
    return dict(enc) if accepted is None else {k: v for k, v in dict(enc).items() if k in accepted}


class DeviceClock:
    """Seconds spent inside bare ``nn.Module`` calls (``device_seconds``): the model's own compute,
    without tokenising, padding or bookkeeping. On CUDA the time is read from CUDA events when the
    results are collected, so measuring it never stalls the pipeline."""

    def __init__(self, device: str):
        self.cuda = str(device).startswith("cuda")
        self.seconds = 0.0
        self.calls = 0
        self._pending: list = []

    def start(self):
        if not self.cuda:
            return time.perf_counter()
        import torch

        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def stop(self, mark) -> None:
        self.calls += 1
        if not self.cuda:
            self.seconds += time.perf_counter() - mark
            return
        import torch

        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        self._pending.append((mark, ev))

    def settle(self) -> None:
        """Add the CUDA intervals recorded so far (after a synchronising copy of their results)."""
        for a, b in self._pending:
            b.synchronize()
            self.seconds += a.elapsed_time(b) / 1000.0
        self._pending.clear()


def check_precision(precision: str | None, device: str) -> str:
    """``--precision``: ``fp32`` or ``bf16`` (autocast); default bf16 on CUDA, fp32 on a CPU."""
    if precision is None or precision == "auto":
        return "bf16" if str(device).startswith("cuda") else "fp32"
    if precision not in ("fp32", "bf16"):
        raise TextAuditError(f"--precision must be fp32 or bf16 (got {precision!r})")
    return precision


def autocast(device: str, precision: str):
    """The autocast context of ``precision`` on ``device`` (a no-op context for fp32)."""
    import contextlib

    import torch

    if precision != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda" if str(device).startswith("cuda") else "cpu", dtype=torch.bfloat16)


def to_device(arrays: Mapping[str, np.ndarray], device: str) -> dict:
    """numpy arrays → torch tensors on ``device``: pinned memory and ``non_blocking`` copies on CUDA."""
    import torch

    out = {}
    for k, a in arrays.items():
        t = torch.from_numpy(a)
        out[k] = t.pin_memory().to(device, non_blocking=True) if str(device).startswith("cuda") else t
    return out


class TorchForward:
    """``forward(texts) -> np.ndarray`` of logits for a torch ``module`` and a batch ``tokenizer``.

    The module is moved to ``device`` once and put in eval mode; every call runs under
    ``torch.inference_mode``, in ``precision`` (``fp32``, or ``bf16`` autocast: the default on CUDA).

    The id path (:meth:`forward_ids`): ``ids`` is an encoder of :mod:`textaudit.token_ids` (a
    sentence's ids spliced from per-word caches); rows of ids are padded in one numpy copy, moved
    with pinned memory, and the next batch is built while the device runs the current one.
    ``clock.seconds`` is the time inside the bare module calls.
    """

    def __init__(self, module, tokenizer: Callable[[list[str]], Mapping], device: str | None = None, *,
                 ids=None, precision: str | None = None):
        self.device = pick_device(device)
        self.module = module.to(self.device).eval()
        self.tokenizer = tokenizer
        self.ids = ids
        self.precision = check_precision(precision, self.device)
        self.clock = DeviceClock(self.device)
        #: a list to keep every padded batch in (benchmarks replay them as bare forwards), or None
        self.recorder: list | None = None
        self._inputs = forward_inputs(module)

    def _run(self, enc: Mapping):
        import torch

        if self.recorder is not None:
            self.recorder.append(enc)
        mark = self.clock.start()
        with torch.inference_mode(), autocast(self.device, self.precision):
            out = self.module(**enc)
        self.clock.stop(mark)
        return getattr(out, "logits", out)

    def __call__(self, texts: list[str]) -> np.ndarray:
        enc = only_inputs(self.tokenizer(texts), self._inputs)
        enc = {k: (v.to(self.device) if hasattr(v, "to") else v) for k, v in enc.items()}
        logits = self._run(enc).float().cpu().numpy()
        self.clock.settle()
        return logits

    def arrays(self, rows: list[list[int]]) -> dict[str, np.ndarray]:
        """The model's inputs for rows of ids (``input_ids``; ``attention_mask`` and zero
        ``token_type_ids`` where the module takes them)."""
        ids, mask = pad(rows, self.ids.pad_id)
        out = {"input_ids": ids}
        if self._inputs is None or "attention_mask" in self._inputs:
            if isinstance(self.ids, PieceIds):
                out["attention_mask"] = mask
        if isinstance(self.ids, PieceIds) and (self._inputs is None or "token_type_ids" in self._inputs) \
                and getattr(getattr(self.module, "config", None), "type_vocab_size", 0):
            out["token_type_ids"] = np.zeros_like(ids)
        return out

    def forward_ids(self, batches: list[list[list[int]]]) -> list[np.ndarray]:
        """Logits of each batch of id rows; on CUDA, batch i+1 is padded and copied while batch i runs."""
        results: list[np.ndarray] = []
        pending = None
        for rows in batches:
            logits = self._run(to_device(self.arrays(rows), self.device))
            if pending is not None:
                results.append(pending.float().cpu().numpy())
            pending = logits
        if pending is not None:
            results.append(pending.float().cpu().numpy())
        self.clock.settle()
        return results


def torch_classifier(module, tokenizer: Callable[[list[str]], Mapping], *, name: str = "torch",
                     device: str | None = None, batch_size: int | None = None, num_classes: int | None = None,
                     labels=None, cache_size: int = 100_000, ids=None, precision: str | None = None,
                     batch_tokens: int | None = None) -> BatchedClassifier:
    """Return a :class:`BatchedClassifier` over a torch module that outputs logits.

    The default batch size is 128 texts on CPU and 512 on a GPU. ``ids``: the model's id encoder
    (:mod:`textaudit.token_ids`), which lets sentences reach it as spliced ids; the token budget
    of a batch and the precision default to the options in effect (``--batch-tokens``, ``--precision``).
    """
    opts = current_model_options()
    fwd = TorchForward(module, tokenizer, device, ids=ids, precision=precision or opts.precision)
    bs = batch_size or (512 if fwd.device.startswith("cuda") else 128)
    return BatchedClassifier(fwd, output="logits", num_classes=num_classes, batch_size=bs, name=name,
                             labels=labels, cache_size=cache_size,
                             batch_tokens=batch_tokens or opts.batch_tokens or default_batch_tokens(fwd.device))
