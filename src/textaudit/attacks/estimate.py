"""How long an attack will take: said before it is spent, followed while it runs, said again when wrong.

An example's cost is what its search asks: classifier texts and masked-LM contexts (a sentence with one
position masked; the masked LM proposes its κ candidates). Both grow with the sentence's length, so
the estimate before the run is

    T ≈ Σ_x |x| · (q_w · s_q + m_w · s_m)

with |x| the words of example x, q_w and m_w the texts and contexts a search asks per word, and
s_q, s_m the seconds one text and one context take here. s_q and s_m are measured on the data's own
first texts (the run asks them anyway; the classifier's cache and the masked LM's store keep the
answers, so a context the store already holds is timed as the store answers it). q_w and m_w start
from :data:`WORK_PER_WORD`, measured at the paper's scale, and are replaced by the run's own as its
examples finish (each record says what it asked: ``queries``, ``mlm_queries``).

While examples are in flight none may finish for minutes: :meth:`AttackClock.fields` gives the texts
and contexts asked so far (the progress line moves with them) and :meth:`AttackClock.remaining` the
seconds left — the unfinished examples' expected cost at the measured pace, less what the engine
already spent on those in flight. When the projection leaves [½, 2]× of what was last said, it is
said again, with why.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from textaudit.engine.pace import Pace, fastest, measure_pace  # (Pace, measure_pace: re-exported)
from textaudit.progress import duration
from textaudit.sentence import Sentence

__all__ = ["WORK_PER_WORD", "WORK_BY_K", "WORK_BY_RECIPE", "HELPER_ITEMS_PER_TEXT", "helper_kind", "helper_seconds", "work_per_word",
           "FAILED_PER_WORD", "Pace", "Probe", "AttackClock", "measure_pace", "probe_attack"]

#: (classifier texts, masked-LM contexts) a search asks per word of the attacked sentence: the means
#: over SST-2 dev at the paper's scale on the zoo's lstm (``paper/cells``, 2026-11-27: SO-Beam
#: k = 6, β = 20 and SO-Enum k = 2 over all 872, BAE over 872, Genetic over the first 100). A robust
#: model asks more (its searches run longer): the run's own records replace these as examples finish.
WORK_PER_WORD: dict[str, tuple[float, float]] = {
    "so-beam": (96.0, 5.4),
    "so-enum": (499.0, 41.0),
    "bae": (3.9, 0.11),
    "genetic": (43.0, 0.0),
}

#: what a first-order search asks of its helpers per classifier text it asks — LM windows scored (Genetic's LM rule),
#: sentences encoded (BAE's similarity), contexts tagged (BAE's part-of-speech filter) — by method, recipe and helper;
#: priced at the helper's seconds per item measured before the run; texts in the records' unit (distinct texts the
#: model or the store answered). From ``benchmarks/helper_work.py --genetic 12`` on the zoo's cnn (2026-11-29: Genetic
#: paper on 12 SST-2 dev examples, BAE on 40): the helpers took 114 s of the LM against under a second of the
#: classifier, 32 s of the encoder against about 0.1 s — an estimate without them said 'about 0s'.
HELPER_ITEMS_PER_TEXT: dict[tuple[str, str, str], float] = {
    ("genetic", "paper", "lm"): 0.73,
    ("bae", "relaxed", "encoder"): 1.30, ("bae", "paper", "encoder"): 0.84, ("bae", "paper", "pos"): 1.64,
}

#: where the recipe changes it: Genetic's published recipe drops most synonyms (Jia et al.'s LM rule) and substitutes
#: a word once (TextAttack's RepeatModification). With repeats, ``paper/ablation``'s cells (SST-2 dev, the first 100,
#: 2026-11-29) asked 30.8 texts a word on cnn and 28.9 on lstm; without them, on cnn's first 12
#: (``benchmarks/vs_textattack.py --n 12``, 10 attacked), 5.6 where the same 10 asked 21.1 with them — so 29.9 scaled
#: by 5.6 / 21.1 until the published recipe's own cells are in
WORK_BY_RECIPE: dict[tuple[str, str], tuple[float, float]] = {("genetic", "paper"): (7.9, 0.0)}

#: where k changes it: one round (k = 1: Neighbor_1 of x0 only) and SO-Beam at k = 3 (harden's default), measured on
#: the zoo's cnn over 100 SST-2 dev and train examples (2026-11-27, a fresh clone's `audit harden`)
WORK_BY_K: dict[tuple[str, int], tuple[float, float]] = {("so-enum", 1): (12.3, 0.61), ("so-beam", 1): (12.3, 0.61),
                                                         ("so-beam", 3): (75.8, 4.73)}


def helper_kind(helper: Any) -> str | None:
    """What a search's helper is, for :data:`HELPER_ITEMS_PER_TEXT`: "lm" (scores texts), "encoder" (embeds them),
    "pos" (tags words in context), or None."""
    if hasattr(helper, "log_likelihood"):
        return "lm"
    if hasattr(helper, "encode"):
        return "encoder"
    if hasattr(helper, "tag_in_context"):
        return "pos"
    return None


#: texts the pace measured before a run with helpers weighs as, against the run's own (:meth:`AttackClock.unit_seconds`)
HELPER_PRIOR_TEXTS = 2000.0
#: the data's first texts a helper is timed on (:func:`helper_seconds`)
HELPER_SAMPLE = 8


def helper_seconds(method: str, recipe: str | None, helpers: Sequence[Any], texts: Sequence[str]) -> float:
    """Seconds per classifier text that a search's ``helpers`` add: each timed here on items of the data's first texts
    (a causal LM on their 6-word windows, an encoder on the texts, a tagger on their words in context; the faster of
    two halves, :func:`~textaudit.engine.pace.fastest`) × the items it asks per classifier text
    (:data:`HELPER_ITEMS_PER_TEXT`; 0 for a helper that table does not list)."""
    sample = [Sentence.parse(t) for t in texts[:HELPER_SAMPLE] if isinstance(t, str) and t.strip()]
    total = 0.0
    for h in helpers:
        kind = helper_kind(h)
        per_text = HELPER_ITEMS_PER_TEXT.get((method, recipe or "relaxed", kind or ""))
        if not per_text or not sample:
            continue
        if kind == "lm":
            items = [x.span(max(0, i - 3), min(len(x.tokens), i + 3)) for x in sample for i in range(0, len(x.tokens), 3)]
            call: Callable[[list], Any] = h.log_likelihood
        elif kind == "encoder":
            items, call = [x.text() for x in sample], h.encode
        else:
            items = [(tuple(x.tokens), i) for x in sample for i in range(len(x.tokens))]

            def call(batch: list, h: Any = h) -> list:
                return [h.tag(list(w), i) for w, i in batch]
        call(items[:1])  # its loading (SmolLM2 is loaded at first use) and first call's set-up are not its pace
        total += per_text * fastest(call, items[1:] or items)
    return total


def work_per_word(method: str, k: int | None) -> tuple[float, float] | None:
    """(texts, contexts) a search of ``method`` at ``k`` asks per word on an SST-2-like model: measured at that k
    (:data:`WORK_BY_K`), else SO-Beam at the nearest k below, else the paper-scale mean (:data:`WORK_PER_WORD`)."""
    if k is not None and (method, k) in WORK_BY_K:
        return WORK_BY_K[(method, k)]
    if method == "so-beam" and k is not None and k < 6:
        below = [kk for (m, kk) in WORK_BY_K if m == method and kk <= k]
        if below:
            return WORK_BY_K[(method, max(below))]
    return WORK_PER_WORD.get(method)


#: what a search asks per word when it does not find p at all (a robust example): SO-Enum k = 2, the whole
#: of Neighbor_2 (lstm's 26 and bow's 14 failed SST-2 dev examples at the paper's scale agree within 5%);
#: SO-Beam at k = 6, β = 20 (the 12 of 20 SST-2 dev examples a plug-in resisted) — its rounds expand 1, then
#: β sentences each, so another k and β scale it by (1 + β(k − 1)) / (1 + 20 · 5)
FAILED_PER_WORD: dict[str, tuple[float, float]] = {"so-enum": (1949.0, 168.0), "so-beam": (1238.0, 71.2)}
#: what SO-Beam asks per word for an example it finds only in a later round (ℓ0 ≥ 2): lstm's 221 of 872 at the
#: paper's scale, 323 texts and 18.4 contexts (the zoo's cnn, 14 of 50: 390 and 20.9)
LATER_PER_WORD: dict[str, tuple[float, float]] = {"so-beam": (323.0, 18.4)}
#: of the examples a first round leaves, the share a search still finds, at most: SO-Beam finds 96-99.8% of SST-2
#: dev on the paper's base and robust models, and a first round settles about 3 in 4 of them (lstm: 647 of 868)
FOUND_LATER = 0.8
#: ... reached when the first round settles this share or more; below it, proportionally less (a model whose first
#: round settles little resists the later ones too: a word-list plug-in settled 1 of 8 and SO-Beam found 10 of 40;
#: the zoo's cnn settled 6 of 10 and SO-Beam found 50 of 50) — the rest are costed as failures
SETTLED_FOR_FOUND_LATER = 0.6
#: examples the probe searches at k = 1 before the run (the first of the data; its answers stay cached): a fifth
#: of the run, at least PROBE_MIN and at most PROBE_EXAMPLES
PROBE_EXAMPLES = 16
PROBE_MIN = 4

#: words of finished examples that weigh as much as the prior (about ten SST-2 sentences)
PRIOR_WORDS = 200.0
#: the projection is said again when it leaves [1/REVISE, REVISE] × what was said last (down: only once half
#: the examples are done)
REVISE = 2.0
#: ... but not before this many examples finished (one quick success says little)
REVISE_AFTER = 3
#: ... nor for a difference under this many seconds (a 2 s run said to take 5 s is no news)
REVISE_SECONDS = 15.0
@dataclass
class Probe:
    """The first round (k = 1) of the search on the data's first examples: of those it attacked (the model
    got them right), how many it settled (found p), what they asked per word; the pace of this machine on that
    work. ``skipped``: the probe's examples not attacked (already misclassified: they cost nothing)."""

    examples: int
    settled: int
    per_word: tuple[float, float]  # (texts, contexts) per word of the settled examples
    pace: Pace | None
    seconds: float
    skipped: int = 0

    def settled_share(self) -> float:
        """The share of attacked examples a first round settles: (settled + 1) / (examples + 2), Laplace's rule —
        a probe that settled 4 of 4 does not prove that every example settles at once (a replay's fresh attack of 12:
        its first round settled 4 of 4 at 12 texts per word, and the run asked 169 per word)."""
        return (self.settled + 1) / (self.examples + 2)

    def found_later(self) -> float:
        """The share of the unsettled examples a later round is expected to find (:data:`FOUND_LATER`, scaled down
        when the first round settled less than :data:`SETTLED_FOR_FOUND_LATER`)."""
        return FOUND_LATER * min(1.0, self.settled_share() / SETTLED_FOR_FOUND_LATER)

    def prior(self, method: str, k: int, beam: int = 20) -> tuple[float, float]:
        """Per word of an attacked example: the settled share (:meth:`settled_share`) at what they asked; the
        rest, :meth:`found_later` of them at what a search found in a later round asks (:data:`LATER_PER_WORD`;
        SO-Enum k = 2 has no later round) and the others at the cost of a search that runs to k and finds nothing
        (:data:`FAILED_PER_WORD`)."""
        q_f, m_f = FAILED_PER_WORD[method]
        if method == "so-beam":
            scale = (1 + beam * (k - 1)) / (1 + 20 * 5)
            q_f, m_f = q_f * scale, m_f * scale
            q_l, m_l = (min(a, b) for a, b in zip(LATER_PER_WORD["so-beam"], (q_f, m_f)))
            later = self.found_later()
            q_f, m_f = later * q_l + (1 - later) * q_f, later * m_l + (1 - later) * m_f
        share = self.settled_share()
        q_s, m_s = self.per_word
        return share * q_s + (1 - share) * q_f, share * m_s + (1 - share) * m_f


def probe_attack(attack: Any, texts: Sequence[str], labels: Sequence[int] | None, *, in_flight: int,
                 counters: Callable[[], tuple[float, float, float, float]], side: str = "second",
                 contexts: Sequence[str] | None = None, examples: int | None = None) -> Probe | None:
    """Search the first ``examples`` of ``texts`` (default: a fifth of them, 4 to 16) one round deep (a copy of ``attack`` at k = 1, sharing
    its classifier, masked LM and patch words: what it asks is then cached for the run) and time it. None
    for a method without rounds (BAE, Genetic: their cost varies little) or at k ≤ 1 (the probe would be
    the run)."""
    import copy

    if attack.method not in FAILED_PER_WORD or not attack.k or attack.k <= 1 or not len(texts):
        return None
    shallow = copy.copy(attack)
    shallow.k = 1
    if examples is None:
        examples = min(PROBE_EXAMPLES, max(PROBE_MIN, -(-len(texts) // 5)))
    n = min(examples, len(texts))
    jobs = [(i, (texts[i], None if labels is None else int(labels[i]), None if contexts is None else contexts[i]))
            for i in range(n)]
    start, t0 = counters(), time.perf_counter()
    settled = skipped = words = asked_q = asked_m = 0.0
    for i, res in shallow.attack_many(jobs, in_flight=in_flight, side=side):
        rec = res.to_dict()
        if rec.get("status") == "skipped":
            skipped += 1
        elif rec.get("status") == "success":
            w = _words(texts[i])
            settled, words = settled + 1, words + w
            asked_q += float(rec.get("queries") or 0)
            asked_m += float(rec.get("mlm_queries") or 0)
    wall = time.perf_counter() - t0
    q, c, clf_s, mlm_s = (a - b for a, b in zip(counters(), start))
    pace = None
    if q > 0 and clf_s + mlm_s > 0.05:  # the wall shared out in proportion to each one's own seconds
        pace = Pace(wall * clf_s / (clf_s + mlm_s) / q, wall * mlm_s / (clf_s + mlm_s) / c if c else None)
    return Probe(n - int(skipped), int(settled), (asked_q / words, asked_m / words) if words else (0.0, 0.0), pace,
                 wall, int(skipped))


def _words(text: str) -> int:
    return len(text.split())


class AttackClock:
    """The time of one attack run: the estimate before it, the fields and ETA of its progress line, and
    a revision when the pace proves the estimate wrong by more than 2×.

    ``counters()`` returns (texts asked, contexts asked, classifier seconds, masked-LM seconds) so far.
    ``attacked``: which of ``texts`` the search will attack (the model gets them right; the others are skipped at
    once and cost nothing) — None: all of them. ``levels()``: the masked-LM contexts of the neighbourhood levels begun
    and asked so far (:attr:`NeighborhoodBuilder.level_contexts`): an enumeration in flight (SO-Enum) knows the
    contexts of its level when it begins it. ``upcoming()``: the contexts the searches in flight are expected to ask for
    the levels they would begin next (:meth:`textaudit.attacks.naturalness.NaturalChecks.upcoming`): an example still
    checking its first level has its second, known in size, before it if nothing there is natural. Most such checks
    find one natural (5 of 6 in 20 SO-Enum examples on cnn): counted whole, the ETA read 5× high; left out, 4× low."""

    def __init__(self, method: str, texts: Sequence[str], pace: Pace | None,
                 counters: Callable[[], tuple[float, float, float, float]],
                 say: Callable[[str], None] | None = None, in_flight: int = 1, probe: Probe | None = None,
                 k: int | None = None, beam: int | None = None, attacked: Sequence[bool] | None = None,
                 levels: Callable[[], Sequence[float]] | None = None,
                 upcoming: Callable[[], float] | None = None, helpers: Sequence[str] = (), recipe: str | None = None):
        self.method, self.pace, self.counters = method, pace, counters
        self.helpers = tuple(helpers)  # the names of what the classifier's texts are priced with (Genetic's LM ...)
        self.levels, self.upcoming = levels, upcoming
        self.levels_start = tuple(levels()) if levels is not None else (0.0, 0.0)
        self.in_flight = max(in_flight, 1)
        self.say = say or (lambda msg: None)
        self.probe = probe
        self.prior = (probe.prior(method, k or 1, beam or 20) if probe is not None
                      else WORK_BY_RECIPE.get((method, recipe or "")) or work_per_word(method, k))
        if probe is not None and probe.pace is not None and probe.seconds >= 5.0 and probe.pace.context_seconds:
            self.pace = probe.pace  # the engine's own batches, when they ran long enough to time
        chosen = [t for t, a in zip(texts, attacked if attacked is not None else [True] * len(texts)) if a]
        self.pending = Counter(chosen)  # the texts to attack, not finished yet
        self.words_left = float(sum(_words(t) for t in chosen))
        self.examples_left = len(chosen)
        self.done_words = self.done_texts = self.done_contexts = 0.0
        self.searched = 0  # examples finished that were searched (not skipped)
        self.t0 = time.monotonic()
        self.last_finish = self.t0  # when an example last finished (or the run began)
        self.start = counters()
        self.said: float | None = None  # the total seconds said last

    # -- what one word costs -------------------------------------------------------------------
    def per_word(self) -> tuple[float, float] | None:
        """Texts and contexts per word: the prior, then the finished examples' own (weighed by words)."""
        if self.prior is None and not self.done_words:
            return None
        q0, m0 = self.prior or (0.0, 0.0)
        w0 = PRIOR_WORDS if self.prior else 0.0
        w = w0 + self.done_words
        return (q0 * w0 + self.done_texts) / w, (m0 * w0 + self.done_contexts) / w

    def unit_seconds(self) -> tuple[float, float, float]:
        """Seconds per text asked, per context asked, and the wall per second of them (the host's share):
        measured in this run once it asked enough, else the pace measured before it."""
        texts, contexts, clf_s, mlm_s = (a - b for a, b in zip(self.counters(), self.start))
        if self.helpers and self.pace is not None:
            # a search with helpers asks them in bursts — Genetic scores every member's candidates with its LM before
            # the classifier sees one (75 s into a 221-s run on cnn: 332 texts and 70 s of LM, '4 texts/s' where the
            # run averaged 34 and 'ETA 47m'; 40 examples, 32 in flight: 630 texts in 5 minutes, 'ETA 3h16m' for 15
            # minutes) — so the pace measured before it holds until it asked HELPER_PRIOR_TEXTS texts, and is weighed
            # against its own after that as if it had as many behind it
            s_q = (self.pace.text_seconds if texts < HELPER_PRIOR_TEXTS else
                   (clf_s + self.pace.text_seconds * HELPER_PRIOR_TEXTS) / (texts + HELPER_PRIOR_TEXTS))
        else:
            s_q = clf_s / texts if texts >= 100 else (self.pace.text_seconds if self.pace else 0.0)
        s_m = mlm_s / contexts if contexts >= 20 else ((self.pace.context_seconds or 0.0) if self.pace else 0.0)
        elapsed = time.monotonic() - self.t0
        device = clf_s + mlm_s
        host = elapsed / device if device > 1.0 and elapsed > device else 1.0
        return s_q, s_m, host

    def total_seconds(self) -> float | None:
        """The whole run's projected seconds: those elapsed and :meth:`remaining`."""
        left = self.remaining()
        return None if left is None else time.monotonic() - self.t0 + left

    def remaining(self) -> float | None:
        """Seconds left: the unfinished examples' expected cost, less what was spent on those in flight."""
        rates = self.per_word()
        if rates is None:
            return None
        s_q, s_m, host = self.unit_seconds()
        if not s_q and not s_m:
            return None  # no pace yet
        q_w, m_w = rates
        per_example = (self.words_left / max(self.examples_left, 1)) * (q_w * s_q + m_w * s_m)
        texts, contexts, _, _ = (a - b for a, b in zip(self.counters(), self.start))
        spent = max(texts - self.done_texts, 0.0) * s_q + max(contexts - self.done_contexts, 0.0) * s_m
        flying = min(self.in_flight, self.examples_left)
        level = self.level_left(s_q, s_m, rates, texts, contexts)
        if level is None:
            # the examples in flight: their expected cost less what they spent, but at least half of that again
            flying_left = max(flying * per_example - spent, spent / 2)
        else:
            # levels in flight: what their frontiers' positions ask (known when a level begins; an example still in
            # flight after its first level enumerates the whole next one, whatever the average example costs)
            flying_left = max(flying * per_example - spent, level)
        left = ((self.examples_left - flying) * per_example + flying_left) * host
        if level is None:
            # nothing finished for a while: the examples in flight have about as long again to go (the costs are
            # heavy-tailed: a search that ran long is one that has far to go). Half the work they spent read SO-Beam's
            # and a replay's ETA 11 s low a quarter into 26-second runs; all of it, 19 s high once most had finished
            # (the counters hold work no record claims: the patch words' ranking, texts shared by examples)
            left = max(left, time.monotonic() - self.last_finish)
        return left

    def level_left(self, s_q: float, s_m: float, rates: tuple[float, float], texts: float, contexts: float
                   ) -> float | None:
        """Seconds for what the neighbourhood levels begun, or announced by the level before (``upcoming``), ask and
        have not asked yet (``texts`` and ``contexts``: asked since the run began): their contexts — all of their
        frontiers' positions, known when a level begins —
        and the texts that score what they find (the run's texts per context); None where no level was begun (a
        search that expands a beam, not whole levels). The masked LM answers a level in one ask for a whole frontier:
        the live counters, not the levels' own count of asks done, say how far it got."""
        if self.levels is None:
            return None
        planned = self.levels()[0] - self.levels_start[0]
        if planned <= 0:
            return None
        if self.upcoming is not None:
            planned += self.upcoming()
        q_w, m_w = rates
        per_context = q_w / m_w if m_w else 0.0
        # a level's texts cost what the pace's calls do, at least: the run's own seconds per text count the classifier
        # alone, not the building of the neighbours' sentences the enumeration pays per text (the last 165,000 texts
        # of a 20-example SO-Enum on cnn: 4.5e-5 s a text in the counters, 1.3e-4 s of wall — 'ETA 7s', 22 s left)
        s_q = max(s_q, self.pace.text_seconds if self.pace is not None else 0.0)
        return max(planned - contexts, 0.0) * s_m + max(planned * per_context - texts, 0.0) * s_q

    # -- said and shown --------------------------------------------------------------------------
    def estimate_lines(self, examples: int) -> list[str]:
        """The lines said before the run (none without a pace or a prior for the method): the time and where it
        goes, then what it rests on — two lines a log shows whole, not one of 400 characters."""
        if self.pace is None or self.prior is None:
            return []
        q_w, m_w = self.prior
        s_q, s_m = self.pace.text_seconds, self.pace.context_seconds or 0.0
        clf, mlm = self.words_left * q_w * s_q, self.words_left * m_w * s_m
        total = clf + mlm
        computed = self.pace.computed_seconds if m_w else None
        high = clf + self.words_left * m_w * computed if computed else None
        self.said = total if high is None else (total * high) ** 0.5  # (a range: revised against its middle)
        who = "classifier" + "".join(f" and {name}" for name in self.helpers)
        parts = [f"{who} {duration(clf)} at {1 / s_q:,.0f} texts/s" if s_q else f"{who} –"]
        if m_w:
            held = (f"; {100 * (self.pace.store_share or 0):.0f}% of the first sentences' contexts were in the store: "
                    f"if their neighbours' are not, {duration(high - clf)} at {1 / computed:,.0f} contexts/s" if high else "")
            parts.append(f"masked LM {duration(mlm)} at {1 / s_m:,.0f} contexts/s{held}" if s_m else "masked LM –")
        skipped = examples - self.examples_left
        attacked = f" ({self.examples_left} to attack; {skipped} already misclassified)" if skipped > 0 else ""
        if self.probe is not None:
            pr = self.probe
            how = (f"a first round (k = 1) on the first {pr.examples + pr.skipped} examples settled {pr.settled} of the "
                   f"{pr.examples} attacked in {pr.seconds:.1f} s; the rest are costed as later rounds and searches that "
                   f"find nothing: {q_w:.0f} texts and {m_w:.1f} contexts per word")
        else:
            how = (f"a search that asks what an SST-2 one does on the zoo's lstm ({q_w:g} texts and {m_w:g} contexts "
                   "per word); a more robust model asks more")
        about = duration(total) if high is None or duration(high) == duration(total) else \
            f"{duration(total)} to {duration(high)}"  # (never "0s to 0s")
        return [f"time: about {about} for {examples} examples here{attacked}: {'; '.join(parts)}",
                f"time: from {how}; said again if the run proves it wrong by more than 2×"]

    def fields(self) -> dict[str, str]:
        """The work done inside the examples, for the progress line (it moves while none finishes)."""
        texts, contexts, _, _ = (a - b for a, b in zip(self.counters(), self.start))
        out = {"asked": f"{int(texts):,}"}
        if contexts:
            out["contexts"] = f"{int(contexts):,}"
        return out

    def finish(self, record: dict) -> None:
        """An example finished: its own asks replace the prior's share of it; revise if needed. A skipped example
        (already misclassified) leaves the examples left if it was counted among them, and says nothing of
        what an attacked one asks."""
        text = record.get("text") or ""
        w = _words(text)
        self.last_finish = time.monotonic()
        if self.pending.get(text, 0) > 0:
            self.pending[text] -= 1
            self.words_left = max(self.words_left - w, 0.0)
            self.examples_left -= 1
        if record.get("status") != "skipped":
            self.searched += 1
            self.done_words += w
            self.done_texts += float(record.get("queries") or 0)
            self.done_contexts += float(record.get("mlm_queries") or 0)
        self.check()

    def check(self) -> None:
        """Say the projection again when it left [½, 2]× of what was said (after a few examples, or
        as soon as the time elapsed alone is over twice the estimate)."""
        if self.said is None or self.examples_left <= 0:
            return
        elapsed = time.monotonic() - self.t0
        total = self.total_seconds()
        if total is None:
            return
        if abs(total - self.said) < REVISE_SECONDS:
            return
        over = elapsed > REVISE * self.said
        ratio = total / max(self.said, 1e-9)
        # the examples that finish first are the quick ones (skipped, or found at once): a projection from them
        # is low, so it is revised down only once half of them are done
        down = ratio < 1 / REVISE and self.examples_left <= self.searched
        if not over and not (ratio > REVISE and self.searched >= REVISE_AFTER) and not down:
            return
        why = (f"the {self.searched} examples searched asked {self.done_texts / self.done_words:.0f} texts and "
               f"{self.done_contexts / self.done_words:.1f} contexts per word" if self.done_words else "no example finished yet")
        self.say(f"time: revised to about {duration(total)} in all ({duration(max(total - elapsed, 0.0))} more; "
                 f"said before: {duration(self.said)}): {why}, at {self._pace_text()} measured in this run")
        self.said = total

    def _pace_text(self) -> str:
        s_q, s_m, host = self.unit_seconds()
        parts = [f"{1 / s_q:,.0f} texts/s" if s_q else "", f"{1 / s_m:,.0f} contexts/s" if s_m else ""]
        return " and ".join(p for p in parts if p) or "the measured pace"
