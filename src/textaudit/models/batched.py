"""The ``Classifier`` protocol and the one batching/caching wrapper every attack and estimator uses.

A *classifier* here is anything with

- ``predict_proba(texts: Sequence[str]) -> np.ndarray`` of shape ``(n, C)``, rows summing to 1,
- ``num_classes: int`` and ``name: str``.

**Sentence pairs** (NLI, paraphrase, QA-style classifiers): an input may be a tuple
``(first, second)`` of two strings instead of a string. The convention, for every model kind:
``hf:`` models encode it as the tokenizer's pair (``[CLS] first [SEP] second [SEP]`` for BERT),
zoo word models read ``first [SEP] second`` as one text, and a plug-in or callable receives the
tuple as it is. :class:`PairView` fixes one side of a pair, so that every attack and estimator,
which perturbs one text, runs on pair classifiers unchanged.

:class:`BatchedClassifier` turns any *forward function* ``forward(list[str]) -> array (n, C)``
(probabilities or logits) into such a classifier and adds, once for all callers:

- batching (``batch_size``; texts are sorted by length inside a call so that batches pad little),
- de-duplication of repeated texts within a call,
- an LRU cache text → probabilities (``cache_size`` entries), and behind it the *score cache*: the
  same answers kept on disk across runs, keyed by the model's fingerprint (weights, tokenizer,
  precision, device kind) and the text (:data:`SCORE_CACHE`, injected by
  :class:`textaudit.neighborhoods.score_cache.use_score_cache`; :attr:`BatchedClassifier.score_kind` says who may use it),
- validation of what the forward returns (shape, NaN, row sums) with one-line errors,
- a query counter (:class:`QueryStats`): unique forwards vs cache hits, time spent in forwards and,
  for torch models, inside the bare module calls (``device_seconds``).

**Sentences as ids.** ``predict_proba`` also takes :class:`~textaudit.sentence.Sentence` objects
(what the attacks and estimators pass). For a model whose forward has an id encoder (the zoo's
word models and WordPiece / SentencePiece / byte-level BPE transformers, :mod:`textaudit.token_ids`),
their ids are spliced from per-word caches — never re-tokenised from text — and packed into
length-bucketed batches of at most ``batch_tokens`` padded tokens. The cache is keyed by the
text either way, so the string path and the id path give the same answers and the same counts.

Device placement and ``torch.inference_mode`` live in the torch forward functions
(:mod:`textaudit.models.torch_backend`), so this module needs only numpy.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter, OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence, Union, runtime_checkable

import numpy as np

import textaudit.notices as notices
from textaudit.decision import TIE, decisions
from textaudit.errors import TextAuditError, check_at_least, user_code_error
from textaudit.model_traits import ModelTraits, traits_of
from textaudit.request import range_words, within
from textaudit.secrets import safe_name
from textaudit.sentence import Sentence
from textaudit.token_ids import default_batch_tokens, pack, splice_all

__all__ = ["Classifier", "BatchedClassifier", "PairView", "pair_inputs", "QueryStats", "as_classifier", "softmax", "Text", "text_length",
           "scores_of", "unknown_class", "model_scores", "label_report", "label_only_report", "is_remote",
           "classifier_seconds", "work_counters", "mlm_contexts",
           "query_stats", "forward_of", "torch_parts", "device_clocked", "placement", "reduced_precision",
           "masked_lm_identity", "decisions", "TIE", "label_view", "check_label_threshold",
           "each_label", "ALL_LABELS", "ModelTraits", "traits_of"]

# (the traits every layer reads of a model, declared below the models: textaudit.model_traits)

#: one classifier input: a text, or a sentence pair ``(first, second)``
Text = Union[str, tuple[str, str]]


@runtime_checkable
class Classifier(Protocol):
    """What every attack and estimator needs from a model.

    A classifier may also state how it answers — its :class:`~textaudit.model_traits.ModelTraits`, read through
    :func:`~textaudit.model_traits.traits_of` (and :func:`scores_of`, :func:`unknown_class`, :func:`model_scores`
    built on it), never from the module the model came from; :class:`BatchedClassifier` has them, None or 1 unless a
    model says otherwise:

    - ``scores``: ``"logprobs"``, ``"labels"`` (one-hot: the model answers with a label only), or None
      (the model's own probabilities);
    - ``samples``: label-only answers sampled this many times per text (their frequencies are the
      probabilities);
    - ``unknown_class``: the index of a class meaning "no class" (an answer that matched no label), or None;
    - ``scores_description``: one line for a results header saying how the model was scored, or None.
    """

    name: str

    @property
    def num_classes(self) -> int: ...

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass
class QueryStats:
    """Counters of one classifier: ``texts`` asked for, ``unique_forwards`` actually run through the
    model, ``cache_hits`` (asked-for texts answered from the cache or by de-duplication),
    ``batches`` and ``forward_seconds`` spent inside the model's forward (tokenising included),
    ``device_seconds`` inside the bare module calls of a torch model. Remote models
    (:mod:`textaudit.models.http`) also count HTTP ``requests`` (retries included), ``retries`` and the
    ``tokens`` the endpoint reported."""

    calls: int = 0
    texts: int = 0
    unique_forwards: int = 0
    cache_hits: int = 0
    batches: int = 0
    forward_seconds: float = 0.0
    requests: int = 0
    retries: int = 0
    tokens: int = 0
    device_seconds: float = 0.0
    #: asked-for texts answered by the score cache on disk (neither the memory cache nor a forward)
    store_hits: int = 0
    #: asked-for texts answered so far, counted as each batch of a forward returns (``texts`` counts a call's
    #: texts when it starts): what a progress line shows while one long call runs
    answered: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    def restore(self, values: dict) -> None:
        """Set every counter to ``values``' (:meth:`to_dict`'s), in place: whoever holds this object keeps counting
        into the classifier's counters."""
        for name, value in values.items():
            setattr(self, name, value)


#: ``[provider]``: ``provider(classifier)`` returns the classifier's view of the score cache on disk (an object
#: with ``lookup(keys) -> {key: row}`` and ``keep(rows)``), or None. Injected for the time of a ``with`` block by
#: :class:`textaudit.neighborhoods.score_cache.use_score_cache` (a layer above this one; every command enters one;
#: None outside: nothing kept), asked once per classifier, on its first miss.
SCORE_CACHE: list[Callable[["BatchedClassifier"], object | None] | None] = [None]
_UNASKED = object()


class DiskWeigher:
    """Whether looking texts up in the score cache pays for a model, judged on windows of :attr:`WINDOW` texts
    asked of it: it does while ``l < h · f`` — ``l`` the seconds per text of looking up, ``h`` the share the disk
    answered, ``f`` the seconds the model takes per text it computes (splicing, forward, checks). A cheap model
    on a CPU (a word CNN: microseconds per text) asked mostly new texts computes them faster than SQLite finds
    that it has not got them; then this run stops looking (:attr:`looking`) but still keeps what it computes,
    for the next run. Records are the same either way: the disk only ever answers what the forward answered."""

    WINDOW = 8192

    def __init__(self) -> None:
        self.looking = True
        self._reset()

    def _reset(self) -> None:
        self.asked = self.hits = self.computed_n = 0
        self.lookup_s = self.compute_s = 0.0

    def add(self, asked: int, hits: int, seconds: float) -> None:
        self.asked += asked
        self.hits += hits
        self.lookup_s += seconds

    def computed(self, n: int, seconds: float) -> None:
        self.computed_n += n
        self.compute_s += seconds

    def worse(self) -> bool:
        """At the end of a window: True when looking up cost more than it saved over it (then a new window)."""
        if self.asked < self.WINDOW or not self.computed_n:
            return False
        worse = self.lookup_s / self.asked > self.hits / self.asked * self.compute_s / self.computed_n
        self._reset()
        return worse


def softmax(logits: np.ndarray) -> np.ndarray:
    """Return the row-wise softmax of a 2-D array (numerically stable)."""
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _checked_input(t: object) -> Text:
    """A string, or a pair of strings as a tuple (a list of two strings, e.g. from JSON, counts)."""
    if isinstance(t, str):
        return t
    if isinstance(t, (tuple, list)) and len(t) == 2 and all(isinstance(x, str) for x in t):
        return (t[0], t[1])
    raise TextAuditError(f"predict_proba takes strings or (first, second) pairs of strings, got {type(t).__name__}")


def text_length(t: Text) -> int:
    """Characters of an input (both texts of a pair)."""
    return len(t) if isinstance(t, str) else len(t[0]) + len(t[1])


def _chars(key) -> int:
    """The characters of a cache key (a text, or the two texts of a pair)."""
    return len(key) if isinstance(key, str) else sum(len(str(x)) for x in key)


class BatchedClassifier:
    """A :class:`Classifier` over a forward function, with batching, dedup, LRU cache and counters.

    Its answers are the forward's own probabilities (``scores`` None, no ``unknown_class``); a
    subclass whose answers are labels (an OpenAI-compatible endpoint) sets them (see :class:`Classifier`).

    Parameters
    ----------
    forward:
        ``forward(texts: list[str]) -> array-like`` of shape ``(n, C)`` (or ``(n,)`` for a binary
        model returning P(class 1)). A forward with an ``ids`` encoder and ``forward_ids(batches)``
        (:class:`~textaudit.models.torch_backend.TorchForward`) also takes sentences as ids.
    output:
        ``"probs"`` (rows must be in [0, 1] and sum to 1 within 1e-3) or ``"logits"`` (softmaxed).
    num_classes:
        Number of classes C; when None it is read from the first forward.
    batch_size:
        Texts per forward call (default 128).
    cache_size:
        Entries kept in the LRU cache text → probabilities (0 disables it).
    name:
        Shown in results files and tables.
    batch_tokens:
        The id path's token budget: rows × longest row of one padded batch (default 4,096).
    user_code:
        ``forward`` is the user's code (a plug-in or callable): anything it raises becomes the one-line
        :class:`TextAuditError` ``your model <name> raised <Type>: <message>`` (chained, so Python
        callers keep the traceback).
    """

    #: how the model answers (see :class:`Classifier`): its own probabilities, one sample, no "unknown" class
    scores: str | None = None
    samples: int = 1
    unknown_class: int | None = None
    scores_description: str | None = None

    def __init__(self, forward: Callable[[list[str]], object], *, output: str = "probs",
                 num_classes: int | None = None, batch_size: int | None = None, cache_size: int = 100_000,
                 name: str = "model", labels: Sequence[str] | None = None, user_code: bool = False,
                 batch_tokens: int | None = None, multilabel: bool = False):
        if output not in ("probs", "logits"):
            raise TextAuditError(f"output must be 'probs' or 'logits' (got {output!r})")
        for arg, value, least in (("batch_size", batch_size, 1), ("cache_size", cache_size, 0),
                                   ("--batch-tokens", batch_tokens, 1)):
            check_at_least(arg, value, least)
        self.forward = forward
        self.output = output
        self._num_classes = num_classes
        self.batch_size = batch_size or 128
        self.cache_size = cache_size
        self.name = name
        self.labels = list(labels) if labels is not None else None
        #: independent labels (one probability each, a sigmoid of logits; rows need not sum to 1), not exclusive
        #: classes: audited one label at a time (:func:`label_view`, ``--label``)
        self.multilabel = bool(multilabel)
        check_label_names(name, self.labels, self.multilabel)
        self.user_code = user_code
        self.batch_tokens = batch_tokens or default_batch_tokens("cpu")
        #: sentences reach a forward with an id encoder as spliced ids (False: as texts, the old path)
        self.use_ids = True
        self._fingerprint: str | Callable[[], str | None] | None = None
        #: the object a plug-in spec names (``file.py:obj``): one of the traits a kept answer is keyed by
        self.plugin_object: str | None = None
        self.stats = QueryStats()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        #: a bound on the characters of the cached texts as well as on their number (None: none): a server
        #: answering texts of any length from anyone (``audit serve``) must not keep gigabytes of them
        self.cache_chars: int | None = None
        self._cache_chars = 0
        #: who may keep this model's scores on disk (:data:`SCORE_CACHE`): ``"weights"`` (answers are a function
        #: of fingerprinted weights: by default), ``"code"`` (a plug-in: it may read state its file does not show)
        #: or ``"remote"`` (an endpoint can change behind its URL) — those two only when asked for
        self.score_kind = "code" if user_code else "weights"
        self._score_cache: object = _UNASKED
        self._fresh = False  # predict_proba_fresh: the model itself answers (the disk keeps its new answers)
        self._disk = DiskWeigher()
        #: hashes of the texts this process's memory cache let go while the score cache holds their first answers:
        #: asked again, they are read back, never computed again (a float32 forward in another batch can differ in
        #: its last bit, and a record must not depend on whether an earlier one was answered from memory or disk)
        self._evicted: set[int] = set()
        #: check on first use that a text's scores do not depend on the other texts of its batch (plug-ins and ``hf:``
        #: models, whose code is not ours: :meth:`_probe_batches`); the largest difference it measured
        self.probe_batches = False
        self.batch_dependence: float | None = None
        self.unbatched_hint = "give the plug-in batch_size = 1 (an attribute of the object) to score one text at a time"

    @property
    def fingerprint(self) -> str | None:
        """What identifies the model's weights or code (a results file's header records it). Loaders
        set it, or a function computing it: hashing a large model's files then happens only when a
        results file needs it, once."""
        if callable(self._fingerprint):
            self._fingerprint = self._fingerprint()
        return self._fingerprint

    @fingerprint.setter
    def fingerprint(self, value: str | Callable[[], str | None] | None) -> None:
        self._fingerprint = value

    # -- protocol -------------------------------------------------------------------------------
    @property
    def num_classes(self) -> int:
        """Number of classes C (runs one forward on the text "the" if it is not known yet)."""
        if self._num_classes is None:
            self.predict_proba(["the"])
        return int(self._num_classes)  # type: ignore[arg-type]

    def predict_proba(self, texts: Sequence[Text | Sentence]) -> np.ndarray:
        """Return class probabilities, shape ``(len(texts), C)``, rows summing to 1. Items are
        texts, sentence pairs, or :class:`~textaudit.sentence.Sentence` objects (ids where the
        model has an id encoder; see the module docstring)."""
        if isinstance(texts, (str, Sentence)):
            texts = [texts]
        texts = list(texts)
        self.stats.calls += 1
        self.stats.texts += len(texts)
        if not texts:
            return np.zeros((0, self._num_classes or 0), dtype=np.float32)
        keys = [(t._text or t.text()) if type(t) is Sentence else _checked_input(t) for t in texts]
        by_key = dict(zip(keys, texts))  # de-duplicated, in order
        cache = self._cache
        missing = [k for k in by_key if k not in cache]
        if len(missing) < len(by_key):  # hits: refresh them in the LRU order
            for k in by_key:
                if k in cache:
                    cache.move_to_end(k)
        self.stats.cache_hits += len(keys) - len(missing)
        self.stats.answered += len(keys) - len(missing)
        if not missing:
            return np.stack([cache[k] for k in keys])
        disk = self.score_cache
        stored: dict = {}
        if disk is not None and not self._fresh and self._disk.looking:
            t0 = time.perf_counter()
            stored = disk.lookup(missing)  # type: ignore[attr-defined]
            self._disk.add(len(missing), len(stored), time.perf_counter() - t0)
        elif disk is not None and not self._fresh and self._evicted:  # not looking: only what this process kept
            again = [k for k in missing if hash(k) in self._evicted]
            stored = disk.lookup(again) if again else {}  # type: ignore[attr-defined]
        if stored:
            self.stats.store_hits += len(stored)
            self.stats.answered += len(stored)
            if self._num_classes is None:  # a model whose every answer so far came from the disk
                self._num_classes = len(next(iter(stored.values())))
            missing = [k for k in missing if k not in stored]
        if missing:
            t0 = time.perf_counter()
            probs = self._forward_missing([by_key[k] if type(by_key[k]) is Sentence else k for k in missing])
            t1 = time.perf_counter()
            self.stats.unique_forwards += len(missing)
            if disk is not None:
                disk.keep(zip(missing, probs), replace=self._fresh)  # type: ignore[attr-defined]
                self._disk.computed(len(missing), t1 - t0)
        else:
            probs = np.zeros((0, len(next(iter(stored.values())))), dtype=np.float32)
        if len(missing) == len(keys):  # every text new and distinct: the rows as they came
            out = probs.copy()
        else:
            rows = {**{k: cache[k] for k in by_key if k in cache}, **stored, **dict(zip(missing, probs))}
            out = np.stack([rows[k] for k in keys])
        if disk is not None and self._disk.worse():  # looking up costs this model more than its forwards
            self._disk.looking = False
        if self.cache_size:
            cache.update(stored)
            cache.update(zip(missing, probs))
            self._cache_chars += sum(map(_chars, stored))
            self._cache_chars += sum(map(_chars, missing))
            kept = disk is not None
            while len(cache) > self.cache_size or (self.cache_chars is not None and self._cache_chars > self.cache_chars):
                key = cache.popitem(last=False)[0]
                self._cache_chars -= _chars(key)
                if kept:
                    self._evicted.add(hash(key))
        return out

    @property
    def score_cache(self) -> object | None:
        """This model's view of the score cache on disk (None: its scores are not kept): asked of the
        provider (:data:`SCORE_CACHE`) once, on the first miss; never with the memory cache off
        (``cache_size=0``) or without a fingerprint."""
        if self._score_cache is _UNASKED:
            provider = SCORE_CACHE[0]
            self._score_cache = provider(self) if provider is not None and self.cache_size else None
        return self._score_cache  # type: ignore[return-value]

    @score_cache.setter
    def score_cache(self, value: object | None) -> None:
        self._score_cache = value

    def _forward_missing(self, items: list) -> np.ndarray:
        """Probabilities of ``items``, one row each in their order: spliced ids in token-packed
        batches where the forward takes ids and every item is a sentence, else texts sorted by length."""
        encoder = getattr(self.forward, "ids", None)
        rows = None
        if self.use_ids and encoder is not None and all(type(t) is Sentence for t in items):
            rows = splice_all(encoder, items)  # None where one of them must stay a text
        out: np.ndarray | None = None
        if rows is not None:
            batches = pack([len(r) for r in rows], self.batch_tokens)
            for batch, probs in zip(batches, self._forward_ids_checked([[rows[i] for i in b] for b in batches])):
                if out is None:
                    out = np.empty((len(items), probs.shape[1]), dtype=np.float32)
                out[batch] = probs
                self.stats.answered += len(batch)
            self._probe_batches(items, out)
            return out  # type: ignore[return-value]
        texts = [t.text() if type(t) is Sentence else t for t in items]
        order = sorted(range(len(texts)), key=lambda i: text_length(texts[i]))  # similar lengths: less padding
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            probs = self._forward_checked([texts[i] for i in chunk])
            if out is None:
                out = np.empty((len(items), probs.shape[1]), dtype=np.float32)
            out[chunk] = probs
            self.stats.answered += len(chunk)
        self._probe_batches(items, out)
        return out  # type: ignore[return-value]

    def _probe_batches(self, items: list, out: np.ndarray | None) -> None:
        """Once, on the first forward of several texts (``probe_batches``): ask up to :data:`PROBE_TEXTS` of them
        again, each alone and all in the reverse order, and compare their scores with the batch's. A model that
        feeds its batch wrongly (an LSTM given batch-first data without ``batch_first``, batch norm left in training
        mode) scores a text by its neighbours: its records would depend on how textaudit batches — a warning with the
        measured difference and how to run it one text at a time. Its forwards count in no statistic."""
        if not self.probe_batches or out is None or len(items) < 2:
            return
        self.probe_batches = False
        sample, ref = items[:PROBE_TEXTS], out[:PROBE_TEXTS]
        saved = asdict(self.stats)
        try:
            alone = np.vstack([self._forward_missing([t]) for t in sample])
            reverse = self._forward_missing(sample[::-1])[::-1]
        finally:
            self.stats.restore(saved)
        self.batch_dependence = float(max(np.abs(alone - ref).max(), np.abs(reverse - ref).max()))
        if self.batch_dependence > BATCH_TOLERANCE:
            notices.notice(f"warning: model {self.name} scores a text differently with other texts in its batch (by up to "
                   f"{self.batch_dependence:.3g} in probability, measured on {len(sample)} texts alone and in another "
                   f"order): its records would depend on how textaudit batches them; {self.unbatched_hint}")

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        """Return the decided class ids, shape ``(n,)``: :func:`decisions` (a tie is :data:`TIE`, no class)."""
        return decisions(self.predict_proba(texts))

    def predict_proba_fresh(self, texts: Sequence[Text | Sentence]) -> np.ndarray:
        """:meth:`predict_proba` asking the model again, whatever the cache holds (the cache then
        keeps the new answers): a remote model's post-condition is checked at the endpoint."""
        texts = list(texts)
        for t in texts:
            key = (t._text or t.text()) if type(t) is Sentence else _checked_input(t)
            if self._cache.pop(key, None) is not None:
                self._cache_chars -= _chars(key)
        self._fresh = True
        try:
            return self.predict_proba(texts)
        finally:
            self._fresh = False

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return self.predict_proba(texts)

    # -- bookkeeping ----------------------------------------------------------------------------
    def reset_stats(self) -> QueryStats:
        """Zero the counters and return (a copy of) the old ones. The counters stay one object for the classifier's
        life: a forward that counts into them (an endpoint's HTTP requests) keeps counting into the classifier's."""
        old = QueryStats(**asdict(self.stats))
        self.stats.restore(asdict(QueryStats()))
        return old

    def clear_cache(self) -> None:
        """Forget every cached prediction (those the score cache holds are read back from it when asked again)."""
        if self._score_cache not in (None, _UNASKED):
            self._evicted.update(map(hash, self._cache))
        self._cache.clear()
        self._cache_chars = 0

    def __getstate__(self) -> dict:
        """A copy sent to another process (a Ray worker) starts with an empty cache: the cache only
        speeds up this process, and shipping up to ``cache_size`` rows would slow the start."""
        state = dict(self.__dict__)
        state["_cache"] = OrderedDict()
        state["_cache_chars"] = 0
        state["_evicted"] = set()
        # nor the score cache: a worker knows neither the driver's --store nor its --score-cache, so it reads and
        # writes no scores (what it computes comes back in its records)
        state["_score_cache"] = None
        return state

    def __repr__(self) -> str:
        return f"BatchedClassifier(name={self.name!r}, num_classes={self._num_classes}, batch_size={self.batch_size})"

    # -- internals ------------------------------------------------------------------------------
    def _forward_checked(self, chunk: list[str]) -> np.ndarray:
        return self._validate(self._timed(self.forward, chunk, 1), len(chunk))

    def _forward_ids_checked(self, batches: list[list[list[int]]]) -> list[np.ndarray]:
        raws = self._timed(self.forward.forward_ids, batches, len(batches))  # type: ignore[attr-defined]
        return [self._validate(raw, len(rows)) for raw, rows in zip(raws, batches)]

    def _timed(self, fn, arg, batches: int):
        """``fn(arg)`` with the counters of ``batches`` forwards (user code's errors as one line)."""
        clock = getattr(self.forward, "clock", None)
        d0 = clock.seconds if clock is not None else 0.0
        t0 = time.perf_counter()
        try:
            return fn(arg)
        except TextAuditError:
            raise
        except (Exception, SystemExit) as e:
            if not self.user_code:
                raise
            raise user_code_error(f"your model {self.name}", e) from e
        finally:
            self.stats.forward_seconds += time.perf_counter() - t0
            self.stats.batches += batches
            if clock is not None:
                self.stats.device_seconds += clock.seconds - d0

    def _validate(self, raw: object, n: int) -> np.ndarray:
        if hasattr(raw, "detach"):  # a torch tensor
            raw = raw.detach().float().cpu().numpy()  # type: ignore[union-attr]
        try:
            arr = np.asarray(raw, dtype=np.float64)
        except (TypeError, ValueError):
            raise TextAuditError(f"model '{self.name}' returned {type(raw).__name__}, not an array of numbers") from None
        if self.multilabel:
            return self._validate_multilabel(arr, n)
        if arr.ndim == 1 and arr.shape[0] == n and self.output == "probs":
            arr = np.stack([1.0 - arr, arr], axis=1)  # binary model returning P(class 1)
        if arr.ndim != 2 or arr.shape[0] != n:
            raise TextAuditError(
                f"model '{self.name}' returned shape {arr.shape} for {n} texts; expected ({n}, num_classes)")
        if arr.shape[1] < 2:
            raise TextAuditError(f"model '{self.name}' returned {arr.shape[1]} class column; expected at least 2")
        if not np.isfinite(arr).all():
            raise TextAuditError(f"model '{self.name}' returned NaN or infinite values")
        if self.output == "logits":
            arr = softmax(arr)
        else:
            if (arr < -1e-6).any() or (arr > 1 + 1e-6).any():
                raise TextAuditError(
                    f"model '{self.name}' returned values outside [0, 1]; if they are logits, use output='logits'")
            sums = arr.sum(axis=1)
            if np.abs(sums - 1.0).max() > 1e-3:
                raise TextAuditError(
                    f"model '{self.name}' returned rows summing to {sums[np.argmax(np.abs(sums - 1))]:.4g}, not 1; "
                    "if they are logits or scores, use output='logits'")
            arr = np.clip(arr, 0.0, 1.0)
            arr = arr / arr.sum(axis=1, keepdims=True)
        if self._num_classes is None:
            self._num_classes = arr.shape[1]
        elif arr.shape[1] != self._num_classes:
            raise TextAuditError(
                f"model '{self.name}' returned {arr.shape[1]} classes but was declared with {self._num_classes}")
        return arr.astype(np.float32)

    def _validate_multilabel(self, arr: np.ndarray, n: int) -> np.ndarray:
        """A multi-label model's rows: one probability per label (``output="logits"``: a sigmoid of each), as many as
        its declared labels."""
        want = len(self.labels) if self.labels else self._num_classes
        if arr.ndim != 2 or arr.shape[0] != n or (want is not None and arr.shape[1] != want):
            named = f" ({', '.join(self.labels)})" if self.labels else ""
            raise TextAuditError(f"multi-label model '{self.name}' returned shape {arr.shape} for {n} texts; expected "
                                 f"({n}, {want if want is not None else 'labels'}): one probability per label{named}")
        if not np.isfinite(arr).all():
            raise TextAuditError(f"model '{self.name}' returned NaN or infinite values")
        if self.output == "logits":
            arr = 1.0 / (1.0 + np.exp(-arr))
        elif (arr < -1e-6).any() or (arr > 1 + 1e-6).any():
            raise TextAuditError(f"multi-label model '{self.name}' returned values outside [0, 1]; if they are logits, "
                                 "use output='logits'")
        if self._num_classes is None:
            self._num_classes = arr.shape[1]
        return np.clip(arr, 0.0, 1.0).astype(np.float32)


def label_view(classifier: "BatchedClassifier", label: str | None, threshold: float = 0.5) -> "BatchedClassifier":
    """``--label NAME`` (``--label-threshold t``): one label of a multi-label model as a binary classifier whose rows are
    ``[1 − q, q]``, q = the label's probability p moved so that q > 1/2 exactly when p > t (q = p at t = 1/2): a flip
    is that label crossing its threshold, strictly — p = t is a tie, never a flip. Its forwards are the model's
    (one forward per text answers every label: the model's cache is shared by every view). ``label`` None: the model
    itself, which must then be single-label. One line for a label the model does not have, ``--label`` on a
    single-label model, a multi-label model without ``--label``."""
    traits = traits_of(classifier)
    multi, names = traits.multilabel, list(traits.labels or [])
    if label is None:
        if multi:
            raise TextAuditError(f"model {classifier.name} is multi-label ({', '.join(names)}): give --label NAME to "
                                 "audit one of its labels, or --label all")
        return classifier
    if not multi:
        raise _single_label(classifier, label)
    if label not in names:
        raise TextAuditError(f"model {classifier.name} has no label {label!r}; its labels: {', '.join(names)}")
    check_label_threshold(threshold)
    j = names.index(label)
    shift = float(np.log(threshold / (1 - threshold)))

    def forward(texts: list) -> np.ndarray:
        p = classifier.predict_proba(texts)[:, j].astype(np.float64)
        if shift:
            z = np.log(np.clip(p, 1e-12, 1.0)) - np.log(np.clip(1 - p, 1e-12, 1.0)) - shift
            q = np.where(p == threshold, 0.5, 1.0 / (1.0 + np.exp(-z)))
        else:
            q = p
        return np.stack([1.0 - q, q], axis=1)

    view = BatchedClassifier(forward, name=f"{classifier.name}[{label}]", labels=[f"not {label}", label], num_classes=2,
                             batch_size=max(classifier.batch_size, 1 << 20), cache_size=classifier.cache_size)
    inner = classifier
    view._fingerprint = lambda: f"{inner.fingerprint}[{label}@{threshold:g}]" if inner.fingerprint else None
    view.score_cache = None  # the model's own rows are cached (and kept on disk) already
    view.label, view.threshold, view.model = label, threshold, classifier
    return view


#: ``--label all``: every label of a multi-label model, in one run
ALL_LABELS = "all"


def each_label(classifier: "BatchedClassifier", output: str | Path | None) -> dict[str, Path | None]:
    """``--label all``: every label of a multi-label ``classifier`` → the results file of its audit (``output``'s name
    with ``.<label>`` before its suffix: one file, one header, per label, so every reader and ``--resume`` work per
    label). One line for a single-label model."""
    traits = traits_of(classifier)
    names = list(traits.labels or [])
    if not traits.multilabel:
        raise _single_label(classifier, ALL_LABELS)
    if output is None:
        return {n: None for n in names}
    out = Path(output)
    parts = label_file_parts(names)
    return {n: out.with_name(f"{out.stem}.{parts[n]}{out.suffix}") for n in names}


def label_file_parts(names: Sequence[str]) -> dict[str, str]:
    """Each label's part of a file name (:func:`~textaudit.secrets.safe_name`: redacted, no path); labels whose parts
    would be one (``a b`` and ``a_b``) each get a short digest of their own name, so no label's file is another's."""
    parts = {n: safe_name(n) for n in names}
    taken = Counter(p.lower() for p in parts.values())  # a case-insensitive file system is one name too
    return {n: p if taken[p.lower()] == 1 else f"{p}-{hashlib.blake2b(n.encode(), digest_size=3).hexdigest()}"
            for n, p in parts.items()}


def check_label_names(name: str | None, labels: Sequence[str] | None, multilabel: bool) -> None:
    """A model's class or label names: distinct (a name twice would be audited, and counted, twice); a multi-label
    model must name its labels (``--label NAME`` and every per-label file are named by them). One line otherwise."""
    if multilabel and not labels:
        raise TextAuditError(f"model {name} is multi-label (multilabel = True) but names no labels: give it labels = "
                             "[...], one name per probability it answers, in order")
    if labels is not None:
        seen = [str(x) for x in labels]
        if any(not x.strip() for x in seen):
            raise TextAuditError(f"model {name} has an empty label name among {seen!r}: name each output")
        twice = next((x for i, x in enumerate(seen) if x in seen[:i]), None)
        if twice is not None:
            raise TextAuditError(f"model {name} names {twice!r} twice among its labels ({', '.join(seen)}): each "
                                 "output needs its own name")


def check_label_threshold(threshold: float) -> None:
    """``--label-threshold``: a probability strictly between 0 and 1 (one line otherwise)."""
    if not within("label_threshold", threshold):
        raise TextAuditError(f"--label-threshold must be {range_words('label_threshold')} (got {threshold})")


def _single_label(classifier: "BatchedClassifier", label: str) -> TextAuditError:
    """``--label`` given for a model whose classes exclude each other."""
    names = list(traits_of(classifier).labels or [])
    return TextAuditError(f"--label {label}: model {classifier.name} is single-label (its classes exclude each other"
                          f"{': ' + ', '.join(names) if names else ''}); --label is for multi-label models")


def pair_inputs(texts: Sequence[str], contexts: str | Sequence[str], side: str = "second") -> list[tuple[str, str]]:
    """The classifier inputs of ``texts`` as one side of sentence pairs whose other side is
    ``contexts`` (one for all, or one per text): ``(context, text)`` for ``side="second"``,
    ``(text, context)`` for ``side="first"``."""
    if side not in ("first", "second"):
        raise TextAuditError(f"--perturb-side must be first or second (got {side!r})")
    ctx = [contexts] * len(texts) if isinstance(contexts, str) else list(contexts)
    texts = [t.text() if isinstance(t, Sentence) else t for t in texts]
    return [(c, t) if side == "second" else (t, c) for t, c in zip(texts, ctx)]


class PairView:
    """A classifier of one side of a sentence pair, the other side (``context``) fixed.

    ``side="second"`` (the default, e.g. the NLI hypothesis): ``predict_proba([t])`` asks the
    underlying classifier for ``(context, t)``; ``side="first"``: for ``(t, context)``. Query
    counters and the cache are the underlying classifier's, so budgets and statistics count every
    pair. Used by the attacks and B_{p,k} on pair data: they perturb one text and never see the other.
    """

    def __init__(self, classifier: Classifier, context: str, side: str = "second"):
        pair_inputs([], "", side)  # checks the side
        if not isinstance(context, str):
            raise TextAuditError(f"the fixed side of a pair must be a string, got {type(context).__name__}")
        self.classifier, self.context, self.side = classifier, context, side
        self.name = getattr(classifier, "name", "model")

    @property
    def num_classes(self) -> int:
        """C; when the model has not said yet, one pair (the context with itself) asks it — never a
        lone text, which a pair-only model may refuse."""
        if getattr(self.classifier, "_num_classes", 0) is None:
            self.predict_proba([self.context])
        return self.classifier.num_classes

    @property
    def labels(self):
        return getattr(self.classifier, "labels", None)

    @property
    def stats(self):
        return getattr(self.classifier, "stats", None)

    @property
    def fingerprint(self):
        return getattr(self.classifier, "fingerprint", None)

    @property
    def scores(self) -> str | None:
        return traits_of(self.classifier).scores

    @property
    def samples(self) -> int:
        return traits_of(self.classifier).samples

    @property
    def unknown_class(self) -> int | None:
        return traits_of(self.classifier).unknown_class

    @property
    def scores_description(self) -> str | None:
        return traits_of(self.classifier).scores_description

    def pairs(self, texts: Sequence[str]) -> list[tuple[str, str]]:
        """The underlying inputs of ``texts``."""
        return pair_inputs([texts] if isinstance(texts, (str, Sentence)) else texts, self.context, self.side)

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        return self.classifier.predict_proba(self.pairs(texts))

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        return decisions(self.predict_proba(texts))

    def predict_proba_fresh(self, texts: Sequence[str]) -> np.ndarray:
        fresh = getattr(self.classifier, "predict_proba_fresh", self.classifier.predict_proba)
        return fresh(self.pairs(texts))

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return self.predict_proba(texts)

    def __repr__(self) -> str:
        return f"PairView({self.name!r}, side={self.side!r})"


def scores_of(classifier: Classifier) -> str | None:
    """How ``classifier`` scores: ``logprobs``, ``labels`` (one-hot), ``sampled`` (label frequencies),
    or None for a model whose probabilities are its own (see :class:`Classifier`)."""
    traits = traits_of(classifier)
    return "sampled" if traits.scores == "labels" and traits.samples > 1 else traits.scores


#: the texts :meth:`BatchedClassifier._probe_batches` asks again, and the largest difference in probability it takes
#: for float noise (a padded batch's logits differ from a lone text's in the last bits)
PROBE_TEXTS = 4
BATCH_TOLERANCE = 1e-3


def unknown_class(classifier: Classifier) -> int | None:
    """The class index of ``unknown`` (an answer that matched no label), or None."""
    return traits_of(classifier).unknown_class


def sampled_draws(classifier: Classifier) -> int | None:
    """N when ``classifier`` answers with the frequencies of N sampled label-only answers (an endpoint with
    ``--samples N``, N > 1), else None: its probabilities are then counts / N."""
    inner = traits_of(getattr(classifier, "classifier", classifier))  # a PairView's model
    n = inner.samples
    return int(n) if inner.unknown_class is not None and isinstance(n, int) and n > 1 else None


def flips_in_draws(row: Sequence[float], reference: int, unknown: int | None, draws: int) -> int:
    """How many of ``draws`` sampled answers (``row``: their frequencies) name a known class other than
    ``reference``: the draws in which a finding flips (an ``unknown`` answer never counts as a flip; a ``reference``
    that is :data:`TIE` — no decision — has nothing to flip from: none)."""
    if reference == TIE:
        return 0
    other = sum(float(p) for c, p in enumerate(row) if c not in (reference, unknown))
    return int(round(other * draws))


def model_scores(classifier: Classifier) -> dict:
    """``{"model_scores": ...}`` for a results header where ``classifier`` says how it was scored (an
    OpenAI-compatible endpoint: log-probabilities, one-hot labels or sampled frequencies), else ``{}``."""
    text = traits_of(classifier).scores_description
    return {"model_scores": text} if text else {}


def _inner(classifier: Classifier) -> object:
    return getattr(classifier, "classifier", classifier)  # a PairView's model


def is_remote(classifier: Classifier) -> bool:
    """Whether ``classifier`` (or a PairView's model) is an endpoint: its answers are re-checked at the endpoint
    itself, and its queries are not spent on a pace."""
    return traits_of(classifier).remote


def query_stats(classifier: Classifier) -> QueryStats | None:
    """The :class:`QueryStats` of ``classifier`` (or of a PairView's model), or None for a bare callable."""
    return getattr(_inner(classifier), "stats", None)


def classifier_seconds(classifier: Classifier) -> float:
    """Seconds of the classifier's own compute so far: inside the bare module calls of a torch model
    (its ``device_seconds``); for any other model — a plug-in function, an ``llm:`` prompt without
    a clock, an endpoint — all of the time inside its forward (the function, the HTTP round trip):
    that is the model's cost, not textaudit's bookkeeping."""
    stats = query_stats(classifier)
    if stats is None:
        return 0.0
    return float((stats.device_seconds if device_clocked(classifier) else stats.forward_seconds) or 0.0)


def mlm_contexts(mlm: object | None) -> float:
    """Masked-LM contexts asked so far: forwarded, or answered by its cache or the store (0 without one)."""
    return float(sum(getattr(mlm, a, 0) or 0 for a in ("forwards", "cache_hits", "store_hits"))) if mlm is not None else 0.0


def work_counters(classifiers: Sequence[Classifier], mlm: object | None) -> tuple[float, float, float, float]:
    """What an audit asked so far, for its ETA: texts the ``classifiers`` answered (counted as each batch of a forward
    returns), masked-LM contexts (forwarded, or answered by its cache or the store), and the seconds of each
    (:func:`classifier_seconds`; the masked LM's forwards)."""
    texts = sum(float(getattr(query_stats(c), "answered", 0) or 0) for c in classifiers)
    clock = getattr(mlm, "clock", None)
    return (texts, mlm_contexts(mlm), sum(classifier_seconds(c) for c in classifiers),
            float(getattr(clock, "seconds", 0.0) or 0.0))


def forward_of(classifier: Classifier) -> object:
    """The bare forward behind ``classifier`` (a :class:`~textaudit.models.torch_backend.TorchForward`, an
    endpoint's, a plug-in's callable), or None."""
    return getattr(_inner(classifier), "forward", None)


def torch_parts(classifier: Classifier) -> tuple[object, object, str] | None:
    """``(module, tokenizer, device)`` of a torch model's forward (the zoo, ``hf:``), or None for any other."""
    fwd = forward_of(classifier)
    module, tok = getattr(fwd, "module", None), getattr(fwd, "tokenizer", None)
    if module is None or tok is None:
        return None
    return module, tok, str(getattr(fwd, "device", "cpu"))


def device_clocked(classifier: Classifier) -> bool:
    """Whether the forward times its bare module calls (a torch model: ``device_seconds``), or only its whole call
    (a plug-in, an endpoint: ``forward_seconds``)."""
    return getattr(forward_of(classifier), "clock", None) is not None


def placement(classifier: Classifier) -> tuple[str | None, str | None]:
    """``(precision, device kind)`` of the forward (None where it has neither: not a torch model)."""
    fwd = forward_of(classifier)
    device = str(getattr(fwd, "device", "") or "").split(":")[0] or None
    return getattr(fwd, "precision", None), device


def label_only_report(classifier: Classifier, pred: np.ndarray | None = None) -> dict:
    """For an OpenAI-compatible endpoint: how it was scored and, label-only, how many predictions ``pred`` were
    ``unknown`` (a completion matching no verbaliser); ``{}`` for other models."""
    text = traits_of(classifier).scores_description
    if not text:
        return {}
    out: dict = {"scores": text}
    unknown = unknown_class(classifier)
    if unknown is not None and pred is not None:
        n_unknown = int((pred == unknown).sum())
        out.update(unknown=n_unknown, unknown_share=round(n_unknown / len(pred), 4) if len(pred) else None)
    return out


def label_report(classifier: Classifier) -> dict:
    """What a label-only or log-probability endpoint says of its answers for a summary (how it was scored, the
    completions that matched no label: its forward's :meth:`~textaudit.models.http.Endpoint.label_summary`), else
    ``{}``."""
    report = getattr(forward_of(classifier), "label_summary", None)
    return report() if report is not None else {}


def reduced_precision(classifier: Classifier, mlm: object = None) -> dict:
    """``{"precision": ...}`` for a results header when the classifier's torch forward or the masked LM
    runs at reduced precision (bf16), else ``{}``: scores differ in the last digits between precisions, so a
    file written at one is never resumed at the other; fp32 headers stay as they always were."""
    inner = getattr(classifier, "classifier", classifier)  # a PairView's model
    parts = {"model": getattr(getattr(inner, "forward", None), "precision", None),
             "mlm": getattr(getattr(mlm, "mlm", mlm), "precision", None)}
    low = {k: v for k, v in parts.items() if v not in (None, "fp32")}
    return {"precision": low} if low else {}


def masked_lm_identity(mlm: object) -> dict:
    """``{"mlm": name, "mlm_fingerprint": ...}`` for a results header: the masked LM by name and by content (its
    weights, vocabulary, precision: the store's key), so that ``--resume`` under another masked LM of the same name
    is refused; ``{"mlm": None}`` without one."""
    if mlm is None:
        return {"mlm": None}
    fingerprint = getattr(mlm, "fingerprint", None) or getattr(getattr(mlm, "mlm", None), "fingerprint", None)
    return {"mlm": getattr(mlm, "name", None), "mlm_fingerprint": fingerprint}


def as_classifier(obj: object, *, output: str = "probs", name: str | None = None, batch_size: int | None = None,
                  cache_size: int = 100_000, labels: Sequence[str] | None = None) -> BatchedClassifier:
    """Return a :class:`BatchedClassifier` for ``obj``: a BatchedClassifier (returned as is), any object
    with ``predict_proba`` (scikit-learn style, given lists of strings), or a plain callable
    ``f(list[str]) -> (n, C)`` probabilities (or logits with ``output="logits"``). ``labels``: class
    names in class order (default: the object's own ``labels`` attribute, if it has one). An object with
    ``multilabel = True`` answers one independent probability per label (:meth:`BatchedClassifier._validate_multilabel`)."""
    multi = getattr(obj, "multilabel", False) is True
    if labels is None and isinstance(getattr(obj, "labels", None), (list, tuple)):
        labels = [str(x) for x in obj.labels]  # type: ignore[attr-defined]
    if isinstance(obj, (BatchedClassifier, PairView)):
        return obj  # type: ignore[return-value]
    nm = name or getattr(obj, "name", None) or getattr(obj, "__name__", None) or type(obj).__name__
    if hasattr(obj, "predict_proba") and callable(obj.predict_proba):
        nc = getattr(obj, "num_classes", None)
        return BatchedClassifier(lambda texts: obj.predict_proba(texts), output=output, name=str(nm),  # type: ignore[attr-defined]
                                 num_classes=nc if isinstance(nc, int) else None, batch_size=batch_size,
                                 cache_size=cache_size, user_code=True, labels=labels, multilabel=multi)
    if callable(obj):
        return BatchedClassifier(obj, output=output, name=str(nm), batch_size=batch_size,  # type: ignore[arg-type]
                                 cache_size=cache_size, user_code=True, labels=labels, multilabel=multi)
    raise TextAuditError(
        f"cannot use a {type(obj).__name__} as a classifier; give a callable f(list[str]) -> probabilities "
        "or an object with predict_proba")
