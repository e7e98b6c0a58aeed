"""What every attack shares: the per-example template, the budget, and the result record.

An attack is the paper's search loop and nothing else, written to *ask* for the model answers it
needs (a generator that yields :class:`~textaudit.engine.scheduler.Ask` requests and receives the
answers), so that an engine can keep many examples in flight and merge their asks into one batched
call per step (:meth:`Attack.attack_many`; :meth:`Attack.attack` is one example in flight). The
template (:meth:`Attack.ask_attack`) does the rest, once for every method:

1. parse x0 (:meth:`Attack.parse`), predict it, and fix the *goal* (:meth:`Attack.goal`): the
   class c to move away from and, for a second-order attack, the patch p = (w1, w2);
2. run the search (:meth:`Attack.search`) with a :class:`Budget` made for this call alone;
3. check the post-condition at the edge: re-score the returned x̃ (and x̃ ⊕ p) once — the
   classifier's cache answers it — and refuse a "success" whose predictions do not differ;
4. fill the :class:`AttackResult` (time, classifier and masked-LM queries, status and reason).

Sentence pairs: ``attack(text, label, context=premise, side="second")`` attacks ``text`` as the
pair's second text (the first with ``side="first"``) and keeps ``context`` verbatim: the search
runs on a copy of the attack whose classifier is a :class:`~textaudit.models.batched.PairView`
(:meth:`Attack.on_pair`), so every method works on pairs unchanged; the record says which side.

Per-call state lives in the call (the budget, the goal, a random generator made from the seed and
the example's text), never on ``self``: an attack object can serve many examples in any order, many
at once, and gives the same record for an example whatever came before it or ran beside it.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import asdict, dataclass, field
from types import GeneratorType
from typing import Any, ClassVar, Iterable, Iterator, Literal

import numpy as np

from textaudit.attacks.patch import Patch, apply_patch
from textaudit.engine.scheduler import Engine, Meter, Search, classify
from textaudit.errors import StopRun, TextAuditError
from textaudit.models.batched import (
    TIE,
    Classifier,
    PairView,
    as_classifier,
    decisions,
    flips_in_draws,
    is_remote,
    masked_lm_identity,
    model_scores,
    reduced_precision,
    sampled_draws,
    unknown_class,
)
from textaudit.sentence import Sentence

__all__ = ["Attack", "AttackResult", "Budget", "Found", "Goal", "Skip", "Status", "example_rng", "MISCLASSIFIED"]

#: success: a vulnerable / adversarial example was found; failed: searched, none found (or a budget
#: ran out); skipped: not attacked (no patch word, already misclassified, nothing substitutable);
#: error: the input cannot be attacked (e.g. a one-word sentence) or a post-condition failed.
Status = Literal["success", "failed", "skipped", "error"]

#: the reason an input the model already gets wrong is skipped (the attack summary counts them: a two-class run that
#: skips most inputs this way is below chance, and may read its labels the other way round)
MISCLASSIFIED = "already misclassified"


@dataclass
class AttackResult:
    """One attacked example (every method writes this schema; first-order ones leave ``pair`` None)."""

    text: str
    label: int | None
    prediction: int | None
    status: Status
    method: str
    k: int
    pair: list[str] | None = None
    patch_position: int | None = None
    vulnerable: str | None = None
    vulnerable_patched: str | None = None
    vulnerable_prediction: int | None = None
    vulnerable_patched_prediction: int | None = None
    f_soft: float | None = None
    l0: int | None = None
    queries: int = 0
    mlm_queries: int = 0
    sentences_scored: int = 0
    seconds: float = 0.0
    mlm: str | None = None
    reason: str | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(d.pop("extra"))
        return d


@dataclass(frozen=True)
class Goal:
    """What one example's search aims at: move the prediction away from class ``c``; with a
    ``patch`` (second order), find x̃ whose prediction differs from that of x̃ ⊕ p."""

    c: int
    patch: Patch | None = None
    #: (second order, the naturalness constraint) the other pairs that fit x0, best-ranked first: a search may
    #: find a nearer x̃ under one of them (its :class:`Found` then names it)
    others: tuple[Patch, ...] = ()


@dataclass(frozen=True)
class Found:
    """A search's answer: x̃, its predicted class, and (second order) the prediction of x̃ ⊕ p and
    F_soft(x̃; p) = f_c(x̃ ⊕ p) − f_c(x̃)."""

    sentence: Sentence
    prediction: int
    patched_prediction: int | None = None
    f_soft: float | None = None
    #: the pair x̃ flips under, when not the goal's own p (one of :attr:`Goal.others`)
    patch: Patch | None = None


class Skip(Exception):
    """Raised by :meth:`Attack.goal` or :meth:`Attack.search`: the example is not attacked (the
    message is the record's reason, its status "skipped")."""


class Budget:
    """The budget of one example's search: its clock and classifier queries (its :class:`Meter
    <textaudit.engine.scheduler.Meter>`: the host time of its steps plus its share of every merged
    forward, the distinct texts it asked the classifier for), the sentences it scored, and why it
    stopped — the same whatever else is in flight.

    ``exhausted()`` is the flag a search loop checks between steps (TextAttack's ``search_over``);
    once it returns True, :attr:`reason` says which budget ran out.
    """

    def __init__(self, meter: Meter, max_queries: int | None = None, time_budget: float | None = None):
        self.meter = meter
        self.max_queries, self.time_budget = max_queries, time_budget
        self.scored = 0
        #: classifier queries made outside the engine (a TextAttack recipe calls the model itself)
        self.outside_queries = 0
        #: ... and the seconds it took (:meth:`add_outside_seconds`)
        self._outside_seconds = 0.0
        self._outside_at: float | None = None  # the meter's seconds when they were added
        #: vulnerable candidates the naturalness constraint refused (:mod:`textaudit.attacks.naturalness`)
        self.unnatural = 0
        self.reason: str | None = None

    @property
    def queries(self) -> int:
        """Distinct classifier texts this example asked for (whatever the cache held)."""
        return self.meter.queries + self.outside_queries

    def add_outside_seconds(self, seconds: float) -> None:
        """Seconds of work a search did within one engine step but outside the engine (a TextAttack search calls the
        model itself). The engine charges a step's whole time to the meter when the step ends: until then these
        seconds count here, after it they are in the meter already and count there only — a record written in the
        same step reads them once, and so does one written a step later (a success, verified by another ask)."""
        if self._outside_at != self.meter.seconds:  # a step ended since: what was pending is in the meter now
            self._outside_seconds = 0.0
        self._outside_seconds += seconds
        self._outside_at = self.meter.seconds

    @property
    def seconds(self) -> float:
        pending = self._outside_seconds if self._outside_at == self.meter.seconds else 0.0
        return self.meter.seconds + pending

    def stop(self, reason: str) -> None:
        """Record that the search stopped for ``reason`` (e.g. a budget enforced elsewhere)."""
        self.reason = reason

    def exhausted(self) -> bool:
        """True (and :attr:`reason` set) once the query or the time budget has run out."""
        if self.max_queries is not None and self.queries >= self.max_queries:
            self.reason = "query budget exhausted"
        elif self.time_budget is not None and self.seconds >= self.time_budget:
            self.reason = "time budget exhausted"
        return self.reason is not None


def example_rng(seed: int, text: str) -> np.random.Generator:
    """The random stream of one example: derived from (``seed``, the example's text), so a record
    never depends on which examples ran before it, in what order, or after a resume."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


class Attack:
    """The template every attack method fills in (see the module docstring).

    Subclasses set :attr:`method` and implement :meth:`search`; they may override :meth:`parse`
    (what input is attackable) and :meth:`goal` (what success means).

    Parameters
    ----------
    classifier: any :class:`~textaudit.models.Classifier` (a ``BatchedClassifier`` counts queries).
    max_queries: give up (status failed, reason "query budget exhausted") after this many classifier texts.
    time_budget: give up after this many seconds per example.
    seed: the seed of every random choice; each example draws from :func:`example_rng`.
    """

    method: ClassVar[str] = "attack"
    #: sentence-level reason recorded when a search ends without an answer and no budget ran out
    no_result: ClassVar[str] = "nothing found"

    def __init__(self, classifier: Classifier, *, max_queries: int | None = None, time_budget: float | None = None,
                 seed: int = 0):
        check_budgets(max_queries, time_budget)
        self.classifier = as_classifier(classifier)
        self.max_queries, self.time_budget, self.seed = max_queries, time_budget, seed
        self.k = 0
        self.mlm = None

    # -- what a record depends on -------------------------------------------------------------
    def config(self) -> dict:
        """The settings a record depends on: the results file's header, which a ``--resume`` must
        match (:mod:`textaudit.formats.jsonl`). Subclasses add theirs in :meth:`settings`."""
        return {"method": self.method, "k": self.k, "seed": self.seed, "max_queries": self.max_queries,
                "time_budget": self.time_budget, **masked_lm_identity(self.mlm),
                "model": getattr(self.classifier, "name", None),
                "model_fingerprint": getattr(self.classifier, "fingerprint", None), **model_scores(self.classifier),
                **reduced_precision(self.classifier, self.mlm), **self.settings()}

    def settings(self) -> dict:
        """The method's own settings (κ, δ, β, thresholds …) for :meth:`config`."""
        return {}

    def helpers(self) -> list:
        """The models the search asks beside the classifier and the masked LM (a causal LM, a sentence encoder, a
        tagger), each with its ``seconds`` so far: what the classifier's texts cost includes them
        (:func:`textaudit.attacks.run.work_counters`; an ETA without them read 'about 0s' for a ten-minute run)."""
        return []

    # -- hooks ------------------------------------------------------------------------------------
    def parse(self, text: str) -> Sentence:
        """Return x0, or raise :class:`TextAuditError` for an input that cannot be attacked."""
        x0 = Sentence.parse(text)
        if sum(t.isalpha() for t in x0.tokens) < 2:
            raise TextAuditError(f"'{text.strip()}' has fewer than two words: give a sentence to attack")
        return x0

    def goal(self, x0: Sentence, prediction: int, label: int | None) -> Goal:
        """The goal for x0: move away from the gold ``label`` (else the prediction); an example the
        model already gets wrong is skipped, as TextAttack does."""
        if label is not None and prediction != int(label):
            raise Skip(MISCLASSIFIED)
        return Goal(prediction if label is None else int(label))

    def search(self, x0: Sentence, goal: Goal, budget: Budget, rng: np.random.Generator) -> Search | Found | None:
        """The method's search: the paper's loop as a search that asks for what it needs
        (:mod:`textaudit.engine.scheduler`) and returns x̃ or None (a budget that ran out says so
        in ``budget.reason``). A search that calls its model itself may return x̃ or None directly."""
        raise NotImplementedError

    # -- sentence pairs ----------------------------------------------------------------------------
    def on_pair(self, context: str, side: str = "second") -> "Attack":
        """A copy of this attack for one pair: its classifier sees ``(context, x)`` (``side="second"``)
        or ``(x, context)``; everything else is shared. Methods with other classifier-bound parts
        (patch-word ranking) extend it."""
        bound = copy.copy(self)
        bound.classifier = PairView(self.classifier, context, side)  # type: ignore[assignment]
        return bound

    # -- the template -----------------------------------------------------------------------------
    def attack(self, text: str, label: int | None = None, *, context: str | None = None,
               side: str = "second") -> AttackResult:
        """Attack one example and return its :class:`AttackResult` (the engine with this one example
        in flight). Never raises for a bad sentence: an input the method cannot handle comes back
        with status "error" and the reason. ``context``: the other text of a sentence pair, kept
        verbatim (``side``: which text of the pair ``text`` is); the record gains ``context`` and ``side``."""
        for _, res in self.attack_many([(None, (text, label, context))], in_flight=1, side=side):
            return res
        raise AssertionError("unreachable: the engine answers every example")

    def attack_many(self, jobs: Iterable[tuple[Any, tuple[str, int | None, str | None]]], *, in_flight: int = 1,
                    side: str = "second", engine: Engine | None = None) -> Iterator[tuple[Any, AttackResult]]:
        """Attack ``(key, (text, label, context))`` jobs with up to ``in_flight`` of them searched at
        once, their model asks merged into one call per step (:mod:`textaudit.engine.scheduler`);
        yield ``(key, AttackResult)`` as each finishes (completion order). A record does not depend
        on ``in_flight``, nor on what else is in flight."""
        engine = engine or Engine(in_flight)

        def start(job: tuple[str, int | None, str | None]):
            return lambda meter: self.ask_attack(job[0], job[1], meter, context=job[2], side=side)

        return engine.run((key, start(job)) for key, job in jobs)

    def ask_attack(self, text: str, label: int | None, meter: Meter, *, context: str | None = None,
                   side: str = "second") -> Search:
        """The template as a search (see the module docstring); returns the :class:`AttackResult`."""
        if context is not None:
            res = yield from self.on_pair(context, side).ask_attack(text, label, meter)
            res.extra.update(context=context, side=side)
            return res
        budget = Budget(meter, self.max_queries, self.time_budget)
        res = AttackResult(text=text, label=label, prediction=None, status="failed", method=self.method, k=self.k,
                           mlm=getattr(self.mlm, "name", None))
        try:
            x0 = self.parse(text)
            probs = yield classify(self.classifier, [x0])
            res.prediction = int(decisions(probs)[0])
            if res.prediction == TIE:
                res.prediction = None
                raise Skip(f"the model's top classes tie on this input ({np.round(probs[0], 6).tolist()}): "
                           "a tie is no prediction to flip")
            if res.prediction == unknown_class(self.classifier):
                raise Skip("the model's completion for this input matches no verbaliser (unknown)")
            goal = self.goal(x0, res.prediction, label)
            if isinstance(goal, GeneratorType):  # a goal that asks (the naturalness constraint's patch choice)
                goal = yield from goal
            if goal.patch is not None:
                res.pair, res.patch_position = [goal.patch.w1, goal.patch.w2], goal.patch.position
            found = self.search(x0, goal, budget, example_rng(self.seed, text))
            if isinstance(found, GeneratorType):  # a search that asks (every native one)
                found = yield from found
            if found is None:
                res.reason = budget.reason or self.no_result
            else:
                if found.patch is not None:  # found under another pair that fits x0: the record names that one
                    goal = Goal(goal.c, found.patch)
                    res.pair, res.patch_position = [goal.patch.w1, goal.patch.w2], goal.patch.position
                draws = yield from self._verified(found, goal)
                if draws is not None:  # a sampling endpoint: how often the finding flips over its N draws
                    res.extra.update(draws=draws[0], flips=draws[1])
                res.status, res.vulnerable, res.vulnerable_prediction = "success", found.sentence.text(), found.prediction
                res.l0 = len(x0.diff(found.sentence))
                if goal.patch is not None:
                    res.vulnerable_patched = apply_patch(found.sentence, goal.patch).text()
                    res.vulnerable_patched_prediction = found.patched_prediction
                    res.f_soft = None if found.f_soft is None else round(found.f_soft, 6)
        except Skip as s:
            res.status, res.reason = "skipped", str(s)
        except StopRun:
            raise  # the run stops (a remote model's budget or endpoint), not this example
        except TextAuditError as e:
            res.status, res.reason = "error", str(e)
        if budget.unnatural:
            res.extra["unnatural"] = budget.unnatural
        res.sentences_scored = budget.scored
        res.queries = budget.queries
        res.mlm_queries = meter.mlm_queries
        res.seconds = round(budget.seconds, 3)
        return res

    def _verified(self, found: Found, goal: Goal) -> Search:
        """Re-score x̃ (and x̃ ⊕ p) once and refuse a success the classifier does not confirm; a
        remote model is asked again at the edge (its cache bypassed), since the endpoint, not our
        copy of its answers, is what is audited. Returns ``(N, flips)`` for an endpoint sampling N
        answers per text: the draws of the changed text (x̃ ⊕ p; first order, x′) that name another
        class than the reference (x̃'s; first order, the attacked class c), else None."""
        sents = [found.sentence]
        if goal.patch is not None:
            sents.append(apply_patch(found.sentence, goal.patch))
        probs = yield classify(self.classifier, sents, fresh=is_remote(self.classifier))
        pred = decisions(probs)
        if goal.patch is not None:
            ok = pred[0] != pred[1] and (pred[0], pred[1]) == (found.prediction, found.patched_prediction)
        else:
            ok = pred[0] != goal.c and pred[0] == found.prediction
        if not ok:
            raise TextAuditError(f"post-condition failed: re-scoring the {self.method} answer gives predictions "
                                 f"{pred.tolist()}, which do not confirm the search's {found.prediction}")
        draws = sampled_draws(self.classifier)
        if draws is None:
            return None
        reference = int(pred[0]) if goal.patch is not None else goal.c
        return draws, flips_in_draws(probs[-1], reference, unknown_class(self.classifier), draws)


def check_budgets(max_queries: int | None, time_budget: float | None) -> None:
    """One-line errors for a budget that cannot be honoured (before any model is loaded)."""
    if max_queries is not None and max_queries < 1:
        raise TextAuditError(f"--max-queries must be at least 1 (got {max_queries})")
    if time_budget is not None and not time_budget > 0:
        raise TextAuditError(f"--time-budget must be a positive number of seconds (got {time_budget})")
