"""Neighbourhoods of a sentence: Algorithm 1 of Double Perturbation (Zhang et al., NAACL 2021).

``Neighbor_1(x)``: for every replaceable position i of x, mask it, ask the masked LM for its
candidates, keep the top κ (``kappa``, default 20) whose logit is greater than
(best logit − δ) (``delta``, default 3 — the reference implementation's reading of Alg. 1 line 9),
drop the original word, and emit one sentence per kept candidate.
``Neighbor_k(x)`` = Neighbor_{k−1}(x) ∪ ⋃_{y ∈ Neighbor_{k−1}(x) ∪ {x}} Neighbor_1(y), without x.
A sentence's *distance* is the first k at which it appears (its BFS level); its ℓ0 (number of
positions that differ from x) is at most that.

Replaceable positions: alphabetic words (with ``alphabetic_only``, the default; punctuation and
clitics such as ``'s`` are never replaced), not ``protected`` (e.g. the patch word's position),
at most ``max_positions`` of them per sentence (a seeded random subset). Candidates: alphabetic
words (with ``alphabetic_only``), not in ``blacklist``, case restored to the original's
(Title/UPPER). Every frontier is expanded with *one* masked-LM call over all masked copies of all
its sentences (the MLM batches and caches them; a masked context shared by several sentences is
computed once).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import numpy as np

from textaudit.engine.scheduler import Search, run_now
from textaudit.errors import TextAuditError, check_at_least
from textaudit.neighborhoods.masked_lm import ask_candidates
from textaudit.sentence import Sentence, check_language, restore_case

__all__ = ["NeighborhoodBuilder", "Neighbor"]


@dataclass(frozen=True)
class Neighbor:
    """A sentence of Neighbor_k(x): ``distance`` (BFS level) and ``l0`` (positions changed from x)."""

    sentence: Sentence
    distance: int
    l0: int

    @property
    def text(self) -> str:
        return self.sentence.text()


class NeighborhoodBuilder:
    """Builds Neighbor_k(x) with a masked LM (see the module docstring for every parameter's role).

    Parameters
    ----------
    mlm: an object with ``candidates(batch, top)`` (see :mod:`textaudit.neighborhoods.mlm`).
    kappa: κ, candidates kept per position (top-κ).
    delta: δ, keep candidates whose logit > best logit − δ.
    blacklist: words never introduced (compared lowercased).
    alphabetic_only: replace only alphabetic words, with alphabetic candidates.
    max_positions: at most this many replaceable positions per sentence (seeded subset).
    seed: seed for the position subset and for :meth:`sample`.
    frontier_chunk: sentences expanded per masked-LM ask (32: ~600 contexts of SST-2 sentences). The engine answers the
        asks of all searches in flight one step at a time, and a small ask waits for the step's largest: with 256, a
        second level was one ask of ~2,000 contexts per search, and the naturalness checks of the others' first levels
        waited behind them — findings of a 20-example SO-Enum came at 170 s in place of 70 s, in the same 172 s in
        all. Enumerating one search alone, the cost of the smaller asks: 32 took 1.09× the time of 256 idle (64: 0.95×,
        128: 1.04×) and 1.27× on a busy machine (``benchmarks/neighborhood_throughput.py --only chunk``).
    language: how sentences split into words (:meth:`Sentence.parse <textaudit.sentence.Sentence.parse>`;
        e.g. ``fr`` splits elisions such as ``l'homme``).
    no_repeats: never propose a word of the two before or the two after the position, punctuation aside (the
        attacks' naturalness constraint: :mod:`textaudit.attacks.naturalness`).
    """

    def __init__(self, mlm, *, kappa: int = 20, delta: float = 3.0, blacklist: Iterable[str] = (),
                 alphabetic_only: bool = True, max_positions: int | None = None, seed: int = 0,
                 frontier_chunk: int = 32, language: str = "en", no_repeats: bool = False,
                 level_contexts: list[int] | None = None):
        for arg, value, least in (("kappa (κ)", kappa, 1), ("delta (δ)", delta, 0), ("max_positions", max_positions, 1)):
            check_at_least(arg, value, least)
        self.mlm = mlm
        self.kappa = kappa
        self.delta = delta
        self.blacklist = frozenset(w.lower() for w in blacklist)
        self.alphabetic_only = alphabetic_only
        self.max_positions = max_positions
        self.seed = seed
        self.frontier_chunk = frontier_chunk
        self.language = check_language(language)
        self.no_repeats = no_repeats
        #: masked-LM contexts of the levels begun (:meth:`ask_level`), and of those asked so far: a level is all of its
        #: frontier's positions, known when it begins — what an ETA can count on for an enumeration in flight (a list
        #: given here is shared: builders made one per pair count into one)
        self.level_contexts = level_contexts if level_contexts is not None else [0, 0]

    # -- inputs ------------------------------------------------------------------------------------
    def parse(self, x: str | Sentence) -> Sentence:
        """Return ``x`` as a :class:`Sentence`, rejecting empty and one-word input."""
        s = x if isinstance(x, Sentence) else Sentence.parse(x, self.language)
        if len(s) == 0:
            raise TextAuditError("empty sentence: give a sentence of at least two words")
        words = [t for t in s.tokens if any(c.isalnum() for c in t)]
        if len(words) < 2:
            raise TextAuditError(f"'{s.text().strip()}' has fewer than two words: the masked LM needs context "
                                 "to propose replacements")
        return s

    def positions(self, s: Sentence, protected: Iterable[int] = ()) -> list[int]:
        """Return the replaceable positions of ``s`` (see the class docstring)."""
        prot = set(protected)
        pos = [i for i, t in enumerate(s.tokens)
               if i not in prot and (t.isalpha() if self.alphabetic_only else any(c.isalnum() for c in t))]
        if self.max_positions is not None and len(pos) > self.max_positions:
            h = int(hashlib.md5(f"{self.seed}|{s.text()}".encode()).hexdigest()[:8], 16)
            rng = np.random.default_rng(h)
            pos = sorted(rng.choice(pos, self.max_positions, replace=False).tolist())
        return pos

    # -- Neighbor_1 ----------------------------------------------------------------------------------
    def _keep(self, cands: list[tuple[str, float]], original: str, beside: Iterable[str] = ()) -> list[str]:
        """Apply top-κ, the δ threshold, and the word filters to one position's candidates (``beside``: the words
        near it, never proposed with ``no_repeats``)."""
        if not cands:
            return []
        best = cands[0][1]
        out = []
        near = {b.lower() for b in beside} if self.no_repeats else set()
        for w, logit in cands[: self.kappa]:
            if logit <= best - self.delta:
                break
            lw = w.lower()
            if lw == original.lower() or lw in self.blacklist or lw in near:
                continue
            if self.alphabetic_only and not w.isalpha():
                continue
            out.append(restore_case(w, original))
        return out

    def ask_candidates_at(self, sentences: Sequence[Sentence], protected: Iterable[int] = ()) -> Search:
        """The search step behind :meth:`candidates_at`: it asks the masked LM once (see
        :mod:`textaudit.engine.scheduler`) and returns, per sentence, ``[(position, kept words), ...]``."""
        prot = tuple(protected)
        queries, owners = [], []
        for j, s in enumerate(sentences):
            for i in self.positions(s, prot):
                queries.append((list(s.tokens), i))
                owners.append((j, i))
        cands = (yield ask_candidates(self.mlm, queries, self.kappa)) if queries else []
        out: list[list[tuple[int, list[str]]]] = [[] for _ in sentences]
        for (j, i), c in zip(owners, cands):
            out[j].append((i, self._keep(c, sentences[j].tokens[i], _beside(sentences[j].tokens, i))))
        return out

    def candidates_at(self, sentences: Sequence[Sentence], protected: Iterable[int] = ()
                      ) -> list[list[tuple[int, list[str]]]]:
        """Return, per sentence, ``[(position, kept candidate words), ...]`` — one masked-LM call."""
        return run_now(self.ask_candidates_at(sentences, protected))

    def ask_neighbors1(self, sentences: Sequence[Sentence], protected: Iterable[int] = ()) -> Search:
        """The search step behind :meth:`neighbors1` (one masked-LM ask for the whole list)."""
        per_sentence = yield from self.ask_candidates_at(sentences, protected)
        return [[s.replace(i, w) for i, ws in per for w in ws] for s, per in zip(sentences, per_sentence)]

    def neighbors1(self, sentences: Sequence[Sentence], protected: Iterable[int] = ()) -> list[list[Sentence]]:
        """Return Neighbor_1 of each sentence (one masked-LM call for the whole list)."""
        return run_now(self.ask_neighbors1(sentences, protected))

    # -- Neighbor_k ----------------------------------------------------------------------------------
    def ask_level(self, x0: Sentence, frontier: Sequence[Sentence], seen: set, d: int,
                  protected: Iterable[int] = ()) -> Search:
        """Level d of Neighbor_k(x0) as a search: the sentences of Neighbor_1(frontier) not in ``seen``
        (which it updates), in order, as :class:`Neighbor` objects at distance ``d`` — one masked-LM
        ask per ``frontier_chunk`` sentences of the frontier."""
        prot = tuple(protected)
        level: list[Neighbor] = []
        sizes = [len(self.positions(f, prot)) for f in frontier]
        self.level_contexts[0] += sum(sizes)
        for s in range(0, len(frontier), self.frontier_chunk):
            answered = yield from self.ask_neighbors1(frontier[s:s + self.frontier_chunk], prot)
            self.level_contexts[1] += sum(sizes[s:s + self.frontier_chunk])
            for nbrs in answered:
                for y in nbrs:
                    if y.tokens not in seen:
                        seen.add(y.tokens)
                        level.append(Neighbor(y, d, len(x0.diff(y))))
        return level

    def ask_neighbors(self, x: str | Sentence, k: int, protected: Iterable[int] = ()) -> Search:
        """Neighbor_k(x) as a search (returns the list :meth:`iter_neighbors` yields, in its order)."""
        x0 = self._start(x, k)
        frontier, seen, out = [x0], {x0.tokens}, []
        for d in range(1, k + 1):
            level = yield from self.ask_level(x0, frontier, seen, d, protected)
            out.extend(level)
            frontier = [nb.sentence for nb in level]
        return out

    def iter_neighbors(self, x: str | Sentence, k: int, protected: Iterable[int] = ()) -> Iterator[Neighbor]:
        """Yield Neighbor_k(x), distance 1 first, then 2, …; each sentence once (a level at a time)."""
        x0 = self._start(x, k)
        frontier, seen = [x0], {x0.tokens}
        for d in range(1, k + 1):
            level = run_now(self.ask_level(x0, frontier, seen, d, protected))
            yield from level
            frontier = [nb.sentence for nb in level]

    def _start(self, x: str | Sentence, k: int) -> Sentence:
        if k < 0:
            raise TextAuditError(f"k must be >= 0 (got {k})")
        return self.parse(x)

    def neighbors(self, x: str | Sentence, k: int, protected: Iterable[int] = (),
                  limit: int | None = None) -> list[Neighbor]:
        """Return Neighbor_k(x) as a list (at most ``limit`` sentences, nearest first)."""
        out = []
        for nb in self.iter_neighbors(x, k, protected):
            out.append(nb)
            if limit is not None and len(out) >= limit:
                break
        return out

    def counts(self, x: str | Sentence, k: int, protected: Iterable[int] = ()) -> list[int]:
        """Return the exact number of new sentences at each distance 1..k (by enumeration)."""
        c = [0] * k
        for nb in self.iter_neighbors(x, k, protected):
            c[nb.distance - 1] += 1
        return c

    # -- sampling ------------------------------------------------------------------------------------
    def sample(self, x: str | Sentence, k: int, n: int, protected: Iterable[int] = (),
               seed: int | None = None, max_proposals: int | None = None) -> list[Neighbor]:
        """Return ``n`` sentences drawn independently and *uniformly* from Neighbor_k(x) (with
        replacement; :meth:`ask_sample` says how); :attr:`last_sample_stats` says how many proposals
        it took and estimates |Neighbor_k(x)|."""
        out, self.last_sample_stats = run_now(self.ask_sample(x, k, n, protected, seed, max_proposals))
        return out

    def ask_sample(self, x: str | Sentence, k: int, n: int, protected: Iterable[int] = (),
                   seed: int | None = None, max_proposals: int | None = None) -> Search:
        """:meth:`sample` as a search: returns ``(draws, stats)``, the draws being ``n`` sentences drawn
        independently and *uniformly* from Neighbor_k(x) (with replacement).

        Sampler (exact rejection sampling): P = {x} ∪ Neighbor_{k−1}(x) is enumerated; Neighbor_k(x)
        = (P ∪ Neighbor_1(P)) \\ {x}. A proposal is, with probability ½ each, (a) a uniform member of
        P \\ {x}, or (b) a uniform parent y ∈ P, a uniform replaceable position i (there are L of
        them in every sentence: the same alphabetic, unprotected positions) and a uniform kept
        candidate w at i, giving z = y[i ← w]. q(z), the probability of proposing z, is computable
        from z alone: y and z differ only at i, so they share the masked context at i and hence
        its candidate list F_i; the parents of z through i are the members of P equal to z except
        at i (an index of P by (i, context) lists them), each proposing z with probability
        1/(|P|·L·|F_i \\ {y_i}|), and only if z_i ∈ F_i. Accepting z with probability
        1/(q(z)·M), M = 2·|P|·L·κ ≥ 1/q(z), makes every accepted draw uniform over Neighbor_k(x).
        Cost: |P| from enumerating k−1, one masked-LM query per proposal, and, for the proposals
        that survive a cheap early rejection (q(z) is at least the proposing parent's own term),
        one query per position where z has a parent in P (cached).
        """
        if n < 1:
            raise TextAuditError(f"n must be at least 1 (got {n})")
        if k < 1:
            raise TextAuditError(f"sampling needs k >= 1 (got {k})")
        if self.max_positions is not None:
            raise TextAuditError("uniform sampling needs max_positions=None (every sentence must keep the same "
                                 "replaceable positions)")
        x0 = self.parse(x)
        prot = tuple(protected)
        rng = np.random.default_rng(self.seed if seed is None else seed)
        enumerated = yield from self.ask_neighbors(x0, k - 1, prot)
        sampler = _UniformSampler(self, x0, enumerated, self.positions(x0, prot), k)
        M = sampler.M
        out: list[Neighbor] = []
        proposals = 0
        limit = max_proposals or 5000 * n
        while len(out) < n:
            proposals += 1
            if proposals > limit:
                raise TextAuditError(f"sampling gave up after {limit} proposals; Neighbor_{k} of this sentence "
                                     "may be (nearly) empty")
            u = rng.random()
            proposed = yield from sampler.propose(rng)
            if proposed is None:
                continue
            z, q_low = proposed
            # accept with probability 1/(q(z)·M); q(z) >= q_low, so u >= 1/(q_low·M) rejects at once
            if u >= 1.0 / (q_low * M):
                continue
            if u < 1.0 / ((yield from sampler.exact_q(z)) * M):
                out.append(Neighbor(z, sampler.level.get(z.tokens, k), len(x0.diff(z))))
        # each proposal is accepted with probability |Neighbor_k(x)| / M, and sampling stops at the n-th
        # acceptance (negative binomial), so (n − 1)/(proposals − 1)·M estimates |Neighbor_k(x)| unbiasedly
        size = M * (n - 1) / (proposals - 1) if n > 1 and proposals > 1 else float("nan")
        return out, {"proposals": proposals, "accepted": len(out), "P": len(sampler.P), "size_estimate": size}


#: ``no_repeats``: how many words on each side of a position a candidate may not repeat
REPEAT_WINDOW = 2


def _beside(tokens: Sequence[str], i: int) -> list[str]:
    """The :data:`REPEAT_WINDOW` words before and after position ``i``, punctuation skipped: "deep and meaningful"
    → "meaningful and meaningful", "love , betrayal" → "regret , regret" each repeat a word."""
    words = [t for t in reversed(tokens[:i]) if any(c.isalnum() for c in t)][:REPEAT_WINDOW]
    return words + [t for t in tokens[i + 1:] if any(c.isalnum() for c in t)][:REPEAT_WINDOW]


class _UniformSampler:
    """The state of :meth:`NeighborhoodBuilder.ask_sample`'s rejection sampler: P = {x} ∪ Neighbor_{k−1}(x), its
    index by (position, masked context), the kept candidates F_i of each masked context asked so far, L (the
    replaceable positions) and M = 2·|P|·L·κ."""

    def __init__(self, builder: NeighborhoodBuilder, x0: Sentence, enumerated: list[Neighbor], positions: list[int],
                 k: int):
        self.builder, self.x0, self.positions = builder, x0, positions
        self.level = {nb.sentence.tokens: nb.distance for nb in enumerated}
        self.P = [x0] + [nb.sentence for nb in enumerated]
        self.others = self.P[1:]
        self.p_set = {s.tokens for s in self.P}
        self.index: dict[tuple, list[str]] = {}  # only the replaceable positions are ever looked up
        for s in self.P:
            t = s.tokens
            for i in positions:
                self.index.setdefault((i, t[:i], t[i + 1:]), []).append(t[i])
        self.L = max(1, len(positions))
        self.full: dict[tuple, list[str]] = {}
        self.M = 2.0 * len(self.P) * self.L * builder.kappa

    def F(self, s: Sentence, i: int) -> Search:
        """Kept candidates at i *including* the word that is there (top-κ, δ, filters)."""
        key = (i, s.tokens[:i], s.tokens[i + 1:])
        if key not in self.full:
            b = self.builder
            c = (yield ask_candidates(b.mlm, [(list(s.tokens), i)], b.kappa))[0]
            self.full[key] = b._keep(c, "\x00")  # nothing equals the sentinel: the current word is kept
        return self.full[key]

    def parent_positions(self, z: Sentence) -> list[int]:
        """Positions i at which some member of P differs from z only at i."""
        return [i for i in self.positions
                if any(yi != z.tokens[i] for yi in self.index.get((i, z.tokens[:i], z.tokens[i + 1:]), ()))]

    def exact_q(self, z: Sentence) -> Search:
        """q(z): the probability that one proposal is z (one masked-LM call for its parents' contexts)."""
        b, P, others = self.builder, self.P, self.others
        q = 0.5 / len(others) if (others and z.tokens in self.p_set) else 0.0
        todo = self.parent_positions(z)
        missing = [i for i in todo if (i, z.tokens[:i], z.tokens[i + 1:]) not in self.full]
        if missing:
            cands = yield ask_candidates(b.mlm, [(list(z.tokens), i) for i in missing], b.kappa)
            for i, c in zip(missing, cands):
                self.full[(i, z.tokens[:i], z.tokens[i + 1:])] = b._keep(c, "\x00")
        for i in todo:
            cands = [w.lower() for w in (yield from self.F(z, i))]
            if z.tokens[i].lower() not in cands:
                continue
            for yi in self.index.get((i, z.tokens[:i], z.tokens[i + 1:]), []):
                if yi == z.tokens[i]:
                    continue
                m = len(cands) - (1 if yi.lower() in cands else 0)
                q += 0.5 / len(P) / self.L / m
        return q

    def propose(self, rng: np.random.Generator) -> Search:
        """One proposal ``(z, q_low)`` — q_low the term of the parent that proposed it, a lower bound of q(z) — or
        None (nothing to propose this way, or z is x itself)."""
        P, others, positions = self.P, self.others, self.positions
        if rng.random() < 0.5:
            if not others:
                return None
            z = others[rng.integers(len(others))]
            q_low = 0.5 / len(others)
        else:
            if not positions:
                return None
            y = P[rng.integers(len(P))]
            i = positions[rng.integers(len(positions))]
            ws = [w for w in (yield from self.F(y, i)) if w.lower() != y.tokens[i].lower()]
            if not ws:
                return None
            z = y.replace(i, restore_case(ws[rng.integers(len(ws))], y.tokens[i]))
            q_low = 0.5 / len(P) / self.L / len(ws)
        if z.tokens == self.x0.tokens:
            return None
        return z, q_low
