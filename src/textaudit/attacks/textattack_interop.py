"""TextAttack interoperability (extra ``textaudit[textattack]``): run TextAttack's search methods
and recipes on any textaudit classifier, with offline components textaudit supplies.

- :func:`model_wrapper` — a textaudit classifier as a ``textattack.models.wrappers.ModelWrapper``
  (``.model`` is the classifier; calls return class probabilities).
- :func:`counterfitted_embedding` — a ``textattack.shared.WordEmbedding`` whose nearest-neighbour
  matrix is the counter-fitted neighbour lists (the paper's substitution set; resource
  ``counterfitted-neighbors``) and whose vectors are GloVe-50d: ``WordSwapEmbedding`` proposes
  exactly the synonyms textaudit's own Genetic attack uses.
- :class:`MiniLMSentenceEncoder` — TextAttack's ``SentenceEncoder`` over the MiniLM-L6 encoder
  (the stand-in for USE, with the calibrated threshold ``BAE_THRESHOLD``).
- :func:`build_recipe` — ``genetic`` (AlzantotGeneticAlgorithm: population 60, 40 generations, ≤ 8
  synonyms, stop words protected, ≤ 20 % of words) and ``bae`` (BAE-R: delete-importance greedy
  search, the offline masked LM's top 50, MiniLM similarity) built from those components; any other
  TextAttack recipe name (``pwws``, ``textfooler``, …) or dotted class path is built by TextAttack
  itself, which may need downloads this machine cannot make (a one-line error says so).

``recipe`` (:mod:`textaudit.attacks.recipes`) is the native attacks' own: ``relaxed`` builds the two without the
constraints that need a download; ``paper`` adds them as TextAttack's ``faster-alzantot`` and ``bae`` recipes apply
them, over the *same objects* the native attacks use, so a side-by-side run differs only in the search code:

- :func:`CausalLMWindow` — TextAttack's ``LanguageModelConstraint`` on textaudit's causal LM (SmolLM2 in the role of
  the learning-to-write LM): log P of the 6 words around each swap within 5 nats of the original's;
- :func:`TaggerPartOfSpeech` — TextAttack's ``PartOfSpeech`` constraint tagging with a
  :class:`~textaudit.attacks.pos.PartOfSpeech` (TextBlob's Pattern tagger in NLTK's role);
- the MiniLM encoder compared over the 15 words around the swap, shorter sentences skipped (USE's window).

Counter-fitted *distances* (``faster-alzantot``'s ``WordEmbeddingDistance``) need the counter-fitted vectors, which
are not here: neither side applies it (the neighbour lists are the counter-fitted ones already).

Importing TextAttack needs NLTK's English stop-word list and TextAttack's post-install marker;
:func:`import_textattack` provides both offline (the stop words written are textaudit's own list,
:data:`textaudit.text.STOPWORDS`, only when NLTK has none).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from textaudit.attacks.base import Budget, Found, Goal
from textaudit.attacks.first_order import BAE_THRESHOLD, FirstOrderAttack
from textaudit.attacks.pos import PartOfSpeech
from textaudit.attacks.recipes import DEFAULT_RECIPE, recipe_options
from textaudit.errors import TextAuditError
from textaudit.files import atomic_path
from textaudit.lexicons import counterfitted_neighbors
from textaudit.lm import LazyCausalLM
from textaudit.models.batched import Classifier, as_classifier
from textaudit.models.encoders import SentenceEncoder
from textaudit.models.zoo.vocab import glove_index
from textaudit.neighborhoods.mlm import MaskedLM, load_mlm
from textaudit.resources import cache_dir
from textaudit.sentence import Sentence
from textaudit.text import STOPWORDS

__all__ = ["require_textattack", "import_textattack", "model_wrapper", "counterfitted_embedding", "MiniLMSentenceEncoder",
           "CausalLMWindow", "TaggerPartOfSpeech", "build_recipe", "TextAttackRecipe", "OFFLINE_RECIPES"]

#: recipes textaudit builds from offline components (other names are TextAttack's own recipes)
OFFLINE_RECIPES = ("genetic", "bae")

_TA: Any = None
#: environment variables ``import textattack`` overwrites (textattack/shared/utils/install.py)
_ENV_TEXTATTACK_SETS = ("HF_HOME", "XDG_CACHE_HOME", "PYTORCH_TRANSFORMERS_CACHE", "TFHUB_CACHE_DIR",
                        "TOKENIZERS_PARALLELISM")


def _ensure_nltk_stopwords() -> None:
    import nltk

    try:
        nltk.data.find("corpora/stopwords/english")
        return
    except LookupError:
        pass
    root = cache_dir() / "nltk_data"
    target = root / "corpora" / "stopwords" / "english"
    if not target.is_file():
        with atomic_path(target, unmarked="a stopword list in textaudit's cache") as tmp:
            tmp.write_text("\n".join(sorted(w for w in STOPWORDS if w.isalpha())) + "\n")
    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))


def require_textattack() -> None:
    """A one-line error when the ``textattack`` extra is not installed (cheap: nothing is imported)."""
    if importlib.util.find_spec("textattack") is None:
        raise TextAuditError("TextAttack is not installed; install the extra: "
                             "pip install 'textaudit[textattack]' (it pins transformers<5)")


def import_textattack():
    """Import and return ``textattack`` after making its import work offline (cache dir with the
    post-install marker, so no NLTK download is attempted; NLTK stop words present)."""
    global _TA
    if _TA is not None:
        return _TA
    require_textattack()
    ta_cache = Path(os.environ.setdefault("TA_CACHE_DIR", str(cache_dir() / "textattack")))
    ta_cache.mkdir(parents=True, exist_ok=True)
    (ta_cache / "post_install_check_3").touch()
    _ensure_nltk_stopwords()
    # TextAttack points HF_HOME, XDG_CACHE_HOME, … at its own cache dir when imported, which would
    # move textaudit's user cache and the HuggingFace cache for the rest of the process: undo that
    saved = {k: os.environ.get(k) for k in _ENV_TEXTATTACK_SETS}
    try:
        import textattack
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    # TextAttack warns that it does not know our model wrapper's class ("Unknown if model ...
    # compatible"): it is compatible by construction, and the warning is noise in our output
    logging.getLogger("textattack.shared.utils.install").addFilter(
        lambda record: not str(record.msg).startswith("Unknown if model"))
    _TA = textattack
    return textattack


def model_wrapper(classifier):
    """Return ``classifier`` (anything :func:`textaudit.models.as_classifier` accepts) as a TextAttack
    ``ModelWrapper``: ``wrapper(texts) -> (n, C)`` probabilities, ``wrapper.model`` the classifier."""
    ta = import_textattack()

    class TextAuditModelWrapper(ta.models.wrappers.ModelWrapper):
        """A textaudit classifier seen by TextAttack (batched, device-aware, probabilities out)."""

        def __init__(self, clf):
            self.model = clf

        def __call__(self, text_input_list, **kwargs):
            return np.asarray(self.model.predict_proba([str(t) for t in text_input_list]), dtype=np.float32)

    return TextAuditModelWrapper(as_classifier(classifier))


def counterfitted_embedding(neighbors: dict[str, list[str]] | None = None, max_candidates: int = 8):
    """``textattack.shared.WordEmbedding`` over every word of the counter-fitted lists: vectors from
    GloVe-50d (zeros when GloVe lacks the word), ``nn_matrix`` row w = [w, its ≤ ``max_candidates``
    neighbours nearest first, padded with w] — TextAttack skips a candidate equal to the word."""
    ta = import_textattack()
    if neighbors is None:
        neighbors = counterfitted_neighbors()
    words = sorted(set(neighbors) | {n for ns in neighbors.values() for n in ns})
    index = {w: i for i, w in enumerate(words)}
    glove_ix, glove = glove_index()
    matrix = np.zeros((len(words), glove.shape[1]), dtype=np.float32)
    for w, i in index.items():
        j = glove_ix.get(w)
        if j is not None:
            matrix[i] = glove[j]
    nn = np.empty((len(words), max_candidates + 1), dtype=np.int64)
    for w, i in index.items():
        row = [i] + [index[n] for n in neighbors.get(w, [])[:max_candidates]]
        nn[i] = row + [i] * (max_candidates + 1 - len(row))
    return ta.shared.WordEmbedding(matrix, index, dict(enumerate(words)), nn)


@lru_cache(maxsize=1)
def _sentence_encoder_class():
    import_textattack()
    from textattack.constraints.semantics.sentence_encoders import SentenceEncoder as TASentenceEncoder

    class MiniLMSentenceEncoder(TASentenceEncoder):
        """TextAttack sentence-encoder constraint on MiniLM-L6 (mean pooled, cosine), whole sentences
        compared with the original — the same test as textaudit's BAE."""

        def __init__(self, encoder=None, threshold: float = BAE_THRESHOLD, **kwargs):
            kwargs.setdefault("metric", "cosine")
            kwargs.setdefault("compare_against_original", True)
            super().__init__(threshold=threshold, **kwargs)
            self.model = self
            self._encoder = SentenceEncoder() if encoder is None else encoder

        def encode(self, sentences):
            return self._encoder.encode([str(s) for s in sentences])

    return MiniLMSentenceEncoder


def MiniLMSentenceEncoder(encoder=None, threshold: float = BAE_THRESHOLD, **kwargs):  # noqa: N802 (a class factory)
    """Return TextAttack's ``SentenceEncoder`` constraint over MiniLM-L6 (see module docstring)."""
    return _sentence_encoder_class()(encoder, threshold, **kwargs)


@lru_cache(maxsize=1)
def _lm_constraint_class():
    import_textattack()
    import torch
    from textattack.constraints.grammaticality.language_models import LanguageModelConstraint

    class CausalLMWindowConstraint(LanguageModelConstraint):
        """Jia et al.'s LM rule as TextAttack's ``LearningToWriteLanguageModel`` applies it — log P of the
        ``window_size`` words around each newly changed word (``text_window_around_index``), rejected when it is
        ``max_log_prob_diff`` or more below the original's — with a textaudit causal LM's ``log_likelihood``."""

        def __init__(self, lm, window_size: int = 6, max_log_prob_diff: float = 5.0, compare_against_original=True):
            self.lm, self.window_size = lm, window_size
            super().__init__(max_log_prob_diff=max_log_prob_diff, compare_against_original=compare_against_original)

        def get_log_probs_at_index(self, text_list, word_index):
            windows = [t.text_window_around_index(word_index, self.window_size) for t in text_list]
            return torch.tensor(np.asarray(self.lm.log_likelihood(windows), dtype=np.float64))

    return CausalLMWindowConstraint


def CausalLMWindow(lm=None, window_size: int = 6, max_log_prob_diff: float = 5.0):  # noqa: N802 (a class factory)
    """TextAttack's language-model constraint over textaudit's causal LM ``lm`` (default: SmolLM2, loaded lazily)
    with ``faster-alzantot``'s window (6) and threshold (5 nats)."""
    if lm is None:
        lm = LazyCausalLM()
    return _lm_constraint_class()(lm, window_size, max_log_prob_diff)


@lru_cache(maxsize=1)
def _pos_constraint_class():
    import_textattack()
    from textattack.constraints.grammaticality import PartOfSpeech as TAPartOfSpeech

    class TaggerPartOfSpeechConstraint(TAPartOfSpeech):
        """TextAttack's ``PartOfSpeech`` constraint (its context, cache and verb ↔ noun rule) whose tags come from a
        :class:`textaudit.attacks.pos.PartOfSpeech` — the tagger textaudit's BAE uses."""

        def __init__(self, pos, allow_verb_noun_swap: bool = True, compare_against_original=True):
            super().__init__(tagger_type="nltk", tagset="universal", allow_verb_noun_swap=allow_verb_noun_swap,
                             compare_against_original=compare_against_original)
            self.pos = pos

        def _get_pos(self, before_ctx, word, after_ctx):
            return self.pos.tag_in_context(tuple(before_ctx), word, tuple(after_ctx))

    return TaggerPartOfSpeechConstraint


def TaggerPartOfSpeech(pos=None, allow_verb_noun_swap: bool = True):  # noqa: N802 (a class factory)
    """TextAttack's part-of-speech constraint tagging with ``pos`` (default: TextBlob's Pattern tagger)."""
    if pos is None:
        pos = PartOfSpeech()
    return _pos_constraint_class()(pos, allow_verb_noun_swap)


def build_recipe(name: str, classifier, *, recipe: str | None = None, mlm=None, encoder=None, lm=None, pos=None,
                 neighbors=None, threshold: float | None = None, max_queries: int | None = None):
    """Return a ``textattack.Attack`` for recipe ``name`` on ``classifier``.

    ``genetic``/``bae`` use textaudit's offline components (see module docstring), with the constraints of
    ``recipe`` (``relaxed`` or ``paper``; ``lm`` and ``pos`` are the causal LM and tagger ``paper`` uses); any other
    name is a TextAttack recipe (its CLI names, e.g. ``pwws``, or a dotted class path)."""
    ta = import_textattack()
    from textattack.constraints.overlap import MaxWordsPerturbed
    from textattack.constraints.pre_transformation import RepeatModification, StopwordModification
    from textattack.goal_functions import UntargetedClassification

    wrapper = model_wrapper(classifier)
    goal = UntargetedClassification(wrapper, query_budget=max_queries or float("inf"))
    stop = StopwordModification(stopwords=STOPWORDS)
    if name == "genetic":
        from textattack.search_methods import AlzantotGeneticAlgorithm
        from textattack.transformations import WordSwapEmbedding

        transformation = WordSwapEmbedding(max_candidates=8, embedding=counterfitted_embedding(neighbors))
        constraints = [RepeatModification(), stop, MaxWordsPerturbed(max_percent=0.2)]
        if recipe_options("genetic", recipe).get("lm_rule") == "jia":
            constraints.append(CausalLMWindow(lm))
        search = AlzantotGeneticAlgorithm(pop_size=60, max_iters=40, post_crossover_check=False)
        return ta.Attack(goal, constraints, transformation, search)
    if name == "bae":
        from textattack.search_methods import GreedyWordSwapWIR
        from textattack.transformations import WordSwapMaskedLM

        if mlm is None:
            mlm = load_mlm(quiet=True)
        if not hasattr(mlm, "model") or not hasattr(mlm, "tokenizer"):
            raise TextAuditError(f"TextAttack's BAE needs a HuggingFace masked LM; '{mlm.name}' is not one")
        transformation = WordSwapMaskedLM(method="bae", masked_language_model=mlm.model, tokenizer=mlm.tokenizer,
                                          max_candidates=50, min_confidence=0.0)
        preset = recipe_options("bae", recipe)
        window = {"window_size": preset["window"], "skip_text_shorter_than_window": True} if preset["window"] else {}
        constraints = [RepeatModification(), stop, *([TaggerPartOfSpeech(pos)] if preset["pos"] else []),
                       MiniLMSentenceEncoder(encoder, threshold if threshold is not None else BAE_THRESHOLD, **window)]
        return ta.Attack(goal, constraints, transformation, GreedyWordSwapWIR(wir_method="delete"))
    from textattack.attack_args import ATTACK_RECIPE_NAMES

    if recipe is not None:
        raise TextAuditError(f"--recipe applies to textattack:{' and textattack:'.join(OFFLINE_RECIPES)}; "
                             f"TextAttack's own recipe '{name}' is built as TextAttack publishes it")
    path = ATTACK_RECIPE_NAMES.get(name, name)
    module_name, _, cls_name = path.rpartition(".")
    try:
        built = getattr(importlib.import_module(module_name), cls_name) if module_name else None
    except (ImportError, AttributeError):
        built = None
    if built is None:
        raise TextAuditError(f"unknown TextAttack recipe '{name}'; use {', '.join(OFFLINE_RECIPES)} (offline), "
                             f"one of {', '.join(ATTACK_RECIPE_NAMES)}, or a dotted class path")
    try:
        return built.build(wrapper)
    except Exception as e:  # noqa: BLE001 - TextAttack raises whatever its downloads raise
        lines = [ln.strip(" *") for ln in str(e).splitlines() if any(ch.isalnum() for ch in ln)]
        first = (lines or [type(e).__name__])[0][:200]
        raise TextAuditError(f"TextAttack recipe '{name}' could not be built offline ({type(e).__name__}: {first}); "
                             f"textattack:genetic and textattack:bae run with offline components") from None


class TextAttackRecipe(FirstOrderAttack):
    """A TextAttack recipe behind textaudit's attack interface: same result schema, summary and
    resume as the native attacks (``method`` = ``textattack:<name>``; ℓ0 = words changed). A time
    budget cannot stop a TextAttack search, so only a query budget is accepted."""

    def __init__(self, classifier: Classifier, name: str, *, recipe: str | None = None, mlm: MaskedLM | None = None,
                 encoder: SentenceEncoder | None = None, lm=None, pos=None, threshold: float | None = None,
                 neighbors: dict[str, list[str]] | None = None, max_queries: int | None = None,
                 time_budget: float | None = None, seed: int = 0):
        if time_budget is not None:
            raise TextAuditError("a time budget cannot stop a TextAttack search; use a query budget (--max-queries)")
        super().__init__(classifier, max_queries=max_queries, seed=seed)
        self.method = f"textattack:{name}"
        self.mlm = mlm
        # textaudit's own recipes take ``recipe`` (default relaxed, as for the native attacks); the rest none
        self.recipe = (recipe or DEFAULT_RECIPE) if name in OFFLINE_RECIPES else None
        self._attack = build_recipe(name, self.classifier, recipe=self.recipe, mlm=mlm, encoder=encoder, lm=lm,
                                    pos=pos, threshold=threshold, neighbors=neighbors, max_queries=self.max_queries)

    def helpers(self) -> list:
        """The LM, tagger and encoder its constraints ask (their seconds count with the classifier's)."""
        found = []
        for c in self._attack.constraints + self._attack.pre_transformation_constraints:
            found += [getattr(c, a) for a in ("lm", "pos", "_encoder") if getattr(c, a, None) is not None]
        return found

    def settings(self) -> dict:
        """The recipe and, for ``paper``, the LM's and the tagger's names (as the native attacks' headers)."""
        if self.recipe is None:
            return {}
        out: dict[str, Any] = {"recipe": self.recipe}
        for h in self.helpers():
            if hasattr(h, "log_likelihood"):
                out["lm"] = getattr(h, "name", type(h).__name__)
            elif hasattr(h, "tag_in_context"):
                out["pos_tagger"] = h.name
        return out

    def on_pair(self, context: str, side: str = "second") -> "TextAttackRecipe":
        """TextAttack's search holds its own model wrapper of single texts: sentence pairs are refused."""
        raise TextAuditError(f"{self.method} attacks single texts; for sentence pairs use so-beam, so-enum, "
                             "genetic or bae")

    def search(self, x0: Sentence, goal: Goal, budget: Budget, rng: np.random.Generator) -> Found | None:
        from textattack.attack_results import SuccessfulAttackResult

        t0 = time.perf_counter()
        try:
            result = self._attack.attack(x0.text(), goal.c)
        finally:
            budget.add_outside_seconds(time.perf_counter() - t0)
        ta_goal = self._attack.goal_function
        budget.outside_queries += int(ta_goal.num_queries)  # TextAttack calls the model itself, past the engine
        if not isinstance(result, SuccessfulAttackResult):
            if ta_goal.num_queries >= ta_goal.query_budget:
                budget.stop("query budget exhausted")
            return None
        x = Sentence.parse(result.perturbed_result.attacked_text.text)
        _, pred = self._target_prob([x], goal.c)
        return Found(x, int(pred[0]))
