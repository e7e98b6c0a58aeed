"""Forward functions for torch modules: device choice, padding to the longest item, inference mode.

:class:`TorchForward` turns ``(module, tokenizer)`` into the ``forward(list[str]) -> logits``
function that :class:`~textaudit.models.batched.BatchedClassifier` batches and caches.

- ``tokenizer(texts) -> Mapping[str, Tensor]``, already padded to the longest text of the batch
  (never to a fixed 512); HuggingFace tokenizers are adapted by :func:`hf_tokenize`.
- ``module(**encoded)`` returns logits, or an object with ``.logits`` (HF models).
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from textaudit.device import pick_device
from textaudit.errors import TextAuditError
from textaudit.models.batched import BatchedClassifier

__all__ = ["TorchForward", "hf_tokenize", "torch_classifier"]


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


class TorchForward:
    """``forward(texts) -> np.ndarray`` of logits for a torch ``module`` and a batch ``tokenizer``.

    The module is moved to ``device`` once and put in eval mode; every call runs under
    ``torch.inference_mode`` (and CUDA autocast is *not* used, so CPU and GPU give the same numbers
    up to float rounding).
    """

    def __init__(self, module, tokenizer: Callable[[list[str]], Mapping], device: str | None = None):
        self.device = pick_device(device)
        self.module = module.to(self.device).eval()
        self.tokenizer = tokenizer
        self._inputs = forward_inputs(module)

    def __call__(self, texts: list[str]) -> np.ndarray:
        import torch

        enc = only_inputs(self.tokenizer(texts), self._inputs)
        enc = {k: (v.to(self.device) if hasattr(v, "to") else v) for k, v in enc.items()}
        with torch.inference_mode():
            out = self.module(**enc)
        logits = getattr(out, "logits", out)
        return logits.float().cpu().numpy()


def torch_classifier(module, tokenizer: Callable[[list[str]], Mapping], *, name: str = "torch",
                     device: str | None = None, batch_size: int | None = None, num_classes: int | None = None,
                     labels=None, cache_size: int = 100_000) -> BatchedClassifier:
    """Return a :class:`BatchedClassifier` over a torch module that outputs logits.

    The default batch size is 128 texts on CPU and 512 on a GPU.
    """
    fwd = TorchForward(module, tokenizer, device)
    bs = batch_size or (512 if fwd.device.startswith("cuda") else 128)
    return BatchedClassifier(fwd, output="logits", num_classes=num_classes, batch_size=bs, name=name,
                             labels=labels, cache_size=cache_size)
