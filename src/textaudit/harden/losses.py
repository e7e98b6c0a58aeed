"""The training objectives of ``audit harden``.

The consistency objective adds, at every step, a symmetric KL term over a batch of pairs
(x̃, x̃ ⊕ p): ``CE(f(x), y) + λ · ½ [KL(f(x̃) ‖ f(x̃ ⊕ p)) + KL(f(x̃ ⊕ p) ‖ f(x̃))]`` with λ the
``--consistency-weight``. A model whose two distributions agree on every pair has B_{p,k} = 0 on
those sentences and cannot be flipped by p there.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

__all__ = ["symmetric_kl", "consistency_objective"]


def symmetric_kl(logits_a, logits_b):
    """½ [KL(P_a ‖ P_b) + KL(P_b ‖ P_a)] per row, averaged (torch tensors of logits)."""
    import torch.nn.functional as F

    la, lb = F.log_softmax(logits_a.float(), -1), F.log_softmax(logits_b.float(), -1)
    pa, pb = la.exp(), lb.exp()
    return 0.5 * ((pa * (la - lb)).sum(-1) + (pb * (lb - la)).sum(-1)).mean()


def consistency_objective(pairs: Sequence[tuple[str, str]], encode: Callable, *, weight: float, batch_size: int,
                          seed: int, device: str) -> Callable:
    """``objective(module, batch, y, progress) -> loss`` for :func:`~textaudit.models.zoo.train.fit`:
    cross-entropy on the training batch plus ``weight`` × the symmetric KL of a random batch of
    ``pairs``. The batch is drawn from ``seed`` and the step (``progress``), so a training run that
    was killed and resumed draws the same batches as one that was not; both texts of the drawn pairs
    go through the model in one forward."""
    import torch.nn.functional as F

    pairs = list(pairs)

    def objective(module, batch, y, progress):
        out = module(**batch)
        loss = F.cross_entropy(getattr(out, "logits", out), y)
        if pairs and weight > 0:
            rng = np.random.default_rng([seed, int(round(progress * 2**40))])
            pick = rng.choice(len(pairs), min(batch_size, len(pairs)), replace=False)
            texts = [pairs[i][0] for i in pick] + [pairs[i][1] for i in pick]
            enc = {k: v.to(device) for k, v in dict(encode(texts)).items()}
            both = module(**enc)
            both = getattr(both, "logits", both)
            loss = loss + weight * symmetric_kl(both[:len(pick)], both[len(pick):])
        return loss

    return objective
