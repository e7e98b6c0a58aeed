"""Vocabulary and GloVe embeddings for the zoo's word models (bow, cnn, lstm, transformer)."""

from __future__ import annotations

import json
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from textaudit.errors import TextAuditError
from textaudit.files import atomic_path
from textaudit.resources import cache_dir, resolve
from textaudit.text import word_tokenize

__all__ = ["Vocab", "load_glove", "build_vocab", "WordTokenizer"]

PAD, UNK = "<pad>", "<unk>"
#: how a zoo word model reads a sentence pair: ``first [SEP] second``, one text
PAIR_SEP = "[SEP]"


@lru_cache(maxsize=1)
def load_glove() -> tuple[list[str], np.ndarray]:
    """Return ``(words, vectors)`` of the ``glove-50d`` resource (400k × 50, float32).

    Reads the PyPI layout (``glove_6B_50d_emb.npy`` + ``glove_6B_index.parquet``) directly; the
    Stanford text format is parsed once and cached as ``.npy`` next to the text file.
    """
    root = resolve("glove-50d")
    npy, index = root / "glove_6B_50d_emb.npy", root / "glove_6B_index.parquet"
    if npy.is_file() and index.is_file():
        import pyarrow.parquet as pq

        table = pq.read_table(index)
        words = [str(w) for w in table.column(table.column_names[0]).to_pylist()]
        return words, np.load(npy, mmap_mode="r")
    txt = root / "glove.6B.50d.txt"
    cached = cache_dir() / "glove-50d-parsed"
    if not (cached / "vectors.npy").is_file():
        words, vecs = [], []
        with open(txt, encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip().split(" ")
                words.append(parts[0])
                vecs.append(np.asarray(parts[1:], dtype=np.float32))
        with atomic_path(cached / "words.json", unmarked="the parsed GloVe vectors in textaudit's cache") as tmp:
            tmp.write_text(json.dumps(words))
        # last: it says the cache is complete
        with atomic_path(cached / "vectors.npy", suffix=".npy", unmarked="textaudit's cache") as tmp:
            np.save(tmp, np.stack(vecs))
    return json.loads((cached / "words.json").read_text()), np.load(cached / "vectors.npy", mmap_mode="r")


class Vocab:
    """Word ↔ id map; id 0 is padding, id 1 is the unknown word."""

    def __init__(self, words: Sequence[str]):
        self.itos = [PAD, UNK] + [w for w in words if w not in (PAD, UNK)]
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, word: str) -> bool:
        return word in self.stoi

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Return the ids of ``tokens`` (unknown words → 1)."""
        return [self.stoi.get(t, 1) for t in tokens]

    def save(self, path: Path) -> None:
        path.write_text("\n".join(self.itos) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> "Vocab":
        words = path.read_text(encoding="utf-8").split("\n")
        if words and words[-1] == "":
            words.pop()
        if words[:2] != [PAD, UNK]:
            raise TextAuditError(f"{path} is not a textaudit vocabulary (it must start with {PAD}, {UNK})")
        return cls(words[2:])


def build_vocab(texts: Iterable[str], *, glove_top: int = 50_000, extra_words: Iterable[str] = (),
                seed: int = 0) -> tuple[Vocab, np.ndarray]:
    """Return ``(vocab, embeddings)``: the words of (training texts ∪ ``extra_words`` ∪ the
    ``glove_top`` most frequent GloVe words) that have a GloVe vector, with those vectors (zeros for
    padding/unknown). Every other word is unknown (id 1; the models learn its vector). Restricting
    the matrix to these words keeps checkpoints ~15 MB."""
    counts = Counter(tok for t in texts for tok in word_tokenize(t))
    words_g, vecs = glove_index()
    wanted = [w for w in list(counts) + list(extra_words) if w in words_g] + load_glove()[0][:glove_top]
    vocab = Vocab(list(dict.fromkeys(wanted)))
    emb = np.zeros((len(vocab), vecs.shape[1]), dtype=np.float32)
    rows = np.fromiter((words_g[w] for w in vocab.itos[2:]), dtype=np.int64, count=len(vocab) - 2)
    emb[2:] = vecs[np.sort(rows)][np.argsort(np.argsort(rows))]
    return vocab, emb


@lru_cache(maxsize=1)
def glove_index() -> tuple[dict[str, int], np.ndarray]:
    words, vecs = load_glove()
    return {w: i for i, w in enumerate(words)}, vecs


class WordTokenizer:
    """Batch tokenizer for the word models: ``tok(texts) -> {"input_ids": LongTensor}``, padded to
    the longest text of the batch (at most ``max_len`` tokens; empty texts become one ``<unk>``)."""

    def __init__(self, vocab: Vocab, max_len: int = 256):
        self.vocab = vocab
        self.max_len = max_len

    def ids(self, text: str | tuple[str, str]) -> list[int]:
        """Word ids of a text; a sentence pair is read as ``first [SEP] second`` (the zoo's pair convention)."""
        if not isinstance(text, str):
            text = f"{text[0]} {PAIR_SEP} {text[1]}"
        return self.vocab.encode(word_tokenize(text)[: self.max_len]) or [1]

    def __call__(self, texts: Sequence[str]):
        import torch

        rows = [self.ids(t) for t in texts]
        width = max(len(r) for r in rows)
        out = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        return {"input_ids": out}
