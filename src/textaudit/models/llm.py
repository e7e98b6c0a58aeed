"""``llm:<model>``: a causal language model used as a zero-/few-shot classifier through a :class:`Prompt`.

``llm:smollm2`` is the shipped SmolLM2-135M (offline); ``llm:<hub-id-or-dir>`` any HuggingFace causal
LM. Class probabilities come from the LM's next-token log-probabilities of each class's verbalisers
after the rendered prompt (see :mod:`textaudit.models.prompt`), in one forward per batch and without
a KV cache:

- all verbalisers one token long (the usual case): one forward of the prompts (left padded, position
  ids counted from each prompt's first real token) gives the last position's logits; class score
  s_c = logsumexp_{v ∈ V_c} logit_v, and P(c|x) = softmax_c(s_c) (the vocabulary's normaliser cancels);
- otherwise every (prompt, verbaliser) row is scored at once: log P(v|x) = Σ_i log P(v_i | x, v_<i),
  s_c = logsumexp_{v ∈ V_c} log P(v|x), P(c|x) = softmax_c(s_c).

It is an ordinary :class:`~textaudit.models.batched.BatchedClassifier`: batched, cached, counted.
"""

from __future__ import annotations

import inspect

import numpy as np

from textaudit.device import pick_device
from textaudit.files import fingerprint_dir, fingerprint_files
from textaudit.lm import document_prefix, load_lm
from textaudit.models.batched import BatchedClassifier
from textaudit.models.prompt import Prompt, default_prompt
from textaudit.resources import resolve

__all__ = ["LLMForward", "llm_classifier", "load_llm_classifier"]


class LLMForward:
    """``forward(texts) -> (n, C)`` class scores (logits) of a causal LM under ``prompt``."""

    def __init__(self, model, tokenizer, prompt: Prompt, device: str | None = None):
        self.device = pick_device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.prompt = prompt
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token

        self.prefix = document_prefix(tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        #: token ids of every verbaliser (after the prompt's lead), and the class each belongs to
        self.verb_ids: list[list[int]] = []
        self.verb_class: list[int] = []
        for c, words in enumerate(prompt.verbalizers):
            for w in words:
                ids = tokenizer(prompt.lead + w, add_special_tokens=False)["input_ids"]
                self.verb_ids.append(list(ids))
                self.verb_class.append(c)
        self.single = all(len(ids) == 1 for ids in self.verb_ids)
        params = inspect.signature(self.model.forward).parameters
        self._keep = "logits_to_keep" if "logits_to_keep" in params else (
            "num_logits_to_keep" if "num_logits_to_keep" in params else None)

    def _run(self, rows: list[list[int]], last_only: bool):
        """Logits of left-padded ``rows`` (position ids start at each row's first real token)."""
        import torch

        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, width - len(r):] = torch.tensor(r)
            mask[i, width - len(r):] = 1
        pos = (mask.cumsum(1) - 1).clamp(min=0)
        kw = {self._keep: 1} if (last_only and self._keep) else {}
        with torch.inference_mode():  # every thread: a batch of prompts is not small (benchmarks/threads.py --work llm)
            out = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                             position_ids=pos.to(self.device), use_cache=False, **kw)
        return out.logits.float()

    def __call__(self, texts: list) -> np.ndarray:
        import torch

        prompts = [self.tokenizer(self.prefix + self.prompt.render(t), add_special_tokens=False)["input_ids"]
                   for t in texts]
        n_verb = len(self.verb_ids)
        if self.single:
            logits = self._run(prompts, last_only=True)[:, -1]  # (n, vocab)
            verb = logits[:, [ids[0] for ids in self.verb_ids]]  # (n, V)
        else:
            rows = [p + v for p in prompts for v in self.verb_ids]
            logp = torch.log_softmax(self._run(rows, last_only=False), -1)
            width = logp.shape[1]
            scores = []
            for r in range(len(rows)):
                v = self.verb_ids[r % n_verb]
                start = width - len(v)  # left padding: the verbaliser is the row's last len(v) tokens
                pos = torch.arange(start - 1, width - 1)
                scores.append(logp[r, pos, torch.tensor(v)].sum())
            verb = torch.stack(scores).view(len(texts), n_verb)
        cls = torch.tensor(self.verb_class)
        out = torch.stack([torch.logsumexp(verb[:, cls == c], dim=1) for c in range(len(self.prompt.labels))], 1)
        return out.cpu().numpy()


def llm_classifier(model, tokenizer, prompt: Prompt | None = None, *, name: str = "llm", device: str | None = None,
                   batch_size: int | None = None, cache_size: int = 100_000) -> BatchedClassifier:
    """A :class:`BatchedClassifier` over a causal LM ``model`` and its ``tokenizer`` under ``prompt``
    (default: the built-in sentiment prompt). Batches of 16 texts on CPU, 128 on a GPU."""
    prompt = prompt or default_prompt()
    fwd = LLMForward(model, tokenizer, prompt, device)
    bs = batch_size or (128 if fwd.device.startswith("cuda") else 16)
    return BatchedClassifier(fwd, output="logits", num_classes=len(prompt.labels), batch_size=bs, name=name,
                             labels=list(prompt.labels), cache_size=cache_size)


def load_llm_classifier(name: str, prompt: Prompt | None = None, *, device: str | None = None,
                        batch_size: int | None = None) -> BatchedClassifier:
    """``llm:<name>``: ``smollm2`` (offline, the shipped GGUF) or a HuggingFace causal LM id or directory."""
    from pathlib import Path

    model, tok, resolved = load_lm(name or "smollm2")
    prompt = prompt or default_prompt()
    clf = llm_classifier(model, tok, prompt, name=f"llm:{name}", device=device, batch_size=batch_size)

    def fingerprint() -> str:
        # the weights and the prompt: a results file resumed with another prompt is refused
        if name == "smollm2":
            weights = fingerprint_files([resolve("smollm2")])
        elif Path(name).expanduser().is_dir():
            weights = fingerprint_dir(Path(name).expanduser())
        else:
            weights = str(getattr(model.config, "_commit_hash", None) or name)
        return f"{weights}+prompt:{prompt.fingerprint()}"

    clf.fingerprint = fingerprint
    return clf
