"""A model's traits (textaudit.model_traits.ModelTraits) are declared in one place and read through traits_of by every
layer: the defaults for a plain callable, what a classifier states for itself, a sentence-pair view's model's — and no
reader asks a model's attributes one by one."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np

from textaudit.engine.scheduler import in_flight_for
from textaudit.model_traits import ModelTraits, traits_of
from textaudit.models.batched import BatchedClassifier, PairView, is_remote, sampled_draws, scores_of, unknown_class
from textaudit.neighborhoods.score_cache import score_identity, use_score_cache

SRC = Path(__file__).resolve().parents[1] / "src" / "textaudit"


def _uniform(texts):
    return np.full((len(texts), 3), 1 / 3)


def test_a_plain_callable_has_the_default_traits():
    assert traits_of(_uniform) == ModelTraits()
    assert scores_of(_uniform) is None and unknown_class(_uniform) is None and not is_remote(_uniform)


def test_what_a_classifier_states_is_what_every_reader_reads_and_a_pair_view_states_its_models():
    """A label-only endpoint's traits (sampled five times, a class for no label, remote, chat) set on a classifier:
    the scoring, the draws, the unknown class, one search in flight and no score kept are read from them alike,
    through the model or through a view of sentence pairs over it."""
    clf = BatchedClassifier(_uniform, name="endpoint", labels=["neg", "pos", "unknown"], num_classes=3)
    default = in_flight_for(clf)  # (the machine's default for a local model)
    clf.scores, clf.samples, clf.temperature, clf.unknown_class = "labels", 5, 0.7, 2
    clf.remote, clf.protocol, clf.score_kind, clf.fingerprint = True, "chat", "remote", "http://127.0.0.1:9/v1#m"
    view = PairView(clf, "the premise .")
    for model in (clf, view):
        t = traits_of(model)
        assert (t.scores, t.samples, t.unknown_class, t.remote, t.protocol) == ("labels", 5, 2, True, "chat")
        assert scores_of(model) == "sampled" and sampled_draws(model) == 5 and unknown_class(model) == 2
        assert is_remote(model) and in_flight_for(model) == 1
    assert traits_of(view).labels == ["neg", "pos", "unknown"]
    with use_score_cache("all"):  # sampled answers: every run draws anew, none is kept whatever the choice
        assert score_identity(clf) is None
        clf.samples, clf.temperature = 1, 0.0
        assert score_identity(clf) is not None
    clf.remote = False
    assert in_flight_for(clf) == default


def test_no_reader_asks_a_model_for_a_trait_itself():
    """Every trait is read through traits_of (or a reader built on it): a getattr of a trait's name on some object
    outside textaudit.model_traits is a second, undeclared way to read it. The one exception: as_classifier reads a
    plug-in object's own ``multilabel = True`` (strictly True) to build the classifier that then declares it."""
    names = "|".join(f.name for f in dataclasses.fields(ModelTraits) if f.name not in ("name", "labels", "fingerprint"))
    pattern = re.compile(rf'getattr\([^,()]+, "({names})"')
    found = [f"{p.relative_to(SRC)}:{i}" for p in SRC.rglob("*.py") if p.name != "model_traits.py"
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert found == ["models/batched.py:" + str(_line_of("multi = getattr(obj, \"multilabel\", False) is True"))], found


def _line_of(text: str) -> int:
    lines = (SRC / "models" / "batched.py").read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)
