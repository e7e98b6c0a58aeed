"""The model shift d of a discrete perturbation and its continuous-equivalent size ε (PGD in the
input-embedding space); see :mod:`textaudit.robustness.perturbscore`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from textaudit.device import pick_device
from textaudit.errors import TextAuditError
from textaudit.models.batched import Classifier, torch_parts

__all__ = ["ShiftModel", "differentiable", "model_shift", "pgd_shifts", "find_epsilon", "SHIFT_ATOL"]


# -- the differentiable view of a classifier ----------------------------------------------------------
@dataclass
class ShiftModel:
    """A torch classifier seen as e ↦ h(e): ``encode(texts)`` → batch, ``vectors(batch)`` → input
    embeddings e, ``features(batch, e)`` → pooled h, ``probs(batch, e)`` → class probabilities."""

    module: object
    tokenizer: object
    kind: str  # "word" (the zoo's word models) or "hf" (a HuggingFace sequence classifier)
    device: str

    def encode(self, texts: Sequence[str]) -> dict:
        enc = dict(self.tokenizer(list(texts)))
        return {k: v.to(self.device) for k, v in enc.items() if hasattr(v, "to")}

    def vectors(self, batch: dict):
        if self.kind == "word":
            return self.module.input_vectors(batch["input_ids"])
        return self.module.get_input_embeddings()(batch["input_ids"])

    def _hf_hidden(self, batch: dict, e):
        base = getattr(self.module, self.module.base_model_prefix)
        out = base(inputs_embeds=e, attention_mask=batch.get("attention_mask"),
                   **({"token_type_ids": batch["token_type_ids"]} if "token_type_ids" in batch else {}))
        pooled = getattr(out, "pooler_output", None)
        if pooled is not None:
            return pooled
        m = batch["attention_mask"].unsqueeze(-1).to(out.last_hidden_state.dtype)
        return (out.last_hidden_state * m).sum(1) / m.sum(1).clamp(min=1.0)

    def features(self, batch: dict, e):
        if self.kind == "word":
            return self.module.features(batch["input_ids"], e)
        return self._hf_hidden(batch, e)

    def probs(self, batch: dict, e):
        import torch

        if self.kind == "word":
            logits = self.module(batch["input_ids"], e)
        else:
            logits = self.module(inputs_embeds=e, attention_mask=batch.get("attention_mask")).logits
        return torch.softmax(logits.float(), -1)

    def represent(self, batch: dict, e, space: str):
        return self.features(batch, e) if space == "hidden" else self.probs(batch, e)


def differentiable(classifier: Classifier, device: str | None = None) -> ShiftModel:
    """Return the :class:`ShiftModel` of a zoo word model, a zoo ``minilm`` or an ``hf:`` classifier
    (a classifier without torch embeddings gets a one-line error)."""
    parts = torch_parts(classifier)
    if parts is None:
        raise TextAuditError(f"model '{getattr(classifier, 'name', classifier)}' is not a torch model with input "
                             "embeddings; PerturbScore needs a zoo model or an hf: classifier")
    module, tok, own_device = parts
    dev = pick_device(device) if device else own_device
    module.eval()
    if hasattr(module, "input_vectors") and hasattr(module, "features"):
        return ShiftModel(module, tok, "word", dev)
    if hasattr(module, "get_input_embeddings") and hasattr(module, "base_model_prefix"):
        return ShiftModel(module, tok, "hf", dev)
    raise TextAuditError(f"model '{getattr(classifier, 'name', '?')}' exposes no input embeddings to perturb")


def _cos_shift(a, b):
    import torch

    return 1.0 - torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1)


def model_shift(sm: ShiftModel, x: str, x_prime: str, space: str = "hidden") -> float:
    """d = 1 − cos(h(x′), h(x)) (``space="probs"``: on the probability vectors)."""
    import torch

    with torch.no_grad():
        reps = []
        for t in (x, x_prime):
            b = sm.encode([t])
            reps.append(sm.represent(b, sm.vectors(b), space))
        return float(_cos_shift(reps[0], reps[1])[0])


def pgd_shifts(sm: ShiftModel, x: str, eps: Sequence[float], *, steps: int = 5, space: str = "hidden",
               seed: int = 0) -> np.ndarray:
    """Return, for every ε, the largest shift 1 − cos(h(e + δ), h(e)) PGD finds with ‖δ‖∞ ≤ ε
    (all ε in one batch; δ starts uniform in the ball)."""
    import torch

    G = len(eps)
    b1 = sm.encode([x])
    batch = {k: v.expand(G, *v.shape[1:]) for k, v in b1.items()}
    with torch.no_grad():
        e0 = sm.vectors(b1).detach()
        h0 = sm.represent(b1, e0, space).detach()
    e0 = e0.expand(G, *e0.shape[1:])
    r = torch.as_tensor(np.asarray(eps, dtype=np.float32), device=e0.device).view(G, *([1] * (e0.dim() - 1)))
    gen = torch.Generator(device="cpu").manual_seed(seed)
    delta = ((torch.rand(e0.shape, generator=gen) * 2 - 1).to(e0.device) * r).requires_grad_(True)
    best = torch.zeros(G, device=e0.device)
    alpha = 2.5 * r / max(1, steps)
    ctx = torch.backends.cudnn.flags(enabled=False)  # RNN backward in eval mode on CUDA
    with ctx:
        for _ in range(steps + 1):
            shift = _cos_shift(sm.represent(batch, e0 + delta, space), h0)
            best = torch.maximum(best, shift.detach())
            grad, = torch.autograd.grad(shift.sum(), delta)
            with torch.no_grad():
                delta += alpha * grad.sign()
                delta.copy_(torch.maximum(torch.minimum(delta, r), -r))
    return best.cpu().numpy()


# 1 − cos(h, h) of one float32 vector with itself is ~1e-7 rather than 0 on a GPU (other kernels,
# other summation order): a shift this small is no shift.
SHIFT_ATOL = 1e-6


def find_epsilon(sm: ShiftModel, x: str, d: float, *, step: float = 0.01, max_eps: float = 1.0,
                 steps: int = 5, tolerance: float = 0.005, space: str = "hidden", refine: int = 10
                 ) -> tuple[float | None, float]:
    """Return ``(ε, shift at ε)``: the smallest grid ε whose PGD shift reaches ``d``, or ``(None,
    closest shift)`` when none does or the first one overshoots by more than ``tolerance``.

    The grid has step ``step``; with ``refine`` > 0 the interval (ε − step, ε] that first reaches d
    is searched again on ``refine`` sub-steps, because the shift can climb by more than the tolerance
    within one step on sensitive models."""
    if d <= SHIFT_ATOL:
        return 0.0, 0.0
    grid = np.round(np.arange(step, max_eps + step / 2, step), 6)
    s = np.maximum.accumulate(pgd_shifts(sm, x, grid, steps=steps, space=space))  # a larger ball contains a smaller one
    hit = np.nonzero(s >= d)[0]
    if not len(hit):
        return None, float(s[-1])
    i = int(hit[0])
    eps, at = float(grid[i]), float(s[i])
    if at - d > tolerance and refine > 0:
        lo = grid[i - 1] if i > 0 else 0.0
        fine = np.round(lo + (grid[i] - lo) * np.arange(1, refine + 1) / refine, 6)
        fs = np.maximum(np.maximum.accumulate(pgd_shifts(sm, x, fine, steps=steps, space=space)),
                        s[i - 1] if i > 0 else 0.0)
        j = int(np.nonzero(fs >= d)[0][0]) if (fs >= d).any() else len(fine) - 1
        eps, at = float(fine[j]), max(float(fs[j]), d if fs[j] < d else float(fs[j]))
        if fs[j] < d:  # PGD found less inside the finer ball than the coarse step did: keep the coarse value
            eps, at = float(grid[i]), float(s[i])
    return (eps if at - d <= tolerance else None), at


# -- discrete perturbations ----------------------------------------------------------------------------
