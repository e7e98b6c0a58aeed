"""The model ``audit harden`` trains: its torch module and tokenizer, loaded from a ``--model`` spec.

Only models whose weights are ours to train can be hardened: the zoo's (a name or a checkpoint
directory) and HuggingFace sequence classifiers (``hf:<dir-or-id>`` or a directory with
``config.json``). Plug-ins, ``llm:`` prompts and ``http(s)://`` endpoints are refused in one line
before anything loads (:func:`check_trainable`).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textaudit.errors import TextAuditError
from textaudit.files import atomic_path, check_folder, fingerprint_dir
from textaudit.models.batched import BatchedClassifier
from textaudit.models.hf import hf_labels, load_hf_module
from textaudit.models.registry import MODEL_FACTORIES
from textaudit.models.torch_backend import hf_tokenize, torch_classifier
from textaudit.models.zoo.build import train_model
from textaudit.models.zoo.checkpoint import id_encoder, load_module, save_checkpoint
from textaudit.models.zoo.names import ZOO_MODELS, checkpoint_dir
from textaudit.secrets import redact_obj
from textaudit.token_ids import piece_ids

__all__ = ["Trainable", "check_trainable", "load_trainable"]

_WHY = "audit harden trains zoo models (bow, cnn, lstm, transformer, minilm, a checkpoint directory) and hf: " \
       "sequence classifiers"


def check_trainable(spec: str) -> None:
    """One-line error for a ``--model`` harden cannot train (cheap: nothing loads)."""
    spec = str(spec).strip()
    kind = ("an HTTP endpoint" if spec.startswith(("http://", "https://")) else
            "a prompted causal LM" if spec.startswith("llm:") else
            "a plug-in" if ".py:" in spec else
            "a registered factory" if spec in MODEL_FACTORIES else None)
    if kind is not None:
        raise TextAuditError(f"{_WHY}; '{spec}' is {kind}, whose weights textaudit cannot train: harden it where it "
                             "was trained, then audit the result with --model")

    if not spec.startswith("hf:") and spec not in ZOO_MODELS and not Path(spec).expanduser().is_dir():
        raise TextAuditError(f"unknown model '{spec}'; {_WHY}")


@dataclass
class Trainable:
    """A model harden can train: ``arch`` (a zoo architecture, or ``"hf"``), its torch ``module``
    and ``tokenizer``, ``config`` (a zoo checkpoint's settings; empty for ``hf``) and ``labels``."""

    spec: str
    arch: str
    module: Any
    tokenizer: Any
    max_len: int
    labels: list[str] | None = None
    config: dict = field(default_factory=dict)
    fingerprint: Any = None  # of the files it was loaded from (results headers record it); None once trained

    @property
    def num_classes(self) -> int:
        return int(getattr(self.module, "num_classes", None) or self.module.config.num_labels)

    @property
    def multilabel(self) -> bool:
        """An hf: model saved with ``problem_type = "multi_label_classification"`` (one sigmoid per label)."""
        return self.arch == "hf" and getattr(self.module.config, "problem_type", None) == "multi_label_classification"

    def copy(self) -> "Trainable":
        """An independent copy (training it leaves this one as it was)."""
        return Trainable(self.spec, self.arch, copy.deepcopy(self.module).cpu(), self.tokenizer, self.max_len,
                         self.labels, dict(self.config), None)

    def encoder(self):
        """texts → the module's input tensors (a HuggingFace tokenizer's, or the zoo's own)."""
        return hf_tokenize(self.tokenizer, max_length=self.max_len) if self.arch in ("hf", "minilm") else self.tokenizer

    def classifier(self, name: str, device: str | None = None) -> BatchedClassifier:
        """A fresh classifier over the module's current weights (its own, empty cache)."""
        encode = self.encoder()
        ids = piece_ids(self.tokenizer, self.max_len) if self.arch == "hf" else id_encoder(self.arch, self.tokenizer,
                                                                                         self.max_len)
        clf = torch_classifier(self.module, encode, name=name, device=device, num_classes=self.num_classes,
                               labels=self.labels, ids=ids)
        clf.fingerprint = self.fingerprint
        clf.multilabel = self.multilabel
        return clf

    def save(self, path: Path, info: dict[str, Any]) -> Path:
        """Write the model where ``--model path`` loads it: a zoo checkpoint, or a HuggingFace
        directory for ``hf`` models; ``info`` (how it was hardened) goes with it."""
        path = Path(path)
        module = self.module.to("cpu")
        if self.arch == "hf":
            check_folder(path, "textaudit-harden.json", "give the hardened model a new folder")
            path.mkdir(parents=True, exist_ok=True)
            module.save_pretrained(path)
            self.tokenizer.save_pretrained(path)
            with atomic_path(path / "textaudit-harden.json") as tmp:
                tmp.write_text(json.dumps(redact_obj(info), indent=1))
            return path
        # what the original's training measured does not describe the hardened model
        stale = ("dev_accuracy", "history", "best_holdout_accuracy", "train_seconds", "created")
        cfg = {**{k: v for k, v in self.config.items() if k not in stale}, "name": info["name"], "hardened": info}
        cfg.setdefault("arch", self.arch)
        cfg.setdefault("num_classes", self.num_classes)
        cfg.setdefault("max_len", self.max_len)
        return save_checkpoint(path, module, self.tokenizer, cfg)


def load_trainable(spec: str) -> Trainable:
    """The :class:`Trainable` of ``spec`` (a zoo model is trained first when it is missing)."""
    check_trainable(spec)
    spec = str(spec).strip()
    if spec.startswith("hf:") or (Path(spec).expanduser().is_dir() and (Path(spec).expanduser() / "config.json").is_file()
                                  and not (Path(spec).expanduser() / "textaudit.json").is_file()):
        name = spec[3:] if spec.startswith("hf:") else spec
        module, tok = load_hf_module(name)
        labels = hf_labels(module)
        max_len = min(512, int(getattr(tok, "model_max_length", 512) or 512))
        local = Path(name).expanduser()
        fp = (lambda: fingerprint_dir(local)) if local.is_dir() else getattr(module.config, "_commit_hash", None)
        return Trainable(spec, "hf", module, tok, max_len, labels, fingerprint=fp)
    if spec in ZOO_MODELS:
        path = checkpoint_dir(spec)
        if not (path / "textaudit.json").is_file():
            train_model(spec, if_missing=True, announce=True)
    else:
        path = Path(spec).expanduser()
        if not path.is_dir():
            raise TextAuditError(f"unknown model '{spec}'; {_WHY}")
    module, tok, cfg = load_module(path)
    return Trainable(spec, cfg["arch"], module, tok, int(cfg.get("max_len", 128)), cfg.get("labels"), cfg,
                     fingerprint=lambda: fingerprint_dir(path))
