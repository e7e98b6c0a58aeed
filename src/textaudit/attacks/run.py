"""Run an attack over a dataset: progress, one JSON line per example as it finishes, resume, summary."""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from textaudit.attacks.base import MISCLASSIFIED, Attack
from textaudit.attacks.estimate import AttackClock, helper_seconds, measure_pace, probe_attack
from textaudit.backends import Backend, SerialBackend, place_on_device
from textaudit.classification import below_chance
from textaudit.data import check_labels
from textaudit.device import notice_if_busy
from textaudit.engine import frozen_heap
from textaudit.engine.scheduler import check_in_flight, in_flight_for
from textaudit.errors import TextAuditError
from textaudit.formats.jsonl import NUMBER, OPTIONAL, RecordSpec
from textaudit.lm import CausalLM, LazyCausalLM
from textaudit.models.batched import PairView, classifier_seconds, is_remote, label_report, query_stats
from textaudit.models.batched import work_counters as asked_so_far
from textaudit.runner import ResumableRun
from textaudit.shards import Shard, in_shard
from textaudit.stats import hit_rates, wilson

__all__ = ["run_attack", "summarize", "skip_reason", "AttackSummary", "ATTACK_RECORDS", "ATTACK_STATUSES"]

#: what an attack's record can be: a flip found, none found within the budget, not attacked (why), or an error
ATTACK_STATUSES = ("success", "failed", "skipped", "error")


def _status(record: dict) -> str | None:
    status = record.get("status")
    return None if status in ATTACK_STATUSES else f"status {status!r} is not one of {', '.join(ATTACK_STATUSES)}"


#: an attack's records (its row of :data:`textaudit.kinds.KINDS`): every record's status, label and prediction; a
#: success's l0 (words changed), cost, sentences and pair p = (w1, w2); one record per example id
ATTACK_RECORDS = RecordSpec(
    fields={"*": {"id": (str, int), "status": (str,), "label": (int, OPTIONAL), "prediction": (int, OPTIONAL),
                  "ppl_seconds": (*NUMBER, OPTIONAL), "unnatural": (int, OPTIONAL), "mlm": (str, OPTIONAL),
                  "method": (str, OPTIONAL)},
            "success": {"l0": (int,), "seconds": NUMBER, "queries": NUMBER, "text": (str, OPTIONAL),
                        "vulnerable": (str, OPTIONAL), "vulnerable_patched": (str, OPTIONAL), "pair": (list, OPTIONAL),
                        "ppl_original": (*NUMBER, OPTIONAL), "ppl_perturbed": (*NUMBER, OPTIONAL),
                        "ppl_patched": (*NUMBER, OPTIONAL), "draws": (int, OPTIONAL), "flips": (int, OPTIONAL),
                        "vulnerable_prediction": (int, OPTIONAL), "vulnerable_patched_prediction": (int, OPTIONAL)},
            "failed": {"seconds": NUMBER, "queries": NUMBER}},
    unique=True, check=_status)


class AttackSummary:
    """The summary of an attack run, updated one record at a time (:meth:`add` is O(1)).

    The headline counts every input: found_share = successes / n — a skipped input (no synonym pair fits it, already
    misclassified, a tie …), a failed search and an error all count as *not found* — with its Wilson 95% interval,
    the skips by reason (``skip_reasons``) and ``headline``, the sentence that says it all in one line;
    success_rate = successes / attacked (skipped and errors excluded: a rate over a subset whose size depends on the
    model, which every line that shows it names) with its Wilson 95% interval
    (and per gold class when there are more than two classes);
    mean ℓ0 of successes;
    median perplexities; seconds of search and of perplexity (SmolLM2, its loading included) and
    classifier queries per attacked example; on an endpoint that samples N answers per text
    (``--samples N``), ``sampled``: the successes' mean flip rate over their N draws and hit@k for
    k ≤ N — the chance that a finding flips in at least one of k draws — with intervals
    (:func:`textaudit.stats.hit_rates`)."""

    def __init__(self, method: str, k: int, classes: Sequence[str] | None = None):
        self.method, self.k = method, k
        self.classes = list(classes) if classes else None
        self.by_class: dict[int, list[int]] = {}  # gold class -> [successes, attacked]
        self.counts = {"success": 0, "failed": 0, "skipped": 0, "error": 0}
        self.n = 0
        self.l0_sum = 0
        self.already_vulnerable = 0
        self.ppl_original: list[float] = []
        self.ppl_perturbed: list[float] = []
        self.ppl_patched: list[float] = []
        self.unnatural = 0
        self.seconds = 0.0
        self.ppl_seconds = 0.0
        self.queries = 0
        self.mlm: str | None = None
        self.flips: list[int] = []  # a sampling endpoint: each success's flipping draws out of self.draws
        self.draws: int | None = None
        self.skip_reasons: dict[str, int] = {}  # why inputs were skipped, by reason (its first clause)

    def add(self, r: dict) -> None:
        self.n += 1
        status = r.get("status")
        if status in self.counts:
            self.counts[status] += 1
        if status == "skipped":
            why = skip_reason(r.get("reason"))
            self.skip_reasons[why] = self.skip_reasons.get(why, 0) + 1
        if status == "success":
            self.l0_sum += r["l0"]
            self.already_vulnerable += r.get("l0") == 0
            if r.get("ppl_original") is not None:
                self.ppl_original.append(r["ppl_original"])
            if r.get("ppl_perturbed") is not None:
                self.ppl_perturbed.append(r["ppl_perturbed"])
            if r.get("ppl_patched") is not None:
                self.ppl_patched.append(r["ppl_patched"])
            if isinstance(r.get("draws"), int) and isinstance(r.get("flips"), int):
                self.draws = self.draws or r["draws"]
                if r["draws"] == self.draws:
                    self.flips.append(r["flips"])
        if status in ("success", "failed") and r.get("label") is not None:
            cell = self.by_class.setdefault(int(r["label"]), [0, 0])
            cell[0] += status == "success"
            cell[1] += 1
        if status in ("success", "failed"):
            self.seconds += r["seconds"]
            self.queries += r["queries"]
        self.ppl_seconds += r.get("ppl_seconds") or 0.0
        self.unnatural += int(r.get("unnatural") or 0)
        self.mlm = self.mlm or r.get("mlm")

    @property
    def attacked(self) -> int:
        return self.counts["success"] + self.counts["failed"]

    @property
    def success_rate(self) -> float | None:
        return round(self.counts["success"] / self.attacked, 4) if self.attacked else None

    def to_dict(self) -> dict:
        succ, ran = self.counts["success"], self.attacked
        return {
            "method": self.method, "k": self.k, "n": self.n, "attacked": ran, "success": succ,
            "failed": self.counts["failed"], "skipped": self.counts["skipped"], "errors": self.counts["error"],
            "headline": self.headline(),
            "found_share": round(succ / self.n, 4) if self.n else None,
            "found_share_ci95": list(wilson(succ, self.n) or ()) or None,
            "skip_reasons": dict(sorted(self.skip_reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
            "success_rate": self.success_rate,
            "success_rate_ci95": list(wilson(succ, ran) or ()) or None,
            "mean_l0": round(self.l0_sum / succ, 3) if succ else None,
            "already_vulnerable": self.already_vulnerable,
            "median_ppl_original": round(statistics.median(self.ppl_original), 2) if self.ppl_original else None,
            "median_ppl_perturbed": round(statistics.median(self.ppl_perturbed), 2) if self.ppl_perturbed else None,
            **({"median_ppl_patched": round(statistics.median(self.ppl_patched), 2)} if self.ppl_patched else {}),
            **({"unnatural": self.unnatural} if self.unnatural else {}),
            "sec_per_example": round(self.seconds / ran, 3) if ran else None,
            "ppl_sec_per_example": round(self.ppl_seconds / ran, 3) if ran and self.ppl_seconds else None,
            "queries_per_example": round(self.queries / ran, 1) if ran else None,
            "mlm": self.mlm,
            **({"per_class": self.per_class()} if len(self.by_class) > 2 or self.classes and len(self.classes) > 2 else {}),
            **({"sampled": hit_rates(self.flips, self.draws)} if self.flips and self.draws else {}),
            **({"warnings": [self.inverted]} if self.inverted else {}),
        }

    @property
    def inverted(self) -> str | None:
        """:func:`~textaudit.classification.below_chance` of the clean accuracy a two-class attack saw: every labelled
        input not skipped as already misclassified counts as right (a swapped label map skips most of them, silently)."""
        wrong = self.skip_reasons.get(MISCLASSIFIED, 0)
        judged = self.n - self.counts["error"]  # every input whose prediction was checked against its label
        classes = len(self.classes) if self.classes else 2 if self.by_class and max(self.by_class) <= 1 else 0
        return below_chance(judged - wrong, judged, classes) if wrong and judged >= 10 else None

    def headline(self) -> str:
        """Every input in one line: ``found for 31 of 50 inputs (62.0%) [48.3, 74.1]; 1 failed; 18 skipped: no patch
        word fits this sentence`` — the share of all inputs with a finding (skipped, failed and errors count as not
        found), its Wilson interval, and what the others were."""
        succ, n = self.counts["success"], self.n
        if not n:
            return "no input yet"
        lo, hi = wilson(succ, n) or (0.0, 0.0)
        parts = [f"found for {succ} of {n} inputs ({100 * succ / n:.1f}%) [{100 * lo:.1f}, {100 * hi:.1f}]"]
        if self.counts["failed"]:
            parts.append(f"{self.counts['failed']} failed (searched, nothing found)")
        if self.counts["skipped"]:
            reasons = sorted(self.skip_reasons.items(), key=lambda kv: (-kv[1], kv[0]))
            parts.append(f"{self.counts['skipped']} skipped: " + ", ".join(
                f"{why}" + (f" ({c})" if len(reasons) > 1 else "") for why, c in reasons))
        if self.counts["error"]:
            parts.append(f"{self.counts['error']} error{'' if self.counts['error'] == 1 else 's'}")
        return "; ".join(parts)

    def per_class(self) -> dict[str, dict]:
        """Success rate per gold class (with its Wilson interval), keyed by class name (else id)."""
        names = self.classes or []
        out = {}
        for c in sorted(self.by_class):
            succ, ran = self.by_class[c]
            out[names[c] if c < len(names) else str(c)] = {
                "attacked": ran, "success": succ, "success_rate": round(succ / ran, 4) if ran else None,
                "success_rate_ci95": list(wilson(succ, ran) or ()) or None}
        return out


def skip_reason(reason: object) -> str:
    """A skip's reason as it is counted: its first clause (``no patch word fits this sentence``, ``already
    misclassified``, ``the model's top classes tie on this input``), without the numbers that make each one unique."""
    text = str(reason or "no reason recorded").strip()
    return text.split(":")[0].split(" (")[0].strip() or "no reason recorded"


def summarize(records: Sequence[dict], method: str, k: int, classes: Sequence[str] | None = None) -> dict:
    """Return the summary of ``records`` (see :class:`AttackSummary`)."""
    s = AttackSummary(method, k, classes)
    for r in records:
        s.add(r)
    return s.to_dict()


class AttackJob:
    """The work of one example, as a worker does it: the attack's record, plus the perplexities of a
    success when ``ppl`` is given (a worker loads SmolLM2 itself, on first use)."""

    def __init__(self, attack: Attack, ppl: CausalLM | LazyCausalLM | None, side: str = "second",
                 in_flight: int | None = None):
        place_on_device(attack)
        self.attack, self.ppl, self.side = attack, ppl, side
        self.in_flight = in_flight

    def __call__(self, job: tuple[str, int | None, str | None]) -> dict:
        text, label, context = job
        return self._record(self.attack.attack(text, label, context=context, side=self.side))

    def many(self, jobs: Sequence[tuple[str, tuple[str, int | None, str | None]]]) -> Iterator[tuple[str, dict]]:
        """``(job id, record)`` of every job as it finishes, ``in_flight`` of them searched at once by
        one engine (its default: :func:`~textaudit.engine.scheduler.default_in_flight` for the device)."""
        n = in_flight_for(self.attack.classifier, self.in_flight)
        for job_id, res in self.attack.attack_many(jobs, in_flight=n, side=self.side):
            yield job_id, self._record(res)

    def _record(self, res) -> dict:
        rec = res.to_dict()
        if self.ppl is not None and res.status == "success":
            t0 = time.perf_counter()
            texts = [res.text, res.vulnerable] + ([res.vulnerable_patched] if res.vulnerable_patched else [])
            po, pp, *patched = self.ppl.perplexity(texts)
            rec["ppl_original"], rec["ppl_perturbed"] = round(po, 3), round(pp, 3)
            if patched:  # x̃ ⊕ p: what a person reads beside x̃
                rec["ppl_patched"] = round(patched[0], 3)
            rec["ppl_seconds"] = round(time.perf_counter() - t0, 3)  # loading the LM included, once
        return rec


def engine_counters(attack: Attack) -> np.ndarray:
    """The engine's counters so far: seconds of the classifier's compute (:func:`classifier_seconds`)
    and inside the masked LM's bare forwards, texts forwarded, classifier forwards, masked sentences
    forwarded, masked-LM forwards."""
    stats = query_stats(attack.classifier)
    mlm = attack.mlm
    clock = getattr(mlm, "clock", None)
    return np.array([classifier_seconds(attack.classifier), float(getattr(clock, "seconds", 0.0) or 0.0),
                     getattr(stats, "unique_forwards", 0), getattr(stats, "batches", 0),
                     getattr(mlm, "forwards", 0) or 0, getattr(clock, "calls", 0) or 0], dtype=float)


def work_counters(attack: Attack) -> tuple[float, float, float, float]:
    """What the attack asked so far, for its :class:`~textaudit.attacks.estimate.AttackClock`
    (:func:`textaudit.models.batched.work_counters` of its classifier and masked LM), the seconds of its
    :meth:`~textaudit.attacks.base.Attack.helpers` counted with the classifier's."""
    texts, contexts, clf_s, mlm_s = asked_so_far([attack.classifier], attack.mlm)
    # texts in the unit of the records' ``queries`` (the distinct texts a search asked, :class:`Meter`): those the
    # model or the store answered, not the memory cache — Genetic asks its population again each generation, and
    # counted with those repeats its texts were 7.75× its records' queries (6 SST-2 dev examples on cnn), which
    # priced each at a repeat's cost and read 'ETA 3s' with ten minutes to go
    texts -= float(getattr(query_stats(attack.classifier), "cache_hits", 0) or 0)
    # what the search asks beside them (Genetic's LM, BAE's encoder and tagger) is part of what its texts cost
    return texts, contexts, clf_s + sum(float(getattr(h, "seconds", 0.0) or 0.0) for h in attack.helpers()), mlm_s


def engine_summary(attack: Attack, since: np.ndarray, wall: float, ppl: float = 0.0) -> dict:
    """Where a run's ``wall_seconds`` went since the counters ``since`` (:func:`engine_counters`):
    ``classifier_seconds`` (the model audited: its forwards, or the whole call of a plug-in or an
    endpoint), ``mlm_seconds`` (the masked LM's forwards), ``device_seconds`` their sum, and
    ``ppl_seconds`` (SmolLM2's perplexities of the results, its loading included) and ``host_seconds``
    the rest of the wall (tokenising, padding, the search itself, writing); the mean
    ``texts_per_forward`` and ``masked_per_forward``."""
    clf, mlm, texts, forwards, masked, mlm_forwards = engine_counters(attack) - since
    device = clf + mlm
    out = {"wall_seconds": round(wall, 3), "device_seconds": round(device, 3),
           "classifier_seconds": round(clf, 3), "mlm_seconds": round(mlm, 3), "ppl_seconds": round(ppl, 3),
           "host_seconds": round(max(wall - device - ppl, 0.0), 3)}
    if forwards:
        out["texts_per_forward"] = round(texts / forwards, 1)
    if mlm_forwards:
        out["masked_per_forward"] = round(masked / mlm_forwards, 1)
    return out


def _check_previous_texts(output, previous: list[dict], ids: Sequence[str], texts: Sequence[str]) -> None:
    """A resumed file's records must be of this data: a record whose ``text`` is not the text its id has
    here was written from other data (same ids, other file) or was damaged (an edit, a flipped byte inside
    a string keeps the line valid JSON) — counting it would mix two runs silently."""
    if not previous:
        return
    given = dict(zip(ids, texts))
    for r in previous:
        want = given.get(r.get("id"))
        if want is not None and isinstance(r.get("text"), str) and r["text"] != want:
            raise TextAuditError(f"{output}: the record of '{r['id']}' holds the text {r['text'][:60]!r}, but the data "
                                 f"gives {want[:60]!r}: the file was written from other data, or damaged; resume it with "
                                 "the data it was written from, or move it away (its examples are attacked again)")


def _check_inputs(attack: Attack, texts: Sequence[str], labels: Sequence[int] | None,
                  contexts: Sequence[str] | None, side: str, in_flight: int | None) -> None:
    """The one-line errors of :func:`run_attack`'s inputs, before the results file is touched."""
    if in_flight is not None:
        check_in_flight(in_flight)
    if len(texts) == 0:
        raise TextAuditError("no examples to attack (empty dataset)")
    if contexts is not None and len(contexts) != len(texts):
        raise TextAuditError(f"{len(contexts)} pair texts for {len(texts)} examples")
    if labels is not None:
        model = attack.classifier if contexts is None else PairView(attack.classifier, contexts[0], side)
        check_labels(labels, model.num_classes, attack.classifier.name)


def _clock(attack: Attack, run: ResumableRun, todo: list[str], labels: list[int] | None, contexts: list[str] | None,
           *, side: str, in_flight: int | None, estimate: bool, say: Callable[[str], None] | None) -> AttackClock:
    """The :class:`~textaudit.attacks.estimate.AttackClock` of the examples ``todo`` (those left to attack here):
    with ``estimate``, the time they will take is said first, at the pace measured on them and — SO-Beam,
    SO-Enum — after a probe of the first few."""
    group = in_flight_for(attack.classifier, in_flight)
    probe = pace = attacked = None
    if estimate and say is not None and todo and contexts is None:  # (pairs: timed as they run)
        # the threads the run will use first: on a busy machine two threads fighting over one free core timed the
        # pace 60× slow (214 texts/s where the run went at 13,219), and the attack said 5m56s for 39 s
        notice_if_busy()
        builder = getattr(attack, "builder", None)
        pace = measure_pace(attack.classifier, attack.mlm, todo, getattr(builder, "kappa", 20),
                            getattr(builder, "language", "en"))
        if pace is not None and attack.helpers():  # (Genetic's LM, BAE's encoder and tagger: priced per text)
            extra = helper_seconds(attack.method, getattr(attack, "recipe", None), attack.helpers(), todo)
            pace = replace(pace, text_seconds=pace.text_seconds + extra)
    if pace is not None:
        attacked = _right(attack.classifier, todo, labels)
        probe = probe_attack(attack, todo, labels, in_flight=group, counters=lambda: work_counters(attack), side=side,
                             contexts=contexts)
    clock = AttackClock(attack.method, todo, pace, lambda: work_counters(attack),
                        say=run.say if say is not None else None, in_flight=group,
                        probe=probe, k=attack.k, beam=getattr(attack, "beam", None), attacked=attacked,
                        levels=_levels(attack), upcoming=getattr(getattr(attack, "checks", None), "upcoming", None),
                        helpers=[str(getattr(h, "name", type(h).__name__)) for h in attack.helpers()],
                        recipe=getattr(attack, "recipe", None))
    for line in clock.estimate_lines(len(todo)) if todo and say is not None else []:
        say(line)
    return clock


def _levels(attack: Attack) -> Callable[[], list[int]] | None:
    """The attack's masked-LM contexts of the neighbourhood levels begun and asked (None without a builder)."""
    builder = getattr(attack, "builder", None)
    counts = getattr(builder, "level_contexts", None)
    return None if counts is None else (lambda: list(counts))


def _right(classifier: Any, texts: list[str], labels: list[int] | None) -> list[bool] | None:
    """Which of ``texts`` the model gets right (an attack skips the others at once): their predictions, which the
    run asks first anyway (the classifier's cache keeps them). None without labels, or for an endpoint (its
    queries are counted against a budget: they are asked as the run reaches them)."""
    if labels is None or is_remote(classifier):
        return None
    probs = np.asarray(classifier.predict_proba(texts))
    return [int(p) == int(y) for p, y in zip(probs.argmax(axis=1), labels)]


def run_attack(attack: Attack, texts: Sequence[str], labels: Sequence[int] | None, *,
               ids: Sequence[str] | None = None, output=None, resume: bool = False, progress: bool = True,
               ppl: CausalLM | LazyCausalLM | None = None, on_result: Callable[[dict], None] | None = None,
               config: dict | None = None, shard: Shard | None = None,
               backend: Backend | None = None, contexts: Sequence[str] | None = None,
               side: str = "second", in_flight: int | None = None,
               estimate: bool = False, say: Callable[[str], None] | None = None) -> tuple[dict, list[dict]]:
    """Attack every example (skipping ids already in ``output`` when ``resume``) and return
    ``(summary, records)``; each record is appended to ``output`` (JSONL) and flushed as it finishes.

    ``ppl``: a :class:`~textaudit.lm.CausalLM` for the perplexity of the original and of the
    vulnerable example of each success (None: not computed).
    ``config``: settings of the run beyond the attack's own (:meth:`Attack.config`), e.g. the data;
    all of them go into the header of ``output``, and a ``resume`` with other settings is refused.
    ``shard``: ``(i, N)``: attack only the examples of that shard (:mod:`textaudit.shards`).
    ``backend``: where the examples are attacked (:mod:`textaudit.backends`; default: here, in order).
    ``contexts``: sentence pairs — the other text of each example, kept verbatim while ``texts`` are
    attacked as the pair's ``side`` ("second": the model sees ``(context, text)``; "first": ``(text, context)``).
    ``in_flight``: examples searched at once, their asks merged into one forward per step
    (:mod:`textaudit.engine.scheduler`; default: from the device). Records do not depend on it;
    they are written as examples finish (in completion order, with their ids).
    Where the examples run here, an :class:`~textaudit.attacks.estimate.AttackClock` follows the run: the
    progress line shows the texts and contexts asked so far and an ETA of the work left. ``estimate``:
    the time of the examples to do is said through ``say`` before they start (once the results file has
    its header), at the pace measured on their first texts (:func:`~textaudit.attacks.estimate.measure_pace`)
    — for SO-Beam and SO-Enum after a first round (k = 1) on the first few of them
    (:func:`~textaudit.attacks.estimate.probe_attack`: how many it settles says how robust the model is;
    what it asks stays cached for the run) — and again when the run proves it wrong by more than 2×.
    """
    _check_inputs(attack, texts, labels, contexts, side, in_flight)
    ids = list(ids) if ids is not None else [str(i) for i in range(len(texts))]
    summary = AttackSummary(attack.method, attack.k, (config or {}).get("labels"))
    title = attack.method + (f" k={attack.k}" if attack.k else "")
    settings = {**attack.config(), "ppl": ppl is not None, **(config or {})}
    if contexts is not None:
        settings["perturb_side"] = side
    local = backend is None or isinstance(backend, SerialBackend)
    with ResumableRun(output, resume=resume, progress=progress, command="attack", config=settings, spec=ATTACK_RECORDS,
                      shard=shard) as run, frozen_heap():
        _check_previous_texts(output, run.previous, ids, texts)
        wall0, counters0 = time.perf_counter(), engine_counters(attack)  # this run's work: not the file's reading
        ppl_seconds = 0.0
        for r in run.previous:
            summary.add(r)
        jobs = [(id_, (texts[i], None if labels is None else int(labels[i]), None if contexts is None else contexts[i]))
                for i, id_ in enumerate(ids)]
        live = None
        if local:
            rows = [i for i, id_ in enumerate(ids) if id_ not in run.done and in_shard(id_, shard)]
            clock = _clock(attack, run, [texts[i] for i in rows], None if labels is None else [labels[i] for i in rows],
                           None if contexts is None else [contexts[i] for i in rows], side=side, in_flight=in_flight,
                           estimate=estimate, say=say)
            live = (clock.fields, clock.remaining)
        for id_, rec in run.results(jobs, lambda: AttackJob(attack, ppl, side, in_flight), desc=title, unit="ex",
                                   backend=backend, cost=lambda job: len(job[0].split()),  # neighbourhoods grow with length
                                   group=in_flight_for(attack.classifier, in_flight), live=live):
            rec = {"id": id_, **rec}
            if live is not None:
                clock.finish(rec)
            ppl_seconds += float(rec.get("ppl_seconds") or 0.0)
            run.write(rec)
            summary.add(rec)
            if on_result:
                on_result(rec)
            run.show(success=f"{summary.counts['success']}/{summary.attacked}", rate=summary.success_rate)
        out = summary.to_dict()
        if local:  # where this run's time went: inside the model forwards, or on the host around them
            out.update(engine_summary(attack, counters0, time.perf_counter() - wall0, ppl_seconds))
        out.update(label_report(attack.classifier))  # an OpenAI-compatible endpoint: how it was scored, unknown answers
        order = {id_: i for i, id_ in enumerate(ids)}  # the file is in completion order; the list in input order
        return out, sorted(run.records, key=lambda r: order.get(r.get("id"), len(order)))
