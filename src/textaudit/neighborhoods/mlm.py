"""Choosing the masked LM of the neighbourhoods: ``load_mlm(name)`` (the interface and the
HuggingFace wrapper are in :mod:`textaudit.neighborhoods.masked_lm`)."""

from __future__ import annotations

from pathlib import Path

import textaudit.notices as notices
from textaudit.errors import TextAuditError
from textaudit.lm import load_causal_lm
from textaudit.neighborhoods.masked_lm import HFMaskedLM, MaskedLM
from textaudit.neighborhoods.minilm_mlm import load_minilm_mlm
from textaudit.neighborhoods.rerank import RerankedMaskedLM
from textaudit.neighborhoods.store import StoredMaskedLM, current_store
from textaudit.resources import locate

__all__ = ["MaskedLM", "HFMaskedLM", "load_mlm", "MLM_NAMES"]


MLM_NAMES = ("distilbert-base-uncased", "minilm-mlm")


def load_mlm(name: str | None = None, *, device: str | None = None, quiet: bool = False, batch_size: int = 128,
             cache_size: int = 200_000) -> MaskedLM:
    """Return a masked LM by name, with a one-line notice on stderr saying which one is in use.

    ``name=None`` resolves the default: ``distilbert-base-uncased`` when it is available (local
    HuggingFace cache, or online), else textaudit's offline ``minilm-mlm``. Other names: a local
    directory or hub id of any ``AutoModelForMaskedLM``, or a ``.safetensors`` artifact written by
    ``audit train-mlm --out`` (a retrained minilm-mlm). ``MLM+LM`` (``minilm-mlm+smollm2``) is the
    quality mode: MLM's candidates re-ranked by the causal LM ``LM``'s sentence likelihood
    (:mod:`textaudit.neighborhoods.rerank`).

    ``store:NAME``: the answers of the masked LM ``NAME`` that the neighbourhood store holds, without its
    weights (:class:`~textaudit.neighborhoods.store.StoredMaskedLM`; a missing answer is an error).
    The masked LM reads and writes the neighbourhood store in effect (``--store``; default
    ``$TEXTAUDIT_CACHE/neighborhoods.sqlite``; :func:`~textaudit.neighborhoods.store.current_store`).
    """
    if name is not None and name.startswith("store:"):  # answers from the store alone (no weights)

        store = current_store()
        if store is None or not store.path.is_file():
            raise TextAuditError(f"--mlm {name} reads the neighbourhood store, but there is none "
                                 f"({'--store off' if store is None else f'{store.path} does not exist'}); "
                                 "import one with audit store import, or give --store PATH")
        mlm = StoredMaskedLM(store, name[len("store:"):])
        if not quiet:
            notices.notice(f"masked LM in use: {mlm.name}, answered from the store {store.path} (no weights loaded)")
        return mlm
    if name is not None and "+" in name and not Path(name).expanduser().exists():
        base, _, lm_name = name.partition("+")
        if not base or not lm_name:
            raise TextAuditError(f"--mlm {name!r}: the quality mode is MLM+LM, e.g. minilm-mlm+smollm2")
        inner = load_mlm(base, device=device, quiet=True, batch_size=batch_size, cache_size=cache_size)
        mlm = RerankedMaskedLM(inner, load_causal_lm(lm_name, device=device))
        if not quiet:
            notices.notice(f"masked LM in use: {mlm.name} (candidates of {base} re-ranked by {lm_name})")
        return mlm
    chosen = name
    if name is None:
        res = locate("distilbert-base-uncased")
        chosen = str(res.path) if res.found else "minilm-mlm"
        label = "distilbert-base-uncased" if res.found else "minilm-mlm (offline; distilbert-base-uncased unavailable)"
    else:
        label = name
    if chosen == "minilm-mlm":
        mlm = load_minilm_mlm(device=device, batch_size=batch_size, cache_size=cache_size)
    elif chosen.endswith(".safetensors"):  # a minilm-mlm artifact of one's own (audit train-mlm --out)
        mlm = load_minilm_mlm(chosen, device=device, batch_size=batch_size, cache_size=cache_size)
        mlm.name = chosen
    else:
        mlm = HFMaskedLM.from_pretrained(chosen, device=device, name="distilbert-base-uncased" if name is None else chosen,
                                         batch_size=batch_size, cache_size=cache_size)

    mlm.store = current_store()
    if not quiet:
        notices.notice(f"masked LM in use: {label}")
    return mlm
