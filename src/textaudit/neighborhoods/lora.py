"""Low-rank adapters (LoRA, Hu et al. 2021) for fine-tuning the MiniLM encoder into a masked LM.

We write the ~40 lines ourselves instead of depending on ``peft``: training wraps chosen
``nn.Linear`` layers in :class:`LoRALinear`; the shipped artifact stores only the small A/B
matrices (W' = W + (α/r)·B·A), which :func:`merge_into` folds back into plain linear weights at
load time, so inference runs at the speed of the unmodified encoder.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["LoRALinear", "add_lora", "lora_tensors", "merge_into"]


class LoRALinear(nn.Module):
    """``base(x) + (α/r)·(dropout(x) Aᵀ) Bᵀ`` with A ∈ R^{r×in} (Kaiming init) and B ∈ R^{out×r} (zeros)."""

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0):
        super().__init__()
        self.base = base
        self.r, self.alpha = r, alpha
        self.scale = alpha / r
        self.A = nn.Parameter(torch.empty(r, base.in_features))
        self.B = nn.Parameter(torch.zeros(base.out_features, r))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.base(x) + (self.drop(x) @ self.A.t() @ self.B.t()) * self.scale


def add_lora(model: nn.Module, targets: tuple[str, ...], r: int, alpha: float, dropout: float = 0.0) -> list[str]:
    """Wrap every ``nn.Linear`` whose qualified name ends with one of ``targets``; return their names."""
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear) and n.endswith(targets)]
    for n in names:
        parent_name, _, child = n.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, LoRALinear(getattr(parent, child), r, alpha, dropout))
    return names


def lora_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """Return ``{"<name>.A": A, "<name>.B": B}`` for every LoRA layer of ``model``."""
    out = {}
    for n, m in model.named_modules():
        if isinstance(m, LoRALinear):
            out[f"{n}.A"] = m.A.detach().cpu()
            out[f"{n}.B"] = m.B.detach().cpu()
    return out


def merge_into(model: nn.Module, tensors: dict[str, torch.Tensor], scale: float) -> int:
    """Add ``scale·B·A`` to the weight of each named linear layer of a plain model; return the count."""
    count = 0
    names = {k.rsplit(".", 1)[0] for k in tensors}
    for n in sorted(names):
        layer = model.get_submodule(n)
        A, B = tensors[f"{n}.A"].float(), tensors[f"{n}.B"].float()
        if B.shape[0] != layer.weight.shape[0] or A.shape[1] != layer.weight.shape[1]:
            raise ValueError(f"adapter {n} has shape {tuple(B.shape)}x{tuple(A.shape)}, layer {tuple(layer.weight.shape)}")
        with torch.no_grad():
            layer.weight += scale * (B @ A)
        count += 1
    return count
