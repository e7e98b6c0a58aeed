"""PerturbScore tuples (x, x′, edit distance, d, ε): the discrete perturbations, the inline marking
the scorer reads, and the resumable builder; see :mod:`textaudit.robustness.perturbscore`."""

from __future__ import annotations

import hashlib
import re
import time
from typing import Callable, Sequence

import numpy as np

from textaudit.backends import Backend, place_on_device
from textaudit.errors import TextAuditError
from textaudit.formats.jsonl import RecordSpec
from textaudit.lexicons import counterfitted_neighbors
from textaudit.models.batched import Classifier
from textaudit.robustness.perturbscore.shift import differentiable, find_epsilon, model_shift
from textaudit.runner import ResumableRun
from textaudit.sentence import Sentence
from textaudit.shards import Shard

__all__ = ["TUPLE_PERTURBATIONS", "random_swap", "synonym_swap", "edit_distance", "mark", "unmark", "build_tuples",
           "summarize_tuples", "split_tuples", "TUPLE_RECORDS"]

#: PerturbScore's tuples file (its row of :data:`textaudit.kinds.KINDS`): one record per drawn tuple, by id, once
TUPLE_RECORDS = RecordSpec(fields={"*": {"id": (str, int)}}, unique=True)


def _positions(s: Sentence) -> list[int]:
    return [i for i, t in enumerate(s.tokens) if t.isalpha()]


def random_swap(x: str, rng: np.random.Generator, vocab: Sequence[str], max_words: int = 3) -> str:
    """Replace 1..``max_words`` random words of x with random vocabulary words."""
    s = Sentence.parse(x)
    pos = _positions(s)
    if not pos:
        return x
    for i in rng.choice(pos, size=min(len(pos), int(rng.integers(1, max_words + 1))), replace=False):
        s = s.replace(int(i), vocab[int(rng.integers(len(vocab)))])
    return s.text()


def synonym_swap(x: str, rng: np.random.Generator, neighbors: dict[str, list[str]], max_words: int = 3) -> str:
    """Replace 1..``max_words`` words of x that have counter-fitted synonyms with one of them."""
    s = Sentence.parse(x)
    pos = [i for i in _positions(s) if neighbors.get(s.tokens[i].lower())]
    if not pos:
        return x
    for i in rng.choice(pos, size=min(len(pos), int(rng.integers(1, max_words + 1))), replace=False):
        syn = neighbors[s.tokens[int(i)].lower()]
        s = s.replace(int(i), syn[int(rng.integers(len(syn)))])
    return s.text()


#: the discrete perturbations PerturbScore tuples are built from
TUPLE_PERTURBATIONS = ("random-swap", "synonym-swap")


def edit_distance(x: str, x_prime: str) -> int:
    """Word-level edit distance (substitutions only when the lengths match, else Levenshtein)."""
    a, b = Sentence.parse(x).tokens, Sentence.parse(x_prime).tokens
    if len(a) == len(b):
        return sum(u != v for u, v in zip(a, b))
    prev = list(range(len(b) + 1))
    for i, u in enumerate(a, 1):
        cur = [i]
        for j, v in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (u != v)))
        prev = cur
    return prev[-1]


# -- inline marking -------------------------------------------------------------------------------------
_MARK = re.compile(r"(\S+) \[([^\[\]\s]+)\]")


def mark(x: str, x_prime: str) -> str:
    """``x`` with every substituted word written ``orig [new]`` (same-length substitutions)."""
    a, b = Sentence.parse(x), Sentence.parse(x_prime)
    if len(a) != len(b):
        raise TextAuditError("inline marking needs a word-for-word substitution (same number of tokens)")
    toks = tuple(u if u == v else f"{u} [{v}]" for u, v in zip(a.tokens, b.tokens))
    return Sentence(toks, a.seps).text()


def unmark(marked: str) -> tuple[str, str]:
    """Inverse of :func:`mark`: return ``(x, x′)``."""
    return _MARK.sub(r"\1", marked), _MARK.sub(r"\2", marked)


def build_tuples(classifier: Classifier, texts: Sequence[str], *, perturbation: str = "random-swap", n: int = 1000,
                 seed: int = 0, output=None, resume: bool = False, space: str = "hidden", steps: int = 5,
                 step: float = 0.01, max_eps: float = 1.0, tolerance: float = 0.005, progress: bool = True,
                 ids: Sequence[str] | None = None, shard: Shard | None = None,
                 backend: Backend | None = None, max_words: int = 3) -> list[dict]:
    """Make ``n`` attempts (x from ``texts`` in a seeded order, x′ = ``perturbation``(x) of 1..``max_words`` words
    — the edit distances the tuples span); each is
    written to ``output`` as it finishes: ``{"id", "x", "x_prime", "edit_distance", "d", "eps",
    "kept", "shift_at_eps", "seconds"}`` (``eps`` None and ``kept`` false when dropped)."""
    if perturbation not in TUPLE_PERTURBATIONS:
        raise TextAuditError(f"unknown perturbation '{perturbation}'; use one of {', '.join(TUPLE_PERTURBATIONS)}")
    if not texts:
        raise TextAuditError("no sentences to perturb (empty dataset)")
    if max_words < 1:
        raise TextAuditError(f"--max-words must be at least 1 (got {max_words})")
    sm = differentiable(classifier)
    rng = np.random.default_rng(seed)
    if perturbation == "random-swap":
        vocab = sorted(w for w in counterfitted_neighbors() if w.isalpha())
        perturb: Callable[[str, np.random.Generator], str] = lambda x, r: random_swap(x, r, vocab, max_words)  # noqa: E731
    else:
        nb = counterfitted_neighbors()
        perturb = lambda x, r: synonym_swap(x, r, nb, max_words)  # noqa: E731
    ids = list(ids) if ids is not None else [str(i) for i in range(len(texts))]
    order = rng.permutation(len(texts))
    settings = {"model": getattr(classifier, "name", None), "model_fingerprint": getattr(classifier, "fingerprint", None),
                "perturbation": perturbation, "seed": seed, "space": space, "steps": steps, "step": step,
                "max_eps": max_eps, "tolerance": tolerance, **({"max_words": max_words} if max_words != 3 else {})}
    with ResumableRun(output, resume=resume, progress=progress, command="perturbscore build", config=settings,
                      shard=shard, spec=TUPLE_RECORDS) as run:
        kept = sum(1 for r in run.previous if r.get("kept"))
        jobs = [(f"{ids[int(order[a % len(texts)])]}#{a}", (f"{ids[int(order[a % len(texts)])]}#{a}",
                                                            texts[int(order[a % len(texts)])])) for a in range(n)]
        make_worker = lambda: TupleJob(sm, perturb, seed, space=space, step=step, max_eps=max_eps,  # noqa: E731
                                       steps=steps, tolerance=tolerance)
        for uid, rec in run.results(jobs, make_worker, desc=f"perturbscore {perturbation}", unit="tuple",
                                    backend=backend):
            kept += rec["kept"]
            run.write({"id": uid, **rec})
            run.show(kept=kept)
        return run.records


class TupleJob:
    """The work of one attempt, as a worker does it: x′ = perturbation(x) from the attempt's own
    random stream (seed, attempt id), then d and the ε whose PGD shift matches it."""

    def __init__(self, sm, perturb: Callable[[str, np.random.Generator], str], seed: int, **search):
        place_on_device(sm)
        self.sm, self.perturb, self.seed, self.search = sm, perturb, seed, search

    def __call__(self, job: tuple[str, str]) -> dict:
        uid, x = job
        x2 = self.perturb(x, np.random.default_rng(int(hashlib.md5(f"{self.seed}|{uid}".encode()).hexdigest()[:8], 16)))
        t0 = time.perf_counter()
        space = self.search["space"]
        d = model_shift(self.sm, x, x2, space) if x2 != x else 0.0
        eps, at = find_epsilon(self.sm, x, d, **self.search)
        ok = eps is not None and x2 != x
        return {"x": x, "x_prime": x2, "edit_distance": edit_distance(x, x2), "d": round(d, 6),
                "eps": eps if ok else None, "kept": bool(ok), "shift_at_eps": round(at, 6),
                "seconds": round(time.perf_counter() - t0, 3)}


def summarize_tuples(records: Sequence[dict]) -> dict:
    """``tried``, ``kept`` and the mean ε of the kept tuples (``audit perturbscore build`` and ``audit merge``)."""
    kept = [r for r in records if r.get("kept")]
    return {"tried": len(records), "kept": len(kept),
            "mean_eps": round(float(sum(r["eps"] for r in kept) / len(kept)), 4) if kept else None}


def split_tuples(records: Sequence[dict], seed: int = 0, test_share: float = 0.2) -> tuple[list[dict], list[dict]]:
    """The kept tuples split 80/20 (seeded) into train and held-out test, *by original sentence*:
    every perturbation of one x lands on the same side, so the test sentences are unseen."""
    kept = [r for r in records if r.get("kept")]
    if len(kept) < 10:
        raise TextAuditError(f"only {len(kept)} usable tuples; build more (perturbscore build --n ...)")
    xs = sorted({r["x"] for r in kept})
    order = np.random.default_rng(seed).permutation(len(xs))
    test_x, n_test = set(), 0
    for i in order:
        if n_test >= test_share * len(kept):
            break
        test_x.add(xs[i])
        n_test += sum(1 for r in kept if r["x"] == xs[i])
    return [r for r in kept if r["x"] not in test_x], [r for r in kept if r["x"] in test_x]


