"""HuggingFace sequence classifiers (a local directory, or a hub id when online)."""

from __future__ import annotations

from pathlib import Path

from textaudit.errors import TextAuditError, first_line
from textaudit.files import fingerprint_dir
from textaudit.models.batched import BatchedClassifier
from textaudit.models.torch_backend import hf_tokenize, torch_classifier
from textaudit.resources import hub_local_only, loading_error, trust_remote_code
from textaudit.token_ids import piece_ids

__all__ = ["load_hf_classifier", "load_hf_module", "hf_labels"]


def load_hf_module(name_or_path: str):
    """Return ``(model, tokenizer)`` of a HuggingFace sequence classifier: a local directory
    (``config.json`` + weights + tokenizer) or a hub id (needs the network or the HF cache); what
    cannot be loaded is a one-line error."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    local = Path(name_or_path).expanduser()
    if str(name_or_path).startswith((".", "/", "~")) and not local.exists():  # a path, not a hub id
        raise TextAuditError(f"hf:{name_or_path}: no such directory (give a folder with config.json and the weights)")
    if local.exists() and not (local / "config.json").is_file():
        raise TextAuditError(f"'{local}' is not a HuggingFace model directory (no config.json)")
    src = str(local) if local.exists() else name_or_path
    local_only = local.exists() or hub_local_only()
    trust = trust_remote_code()
    try:
        tok = AutoTokenizer.from_pretrained(src, local_files_only=local_only, trust_remote_code=trust)
        model = AutoModelForSequenceClassification.from_pretrained(src, local_files_only=local_only,
                                                                   trust_remote_code=trust)
    except OSError as e:
        first = first_line(e, 160)
        where = "directory" if local.exists() else "hub id (" + ("offline here" if local_only else "not found on the hub") + ")"
        raise TextAuditError(f"cannot load HuggingFace classifier '{name_or_path}' as a {where}: {first}") from None
    except (ValueError, RuntimeError) as e:
        raise loading_error(e, f"HuggingFace classifier '{name_or_path}'",
                            f"HuggingFace classifier '{name_or_path}' is broken or incompatible") from None
    return model, tok


def hf_labels(model) -> list[str]:
    """The class names of a HuggingFace classifier, from its ``id2label`` (the index where it has none)."""
    id2label = getattr(model.config, "id2label", None) or {}
    return [str(id2label.get(i, i)) for i in range(model.config.num_labels)]


def load_hf_classifier(name_or_path: str, *, device: str | None = None, batch_size: int | None = None,
                       max_length: int = 512) -> BatchedClassifier:
    """Return a :class:`BatchedClassifier` over ``AutoModelForSequenceClassification``.

    ``name_or_path`` is a local directory (``config.json`` + weights + tokenizer) or a hub id such as
    ``distilbert-base-uncased-finetuned-sst-2-english`` (needs the network or the HF cache).
    Class names come from the model's ``id2label``.
    """
    model, tok = load_hf_module(name_or_path)
    local = Path(name_or_path).expanduser()
    labels = hf_labels(model)
    clf = torch_classifier(model, hf_tokenize(tok, max_length), name=f"hf:{name_or_path}", device=device,
                           batch_size=batch_size, num_classes=model.config.num_labels, labels=labels,
                           ids=piece_ids(tok, max_length))
    # a local directory by its files; a hub model by the commit its files came from
    clf.fingerprint = (lambda: fingerprint_dir(local)) if local.exists() else getattr(model.config, "_commit_hash", None)
    clf.multilabel = getattr(model.config, "problem_type", None) == "multi_label_classification"  # sigmoid, not softmax
    clf.probe_batches = True  # a hub model's code may batch wrongly (remote code, a padding side it ignores)
    clf.unbatched_hint = "give --batch-tokens 1 to score one text per forward"
    return clf
