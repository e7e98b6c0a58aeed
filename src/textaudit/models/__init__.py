"""Models: one set of batched, device-aware classifier wrappers that every attack and estimator uses.

>>> from textaudit.models import as_classifier
>>> clf = as_classifier(lambda texts: [[0.3, 0.7]] * len(texts))
>>> clf.predict_proba(["a film"]).shape
(1, 2)

Heavy libraries (torch, transformers) are imported only by the functions that need them.
"""

from textaudit.models.batched import BatchedClassifier, Classifier, QueryStats, as_classifier, softmax
from textaudit.models.hf import load_hf_classifier
from textaudit.models.registry import known_models, load_classifier, load_plugin, register_model
from textaudit.models.torch_backend import torch_classifier

__all__ = [
    "Classifier",
    "BatchedClassifier",
    "QueryStats",
    "as_classifier",
    "softmax",
    "load_classifier",
    "load_plugin",
    "register_model",
    "known_models",
    "torch_classifier",
    "load_hf_classifier",
]


def __getattr__(name: str):
    if name == "torch_classifier":
        return torch_classifier
    if name == "load_hf_classifier":
        return load_hf_classifier
    raise AttributeError(name)
