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
  of one neighbourhood are strongly correlated. With a single source sentence the interval falls
  back to the i.i.d. CLT over its sentences (``ci_method`` says which).
* X_filter = {x ∈ X_p : |F_soft(x; p)| < ε} (ε = 0.005): the sentences where the naive k = 0 test
  shows no bias.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import numpy as np

from textaudit.errors import TextAuditError
from textaudit.neighborhoods.builder import NeighborhoodBuilder
from textaudit.sentence import Sentence, restore_case

__all__ = ["GENDER_PAIRS", "Source", "BiasEstimate", "CounterfactualBias", "find_sources", "clustered_mean",
           "parse_pair", "load_pairs_file"]

#: The gender pairs the Double Perturbation paper reports (§4.2, Fig. 5/Table 5).
GENDER_PAIRS: list[tuple[str, str]] = [("he", "she"), ("his", "her"), ("him", "her"), ("men", "women"),
                                        ("man", "woman"), ("actor", "actress")]
GROUPS = {"gender": GENDER_PAIRS}


def parse_pair(text: str) -> tuple[str, str]:
    """Parse ``"he,she"`` (or ``he/she``, ``he she``) into a lowercased pair."""
    parts = [p for p in text.replace("/", ",").replace(" ", ",").split(",") if p]
    if len(parts) != 2 or not all(p.isalpha() for p in parts):
        raise TextAuditError(f"'{text}' is not a word pair; write it as two alphabetic words, e.g. --pair he,she")
    a, b = (p.lower() for p in parts)
    if a == b:
        raise TextAuditError(f"the pair '{text}' uses the same word twice; give two different words")
    return a, b


def load_pairs_file(path: str) -> list[tuple[str, str]]:
    """Read pairs from a file: one pair per line (``w1,w2``, ``w1 w2`` or tab-separated), or a JSON
    list of two-word lists; ``#`` starts a comment."""
    import json
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise TextAuditError(f"pairs file {path} not found")
    text = p.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            return [parse_pair(",".join(x)) for x in json.loads(text)]
        except (json.JSONDecodeError, TypeError) as e:
            raise TextAuditError(f"{path} is not a JSON list of word pairs ({e})") from None
    pairs = [parse_pair(line.split("#")[0].replace("\t", ",").strip())
             for line in text.splitlines() if line.split("#")[0].strip()]
    if not pairs:
        raise TextAuditError(f"{path} holds no word pairs; write one pair per line, e.g. 'he,she'")
    return pairs


@dataclass(frozen=True)
class Source:
    """A sentence of X_p: the pair's word sits at ``position``; ``reversed``: it holds p(2)."""

    id: str
    sentence: Sentence
    position: int
    reversed: bool

    @property
    def text(self) -> str:
        return self.sentence.text()


def find_sources(texts: Sequence[str], pair: tuple[str, str], ids: Sequence[str] | None = None) -> list[Source]:
    """Return X_p: sentences with exactly one p(1) and no p(2), and (reversed) exactly one p(2) and no p(1)."""
    w1, w2 = pair
    ids = list(ids) if ids is not None else [str(i) for i in range(len(texts))]
    out = []
    for id_, t in zip(ids, texts):
        s = Sentence.parse(t)
        low = [w.lower() for w in s.tokens]
        c1, c2 = low.count(w1), low.count(w2)
        if c1 == 1 and c2 == 0:
            out.append(Source(id_, s, low.index(w1), False))
        elif c2 == 1 and c1 == 0:
            out.append(Source(id_, s, low.index(w2), True))
    return out


def clustered_mean(sums: Sequence[np.ndarray], sizes: Sequence[float], values: Sequence[np.ndarray] = ()
                   ) -> tuple[np.ndarray, np.ndarray, str]:
    """Return ``(B, half_width_95, method)`` of the pooled mean Σ S_s / Σ n_s (see the module
    docstring). ``values``: the single cluster's raw values, for the i.i.d. fallback when m = 1."""
    S = np.asarray(sums, dtype=float)
    n = np.asarray(sizes, dtype=float)
    m = len(n)
    total = n.sum()
    B = S.sum(0) / total
    if m >= 2:
        resid = S - B[None] * n[:, None] if S.ndim == 2 else S - B * n
        var = m / (m - 1) * (resid ** 2).sum(0) / total ** 2
        return B, 1.96 * np.sqrt(var), "clustered CLT over source sentences"
    v = np.asarray(values, dtype=float)
    if len(v) >= 2:
        return B, 1.96 * v.std(0, ddof=1) / math.sqrt(len(v)), "i.i.d. CLT (one source sentence)"
    return B, np.full_like(np.atleast_1d(B), np.nan, dtype=float).reshape(np.shape(B)), "none (one sentence)"


@dataclass
class BiasEstimate:
    """B_{p,k} with its 95% CI, the number of scored sentences ``n`` and of source sentences."""

    pair: tuple[str, str]
    k: int
    B: float
    ci95: tuple[float, float]
    n: float
    sources: int
    ci_method: str
    sampled: bool = False
    per_class: list[float] | None = None  # C > 2: the per-class mean of F_soft (``B`` is its L1 norm)
    size: float = 0.0  # |Neighbor_k(X_p)| as a multiset: exact when enumerated, estimated when sampled
    values: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)

    def to_dict(self) -> dict:
        d = {"B": _r(self.B), "ci95": [_r(self.ci95[0]), _r(self.ci95[1])], "n": int(round(self.n)),
             "sources": self.sources, "ci_method": self.ci_method, "sampled": self.sampled,
             "neighbourhood_size": int(round(self.size))}
        if self.per_class is not None:
            d["per_class"] = [_r(v) for v in self.per_class]
        return d

    @property
    def significant(self) -> bool:
        """True when the 95% CI excludes 0."""
        lo, hi = self.ci95
        return bool(lo > 0 or hi < 0)


def _r(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else round(float(v), 6)


@dataclass
class ScoredUnit:
    """The scored sentences of one source at one neighbourhood level (or one sampled k)."""

    source: Source
    k: int | None  # None: the enumerated block (distances 0..enumerate_k); else the sampled k
    texts: list[str]
    distance: np.ndarray
    F: np.ndarray  # (n,) for two classes, (n, C) otherwise
    weight: float | None = None  # sampled: estimated |Neighbor_k(x)|


class CounterfactualBias:
    """Estimate B_{p,k} for a classifier (see the module docstring for every symbol).

    Parameters
    ----------
    classifier: any textaudit classifier (``predict_proba(list[str]) -> (n, C)``).
    mlm: the masked LM of the neighbourhood (None: :func:`~textaudit.neighborhoods.load_mlm`).
    kappa, delta: κ and δ of the neighbourhood builder.
    blacklist: words the neighbourhood never introduces (default: every gendered word).
    enumerate_k: levels up to this k are enumerated, larger k are sampled.
    sample: sentences drawn per source sentence at each sampled k.
    seed: seed of the sampler.
    """

    def __init__(self, classifier, mlm=None, *, kappa: int = 20, delta: float = 3.0,
                 blacklist: Iterable[str] | None = None, enumerate_k: int = 2, sample: int = 200, seed: int = 0):
        if enumerate_k < 0:
            raise TextAuditError(f"enumerate_k must be >= 0 (got {enumerate_k})")
        if sample < 2:
            raise TextAuditError(f"--sample must be at least 2 sentences per source (got {sample})")
        if blacklist is None:
            from textaudit.perturbations.gender import gender_words

            blacklist = gender_words()
        self.classifier = classifier
        self._mlm = mlm
        self.kappa, self.delta = kappa, delta
        self.blacklist = frozenset(w.lower() for w in blacklist)
        self.enumerate_k = enumerate_k
        self.sample_n = sample
        self.seed = seed

    @property
    def mlm(self):
        """The masked LM, loaded on first use (k = 0 needs none)."""
        if self._mlm is None:
            from textaudit.neighborhoods import load_mlm

            self._mlm = load_mlm()
        return self._mlm

    # -- pieces ----------------------------------------------------------------------------------
    def builder(self, pair: tuple[str, str]) -> NeighborhoodBuilder:
        """The neighbourhood builder for ``pair``: the protected lexicon and the pair are blacklisted."""
        return NeighborhoodBuilder(self.mlm, kappa=self.kappa, delta=self.delta,
                                   blacklist=self.blacklist | set(pair), seed=self.seed)

    def check_pair(self, pair: tuple[str, str]) -> None:
        """Reject a pair word the classifier or the masked LM cannot know (one-line error)."""
        vocab = _word_vocabulary(self.classifier)
        for w in pair:
            if vocab is not None and w not in vocab:
                raise TextAuditError(f"'{w}' is not in the vocabulary of model '{getattr(self.classifier, 'name', '?')}'"
                                     "; choose a pair of words the model knows")

    def f_soft(self, texts: Sequence[str]) -> np.ndarray:
        """f_soft: P(class 1) for two classes, else the probability vector."""
        probs = np.asarray(self.classifier.predict_proba(list(texts)), dtype=float)
        return probs[:, 1] if probs.shape[1] == 2 else probs

    def F_soft(self, sentences: Sequence[Sentence], position: int | Sequence[int], pair: tuple[str, str]
               ) -> np.ndarray:
        """F_soft(y; p) = f_soft(y with p(2)) − f_soft(y with p(1)) at ``position`` (one per sentence,
        or one for all) for every y — one batched classifier call."""
        if not sentences:
            C = self.classifier.num_classes
            return np.zeros(0) if C == 2 else np.zeros((0, C))
        w1, w2 = pair
        pos = [position] * len(sentences) if isinstance(position, int) else list(position)
        t1 = [s.replace(i, restore_case(w1, s.tokens[i])).text() for s, i in zip(sentences, pos)]
        t2 = [s.replace(i, restore_case(w2, s.tokens[i])).text() for s, i in zip(sentences, pos)]
        f = self.f_soft(t1 + t2)
        return f[len(t1):] - f[: len(t1)]

    def neighbourhood(self, src: Source, pair: tuple[str, str], k: int, sampled_k: int | None = None
                      ) -> tuple[list[Sentence], np.ndarray, float | None]:
        """Return ``(sentences, distances, weight)``: with ``sampled_k`` None, {x} ∪ Neighbor_k(x)
        enumerated (weight None); else ``sample`` uniform draws from Neighbor_{sampled_k}(x) and the
        estimated |Neighbor_{sampled_k}(x)| as weight."""
        b = self.builder(pair)
        if sampled_k is None:
            nbrs = list(b.iter_neighbors(src.sentence, k, protected=[src.position])) if k > 0 else []
            return ([src.sentence] + [nb.sentence for nb in nbrs],
                    np.array([0] + [nb.distance for nb in nbrs]), None)
        import hashlib

        seed = int(hashlib.md5(f"{self.seed}|{src.text}|{sampled_k}".encode()).hexdigest()[:8], 16)
        draws = b.sample(src.sentence, sampled_k, self.sample_n, protected=[src.position], seed=seed)
        return ([d.sentence for d in draws], np.array([d.distance for d in draws]),
                float(b.last_sample_stats["size_estimate"]))

    def plan(self, sources: Sequence[Source], k: int) -> list[tuple[Source, int | None]]:
        """The units B_{p,0..k} needs: ``(source, None)`` = the enumerated block up to
        min(k, enumerate_k); ``(source, k′)`` = one uniform sample at a sampled level k′."""
        return [(s, None) for s in sources] + [(s, kk) for kk in range(self.enumerate_k + 1, k + 1) for s in sources]

    def score_unit(self, src: Source, pair: tuple[str, str], k: int, sampled_k: int | None,
                   scorers: Sequence["CounterfactualBias"] = ()) -> list[ScoredUnit]:
        """Build one unit's sentences once and score them with ``self`` and every extra scorer."""
        sents, dist, weight = self.neighbourhood(src, pair, min(k, self.enumerate_k), sampled_k)
        texts = [s.text() for s in sents]
        return [ScoredUnit(src, sampled_k, texts, dist, sc.F_soft(sents, src.position, pair), weight)
                for sc in [self, *scorers]]

    # -- estimates -------------------------------------------------------------------------------
    def estimate(self, pair: tuple[str, str] | str, k: int, texts: Sequence[str] | None = None, *,
                 filtered: bool = False, epsilon: float = 0.005) -> BiasEstimate:
        """Return B_{p,k} over ``texts`` (default: SST-2 dev) — see :meth:`estimate_all`."""
        return self.estimate_all(pair, k, texts, filtered=filtered, epsilon=epsilon)[k]

    def estimate_all(self, pair: tuple[str, str] | str, k: int, texts: Sequence[str] | None = None, *,
                     filtered: bool = False, epsilon: float = 0.005, ids: Sequence[str] | None = None
                     ) -> dict[int, BiasEstimate]:
        """Return {k′: B_{p,k′}} for k′ = 0..k (one neighbourhood computation for all of them)."""
        pair = parse_pair(pair) if isinstance(pair, str) else tuple(pair)
        if texts is None:
            from textaudit.data import load_dataset

            texts = list(load_dataset("sst2", default_split="dev")["text"])
        sources = self.sources(texts, pair, ids=ids, filtered=filtered, epsilon=epsilon)
        units = [self.score_unit(src, pair, k, kk)[0] for src, kk in self.plan(sources, k)]
        return aggregate(units, pair, k, self.enumerate_k)

    def sources(self, texts: Sequence[str], pair: tuple[str, str], *, ids: Sequence[str] | None = None,
                filtered: bool = False, epsilon: float = 0.005) -> list[Source]:
        """X_p (or X_filter with ``filtered``) of ``texts``; sentences under two words are dropped."""
        self.check_pair(pair)
        src = [s for s in find_sources(texts, pair, ids) if sum(t.isalpha() for t in s.sentence.tokens) >= 2]
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
        F0 = _l1(self.F_soft([s.sentence for s in sources], [s.position for s in sources], pair))
        return [s for s, f in zip(sources, F0) if abs(f) < epsilon]


def _l1(F: np.ndarray) -> np.ndarray:
    return F if F.ndim == 1 else np.abs(F).sum(1)


def _word_vocabulary(classifier) -> set[str] | None:
    """The word vocabulary of a zoo word model (None for sub-word or opaque models)."""
    tok = getattr(getattr(classifier, "forward", None), "tokenizer", None)
    vocab = getattr(tok, "vocab", None)
    stoi = getattr(vocab, "stoi", None)
    return set(stoi) if isinstance(stoi, dict) else None


def aggregate(units: Sequence[ScoredUnit], pair: tuple[str, str], k: int, enumerate_k: int) -> dict[int, BiasEstimate]:
    """Pool scored units into {k′: BiasEstimate} for k′ = 0..k (see the module docstring)."""
    out: dict[int, BiasEstimate] = {}
    for kk in range(k + 1):
        sums, sizes, vals = [], [], []
        sampled = kk > enumerate_k
        for u in units:
            if sampled:
                if u.k != kk or not len(u.F):
                    continue
                w = u.weight if u.weight is not None and math.isfinite(u.weight) else len(u.F)
                sums.append(u.F.mean(0) * w)
                sizes.append(w)
                vals.append(u.F)
            else:
                if u.k is not None:
                    continue
                sel = u.F[u.distance <= kk]
                if not len(sel):
                    continue
                sums.append(sel.sum(0))
                sizes.append(len(sel))
                vals.append(sel)
        if not sizes:
            continue
        B, half, method = clustered_mean(sums, sizes, vals[0] if len(vals) == 1 else ())
        n = float(sum(len(v) for v in vals))
        if np.ndim(B) == 0:
            est = BiasEstimate(pair, kk, float(B), (float(B - half), float(B + half)), n, len(sizes), method, sampled)
        else:
            # C > 2: B is the L1 norm of the per-class mean; its CI from the per-class half-widths
            l1 = float(np.abs(B).sum())
            lo = float(np.clip(np.abs(B) - half, 0, None).sum())
            est = BiasEstimate(pair, kk, l1, (lo, float((np.abs(B) + half).sum())), n, len(sizes),
                               method + "; L1 bounds from per-class intervals", sampled, per_class=B.tolist())
        est.values = np.concatenate([_l1(v) if v.ndim > 1 else v for v in vals])
        est.size = float(sum(sizes))
        out[kk] = est
    return out
