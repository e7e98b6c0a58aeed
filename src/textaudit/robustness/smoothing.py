"""Randomized-smoothing certificates against synonym substitution, for any classifier (SAFER).

SAFER (Ye, Gong & Liu, ACL 2020, "SAFER: A Structure-free Approach for Certified Robustness to
Adversarial Word Substitutions") smooths a classifier f over random synonym substitutions and
certifies the smoothed classifier from f's predictions alone — hf:, llm:, endpoints and plug-ins
alike, label-only ones included (smoothing needs votes, not probabilities).

* Perturbation sets (SAFER §3.1): an adversary may replace word x_j by any w′ ∈ S(x_j), the first
  ``max_subs`` − 1 counter-fitted neighbours of x_j — the substitutions the zoo's IBP models are
  certified against (:func:`textaudit.models.zoo.ibp.substitution_table`); smoothing draws from T_w ⊇
  {w} ∪ S(w) (:class:`PerturbationSets`: the neighbours' own substitutes too, by default, for larger
  overlaps); a word without neighbours keeps itself.
* Random perturbation Π_x (SAFER eq. 2): every word x_j replaced independently by a uniform draw
  from T_{x_j}; the smoothed classifier g(x) = argmax_c P_{z∼Π_x}(f(z) = c).
* The certificate (SAFER Theorem 1): for x′ that substitutes words of x within their sets,
  |P_{z∼Π_x}(f(z) = c) − P_{z∼Π_x′}(f(z) = c)| ≤ TV(Π_x, Π_x′) ≤ Δ = 1 − ∏_j q_j, the product over the
  substituted positions of the overlap of uniform draws, q_j = min_{w′ ∈ S(x_j)} |T_{x_j} ∩ T_{w′}| /
  max(|T_{x_j}|, |T_{w′}|) (the worst substitute). g(x′) = g(x) = c_A whenever p_A − Δ > ½. For a
  radius R (at most R words substituted) Δ_R takes the R smallest q_j; the certified radius is the
  largest R with p_A − Δ_R > ½ (R = n: every word at once, what IBP certifies).
* Estimating p_A (SAFER §3.3, after Cohen, Rosenfeld & Kolter 2019's CERTIFY): a selection sample
  of ``selection`` draws names c_A (its most frequent class); an estimation sample of ``samples``
  draws counts n_A; p_A is bounded below by the one-sided Clopper–Pearson bound at level 1 − α
  (``alpha``). When that bound does not exceed ½ the smoothed classifier **abstains** (no
  prediction, no certificate). A label-only model's "unknown" answer is never c_A.
* Every draw is seeded by (``seed``, the example's id and text): certificates do not depend on the
  order, on ``--in-flight`` or on a resume.
* The second-order view (``--neighbors k``; the Double Perturbation paper's question): for each
  certified input x0 (right, with a certified radius ≥ ``view_radius``: 0 by default, the smoothed
  prediction right at confidence 1 − α; 1, no single substitution changes it), up to ``neighbors``
  natural neighbours x̃ ∈ Neighbor_k(x0) (the masked LM's, κ and δ as the attacks'), each certified in
  turn (certified: right, radius ≥ ``view_radius``), and on each whose radius is below 1 (a single
  synonym may change it), up to ``patches`` synonym swaps p tried for a flip of the smoothed
  prediction, g(x̃) ≠ g(x̃ ⊕ p). The summary gives the share of certified inputs all of whose sampled
  neighbours are certified, and the share with a neighbour that flips under a patch, with Wilson
  intervals.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from textaudit.engine.scheduler import Engine, Search, classify, in_flight_for
from textaudit.errors import TextAuditError
from textaudit.formats.jsonl import RecordSpec
from textaudit.lexicons import counterfitted_neighbors
from textaudit.models.batched import (
    TIE,
    decisions,
    mlm_contexts,
    query_stats,
    sampled_draws,
    scores_of,
    unknown_class,
    work_counters,
)
from textaudit.progress import WorkClock
from textaudit.request import range_words, within
from textaudit.robustness.certify_clock import CertifyClock
from textaudit.runner import ResumableRun
from textaudit.sentence import Sentence, restore_case
from textaudit.stats import wilson

__all__ = ["PerturbationSets", "delta", "certified_radius", "lower_bound", "SAFER", "RanMASK", "kept_words",
           "ranmask_delta", "ranmask_radius", "certified_accuracy", "SMOOTHING", "CERTIFY_RECORDS"]

#: a certification's records (both rows of :data:`textaudit.kinds.KINDS`): smoothing's one per example, IBP's one
#: per model, each by its id — once: a repeat (lines pasted from another copy) would count an input twice
CERTIFY_RECORDS = RecordSpec(fields={"*": {"id": (str,)}}, unique=True)

#: the randomized-smoothing methods of ``audit certify --method`` and their names in print
SMOOTHING = {"safer": "SAFER", "ranmask": "RanMASK"}
#: how many of a label-only endpoint's repeated draws are asked again, fresh, to see whether its answers vary
VARY_PROBE = 8


class PerturbationSets:
    """S(w), T_w and q_w of every word (see the module docstring); ``neighbors``: {word: [neighbours, closest first]}.

    S(w) = the first ``max_subs`` − 1 neighbours: what an adversary may put in w's place (IBP's threat model).
    T_w, what smoothing draws from: ``hops`` = 1 is {w} ∪ S(w); ``hops`` = 2 (the default) adds the neighbours'
    own substitutes, so that the sets of two synonyms overlap more and the certificate is tighter: on the words
    of the first 200 SST-2 dev sentences the median q is 0.375 with one hop and 0.526 with two (q > ½: 27 % and
    54 % of the substitutable words)."""

    def __init__(self, neighbors: Mapping[str, Sequence[str]], max_subs: int = 9, hops: int = 2):
        if hops not in (1, 2):
            raise TextAuditError(f"perturbation sets reach 1 or 2 hops of neighbours (got {hops})")
        self.max_subs, self.hops = max_subs, hops
        self._n = neighbors
        self._q: dict[str, float] = {}
        self._t: dict[str, tuple[str, ...]] = {}

    def S(self, word: str) -> tuple[str, ...]:
        """S(w): the substitutes an adversary may use (lower case; a word without neighbours has none)."""
        w = word.lower()
        return tuple(dict.fromkeys(n for n in self._n.get(w, []) if n != w))[: self.max_subs - 1]

    def T(self, word: str) -> tuple[str, ...]:
        """T_w: the word itself first, then its substitutes (and theirs with two hops)."""
        w = word.lower()
        if w not in self._t:
            out = [w, *self.S(w)]
            if self.hops == 2:
                out += [x for s in self.S(w) for x in self.S(s)]
            self._t[w] = tuple(dict.fromkeys(out))
        return self._t[w]

    def q(self, word: str) -> float:
        """q_w = min over substitutes w′ ∈ S(w) of |T_w ∩ T_w′| / max(|T_w|, |T_w′|); 1 for a word without substitutes."""
        w = word.lower()
        if w not in self._q:
            tw = set(self.T(w))
            self._q[w] = min((len(tw & set(self.T(s))) / max(len(tw), len(self.T(s))) for s in self.S(w)), default=1.0)
        return self._q[w]


def delta(qs: Sequence[float], radius: int) -> float:
    """Δ_R = 1 − ∏ of the R smallest q_j: the bound on how far R substitutions move P(f(z) = c)."""
    worst = sorted(qs)[: max(radius, 0)]
    return 1.0 - float(np.prod(worst)) if worst else 0.0


def certified_radius(p_lower: float, qs: Sequence[float]) -> int | None:
    """The largest R (0 … n) with p_lower − Δ_R > ½, or None (abstain) when p_lower ≤ ½."""
    if not p_lower > 0.5:
        return None
    r = 0
    for rr in range(1, len(qs) + 1):
        if p_lower - delta(qs, rr) > 0.5:
            r = rr
        else:
            break
    return r


def lower_bound(k: int, n: int, alpha: float) -> float:
    """The one-sided Clopper–Pearson lower bound of a binomial proportion k / n at level 1 − α."""
    from scipy.stats import beta

    return 0.0 if k == 0 else float(beta.ppf(alpha, k, n - k + 1))


@dataclass
class SAFER:
    """SAFER certification of ``classifier`` (see the module docstring for every symbol).

    Parameters
    ----------
    classifier: any textaudit classifier (label-only ones too).
    sets: the perturbation sets (default: the counter-fitted neighbours, as IBP's).
    samples: the estimation sample's size n (draws per example).
    selection: the selection sample's size n0.
    alpha: 1 − the confidence of the lower bound of p_A.
    seed: the seed of every draw.
    language: how texts split into words.
    """

    classifier: Any
    sets: PerturbationSets | None = None
    samples: int = 1000
    selection: int = 100
    alpha: float = 0.05
    seed: int = 0
    language: str = "en"
    #: the second-order view: a NeighborhoodBuilder (the masked LM's natural neighbours), k, neighbours per input,
    #: patches tried per uncertified neighbour (None: off)
    builder: Any = None
    neighbors_k: int = 1
    neighbors: int = 8
    patches: int = 4
    #: the second-order view's "certified": right with a certified radius ≥ this (0: the smoothed prediction is
    #: right at confidence 1 − α; 1: no single substitution changes it)
    view_radius: int = 0
    #: the smoothing (what the results header and the summary say; :data:`SMOOTHING` names it in print)
    method = "safer"

    def __post_init__(self) -> None:
        if self.sets is None:
            self.sets = PerturbationSets(counterfitted_neighbors())
        if not 0 < self.alpha < 0.5:
            raise TextAuditError(f"--alpha must be above 0 and below 0.5 (got {self.alpha}); 0.05 is usual")
        if self.samples < 1 or self.selection < 1:
            raise TextAuditError("--samples and --selection must be at least 1 draw")
        self.views_begun = 0  # second-order views begun here (the certify clock's count of examples in their view)

    def config(self) -> dict:
        second = {"neighbors_k": self.neighbors_k, "neighbors": self.neighbors, "patches": self.patches,
                  "view_radius": self.view_radius} if self.builder is not None else {"neighbors_k": 0}
        return {"model": getattr(self.classifier, "name", None),
                "model_fingerprint": getattr(self.classifier, "fingerprint", None), "method": self.method,
                "samples": self.samples, "selection": self.selection, "alpha": self.alpha, "seed": self.seed,
                "max_subs": self.sets.max_subs if self.sets else None, "hops": self.sets.hops if self.sets else None,
                **second}

    def draws(self, text: str, key: str, n: int, stream: int) -> list[str]:
        """``n`` texts drawn from Π_x (seeded by the seed, ``key`` and ``stream``)."""
        s = Sentence.parse(text, self.language)
        choices = [self.sets.T(t) if any(ch.isalpha() for ch in t) else (t,) for t in s.tokens]  # type: ignore[union-attr]
        digest = hashlib.blake2b(f"{self.seed}|{stream}|{key}|{text}".encode(), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(digest, "little"))
        picks = [rng.integers(0, len(c), size=n) for c in choices]
        out = []
        for i in range(n):
            toks = tuple(restore_case(c[p[i]], t) if len(c) > 1 else t for c, p, t in zip(choices, picks, s.tokens))
            out.append(Sentence(toks, s.seps).text())
        return out

    def qs(self, text: str) -> list[float]:
        """q_j of every word of ``text`` an adversary can substitute (one with substitutes; the others keep themselves)."""
        s = Sentence.parse(text, self.language)
        sets = self.sets
        return [sets.q(t) for t in s.tokens if any(ch.isalpha() for ch in t) and sets.S(t)]  # type: ignore[union-attr]

    def _votes(self, probs: np.ndarray, key: str = "", stream: int = 0) -> np.ndarray:
        """Each draw's class (TIE and a label-only model's unknown count for no class). A model whose answer is the
        frequencies of N sampled completions (:func:`sampled_draws`) votes with one completion drawn from them per
        draw (seeded by the seed, ``key`` and ``stream``): two draws of one text are two samples of the model, never
        its one answer counted twice, and never the mode of its N completions taken as certain."""
        probs = np.asarray(probs)
        if sampled_draws(self.classifier) is not None and len(probs):
            digest = hashlib.blake2b(f"{self.seed}|votes|{stream}|{key}".encode(), digest_size=8).digest()
            rng = np.random.default_rng(int.from_bytes(digest, "little"))
            cum = np.cumsum(probs / probs.sum(axis=1, keepdims=True), axis=1)
            d = np.minimum((rng.random((len(probs), 1)) > cum).sum(axis=1), probs.shape[1] - 1)
        else:
            d = decisions(probs)
        unknown = unknown_class(self.classifier)
        return np.where((d == TIE) | ((d == unknown) if unknown is not None else False), -1, d)

    def ask_certify(self, text: str, key: str) -> Search:
        """One example's certificate, as a search (its two samples are asks the engine merges across examples).
        ``answers``: how many distinct texts — distinct answers of the model — the ``samples`` votes came from (a
        sentence with few substitutable words draws the same text again and again)."""
        sel = self._votes((yield classify(self.classifier, self.draws(text, key, self.selection, 0))), key, 0)
        counts = np.bincount(sel[sel >= 0], minlength=2) if (sel >= 0).any() else np.zeros(2, dtype=int)
        c_a = int(counts.argmax()) if counts.sum() else None
        drawn = self.draws(text, key, self.samples, 1)
        est = self._votes((yield classify(self.classifier, drawn)), key, 1)
        varying = self._answers_vary(drawn, est, key)
        if varying:  # one answer counted as many votes would be a certificate of one draw of a model that varies
            return {"prediction": None, "abstain": True, "radius": None, "p_a_lower": 0.0, "n_a": 0,
                    "votes": np.bincount(est[est >= 0]).tolist(), "answers": len(set(drawn)), "varying": varying,
                    **self.radius(text, 0.0)[1]}
        n_a = int((est == c_a).sum()) if c_a is not None else 0
        p_lower = lower_bound(n_a, self.samples, self.alpha)
        radius, extra = self.radius(text, p_lower)
        return {"prediction": c_a if radius is not None else None, "abstain": radius is None, "radius": radius,
                "p_a_lower": round(p_lower, 6), "n_a": n_a, "votes": np.bincount(est[est >= 0]).tolist(),
                "answers": len(set(drawn)), **extra}

    def _answers_vary(self, drawn: list[str], votes: np.ndarray, key: str) -> int:
        """For a model that names one label per text (a label-only endpoint, whose answer to one text may change from
        one request to the next), the draws that repeat a text reuse its one answer as many votes: valid only if the
        model answers a text the same every time. Up to :data:`VARY_PROBE` of the repeated texts are asked again,
        fresh; how many answered otherwise (0: none, and the votes stand)."""
        if scores_of(self.classifier) != "labels" or len(set(drawn)) == len(drawn):
            return 0
        first = {t: int(v) for t, v in zip(drawn, votes)}
        repeated = [t for t, n in Counter(drawn).items() if n > 1][:VARY_PROBE]
        fresh = getattr(self.classifier, "predict_proba_fresh", None)
        if fresh is None or not repeated:
            return 0
        again = self._votes(np.asarray(fresh(repeated)), key, 2)
        return int(sum(first[t] != int(v) for t, v in zip(repeated, again)))

    def radius(self, text: str, p_lower: float) -> tuple[int | None, dict]:
        """The certified radius of ``text`` given p_A's lower bound (None: abstain) and what it rests on: SAFER's
        Theorem 1 over the q_j of the words an adversary can substitute."""
        qs = self.qs(text)
        return certified_radius(p_lower, qs), {"words": len(qs), "q_min": round(min(qs), 4) if qs else None}

    def _patches(self, text: str, key: str) -> list[tuple[int, str, str]]:
        """Up to ``patches`` one-word synonym swaps p = (w1, w2) of ``text``, w2 ∈ S(w1) (seeded): (position, w1, w2)."""
        s = Sentence.parse(text, self.language)
        sets = self.sets
        cands = [(i, t, w2) for i, t in enumerate(s.tokens) if any(ch.isalpha() for ch in t)
                 for w2 in sets.S(t)]  # type: ignore[union-attr]
        rng = np.random.default_rng(int.from_bytes(hashlib.blake2b(f"{self.seed}|patch|{key}|{text}".encode(),
                                                                   digest_size=8).digest(), "little"))
        pick = rng.permutation(len(cands))[: self.patches] if cands else []
        return [cands[int(i)] for i in sorted(pick)]

    def ask_second_order(self, text: str, key: str, label: int) -> Search:
        """The second-order view of a certified input x0: up to ``neighbors`` natural neighbours from Neighbor_k(x0)
        (the masked LM's, drawn uniformly and seeded), each certified in turn; for one not certified (radius < 1 or
        wrong), up to ``patches`` synonym swaps p whose smoothed prediction differs from the neighbour's (a
        second-order weakness of the smoothed model: x̃ natural, x̃ ⊕ p a synonym away, g(x̃) ≠ g(x̃ ⊕ p))."""
        b = self.builder
        digest = hashlib.blake2b(f"{self.seed}|nbrs|{key}|{text}".encode(), digest_size=8).digest()
        seed = int.from_bytes(digest, "little") % (2**31)
        if self.neighbors_k == 1:
            every = yield from b.ask_neighbors(text, 1)
            order = np.random.default_rng(seed).permutation(len(every))[: self.neighbors]
            nbrs = [every[int(i)].sentence.text() for i in sorted(order)]
        else:
            draws, _ = yield from b.ask_sample(text, self.neighbors_k, self.neighbors, seed=seed)
            nbrs = list(dict.fromkeys(d.sentence.text() for d in draws))
        out = []
        for j, nb in enumerate(nbrs):
            cert = yield from self.ask_certify(nb, f"{key}|n{j}")
            ok = cert["prediction"] == label and cert["radius"] is not None and cert["radius"] >= self.view_radius
            rec: dict[str, Any] = {"text": nb, "prediction": cert["prediction"], "radius": cert["radius"], "certified": ok}
            if cert["prediction"] is not None and (cert["radius"] or 0) < 1:  # one synonym may change it: try some
                for pos, w1, w2 in self._patches(nb, f"{key}|n{j}"):
                    s = Sentence.parse(nb, self.language)
                    patched = s.replace(pos, restore_case(w2, s.tokens[pos])).text()
                    other = yield from self.ask_certify(patched, f"{key}|n{j}|{pos}|{w2}")
                    if other["prediction"] is not None and other["prediction"] != cert["prediction"]:
                        rec["flip"] = {"pair": [w1.lower(), w2], "patched": patched, "prediction": other["prediction"]}
                        break
            out.append(rec)
        return out

    def ask_full(self, text: str, key: str, label: int) -> Search:
        """An example's certificate and, for a certified one (right, radius ≥ ``view_radius``) with a builder, its
        second-order view."""
        cert = yield from self.ask_certify(text, key)
        cert["correct"] = cert["prediction"] is not None and cert["prediction"] == label
        if self.builder is not None and cert["correct"] and cert["radius"] is not None and cert["radius"] >= self.view_radius:
            try:
                self.builder.parse(text)
            except TextAuditError as e:  # one word ("cool ?"): no natural neighbourhood to view, and no run to end
                cert["view_skipped"] = str(e).splitlines()[0]
                return cert
            self.views_begun += 1
            nbrs = yield from self.ask_second_order(text, key, label)
            cert["neighbors"] = nbrs
            cert["all_neighbors_certified"] = bool(nbrs) and all(n["certified"] for n in nbrs)
            cert["patch_flip"] = any("flip" in n for n in nbrs)
        return cert


def kept_words(h: int, rate: float, min_keep: int = 2) -> int:
    """k, the words RanMASK keeps of h: h − round(ρ·h), at least ``min_keep`` (or h when shorter), as the RanMASK
    authors' code does."""
    return max(h - int(round(rate * h)), min(min_keep, h))


def ranmask_delta(h: int, k: int, d: int) -> float:
    """Δ_d = 1 − C(h − d, k) / C(h, k): the probability that a uniform k-subset of h positions (the words kept)
    holds one of d given positions (RanMASK Theorem 1's bound on how far d substituted words move P(f = c))."""
    if d <= 0:
        return 0.0
    return 1.0 - (math.comb(h - d, k) / math.comb(h, k) if d <= h else 0.0)


def ranmask_radius(p_lower: float, h: int, k: int, beta: float = 1.0) -> int | None:
    """The largest d (0 … h) with p_lower − β·Δ_d > ½ (RanMASK Theorem 1), or None (abstain) when p_lower ≤ ½.

    β = 1 (the default, and what ``audit certify`` uses) is the rigorous bound: the probability that the kept words
    hold a changed one, times at most 1. β < 1 is RanMASK's *estimated* form — its authors' ``certify`` passes the
    share of votes for the class, p̂_A — a heuristic, not a certificate (``benchmarks/certify_rule.py`` measures what
    it adds)."""
    if not p_lower > 0.5:
        return None
    d = 0
    while d < h and p_lower - beta * ranmask_delta(h, k, d + 1) > 0.5:
        d += 1
    return d


@dataclass
class RanMASK(SAFER):
    """RanMASK certification of ``classifier`` (Zeng, Xu, Zheng & Huang, Computational Linguistics 2023,
    "Certified Robustness to Text Adversarial Attacks by Randomized [MASK]"); the parameters of :class:`SAFER`,
    whose estimation procedure (selection and estimation samples, the Clopper–Pearson bound at α, abstention
    at ≤ ½) and second-order view it shares, plus:

    rate: ρ, the share of the h words masked in each draw (k = h − round(ρ·h) words kept, at least 2).
    mask_token: what a masked word becomes (the ``[MASK]`` of BERT-like tokenizers by default).

    * Random masking (RanMASK §3): a draw keeps a uniform random k-subset H of the h words (tokens with a letter
      or digit; punctuation stays) and replaces the others by ``mask_token``; g(x) = argmax_c P_H(f(M(x, H)) = c).
    * The certificate (RanMASK Theorem 1, with its β = 1: the rigorous form, not the paper's estimated β): for x′
      differing from x in at most d words, **any** replacements (the adversary's vocabulary is not assumed — the
      difference from SAFER's synonym sets), the two masked distributions agree whenever H holds none of those d
      positions, so |P(f(M(x, H)) = c) − P(f(M(x′, H)) = c)| ≤ Δ_d = 1 − C(h − d, k) / C(h, k); g(x′) = c_A while
      p_A − Δ_d > ½. The certified radius is the largest such d (``radius``; ``radius_share`` = d / h, the share
      of the text that may change — the paper's "perturbation rate").
    * A model that never saw masked text is smoothed over inputs unlike its training data: RanMASK's own models
      are trained on masked copies; for others a lower ``rate`` keeps accuracy at the cost of a smaller radius.
    """

    rate: float = 0.9
    mask_token: str = "[MASK]"
    min_keep: int = 2
    method = "ranmask"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not within("mask_rate", self.rate):
            raise TextAuditError(f"--mask-rate must be {range_words('mask_rate')} (got {self.rate}); RanMASK's paper uses 0.9")
        if not self.mask_token.strip():
            raise TextAuditError("--mask-token must not be empty (BERT-like tokenizers: [MASK]; RoBERTa: <mask>)")

    def config(self) -> dict:
        out = super().config()
        if not out.get("neighbors_k"):  # the synonym sets serve only the second-order view's patches here
            out.pop("max_subs", None)
            out.pop("hops", None)
        return {**out, "mask_rate": self.rate, "mask_token": self.mask_token, "min_keep": self.min_keep}

    def _positions(self, s: Sentence) -> list[int]:
        return [i for i, t in enumerate(s.tokens) if any(ch.isalnum() for ch in t)]

    def draws(self, text: str, key: str, n: int, stream: int) -> list[str]:
        """``n`` masked copies of ``text``, each keeping a uniform k-subset of its words (seeded as SAFER's)."""
        s = Sentence.parse(text, self.language)
        pos = self._positions(s)
        h = len(pos)
        k = kept_words(h, self.rate, self.min_keep)
        digest = hashlib.blake2b(f"{self.seed}|ranmask|{stream}|{key}|{text}".encode(), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(digest, "little"))
        out = []
        for _ in range(n):
            keep = set(rng.choice(h, size=k, replace=False).tolist()) if h else set()
            toks = list(s.tokens)
            for j, i in enumerate(pos):
                if j not in keep:
                    toks[i] = self.mask_token
            out.append(Sentence(tuple(toks), s.seps).text())
        return out

    def radius(self, text: str, p_lower: float) -> tuple[int | None, dict]:
        """The certified radius d of RanMASK's Theorem 1 (any d words replaced by anything), with h and k."""
        h = len(self._positions(Sentence.parse(text, self.language)))
        k = kept_words(h, self.rate, self.min_keep)
        d = ranmask_radius(p_lower, h, k)
        return d, {"words": h, "kept": k, "radius_share": round(d / h, 4) if d is not None and h else None}



def certified_accuracy(records: Sequence[Mapping], max_radius: int | None = None) -> list[dict]:
    """Certified accuracy at radii 0, 1, …: the share of examples predicted right (not abstaining) with a certified
    radius ≥ R, with Wilson intervals; R = 0 is the smoothed classifier's accuracy."""
    rows = [r for r in records if "radius" in r]
    n = len(rows)
    top = max([r["radius"] for r in rows if r.get("radius") is not None and r.get("correct")], default=0)
    top = top if max_radius is None else min(top, max_radius)
    out = []
    for R in range(0, top + 1):
        k = sum(1 for r in rows if r.get("correct") and r.get("radius") is not None and r["radius"] >= R)
        lo, hi = wilson(k, n) if n else (math.nan, math.nan)
        out.append({"radius": R, "certified": k, "n": n, "certified_accuracy": round(k / n, 4) if n else None,
                    "certified_accuracy_ci95": [round(lo, 4), round(hi, 4)]})
    return out


class CertifyJob:
    """The work of one example (``(text, label)``) as a worker does it; ``many`` keeps several in flight."""

    def __init__(self, safer: SAFER, in_flight: int | None = None):
        self.safer, self.in_flight = safer, in_flight

    def __call__(self, job: tuple[str, str, int]) -> dict:
        return next(iter(self.many([(job[0], job)])))[1]

    def many(self, jobs: Sequence[tuple[str, tuple[str, str, int]]]):
        safer = self.safer
        n = in_flight_for(safer.classifier, self.in_flight)

        def start(key: str, text: str, label: int):
            return lambda _meter: safer.ask_full(text, key, label)

        yield from Engine(n).run((key, start(key, job[1], job[2])) for key, job in jobs)


def summarize_certify(records: Sequence[Mapping], method: str = "safer") -> dict:
    """A smoothing run's summary (SAFER's or RanMASK's ``method``) from its records: the smoothed classifier's
    accuracy (an abstention is wrong), the abstentions, and certified accuracy at every radius with Wilson
    intervals."""
    rows = [r for r in records if "radius" in r]
    n = len(rows)
    right = sum(1 for r in rows if r.get("correct"))
    curve = certified_accuracy(rows)
    out: dict[str, Any] = {"method": method, "n": n, "accuracy": round(right / n, 4) if n else None,
                           "accuracy_ci95": [round(v, 4) for v in wilson(right, n)] if n else None,
                           "abstain": sum(1 for r in rows if r.get("abstain")), "curve": curve}
    for row in curve[:4]:
        out[f"certified_accuracy_r{row['radius']}"] = row["certified_accuracy"]
        out[f"certified_accuracy_r{row['radius']}_ci95"] = row["certified_accuracy_ci95"]
    answered = [r for r in rows if isinstance(r.get("answers"), int)]
    if answered:  # how many distinct answers of the model the votes rest on
        votes = sum(sum(r.get("votes") or []) or 0 for r in answered)
        out["votes"], out["distinct_answers"] = votes, sum(r["answers"] for r in answered)
        out["distinct_answers_per_vote"] = round(out["distinct_answers"] / votes, 4) if votes else None
    varying = sum(1 for r in rows if r.get("varying"))
    if varying:  # abstained: a label-only endpoint answered a repeated draw otherwise when asked again
        out["varying_answers"] = varying
    radii = [r["radius"] for r in rows if r.get("correct") and r.get("radius") is not None]
    out["median_radius_correct"] = float(np.median(radii)) if radii else None
    shares = [r["radius_share"] for r in rows if r.get("correct") and r.get("radius_share") is not None]
    if shares:  # RanMASK: the share of the words that may change
        out["median_radius_share_correct"] = float(np.median(shares))
    out["every_word_certified"] = sum(1 for r in rows if r.get("correct") and r.get("radius") is not None
                                      and r["radius"] >= r.get("words", 0) > 0)
    viewed = [r for r in rows if "neighbors" in r]
    if viewed:  # the second-order view: of the certified inputs (right, radius ≥ view_radius), …
        m = len(viewed)
        every = sum(1 for r in viewed if r.get("all_neighbors_certified"))
        flips = sum(1 for r in viewed if r.get("patch_flip"))
        out["second_order"] = {
            "certified_inputs": m, "neighbors": sum(len(r["neighbors"]) for r in viewed),
            "all_neighbors_certified": every, "all_neighbors_certified_share": round(every / m, 4),
            "all_neighbors_certified_ci95": [round(v, 4) for v in wilson(every, m)],
            "with_uncertified_neighbor_share": round(1 - every / m, 4),
            "with_uncertified_neighbor_ci95": [round(1 - v, 4) for v in reversed(wilson(every, m))],
            "with_patch_flip": flips, "with_patch_flip_share": round(flips / m, 4),
            "with_patch_flip_ci95": [round(v, 4) for v in wilson(flips, m)],
            "skipped_too_short": sum(1 for r in rows if r.get("view_skipped"))}
    return out


def run_certify(safer: SAFER, texts: Sequence[str], labels: Sequence[int], ids: Sequence[str], *, output=None,
                resume: bool = False, progress: bool = True, in_flight: int | None = None, config: dict | None = None,
                backend=None, say: Callable[[str], None] | None = None) -> tuple[dict, list[dict]]:
    """Certify every example (appended to ``output`` as it finishes; ``resume`` continues it) and return
    ``(summary, records)``. Where the examples run here, the first of them run alone and are timed: ``say`` then
    gets the time of the rest (:class:`~textaudit.robustness.certify_clock.CertifyClock`), and the progress line
    shows the texts and contexts asked so far and an ETA from them: it moves while examples are in flight."""
    jobs = [(str(i), (str(i), t, int(y))) for i, t, y in zip(ids, texts, labels)]
    settings = {**safer.config(), **(config or {})}
    with ResumableRun(output, resume=resume, progress=progress, command="certify", config=settings,
                      spec=CERTIFY_RECORDS) as run:
        job_of = dict(jobs)
        text_of = {k: j[1] for k, j in jobs}
        for r in run.previous:  # a resumed record must be of the text its id has here
            if r.get("id") in text_of and r.get("text") != text_of[r["id"]]:
                raise TextAuditError(f"{output}: the record of id {r['id']} is of another text than the data's; "
                                     "resume with the data it was written with, or write a new --output")
        done = 0
        todo = sum(1 for k, _ in jobs if k not in run.done)
        stats = query_stats(safer.classifier)
        mlm = getattr(safer.builder, "mlm", None)

        work = WorkClock(lambda: float(getattr(stats, "answered", 0) or 0), lambda: 0.0,
                         more={"contexts": lambda: mlm_contexts(mlm)})
        clock = CertifyClock(lambda: work_counters([safer.classifier], mlm), todo=todo, draws=safer.selection + safer.samples,
                             neighbors=safer.neighbors if safer.builder is not None else 0,
                             views=lambda: safer.views_begun)
        local = backend is None or type(backend).__name__ == "SerialBackend"

        def first(job, cert, seconds) -> None:
            if clock.add(cert) and say is not None:
                line = clock.estimate_line()
                if line:
                    run.say(line)

        timed = local and stats is not None
        for key, cert in run.results(jobs, lambda: CertifyJob(safer, in_flight), desc=f"certify ({SMOOTHING[safer.method]})", unit="ex",
                                     backend=backend, group=in_flight_for(safer.classifier, in_flight),
                                     first=first if timed else None, first_count=clock.first,
                                     live=(work.fields, clock.remaining) if timed else None):
            job = job_of[key]
            run.write({"id": key, "text": job[1], "label": job[2], **cert})
            clock.finish(cert)
            done += bool(cert["correct"] and cert["radius"])
            run.show(certified_r1=done)
        records = list(run.records)
    return summarize_certify(records, safer.method), records
