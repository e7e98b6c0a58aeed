"""The training objectives of ``audit harden``.

The consistency objective adds, at every step, a symmetric KL term over a batch of pairs
(x̃, x̃ ⊕ p): ``CE(f(x), y) + λ · ½ [KL(f(x̃) ‖ f(x̃ ⊕ p)) + KL(f(x̃ ⊕ p) ‖ f(x̃))]`` with λ the
``--consistency-weight``. A model whose two distributions agree on every pair has B_{p,k} = 0 on
those sentences and cannot be flipped by p there.

A multi-label model hardened on one label j (``--label``) keeps one independent probability per label: its loss is
the binary cross-entropy of every label's logit, whose target is the gold 0/1 for j and, for every other label, the
original model's own probability of the same text (the other labels are kept where they were, not left to drift
while the shared encoder moves), and its consistency term is the symmetric KL of label j's Bernoulli distributions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["symmetric_kl", "consistency_objective", "LabelTarget"]


def symmetric_kl(logits_a, logits_b):
    """½ [KL(P_a ‖ P_b) + KL(P_b ‖ P_a)] per row, averaged (torch tensors of logits)."""
    import torch.nn.functional as F

    la, lb = F.log_softmax(logits_a.float(), -1), F.log_softmax(logits_b.float(), -1)
    pa, pb = la.exp(), lb.exp()
    return 0.5 * ((pa * (la - lb)).sum(-1) + (pb * (lb - la)).sum(-1)).mean()


@dataclass
class LabelTarget:
    """``--label``: the multi-label model's label ``index`` j trained on, and the ``reference`` module (the original,
    unchanged) whose probabilities are the other labels' targets."""

    index: int
    reference: Any

    def loss(self, logits, batch: dict, y):
        """Binary cross-entropy over every label, summed over the labels and averaged over the batch (label j's
        gradient is a single-label model's): the gold 0/1 for label j, the reference's probability elsewhere."""
        import torch
        import torch.nn.functional as F

        with torch.no_grad():
            ref = self.reference(**batch)
            target = torch.sigmoid(getattr(ref, "logits", ref).float())
        target[:, self.index] = y.float()
        return F.binary_cross_entropy_with_logits(logits.float(), target, reduction="none").sum(-1).mean()

    def agreement(self, threshold: float) -> Callable:
        """The held-out score :func:`~textaudit.models.zoo.train.fit` reports: the share of texts whose label j is on
        (its probability above ``threshold``, strictly) exactly when their gold says so."""
        import torch

        def score(module, encode, texts, labels) -> float:
            module.eval()
            device = next(module.parameters()).device
            on = []
            with torch.no_grad():
                for i in range(0, len(texts), 64):
                    enc = {k: v.to(device) for k, v in dict(encode(list(texts[i:i + 64]))).items()}
                    out = module(**enc)
                    on += (torch.sigmoid(getattr(out, "logits", out)[:, self.index].float()) > threshold).tolist()
            return float(np.mean(np.asarray(on) == (np.asarray(labels) == 1)))

        return score

    def divergence(self, logits_a, logits_b):
        """The symmetric KL of label j's Bernoulli distributions (its logit z as the two classes' logits [0, z])."""
        import torch

        def two(z):
            z = z[:, self.index].float()
            return torch.stack([torch.zeros_like(z), z], dim=-1)

        return symmetric_kl(two(logits_a), two(logits_b))


def consistency_objective(pairs: Sequence[tuple[str, str]], encode: Callable, *, weight: float, batch_size: int,
                          seed: int, device: str, label: LabelTarget | None = None) -> Callable:
    """``objective(module, batch, y, progress) -> loss`` for :func:`~textaudit.models.zoo.train.fit`:
    cross-entropy on the training batch plus ``weight`` × the symmetric KL of a random batch of
    ``pairs``. The batch is drawn from ``seed`` and the step (``progress``), so a training run that
    was killed and resumed draws the same batches as one that was not; both texts of the drawn pairs
    go through the model in one forward. ``label``: a multi-label model's label (:class:`LabelTarget`): its
    binary cross-entropy and its Bernoulli divergence instead."""
    import torch.nn.functional as F

    pairs = list(pairs)

    def objective(module, batch, y, progress):
        out = module(**batch)
        out = getattr(out, "logits", out)
        loss = F.cross_entropy(out, y) if label is None else label.loss(out, batch, y)
        if pairs and weight > 0:
            rng = np.random.default_rng([seed, int(round(progress * 2**40))])
            pick = rng.choice(len(pairs), min(batch_size, len(pairs)), replace=False)
            texts = [pairs[i][0] for i in pick] + [pairs[i][1] for i in pick]
            enc = {k: v.to(device) for k, v in dict(encode(texts)).items()}
            both = module(**enc)
            both = getattr(both, "logits", both)
            a, b = both[:len(pick)], both[len(pick):]
            loss = loss + weight * (symmetric_kl(a, b) if label is None else label.divergence(a, b))
        return loss

    return objective
