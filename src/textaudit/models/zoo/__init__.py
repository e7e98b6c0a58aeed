"""The model zoo: the paper's sentiment model families, trained here on SST-2 train.

Names registered with :func:`textaudit.models.load_classifier`: ``bow``, ``cnn``, ``lstm``,
``transformer``, ``minilm`` and each with ``-gender-swap`` (trained with gender-swap
augmentation). A name with no checkpoint in the cache (``$TEXTAUDIT_CACHE/models/<name>``) is
trained first, with a notice on stderr.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from textaudit.errors import TextAuditError
from textaudit.models.batched import BatchedClassifier
from textaudit.models.registry import register_model
from textaudit.models.zoo.checkpoint import load_checkpoint, load_module, read_config
from textaudit.models.zoo.train import ARCHS, DEFAULTS, TrainConfig, accuracy, fit, fit_classifier
from textaudit.resources import cache_dir

__all__ = ["ARCHS", "AUGMENTATIONS", "train_model", "load_zoo_model", "checkpoint_dir", "load_checkpoint",
           "load_module", "fit", "fit_classifier", "accuracy", "parse_name"]

AUGMENTATIONS = ("gender-swap",)


ROBUST = ("ibp",)


def split_robust(name: str) -> tuple[str, str | None]:
    """Split ``cnn-ibp`` into ``("cnn", "ibp")`` (certified-robust training, :mod:`textaudit.models.robust`)."""
    for r in ROBUST:
        if name.endswith("-" + r):
            return name[: -len(r) - 1], r
    return name, None


def parse_name(name: str) -> tuple[str, str | None]:
    """Split a zoo name such as ``lstm-gender-swap`` into ``("lstm", "gender-swap")`` (a ``-ibp``
    suffix is ignored here; see :func:`split_robust`)."""
    name = split_robust(name)[0]
    for aug in AUGMENTATIONS:
        if name.endswith("-" + aug):
            return name[: -len(aug) - 1], aug
    return name, None


def checkpoint_dir(name: str) -> Path:
    """Return the cache directory of zoo model ``name``."""
    return cache_dir() / "models" / name


def _counterfitted_words() -> list[str]:
    from textaudit.resources import locate

    res = locate("counterfitted-neighbors")
    if not res.found:
        return []
    nbrs = json.loads(res.path.read_text())
    return list(dict.fromkeys([w for k, v in nbrs.items() for w in [k, *v]]))


def train_model(name: str, *, data: str = "sst2", epochs: int | None = None, seed: int = 0,
                augment: str | None = None, out: str | Path | None = None, max_train: int | None = None,
                progress: bool = True, device: str | None = None, eval_data: str | None = None,
                robust: str | None = None) -> dict[str, Any]:
    """Train zoo model ``name`` on ``data``'s train split, save it, and return a summary dict:
    ``model, dev_accuracy, path, train_seconds, n_train, holdout_accuracy``.

    Early stopping uses a held-out 2% of the training data. ``eval_data`` (default: the corpus's
    dev split, e.g. ``sst2:dev``; none for a local file) is only *reported* as ``dev_accuracy``.
    """
    from textaudit.data import CORPORA, load_dataset

    arch, aug_in_name = parse_name(name)
    robust = robust or split_robust(name)[1]
    if arch not in ARCHS:
        raise TextAuditError(f"unknown zoo model '{name}'; use one of {', '.join(ARCHS)}")
    augment = augment or aug_in_name
    if augment is not None and augment not in AUGMENTATIONS:
        raise TextAuditError(f"unknown augmentation '{augment}'; use one of {', '.join(AUGMENTATIONS)}")
    if robust is not None and robust not in ROBUST:
        raise TextAuditError(f"unknown robust training '{robust}'; use one of {', '.join(ROBUST)}")
    from textaudit.models.robust import ROBUST_ARCHS

    if robust is not None and arch not in ROBUST_ARCHS:
        raise TextAuditError(f"certified (IBP) training supports {', '.join(ROBUST_ARCHS)}, not {arch}")
    full_name = arch + (f"-{augment}" if augment else "") + (f"-{robust}" if robust else "")
    train = load_dataset(data, default_split="train")
    texts, labels = list(train["text"]), list(train["label"])
    if max_train is not None:
        texts, labels = texts[:max_train], labels[:max_train]
    if augment == "gender-swap":
        from textaudit.perturbations.gender import gender_swap

        swapped = [(s, y) for t, y in zip(texts, labels) if (s := gender_swap(t)) != " ".join(t.split()).lower()]
        texts += [s for s, _ in swapped]
        labels += [y for _, y in swapped]
    cfg = TrainConfig(arch=arch, seed=seed, **(IBP_DEFAULTS[arch] if robust else DEFAULTS[arch]))
    if epochs is not None:
        if epochs < 1:
            raise TextAuditError(f"--epochs must be at least 1 (got {epochs})")
        cfg.epochs = epochs
    extra = _counterfitted_words() if arch != "minilm" else []
    hooks = _ibp_hooks() if robust == "ibp" else {}
    path = Path(out) if out else checkpoint_dir(full_name)
    state = path.parent / f".{path.name}.train-state.pt"  # resumable: a killed run continues here
    res = fit(arch, texts, labels, config=cfg, extra_words=extra, progress=progress, device=device,
              state_path=state, **hooks)
    from textaudit.models.torch_backend import torch_classifier
    from textaudit.models.zoo.train import batch_encoder

    encode = batch_encoder(arch, res.tokenizer, cfg.max_len)
    clf = torch_classifier(res.module, encode, name=full_name, device=device)
    corpus = data.split(":")[0].lower()
    if eval_data is None and corpus in CORPORA:
        eval_data = f"{corpus}:dev"
    dev_acc = None
    if eval_data is not None:
        dev_ds = load_dataset(eval_data, default_split="dev")
        dev_acc = round(accuracy(clf, dev_ds["text"], dev_ds["label"]), 4)
    from textaudit.models.zoo.train import save_result

    save_result(res, path, {"name": full_name, "data": data, "augment": augment, "robust": robust, "n_train": len(texts),
                            "eval_data": eval_data, "dev_accuracy": dev_acc,
                            "labels": [str(i) for i in range(clf.num_classes)],
                            "created": time.strftime("%Y-%m-%dT%H:%M:%S")})
    state.unlink(missing_ok=True)
    return {"model": full_name, "dev_accuracy": dev_acc, "eval_data": eval_data, "path": str(path),
            "train_seconds": round(res.train_seconds, 1), "n_train": len(texts),
            "holdout_accuracy": round(res.best_holdout_accuracy, 4)}


#: certified training (IBP), GloVe fine-tuned; ``kappa`` = final weight of the worst-case loss,
#: ``warmup`` = clean-only share of training, ``ramp`` = share over which ε and κ rise linearly
#: (Jia et al. 2019's schedule); ``min_clean`` guards model selection (see :func:`_ibp_hooks`).
#: Chosen on the held-out slice of SST-2 *train* (``benchmarks/train_times.md``), never on dev.
IBP_DEFAULTS: dict[str, dict[str, Any]] = {
    "bow": dict(epochs=10, lr=1e-3, patience=10, tune_embeddings=True),
    "cnn": dict(epochs=10, lr=1e-3, patience=10, tune_embeddings=True),
}
IBP_SCHEDULE: dict[str, Any] = dict(kappa=0.5, warmup=0.1, ramp=0.5, min_clean=0.75)


def _ibp_hooks(kappa: float = IBP_SCHEDULE["kappa"], warmup: float = IBP_SCHEDULE["warmup"],
               ramp: float = IBP_SCHEDULE["ramp"], min_clean: float = IBP_SCHEDULE["min_clean"]) -> dict[str, Any]:
    """``objective`` (IBP loss) and ``select`` for :func:`fit`; the substitution table is built from
    the model's vocabulary on first use.

    Selection: held-out *certified* accuracy, but only among checkpoints whose held-out clean
    accuracy is ≥ ``min_clean`` (others score clean − 1, below any admissible one). Without that
    guard the constant majority-class predictor wins: it is certified on every majority example.
    """
    from textaudit.models.robust import certify, ibp_loss, substitution_table

    state: dict[str, Any] = {}

    def table_for(tokenizer):
        if state.get("vocab") is not tokenizer.vocab:
            state["vocab"], state["table"] = tokenizer.vocab, substitution_table(tokenizer.vocab)
        return state["table"]

    def objective(module, batch, y, progress):
        if "table" not in state:
            raise TextAuditError("IBP training needs the substitution table before the first batch")
        return ibp_loss(module, batch["input_ids"], y, state["table"], progress=progress, kappa=kappa,
                        warmup=warmup, ramp=ramp)

    def select(module, tokenizer, texts, labels):
        table = table_for(tokenizer)
        r = certify(module, tokenizer, table, texts, labels, device=str(next(module.parameters()).device))
        return r["certified_accuracy"] if r["accuracy"] >= min_clean else r["accuracy"] - 1.0

    def on_tokenizer(tokenizer):
        table_for(tokenizer)

    return {"objective": objective, "select": select, "on_tokenizer": on_tokenizer}


def load_zoo_model(name: str, *, train_if_missing: bool = True, device: str | None = None,
                   batch_size: int | None = None, **_: Any) -> BatchedClassifier:
    """Return zoo model ``name`` from the cache, training it first (with a notice) if it is missing."""
    path = checkpoint_dir(name)
    if not (path / "textaudit.json").is_file():
        if not train_if_missing:
            raise TextAuditError(f"no checkpoint for '{name}' in {path.parent}; run: audit train --model {name}")
        arch, _ = parse_name(name)
        print(f"notice: no checkpoint for '{name}' in {path.parent}; training it now on SST-2 train "
              f"({'about 20 minutes' if arch == 'minilm' else 'a few minutes'} on a 2-core CPU)", file=sys.stderr)
        train_model(name)
    return load_checkpoint(path, device=device, batch_size=batch_size, name=name)


for _arch in ARCHS:
    for _name in (_arch, *(f"{_arch}-{a}" for a in AUGMENTATIONS)):
        register_model(_name, lambda _n=_name, **kw: load_zoo_model(_n, **kw))
for _arch in ("bow", "cnn"):
    register_model(f"{_arch}-ibp", lambda _n=f"{_arch}-ibp", **kw: load_zoo_model(_n, **kw))
