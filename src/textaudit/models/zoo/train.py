"""Training the zoo's models on CPU in minutes (GPU when present).

Model selection never looks at SST-2 dev or test: early stopping uses a held-out slice of the
*training* data (``holdout``, 2% by default); dev accuracy is only *reported* after training.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

import textaudit.notices as notices
from textaudit.device import pick_device
from textaudit.errors import TextAuditError
from textaudit.models.batched import BatchedClassifier
from textaudit.models.torch_backend import TorchForward, hf_tokenize, torch_classifier
from textaudit.models.zoo.checkpoint import batch_encoder, id_encoder, save_checkpoint
from textaudit.models.zoo.names import ARCHS
from textaudit.models.zoo.vocab import PAIR_SEP, WordTokenizer, build_vocab
from textaudit.progress import progress as progress_bar
from textaudit.resources import resolve
from textaudit.train_state import Resumable

__all__ = ["TrainConfig", "TrainResult", "DEFAULTS", "fit", "fit_classifier", "accuracy"]



@dataclass
class TrainConfig:
    """Hyper-parameters; ``epochs`` is an upper bound (early stopping with ``patience``)."""

    arch: str
    epochs: int = 5
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    patience: int = 2
    holdout: float = 0.02
    seed: int = 0
    max_len: int = 256
    evals_per_epoch: int = 1
    tune_embeddings: bool = False  # word models: fine-tune the GloVe vectors (sparse updates)
    select_best: bool = True  # keep the best held-out checkpoint (and stop early); False: train every epoch, keep the last
    clip_grad: float | None = None  # clip the gradients' norm to this (default: 1 for subword models and the transformer)
    arch_options: dict[str, Any] = field(default_factory=dict)  # the architecture's own options (build_module)

    def to_dict(self) -> dict:
        return asdict(self)


DEFAULTS: dict[str, dict[str, Any]] = {
    "bow": dict(epochs=8, lr=2e-3, tune_embeddings=True),
    "cnn": dict(epochs=6, lr=1e-3, tune_embeddings=True),
    "lstm": dict(epochs=5, lr=2e-3),
    "transformer": dict(epochs=6, lr=5e-4, weight_decay=0.01),
    "minilm": dict(epochs=1, lr=5e-5, batch_size=32, max_len=128, weight_decay=0.01, evals_per_epoch=4),
}


@dataclass
class TrainResult:
    module: Any
    tokenizer: Any
    config: TrainConfig
    history: list[dict] = field(default_factory=list)
    best_holdout_accuracy: float = float("nan")
    train_seconds: float = 0.0


def accuracy(clf: BatchedClassifier, texts: Sequence[str], labels: Sequence[int]) -> float:
    """Return the share of ``texts`` whose argmax prediction equals ``labels``."""
    if len(texts) == 0:
        raise TextAuditError("cannot compute accuracy on an empty dataset")
    return float((clf.predict(list(texts)) == np.asarray(labels)).mean())


def _split(n: int, holdout: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    idx = rng.permutation(n)
    k = int(round(n * holdout)) if n >= 50 else 0
    k = min(max(k, min(200, n // 5)), 5000) if n >= 50 else 0
    return idx[k:], idx[:k]


def _batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffled batches of similar-length examples (sort within pools of 50 batches)."""
    idx = rng.permutation(len(lengths))
    pool = batch_size * 50
    out = []
    for s in range(0, len(idx), pool):
        chunk = idx[s:s + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        out.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    rng.shuffle(out)
    return out


def _weights_digest(module) -> str:
    """A hash of a module's weights (what a fine-tuning run starts from)."""
    import hashlib

    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()


def _fingerprint(arch: str, texts: Sequence[str], labels: Sequence[int], cfg: TrainConfig,
                 init: str | None = None) -> str:
    """A hash of what a resumable training run depends on (architecture, data, hyper-parameters,
    the weights it starts from when fine-tuning)."""
    import hashlib

    h = hashlib.sha256(json.dumps([arch, asdict(cfg)] + ([init] if init else []), sort_keys=True, default=str).encode())
    for t, y in zip(texts, labels):
        h.update(f"{y}\t{t}\n".encode())
    return h.hexdigest()


def fit(arch: str, texts: Sequence[str], labels: Sequence[int], *, num_classes: int | None = None,
        config: TrainConfig | None = None, extra_words: Sequence[str] = (), progress: bool = True,
        device: str | None = None, on_eval: Callable[[dict], None] | None = None,
        objective: Callable | None = None, select: Callable | None = None,
        on_tokenizer: Callable | None = None, state_path: str | Path | None = None,
        init: tuple[Any, Any] | None = None) -> TrainResult:
    """Train a fresh ``arch`` model on ``(texts, labels)`` and return it with its history.

    A ``config.holdout`` share of the data is held out for early stopping (best held-out score
    wins; training stops after ``patience`` evaluations without improvement).
    ``objective(module, batch, y, progress) -> loss`` replaces the cross-entropy (``progress`` ∈
    [0, 1) is the share of training done; certified training uses it); ``select(module, tokenizer,
    texts, labels) -> score`` replaces held-out accuracy as the early-stopping score;
    ``on_tokenizer(tokenizer)`` is called once the vocabulary is built.
    ``state_path``: after every epoch the full training state (weights, optimisers, RNGs, best
    checkpoint, history) is written there; a later call with the same data and config resumes after
    the last finished epoch (a killed run loses at most one epoch). The caller deletes it when done.
    ``init``: ``(module, tokenizer)`` of a trained model to go on training (fine-tuning: its weights,
    vocabulary and tokenizer are kept; ``arch`` ``"minilm"`` or ``"hf"`` for a HuggingFace classifier).
    """
    import torch

    C = _check_inputs(arch, init, texts, labels, num_classes)
    hf = arch in ("minilm", "hf")
    # a sentence pair trains as the model will read it: word models see ``first [SEP] second``; minilm
    # gets its tokenizer's pair encoding from the tuple itself
    flat = [t if isinstance(t, str) else f"{t[0]} {PAIR_SEP} {t[1]}" for t in texts]
    cfg = config or TrainConfig(arch=arch, **DEFAULTS[arch])
    labels_arr = np.asarray(labels, dtype=np.int64)
    rng = np.random.default_rng(cfg.seed)
    torch.manual_seed(cfg.seed)
    dev = pick_device(device)
    tr, ho = _split(len(texts), cfg.holdout, rng)
    module, tokenizer, encode, lengths = _model_to_train(arch, cfg, C, init, flat, tr, extra_words)
    if on_tokenizer is not None:
        on_tokenizer(tokenizer)
    module.to(dev)
    steps_per_epoch = math.ceil(len(tr) / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    optim = _Optimisers(module, cfg, hf, total, clip=hf or arch == "transformer")
    evaluate = _holdout_score(module, encode, dev, C, [texts[i] for i in ho], labels_arr[ho], select)
    eval_every = max(1, steps_per_epoch // max(1, cfg.evals_per_epoch))
    fingerprint = _fingerprint(arch, flat, labels, cfg, None if init is None else _weights_digest(module))
    run = _Progress(cfg, Resumable(state_path, fingerprint, rng=rng, optimisers=optim.all))
    if run.resume(module):
        notices.notice(f"resuming training of {arch} after epoch {run.epoch} ({state_path})")
    bar = progress_bar(total=total, initial=run.step, desc=f"train {arch}", unit="batch", enabled=progress,
                       training=True)
    module.train()
    for epoch in range(run.epoch, cfg.epochs):
        batches = _batches(lengths[tr], cfg.batch_size, rng)
        for b, batch in enumerate(batches):
            idx = tr[batch]
            enc = {k: v.to(dev) for k, v in dict(encode([texts[i] for i in idx])).items()}
            loss = optim.step(module, enc, torch.from_numpy(labels_arr[idx]).to(dev), objective, run.step / total)
            run.step += 1
            bar.update(1)
            if run.step % 20 == 0:
                bar.set_postfix(loss=f"{loss.item():.3f}", **({"best": f"{run.score:.3f}"} if run.score >= 0 else {}))
            if (run.step % eval_every == 0 or b == len(batches) - 1) and \
                    run.evaluated(evaluate(), float(loss.item()), steps_per_epoch, module, on_eval):
                break
        if run.stopped:
            break
        run.save(module, epoch + 1)
    bar.close()
    return run.result(TrainResult(module, tokenizer, cfg), module)


def _check_inputs(arch: str, init: tuple[Any, Any] | None, texts: Sequence, labels: Sequence[int],
                  num_classes: int | None) -> int:
    """The one-line errors of :func:`fit`'s inputs; returns the number of classes C."""
    if arch not in ARCHS and not (init is not None and arch == "hf"):
        raise TextAuditError(f"unknown architecture '{arch}'; use one of {', '.join(ARCHS)}")
    if len(texts) != len(labels) or len(texts) == 0:
        raise TextAuditError("training needs the same, non-zero number of texts and labels")
    C = int(num_classes or np.asarray(labels, dtype=np.int64).max() + 1)
    if C < 2:
        raise TextAuditError("training data has a single class; need at least two labels")
    return C


def _model_to_train(arch: str, cfg: TrainConfig, C: int, init: tuple[Any, Any] | None, flat: list[str],
                    tr: np.ndarray, extra_words: Sequence[str]) -> tuple[Any, Any, Callable, np.ndarray]:
    """``(module, tokenizer, encode, lengths)`` of what ``fit`` trains: ``init``'s model, a fresh MiniLM with a
    ``C``-class head, or a fresh word model over a vocabulary of the training split (the lengths order the
    batches: characters for a subword model, words for a word model)."""
    hf = arch in ("minilm", "hf")
    if init is not None:
        module, tokenizer = init
        encode = hf_tokenize(tokenizer, max_length=cfg.max_len) if hf else tokenizer
        return module, tokenizer, encode, np.array([len(t) if hf else len(t.split()) for t in flat])
    if arch == "minilm":
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        root = resolve("minilm")
        tokenizer = AutoTokenizer.from_pretrained(root, trust_remote_code=False)
        # trained in fp32 even from half-precision weights (fp16 training overflows to NaN)
        module = AutoModelForSequenceClassification.from_pretrained(root, num_labels=C, trust_remote_code=False).float()
        return module, tokenizer, hf_tokenize(tokenizer, max_length=cfg.max_len), np.array([len(t) for t in flat])
    import torch

    from textaudit.models.zoo.architectures import build_module
    vocab, emb = build_vocab([flat[i] for i in tr], extra_words=extra_words, seed=cfg.seed)
    tokenizer = WordTokenizer(vocab, max_len=cfg.max_len)
    module = build_module(arch, torch.from_numpy(emb), C, tune_embeddings=cfg.tune_embeddings, **cfg.arch_options)
    return module, tokenizer, tokenizer, np.array([len(t.split()) for t in flat])


class _Optimisers:
    """AdamW over the dense parameters, SparseAdam over fine-tuned GloVe rows (sparse gradients: it updates only
    the rows a batch used), and the learning-rate schedule (subword models: 6% warm-up, then linear decay)."""

    def __init__(self, module, cfg: TrainConfig, hf: bool, total: int, *, clip: bool):
        import torch

        sparse = [p for n, p in module.named_parameters() if p.requires_grad and n == "embed.weight"]
        self.params = [p for n, p in module.named_parameters() if p.requires_grad and n != "embed.weight"]
        self.opt = torch.optim.AdamW(self.params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.sparse = torch.optim.SparseAdam(sparse, lr=cfg.lr) if sparse else None
        warmup = int(0.06 * total) if hf else 0
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda s: min(1.0, (s + 1) / warmup) if s < warmup else max(0.0, (total - s) / max(1, total - warmup))
            if hf else 1.0)
        self.clip = cfg.clip_grad if cfg.clip_grad is not None else (1.0 if clip else None)
        self.loss_fn = torch.nn.CrossEntropyLoss()

    @property
    def all(self) -> list:
        """What a resumed run restores, in order."""
        return [self.opt, self.sparse, self.sched]

    def step(self, module, enc: dict, y, objective: Callable | None, done: float):
        """One batch: the loss (cross-entropy, or ``objective(module, enc, y, done)``), its gradients (clipped
        to norm ``clip_grad``, by default 1 for subword models and the transformer), one step of each optimiser and of the schedule."""
        import torch

        if objective is not None:
            loss = objective(module, enc, y, done)
        else:
            out = module(**enc)
            loss = self.loss_fn(getattr(out, "logits", out), y)
        self.opt.zero_grad(set_to_none=True)
        if self.sparse is not None:
            self.sparse.zero_grad(set_to_none=True)
        loss.backward()
        if self.clip:
            torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        self.opt.step()
        if self.sparse is not None:
            self.sparse.step()
        self.sched.step()
        return loss


def _holdout_score(module, encode, dev: str, C: int, texts: list, labels: np.ndarray,
                   select: Callable | None) -> Callable[[], float]:
    """The early-stopping score on the held-out slice of the training data: ``select(module, encode, texts,
    labels)``, else accuracy; NaN without a held-out slice."""

    def evaluate() -> float:
        if len(texts) == 0:
            return float("nan")
        if select is not None:
            score = float(select(module, encode, texts, labels))
        else:
            clf = BatchedClassifier(TorchForward(module, encode, dev), output="logits", num_classes=C, batch_size=256,
                                    cache_size=0)
            score = accuracy(clf, texts, labels)
        module.train()
        return score

    return evaluate


class _Progress:
    """Where a :func:`fit` run is — its epoch and step, the history of its evaluations, its clock — and the best
    held-out score so far with its weights: ``patience`` evaluations without improvement stop the run
    (``select_best`` False: every evaluation counts as the best, the last weights are kept). Saved after every
    epoch in ``state`` (:class:`~textaudit.train_state.Resumable`) and resumed from it."""

    KEYS = ("module", "epoch", "step", "best", "best_state", "bad", "history", "seconds")

    def __init__(self, cfg: TrainConfig, state: Resumable):
        self.cfg, self.state = cfg, state
        self.epoch, self.step, self.history, self.t0 = 0, 0, [], time.perf_counter()
        self.score, self.best_state, self.bad, self.stopped = -1.0, None, 0, False

    def resume(self, module) -> bool:
        """Go on from the saved state, if there is one of this run (True)."""
        saved = self.state.restore(self.KEYS)
        if saved is None:
            return False
        module.load_state_dict(saved["module"])
        self.epoch, self.step, self.history = saved["epoch"], saved["step"], saved["history"]
        self.t0 -= saved["seconds"]
        self.score, self.best_state, self.bad = saved["best"], saved["best_state"], saved["bad"]
        return True

    def evaluated(self, score: float, loss: float, steps_per_epoch: int, module, on_eval: Callable | None) -> bool:
        """Record an evaluation and keep the weights when they are the best; True when training should stop."""
        rec = {"epoch": round(self.step / steps_per_epoch, 2), "step": self.step, "holdout_accuracy": score,
               "loss": loss, "seconds": round(time.perf_counter() - self.t0, 1)}
        self.history.append(rec)
        if on_eval:
            on_eval(rec)
        if score > self.score or math.isnan(score) or not self.cfg.select_best:
            self.score, self.bad = score, 0
            self.best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
            return False
        self.bad += 1
        self.stopped = self.bad >= self.cfg.patience
        return self.stopped

    def save(self, module, epoch: int) -> None:
        self.state.save(module=module.state_dict(), epoch=epoch, step=self.step, best=self.score,
                        best_state=self.best_state, bad=self.bad, history=self.history,
                        seconds=time.perf_counter() - self.t0)

    def result(self, result: TrainResult, module) -> TrainResult:
        """The best weights (or the last) into ``module``, which is left in eval mode; the history and times."""
        if self.best_state is not None:
            module.load_state_dict(self.best_state)
        module.eval()
        result.history = self.history
        result.best_holdout_accuracy = self.score
        result.train_seconds = time.perf_counter() - self.t0
        return result


def fit_classifier(arch: str, texts: Sequence[str], labels: Sequence[int], **kwargs) -> BatchedClassifier:
    """Train ``arch`` on ``(texts, labels)`` and return it as a :class:`BatchedClassifier` (the
    scikit-learn-style ``fit(texts, labels) -> Classifier`` factory the estimators use)."""
    res = fit(arch, texts, labels, **kwargs)
    encode = batch_encoder(arch, res.tokenizer, res.config.max_len)
    C = int(getattr(res.module, "num_classes", None) or res.module.config.num_labels)

    return torch_classifier(res.module, encode, name=arch, device=kwargs.get("device"), num_classes=C,
                            ids=id_encoder(arch, res.tokenizer, res.config.max_len))


def save_result(res: TrainResult, path: Path, extra: dict[str, Any]) -> Path:
    """Write a trained result as a checkpoint (see :mod:`textaudit.models.zoo.checkpoint`)."""
    module = res.module.to("cpu")
    C = int(getattr(module, "num_classes", None) or module.config.num_labels)
    cfg = {"arch": res.config.arch, "num_classes": C, "max_len": res.config.max_len, "train": res.config.to_dict(),
           "best_holdout_accuracy": res.best_holdout_accuracy, "train_seconds": round(res.train_seconds, 1),
           "history": res.history, **extra}
    return save_checkpoint(path, module, res.tokenizer, cfg)
