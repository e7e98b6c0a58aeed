"""Zoo checkpoints: a directory with ``textaudit.json`` (config), weights (safetensors) and vocabulary.

Word models (bow/cnn/lstm/transformer): ``model.safetensors`` + ``vocab.txt``.
MiniLM: ``hf/`` (HuggingFace ``save_pretrained`` of model and tokenizer).
Loading validates every file and turns each kind of damage into a one-line error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from textaudit.data import CORPUS_LABELS
from textaudit.errors import TextAuditError, first_line
from textaudit.files import atomic_path, check_folder, fingerprint_dir, loads_json
from textaudit.models.batched import BatchedClassifier
from textaudit.models.torch_backend import hf_tokenize, torch_classifier
from textaudit.models.zoo.vocab import Vocab, WordTokenizer
from textaudit.token_ids import WordIds, piece_ids
from textaudit.version import __version__

__all__ = ["save_checkpoint", "load_checkpoint", "load_module", "read_config", "id_encoder", "FORMAT"]

FORMAT = 1
CONFIG = "textaudit.json"


def batch_encoder(arch: str, tokenizer, max_len: int):
    """Return the batch tokenizer a zoo model's forward takes: HF tokenizers are padded to the
    longest text (``hf_tokenize``); the word models' ``WordTokenizer`` already is one."""
    return hf_tokenize(tokenizer, max_length=max_len) if arch == "minilm" else tokenizer


def id_encoder(arch: str, tokenizer, max_len: int):
    """The id encoder (:mod:`textaudit.token_ids`) of a zoo model: per-word vocabulary ids for the
    word models, per-word pieces for minilm's WordPiece tokenizer."""
    return piece_ids(tokenizer, max_length=max_len) if arch == "minilm" else WordIds(tokenizer.vocab, tokenizer.max_len)


def save_checkpoint(path: Path, module, tokenizer, config: dict[str, Any]) -> Path:
    """Write ``module`` + ``tokenizer`` + ``config`` to directory ``path`` (atomically per file)."""
    from safetensors.torch import save_file

    path = Path(path)
    check_folder(path, CONFIG, "give the checkpoint a new folder")
    path.mkdir(parents=True, exist_ok=True)
    if config["arch"] == "minilm":
        module.save_pretrained(path / "hf")
        tokenizer.save_pretrained(path / "hf")
    else:
        state = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
        with atomic_path(path / "model.safetensors") as tmp:
            save_file(state, str(tmp), metadata={"textaudit": __version__, "arch": config["arch"]})
        with atomic_path(path / "vocab.txt", unmarked="a checkpoint's vocabulary, in the folder check_folder took") as tmp:
            tokenizer.vocab.save(tmp)
    cfg = {"format": FORMAT, **config}
    with atomic_path(path / CONFIG) as tmp:  # written last: a checkpoint without it is not one
        tmp.write_text(json.dumps(cfg, indent=2))
    return path


def read_config(path: Path) -> dict[str, Any]:
    """Return the checkpoint's config, or raise a one-line error if it is missing or corrupt."""
    f = Path(path) / CONFIG
    if not f.is_file():
        raise TextAuditError(f"'{path}' is not a textaudit checkpoint (no {CONFIG}); retrain with audit train")
    try:
        cfg = loads_json(f.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise TextAuditError(f"checkpoint config {f} is corrupt; delete {path} and retrain with audit train") from None
    if not isinstance(cfg, dict) or "arch" not in cfg or "num_classes" not in cfg:
        raise TextAuditError(f"checkpoint config {f} lacks 'arch'/'num_classes'; delete {path} and retrain")
    if cfg.get("format", 0) > FORMAT:
        raise TextAuditError(f"checkpoint {path} was written by a newer textaudit (format {cfg['format']}); upgrade")
    return cfg


def load_module(path: Path):
    """Return ``(module, tokenizer, config)`` of a checkpoint (module in eval mode, on CPU)."""
    path = Path(path)
    cfg = read_config(path)
    arch = cfg["arch"]
    if arch == "minilm":
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        hf = path / "hf"
        if not (hf / "config.json").is_file():
            raise TextAuditError(f"checkpoint {path} has no hf/config.json; delete it and retrain with audit train")
        try:
            tok = AutoTokenizer.from_pretrained(hf, local_files_only=True, trust_remote_code=False)
            module = AutoModelForSequenceClassification.from_pretrained(hf, local_files_only=True, trust_remote_code=False)
        except Exception as e:  # safetensors/json/OS errors all mean the same thing here
            first = first_line(e, 160)
            raise TextAuditError(f"checkpoint {path} is corrupt ({first}); delete it and retrain") from None
        return module.eval(), tok, cfg

    import torch
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from textaudit.models.zoo.architectures import ARCHITECTURES, build_module
    if arch not in ARCHITECTURES:
        raise TextAuditError(f"checkpoint {path} has unknown arch '{arch}'; known: {', '.join(ARCHITECTURES)}, minilm")
    weights, vocab_file = path / "model.safetensors", path / "vocab.txt"
    for f in (weights, vocab_file):
        if not f.is_file():
            raise TextAuditError(f"checkpoint {path} is missing {f.name}; delete it and retrain with audit train")
    try:
        state = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as e:
        raise TextAuditError(f"checkpoint weights {weights} are corrupt ({str(e)[:120]}); delete {path} and retrain") from None
    vocab = Vocab.load(vocab_file)
    emb = state.get("embed.weight")
    if emb is None or emb.shape[0] != len(vocab):
        got = "none" if emb is None else emb.shape[0]
        raise TextAuditError(f"checkpoint {path} does not match its vocabulary ({got} embedding rows, "
                             f"{len(vocab)} words); delete it and retrain")
    options = (cfg.get("train") or {}).get("arch_options") or {}  # (e.g. Jia et al.'s bidirectional LSTM)
    module = build_module(arch, torch.zeros_like(emb), int(cfg["num_classes"]), **options)
    try:
        module.load_state_dict(state)
    except RuntimeError as e:
        first = str(e).strip().splitlines()[0][:160]
        raise TextAuditError(f"checkpoint {path} does not fit a '{arch}' model ({first}); delete it and retrain") from None
    return module.eval(), WordTokenizer(vocab, max_len=int(cfg.get("max_len", 256))), cfg


def class_names(cfg: dict[str, Any]) -> list[str] | None:
    """A checkpoint's class names: those it was saved with, or — for a model trained on a corpus whose classes are
    known (SST-2: negative, positive), saved with bare ids before zoo models named them — the corpus's."""
    labels = cfg.get("labels")
    n = int(cfg.get("num_classes", 0))
    if labels and list(labels) != [str(i) for i in range(len(labels))]:
        return list(labels)
    known = CORPUS_LABELS.get(str(cfg.get("data") or "").split(":")[0].lower())
    return list(known) if known and len(known) == n else labels


def load_checkpoint(path: Path, *, device: str | None = None, batch_size: int | None = None,
                    name: str | None = None) -> BatchedClassifier:
    """Return a :class:`BatchedClassifier` over the checkpoint in directory ``path``."""

    module, tok, cfg = load_module(Path(path))
    encode = batch_encoder(cfg["arch"], tok, int(cfg.get("max_len", 128)))
    clf = torch_classifier(module, encode, name=name or cfg.get("name", cfg["arch"]), device=device,
                           batch_size=batch_size, num_classes=int(cfg["num_classes"]), labels=class_names(cfg),
                           ids=id_encoder(cfg["arch"], tok, int(cfg.get("max_len", 128))))
    clf.fingerprint = lambda: fingerprint_dir(path)
    clf.checkpoint = Path(path)  # type: ignore[attr-defined]
    clf.config = cfg  # type: ignore[attr-defined]
    return clf
