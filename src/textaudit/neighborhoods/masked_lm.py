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

import os
import re
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from textaudit.device import pick_device
from textaudit.errors import StopRun, TextAuditError
from textaudit.models.options import current_model_options
from textaudit.models.torch_backend import DeviceClock, autocast, check_precision, forward_inputs, only_inputs, to_device
from textaudit.neighborhoods.fingerprints import forget_fingerprint, mlm_fingerprint, recall_fingerprint, remember_fingerprint
from textaudit.neighborhoods.store import STORE_TOP, context_key
from textaudit.neighborhoods.store_sync import WORKER_COUNTS
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
        self.name = name
        self.batch_size = batch_size
        self.cache_size = cache_size
        #: in-memory LRU: masked context -> (n, its top-n candidates)
        self._cache: OrderedDict[tuple, tuple[int, list[tuple[str, float]]]] = OrderedDict()
        #: the neighbourhood store behind the LRU (:mod:`textaudit.neighborhoods.store`), or None
        self.store = store
        self._fingerprint: str | None = None
        self._store_mlm: int | None = None
        self._store_pid: int | None = None
        self._stored_seconds: float | None = None
        self.store_hits = 0  # masked contexts the store answered ...
        self.store_misses = 0  # ... and those it did not (computed, then stored)
        self.store_seconds_saved = 0.0
        #: this object's name in its store's counters, the same in its copies on Ray workers
        self.token = uuid.uuid4().hex
        self.forwards = 0  # masked sentences actually run through the model
        self.cache_hits = 0
        self.forward_seconds = 0.0
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

                real = self._compute_fingerprint()
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

    def clear_cache(self) -> None:
        """Forget every cached candidate list."""
        self._cache.clear()

    def __getstate__(self) -> dict:
        """A copy sent to another process (a Ray worker) starts with an empty cache (see
        :meth:`BatchedClassifier.__getstate__ <textaudit.models.batched.BatchedClassifier.__getstate__>`)."""
        state = dict(self.__dict__)
        state["_cache"] = OrderedDict()
        state["recorder"] = None
        state["_store_mlm"] = None  # the worker registers it in its own connection
        return state

    # -- the store -------------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """What identifies this masked LM's answers (weights, tokenizer, precision, device kind): the
        store's key (:func:`~textaudit.neighborhoods.fingerprints.mlm_fingerprint`), computed once."""
        if self._fingerprint is None:
            known = recall_fingerprint(self._fingerprint_key) if self._model is None else None
            if known is not None:  # the same files, read by another process: the weights need not load
                self._fingerprint = known
            else:
                self._fingerprint = self._compute_fingerprint()
                remember_fingerprint(self._fingerprint_key, self._fingerprint)
        return self._fingerprint

    def _compute_fingerprint(self) -> str:
        return mlm_fingerprint(self.model, self.id_to_word, scheme=self.scheme, precision=self.precision,
                               device=str(self.device))

    def _store_id(self) -> int | None:
        """This masked LM's id in :attr:`store` (registered on first use), or None without a store."""
        if self.store is None or not self.store.available:
            return None
        if self._store_mlm is None or self._store_pid != os.getpid():
            self._store_mlm = self.store.mlm_id(self.fingerprint, self.name, self.id_to_word)
            self._store_pid = os.getpid()
        return self._store_mlm

    def store_summary(self) -> dict | None:
        """``{"path", "hits", "misses", "hit_rate", "seconds_saved"}`` of this masked LM's store use in this
        process and in its Ray workers (summaries and ``--json``), or None without a store."""
        if self.store is None:
            return None

        hits, misses, saved = self.store_hits, self.store_misses, self.store_seconds_saved
        if self.token in WORKER_COUNTS:  # a Ray run: its workers' copies of this masked LM asked the store
            wh, wm = WORKER_COUNTS[self.token]
            mlm_id = self._store_id()
            hits, misses = hits + wh, misses + wm
            saved += wh * (self._seconds_per_entry(mlm_id) if mlm_id is not None else 0.0)
        asked = hits + misses
        return {"path": str(self.store.path), "hits": hits, "misses": misses,
                "hit_rate": round(hits / asked, 4) if asked else None, "mlm_seconds_saved": round(saved, 2)}

    # -- the interface ---------------------------------------------------------------------------
    def candidates(self, batch: list[Query], top: int = 20) -> list[list[tuple[str, float]]]:
        """Return, per ``(words, position)``, the ``top`` whole-word candidates ``(word, logit)``,
        best first (the original word is *not* removed here; the neighbourhood builder does that).

        Masked copies are spliced from per-word cached pieces (:mod:`textaudit.token_ids`) and
        cached by their ids: a masked context shared by several sentences is computed once. What the
        in-memory cache misses is looked up in the neighbourhood :attr:`store` (shared by runs and
        processes), and what is computed goes into both. Every forward computes the top
        max(κ, :data:`~textaudit.neighborhoods.store.STORE_TOP`) candidates, so an answer from either
        cache is the first κ of what the forward gives, with the store or without it."""
        for words, pos in batch:
            if not 0 <= pos < len(words):
                raise TextAuditError(f"position {pos} is outside a sentence of {len(words)} words")
        by_ids = self.use_ids and self.pieces is not None
        if by_ids:
            masked = self.pieces.masked  # type: ignore[union-attr]
            keys = [tuple(masked(words, pos)) for words, pos in batch]
        else:
            keys = [(tuple(words[:pos]), tuple(words[pos + 1:])) for words, pos in batch]
        cache = self._cache
        found: dict[tuple, list[tuple[str, float]]] = {}
        todo: dict[tuple, int] = {}  # key -> its first query
        for i, k in enumerate(keys):
            if k in found or k in todo:
                continue
            hit = cache.get(k)
            if hit is not None and (hit[0] >= top or len(hit[1]) < hit[0]):  # enough, or all there is
                cache.move_to_end(k)
                found[k] = hit[1]
            else:
                todo[k] = i
        self.cache_hits += len(keys) - len(todo)
        mlm_id = self._store_id() if todo else None
        if mlm_id is not None:
            assert self.store is not None
            skeys = {k: context_key(*batch[i]) for k, i in todo.items()}
            got = self.store.get(mlm_id, list(skeys.values()), top)
            words = self.id_to_word
            for k in [k for k in todo if skeys[k] in got]:
                _, ids, vals = got[skeys[k]]
                found[k] = self._remember(k, top, [(words[j], v) for j, v in zip(ids[:top], vals[:top])])
                del todo[k]
            self.store_hits += len(skeys) - len(todo)
            self.store_misses += len(todo)
            self.store.record(mlm_id, len(skeys) - len(todo), len(todo), self.token)
            self.store_seconds_saved += (len(skeys) - len(todo)) * self._seconds_per_entry(mlm_id)
        if todo:
            n = max(top, STORE_TOP)
            t0 = self.forward_seconds
            computed = self._predict_ids(list(todo), n) if by_ids else self._predict_texts(list(todo), n)
            rows = []
            for k, ids, vals in computed:
                found[k] = self._remember(k, top, [(self.id_to_word[j], v) for j, v in zip(ids[:top], vals[:top])])
                rows.append((k, ids, vals))
            if mlm_id is not None and rows:
                per = (self.forward_seconds - t0) / len(rows)
                self.store.put(mlm_id, [(skeys[k], n, ids, vals) for k, ids, vals in rows], per)  # type: ignore[union-attr]
        return [found[k][:top] for k in keys]

    def _remember(self, key: tuple, n: int, rows: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """Keep ``rows`` (the top ``n`` candidates: what was asked, the store keeps more) in the in-memory
        LRU; return them."""
        if self.cache_size:
            cache = self._cache
            cache[key] = (n, rows)
            while len(cache) > self.cache_size:
                cache.popitem(last=False)
        return rows

    def seconds_per_context(self) -> float | None:
        """Seconds a masked context takes to compute here (a forward, not an answer from the cache or the
        store): measured in this process, else as the store recorded it for this masked LM; None unknown."""
        if self.forwards:
            return self.forward_seconds / self.forwards
        mlm_id = self._store_id() if self.store is not None else None
        return (self._seconds_per_entry(mlm_id) or None) if mlm_id is not None else None

    def _seconds_per_entry(self, mlm_id: int) -> float:
        """Masked-LM seconds per masked sentence: measured in this process, else as the store recorded it."""
        if self.forwards:
            return self.forward_seconds / self.forwards
        if self._stored_seconds is None:
            row = next((m for m in self.store.mlms() if m["id"] == mlm_id), None) if self.store else None
            self._stored_seconds = float(row["seconds_per_entry"]) if row else 0.0
        return self._stored_seconds

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
            return logits.topk(top, dim=-1)

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
