"""Training a zoo model on its name's recipe, and loading it (trained first when missing)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import textaudit.notices as notices
from textaudit.data import CORPORA, CORPUS_LABELS, align_labels, as_pairs, label_names, load_dataset, pairs_of
from textaudit.errors import TextAuditError
from textaudit.files import check_folder, lock_or_fail, wait_for_lock
from textaudit.models.batched import BatchedClassifier
from textaudit.models.torch_backend import torch_classifier
from textaudit.models.zoo.checkpoint import CONFIG, id_encoder, load_checkpoint
from textaudit.models.zoo.names import (
    ARCHS,
    AUGMENTATIONS,
    JIA_ARCHS,
    ROBUST,
    ROBUST_ARCHS,
    checkpoint_dir,
    parse_name,
    split_robust,
)
from textaudit.models.zoo.train import DEFAULTS, TrainConfig, accuracy, batch_encoder, fit, save_result
from textaudit.perturbations.gender import gender_swap
from textaudit.resources import locate

__all__ = ["train_model", "load_zoo_model"]


def _counterfitted_words() -> list[str]:
    res = locate("counterfitted-neighbors")
    if not res.found:
        return []
    nbrs = json.loads(res.path.read_text())
    return list(dict.fromkeys([w for k, v in nbrs.items() for w in [k, *v]]))


def train_model(name: str, *, data: str = "sst2", epochs: int | None = None, seed: int = 0,
                augment: str | None = None, out: str | Path | None = None, max_train: int | None = None,
                progress: bool = True, device: str | None = None, eval_data: str | None = None,
                robust: str | None = None, if_missing: bool = False, announce: bool = False,
                text_column: str | None = None, label_column: str | None = None,
                pair_column: str | None = None) -> dict[str, Any]:
    """Train zoo model ``name`` on ``data``'s train split, save it, and return a summary dict:
    ``model, dev_accuracy, path, train_seconds, n_train, holdout_accuracy``.

    Early stopping uses a held-out 2% of the training data. ``eval_data`` (default: the corpus's
    dev split, e.g. ``sst2:dev``; none for a local file) is only *reported* as ``dev_accuracy``.
    ``text_column``/``label_column``/``pair_column`` name the columns of a data file (both files);
    class names become the checkpoint's classes (``labels``), so data labelled with names maps onto
    them wherever the model is used (:func:`~textaudit.data.align_labels`).

    One process at a time trains into one checkpoint directory: with ``if_missing`` (a zoo model
    trained on first use) a second process waits for the first and then uses its checkpoint;
    otherwise it gets a one-line error. ``announce``: say on stderr what is trained, once the
    inputs are known to be good.
    """
    arch, aug_in_name = parse_name(name)
    robust = robust or split_robust(name)[1]
    if arch not in ARCHS:
        raise TextAuditError(f"unknown zoo model '{name}'; use one of {', '.join(ARCHS)}")
    augment = augment or aug_in_name
    if augment is not None and augment not in AUGMENTATIONS:
        raise TextAuditError(f"unknown augmentation '{augment}'; use one of {', '.join(AUGMENTATIONS)}")
    if robust is not None and robust not in ROBUST:
        raise TextAuditError(f"unknown robust training '{robust}'; use one of {', '.join(ROBUST)}")
    if robust is not None and arch not in ROBUST_ARCHS:
        raise TextAuditError(f"certified (IBP) training supports {', '.join(ROBUST_ARCHS)}, not {arch}")
    if robust == "ibp-jia" and arch not in JIA_ARCHS:
        raise TextAuditError(f"Jia et al.'s certified training (ibp-jia) is built for {', '.join(JIA_ARCHS)}, not {arch}; "
                             f"use --robust ibp")
    full_name = arch + (f"-{augment}" if augment else "") + (f"-{robust}" if robust else "")
    if epochs is not None and epochs < 1:
        raise TextAuditError(f"--epochs must be at least 1 (got {epochs})")
    path = Path(out) if out else checkpoint_dir(full_name)
    check_folder(path, CONFIG, "give --out a new folder")  # before the training, not after it
    if path.exists() and not path.is_dir():
        raise TextAuditError(f"--out {path} is a file; give a directory for the checkpoint")
    if if_missing:
        lock = wait_for_lock(path, f"another process is training '{full_name}' into {path}; waiting for it")
    else:
        lock = lock_or_fail(path, f"another process is training into {path} (lock .{path.name}.lock next to it); "
                                  "wait for it to finish or choose another --out")
    with lock:
        if if_missing and (path / "textaudit.json").is_file():
            return {"model": full_name, "path": str(path), "trained_by_another_process": True}
        return _train(full_name, arch, path, data=data, epochs=epochs, seed=seed, augment=augment, max_train=max_train,
                      progress=progress, device=device, eval_data=eval_data, robust=robust, announce=announce,
                      columns={"text_column": text_column, "label_column": label_column, "pair_column": pair_column})


def _train(full_name: str, arch: str, path: Path, *, data: str, epochs: int | None, seed: int, augment: str | None,
           max_train: int | None, progress: bool, device: str | None, eval_data: str | None,
           robust: str | None, announce: bool, columns: dict[str, str | None] | None = None) -> dict[str, Any]:
    columns = columns or {}
    train = load_dataset(data, default_split="train", **columns)
    names = label_names(train) or CORPUS_LABELS.get(data.split(":")[0].lower())  # SST-2's classes have names
    texts, labels = as_pairs(train["text"], pairs_of(train)), list(train["label"])
    if columns.get("pair_column") and (augment or robust):
        raise TextAuditError("--augment and --robust train on single texts; drop them for sentence-pair data")
    if max_train is not None:
        texts, labels = texts[:max_train], labels[:max_train]
    if len(set(labels)) < 2:
        raise TextAuditError(f"the training data ({data}) has a single class ({labels[0] if labels else 'none'}); a classifier "
                             "needs examples of at least two classes")
    if announce:
        notices.say(f"training {full_name} on {data} (train split; dev is only reported) ...")
    if augment == "gender-swap":
        swapped = [(s, y) for t, y in zip(texts, labels) if (s := gender_swap(t)) != " ".join(t.split()).lower()]
        texts += [s for s, _ in swapped]
        labels += [y for _, y in swapped]
    if robust in ROBUST:
        from textaudit.models.zoo.ibp import IBP_RECIPES, ibp_hooks  # torch at import: only for certified training

        table, schedule = IBP_RECIPES[robust]
        defaults, hooks = table[arch], ibp_hooks(**schedule)
    else:
        defaults, hooks = DEFAULTS[arch], {}
    cfg = TrainConfig(arch=arch, seed=seed, **defaults)
    if epochs is not None:
        cfg.epochs = epochs
    extra = _counterfitted_words() if arch != "minilm" else []
    state = path.parent / f".{path.name}.train-state.pt"  # resumable: a killed run continues here
    res = fit(arch, texts, labels, config=cfg, extra_words=extra, progress=progress, device=device,
              state_path=state, num_classes=len(names) if names else None, **hooks)
    encode = batch_encoder(arch, res.tokenizer, cfg.max_len)
    clf = torch_classifier(res.module, encode, name=full_name, device=device, labels=names,
                           ids=id_encoder(arch, res.tokenizer, cfg.max_len))
    corpus = data.split(":")[0].lower()
    if eval_data is None and corpus in CORPORA:
        eval_data = f"{corpus}:dev"
    dev_acc = None
    if eval_data is not None:
        dev_ds, _ = align_labels(load_dataset(eval_data, default_split="dev", **columns), clf)
        dev_acc = round(accuracy(clf, as_pairs(dev_ds["text"], pairs_of(dev_ds)), dev_ds["label"]), 4)
    save_result(res, path, {"name": full_name, "data": data, "augment": augment, "robust": robust, "n_train": len(texts),
                            "eval_data": eval_data, "dev_accuracy": dev_acc,
                            "labels": names or [str(i) for i in range(clf.num_classes)],
                            "columns": {k: v for k, v in columns.items() if v},
                            "created": time.strftime("%Y-%m-%dT%H:%M:%S")})
    state.unlink(missing_ok=True)
    return {"model": full_name, "dev_accuracy": dev_acc, "eval_data": eval_data, "path": str(path),
            "train_seconds": round(res.train_seconds, 1), "n_train": len(texts),
            "holdout_accuracy": round(res.best_holdout_accuracy, 4)}


def load_zoo_model(name: str, *, train_if_missing: bool = True, device: str | None = None,
                   batch_size: int | None = None) -> BatchedClassifier:
    """Return zoo model ``name`` from the cache, training it first (with a notice) if it is missing."""
    path = checkpoint_dir(name)
    if not (path / "textaudit.json").is_file():
        if not train_if_missing:
            raise TextAuditError(f"no checkpoint for '{name}' in {path.parent}; run: audit train --model {name}")
        arch, _ = parse_name(name)
        notices.notice(f"no checkpoint for '{name}' in {path.parent}; training it now on SST-2 train, once (minutes on a "
                       f"2-core CPU{', about 20 idle' if arch == 'minilm' else ''}, three times as long on a busy one: the "
                       "progress line gives the time left once its first steps are timed; audit train --model "
                       f"{name} does it ahead)")
        train_model(name, if_missing=True)
    return load_checkpoint(path, device=device, batch_size=batch_size, name=name)


