"""Turn a ``--model`` string into a :class:`~textaudit.models.batched.BatchedClassifier`.

Accepted forms (the same on every CLI command that takes ``--model``):

- a zoo name: ``bow``, ``cnn``, ``lstm``, ``transformer``, ``minilm`` (trained on first use, then
  loaded from the cache) or the path of a textaudit checkpoint directory;
- ``hf:<dir-or-id>``: a HuggingFace sequence classifier (local directory, or hub id when online);
- ``llm:<name>``: a causal LM as a zero-/few-shot classifier under a prompt (``llm:smollm2`` offline,
  or a HuggingFace causal LM id or directory; :mod:`textaudit.models.llm`);
- ``http(s)://…``: a model behind an endpoint, plain JSON or OpenAI-compatible (:mod:`textaudit.models.http`);
- ``path/to/file.py:obj``: a plug-in. ``obj`` may be a function ``f(list[str]) -> (n, C)``
  probabilities, an object with ``predict_proba``, or a class instantiated with no arguments that
  is one of those. Set ``obj.output = "logits"`` if it returns logits, ``obj.name`` to name it, and
  ``obj.labels = ["negative", "positive"]`` to name its classes (data labelled with names maps onto
  them). A sentence pair arrives as a tuple ``(first, second)``.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Callable

from textaudit.errors import TextAuditError, user_code_error
from textaudit.files import fingerprint_files
from textaudit.model_traits import traits_of
from textaudit.models.batched import BatchedClassifier, as_classifier
from textaudit.models.hf import load_hf_classifier
from textaudit.models.http import load_http_classifier, protocol_of
from textaudit.models.llm import load_llm_classifier
from textaudit.models.options import ModelOptions, current_model_options
from textaudit.models.prompt import load_prompt
from textaudit.models.zoo.build import load_zoo_model
from textaudit.models.zoo.checkpoint import load_checkpoint
from textaudit.models.zoo.names import ZOO_MODELS

__all__ = ["load_classifier", "check_model_options", "load_plugin", "MODEL_FACTORIES", "register_model", "known_models"]

#: name -> factory(device=..., batch_size=...) returning a BatchedClassifier: models a user registers. The zoo's names
#: are a static table (:data:`~textaudit.models.zoo.names.ZOO_MODELS`) resolved without registration.
MODEL_FACTORIES: dict[str, Callable[..., BatchedClassifier]] = {}


def register_model(name: str, factory: Callable[..., BatchedClassifier]) -> None:
    """Make ``--model name`` resolve to ``factory(device=..., batch_size=...)``."""
    MODEL_FACTORIES[name] = factory


def known_models() -> list[str]:
    """Return the model names ``--model`` accepts (the zoo's and any registered)."""
    return sorted(set(ZOO_MODELS) | set(MODEL_FACTORIES))


def load_plugin(spec: str, *, batch_size: int | None = None, cache_size: int = 100_000) -> BatchedClassifier:
    """Return a classifier from a ``path/to/file.py:obj`` plug-in (see the module docstring)."""
    file, _, objname = spec.rpartition(":")
    path = Path(file).expanduser()
    if not path.is_file():
        raise TextAuditError(f"plug-in file '{path}' does not exist")
    if not objname.isidentifier():
        raise TextAuditError(f"plug-in '{spec}': '{objname}' is not a Python name; use path/to/file.py:obj")
    mod_name = f"textaudit_plugin_{abs(hash(str(path.resolve())))}"
    ispec = importlib.util.spec_from_file_location(mod_name, path)
    if ispec is None or ispec.loader is None:
        raise TextAuditError(f"cannot import plug-in file '{path}'")
    module = importlib.util.module_from_spec(ispec)
    sys.modules[mod_name] = module
    try:
        ispec.loader.exec_module(module)
    except SyntaxError as e:
        raise TextAuditError(f"plug-in file '{path}' has a syntax error at line {e.lineno}: {e.msg}") from None
    except ImportError as e:
        raise TextAuditError(f"plug-in file '{path}' failed to import: {e}") from None
    except (Exception, SystemExit) as e:  # the user's code, run at import
        raise user_code_error(f"your plug-in {path.name} (at import)", e) from e
    if not hasattr(module, objname):
        names = [n for n in vars(module) if not n.startswith("_")]
        raise TextAuditError(f"plug-in file '{path}' has no '{objname}' (it defines: {', '.join(names) or 'nothing'})")
    obj = getattr(module, objname)
    if inspect.isclass(obj):
        try:
            inspect.signature(obj).bind()
        except TypeError as e:
            raise TextAuditError(f"plug-in class '{objname}' must be constructible with no arguments ({e})") from None
        except ValueError:  # no signature to inspect (a builtin): let the call tell
            pass
        try:
            obj = obj()
        except (Exception, SystemExit) as e:
            raise user_code_error(f"your model {path.name}:{objname} (in its constructor)", e) from e
    if not (callable(obj) or hasattr(obj, "predict_proba")):
        raise TextAuditError(
            f"plug-in '{objname}' is a {type(obj).__name__}; it must be a function f(list[str]) -> probabilities "
            "or an object with predict_proba")
    output = traits_of(obj).output
    own = getattr(obj, "batch_size", None)  # a plug-in that must see one text at a time says batch_size = 1
    clf = as_classifier(obj, output=output, name=getattr(obj, "name", None) or f"{path.name}:{objname}",
                        batch_size=batch_size or (own if isinstance(own, int) and own >= 1 else None),
                        cache_size=cache_size)
    # its code and the object it names (two models in one file are two models; what it loads is its business)
    clf.plugin_object = objname
    clf.fingerprint = lambda: f"{fingerprint_files([path])}:{objname}"
    clf.probe_batches = clf.batch_size > 1  # its code is not ours: is a text's score its own? (checked on first use)
    return clf


def check_model_options(spec: str, options: ModelOptions) -> None:
    """One-line error for options ``spec``'s kind of model does not take (cheap: before anything loads)."""
    remote = str(spec).strip().startswith(("http://", "https://"))
    if not remote and options.http_only():
        raise TextAuditError(f"{', '.join(options.http_only())} apply to http(s):// models, not '{spec}'")
    if remote and options.openai_only():
        if protocol_of(str(spec).strip()) == "json":
            raise TextAuditError(f"{', '.join(options.openai_only())} apply to OpenAI-compatible endpoints "
                                 f"(…/completions, …/chat/completions), not the plain JSON endpoint '{spec}'")
    if options.prompt_file is not None and not (remote or str(spec).strip().startswith("llm:")):
        raise TextAuditError(f"--prompt-file applies to llm: models and OpenAI-compatible endpoints, not '{spec}'")


def load_classifier(spec: str, *, device: str | None = None, batch_size: int | None = None,
                    options: ModelOptions | None = None) -> BatchedClassifier:
    """Return a :class:`BatchedClassifier` for a model spec (zoo name, ``hf:...``, ``llm:...``,
    ``http(s)://...``, ``file.py:obj``, or a checkpoint directory); unknown specs raise a one-line
    :class:`TextAuditError`. ``options`` (default: those in effect, see :mod:`textaudit.models.options`)
    are the prompt and HTTP settings of ``llm:`` and ``http(s)://`` models."""
    if not spec or not str(spec).strip():
        raise TextAuditError("empty model name; use one of " + ", ".join(
            known_models() + ["hf:<dir-or-id>", "llm:<name>", "http(s)://...", "file.py:obj"]))
    spec = str(spec).strip()
    opts = options or current_model_options()
    check_model_options(spec, opts)
    remote = spec.startswith(("http://", "https://"))
    if spec.startswith("llm:") or remote:
        if remote:
            if protocol_of(spec) == "json" and opts.prompt_file is not None:
                raise TextAuditError("--prompt-file is for llm: models and OpenAI-compatible endpoints (…/completions); "
                                     "a plain JSON endpoint returns probabilities itself")
        prompt = load_prompt(opts.prompt_file) if opts.prompt_file is not None else None
        if remote:

            return load_http_classifier(spec, options=opts, prompt=prompt, batch_size=batch_size)

        if not spec[4:].strip():
            raise TextAuditError("llm: needs a causal LM: llm:smollm2 (offline), or a HuggingFace id or directory")
        return load_llm_classifier(spec[4:].strip(), prompt, device=device, batch_size=batch_size)
    if spec.startswith("hf:"):
        return load_hf_classifier(spec[3:], device=device, batch_size=batch_size)
    if ".py:" in spec:
        return load_plugin(spec, batch_size=batch_size)
    if spec in MODEL_FACTORIES:
        return MODEL_FACTORIES[spec](device=device, batch_size=batch_size)
    if spec in ZOO_MODELS:
        return load_zoo_model(spec, device=device, batch_size=batch_size)
    path = Path(spec).expanduser()
    if path.is_dir():
        if (path / "textaudit.json").is_file():
            return load_checkpoint(path, device=device, batch_size=batch_size)
        if (path / "config.json").is_file():
            return load_hf_classifier(str(path), device=device, batch_size=batch_size)
    raise TextAuditError(
        f"unknown model '{spec}'; use one of {', '.join(known_models()) or '(none registered)'}, "
        "hf:<dir-or-id>, llm:<name>, http(s)://..., a checkpoint directory, or path/to/file.py:obj")
