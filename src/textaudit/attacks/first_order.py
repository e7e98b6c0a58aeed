"""First-order baselines on the shared model wrappers: Genetic (Alzantot et al. 2018, in Jia et al.
2019's faster form) and BAE-R (Garg & Ramakrishnan 2020), as compared in Double Perturbation §5.

A first-order attack looks for x′ close to x0 with f(x′) ≠ f(x0) = y (untargeted; the target is
the gold label when given, else the prediction). Examples the model already gets wrong are
*skipped*, as TextAttack does. Results use the second-order schema: ``vulnerable`` is the
adversarial example x′, ``vulnerable_prediction`` its prediction, ``l0`` the words changed from
x0, ``pair`` is None.
"""

from __future__ import annotations

import math
import time
from typing import Iterable, Sequence

import numpy as np

from textaudit.attacks.second_order import AttackResult
from textaudit.attacks.budget import Budget
from textaudit.errors import TextAuditError
from textaudit.neighborhoods.builder import _restore_case
from textaudit.neighborhoods.sentence import Sentence
from textaudit.text import STOPWORDS

__all__ = ["FirstOrderAttack", "GeneticAttack", "BAEAttack", "BAE_THRESHOLD"]

#: BAE's sentence-similarity threshold for MiniLM-L6 (USE's 0.936 does not transfer): the 10th
#: percentile of the cosine after one counter-fitted synonym swap on SST-2 train sentences
#: (``benchmarks/calibrate_similarity.py``: 0.847; random-word swaps: median 0.869).
BAE_THRESHOLD = 0.85


class FirstOrderAttack(Budget):
    """Shared bookkeeping: target class, skipping, budgets, batched scoring, the result record."""

    method = "first-order"

    def __init__(self, classifier, *, max_queries: int | None = None, time_budget: float | None = None,
                 seed: int = 0, stopwords: Iterable[str] = STOPWORDS):
        from textaudit.models import as_classifier

        self.classifier = as_classifier(classifier)
        self.max_queries = max_queries
        self.time_budget = time_budget
        self.seed = seed
        self.stopwords = frozenset(w.lower() for w in stopwords)
        self.k = 0  # words changed is unbounded a priori; kept for the shared summary
        self.mlm = None


    def _target_prob(self, sentences: Sequence[Sentence], c: int) -> tuple[np.ndarray, np.ndarray]:
        """Return (P(c | s), argmax) for every sentence (one batched call)."""
        if not sentences:
            return np.zeros(0), np.zeros(0, dtype=int)
        probs = self.classifier.predict_proba([s.text() for s in sentences])
        return probs[:, c], probs.argmax(1)

    def attack(self, text: str, label: int | None = None) -> AttackResult:
        """Attack one example; bad sentences come back with status "error" and the reason."""
        t0 = time.perf_counter()
        q0 = self._queries()
        res = AttackResult(text=text, label=label, prediction=None, status="failed", method=self.method, k=self.k,
                           mlm=getattr(self.mlm, "name", None))
        self._start_budget(t0, q0)
        try:
            x0 = Sentence.parse(text)
            if not any(t.isalpha() for t in x0.tokens):
                raise TextAuditError(f"'{text.strip()}' has no word to substitute")
            p0, pred = self._target_prob([x0], 0)
            res.prediction = int(pred[0])
            c = res.prediction if label is None else int(label)
            if label is not None and res.prediction != c:
                res.status, res.reason = "skipped", "already misclassified"
            else:
                found = self._search(x0, c)
                if found is not None:
                    x, pred_x = found
                    res.status, res.vulnerable, res.vulnerable_prediction = "success", x.text(), int(pred_x)
                    res.l0 = len(x0.diff(x))
                elif res.reason is None:
                    res.reason = self._stop_reason or "no adversarial example found"
                    if getattr(self, "_no_candidates", False):
                        res.status, res.reason = "skipped", "no substitutable word"
        except TextAuditError as e:
            res.status, res.reason = "error", str(e)
        res.queries = self._queries() - q0
        res.seconds = round(time.perf_counter() - t0, 3)
        return res

    def _search(self, x0: Sentence, c: int):  # pragma: no cover - abstract
        raise NotImplementedError


class GeneticAttack(FirstOrderAttack):
    """Population-based search over counter-fitted synonym substitutions (Alzantot et al. 2018;
    Jia et al. 2019's variant): population ``population`` (60), at most ``generations`` (40), ≤
    ``max_candidates`` (8) synonyms per word, stop words never substituted, at most
    ``max_perturb_ratio`` (20%) of the words changed; fitness = 1 − P(y | x′). Each generation's
    perturbation step scores all children's candidates in one batched call.

    ``lm``: an optional :class:`~textaudit.lm.CausalLM`; with it, only the ``lm_top`` (4)
    candidates with the lowest perplexity of the ±``lm_window`` (5) words around the substitution
    are kept at each perturbation (Alzantot et al.'s LM constraint, with SmolLM2 for their 1B-word LM).
    """

    method = "genetic"

    def __init__(self, classifier, *, neighbors: dict[str, list[str]] | None = None, population: int = 60,
                 generations: int = 40, max_candidates: int = 8, max_perturb_ratio: float = 0.2,
                 temperature: float = 0.3, lm=None, lm_top: int = 4, lm_window: int = 5, **kwargs):
        super().__init__(classifier, **kwargs)
        if population < 2 or generations < 1 or max_candidates < 1:
            raise TextAuditError("genetic attack needs population >= 2, generations >= 1, max_candidates >= 1")
        if neighbors is None:
            from textaudit.lexicons import counterfitted_neighbors

            neighbors = counterfitted_neighbors()
        self.neighbors = neighbors
        self.population, self.generations = population, generations
        self.max_candidates, self.max_perturb_ratio = max_candidates, max_perturb_ratio
        self.temperature = temperature
        self.lm, self.lm_top, self.lm_window = lm, lm_top, lm_window
        self.rng = np.random.default_rng(self.seed)

    def _candidates(self, x0: Sentence) -> dict[int, list[str]]:
        out = {}
        for i, t in enumerate(x0.tokens):
            low = t.lower()
            if t.isalpha() and low not in self.stopwords:
                syn = [w for w in self.neighbors.get(low, []) if w.isalpha() and w != low][: self.max_candidates]
                if syn:
                    out[i] = [_restore_case(w, t) for w in syn]
        return out

    def _perturb(self, members: list[Sentence], x0: Sentence, cands: dict[int, list[str]], limit: int,
                 c: int) -> list[Sentence]:
        """Change one word of every member to its best synonym (one batched classifier call, and one
        batched LM call when the LM constraint is on)."""
        options: list[list[Sentence]] = []
        windows: list[tuple[int, int]] = []  # (start, end) of the words around each substitution the LM scores
        for m in members:
            changed = [i for i in x0.diff(m) if i in cands]
            allowed = list(cands) if len(changed) < limit else changed
            i = allowed[int(self.rng.integers(len(allowed)))]
            options.append([m.replace(i, w) for w in cands[i] if w != m.tokens[i]] or [m])
            windows.append((max(0, i - self.lm_window), i + self.lm_window + 1))
        if self.lm is not None:
            todo = [j for j, opts in enumerate(options) if len(opts) > self.lm_top]
            texts = [" ".join(o.tokens[windows[j][0]:windows[j][1]]) for j in todo for o in options[j]]
            ppl = self.lm.perplexity(texts) if texts else []  # one batched LM call per generation
            s = 0
            for j in todo:
                n = len(options[j])
                keep = np.argsort(ppl[s:s + n], kind="stable")[: self.lm_top]
                options[j] = [options[j][t] for t in keep]
                s += n
        flat = [o for opts in options for o in opts]
        p, _ = self._target_prob(flat, c)
        out, s = [], 0
        for opts in options:
            j = int(np.argmin(p[s:s + len(opts)]))
            out.append(opts[j])
            s += len(opts)
        return out

    def _search(self, x0: Sentence, c: int):
        cands = self._candidates(x0)
        self._no_candidates = not cands
        if not cands:
            return None
        n_words = sum(t.isalpha() for t in x0.tokens)
        limit = max(1, int(math.floor(self.max_perturb_ratio * n_words)))
        pop = self._perturb([x0] * self.population, x0, cands, limit, c)
        for _ in range(self.generations):
            p, pred = self._target_prob(pop, c)
            hits = [j for j in range(len(pop)) if pred[j] != c]
            if hits:
                j = min(hits, key=lambda h: (len(x0.diff(pop[h])), p[h]))
                return pop[j], pred[j]
            if self._over_budget():
                return None
            fitness = 1.0 - p
            elite = pop[int(np.argmax(fitness))]
            w = np.exp((fitness - fitness.max()) / self.temperature)
            w /= w.sum()
            a = self.rng.choice(len(pop), size=self.population - 1, p=w)
            b = self.rng.choice(len(pop), size=self.population - 1, p=w)
            children = []
            for i, j in zip(a, b):
                pick = self.rng.random(len(x0.tokens)) < 0.5
                toks = [pop[i].tokens[t] if pick[t] else pop[j].tokens[t] for t in range(len(x0.tokens))]
                children.append(Sentence(tuple(toks), x0.seps))
            pop = [elite] + self._perturb(children, x0, cands, limit, c)
        p, pred = self._target_prob(pop, c)
        hits = [j for j in range(len(pop)) if pred[j] != c]
        if hits:
            j = min(hits, key=lambda h: (len(x0.diff(pop[h])), p[h]))
            return pop[j], pred[j]
        return None


class BAEAttack(FirstOrderAttack):
    """BAE-R (Garg & Ramakrishnan 2020): rank words by how much deleting them lowers P(y | x);
    for each word in that order, replace it with the masked LM's top ``top`` (50) alphabetic
    whole-word candidates, keep those whose sentence similarity to x0 (MiniLM-L6 mean-pooled
    cosine, :class:`~textaudit.attacks.similarity.SentenceEncoder`) is ≥ ``threshold``; if one flips
    the prediction return the most similar flip, else keep the candidate that most lowers P(y | x)
    and go on. Stop words are never replaced (a candidate may be one, as in BAE and TextAttack's
    recipe). BAE's part-of-speech filter is not applied (no
    tagger ships offline); USE is replaced by MiniLM, whose threshold is calibrated in
    ``benchmarks/calibrate_similarity.py``.
    """

    method = "bae"

    def __init__(self, classifier, *, mlm=None, top: int = 50, encoder=None, threshold: float = BAE_THRESHOLD, **kwargs):
        super().__init__(classifier, **kwargs)
        if mlm is None:
            from textaudit.neighborhoods.mlm import load_mlm

            mlm = load_mlm()
        if encoder is None:
            from textaudit.attacks.similarity import SentenceEncoder

            encoder = SentenceEncoder()
        self.mlm, self.top, self.encoder, self.threshold = mlm, top, encoder, threshold

    def _search(self, x0: Sentence, c: int):
        positions = [i for i, t in enumerate(x0.tokens) if t.isalpha() and t.lower() not in self.stopwords]
        self._no_candidates = not positions
        if not positions:
            return None
        p0, _ = self._target_prob([x0], c)
        deleted = [Sentence(x0.tokens[:i] + x0.tokens[i + 1:], x0.seps[:i] + x0.seps[i + 1:]) for i in positions]
        pd, _ = self._target_prob(deleted, c)
        order = [positions[j] for j in np.argsort(-(p0[0] - pd), kind="stable")]
        x, px = x0, float(p0[0])
        for i in order:
            if self._over_budget():
                return None
            # the MLM's best ``top`` *usable* words (alphabetic, not the current word), as BAE/TextAttack
            # count them: ask for more, filter, then cut
            cands = self.mlm.candidates([(list(x.tokens), i)], top=3 * self.top)[0]
            words = [w for w, _ in cands if w.isalpha() and w.lower() != x.tokens[i].lower()][: self.top]
            opts = [x.replace(i, _restore_case(w, x0.tokens[i])) for w in words]
            if not opts:
                continue
            sim = self.encoder.similarity(x0.text(), [o.text() for o in opts])
            keep = [j for j in range(len(opts)) if sim[j] >= self.threshold]
            if not keep:
                continue
            p, pred = self._target_prob([opts[j] for j in keep], c)
            flips = [n for n, j in enumerate(keep) if pred[n] != c]
            if flips:
                n = max(flips, key=lambda f: sim[keep[f]])
                return opts[keep[n]], pred[n]
            n = int(np.argmin(p))
            if p[n] < px:
                x, px = opts[keep[n]], float(p[n])
        return None
