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
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from textaudit.device import pick_device
from textaudit.engine.scheduler import Ask
from textaudit.errors import StopRun, TextAuditError
from textaudit.models.options import current_model_options
from textaudit.models.torch_backend import DeviceClock, autocast, check_precision, forward_inputs, only_inputs, to_device
from textaudit.neighborhoods.cached_mlm import CachedMaskedLM, Query
from textaudit.neighborhoods.fingerprints import forget_fingerprint, mlm_fingerprint
from textaudit.resources import hub_local_only, loading_error, trust_remote_code
from textaudit.token_ids import SCHEMES, PieceIds, default_batch_tokens, pack, pad, piece_scheme

__all__ = ["MaskedLM", "HFMaskedLM", "Query", "word_table", "SCHEMES"]


def word_table(tokenizer, size: int) -> tuple[list[str], np.ndarray, str]:
    """Return ``(word of each vocabulary id, which ids are whole-word candidates, scheme)``.

    The scheme is read off how the tokenizer writes a word after a space (:func:`~textaudit.token_ids.piece_scheme`).
    A candidate is a piece that starts a word and is more than its marker; its word is the piece without the marker (decoded
    by the tokenizer for byte-level BPE, so "Ġcaf\u00c3\u00a9" is "café")."""
    vocab = tokenizer.get_vocab()
    scheme = piece_scheme(tokenizer)
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



@runtime_checkable
class MaskedLM(Protocol):
    """Anything that proposes whole-word candidates for masked positions."""

    name: str

    def candidates(self, batch: list[Query], top: int = 20) -> list[list[tuple[str, float]]]: ...


def ask_candidates(mlm: MaskedLM, queries: Sequence[Query], top: int | list[int]) -> Ask:
    """The search's ask "the ``top`` candidates at each of ``queries``" of ``mlm`` (``top``: one for all, or one per
    query where the masked LM takes that). A masked LM whose ``candidates`` takes one ``top`` per query
    (``tops_per_item``: textaudit's own) lets the engine merge asks of different tops — the neighbourhood's κ and the
    naturalness constraint's P — into one call, so their contexts share forwards; any other is asked once per
    distinct top."""
    if getattr(mlm, "tops_per_item", False):
        return Ask(mlm.candidates, queries, "mask", per_item="top", top=top)
    if isinstance(top, list):
        raise TypeError(f"{type(mlm).__name__} takes one top for all its queries")
    return Ask(mlm.candidates, queries, "mask", top=top)


class HFMaskedLM(CachedMaskedLM):
    """A HuggingFace masked LM behind the :class:`MaskedLM` interface: the forward of a
    :class:`~textaudit.neighborhoods.cached_mlm.CachedMaskedLM` (its LRU and the store in front of it).

    Parameters: ``model`` (an ``AutoModelForMaskedLM``), ``tokenizer``, ``name``, ``device``
    (default: CUDA when present), ``batch_size`` (masked sentences per forward), ``cache_size``,
    ``store`` (a :class:`~textaudit.neighborhoods.store.NeighborhoodStore` shared with other runs, or None).
    """

    def __init__(self, model, tokenizer, *, name: str, device: str | None = None, batch_size: int = 128,
                 cache_size: int = 200_000, precision: str | None = None, batch_tokens: int | None = None,
                 store=None, loader: Callable[[], Any] | None = None, vocab_size: int | None = None,
                 fingerprint_key: str | None = None):
        if model is None and (loader is None or vocab_size is None):
            raise ValueError("a masked LM without its model needs a loader and the vocabulary size")
        self.device = pick_device(device)
        #: the model, or None until first needed (``loader`` builds it: a run that the store answers entirely
        #: never loads the weights)
        self._model = None if model is None else model.to(self.device).eval()
        self._loader = loader
        self.tokenizer = tokenizer
        super().__init__(name=name, cache_size=cache_size, store=store)
        self.batch_size = batch_size
        self.id_to_word, self._allowed, self.scheme = word_table(
            tokenizer, vocab_size if model is None else model.get_output_embeddings().weight.shape[0])
        self._allowed_t = None  # the same mask as a tensor on the model's device, made on first use
        self._forward_inputs = None if model is None else forward_inputs(getattr(model, "base_model", model))
        opts = current_model_options()
        self.precision = check_precision(precision or opts.precision, self.device)
        #: where this masked LM's fingerprint is remembered between processes (see :meth:`fingerprint`)
        self._fingerprint_key = (f"{fingerprint_key}|{self.scheme}|{self.precision}|{str(self.device).split(':')[0]}"
                                 if fingerprint_key else None)
        self.batch_tokens = batch_tokens or opts.batch_tokens or default_batch_tokens(self.device)
        self.clock = DeviceClock(self.device)  # seconds inside the bare forward (encoder, head, top-k)
        #: a list to keep every padded batch in (benchmarks replay them as bare forwards), or None
        self.recorder: list | None = None
        #: masked copies are built from per-word cached pieces (False: from texts, the old path)
        self.use_ids = True
        try:
            self.pieces: PieceIds | None = PieceIds(tokenizer, max_length=256) if getattr(tokenizer, "is_fast", False) else None
        except (ValueError, TypeError, KeyError):
            self.pieces = None
        if self.pieces is not None and not self.pieces.masked_ok:
            self.pieces = None

    @property
    def model(self):
        """The ``AutoModelForMaskedLM``, built by the loader on first use; a fingerprint remembered from
        another process is checked against the weights then (a mismatch is an error, never a wrong answer
        stored under another masked LM's key)."""
        if self._model is None:
            assert self._loader is not None
            model = self._loader()
            size = model.get_output_embeddings().weight.shape[0]
            if len(self.id_to_word) != size:
                raise TextAuditError(f"masked LM {self.name}: {size} output words, not the {len(self.id_to_word)} "
                                     "its tokenizer gave; reinstall it")
            self._model = model.to(self.device).eval()
            self._forward_inputs = forward_inputs(getattr(model, "base_model", model))
            if self._fingerprint is not None:  # remembered: check it now that the weights are here

                real = self.compute_fingerprint()
                if real != self._fingerprint:
                    forget_fingerprint(self._fingerprint_key)
                    raise TextAuditError(f"masked LM {self.name}: the fingerprint remembered for its files no longer "
                                         "matches its weights (forgotten now); run the command again (--resume "
                                         "keeps what is done)")
        return self._model

    @property
    def loaded(self) -> bool:
        """Whether the weights are in memory (False while the store has answered every query)."""
        return self._model is not None

    @property
    def _inputs(self):
        if self._forward_inputs is None:
            self.model  # noqa: B018 — loads it
        return self._forward_inputs

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
            raise loading_error(e, f"masked LM '{name_or_path}'", f"cannot load masked LM '{name_or_path}'") from None
        return cls(model, tok, name=name or name_or_path, device=device, batch_size=batch_size, cache_size=cache_size)

    def __getstate__(self) -> dict:
        """A copy sent to another process (a Ray worker) starts with an empty cache and records no batch."""
        return {**super().__getstate__(), "recorder": None}

    # -- the forward ---------------------------------------------------------------------------------
    def compute_fingerprint(self) -> str:
        return mlm_fingerprint(self.model, self.id_to_word, scheme=self.scheme, precision=self.precision,
                               device=str(self.device))

    def context_keys(self, batch: list[Query]) -> list[tuple]:
        """A masked copy's word-piece ids (spliced from per-word cached pieces: :mod:`textaudit.token_ids`), or
        its words without ids (the old path)."""
        if self.use_ids and self.pieces is not None:
            masked = self.pieces.masked
            return [tuple(masked(words, pos)) for words, pos in batch]
        return super().context_keys(batch)

    def compute(self, todo: list[tuple], n: int):
        """The forward of the masked copies no tier held (:meth:`_predict_ids`, or :meth:`_predict_texts`)."""
        return self._predict_ids(todo, n) if self.use_ids and self.pieces is not None else self._predict_texts(todo, n)

    def _predict_texts(self, todo: list[tuple], top: int):
        """The old path: masked copies tokenised from their words, ``batch_size`` per forward; yields
        ``(key, ids, logits)``."""
        # similar lengths share a forward: less padding (same results, in any order)
        todo.sort(key=lambda k: sum(len(w) + 1 for w in k[0]) + sum(len(w) + 1 for w in k[1]))
        for s in range(0, len(todo), self.batch_size):
            chunk = todo[s:s + self.batch_size]
            for k, (ids, vals) in zip(chunk, self._collect_ids(self._launch_texts(chunk, top))):
                yield k, ids, vals

    def _predict_ids(self, todo: list[tuple], top: int):
        """Masked copies as ids (the key), packed to :attr:`batch_tokens`; yields ``(key, ids, logits)``.
        Batch i + 1 is padded and launched before batch i's results are read back (on CUDA the device
        runs one while the host builds the next)."""
        pieces = self.pieces
        assert pieces is not None
        pending = None
        for b in pack([len(k) for k in todo], self.batch_tokens):
            chunk = [todo[i] for i in b]
            ids, mask = pad(chunk, pieces.pad_id)
            enc = {"input_ids": ids, "attention_mask": mask}
            if getattr(self.model.config, "type_vocab_size", 0):
                enc["token_type_ids"] = np.zeros_like(ids)
            launched = (chunk, self._launch(enc, ids == pieces.mask_id, top))
            if pending is not None:
                for k, (i, v) in zip(pending[0], self._collect_ids(pending[1])):
                    yield k, i, v
            pending = launched
        if pending is not None:
            for k, (i, v) in zip(pending[0], self._collect_ids(pending[1])):
                yield k, i, v

    # -- internals -------------------------------------------------------------------------------
    def _encode(self, chunk: list[tuple]):
        mask = self.tokenizer.mask_token
        texts = [list(k[0]) + [mask] + list(k[1]) for k in chunk]
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

    def _launch_texts(self, chunk: list[tuple], top: int) -> tuple:
        """Tokenise masked copies from their words and launch their bare forward (:meth:`_launch`)."""
        enc = self._encode(chunk)
        is_mask = (enc["input_ids"] == self.tokenizer.mask_token_id).numpy()
        return self._launch({k: v.numpy() for k, v in enc.items()}, is_mask, top)

    def _predict(self, chunk: list[tuple], top: int) -> list[list[tuple[str, float]]]:
        """Rows of ``(word, logit)`` of masked copies tokenised from their words (one forward)."""
        return self._collect(self._launch_texts(chunk, top))

    def bare_forward(self, enc: dict, where, top: int):
        """``(logits, ids)`` of the ``top`` whole-word candidates at the ``where`` positions of
        padded inputs already on the device: the encoder, the MLM head, the whole-word mask, top-k."""
        import torch

        with torch.inference_mode(), autocast(self.device, self.precision):
            base = self.model.base_model(**enc)
            hidden = base.last_hidden_state[where]
            logits = self._hidden_to_logits(hidden)
            if logits is None:  # unknown head layout: full forward, then select
                logits = self.model(**enc).logits[where]
            if self._allowed_t is None or self._allowed_t.device != logits.device:
                self._allowed_t = torch.from_numpy(self._allowed).to(logits.device)
            logits = logits.float().masked_fill(~self._allowed_t, float("-inf"))
            # a small vocabulary holds fewer whole words than asked for (the naturalness check reads 200)
            return logits.topk(min(top, int(self._allowed.sum())), dim=-1)

    def _launch(self, enc: dict, is_mask: np.ndarray, top: int) -> tuple:
        """Start the bare forward of one padded batch (asynchronous on CUDA); :meth:`_collect` reads it."""
        import time

        import torch

        t0 = time.perf_counter()
        if not bool((is_mask.sum(1) == 1).all()):
            raise TextAuditError("a sentence is too long for the masked LM (more than 256 word pieces)")
        enc = only_inputs(to_device(enc, self.device), self._inputs)
        where = torch.from_numpy(is_mask).to(self.device)
        if self.recorder is not None:
            self.recorder.append((enc, where, top))
        mark = self.clock.start()
        vals, idx = self.bare_forward(enc, where, top)
        self.clock.stop(mark)
        self.forward_seconds += time.perf_counter() - t0
        return vals, idx

    def _collect(self, launched: tuple) -> list[list[tuple[str, float]]]:
        """Rows of ``(word, logit)``, best first, of a launched batch (waits for the device)."""
        words = self.id_to_word
        return [[(words[j], v) for j, v in zip(ids, vals)] for ids, vals in self._collect_ids(launched)]

    def _collect_ids(self, launched: tuple) -> list[tuple[list[int], list[float]]]:
        """``(vocabulary ids, logits)`` per row, best first, of a launched batch (waits for the device);
        only finite logits (a position with fewer whole-word candidates has fewer)."""
        import math
        import time

        t0 = time.perf_counter()
        vals, idx = launched
        if bool(vals.isnan().any()):  # every sentence would get no neighbour: a robust-looking, empty audit

            raise StopRun(f"masked LM {self.name} gave NaN scores (its weights are damaged, or {self.precision} "
                          "overflowed): reinstall or retrain it (audit train-mlm), or try --precision fp32")
        vals, idx = vals.cpu().tolist(), idx.cpu().tolist()
        self.clock.settle()
        self.forwards += len(vals)
        self.forward_seconds += time.perf_counter() - t0
        finite = math.isfinite
        out = []
        for vr, ir in zip(vals, idx):
            keep = [(j, v) for v, j in zip(vr, ir) if finite(v)]
            out.append(([j for j, _ in keep], [v for _, v in keep]))
        return out
