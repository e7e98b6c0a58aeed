"""The paper's word-level model families (Double Perturbation §3.3.1), on frozen GloVe vectors.

Every model: ``forward(input_ids) -> logits`` with padding id 0. Words enter as 50-d GloVe
vectors (fixed, or fine-tuned with ``tune_embeddings``: the zoo's bow and cnn do, see
``train.DEFAULTS``) followed by a trainable linear projection + ReLU (as in Jia et al. 2019's certified-robust
models, which keeps synonyms close and lets unseen words still carry meaning); then one hidden
layer of the named type with hidden size 100 (transformer: 3 layers, 4 heads, hidden 64), a pooling
step, and a linear output layer.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["ARCHITECTURES", "build_module", "WordModel"]


class WordModel(nn.Module):
    """Shared embedding front end: GloVe → Linear(50, d) → ReLU.

    Words without a GloVe vector map to the unknown word (id 1), whose vector is *learned*
    (``unk``), so the model can notice unknown tokens (typos, leet-speak, homoglyphs).
    ``tune_embeddings``: the GloVe vectors are fine-tuned too, with sparse gradients (only the
    rows of a batch's words are updated; see :func:`textaudit.models.zoo.train.fit`)."""

    def __init__(self, embeddings: torch.Tensor, d: int, num_classes: int, tune_embeddings: bool = False):
        super().__init__()
        self.embed = nn.Embedding.from_pretrained(embeddings, freeze=not tune_embeddings, padding_idx=0,
                                                  sparse=tune_embeddings)
        self.unk = nn.Parameter(torch.zeros(embeddings.shape[1]))
        self.proj = nn.Linear(embeddings.shape[1], d)
        self.num_classes = num_classes

    def input_vectors(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The (B, T, 50) word vectors the model reads (GloVe rows; the learned ``unk`` for id 1)."""
        e = self.embed(input_ids)
        return torch.where((input_ids == 1).unsqueeze(-1), self.unk.to(e.dtype).expand_as(e), e)

    def embed_words(self, input_ids: torch.Tensor, vectors: torch.Tensor | None = None) -> torch.Tensor:
        """Projected words; ``vectors`` replaces :meth:`input_vectors` (e.g. perturbed by PGD)."""
        e = self.input_vectors(input_ids) if vectors is None else vectors
        return torch.relu(self.proj(e))

    def features(self, input_ids: torch.Tensor, vectors: torch.Tensor | None = None) -> torch.Tensor:
        """The pooled representation h(x) that the output layer reads."""
        raise NotImplementedError

    def forward(self, input_ids: torch.Tensor, vectors: torch.Tensor | None = None) -> torch.Tensor:
        return self.out(self.drop(self.features(input_ids, vectors)))


def _masked_mean(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.unsqueeze(-1).to(h.dtype)
    return (h * m).sum(1) / m.sum(1).clamp(min=1.0)


class BoW(WordModel):
    """Bag of words: mean of projected word vectors → Linear(100, 100) + ReLU → output."""

    def __init__(self, embeddings, num_classes=2, hidden=100, dropout=0.2, tune_embeddings=False):
        super().__init__(embeddings, hidden, num_classes, tune_embeddings)
        self.hidden = nn.Linear(hidden, hidden)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, num_classes)

    def features(self, input_ids, vectors=None):
        h = _masked_mean(self.embed_words(input_ids, vectors), input_ids != 0)
        return torch.relu(self.hidden(self.drop(h)))


class CNN(WordModel):
    """CNN: one Conv1d layer (100 filters, width 3) + ReLU → max over time → output."""

    def __init__(self, embeddings, num_classes=2, hidden=100, kernel=3, dropout=0.2, tune_embeddings=False):
        super().__init__(embeddings, hidden, num_classes, tune_embeddings)
        self.conv = nn.Conv1d(hidden, hidden, kernel, padding=kernel // 2)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, num_classes)

    def features(self, input_ids, vectors=None):
        mask = input_ids != 0
        h = self.embed_words(input_ids, vectors) * mask.unsqueeze(-1)
        c = torch.relu(self.conv(self.drop(h).transpose(1, 2))).transpose(1, 2)
        return c.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(1)


class LSTM(WordModel):
    """LSTM: one layer (hidden 100) → masked mean of its states → output.

    The zoo's: unidirectional, dropout on the projected words. Jia et al. 2019's certified LSTM (``bidirectional``,
    ``hidden_layer``, no ``input_dropout``): both directions' states (2 × 100) → masked mean → dropout →
    Linear(200, 100) + ReLU → dropout → output."""

    def __init__(self, embeddings, num_classes=2, hidden=100, dropout=0.2, tune_embeddings=False,
                 bidirectional: bool = False, hidden_layer: bool = False, input_dropout: bool = True):
        super().__init__(embeddings, hidden, num_classes, tune_embeddings)
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True, bidirectional=bidirectional)
        self.drop = nn.Dropout(dropout)
        self.input_dropout = input_dropout
        width = 2 * hidden if bidirectional else hidden
        self.hidden = nn.Linear(width, hidden) if hidden_layer else None
        self.out = nn.Linear(hidden if hidden_layer else width, num_classes)

    def features(self, input_ids, vectors=None):
        mask = input_ids != 0
        lengths = mask.sum(1).clamp(min=1).cpu()
        x = self.embed_words(input_ids, vectors)
        if self.input_dropout:
            x = self.drop(x)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=input_ids.shape[1])
        h = _masked_mean(out, mask)
        return torch.relu(self.hidden(self.drop(h))) if self.hidden is not None else h


class Transformer(WordModel):
    """Transformer encoder: 3 layers, 4 heads, hidden 64, learned positions → masked mean → output."""

    def __init__(self, embeddings, num_classes=2, hidden=64, layers=3, heads=4, max_len=256, dropout=0.1, tune_embeddings=False):
        super().__init__(embeddings, hidden, num_classes, tune_embeddings)
        self.pos = nn.Embedding(max_len, hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, dim_feedforward=4 * hidden, dropout=dropout,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.drop = nn.Identity()
        self.out = nn.Linear(hidden, num_classes)

    def features(self, input_ids, vectors=None):
        input_ids = input_ids[:, : self.pos.num_embeddings]
        if vectors is not None:
            vectors = vectors[:, : self.pos.num_embeddings]
        mask = input_ids != 0
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        h = self.embed_words(input_ids, vectors) + self.pos(pos)[None]
        h = self.encoder(h, src_key_padding_mask=~mask)
        return _masked_mean(h, mask)


ARCHITECTURES: dict[str, type[WordModel]] = {"bow": BoW, "cnn": CNN, "lstm": LSTM, "transformer": Transformer}


def build_module(arch: str, embeddings: torch.Tensor, num_classes: int, tune_embeddings: bool = False,
                 **options) -> WordModel:
    """Return an untrained word model of family ``arch`` over ``embeddings``; ``options``: the family's own (e.g. the
    LSTM's ``bidirectional``), as :class:`~textaudit.models.zoo.train.TrainConfig`'s ``arch_options`` records them."""
    return ARCHITECTURES[arch](embeddings, num_classes=num_classes, tune_embeddings=tune_embeddings, **options)
