"""First-order baselines on the shared model wrappers: Genetic (Alzantot et al. 2018, in Jia et al.
2019's faster form) and BAE-R (Garg & Ramakrishnan 2020), as compared in Double Perturbation §5.

A first-order attack looks for x′ close to x0 with f(x′) ≠ f(x0) = y (untargeted; the target is
the gold label when given, else the prediction). Examples the model already gets wrong are
*skipped*, as TextAttack does (:meth:`~textaudit.attacks.base.Attack.goal`). Results use the second-order schema: ``vulnerable`` is the
adversarial example x′, ``vulnerable_prediction`` its prediction, ``l0`` the words changed from
x0, ``pair`` is None.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

from textaudit.attacks.base import Attack, Budget, Found, Goal, Skip
from textaudit.attacks.pos import PartOfSpeech
from textaudit.attacks.recipes import DEFAULT_RECIPE, recipe_options
from textaudit.engine.scheduler import Ask, Search, classify
from textaudit.errors import TextAuditError
from textaudit.lexicons import counterfitted_neighbors
from textaudit.lm import CausalLM, LazyCausalLM
from textaudit.models.batched import TIE, Classifier, decisions, is_remote, scores_of, unknown_class
from textaudit.models.encoders import SentenceEncoder
from textaudit.neighborhoods.masked_lm import ask_candidates
from textaudit.neighborhoods.mlm import MaskedLM, load_mlm
from textaudit.sentence import Sentence, restore_case
from textaudit.text import STOPWORDS

__all__ = ["FirstOrderAttack", "GeneticAttack", "BAEAttack", "BAE_THRESHOLD", "text_window", "window_span"]

#: BAE's sentence-similarity threshold for MiniLM-L6 (USE's 0.936 does not transfer): the 10th
#: percentile of the cosine after one counter-fitted synonym swap on SST-2 train sentences
#: (``benchmarks/calibrate_similarity.py``: 0.847; random-word swaps: median 0.869).
BAE_THRESHOLD = 0.85


def text_window(length: int, index: int, size: int) -> tuple[int, int]:
    """The first and last word (inclusive) of the ``size`` words around word ``index`` of ``length``: centred, and
    moved inside the sentence at either end — TextAttack's ``text_window_around_index``, whose similarity
    constraint BAE's recipe uses (an even size leaves one word more before the index than after it)."""
    half = (size - 1) / 2.0
    if index - half < 0:
        return 0, min(size - 1, length - 1)
    if index + half >= length:
        return max(0, length - size), length - 1
    return index - math.ceil(half), index + math.floor(half)


def window_span(x0: Sentence, i: int, size: int) -> tuple[int, int] | None:
    """The tokens ``[lo, hi)`` of the ``size`` words (tokens with a letter or digit) around token i of x0
    (:func:`text_window`: all of them in a sentence of fewer words), or None when token i is not a word."""
    words = [j for j, t in enumerate(x0.tokens) if any(ch.isalnum() for ch in t)]
    if i not in words:
        return None
    a, b = text_window(len(words), words.index(i), size)
    return words[a], words[b] + 1


class FirstOrderAttack(Attack):
    """A first-order attack: x′ near x0 with f(x′) ≠ c; stop words are never substituted."""

    method = "first-order"
    no_result = "no adversarial example found"

    def __init__(self, classifier: Classifier, *, max_queries: int | None = None, time_budget: float | None = None,
                 seed: int = 0, stopwords: Iterable[str] = STOPWORDS):
        super().__init__(classifier, max_queries=max_queries, time_budget=time_budget, seed=seed)
        if scores_of(self.classifier) == "labels":
            raise TextAuditError(f"{self.method} ranks words by class scores, and {self.classifier.name} gives labels "
                                 "only (no log-probabilities); use --method so-enum or so-beam, or --samples N "
                                 "(the frequencies of N sampled completions)")
        self.stopwords = frozenset(w.lower() for w in stopwords)

    def _target_prob(self, sentences: Sequence[Sentence], c: int) -> tuple[np.ndarray, np.ndarray]:
        """Return (P(c | s), prediction) for every sentence (one batched call); a tie or a label-only
        model's ``unknown`` prediction counts as c (no adversarial example)."""
        if not sentences:
            return np.zeros(0), np.zeros(0, dtype=int)
        return self._read_target(self.classifier.predict_proba(list(sentences)), c)

    def _ask_target_prob(self, sentences: Sequence[Sentence], c: int) -> Search:
        """:meth:`_target_prob` as a search step (one classifier ask)."""
        if not sentences:
            return np.zeros(0), np.zeros(0, dtype=int)
        return self._read_target((yield classify(self.classifier, list(sentences))), c)

    def _read_target(self, probs: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
        pred = decisions(probs)
        unknown = unknown_class(self.classifier)
        # no decision is no misclassification: a tie (equal top probabilities) or an unknown completion count as c
        pred = np.where((pred == TIE) | ((pred == unknown) if unknown is not None else False), c, pred)
        return probs[:, c], pred


class GeneticAttack(FirstOrderAttack):
    """Population-based search over counter-fitted synonym substitutions (Alzantot et al. 2018;
    Jia et al. 2019's variant): population ``population`` (60), at most ``generations`` (40), ≤
    ``max_candidates`` (8) synonyms per word, stop words never substituted, at most
    ``max_perturb_ratio`` (20%) of the words changed; fitness = 1 − P(y | x′). Each generation's
    perturbation step scores all children's candidates in one batched call.

    ``lm``: an optional :class:`~textaudit.lm.CausalLM` (SmolLM2 in the role of the published recipes'
    1-billion-word LMs), applied at each perturbation by ``lm_rule``:

    * ``"alzantot"`` (Alzantot et al. 2018): only the ``lm_top`` (4) candidates with the lowest perplexity of
      the ±``lm_window`` (5) words around the substitution are kept;
    * ``"jia"`` (Jia et al. 2019, TextAttack's ``faster-alzantot`` recipe, the published form of this search —
      40 generations): a candidate is kept when the ``lm_window`` (6) words around the substitution
      (:func:`text_window`) lose less than ``lm_max_drop`` (5.0 nats) of log-probability against the same words of
      x0: log P(x′ window) > log P(x0 window) − 5.

    ``repeat`` (True, the relaxed recipe's): a member's changed word may change again (and once it holds
    ``max_perturb_ratio`` of the words, only those); False (the published recipe's) is TextAttack's rule —
    ``RepeatModification`` substitutes a word once, and its 20% cap refuses any change past it.
    """

    method = "genetic"
    #: Jia et al.'s rule judged lazily (:meth:`_best_within_drop`: the same choice, about one LM window a member, but
    #: every option classified — about twice the classifier's queries) or eagerly (:meth:`_lm_drop`: every option
    #: judged first, as TextAttack does; the reference a test holds the lazy one to). None: lazily, unless the
    #: classifier's queries are what counts — a query budget (``max_queries``) or a remote endpoint
    lazy_lm: bool | None = None

    def __init__(self, classifier: Classifier, *, neighbors: dict[str, list[str]] | None = None, population: int = 60,
                 generations: int = 40, max_candidates: int = 8, max_perturb_ratio: float = 0.2,
                 temperature: float = 0.3, lm: CausalLM | None = None, lm_top: int = 4, lm_window: int | None = None,
                 lm_rule: str | None = None, lm_max_drop: float = 5.0, recipe: str | None = None,
                 repeat: bool | None = None,
                 max_queries: int | None = None, time_budget: float | None = None, seed: int = 0,
                 stopwords: Iterable[str] = STOPWORDS):
        if population < 2 or generations < 1 or max_candidates < 1:
            raise TextAuditError("genetic attack needs population >= 2, generations >= 1, max_candidates >= 1")
        super().__init__(classifier, max_queries=max_queries, time_budget=time_budget, seed=seed, stopwords=stopwords)
        self.neighbors = counterfitted_neighbors() if neighbors is None else neighbors
        self.population, self.generations = population, generations
        self.max_candidates, self.max_perturb_ratio = max_candidates, max_perturb_ratio
        self.temperature = temperature
        self.recipe = recipe or DEFAULT_RECIPE
        preset = recipe_options("genetic", self.recipe)
        if preset.get("lm") and lm is None:
            lm = LazyCausalLM()  # (loaded at the first generation that asks it)
        lm_rule = lm_rule or preset.get("lm_rule", "alzantot")
        if lm_rule not in ("alzantot", "jia"):
            raise TextAuditError(f"the Genetic LM rule is alzantot or jia (got {lm_rule!r})")
        self.lm, self.lm_top, self.lm_rule, self.lm_max_drop = lm, lm_top, lm_rule, lm_max_drop
        self.lm_window = lm_window if lm_window is not None else (6 if lm_rule == "jia" else 5)
        self.repeat = preset.get("repeat", True) if repeat is None else repeat

    def settings(self) -> dict:
        return {"recipe": self.recipe, "population": self.population, "generations": self.generations,
                "max_candidates": self.max_candidates, "max_perturb_ratio": self.max_perturb_ratio,
                "temperature": self.temperature, "lm_constraint": self.lm is not None,
                **({"lm": getattr(self.lm, "name", type(self.lm).__name__), "lm_rule": self.lm_rule,
                    "lm_window": self.lm_window,
                    **({"lm_max_drop": self.lm_max_drop,  # (the order changes the records' queries, not the choice)
                        "lm_order": "best first" if self.judges_lazily() else "every option"}
                       if self.lm_rule == "jia" else {"lm_top": self.lm_top})}
                   if self.lm is not None else {}),
                **({"repeat": False} if not self.repeat else {})}

    def helpers(self) -> list:
        return [self.lm] if self.lm is not None else []

    def _candidates(self, x0: Sentence) -> dict[int, list[str]]:
        out = {}
        for i, t in enumerate(x0.tokens):
            low = t.lower()
            if t.isalpha() and low not in self.stopwords:
                syn = [w for w in self.neighbors.get(low, []) if w.isalpha() and w != low][: self.max_candidates]
                if syn:
                    out[i] = [restore_case(w, t) for w in syn]
        return out

    def _perturb(self, members: list[Sentence], x0: Sentence, cands: dict[int, list[str]], limit: int,
                 c: int, rng: np.random.Generator) -> Search:
        """Change one word of every member to its best synonym (one classifier ask, and one LM ask
        when the LM constraint is on); returns the perturbed members."""
        options: list[list[Sentence]] = []
        windows: list[tuple[int, int]] = []  # (start, end) of the words around each substitution the LM scores
        positions: list[int] = []
        for m in members:
            changed = [i for i in x0.diff(m) if i in cands]
            if self.repeat:
                allowed = list(cands) if len(changed) < limit else changed
            else:  # TextAttack's RepeatModification and 20 % cap: a word is substituted once, none past the cap
                allowed = [i for i in cands if i not in changed] if len(changed) < limit else []
            if not allowed:
                options.append([m])
                positions.append(-1)
                windows.append((0, 0))
                continue
            i = allowed[int(rng.integers(len(allowed)))]
            options.append([m.replace(i, w) for w in cands[i] if w != m.tokens[i]] or [m])
            positions.append(i)
            windows.append((max(0, i - self.lm_window), i + self.lm_window + 1))
        if self.lm is not None and self.lm_rule == "jia" and self.judges_lazily():
            return (yield from self._best_within_drop(options, members, positions, x0, c))
        if self.lm is not None and self.lm_rule == "jia":
            options = yield from self._lm_drop(options, members, positions, x0)
        elif self.lm is not None:
            todo = [j for j, opts in enumerate(options) if len(opts) > self.lm_top]
            texts = [" ".join(o.tokens[windows[j][0]:windows[j][1]]) for j in todo for o in options[j]]
            ppl = (yield Ask(self.lm.perplexity, texts)) if texts else []  # one batched LM ask per generation
            s = 0
            for j in todo:
                n = len(options[j])
                keep = np.argsort(ppl[s:s + n], kind="stable")[: self.lm_top]
                options[j] = [options[j][t] for t in keep]
                s += n
        flat = [o for opts in options for o in opts]
        p, _ = yield from self._ask_target_prob(flat, c)
        out, s = [], 0
        for opts in options:
            j = int(np.argmin(p[s:s + len(opts)]))
            out.append(opts[j])
            s += len(opts)
        return out

    def judges_lazily(self) -> bool:
        """Whether Jia et al.'s rule is judged best first (:attr:`lazy_lm`): the LM's windows saved cost classifier
        queries, so not where those are budgeted or asked of a remote endpoint."""
        if self.lazy_lm is not None:
            return self.lazy_lm
        return self.max_queries is None and not is_remote(self.classifier)

    def _lm_drop(self, options: list[list[Sentence]], members: list[Sentence], positions: list[int],
                 x0: Sentence) -> Search:
        """Jia et al.'s LM rule: of each member's options (its word at ``positions[j]`` replaced), those whose
        ``lm_window`` words around the change are less than ``lm_max_drop`` nats less likely than x0's same words;
        a member left with none stays as it is. One batched LM ask for the generation."""
        spans: list[tuple[int, int] | None] = []
        refs: dict[tuple[int, int], int] = {}  # (x0's window text is asked once per span)
        texts: list[str] = []
        for opts, m, i in zip(options, members, positions):
            span = None if opts == [m] else window_span(x0, i, self.lm_window)
            spans.append(span)
            if span is not None and span not in refs:
                refs[span] = len(texts)
                texts.append(x0.span(*span))
        first = len(texts)
        for opts, span in zip(options, spans):
            if span is not None:
                texts.extend(o.span(*span) for o in opts)
        lp = (yield Ask(self.lm.log_likelihood, texts)) if first else []
        out, s = [], first
        for opts, m, span in zip(options, members, spans):
            if span is None:
                out.append(opts)
                continue
            floor = lp[refs[span]] - self.lm_max_drop
            out.append([o for o, v in zip(opts, lp[s:s + len(opts)]) if v > floor] or [m])
            s += len(opts)
        return out

    def _best_within_drop(self, options: list[list[Sentence]], members: list[Sentence], positions: list[int],
                          x0: Sentence, c: int) -> Search:
        """Jia et al.'s rule, evaluated lazily: the option :meth:`_lm_drop` then the classifier would choose — the one
        least likely of class ``c`` among those within ``lm_max_drop`` nats of x0's window (the first of them in
        order on a tie), the member itself when none is — found by scoring every option with the classifier first
        (one ask) and asking the LM about each member's options in that order, best first, until one passes (one
        batched LM ask per round; x0's windows in the first). The rule judges each option alone, so the choice is the
        same; the LM, which costs most of the search, scores about one window a member instead of every option's."""
        flat = [o for opts in options for o in opts]
        p, _ = yield from self._ask_target_prob(flat, c)
        out: list[Sentence | None] = [None] * len(options)
        queue: dict[int, list[Sentence]] = {}  # member → its options not yet judged, best first
        spans: dict[int, tuple[int, int]] = {}
        s = 0
        for j, (opts, m, i) in enumerate(zip(options, members, positions)):
            order = np.argsort(p[s:s + len(opts)], kind="stable")
            s += len(opts)
            span = None if opts == [m] else window_span(x0, i, self.lm_window)
            if span is None:  # (nothing to judge: the member stays, or a non-word token is unconstrained)
                out[j] = opts[int(order[0])]
            else:
                queue[j], spans[j] = [opts[int(t)] for t in order], span
        refs: dict[tuple[int, int], float] = {}
        while queue:
            new_refs = list(dict.fromkeys(sp for j, sp in spans.items() if j in queue and sp not in refs))
            texts = [x0.span(*sp) for sp in new_refs] + [queue[j][0].span(*spans[j]) for j in queue]
            lp = yield Ask(self.lm.log_likelihood, texts)
            refs.update(zip(new_refs, lp[:len(new_refs)]))
            for j, v in zip(list(queue), lp[len(new_refs):]):
                head = queue[j].pop(0)
                if v > refs[spans[j]] - self.lm_max_drop:
                    out[j] = head
                elif not queue[j]:
                    out[j] = members[j]
                else:
                    continue
                del queue[j]
        return out

    def search(self, x0: Sentence, goal: Goal, budget: Budget, rng: np.random.Generator) -> Search:
        c = goal.c
        cands = self._candidates(x0)
        if not cands:
            raise Skip("no substitutable word")
        n_words = sum(t.isalpha() for t in x0.tokens)
        limit = max(1, int(math.floor(self.max_perturb_ratio * n_words)))
        pop = yield from self._perturb([x0] * self.population, x0, cands, limit, c, rng)
        for _ in range(self.generations):
            p, pred = yield from self._ask_target_prob(pop, c)
            hits = [j for j in range(len(pop)) if pred[j] != c]
            if hits:
                j = min(hits, key=lambda h: (len(x0.diff(pop[h])), p[h]))
                return Found(pop[j], int(pred[j]))
            if budget.exhausted():
                return None
            fitness = 1.0 - p
            elite = pop[int(np.argmax(fitness))]
            w = np.exp((fitness - fitness.max()) / self.temperature)
            w /= w.sum()
            a = rng.choice(len(pop), size=self.population - 1, p=w)
            b = rng.choice(len(pop), size=self.population - 1, p=w)
            children = []
            for i, j in zip(a, b):
                pick = rng.random(len(x0.tokens)) < 0.5
                toks = [pop[i].tokens[t] if pick[t] else pop[j].tokens[t] for t in range(len(x0.tokens))]
                children.append(Sentence(tuple(toks), x0.seps))
            pop = [elite] + (yield from self._perturb(children, x0, cands, limit, c, rng))
        p, pred = yield from self._ask_target_prob(pop, c)
        hits = [j for j in range(len(pop)) if pred[j] != c]
        if hits:
            j = min(hits, key=lambda h: (len(x0.diff(pop[h])), p[h]))
            return Found(pop[j], int(pred[j]))
        return None


class BAEAttack(FirstOrderAttack):
    """BAE-R (Garg & Ramakrishnan 2020): rank words by how much deleting them lowers P(y | x);
    for each word in that order, replace it with the masked LM's top ``top`` (50) alphabetic
    whole-word candidates, keep those whose sentence similarity to x0 (MiniLM-L6 mean-pooled
    cosine, :class:`~textaudit.models.encoders.SentenceEncoder`) is ≥ ``threshold``; if one flips
    the prediction return the most similar flip, else keep the candidate that most lowers P(y | x)
    and go on. Stop words are never replaced (a candidate may be one, as in BAE and TextAttack's
    recipe). USE is replaced by MiniLM, whose threshold is calibrated in
    ``benchmarks/calibrate_similarity.py``.

    The published recipe (``--recipe paper``, :mod:`textaudit.attacks.recipes`) adds what TextAttack's
    ``bae`` recipe applies: ``pos`` — a :class:`~textaudit.attacks.pos.PartOfSpeech` filter (a candidate keeps the
    replaced word's universal part of speech in its context, noun ↔ verb allowed) — and ``window`` (15): the
    similarity is of the ``window`` words around the swap in x0 and in the candidate, and a sentence of fewer
    words is not compared at all (its similarity counts as 1, TextAttack's ``skip_text_shorter_than_window``).
    """

    method = "bae"

    def __init__(self, classifier: Classifier, *, mlm: MaskedLM | None = None, top: int = 50,
                 encoder: SentenceEncoder | None = None, threshold: float | None = None,
                 pos: PartOfSpeech | None = None, window: int | None = None, recipe: str | None = None,
                 max_queries: int | None = None, time_budget: float | None = None, seed: int = 0,
                 stopwords: Iterable[str] = STOPWORDS):
        super().__init__(classifier, max_queries=max_queries, time_budget=time_budget, seed=seed, stopwords=stopwords)
        if window is not None and window < 1:
            raise TextAuditError(f"BAE's similarity window must be at least one word (got {window})")
        self.mlm = load_mlm() if mlm is None else mlm
        self.encoder = SentenceEncoder() if encoder is None else encoder
        self.top, self.threshold = top, BAE_THRESHOLD if threshold is None else threshold
        self.recipe = recipe or DEFAULT_RECIPE
        preset = recipe_options("bae", self.recipe)
        self.pos = PartOfSpeech() if pos is None and preset["pos"] else pos
        self.window = preset["window"] if window is None else window

    def settings(self) -> dict:
        return {"recipe": self.recipe, "top": self.top, "threshold": self.threshold,
                "pos_filter": self.pos is not None, "window": self.window,
                **({"pos_tagger": self.pos.name} if self.pos is not None else {})}

    def helpers(self) -> list:
        return [self.encoder] + ([self.pos] if self.pos is not None else [])

    def _similarity(self, x0: Sentence, opts: list[Sentence], i: int) -> Search:
        """The cosine of each candidate with x0: whole sentences, or with ``window`` the words around position i
        (1.0 for a sentence shorter than the window, as TextAttack's BAE recipe skips it)."""
        if self.window is None:
            vectors = yield Ask(self.encoder.encode, [x0.text(), *(o.text() for o in opts)])
            return vectors[1:] @ vectors[0]  # cosines: the encoder's vectors are unit length
        span = window_span(x0, i, self.window)
        if span is None or sum(any(ch.isalnum() for ch in t) for t in x0.tokens) < self.window:
            return np.ones(len(opts))
        lo, hi = span
        vectors = yield Ask(self.encoder.encode, [x0.span(lo, hi), *(o.span(lo, hi) for o in opts)])
        return vectors[1:] @ vectors[0]

    def search(self, x0: Sentence, goal: Goal, budget: Budget, rng: np.random.Generator) -> Search:
        c = goal.c
        positions = [i for i, t in enumerate(x0.tokens) if t.isalpha() and t.lower() not in self.stopwords]
        if not positions:
            raise Skip("no substitutable word")
        p0, _ = yield from self._ask_target_prob([x0], c)
        deleted = [Sentence(x0.tokens[:i] + x0.tokens[i + 1:], x0.seps[:i] + x0.seps[i + 1:]) for i in positions]
        pd, _ = yield from self._ask_target_prob(deleted, c)
        order = [positions[j] for j in np.argsort(-(p0[0] - pd), kind="stable")]
        x, px = x0, float(p0[0])
        for i in order:
            if budget.exhausted():
                return None
            # the MLM's best ``top`` *usable* words (alphabetic, not the current word), as BAE/TextAttack
            # count them: ask for more, filter, then cut
            cands = (yield ask_candidates(self.mlm, [(list(x.tokens), i)], 3 * self.top))[0]
            words = [w for w, _ in cands if w.isalpha() and w.lower() != x.tokens[i].lower()][: self.top]
            if self.pos is not None:  # (tagged in x0's context, as TextAttack compares against the original)
                words = [w for w, ok in zip(words, self.pos.can_replace(x0.tokens, i, words)) if ok]
            opts = [x.replace(i, restore_case(w, x0.tokens[i])) for w in words]
            if not opts:
                continue
            sim = yield from self._similarity(x0, opts, i)
            keep = [j for j in range(len(opts)) if sim[j] >= self.threshold]
            if not keep:
                continue
            p, pred = yield from self._ask_target_prob([opts[j] for j in keep], c)
            flips = [n for n, j in enumerate(keep) if pred[n] != c]
            if flips:
                n = max(flips, key=lambda f: sim[keep[f]])
                return Found(opts[keep[n]], int(pred[n]))
            n = int(np.argmin(p))
            if p[n] < px:
                x, px = opts[keep[n]], float(p[n])
        return None
