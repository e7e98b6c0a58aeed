"""Counterfactual token bias B_{p,k} (Double Perturbation §4, Zhang et al., NAACL 2021).

For a protected pair p = (p(1), p(2)) (he/she, actor/actress, …):

* X_p — the test sentences with exactly one occurrence of p(1) and none of p(2). Sentences with
  exactly one p(2) and no p(1) are used too, *with the pair reversed*: we always measure the same
  direction, so both kinds of sentence count towards one B.
* F_soft(x; p) = f_soft(x with p(2)) − f_soft(x with p(1)) at the pair's position, where f_soft is
  the positive-class probability (class 1) for two classes. For C > 2 classes F_soft is the
  per-class vector; its L1 norm is reported next to the per-class means (``B_l1``).
* B_{p,k} = mean of F_soft over Neighbor_k(X_p) — the union (as a multiset) of the neighbourhoods
  of the sentences of X_p; k = 0 is X_p itself. The neighbourhood never introduces a word of the
  protected lexicon (``blacklist``, default: every gendered word of resource ``gender-pairs`` plus
  pronouns, and the pair itself) and never touches the pair's position.
* k ≤ ``enumerate_k`` (default 2): Neighbor_k(x) is enumerated exactly. Larger k: ``sample``
  sentences are drawn *uniformly* from Neighbor_k(x) per source sentence (seeded; the paper's
  k = 3 neighbourhood reaches millions of sentences) and the source's mean is weighted by an
  unbiased estimate of |Neighbor_k(x)| from the rejection sampler, so B stays the pooled mean.
* 95% confidence interval: CLT for a ratio estimator clustered by source sentence,
  B = Σ_s S_s / Σ_s n_s with Var(B) ≈ m/(m−1) · Σ_s (S_s − B·n_s)² / (Σ_s n_s)² over the m source
  sentences (S_s: sum of F_soft over source s's neighbourhood, n_s its size), because the sentences
  of one neighbourhood are strongly correlated. A single source sentence gives no interval, and "the
  interval excludes 0" is a claim only from at least ``MIN_CLAIM_SOURCES`` (10) sources
  (:func:`~textaudit.fairness.estimates.claim_status`; :func:`small_samples` warns in every output).
* Sentence pairs (NLI, paraphrase): the pair word and the neighbourhood live in one text of each
  pair (``side``, default the second); the other text is kept verbatim and the classifier scores
  ``(kept, changed)`` (``(changed, kept)`` with ``side="first"``).
* A label-only model (an endpoint without log-probabilities, ``--scores labels``): f_soft is 1 where
  the model predicts class 1 and 0 elsewhere (``unknown`` included), so B_{p,k} is the difference of
  the rates of predicting class 1 with and without the swap, with the same interval; with
  ``--samples N`` f_soft is the sampled frequency.
* X_filter = {x ∈ X_p : |F_soft(x; p)| < ε} (ε = 0.005): the sentences where the naive k = 0 test
  shows no bias.
* A control pair c (``controls``, :mod:`textaudit.fairness.controls`): B_{c,k} on the very sentences of
  Neighbor_k(X_p), c(1) and c(2) swapped at p's position, and B_{p,k} − B_{c,k} with the clustered
  interval of the per-sentence differences F_p − F_c.
"""

from __future__ import annotations

import hashlib
import json
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from textaudit.backends import Backend, SerialBackend, place_on_device
from textaudit.data import check_side, load_dataset
from textaudit.engine.scheduler import Engine, Search, check_in_flight, classify, in_flight_for, run_now
from textaudit.errors import TextAuditError
from textaudit.fairness.cost import BiasClock, BiasCost, first_units
from textaudit.fairness.estimates import (
    CI_METHODS,
    MIN_CLAIM_SOURCES,
    BiasEstimate,
    ScoredUnit,
    aggregate,
    claim_status,
    l1_norm,
)
from textaudit.fairness.pairs import Source, measurable_sources, parse_pair
from textaudit.formats.jsonl import RecordSpec
from textaudit.models.batched import (
    Classifier,
    masked_lm_identity,
    mlm_contexts,
    model_scores,
    pair_inputs,
    query_stats,
    reduced_precision,
    torch_parts,
    unknown_class,
    work_counters,
)
from textaudit.neighborhoods.builder import NeighborhoodBuilder
from textaudit.neighborhoods.mlm import MaskedLM, load_mlm
from textaudit.perturbations.gender import gender_words
from textaudit.progress import WorkClock
from textaudit.runner import ResumableRun
from textaudit.sentence import Sentence, check_language, restore_case
from textaudit.shards import Shard
from textaudit.stats import format_ci

__all__ = ["CounterfactualBias", "ControlShift", "run_bias", "estimates_from_records", "report", "bias_rows",
           "BIAS_COLUMNS", "CONTROL", "DIFFERENCE", "BIAS_RECORDS"]



def _bias_unit(record: dict) -> str | None:
    sound = "unit_done" in record or ("unit" in record and "i" in record)
    return None if sound else "a bias record needs unit and i (or unit_done); was the file edited?"


#: a bias run's records (its row of :data:`textaudit.kinds.KINDS`): one per scored sentence (unit, model, i) and one
#: per finished unit (``unit_done``) — the key a merge and a resume go by
BIAS_RECORDS = RecordSpec(
    fields={"*": {"model": (str,)}},
    key=lambda r: ("done", r["unit_done"], r["model"]) if "unit_done" in r else (r["unit"], r["model"], r["i"]),
    unique=True, check=_bias_unit)

#: the name a control pair's scores go under (records, results, tables)
CONTROL = "control"
#: the name of B_p − B_control (computed, never written)
DIFFERENCE = "p − control"


class CounterfactualBias:
    """Estimate B_{p,k} for a classifier (see the module docstring for every symbol).

    Parameters
    ----------
    classifier: any textaudit classifier (``predict_proba(list[str]) -> (n, C)``).
    mlm: the masked LM of the neighbourhood (None: :func:`~textaudit.neighborhoods.load_mlm`).
    kappa, delta: κ and δ of the neighbourhood builder.
    blacklist: words the neighbourhood never introduces (default: every gendered word).
    blacklists: per pair, the words its neighbourhood never introduces instead of ``blacklist``
        (``audit bias --group``: the pair's group, :mod:`textaudit.fairness.groups`).
    enumerate_k: levels up to this k are enumerated, larger k are sampled.
    sample: sentences drawn per source sentence at each sampled k.
    seed: seed of the sampler.
    ci: how the 95% interval of B is computed: ``clustered`` (CLT) or ``bootstrap`` (see
        :mod:`~textaudit.fairness.estimates`); it changes no scored sentence.
    side: for sentence-pair data, which text of the pair holds p and is perturbed (first/second).
    language: how sentences split into words (``fr`` splits elisions; see :mod:`textaudit.sentence`).
    """

    def __init__(self, classifier: Classifier, mlm: MaskedLM | None = None, *, kappa: int = 20, delta: float = 3.0,
                 blacklist: Iterable[str] | None = None, enumerate_k: int = 2, sample: int = 200, seed: int = 0,
                 ci: str = "clustered", side: str = "second", language: str = "en",
                 blacklists: Mapping[tuple[str, str], Iterable[str]] | None = None):
        self.side = check_side(side)
        self.language = check_language(language)
        if ci not in CI_METHODS:
            raise TextAuditError(f"unknown --ci '{ci}'; use one of {', '.join(CI_METHODS)}")
        self.ci = ci
        if enumerate_k < 0:
            raise TextAuditError(f"enumerate_k must be >= 0 (got {enumerate_k})")
        if sample < 2:
            raise TextAuditError(f"--sample must be at least 2 sentences per source (got {sample})")
        if blacklist is None:
            blacklist = gender_words()
        self.classifier = classifier
        self._mlm = mlm
        self.kappa, self.delta = kappa, delta
        self.blacklist = frozenset(w.lower() for w in blacklist)
        self.blacklists = {tuple(p): frozenset(w.lower() for w in ws) for p, ws in (blacklists or {}).items()}
        self.level_contexts = [0, 0]  # every pair's builder counts its levels' contexts here (the ETA's)
        #: after :func:`run_bias` on several pairs: ``(pair, why)`` of those it left out
        self.skipped_pairs: list[tuple[tuple[str, str], str]] = []
        self.enumerate_k = enumerate_k
        self.sample_n = sample
        self.seed = seed

    @property
    def mlm(self):
        """The masked LM, loaded on first use (k = 0 needs none)."""
        if self._mlm is None:
            self._mlm = load_mlm()
        return self._mlm

    def config(self) -> dict:
        """The settings a scored sentence depends on (the results file's header; see :mod:`textaudit.formats.jsonl`)."""
        return {"model": getattr(self.classifier, "name", None),
                "model_fingerprint": getattr(self.classifier, "fingerprint", None), **model_scores(self.classifier),
                **reduced_precision(self.classifier, self._mlm), **masked_lm_identity(self._mlm),
                "kappa": self.kappa, "delta": self.delta,
                "enumerate_k": self.enumerate_k, "sample": self.sample_n, "seed": self.seed,
                **({"language": self.language} if self.language != "en" else {})}

    # -- pieces ----------------------------------------------------------------------------------
    def builder(self, pair: tuple[str, str]) -> NeighborhoodBuilder:
        """The neighbourhood builder for ``pair``: the protected lexicon and the pair are blacklisted."""
        protected = self.blacklists.get(tuple(pair), self.blacklist)
        return NeighborhoodBuilder(self.mlm, kappa=self.kappa, delta=self.delta,
                                   blacklist=protected | set(pair), seed=self.seed, language=self.language,
                                   level_contexts=self.level_contexts)

    def check_pair(self, pair: tuple[str, str]) -> None:
        """Reject a pair word the classifier or the masked LM cannot know (one-line error)."""
        vocab = _word_vocabulary(self.classifier)
        for w in pair:
            if vocab is not None and w not in vocab:
                raise TextAuditError(f"'{w}' is not in the vocabulary of model '{getattr(self.classifier, 'name', '?')}'"
                                     "; choose a pair of words the model knows")

    def _inputs(self, texts: Sequence[str | Sentence], contexts: Sequence[str | None] | None = None) -> list:
        """The classifier inputs of ``texts`` (``contexts``: the kept text of each sentence pair, or None)."""
        inputs: list = list(texts)
        if contexts is not None and any(c is not None for c in contexts):
            inputs = pair_inputs(inputs, contexts, self.side)  # type: ignore[arg-type]
        return inputs

    def _soft(self, probs: np.ndarray) -> np.ndarray:
        """f_soft of class probabilities: P(class 1) for two classes, else the probability vector; a
        label-only model's known classes only."""
        probs = np.asarray(probs, dtype=float)
        if unknown_class(self.classifier) is not None:  # label-only: the known classes' prediction rates
            probs = probs[:, :-1]
        return probs[:, 1] if probs.shape[1] == 2 else probs

    def soft_output(self, texts: Sequence[str | Sentence], contexts: Sequence[str | None] | None = None) -> np.ndarray:
        """f_soft(x): P(class 1) for two classes, else the probability vector (``contexts``: the kept
        text of each sentence pair, or None)."""
        return self._soft(self.classifier.predict_proba(self._inputs(texts, contexts)))

    def ask_pair_shift(self, sentences: Sequence[Sentence], position: int | Sequence[int], pair: tuple[str, str],
                       context: str | Sequence[str | None] | None = None) -> Search:
        """:meth:`pair_shift` as a search step: one classifier ask for y with p(1) and with p(2)."""
        if not sentences:
            C = self.classifier.num_classes - (unknown_class(self.classifier) is not None)
            return np.zeros(0) if C == 2 else np.zeros((0, C))
        w1, w2 = pair
        pos = [position] * len(sentences) if isinstance(position, int) else list(position)
        t1 = [s.replace(i, restore_case(w1, s.tokens[i])) for s, i in zip(sentences, pos)]  # sentences: scored as ids
        t2 = [s.replace(i, restore_case(w2, s.tokens[i])) for s, i in zip(sentences, pos)]
        ctx = [context] * len(sentences) if context is None or isinstance(context, str) else list(context)
        f = self._soft((yield classify(self.classifier, self._inputs(t1 + t2, ctx + ctx))))
        return f[len(t1):] - f[: len(t1)]

    def pair_shift(self, sentences: Sequence[Sentence], position: int | Sequence[int], pair: tuple[str, str],
                   context: str | Sequence[str | None] | None = None) -> np.ndarray:
        """F_soft(y; p) = f_soft(y with p(2)) − f_soft(y with p(1)) at ``position`` (one per sentence,
        or one for all) for every y — one batched classifier call. ``context``: the kept text of a
        sentence pair (one for all, or one per sentence)."""
        return run_now(self.ask_pair_shift(sentences, position, pair, context))

    def ask_neighborhood(self, src: Source, pair: tuple[str, str], k: int, sampled_k: int | None = None) -> Search:
        """:meth:`neighborhood` as a search (the masked LM asked level by level, or proposal by proposal)."""
        b = self.builder(pair)
        if sampled_k is None:
            nbrs = (yield from b.ask_neighbors(src.sentence, k, protected=[src.position])) if k > 0 else []
            return ([src.sentence] + [nb.sentence for nb in nbrs],
                    np.array([0] + [nb.distance for nb in nbrs]), None)
        seed = int(hashlib.md5(f"{self.seed}|{src.text}|{sampled_k}".encode()).hexdigest()[:8], 16)
        draws, stats = yield from b.ask_sample(src.sentence, sampled_k, self.sample_n, protected=[src.position],
                                               seed=seed)
        return [d.sentence for d in draws], np.array([d.distance for d in draws]), float(stats["size_estimate"])

    def neighborhood(self, src: Source, pair: tuple[str, str], k: int, sampled_k: int | None = None
                      ) -> tuple[list[Sentence], np.ndarray, float | None]:
        """Return ``(sentences, distances, weight)``: with ``sampled_k`` None, {x} ∪ Neighbor_k(x)
        enumerated (weight None); else ``sample`` uniform draws from Neighbor_{sampled_k}(x) and the
        estimated |Neighbor_{sampled_k}(x)| as weight."""
        return run_now(self.ask_neighborhood(src, pair, k, sampled_k))

    def plan(self, sources: Sequence[Source], k: int) -> list[tuple[Source, int | None]]:
        """The units B_{p,0..k} needs: ``(source, None)`` = the enumerated block up to
        min(k, enumerate_k); ``(source, k′)`` = one uniform sample at a sampled level k′."""
        return [(s, None) for s in sources] + [(s, kk) for kk in range(self.enumerate_k + 1, k + 1) for s in sources]

    def ask_score_unit(self, src: Source, pair: tuple[str, str], k: int, sampled_k: int | None,
                       scorers: Sequence["CounterfactualBias"] = ()) -> Search:
        """:meth:`score_unit` as a search: the unit's sentences built once (masked-LM asks), then one
        classifier ask per scorer."""
        sents, dist, weight = yield from self.ask_neighborhood(src, pair, min(k, self.enumerate_k), sampled_k)
        texts = [s.text() for s in sents]
        out = []
        for sc in [self, *scorers]:
            F = yield from sc.ask_pair_shift(sents, src.position, pair, src.context)
            out.append(ScoredUnit(src, sampled_k, texts, dist, F, weight))
        return out

    def score_unit(self, src: Source, pair: tuple[str, str], k: int, sampled_k: int | None,
                   scorers: Sequence["CounterfactualBias"] = ()) -> list[ScoredUnit]:
        """Build one unit's sentences once and score them with ``self`` and every extra scorer."""
        return run_now(self.ask_score_unit(src, pair, k, sampled_k, scorers))

    # -- estimates -------------------------------------------------------------------------------
    def estimate(self, pair: tuple[str, str] | str, k: int, texts: Sequence[str] | None = None, *,
                 filtered: bool = False, epsilon: float = 0.005) -> BiasEstimate:
        """Return B_{p,k} over ``texts`` (default: SST-2 dev) — see :meth:`estimate_all`."""
        return self.estimate_all(pair, k, texts, filtered=filtered, epsilon=epsilon)[k]

    def estimate_all(self, pair: tuple[str, str] | str, k: int, texts: Sequence[str] | None = None, *,
                     filtered: bool = False, epsilon: float = 0.005, ids: Sequence[str] | None = None
                     ) -> dict[int, BiasEstimate]:
        """Return {k′: B_{p,k′}} for k′ = 0..k (one neighbourhood computation for all of them;
        :func:`run_bias` for one pair, nothing written)."""
        pair = parse_pair(pair) if isinstance(pair, str) else tuple(pair)
        if texts is None:
            texts = list(load_dataset("sst2", default_split="dev")["text"])
        results = run_bias(self, [pair], k, texts, ids=ids, filtered=filtered, epsilon=epsilon, progress=False)
        by_k = next(iter(results.values()))[pair]
        if filtered and not by_k:
            raise TextAuditError(f"no sentence of X_p has |F_soft| < ε = {epsilon}: the filtered set is empty "
                                 "(raise --epsilon)")
        return by_k

    def sources(self, texts: Sequence[str], pair: tuple[str, str], *, ids: Sequence[str] | None = None,
                filtered: bool = False, epsilon: float = 0.005, contexts: Sequence[str] | None = None) -> list[Source]:
        """X_p (or X_filter with ``filtered``) of ``texts``; sentences under two words are dropped
        (``contexts``: the kept texts of sentence pairs)."""
        self.check_pair(pair)
        src = measurable_sources(texts, pair, ids, contexts, self.language)
        if not src:
            raise TextAuditError(f"no sentence of the data contains exactly one '{pair[0]}' or one '{pair[1]}'; "
                                 "choose another pair or other data")
        if filtered:
            src = self.filter_sources(src, pair, epsilon)
            if not src:
                raise TextAuditError(f"no sentence of X_p has |F_soft| < ε = {epsilon}: the filtered set is empty "
                                     "(raise --epsilon)")
        return src

    def filter_sources(self, sources: Sequence[Source], pair: tuple[str, str], epsilon: float = 0.005) -> list[Source]:
        """X_filter: the sources with |F_soft(x; p)| < ε (L1 norm for C > 2)."""
        if not sources:
            return []
        F0 = l1_norm(self.pair_shift([s.sentence for s in sources], [s.position for s in sources], pair,
                                     [s.context for s in sources]))
        return [s for s, f in zip(sources, F0) if abs(f) < epsilon]



class ControlShift(CounterfactualBias):
    """The estimator's classifier and neighbourhoods with the control pair c of each protected pair p
    swapped at p's position instead of p: F_c(x) = f_soft(x with c(2)) − f_soft(x with c(1))."""

    def __init__(self, estimator: CounterfactualBias, controls: Mapping[tuple[str, str], tuple[str, str]]):
        self.__dict__.update(estimator.__dict__)  # the same classifier, masked LM and settings
        self.controls = {tuple(p): tuple(c) for p, c in controls.items()}

    def check_pair(self, pair: tuple[str, str]) -> None:
        super().check_pair(self.controls[tuple(pair)])  # type: ignore[arg-type]

    def ask_pair_shift(self, sentences: Sequence[Sentence], position: int | Sequence[int], pair: tuple[str, str],
                       context: str | Sequence[str | None] | None = None) -> Search:
        return (yield from super().ask_pair_shift(sentences, position, self.controls[tuple(pair)], context))  # type: ignore[index]


def difference_units(main: Sequence[ScoredUnit], control: Sequence[ScoredUnit]) -> list[ScoredUnit]:
    """Units of F_p − F_c, sentence by sentence (the two lists hold the same units in the same order)."""
    return [ScoredUnit(u.source, u.k, u.texts, u.distance, u.F - c.F, u.weight) for u, c in zip(main, control)]


def _word_vocabulary(classifier: Classifier) -> set[str] | None:
    """The word vocabulary of a zoo word model (None for sub-word or opaque models)."""
    parts = torch_parts(classifier)
    vocab = getattr(parts[1] if parts else None, "vocab", None)
    stoi = getattr(vocab, "stoi", None)
    return set(stoi) if isinstance(stoi, dict) else None


# -- the one orchestration: plans, resumable units, estimates ------------------------------------------
# Run B_{p,k} for several pairs (and optionally a second model on the same neighbourhoods):
# progress, every scored sentence pair appended to a JSONL file as each unit finishes, resume.
#
# Output lines (``--output``):
#
# * one per scored sentence pair: ``{"unit", "model", "i", "source", "pair", "reversed", "distance",
#   "text", "F"}`` — ``text`` is the neighbourhood sentence as it stands (holding the source's pair
#   word), ``F`` = F_soft = f_soft(with p(2)) − f_soft(with p(1));
# * one marker per finished unit and model: ``{"unit_done", "model", "n", "weight", "sampled_k"}``.
#
# A unit is one source sentence's enumerated block or one sampled level. On ``--resume`` units with
# a marker are read back instead of recomputed; lines of a unit cut off by a kill are ignored and
# the unit is redone.


def _unit_id(pair: tuple[str, str], src: Source, sampled_k: int | None) -> str:
    """A unit's sentences do not depend on filtering, so a ``--filtered`` run reuses a full run's units."""
    return f"{pair[0]},{pair[1]}|{src.id}|{'enum' if sampled_k is None else f'k={sampled_k}'}"


def _read_unit(src: Source, marker: dict, rows: list[dict]) -> ScoredUnit:
    """A scored unit as its rows and marker in a results file hold it (the inverse of what run_bias writes)."""
    return ScoredUnit(src, marker.get("sampled_k"), [r["text"] for r in rows], np.array([r["distance"] for r in rows]),
                      np.array([r["F"] for r in rows], dtype=float), marker.get("weight"))


#: the fields of a scored sentence and of a unit's marker that its digest covers (everything a B is computed from)
_ROW_FIELDS = ("unit", "model", "i", "source", "pair", "reversed", "distance", "text", "F")
_MARKER_FIELDS = ("unit_done", "model", "n", "weight", "sampled_k", "pair", "source", "context")


def unit_digest(rows: Sequence[dict], marker: dict) -> str:
    """The digest a unit's marker carries (``sha256``, 32 hex digits): of its scored sentences and its own fields as
    the file holds them, so that a unit edited after its run (a sentence, an F) is refused by every reader instead of
    being replayed or resumed as if the run had scored it."""
    body = [[r.get(f) for f in _ROW_FIELDS] for r in rows] + [[marker.get(f) for f in _MARKER_FIELDS]]
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
                          ).hexdigest()[:32]


def _finished_units(records: list[dict]) -> dict[tuple[str, str], tuple[dict, list[dict]]]:
    """Return {(unit, model): (marker, lines)} for the finished units among an output's records; a unit whose
    marker's digest (:func:`unit_digest`) does not match its lines is one line (files from before the digest have
    none to check)."""
    lines: dict[tuple[str, str], dict[int, dict]] = {}
    markers: dict[tuple[str, str], dict] = {}
    for r in records:
        if "unit_done" in r:
            markers[(r["unit_done"], r["model"])] = r
        elif "unit" in r:
            lines.setdefault((r["unit"], r["model"]), {})[r["i"]] = r
    out = {key: (m, [lines.get(key, {})[i] for i in sorted(lines.get(key, {}))]) for key, m in markers.items()
           if len(lines.get(key, {})) == m["n"]}
    for (uid, model), (m, rows) in out.items():
        if "sha256" in m and unit_digest(rows, m) != m["sha256"]:
            raise TextAuditError(f"the scored sentences of bias unit {uid!r} ({model}) do not match the digest its run "
                                 "wrote: the file was edited after the run; restore it, or rerun into a new --output")
    return out


class UnitJob:
    """The work of one unit (a source at one k, or its enumerated block), as a worker does it: the
    scored sentences under the estimator's classifier and each ``other`` estimator's."""

    def __init__(self, estimator: CounterfactualBias, k: int, others: Sequence[CounterfactualBias],
                 in_flight: int | None = None):
        place_on_device(estimator, *others)
        self.estimator, self.k, self.others = estimator, k, list(others)
        self.in_flight = in_flight

    def __call__(self, job: tuple[tuple[str, str], Source, int | None]) -> list[ScoredUnit]:
        pair, src, sampled_k = job
        return self.estimator.score_unit(src, pair, self.k, sampled_k, self.others)

    def many(self, jobs: Sequence[tuple[str, tuple[tuple[str, str], Source, int | None]]]
             ) -> Iterator[tuple[str, list[ScoredUnit]]]:
        """``(unit id, scored units)`` as units finish, ``in_flight`` of them built and scored at once by
        one engine: their masked-LM asks merged into one forward per step, their classifier asks too."""
        n = in_flight_for(self.estimator.classifier, self.in_flight)
        est = self.estimator

        def start(job: tuple[tuple[str, str], Source, int | None]):
            return lambda _meter: est.ask_score_unit(job[1], job[0], self.k, job[2], self.others)

        yield from Engine(n).run((uid, start(job)) for uid, job in jobs)


def estimates_from_records(records: Sequence[dict], k: int, enumerate_k: int,
                           ci: str = "clustered") -> dict[str, dict[tuple[str, str], dict[int, BiasEstimate]]]:
    """{model: {pair: {k′: BiasEstimate}}} from the finished units of a results file alone (its
    shards merged, for instance): every unit counts (X_filter is not in the records)."""
    units: dict[str, dict[tuple[str, str], list[ScoredUnit]]] = {}
    finished = _finished_units(list(records))
    for (_, model), (m, rows) in finished.items():
        # only the id of the source is needed here: aggregate pools F by unit
        src = Source(m["source"], None, -1, bool(rows and rows[0]["reversed"]))  # type: ignore[arg-type]
        units.setdefault(model, {}).setdefault((m["pair"][0], m["pair"][1]), []).append(_read_unit(src, m, rows))
    if CONTROL in units:  # B_p − B_c over the units both have, sentence by sentence
        main = next(n for n in units if n != CONTROL)
        both = [(uid, m) for (uid, m) in finished if m == main and (uid, CONTROL) in finished]
        for uid, _ in both:
            marker, rows = finished[(uid, main)]
            src = Source(marker["source"], None, -1, False)  # type: ignore[arg-type]
            (d,) = difference_units([_read_unit(src, marker, rows)], [_read_unit(src, *finished[(uid, CONTROL)])])
            units.setdefault(DIFFERENCE, {}).setdefault((marker["pair"][0], marker["pair"][1]), []).append(d)
    return {model: {pair: aggregate(us, pair, k, enumerate_k, ci) for pair, us in per.items()} for model, per in units.items()}


def _scorers(estimator: CounterfactualBias, compare: CounterfactualBias | None,
             controls: Mapping[tuple[str, str], tuple[str, str]] | None) -> tuple[list, list[str]]:
    """The scorers of every unit and their names in the records: the model, the ``compare`` model (both
    numbered when their names clash) and the control pairs' shift (:data:`CONTROL`)."""
    scorers: list = [estimator] + ([compare] if compare is not None else [])
    names = [getattr(s.classifier, "name", f"model{i}") for i, s in enumerate(scorers)]
    if len(set(names)) < len(names) or CONTROL in names:
        names = [f"{n}#{i}" for i, n in enumerate(names)]
    if controls:
        scorers.append(ControlShift(estimator, controls))
        names.append(CONTROL)
    return scorers, names


def _plans(estimator: CounterfactualBias, scorers: list, names: list[str], pairs: Sequence[tuple[str, str]], k: int,
           texts: Sequence[str], ids: list[str], contexts: Sequence[str] | None, max_sources: int | None,
           epsilon: float | None) -> list[tuple[tuple[str, str], list, dict[str, set[str]]]]:
    """Per measurable pair: its units (the sources X_p, at most ``max_sources``, and their sampled k) and, per
    scorer, the ids of the sources its B is taken over — all of them, or with ``epsilon`` its own X_filter
    (|F_soft| < ε). A pair the data or a model cannot measure is left out (said in ``skipped_pairs``) when
    there are others."""
    plans = []
    estimator.skipped_pairs = []  # several pairs (a group, a pairs file): those the data or a model cannot measure
    for pair in pairs:
        try:
            for sc in scorers:
                sc.check_pair(pair)
            sources = estimator.sources(texts, pair, ids=ids, contexts=contexts)
        except TextAuditError as e:
            if len(pairs) == 1:
                raise
            estimator.skipped_pairs.append((pair, str(e)))
            continue
        sources = sources[:max_sources] if max_sources is not None else sources
        if epsilon is not None:
            # X_filter is each model's own: the sentences where *its* naive k = 0 test shows no bias; the control
            # is measured where the model's own X_filter is
            keep = {n: sc.filter_sources(sources, pair, epsilon) for n, sc in zip(names, scorers) if n != CONTROL}
            if CONTROL in names:
                keep[CONTROL] = keep[names[0]]
            used = {s.id for ks in keep.values() for s in ks}
            sources = [s for s in sources if s.id in used]
        else:
            keep = {n: sources for n in names}
        plans.append((pair, estimator.plan(sources, k), {n: {s.id for s in ks} for n, ks in keep.items()}))
    if not plans:
        raise TextAuditError(f"none of the {len(pairs)} pairs can be measured on this data and model "
                             f"(the first: {estimator.skipped_pairs[0][1]})")
    if epsilon is not None and not any(ids_ for *_, kp in plans for ids_ in kp.values()):
        raise TextAuditError(f"no sentence has |F_soft| < ε = {epsilon} for any pair and model (raise --epsilon)")
    return plans


def _settings(estimator: CounterfactualBias, k: int, config: dict | None, max_sources: int | None, pairs_data: bool,
              compare: CounterfactualBias | None, controls: Mapping[tuple[str, str], tuple[str, str]] | None) -> dict:
    """The results header's settings: a resume or a shard with other settings is refused."""
    settings = {**estimator.config(), "k": k, **(config or {})}
    # which sources are scored: a resume or a shard with another --max-sources is refused (--filtered is not
    # here: X_filter is a subset of the sources, chosen again from the records, so a filtered run may read an
    # unfiltered file)
    settings["max_sources"] = max_sources
    if pairs_data:
        settings["perturb_side"] = estimator.side
    if compare is not None:
        settings.update(compare=compare.config()["model"], compare_fingerprint=compare.config()["model_fingerprint"])
    if controls:
        settings["controls"] = {f"{p[0]},{p[1]}": f"{c[0]},{c[1]}" for p, c in controls.items()}
    return settings


def _live(estimator: CounterfactualBias, scorers: list, cost: BiasCost) -> tuple[tuple, BiasClock]:
    """The progress line's live fields — sentences scored and masked contexts answered, as the work is done — and
    the :class:`~textaudit.fairness.cost.BiasClock` whose ETA follows them."""
    counted = [query_stats(getattr(sc, "classifier", sc)) for sc in scorers]

    def scored() -> float:
        return float(sum(getattr(st, "answered", 0) or 0 for st in counted if st is not None))

    def contexts() -> float:  # (the masked LM as loaded, on first use: k = 0 loads none)
        return mlm_contexts(estimator._mlm)

    work = WorkClock(scored, lambda: 0.0, unit="scored", more={"contexts": contexts})
    counts = estimator.level_contexts
    clock = BiasClock(cost, lambda: work_counters([getattr(sc, "classifier", sc) for sc in scorers], estimator._mlm),
                      lambda: list(counts))
    return (work.fields, clock.remaining), clock


def _read_back(run: ResumableRun, jobs: list, names: list[str],
               units: dict[tuple[tuple[str, str], str], list[ScoredUnit]]) -> list:
    """The units a resumed file holds for every scorer go into ``units``; returns the jobs left to score."""
    previous = _finished_units(run.previous)
    run.previous = []
    todo = []
    for uid, (pair, src, sampled_k) in jobs:
        if not all((uid, n) in previous for n in names):
            todo.append((uid, (pair, src, sampled_k)))
            continue
        for n in names:
            units[(pair, n)].append(_read_unit(src, *previous[(uid, n)]))
    return todo


def _unit_records(uid: str, name: str, u: ScoredUnit, pair: tuple[str, str], src: Source, sampled_k: int | None
                  ) -> list[dict]:
    """A scored unit as records: one per sentence pair (its text, distance and F) and the unit's marker last
    (what a resume reads back: ``unit_done``)."""
    rows = [{"unit": uid, "model": name, "i": i, "source": src.id, "pair": list(pair),
             "reversed": src.reversed, "distance": int(d), "text": t,
             "F": np.round(f, 6).tolist() if np.ndim(f) else round(float(f), 6)}
            for i, (t, d, f) in enumerate(zip(u.texts, u.distance, u.F))]
    marker = {"unit_done": uid, "model": name, "n": len(u.texts), "weight": u.weight,
              "sampled_k": sampled_k, "pair": list(pair), "source": src.id}
    if src.context is not None:
        marker["context"] = src.context  # the kept text of the pair, verbatim
    marker["sha256"] = unit_digest(rows, marker)
    return [*rows, marker]


def run_bias(estimator: CounterfactualBias, pairs: Sequence[tuple[str, str]], k: int, texts: Sequence[str], *,
             ids: Sequence[str] | None = None, compare: CounterfactualBias | None = None, output=None,
             resume: bool = False, filtered: bool = False, epsilon: float = 0.005, max_sources: int | None = None,
             progress: bool = True, config: dict | None = None,
             shard: Shard | None = None, backend: Backend | None = None,
             contexts: Sequence[str] | None = None, in_flight: int | None = None,
             controls: Mapping[tuple[str, str], tuple[str, str]] | None = None
             ) -> dict[str, dict[tuple[str, str], dict[int, BiasEstimate]]]:
    """Return {model name: {pair: {k′: BiasEstimate}}} for k′ = 0..k over ``texts``.

    ``compare``: a second estimator (another classifier) scored on the *same* sentences.
    ``filtered``: each model's B is taken over its own X_filter (|F_soft| < ε under that model); a
    pair whose X_filter is empty for a model gets no estimates (``by_k`` empty).
    ``max_sources``: use only the first N sentences of X_p per pair (X_filter is taken among them,
    so a ``--filtered`` run reuses the units of a full run with the same cap).
    ``config``: settings beyond the estimators' own (e.g. the data) for the header of ``output``;
    a ``resume`` with other settings is refused. ``shard``: ``(i, N)``: score only that shard's
    units (the estimates then cover them alone; ``audit merge`` joins the shards). ``backend``: where
    the units are scored (:mod:`textaudit.backends`; default: here, in order). ``contexts``: for
    sentence pairs, the kept text of each of ``texts`` (the estimators' ``side`` says which text of
    the pair ``texts`` are). ``in_flight``: units built and scored at once, their asks merged into one
    forward per step (:mod:`textaudit.engine.scheduler`; default: from the device); the scored
    sentences do not depend on it. ``controls``: ``{pair: control pair}``: B of each pair's control on
    the same sentences (under :data:`CONTROL`) and B_p − B_c (under :data:`DIFFERENCE`; see the module
    docstring).
    """
    if len(texts) == 0:
        raise TextAuditError("no sentences to measure bias on (empty dataset)")
    if in_flight is not None:
        check_in_flight(in_flight)
    if k < 0:
        raise TextAuditError(f"--k must be >= 0 (got {k})")
    ids = list(ids) if ids is not None else [str(i) for i in range(len(texts))]
    scorers, names = _scorers(estimator, compare, controls)
    plans = _plans(estimator, scorers, names, pairs, k, texts, ids, contexts, max_sources,
                   epsilon if filtered else None)
    units: dict[tuple[tuple[str, str], str], list[ScoredUnit]] = {(pair, n): [] for pair, *_ in plans for n in names}
    jobs = [(_unit_id(pair, src, sampled_k), (pair, src, sampled_k)) for pair, plan, _ in plans
            for src, sampled_k in plan]
    # the scored sentences are not kept in memory (B_{p,3} reaches millions); finished units are read back once
    settings = _settings(estimator, k, config, max_sources, contexts is not None, compare, controls)
    with ResumableRun(output, resume=resume, id_key="unit_done", keep=False, progress=progress, command="bias",
                      config=settings, shard=shard, spec=BIAS_RECORDS) as run:
        todo = _read_back(run, jobs, names, units)
        job_of = dict(todo)
        make_worker = lambda: UnitJob(estimator, k, scorers[1:], in_flight)  # noqa: E731
        cost = BiasCost(k, estimator.enumerate_k, estimator.sample_n, len(scorers))
        first = None
        timed = first_units(len(todo))
        if progress and todo and (backend is None or isinstance(backend, SerialBackend)):
            # said before the work is spent; the first units run alone and are timed for the estimate
            cost.say_plan([p for p, *_ in plans], [j for _, j in todo], len(jobs) - len(todo), timed)
            firsts: list = []

            def first(job, scored, seconds):
                firsts.append((job, scored[0]))
                if len(firsts) < timed:
                    return
                cost.measure_units([(j, u.distance) for j, u in firsts])
                if clock is not None:
                    clock.first_done([j for _, j in todo], [j for j, _ in firsts])
                cost.say_estimate([j for _, j in todo], [j for j, _ in firsts], sum(len(u.texts) for _, u in firsts),
                                  seconds, left=clock.left() if clock is not None else None)
        live, clock = _live(estimator, scorers, cost) if backend is None or isinstance(backend, SerialBackend) else (None, None)
        for uid, scored in run.results(todo, make_worker, desc=f"bias k<={k}", unit="unit", skip=lambda _: False,
                                       backend=backend, cost=cost.sentences, first=first, first_count=timed,
                                       weighted_eta=True,
                                       group=in_flight_for(estimator.classifier, in_flight), live=live):
            pair, src, sampled_k = job_of[uid]
            for n, u in zip(names, scored):
                units[(pair, n)].append(u)
                run.write(*_unit_records(uid, n, u, pair, src, sampled_k))
            run.show(pair="/".join(pair))
    if controls:
        names.append(DIFFERENCE)
        for pair, _, keep_ids in plans:
            units[(pair, DIFFERENCE)] = difference_units(units[(pair, names[0])], units[(pair, CONTROL)])
            keep_ids[DIFFERENCE] = keep_ids[names[0]]
    return {n: {pair: aggregate([u for u in units[(pair, n)] if u.source.id in keep_ids[n]], pair, k,
                                estimator.enumerate_k, estimator.ci)
                for pair, _, keep_ids in plans}
            for n in names}


def report(results: dict[str, dict[tuple[str, str], dict[int, BiasEstimate]]]) -> dict:
    """The ``--json`` object: ``{"model", "pairs": [{"pair", "by_k": {"0": {...}}}], "compare"?}``; with no
    results (a run stopped before it scored its first sentence pair), ``{"model": None, "pairs": [], "note"}``."""
    names = [n for n in results if n not in (CONTROL, DIFFERENCE)]
    if not names:
        return {"model": None, "pairs": [], "note": NOTHING_SCORED}

    def one(name: str) -> dict:
        return {"model": name, "pairs": [{"pair": list(p), "by_k": {str(kk): e.to_dict() for kk, e in by_k.items()}}
                                         for p, by_k in results[name].items()]}

    out = one(names[0])
    if len(names) > 1:
        out["compare"] = one(names[1])
    if CONTROL in results:  # {"pairs": [...]} each: the control's B on the pair's sentences, and B_p − B_c
        out["control"] = {"pairs": one(CONTROL)["pairs"]}
        out["control_difference"] = {"pairs": one(DIFFERENCE)["pairs"]}
    return out


#: what a summary or report of a bias file without a scored sentence pair says
NOTHING_SCORED = ("no sentence pair is scored yet: the run stopped before its first one finished "
                  "(rerun it with --resume to continue)")

#: fewer sources X_p than this and an interval of B rests on too few independent sentences to trust
MIN_SOURCES = 30


def small_samples(results: dict, ci: str = "clustered", label: str | None = None) -> list[str]:
    """One warning per (model, pair) whose estimates rest on few sources, the same in every output (the CLI, ``--json``,
    the report, a suite's gates): one source — no interval at all; fewer than :data:`MIN_CLAIM_SOURCES` — an interval
    but no claim ("CI excludes 0" says ``no claim``); fewer than :data:`MIN_SOURCES` — a rough interval. ``label``:
    the label of a multi-label run the results are of."""
    out = []
    for name, per_pair in results.items():
        if name in (CONTROL, DIFFERENCE):  # the model's own sources: said once, for the model
            continue
        for p, by_k in per_pair.items():
            n = min((e.sources for e in by_k.values()), default=0)
            if n >= MIN_SOURCES:
                continue
            fix = "more data (--data, --max-sources)" + ("" if ci == "bootstrap" or n < 2 else " or --ci bootstrap")
            what = f"B for {p[0]}→{p[1]} on {name}" + (f" (label {label})" if label is not None else "")
            out.append(f"warning: {what} {few_sources(n)}; give {fix}")
    return out


def few_sources(n: int) -> str:
    """What an estimate on ``n`` < :data:`MIN_SOURCES` source sentences is worth, the same words in every warning
    (audit bias's, harden's): ``rests on N source sentences: …``."""
    rests = f"rests on {n} source sentence{'s' if n != 1 else ''}"
    if n < 2:
        return f"{rests}: no interval and no claim (an interval needs at least two)"
    if n < MIN_CLAIM_SOURCES:
        return f"{rests}: its interval is rough and no claim is made (a claim needs {MIN_CLAIM_SOURCES})"
    return f"{rests} (fewer than {MIN_SOURCES}): its interval is rough"


#: what the k = 0 row of a B_{p,k} table is, said under the table
K0_NOTE = ("k = 0: the source sentences themselves, with only the pair's word swapped; each k ≥ 1 adds the "
           "neighbours up to k words away (Neighbor_k)")

#: the columns of a B_{p,k} table (the CLI's, audit merge's and the report's)
BIAS_COLUMNS = ["model", "pair", "k", "B", "95% CI", "sentences", "sources", "CI excludes 0"]


def bias_rows(results: dict, classes: Sequence[str] | None = None,
              controls: Mapping[tuple[str, str], tuple[str, str]] | None = None) -> list[list]:
    """The table rows of ``{model: {pair: {k: BiasEstimate}}}``; with ``classes`` (C > 2) a last column
    of the per-class mean shifts (B is then their L1 norm); ``controls``: the pair column of a control
    row names its control pair."""
    def per_class(e) -> list:
        if not classes or e.per_class is None:
            return []
        return [" ".join(f"{c}:{v:+.4f}" for c, v in zip(classes, e.per_class))]

    def label(name: str, p: tuple[str, str]) -> str:
        c = (controls or {}).get(tuple(p))  # type: ignore[arg-type]
        if name == CONTROL and c:
            return f"{c[0]}→{c[1]} (control of {p[0]}→{p[1]})"
        return f"{p[0]}→{p[1]}" + (f" − {c[0]}→{c[1]}" if name == DIFFERENCE and c else "")

    return [[name, label(name, p), kk, f"{e.B:+.5f}", format_ci(e.ci95, 5, signed=True), int(e.n), e.sources,
             claim_status(e)] + per_class(e)
            for name, per_pair in results.items() for p, by_k in per_pair.items() for kk, e in by_k.items()]
