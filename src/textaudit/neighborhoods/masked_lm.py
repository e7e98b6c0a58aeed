"""Masked language models that propose whole-word replacements for one position of a sentence.

The interface every neighbourhood, attack and bias estimator uses::

    mlm = load_mlm()                      # distilbert-base-uncased if available, else minilm-mlm
    mlm.candidates([(["a", "deep", "and", "meaningful", "film", "."], 3)], top=20)
    # -> [[("moving", 13.2), ("powerful", 12.9), ...]]   (word, logit), best first

A position is masked by *one* ``[MASK]`` token even when its word splits into several word pieces
(as the Double Perturbation reference implementation does). Candidates are whole-word vocabulary
entries only, whatever the tokenizer (:func:`word_table`): WordPiece (BERT, DistilBERT: never
``##`` continuation pieces), SentencePiece (XLM-R, CamemBERT: only pieces that start a word, ``▁``
removed) and byte-level BPE (RoBERTa, GPT-2 style: only pieces that start with a space, ``Ġ``,
decoded to Unicode); never special or ``[unused]`` tokens. The decoder
runs only at the masked positions (not over every token), and results are cached per masked
sentence in an LRU cache.

Implementations: :class:`HFMaskedLM` over any ``AutoModelForMaskedLM`` (a hub id such as
``distilbert-base-uncased`` when online or cached, or a local directory), and ``minilm-mlm`` —
textaudit's own offline model (:mod:`textaudit.neighborhoods.minilm_mlm`).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from textaudit.device import pick_device
from textaudit.errors import TextAuditError
from textaudit.models.torch_backend import forward_inputs, only_inputs
from textaudit.resources import hub_local_only, remote_code_error, trust_remote_code

__all__ = ["MaskedLM", "HFMaskedLM", "Query", "word_table", "SCHEMES"]

#: how a tokenizer marks a word's first piece: wordpiece (continuations start with ##),
#: sentencepiece (word starts carry ▁), bytelevel (word starts carry Ġ, bytes mapped to symbols)
SCHEMES = ("wordpiece", "sentencepiece", "bytelevel")


def _scheme(tokenizer) -> str:
    """How ``tokenizer`` marks a word's first piece: the first piece of " the" starts with ``▁``
    (SentencePiece), with ``Ġ`` (byte-level BPE), or with neither (WordPiece)."""
    try:
        first = tokenizer.convert_ids_to_tokens(tokenizer(" the", add_special_tokens=False)["input_ids"])[:1]
    except (TypeError, ValueError, KeyError):
        first = []
    piece = str(first[0]) if first else ""
    return "sentencepiece" if piece.startswith("\u2581") else "bytelevel" if piece.startswith("\u0120") else "wordpiece"


def word_table(tokenizer, size: int) -> tuple[list[str], np.ndarray, str]:
    """Return ``(word of each vocabulary id, which ids are whole-word candidates, scheme)``.

    The scheme is read off how the tokenizer writes a word after a space (:func:`_scheme`). A candidate is a piece that
    starts a word and is more than its marker; its word is the piece without the marker (decoded
    by the tokenizer for byte-level BPE, so "Ġcaf\u00c3\u00a9" is "café")."""
    vocab = tokenizer.get_vocab()
    scheme = _scheme(tokenizer)
    words = [""] * max(size, max(vocab.values()) + 1)
    allowed = np.zeros(size, dtype=bool)
    special = set(tokenizer.all_special_ids)
    for w, i in vocab.items():
        if scheme == "sentencepiece":
            ok, word = w.startswith("\u2581") and len(w) > 1, w[1:]
        elif scheme == "bytelevel":
            ok = w.startswith("\u0120") and len(w) > 1
            word = tokenizer.convert_tokens_to_string([w]).strip() if ok else w
        else:
            ok, word = not w.startswith("##") and not re.fullmatch(r"\[.*\]", w), w
        words[i] = word
        if i < size:
            allowed[i] = bool(ok and word.strip()) and i not in special
    return words, allowed, scheme

#: one masked-LM query: the sentence's words and the position to fill
Query = tuple[Sequence[str], int]


@runtime_checkable
class MaskedLM(Protocol):
    """Anything that proposes whole-word candidates for masked positions."""

    name: str

    def candidates(self, batch: list[Query], top: int = 20) -> list[list[tuple[str, float]]]: ...


class HFMaskedLM:
    """A HuggingFace masked LM behind the :class:`MaskedLM` interface.

    Parameters: ``model`` (an ``AutoModelForMaskedLM``), ``tokenizer``, ``name``, ``device``
    (default: CUDA when present), ``batch_size`` (masked sentences per forward), ``cache_size``.
    """

    def __init__(self, model, tokenizer, *, name: str, device: str | None = None, batch_size: int = 128,
                 cache_size: int = 200_000):
        self.device = pick_device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.name = name
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple, list[tuple[str, float]]] = OrderedDict()
        self.forwards = 0  # masked sentences actually run through the model
        self.cache_hits = 0
        self.forward_seconds = 0.0
        self.id_to_word, self._allowed, self.scheme = word_table(tokenizer, model.get_output_embeddings().weight.shape[0])
        self._allowed_t = None  # the same mask as a tensor on the model's device, made on first use
        self._inputs = forward_inputs(getattr(model, "base_model", model))

    @classmethod
    def from_pretrained(cls, name_or_path: str, *, name: str | None = None, device: str | None = None,
                        batch_size: int = 128, cache_size: int = 200_000) -> "HFMaskedLM":
        """Load ``AutoModelForMaskedLM`` + tokenizer from a local directory or hub id."""
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        local = Path(name_or_path).expanduser()
        local_only = local.exists() or hub_local_only()
        trust = trust_remote_code()
        try:
            tok = AutoTokenizer.from_pretrained(str(local) if local.exists() else name_or_path,
                                                local_files_only=local_only, trust_remote_code=trust)
            model = AutoModelForMaskedLM.from_pretrained(str(local) if local.exists() else name_or_path,
                                                         local_files_only=local_only, trust_remote_code=trust)
        except (OSError, ValueError) as e:
            refused = remote_code_error(e, f"masked LM '{name_or_path}'")
            if refused is not None:
                raise refused from None
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
            raise TextAuditError(f"cannot load masked LM '{name_or_path}': {first}") from None
        return cls(model, tok, name=name or name_or_path, device=device, batch_size=batch_size, cache_size=cache_size)

    def clear_cache(self) -> None:
        """Forget every cached candidate list."""
        self._cache.clear()

    def __getstate__(self) -> dict:
        """A copy sent to another process (a Ray worker) starts with an empty cache (see
        :meth:`BatchedClassifier.__getstate__ <textaudit.models.batched.BatchedClassifier.__getstate__>`)."""
        state = dict(self.__dict__)
        state["_cache"] = OrderedDict()
        return state

    # -- the interface ---------------------------------------------------------------------------
    def candidates(self, batch: list[Query], top: int = 20) -> list[list[tuple[str, float]]]:
        """Return, per ``(words, position)``, the ``top`` whole-word candidates ``(word, logit)``,
        best first (the original word is *not* removed here; the neighbourhood builder does that)."""
        keys = []
        for words, pos in batch:
            if not 0 <= pos < len(words):
                raise TextAuditError(f"position {pos} is outside a sentence of {len(words)} words")
            keys.append((tuple(words[:pos]), tuple(words[pos + 1:]), top))
        found: dict[tuple, list[tuple[str, float]]] = {}
        for k in keys:
            if k in self._cache:
                self._cache.move_to_end(k)
                found[k] = self._cache[k]
        todo = list(dict.fromkeys(k for k in keys if k not in found))
        self.cache_hits += len(keys) - len(todo)
        # similar lengths share a forward: less padding (same results, in any order)
        todo.sort(key=lambda k: sum(len(w) + 1 for w in k[0]) + sum(len(w) + 1 for w in k[1]))
        for s in range(0, len(todo), self.batch_size):
            chunk = todo[s:s + self.batch_size]
            for k, res in zip(chunk, self._predict(chunk, top)):
                found[k] = res
                if self.cache_size:
                    self._cache[k] = res
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return [found[k] for k in keys]

    # -- internals -------------------------------------------------------------------------------
    def _encode(self, chunk: list[tuple]):
        mask = self.tokenizer.mask_token
        texts = [list(left) + [mask] + list(right) for left, right, _ in chunk]
        if self.scheme != "wordpiece":
            # one string per sentence, as a fill-mask pipeline gives them: pre-split words would need
            # add_prefix_space (byte-level BPE) or put a lone ▁ before the mask (SentencePiece)
            enc = self.tokenizer([" ".join(t) for t in texts], padding="longest", truncation=True, max_length=256,
                                 return_tensors="pt")
        else:
            enc = self.tokenizer(texts, is_split_into_words=True, padding="longest", truncation=True,
                                 max_length=256, return_tensors="pt")
        return only_inputs(enc, self._inputs)

    def _hidden_to_logits(self, hidden):
        """Apply the MLM head to hidden states of masked positions only."""
        m = self.model
        if hasattr(m, "cls"):  # BERT family
            return m.cls(hidden)
        if hasattr(m, "vocab_projector"):  # DistilBERT
            h = m.vocab_layer_norm(m.activation(m.vocab_transform(hidden)))
            return m.vocab_projector(h)
        if hasattr(m, "lm_head"):  # RoBERTa family
            return m.lm_head(hidden)
        return None

    def _predict(self, chunk: list[tuple], top: int) -> list[list[tuple[str, float]]]:
        import time

        import torch

        t0 = time.perf_counter()
        enc = self._encode(chunk)
        ids = enc["input_ids"]
        is_mask = ids == self.tokenizer.mask_token_id
        if not bool((is_mask.sum(1) == 1).all()):
            raise TextAuditError("a sentence is too long for the masked LM (more than 256 word pieces)")
        enc = {k: v.to(self.device) for k, v in enc.items()}
        with torch.inference_mode():
            base = self.model.base_model(**enc)
            hidden = base.last_hidden_state[is_mask.to(self.device)]
            logits = self._hidden_to_logits(hidden)
            if logits is None:  # unknown head layout: full forward, then select
                logits = self.model(**enc).logits[is_mask.to(self.device)]
            if self._allowed_t is None or self._allowed_t.device != logits.device:
                self._allowed_t = torch.from_numpy(self._allowed).to(logits.device)
            logits = logits.float().masked_fill(~self._allowed_t, float("-inf"))
            vals, idx = logits.topk(top, dim=-1)
        vals, idx = vals.cpu().numpy(), idx.cpu().numpy()
        self.forwards += len(chunk)
        self.forward_seconds += time.perf_counter() - t0
        return [[(self.id_to_word[j], float(v)) for v, j in zip(vr, ir) if np.isfinite(v)] for vr, ir in zip(vals, idx)]
