"""The attack's time: the estimate before it (both the classifier's and the masked LM's share), the
work in flight on the progress line, and a revision when the run proves the estimate wrong by 2×.

The clock's arithmetic is checked on counters given here (exact figures); the real runs are in
``test_progress.py`` (a plug-in with the shipped masked LM) and the measured accuracy of the estimate in
``benchmarks/estimate_time.py`` (a speed figure: not a test)."""

from __future__ import annotations

import pytest

from textaudit.attacks.estimate import (
    FAILED_PER_WORD,
    FOUND_LATER,
    LATER_PER_WORD,
    REVISE_AFTER,
    SETTLED_FOR_FOUND_LATER,
    WORK_PER_WORD,
    AttackClock,
    Pace,
    Probe,
)


class Counters:
    """What a run asked so far: texts, contexts, and their seconds (set by the test)."""

    def __init__(self) -> None:
        self.now = [0.0, 0.0, 0.0, 0.0]

    def __call__(self) -> tuple[float, float, float, float]:
        return tuple(self.now)  # type: ignore[return-value]


TEXTS = ["one two three four five six seven eight nine ten"] * 10  # 100 words


def test_the_estimate_counts_the_masked_lm_at_its_measured_pace():
    """100 words × (96 texts × 1 ms + 5.4 contexts × 10 ms) = 9.6 s + 5.4 s: the masked LM's share is
    there (the old line counted the classifier alone)."""
    said: list[str] = []
    clock = AttackClock("so-beam", TEXTS, Pace(0.001, 0.01), Counters(), say=said.append)
    lines = clock.estimate_lines(10)
    assert lines[0] == "time: about 15s for 10 examples here: classifier 10s at 1,000 texts/s; masked LM 5s at 100 contexts/s"
    assert lines[1].startswith("time: from a search that asks what an SST-2 one does") and len(lines) == 2
    assert all(len(ln) < 200 for ln in lines)  # a log shows each whole (the one line was 400+ characters)
    assert clock.said == pytest.approx(15.0)
    assert WORK_PER_WORD["so-beam"] == (96.0, 5.4)


def test_no_line_without_a_pace_or_a_prior():
    assert AttackClock("so-beam", TEXTS, None, Counters()).estimate_lines(10) == []
    assert AttackClock("textattack:pwws", TEXTS, Pace(0.001, 0.01), Counters()).estimate_lines(10) == []


def test_the_finished_examples_replace_the_prior_and_a_2x_miss_is_said_again(monkeypatch):
    """Each finished example asked 10× the prior's contexts: after REVISE_AFTER of them, the projection
    is more than 2× what was said, and it is said again, with why; before that it is not."""
    import textaudit.attacks.estimate as est

    now = [1000.0]
    monkeypatch.setattr(est.time, "monotonic", lambda: now[0])
    counters = Counters()
    said: list[str] = []
    clock = AttackClock("so-beam", TEXTS, Pace(0.001, 0.1), counters, say=said.append, in_flight=1)
    "\n".join(clock.estimate_lines(10))  # 100 × (0.096 + 0.54) = 63.6 s
    for i in range(REVISE_AFTER):
        now[0] += 60.0
        counters.now = [96.0 * 10 * (i + 1), 54.0 * 10 * (i + 1), 0.96 * (i + 1), 54.0 * (i + 1)]
        clock.finish({"text": TEXTS[0], "status": "success", "queries": 960, "mlm_queries": 540})
        assert bool(said) == (i + 1 >= REVISE_AFTER), said
    assert said[0].startswith("time: revised to about ") and "the 3 examples searched asked 96 texts and 54.0 contexts per word" in said[0]
    # the prior (200 words) and 30 words of 54 contexts each: (5.4·200 + 54·30) / 230 = 11.7 per word
    q_w, m_w = clock.per_word()
    assert m_w == pytest.approx((5.4 * 200 + 540 * 3) / 230)


def test_the_fields_grow_with_the_work_in_flight_and_the_eta_keeps_some_for_it():
    counters = Counters()
    clock = AttackClock("so-enum", TEXTS, Pace(0.001, 0.01), counters, in_flight=32)
    assert clock.fields() == {"asked": "0"}
    counters.now = [12_345.0, 678.0, 12.3, 6.8]
    assert clock.fields() == {"asked": "12,345", "contexts": "678"}
    # nothing finished, everything in flight, and more spent than the prior expected: still time left
    counters.now = [1e7, 1e6, 100.0, 100.0]
    assert clock.remaining() > 0


def test_examples_in_flight_long_after_the_last_finished_keep_as_long_again(monkeypatch):
    """Costs are heavy-tailed: when nothing has finished for T seconds, the examples in flight have about T to go —
    whatever the prior said (SO-Beam's and a replay's ETA read 11 s low a quarter into 26-second runs)."""
    import textaudit.attacks.estimate as est

    now = [1000.0]
    monkeypatch.setattr(est.time, "monotonic", lambda: now[0])
    counters = Counters()
    clock = AttackClock("so-beam", TEXTS, Pace(1e-6, 1e-6), counters, in_flight=32)
    counters.now = [100.0, 10.0, 0.0001, 0.00001]
    quick = clock.remaining()
    assert quick < 1.0  # the prior's cost at this pace: next to nothing
    now[0] += 30.0
    assert clock.remaining() >= 30.0  # 30 s and none finished: 30 s more at least
    clock.finish({"text": TEXTS[0], "status": "success", "queries": 10, "mlm_queries": 1})
    assert clock.remaining() < 30.0  # one finished just now: the projection again


def test_a_probe_costs_the_unsettled_share_as_searches_that_find_nothing():
    """A first round settled 4 of the 16 it attacked at (10, 1) per word: the settled share is (4 + 1) / (16 + 2)
    (Laplace's rule: 4 of 4 would not prove that all settle), the rest cost what later rounds ask — SO-Beam: a
    share found in a later round (0.8 × share / 0.6: a first round that settles little says the model resists),
    the others failed searches (their cost scaled by the rounds' sentences); SO-Enum: the whole of Neighbor_2."""
    probe = Probe(examples=16, settled=4, per_word=(10.0, 1.0), pace=Pace(0.001, 0.01), seconds=2.0, skipped=3)
    share = 5 / 18
    assert probe.settled_share() == pytest.approx(share)
    assert Probe(4, 4, (1.0, 1.0), None, 1.0).settled_share() == pytest.approx(5 / 6)  # the replay's case: not 1
    later = FOUND_LATER * share / SETTLED_FOR_FOUND_LATER
    assert probe.found_later() == pytest.approx(later)
    assert Probe(10, 7, (1.0, 1.0), None, 1.0).found_later() == FOUND_LATER == Probe(10, 9, (1.0, 1.0), None, 1.0).found_later()
    q, m = probe.prior("so-beam", 6)
    rest = [later * a + (1 - later) * b for a, b in zip(LATER_PER_WORD["so-beam"], FAILED_PER_WORD["so-beam"])]
    assert (q, m) == pytest.approx((share * 10 + (1 - share) * rest[0], share * 1 + (1 - share) * rest[1]))
    # k = 2, β = 20: the first round expands x0, the second 20 sentences — 21 of k = 6's 101 (and a later find costs
    # no more than a failed search)
    failed = [1238.0 * 21 / 101, 71.2 * 21 / 101]
    rest = [later * min(a, b) + (1 - later) * b for a, b in zip(LATER_PER_WORD["so-beam"], failed)]
    assert probe.prior("so-beam", 2) == pytest.approx((share * 10 + (1 - share) * rest[0], share * 1 + (1 - share) * rest[1]))
    assert probe.prior("so-enum", 2) == pytest.approx((share * 10 + (1 - share) * 1949.0, share * 1 + (1 - share) * 168.0))
    measured = Pace(0.002, 0.02)
    clock = AttackClock("so-beam", TEXTS, measured, Counters(), probe=probe, k=6, beam=20)
    assert clock.pace == measured and clock.prior == pytest.approx((q, m))  # a 2 s probe is too short to time
    assert "a first round (k = 1) on the first 19 examples settled 4 of the 16 attacked in 2.0 s" in clock.estimate_lines(10)[1]
    long = Probe(examples=16, settled=4, per_word=(10.0, 1.0), pace=Pace(0.001, 0.01), seconds=6.0)
    assert AttackClock("so-beam", TEXTS, measured, Counters(), probe=long, k=6).pace == long.pace  # the engine's own


def test_examples_already_misclassified_cost_nothing_and_say_nothing_of_the_others(monkeypatch):
    """An example the model gets wrong is skipped at once. Known before the run (``attacked``), it is out of the
    estimate, which says how many are attacked; not known, it leaves the examples left when it finishes but does
    not pull the cost per word of the attacked ones down (it finished first and asked nothing: the ETAs of a
    20-example SO-Enum read half the elapsed time, 4× too low, while 11 searches ran)."""
    import textaudit.attacks.estimate as est

    now = [1000.0]
    monkeypatch.setattr(est.time, "monotonic", lambda: now[0])
    said: list[str] = []
    counters = Counters()
    texts = [f"w{i} two three four five six seven eight nine ten" for i in range(10)]  # 100 words
    known = AttackClock("so-beam", texts, Pace(0.001, 0.1), counters, say=said.append, in_flight=1,
                        attacked=[True] * 5 + [False] * 5)
    lines = known.estimate_lines(10)
    assert lines[0].startswith("time: about 32s for 10 examples here (5 to attack; 5 already misclassified): ")
    assert known.said == pytest.approx(50 * (0.096 + 0.54))
    unknown = AttackClock("so-beam", texts, Pace(0.001, 0.1), counters, say=said.append, in_flight=1)
    assert unknown.estimate_lines(10)[0].startswith("time: about 1m04s for 10 examples here: ")
    for i in range(5, 10):
        now[0] += 0.1
        for clock in (known, unknown):
            clock.finish({"text": texts[i], "status": "skipped", "queries": 1, "mlm_queries": 0})
    assert said == []  # the first was right; the second is not revised down by the quick ones
    assert known.examples_left == 5 and known.per_word() == unknown.per_word() == pytest.approx(WORK_PER_WORD["so-beam"])
    assert unknown.examples_left == 5 and known.remaining() == pytest.approx(unknown.remaining())
    assert known.remaining() == pytest.approx(50 * (0.096 + 0.54))


def test_a_sample_the_store_held_gives_a_range_up_to_computing_the_neighbours():
    """The data's first sentences were attacked before: their contexts come from the store (fast), their
    neighbours' may not — the line gives both ends; a revision is measured against the middle."""
    pace = Pace(0.001, 0.0001, store_share=1.0, computed_seconds=0.01)
    clock = AttackClock("so-beam", TEXTS, pace, Counters())
    line = clock.estimate_lines(10)[0]
    # 100 words: classifier 9.6 s; masked LM 5.4 contexts/word at 0.1 ms = 0.054 s, or at 10 ms = 5.4 s
    assert line == ("time: about 10s to 15s for 10 examples here: classifier 10s at 1,000 texts/s; masked LM 0s at "
                    "10,000 contexts/s; 100% of the first sentences' contexts were in the store: if their "
                    "neighbours' are not, 5s at 100 contexts/s"), line
    assert clock.said == pytest.approx((9.654 * 15.0) ** 0.5)


def test_the_pace_of_a_plugin_and_the_shipped_masked_lm_is_measured_on_the_data(tmp_path):
    """measure_pace on real objects: the classifier's texts/s and the masked LM's contexts/s, and the store's share
    of the timed contexts (an empty store: none; the same again: all of them, from its memory cache)."""
    from textaudit.attacks.estimate import measure_pace
    from textaudit.models import load_classifier
    from textaudit.neighborhoods.mlm import load_mlm

    (tmp_path / "p.py").write_text("def clf(texts):\n    return [[0.3, 0.7] for t in texts]\n")
    clf = load_classifier(f"{tmp_path}/p.py:clf")
    mlm = load_mlm("minilm-mlm")
    texts = ["a deep and meaningful film .", "the plot is thin and the acting is worse .", "one more film ."]
    first = measure_pace(clf, mlm, texts)
    assert first.text_seconds > 0 and first.context_seconds > 0 and first.store_share == 0.0
    again = measure_pace(clf, mlm, texts)
    assert again.store_share == 1.0
    assert measure_pace(clf, None, texts).context_seconds is None


def test_the_classifier_pace_is_timed_on_the_first_neighbours_as_a_search_asks_them(tmp_path, monkeypatch):
    """A run asks thousands of texts a call: timed on the data's few first texts a call, the pace was the call's
    overhead (1,078 texts/s on a busy machine where the run went at 14,227). The classifier is also timed on the first
    sentences' neighbours (one word replaced by a masked-LM candidate, written as a search writes them) in calls of
    of about a hundred texts — unless its texts say that would take over 2 s (a model slow per text)."""
    import textaudit.engine.pace as pace
    from textaudit.attacks.estimate import measure_pace
    from textaudit.models import load_classifier
    from textaudit.neighborhoods.mlm import load_mlm
    from textaudit.sentence import Sentence

    (tmp_path / "p.py").write_text("import time\nCALLS = []\ndef clf(texts):\n    CALLS.append(list(texts))\n"
                                   "    return [[0.3, 0.7] for t in texts]\n"
                                   "def slow(texts):\n    CALLS.append(list(texts))\n    time.sleep(0.2 * len(texts))\n"
                                   "    return [[0.3, 0.7] for t in texts]\n")
    texts = ["a deep and meaningful film .", "the plot is thin and the acting is worse .", "one more film ."]
    mlm = load_mlm("minilm-mlm")
    monkeypatch.setattr(pace, "PACE_NEIGHBOR_SECONDS", 1e9)  # (whatever this machine's speed: timed)
    clf = load_classifier(f"{tmp_path}/p.py:clf")
    calls = clf.forward.__globals__["CALLS"]  # (the plugin's own list: every call it got)
    measure_pace(clf, mlm, texts)
    big = [c for c in calls if len(c) > 50]  # (10 contexts × up to 20 candidates, timed in two halves)
    assert big, [len(c) for c in calls]
    words = {tuple(Sentence.parse(t).tokens) for t in texts}
    for text in big[0]:  # each a data sentence with one word replaced
        tokens = Sentence.parse(text).tokens
        assert any(len(w) == len(tokens) and sum(a != b for a, b in zip(w, tokens)) == 1 for w in words), text
    monkeypatch.setattr(pace, "PACE_NEIGHBOR_SECONDS", 2.0)
    slow = load_classifier(f"{tmp_path}/p.py:slow")
    calls = slow.forward.__globals__["CALLS"]
    calls.clear()
    measure_pace(slow, mlm, texts)
    assert calls and max(len(c) for c in calls) <= len(texts)  # 0.2 s a text: 256 neighbours would take 51 s


def test_the_work_per_word_follows_k():
    """SO-Enum at k = 1 is one round (Neighbor_1 of x0), not Neighbor_2's enumeration: harden's before/after at
    k = 1 was estimated 17× over when every SO-Enum was costed at k = 2."""
    from textaudit.attacks.estimate import WORK_BY_K, work_per_word

    assert work_per_word("so-enum", 1) == WORK_BY_K[("so-enum", 1)] and work_per_word("so-enum", 2) == WORK_PER_WORD["so-enum"]
    assert work_per_word("so-beam", 3) == work_per_word("so-beam", 4) == WORK_BY_K[("so-beam", 3)]
    assert work_per_word("so-beam", 6) == WORK_PER_WORD["so-beam"] and work_per_word("genetic", None) == WORK_PER_WORD["genetic"]
    assert work_per_word("so-enum", 1)[1] < WORK_PER_WORD["so-enum"][1] / 20


def test_levels_in_flight_are_costed_by_their_frontiers_not_by_the_average_example():
    """SO-Enum enumerates a whole level before it checks it: an example in flight after its first level asks all of its
    frontier's positions, known when the level begins (the neighbourhood builder counts them). The ETA counts those
    not asked yet and the texts that score what they find — where the heavy-tail guess (half the seconds spent) read
    half the elapsed time, 2–4× low, for minutes."""
    counters = Counters()
    levels = [0.0, 0.0]
    clock = AttackClock("so-enum", TEXTS, Pace(0.001, 0.01), counters, in_flight=32, levels=lambda: list(levels))
    counters.now = [1000.0, 100.0, 1.0, 1.0]  # 1 ms a text, 10 ms a context
    assert clock.level_left(0.001, 0.01, (100.0, 10.0), 1000.0, 100.0) is None  # no level begun: the old guess
    levels[0] = 2_000.0  # the in-flight examples began levels of 2,000 contexts in all
    q_w, m_w = clock.per_word()
    left = clock.level_left(0.001, 0.01, (q_w, m_w), 1000.0, 100.0)
    assert left == pytest.approx((2_000 - 100) * 0.01 + (2_000 * q_w / m_w - 1_000) * 0.001)
    # all ten in flight, none finished: the time left is at least what their levels still ask
    assert clock.remaining() >= left
    # examples still checking their first level announce second ones, expected to ask 1,500 contexts in all
    # (:meth:`NaturalChecks.upcoming` weighs them): at 135 s of a 173-second SO-Enum the ETA read 9 s
    counters.now, begun = [0.0, 0.0, 0.0, 0.0], [0.0, 0.0]
    ahead = AttackClock("so-enum", TEXTS + ["a finished one"], Pace(0.001, 0.01), counters, in_flight=32,
                        levels=lambda: list(begun), upcoming=lambda: 1_500.0)
    counters.now, begun[0] = [1000.0, 100.0, 1.0, 1.0], 2_000.0
    ahead.finish({"text": "a finished one", "queries": 10, "mlm_queries": 1})
    more = ahead.level_left(0.001, 0.01, (q_w, m_w), 1000.0, 100.0)
    assert more == pytest.approx((3_500 - 100) * 0.01 + (3_500 * q_w / m_w - 1_000) * 0.001)
    # the run's counters price a text below the pace (they leave out building the neighbours' sentences): the level's
    # texts cost the pace's seconds, its contexts the run's
    slow = ahead.level_left(0.0001, 0.01, (q_w, m_w), 1000.0, 100.0)
    assert slow == pytest.approx(more)


def test_the_pace_keeps_the_faster_of_two_timed_halves(monkeypatch):
    """A busy machine's other process scheduled in during the one timed call made 63 texts of 15 ms take 1.4 s and
    an attack's estimate 12× too long: the pace is timed in two halves of different texts (a second call of the same
    would come from the cache) and the faster kept."""
    import textaudit.engine.pace as pace

    ticks = iter([0.0, 1.0, 1.0, 1.1])  # the first half took 1 s (interrupted), the second 0.1 s
    monkeypatch.setattr(pace.time, "perf_counter", lambda: next(ticks))
    seen: list[list[int]] = []
    assert pace.fastest(seen.append, list(range(10))) == pytest.approx(0.1 / 5)
    assert seen == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]  # each item asked once


def test_the_helpers_a_search_asks_are_priced_with_its_texts(tmp_path):
    """BAE's encoder and tagger (real ones): their seconds count with the classifier's while it runs, and before it
    they are timed on the data's first texts × the items a search asks of each per classifier text
    (HELPER_ITEMS_PER_TEXT) — the estimate line names them. Without them a BAE or Genetic run with its LM was said to
    take 'about 0s' (the classifier's share) for minutes of encoder or LM."""
    pytest.importorskip("textblob")
    from textaudit.attacks import make_attack, run_attack
    from textaudit.attacks.estimate import HELPER_ITEMS_PER_TEXT, helper_seconds
    from textaudit.attacks.pos import PartOfSpeech
    from textaudit.attacks.run import work_counters
    from textaudit.models import load_classifier
    from textaudit.models.encoders import SentenceEncoder
    from textaudit.neighborhoods.mlm import load_mlm

    (tmp_path / "p.py").write_text("def clf(texts):\n    return [[0.3, 0.7] if 'film' in t else [0.6, 0.4] for t in texts]\n")
    enc, pos = SentenceEncoder(device="cpu"), PartOfSpeech()
    atk = make_attack("bae", load_classifier(f"{tmp_path}/p.py:clf"), mlm=load_mlm("minilm-mlm"), encoder=enc, pos=pos,
                      recipe="paper")
    assert atk.helpers() == [enc, pos]
    texts = ["a deep and meaningful film .", "the film is thin and the acting is worse .", "one more film ."]
    before = enc.seconds
    extra = helper_seconds("bae", "paper", atk.helpers(), texts)
    assert extra > 0 and enc.seconds > before and pos.seconds > 0
    assert helper_seconds("bae", "paper", [], texts) == 0.0
    assert helper_seconds("genetic", "relaxed", [enc], texts) == 0.0  # (a helper the table does not list there)
    assert HELPER_ITEMS_PER_TEXT[("bae", "paper", "encoder")] > 0
    said: list[str] = []
    run_attack(atk, texts, [1, 1, 1], progress=False, estimate=True, say=said.append)
    assert any(ln.startswith("time: about") and f"classifier and {enc.name} and {pos.name}" in ln for ln in said), said
    texts_asked, _, seconds, _ = work_counters(atk)
    assert texts_asked > 0 and seconds >= enc.seconds + pos.seconds > 0


def test_the_texts_an_attack_has_asked_are_counted_as_its_records_count_them(tmp_path):
    """The clock's texts are the records' unit (distinct texts a search asked: those the model or the store answered),
    not every answer of the memory cache: Genetic asks its population again each generation, and counted with those
    repeats its texts were several times its records' queries — each priced at a repeat's cost, 'ETA 3s' with ten
    minutes to go."""
    from textaudit.attacks import make_attack, run_attack
    from textaudit.attacks.run import work_counters
    from textaudit.models import load_classifier
    from textaudit.models.batched import query_stats

    (tmp_path / "p.py").write_text("def clf(texts):\n    return [[0.2, 0.8] for t in texts]\n")  # never fooled
    neighbors = {"film": ["movie", "picture"], "deep": ["profound", "thick"], "meaningful": ["significant"],
                 "plot": ["story"], "thin": ["slim", "slender"]}
    atk = make_attack("genetic", load_classifier(f"{tmp_path}/p.py:clf"), neighbors=neighbors, seed=0)
    texts = ["a deep and meaningful film .", "the plot is thin ."]
    _, records = run_attack(atk, texts, [1, 1], progress=False)
    asked = sum(r["queries"] for r in records)
    counted = work_counters(atk)[0]
    assert asked > 0 and asked <= counted <= asked + len(texts)  # (+ the originals' own predictions)
    assert query_stats(atk.classifier).cache_hits > 2 * asked  # the repeats the old count included


def test_a_search_with_helpers_weighs_its_bursts_against_the_measured_pace():
    """Genetic's LM scores every member's candidates before the classifier sees one: 300 texts with 60 s of LM
    behind them is a burst, not the pace (0.2 s a text, where the run goes at 0.01). With helpers the run's own pace is
    the pace measured before it until HELPER_PRIOR_TEXTS texts, then weighed against it as if that had as many;
    without helpers, it is the run's."""
    from textaudit.attacks.estimate import HELPER_PRIOR_TEXTS

    counters = Counters()
    with_lm = AttackClock("genetic", TEXTS, Pace(0.01, None), counters, helpers=("smollm2",))
    alone = AttackClock("genetic", TEXTS, Pace(0.01, None), counters)
    counters.now = [300.0, 0.0, 60.0, 0.0]
    assert alone.unit_seconds()[0] == pytest.approx(0.2)
    assert with_lm.unit_seconds()[0] == pytest.approx(0.01)  # (a burst before HELPER_PRIOR_TEXTS texts: the pace)
    counters.now = [3000.0, 0.0, 600.0, 0.0]
    assert with_lm.unit_seconds()[0] == pytest.approx((600.0 + 0.01 * HELPER_PRIOR_TEXTS) / (3000 + HELPER_PRIOR_TEXTS))
    counters.now = [200_000.0, 0.0, 2_000.0 + 200_000 * 0.01, 0.0]  # a long run: its own pace wins
    assert with_lm.unit_seconds()[0] == pytest.approx(0.02, rel=0.01)
    assert with_lm.estimate_lines(10)[0].startswith("time: about") and "classifier and smollm2 " in with_lm.estimate_lines(10)[0]


def test_the_recipe_picks_its_own_work_per_word():
    """Jia et al.'s LM rule drops most synonyms and TextAttack's RepeatModification substitutes a word once: Genetic's
    published recipe asks about 8 texts a word, its relaxed search the method's 43."""
    from textaudit.attacks.estimate import WORK_BY_RECIPE

    paper = AttackClock("genetic", TEXTS, Pace(0.001, None), Counters(), recipe="paper")
    relaxed = AttackClock("genetic", TEXTS, Pace(0.001, None), Counters(), recipe="relaxed")
    assert paper.prior == WORK_BY_RECIPE[("genetic", "paper")] and 5 < paper.prior[0] < 12
    assert relaxed.prior == WORK_PER_WORD["genetic"] == AttackClock("genetic", TEXTS, None, Counters()).prior
