"""Certified robustness to synonym substitution by Interval Bound Propagation (IBP; Jia et al.,
EMNLP 2019) for the zoo's ``bow``, ``cnn`` and ``lstm``. All of IBP is here: the bounds, the loss
and its schedule, the training defaults and hooks the zoo's ``fit`` takes, and certification.

Threat model: every word w may independently become any of S(w) = {w} ∪ its counter-fitted
neighbours (resource ``counterfitted-neighbors``) that are in the model's vocabulary. As in Jia et
al., the input set of one position is the axis-aligned box over the *projected* vectors
{proj(v) : v ∈ S(w)} (exact per coordinate for the discrete set), and IBP pushes boxes, in
center/radius form (c, r), through the rest of the network:

* linear / convolution  W·x + b:  c′ = W·c + b,  r′ = |W|·r
* monotone ReLU / max-pooling / masked mean: applied to the lower and upper ends
* LSTM cell (gates i, f, g, o): the pre-activations W_ih·x + W_hh·h + b as a linear map of the x
  and h boxes; σ and tanh are monotone, so each gate's interval is the activation of its ends; the
  products f ⊙ c_{t−1}, i ⊙ g and o ⊙ tanh(c_t) take, per coordinate, the least and greatest of the
  four products of the factors' ends (:func:`interval_mul`); the states' masked mean as above
* logits → worst-case logits z: z_y = lower_y, z_j = upper_j (j ≠ y); the robust loss is the
  cross-entropy of z, and an example is *certified* when lower_y > max_{j≠y} upper_j.

Training (Jia et al.'s schedule): loss = (1 − κ_t)·CE(clean) + κ_t·CE(worst case) with the box
scaled by ε_t around each word's own vector; after a clean warm-up, κ_t ramps 0 → κ (``robust_weight``) and ε_t
0 → 1 (:func:`ibp_schedule`). The GloVe vectors are fine-tuned (sparse updates, as the zoo's
bow/cnn): the worst-case loss then pulls synonyms together, which is what makes the boxes small —
with frozen GloVe the same schedule certifies less and loses clean accuracy (closing note of #11).
Bounds always use the model's current vectors, so certificates stay sound.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from textaudit.decision import decisions
from textaudit.errors import TextAuditError
from textaudit.lexicons import counterfitted_neighbors
from textaudit.models.batched import Classifier
from textaudit.models.zoo.architectures import CNN, LSTM, BoW
from textaudit.models.zoo.names import ROBUST_ARCHS
from textaudit.stats import wilson

__all__ = ["substitution_table", "word_box", "logit_bounds", "interval_mul", "lstm_state_bounds", "ibp_schedule",
           "ibp_loss", "certify", "certify_classifier",
           "ibp_hooks", "IBP_DEFAULTS", "IBP_SCHEDULE", "JIA_DEFAULTS", "JIA_SCHEDULE", "IBP_RECIPES", "ROBUST_ARCHS"]


def substitution_table(vocab, neighbors: dict[str, list[str]] | None = None, max_subs: int = 9) -> torch.Tensor:
    """(V, max_subs) ids: row w = w itself, then its in-vocabulary counter-fitted neighbours, padded
    by repeating w (padding and unknown words have only themselves)."""
    if neighbors is None:
        neighbors = counterfitted_neighbors()
    table = np.zeros((len(vocab), max_subs), dtype=np.int64)
    for i, w in enumerate(vocab.itos):
        ids = [i] + [vocab.stoi[n] for n in neighbors.get(w, []) if n in vocab.stoi and vocab.stoi[n] != i]
        ids = ids[:max_subs] if i > 1 else [i]
        table[i] = ids + [i] * (max_subs - len(ids))
    return torch.from_numpy(table)


def word_box(module, input_ids: torch.Tensor, table: torch.Tensor, scale: float = 1.0
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """(c, r) of the box over each position's substitutes *after* the model's word projection
    (pre-ReLU ``proj(v)`` for v in S(w)), shrunk by ``scale`` ∈ [0, 1] towards the word's own projection.

    Boxing the discrete set {proj(v)} directly (as Jia et al. do) is exact per coordinate and much
    tighter than pushing the input-space box through ``proj`` (``|W|·r`` adds every coordinate's
    radius to every output)."""
    subs = module.proj(module.input_vectors(table.to(input_ids.device)[input_ids]))  # (B, T, S, d)
    e = subs[:, :, 0]  # column 0 of the substitution table is the word itself
    lo = e + scale * (subs.min(2).values - e)
    hi = e + scale * (subs.max(2).values - e)
    return (hi + lo) / 2, (hi - lo) / 2


def _linear(c, r, layer: nn.Linear):
    return layer(c), r @ layer.weight.abs().t()


def _relu(c, r):
    lo, hi = torch.relu(c - r), torch.relu(c + r)
    return (hi + lo) / 2, (hi - lo) / 2


def interval_mul(a_lo, a_hi, b_lo, b_hi) -> tuple[torch.Tensor, torch.Tensor]:
    """[a]·[b] per coordinate: the least and greatest of the four products of the ends."""
    p = torch.stack([a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi])
    return p.min(0).values, p.max(0).values


def lstm_state_bounds(lstm: nn.LSTM, c: torch.Tensor, r: torch.Tensor, mask: torch.Tensor | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds (B, T, H) of a one-layer LSTM's hidden states h_t when its input at each step lies in the box
    (c_t ± r_t); h_0 = c_0 = 0 (exact, radius 0). Padding sits at the end of a row, so a real position's state never
    depends on it (the caller masks the padded ones). A bidirectional LSTM (``mask``: the real positions, (B, T))
    gives (B, T, 2H): the forward states, then the backward ones — the same recursion over each row's words
    reversed (its padding left at the end), with the reverse weights, put back in order."""
    lo, hi = _direction_bounds(lstm, "", c, r)
    if not lstm.bidirectional:
        return lo, hi
    if mask is None:
        raise TextAuditError("a bidirectional LSTM's bounds need the mask of the real positions")
    lengths = mask.reshape(mask.shape[0], -1).sum(1).long()
    t = torch.arange(c.shape[1], device=c.device)
    rev = torch.where(t[None] < lengths[:, None], lengths[:, None] - 1 - t[None], t[None])  # (B, T): an involution
    idx = rev.unsqueeze(-1)
    b_lo, b_hi = _direction_bounds(lstm, "_reverse", c.gather(1, idx.expand_as(c)), r.gather(1, idx.expand_as(r)))
    back = idx.expand_as(b_lo)
    return torch.cat([lo, b_lo.gather(1, back)], -1), torch.cat([hi, b_hi.gather(1, back)], -1)


def _direction_bounds(lstm: nn.LSTM, suffix: str, c: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`lstm_state_bounds` of one direction (``suffix``: "" forward, "_reverse" backward)."""
    w_ih, w_hh = getattr(lstm, f"weight_ih_l0{suffix}"), getattr(lstm, f"weight_hh_l0{suffix}")
    bias = (getattr(lstm, f"bias_ih_l0{suffix}") + getattr(lstm, f"bias_hh_l0{suffix}")) if lstm.bias else 0.0
    xc, xr = c @ w_ih.t() + bias, r @ w_ih.abs().t()  # every step's input part at once: (B, T, 4H)
    hidden = w_hh.shape[1]
    h_lo = h_hi = cell_lo = cell_hi = c.new_zeros(c.shape[0], hidden)
    out_lo, out_hi = [], []
    for t in range(c.shape[1]):
        hc, hr = (h_hi + h_lo) / 2, (h_hi - h_lo) / 2
        pc, pr = xc[:, t] + hc @ w_hh.t(), xr[:, t] + hr @ w_hh.abs().t()
        lo, hi = (pc - pr).chunk(4, 1), (pc + pr).chunk(4, 1)  # gates i, f, g, o (PyTorch's order)
        i_lo, i_hi = torch.sigmoid(lo[0]), torch.sigmoid(hi[0])
        f_lo, f_hi = torch.sigmoid(lo[1]), torch.sigmoid(hi[1])
        g_lo, g_hi = torch.tanh(lo[2]), torch.tanh(hi[2])
        o_lo, o_hi = torch.sigmoid(lo[3]), torch.sigmoid(hi[3])
        fc = interval_mul(f_lo, f_hi, cell_lo, cell_hi)
        ig = interval_mul(i_lo, i_hi, g_lo, g_hi)
        cell_lo, cell_hi = fc[0] + ig[0], fc[1] + ig[1]
        h_lo, h_hi = interval_mul(o_lo, o_hi, torch.tanh(cell_lo), torch.tanh(cell_hi))
        out_lo.append(h_lo)
        out_hi.append(h_hi)
    return torch.stack(out_lo, 1), torch.stack(out_hi, 1)


def logit_bounds(module, input_ids: torch.Tensor, table: torch.Tensor, scale: float = 1.0
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Lower and upper bounds of every logit over all substitution combinations (dropout off)."""
    if not isinstance(module, (BoW, CNN, LSTM)):
        raise TextAuditError(f"IBP supports {', '.join(ROBUST_ARCHS)} only (got {type(module).__name__})")
    input_ids = input_ids.to(next(module.parameters()).device)  # ids from a CPU tokenizer, model on CUDA
    mask = (input_ids != 0).unsqueeze(-1).to(torch.float32)
    c, r = _relu(*word_box(module, input_ids, table, scale))
    if isinstance(module, BoW):
        n = mask.sum(1).clamp(min=1.0)
        c, r = (c * mask).sum(1) / n, (r * mask).sum(1) / n
        c, r = _relu(*_linear(c, r, module.hidden))
    elif isinstance(module, LSTM):
        lo, hi = lstm_state_bounds(module.lstm, c, r, mask[..., 0])
        n = mask.sum(1).clamp(min=1.0)
        lo, hi = (lo * mask).sum(1) / n, (hi * mask).sum(1) / n  # the masked mean is monotone
        c, r = (hi + lo) / 2, (hi - lo) / 2
        if module.hidden is not None:  # (Jia et al.'s hidden layer)
            c, r = _relu(*_linear(c, r, module.hidden))
    else:
        c, r = c * mask, r * mask
        conv = module.conv
        cc = conv(c.transpose(1, 2))
        rr = nn.functional.conv1d(r.transpose(1, 2), conv.weight.abs(), None, conv.stride, conv.padding)
        lo, hi = torch.relu(cc - rr).transpose(1, 2), torch.relu(cc + rr).transpose(1, 2)
        neg = torch.finfo(lo.dtype).min
        keep = mask.bool()
        lo = lo.masked_fill(~keep, neg).amax(1)
        hi = hi.masked_fill(~keep, neg).amax(1)
        c, r = (hi + lo) / 2, (hi - lo) / 2
    c, r = _linear(c, r, module.out)
    return c - r, c + r


def worst_logits(lo: torch.Tensor, hi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """z with z_y = lower_y and z_j = upper_j for j ≠ y."""
    z = hi.clone()
    z.scatter_(1, y.view(-1, 1), lo.gather(1, y.view(-1, 1)))
    return z


def ibp_schedule(progress: float, *, warmup: float = 0.1, ramp: float = 0.5) -> float:
    """t ∈ [0, 1]: 0 during the clean warm-up (the first ``warmup`` share of training), then rising
    linearly to 1 over the next ``ramp`` share, then 1."""
    if progress < warmup:
        return 0.0
    return min(1.0, (progress - warmup) / ramp) if ramp > 0 else 1.0


def ibp_loss(module, input_ids: torch.Tensor, y: torch.Tensor, table: torch.Tensor, *, progress: float,
             robust_weight: float = 0.5, warmup: float = 0.1, ramp: float = 0.5) -> torch.Tensor:
    """(1 − κ_t)·CE(clean) + κ_t·CE(worst case) with κ_t = κ·t (κ = ``robust_weight``; not the κ of the
    neighbourhood) and box scale ε_t = t, where
    t = :func:`ibp_schedule` (clean warm-up, then a linear ramp; Jia et al.'s schedule)."""
    t = ibp_schedule(progress, warmup=warmup, ramp=ramp)
    ce = nn.functional.cross_entropy
    clean = ce(module(input_ids), y)
    if t == 0:
        return clean
    lo, hi = logit_bounds(module, input_ids, table, scale=t)
    return (1 - robust_weight * t) * clean + robust_weight * t * ce(worst_logits(lo, hi, y), y)


@torch.no_grad()
def certify(module, tokenizer, table: torch.Tensor, texts: Sequence[str], labels: Sequence[int], *,
            batch_size: int = 256, device: str = "cpu") -> dict:
    """Return ``{"accuracy", "certified_accuracy", "n"}`` with Wilson 95% intervals (``*_ci95``):
    certified = correct *and* provably unchanged under every combination of substitutions
    (lower_y > max_{j≠y} upper_j)."""
    module.eval().to(device)
    y_all = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    correct = certified = 0
    for s in range(0, len(texts), batch_size):
        ids = tokenizer(list(texts[s:s + batch_size]))["input_ids"].to(device)
        y = y_all[s:s + batch_size].to(device)
        pred = torch.as_tensor(decisions(module(ids).detach().float().cpu().numpy()), device=y.device)  # a tie: none
        lo, hi = logit_bounds(module, ids, table, 1.0)
        others = worst_logits(lo, hi, y)
        others.scatter_(1, y.view(-1, 1), float("-inf"))
        ok = lo.gather(1, y.view(-1, 1)).squeeze(1) > others.max(1).values
        correct += int((pred == y).sum())
        certified += int((ok & (pred == y)).sum())
    n = len(texts)
    return {"accuracy": round(correct / n, 4), "accuracy_ci95": list(wilson(correct, n) or ()),
            "certified_accuracy": round(certified / n, 4), "certified_accuracy_ci95": list(wilson(certified, n) or ()),
            "n": n}


def certify_classifier(classifier: Classifier, texts: Sequence[str], labels: Sequence[int]) -> dict:
    """:func:`certify` for a loaded zoo word model (e.g. ``load_classifier("cnn-ibp")``); a
    one-line error for any other classifier."""
    fwd = getattr(classifier, "forward", None)
    tok = getattr(fwd, "tokenizer", None)
    if tok is None or not hasattr(tok, "vocab") or not isinstance(getattr(fwd, "module", None), (BoW, CNN, LSTM)):
        raise TextAuditError(f"'{getattr(classifier, 'name', classifier)}' is not a zoo bow/cnn/lstm word model; "
                             "certify supports bow/cnn/lstm (e.g. cnn-ibp)")
    return certify(fwd.module, tok, substitution_table(tok.vocab), list(texts), list(labels), device=str(fwd.device))


# -- certified training: defaults, schedule and the hooks the zoo's fit takes -----------------------------
#: certified training (IBP), GloVe fine-tuned; ``robust_weight`` = final weight κ of the worst-case loss,
#: ``warmup`` = clean-only share of training, ``ramp`` = share over which ε and κ rise linearly
#: (Jia et al. 2019's schedule); ``min_clean`` guards model selection (see :func:`ibp_hooks`).
#: Chosen on the held-out slice of SST-2 *train* (``benchmarks/train_times.md``), never on dev.
IBP_DEFAULTS: dict[str, dict[str, Any]] = {
    "bow": dict(epochs=10, lr=1e-3, patience=10, tune_embeddings=True),
    "cnn": dict(epochs=10, lr=1e-3, patience=10, tune_embeddings=True),
    "lstm": dict(epochs=10, lr=1e-3, patience=10, tune_embeddings=True),
}
IBP_SCHEDULE: dict[str, Any] = dict(robust_weight=0.5, warmup=0.1, ramp=0.5, min_clean=0.75)

#: Jia et al. 2019's certified training as published (github.com/robinjia/certified-word-sub: its README's
#: commands and ``src/train.py``'s defaults), zoo name ``<arch>-ibp-jia``: word vectors *frozen*, the LSTM
#: bidirectional with a hidden layer (:class:`~textaudit.models.zoo.architectures.LSTM`), batch 32, Adam at 1e-3 with
#: weight decay 1e-4, gradients clipped to norm 0.25, 60 epochs, the certified checkpoint with the best held-out
#: certified accuracy. What this machine cannot match: GloVe 840B-300d (the 6B-50d vectors here), and 60 epochs
#: of a CPU (``--epochs`` scales the schedule with them: its shares stay the published ones).
JIA_DEFAULTS: dict[str, dict[str, Any]] = {
    "lstm": dict(epochs=60, lr=1e-3, batch_size=32, weight_decay=1e-4, clip_grad=0.25, patience=60,
                 tune_embeddings=False,
                 arch_options={"bidirectional": True, "hidden_layer": True, "input_dropout": False}),
}
#: ... and its schedule: no clean warm-up (``--non-cert-train-epochs 0``), κ (``-c``) and ε rising linearly to 0.8
#: and 1 over the first 40 of 60 epochs, the last 20 (``--full-train-epochs 20``) at full weight
JIA_SCHEDULE: dict[str, Any] = dict(robust_weight=0.8, warmup=0.0, ramp=40 / 60, min_clean=0.75)
#: robust training name → (training defaults per architecture, schedule)
IBP_RECIPES: dict[str, tuple[dict[str, dict[str, Any]], dict[str, Any]]] = {
    "ibp": (IBP_DEFAULTS, IBP_SCHEDULE), "ibp-jia": (JIA_DEFAULTS, JIA_SCHEDULE)}


def ibp_hooks(robust_weight: float = IBP_SCHEDULE["robust_weight"], warmup: float = IBP_SCHEDULE["warmup"],
               ramp: float = IBP_SCHEDULE["ramp"], min_clean: float = IBP_SCHEDULE["min_clean"]) -> dict[str, Any]:
    """``objective`` (IBP loss) and ``select`` for :func:`fit`; the substitution table is built from
    the model's vocabulary on first use.

    Selection: held-out *certified* accuracy, but only among checkpoints whose held-out clean
    accuracy is ≥ ``min_clean`` (others score clean − 1, below any admissible one). Without that
    guard the constant majority-class predictor wins: it is certified on every majority example.
    """
    state: dict[str, Any] = {}

    def table_for(tokenizer):
        if state.get("vocab") is not tokenizer.vocab:
            state["vocab"], state["table"] = tokenizer.vocab, substitution_table(tokenizer.vocab)
        return state["table"]

    def objective(module, batch, y, progress):
        if "table" not in state:
            raise TextAuditError("IBP training needs the substitution table before the first batch")
        return ibp_loss(module, batch["input_ids"], y, state["table"], progress=progress, robust_weight=robust_weight,
                        warmup=warmup, ramp=ramp)

    def select(module, tokenizer, texts, labels):
        table = table_for(tokenizer)
        r = certify(module, tokenizer, table, texts, labels, device=str(next(module.parameters()).device))
        return r["certified_accuracy"] if r["accuracy"] >= min_clean else r["accuracy"] - 1.0

    def on_tokenizer(tokenizer):
        table_for(tokenizer)

    return {"objective": objective, "select": select, "on_tokenizer": on_tokenizer}
