"""#68: the second-order attacks' naturalness constraint (on by default; ``--naturalness off`` is the paper's search).

Its three checks on a masked LM planted here (its answers written out, so each check is seen doing exactly its job),
and on the shipped ``minilm-mlm``: a synonym of another sense (long → largo) refused where a person would, the
paper's search unchanged with the constraint off, and the setting in the results header (a resume cannot mix them).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from textaudit.attacks import PatchWords, SOBeam, SOEnum
from textaudit.attacks.naturalness import patch_fits, word_settled
from textaudit.attacks.second_order import PATCH_CHOICE
from textaudit.models import as_classifier
from textaudit.neighborhoods import NeighborhoodBuilder
from textaudit.sentence import Sentence

X = "a deep and meaningful film ."


class PlantedMLM:
    """A masked LM whose answers are a rule: ``rule(words, position) -> [(word, logit), ...]`` best first."""

    name = "planted-mlm"

    def __init__(self, rule):
        self.rule = rule
        self.asked: list[tuple[str, int]] = []

    def candidates(self, batch, top=20):
        out = []
        for words, pos in batch:
            self.asked.append((" ".join(words), pos))
            out.append(list(self.rule(list(words), pos))[:top])
        return out


class PlantedMLMTops(PlantedMLM):
    """The same, taking one ``top`` per query as textaudit's own masked LMs do: the constraint's two checks of a
    candidate are then one ask (:meth:`Naturalness.ask_natural`), with the same verdicts."""

    tops_per_item = True

    def candidates(self, batch, top=20):
        tops = top if isinstance(top, list) else [top] * len(batch)
        return [super(PlantedMLMTops, self).candidates([q], t)[0] for q, t in zip(batch, tops)]


BOTH = pytest.mark.parametrize("planted", [PlantedMLM, PlantedMLMTops], ids=["two-asks", "one-ask"])


def test_patch_fits_and_word_settled_read_the_masked_lms_answer():
    cands = [("was", 13.8), ("is", 13.5), ("seemed", 10.3), ("feels", 9.5), ("felt", 9.4), ("looked", 7.0)]
    assert patch_fits(cands, "feels", "felt", 3.0)  # both read, within δ
    assert not patch_fits(cands, "feels", "believes", 3.0)  # not among the masked LM's likely words at all
    assert not patch_fits(cands, "seemed", "looked", 3.0)  # read, but 3.3 below the word it replaces
    assert patch_fits(cands, "appears", "felt", 3.0)  # w1 unread: w2 is read, nothing to compare with
    assert patch_fits(cands, "Feels", "FELT", 3.0)  # case aside
    assert word_settled(cands, "is", kappa=20, delta=3.0) == pytest.approx(0.3)
    assert word_settled(cands, "feels", kappa=20, delta=3.0) is None  # 4.3 below the best: outside δ
    assert word_settled(cands, "seemed", kappa=2, delta=9.0) is None  # outside the top κ
    assert word_settled([], "is", kappa=20, delta=3.0) is None


def test_no_repeats_keeps_a_neighbour_from_copying_a_word_near_it():
    """'a deep and meaningful film' → 'a meaningful and meaningful film' came from the masked LM proposing the word two
    places on; with no_repeats a candidate equal to one of the two words before or after its position (punctuation
    aside: 'regret , regret') is not proposed, a word three away is."""
    def rule(words, pos):  # the word two after the position first, then the one before, then one three away, "fine"
        far = words[pos - 3] if pos >= 3 else "z"
        return [(words[pos + 2] if pos + 2 < len(words) else "x", 10.0), (words[pos - 1] if pos else "y", 9.5),
                (far, 9.2), ("fine", 9.0)]

    x = Sentence.parse("a deep and meaningful film .")
    for repeats in (True, False):
        b = NeighborhoodBuilder(PlantedMLM(rule), kappa=5, delta=1e9, no_repeats=not repeats)
        at = {i: {nb.sentence.tokens[i] for nb in b.neighbors(x, 1) if x.diff(nb.sentence) == [i]} for i in (1, 4)}
        assert at[1] == ({"meaningful", "a", "z", "fine"} if repeats else {"z", "fine"})
        assert at[4] == ({"x", "meaningful", "deep", "fine"} if repeats else {"x", "deep", "fine"})  # 'deep': 3 away
    comma = Sentence.parse("a tale of love , betrayal , revenge")
    b = NeighborhoodBuilder(PlantedMLM(lambda w, p: [("betrayal", 10.0), ("loss", 9.0)]), kappa=5, delta=1e9,
                            no_repeats=True)
    assert {nb.sentence.tokens[3] for nb in b.neighbors(comma, 1) if comma.diff(nb.sentence) == [3]} == {"loss"}


def _flip_when(*words_needed):
    """P(positive) 0.9, 0.1 once 'movie' and every one of ``words_needed`` are in the text (a second-order flaw)."""
    def f(texts):
        out = []
        for t in texts:
            w = set(t.split())
            p = 0.1 if "movie" in w and all(x in w for x in words_needed) else 0.9
            out.append([1 - p, p])
        return np.array(out)

    return as_classifier(f, name="planted")


def _two_step_rule(words, pos):
    """Position 1 ('deep') is 'rich' only while position 3 is still 'meaningful'; position 3 becomes 'moving'; the
    patch position (4) holds 'film' with 'movie' close behind."""
    if pos == 1:
        return [("rich", 10.0)] if words[3] == "meaningful" else [("odd", 10.0)]
    if pos == 3:
        return [("moving", 10.0)]
    if pos == 4:
        return [("film", 10.0), ("movie", 9.0)]
    return [("the", 10.0)]


@BOTH
def test_a_finding_whose_changed_word_no_longer_fits_the_final_sentence_is_refused(planted):
    """'a rich and moving film' flips, but 'rich' was proposed beside 'meaningful': beside 'moving' the masked LM
    proposes 'odd'. Unsettled: refused and counted; the paper's search (off) takes it."""
    clf = _flip_when("rich", "moving")
    args = dict(k=2, kappa=5, delta=1e9, patch_words=PatchWords(clf, [("film", "movie")]))
    paper = SOEnum(clf, mlm=planted(_two_step_rule), naturalness=False, **args).attack(X, 1)
    assert paper.status == "success" and paper.vulnerable == "a rich and moving film ."
    natural = SOEnum(clf, mlm=planted(_two_step_rule), **args).attack(X, 1)
    assert natural.status == "failed" and natural.extra["unnatural"] >= 1
    beam = SOBeam(clf, mlm=planted(_two_step_rule), beam=4, **args).attack(X, 1)
    assert beam.status == "failed" and beam.extra["unnatural"] >= 1


def test_the_checks_count_what_was_refused_and_an_eta_weighs_the_next_level_by_the_chance_of_going_on():
    """An enumeration begins its next level only when every vulnerable candidate of a level is refused: the attack
    counts the candidates checked and accepted and the checks that refused all; while it checks a level d < k the
    search announces its next level's contexts (the level's sentences × the positions), withdrawn when it ends. An
    announced level counts at (1 − q)^m for a check of m candidates left (q: the share accepted, Laplace's rule), one
    not in a check at the share of checks that refused all."""
    from textaudit.attacks.naturalness import NaturalChecks
    from textaudit.engine.scheduler import run_now

    flips = _flip_when("rich", "moving")
    seen: list[dict] = []

    def watched(texts):  # what the search has announced whenever it scores sentences
        seen.append(dict(natural.checks.announced))
        return flips.predict_proba(texts)

    clf = as_classifier(watched, name="watched")
    natural = SOEnum(clf, mlm=PlantedMLM(_two_step_rule), k=2, kappa=5, delta=1e9,
                     patch_words=PatchWords(clf, [("film", "movie")]))
    assert natural.attack(X, 1).status == "failed"
    checks = natural.checks  # level 1: nothing vulnerable (no check); level 2: one check, its candidates refused
    assert (checks.done, checks.refused, checks.accepted) == (1, 1, 0) and checks.checked >= 1 and checks.open == {}
    x0 = natural.parse(X).tokens
    announced = [a[x0] for a in seen if x0 in a]  # level 1 found and scored, level 2 announced until it began
    b, start = natural.builder, natural.parse(X)
    level1 = run_now(b.ask_level(start, [start], {start.tokens}, 1, [4]))  # (4: the patch word, 'film')
    assert announced and set(announced) == {len(level1) * len(b.positions(start, [4]))} != {0}
    assert checks.announced == {}  # withdrawn when the search ended
    checks.announced[x0] = 30  # a first level checked, a second of 30 contexts announced: not in a check
    assert checks.upcoming() == pytest.approx(30 * 2 / 3)  # (1 + 1) / (1 + 2)
    checks.open[x0] = 3  # in a check, 3 candidates left
    assert checks.upcoming() == pytest.approx(30 * (1 - 1 / (checks.checked + 2)) ** 3)
    made = NaturalChecks(checked=8, accepted=2, done=3, refused=1, open={("a",): 2})
    assert made.going_on(("a",)) == pytest.approx((1 - 3 / 10) ** 2) and made.going_on(("b",)) == pytest.approx(2 / 5)


@BOTH
def test_a_settled_finding_is_kept_and_the_most_natural_of_equal_l0_comes_first(planted):
    """Two vulnerable neighbours at ℓ0 = 1; the one whose word is the masked LM's first choice is the finding."""
    def rule(words, pos):
        if pos == 1:
            return [("rich", 10.0), ("vast", 8.5)]
        if pos == 4:
            return [("film", 10.0), ("movie", 9.0)]
        return [("the", 10.0)]

    def f(texts):  # both 'rich' and 'vast' flip with 'movie'; 'vast' by more (the paper's tie-break picks it)
        return np.array([[0.95, 0.05] if "movie" in t and "vast" in t else [0.8, 0.2] if "movie" in t and "rich" in t
                         else [0.1, 0.9] for t in texts])

    clf = as_classifier(f, name="planted")
    args = dict(k=1, kappa=5, delta=1e9, patch_words=PatchWords(clf, [("film", "movie")]))
    assert SOEnum(clf, mlm=planted(rule), naturalness=False, **args).attack(X, 1).vulnerable == "a vast and meaningful film ."
    attack = SOEnum(clf, mlm=planted(rule), **args)
    r = attack.attack(X, 1)
    assert r.status == "success" and r.vulnerable == "a rich and meaningful film ." and "unnatural" not in r.extra
    assert (attack.checks.done, attack.checks.refused) == (1, 0) and attack.checks.accepted >= 1  # a finding kept


@BOTH
def test_a_patch_that_does_not_fit_is_not_chosen_and_one_that_stops_fitting_is_refused(planted):
    """p is the best-ranked pair that fits x0; none fitting: skipped with the reason. A finding in whose x̃ the
    patch no longer fits is refused."""
    def rule(words, pos):
        if pos == 4:  # 'movie' fits beside 'meaningful', not beside 'odd'
            return [("film", 10.0), ("movie", 9.0)] if words[3] == "meaningful" else [("film", 10.0), ("work", 9.0)]
        if pos == 3:
            return [("odd", 10.0)]
        return [("the", 10.0)]

    clf = _flip_when()  # any text with 'movie' flips
    largo = PatchWords(clf, [("film", "largo")])
    r = SOEnum(clf, k=1, mlm=planted(rule), kappa=5, delta=1e9, patch_words=largo).attack(X, 1)
    assert r.status == "skipped" and "no patch word fits" in r.reason and "--naturalness off" in r.reason
    assert SOEnum(clf, k=1, mlm=planted(rule), kappa=5, delta=1e9, patch_words=largo,
                  naturalness=False).attack(X, 1).pair == ["film", "largo"]

    # x0 itself flips with 'movie' (ℓ0 = 0, p fits x0); with only 'odd' at 3 flipping, the finding is refused
    def g(texts):
        return np.array([[0.9, 0.1] if "movie" in t and "odd" in t else [0.1, 0.9] for t in texts])

    odd = as_classifier(g, name="planted-odd")
    r = SOEnum(odd, k=1, mlm=planted(rule), kappa=5, delta=1e9,
               patch_words=PatchWords(odd, [("film", "movie")])).attack(X, 1)
    assert r.pair == ["film", "movie"] and r.status == "failed" and r.extra["unnatural"] == 1


@BOTH
def test_p_is_the_best_fitting_of_every_pair_not_only_of_the_ten_best_ranked(planted):
    """#85: a third of SST-2 dev was skipped because none of the ten best-ranked pairs fit; p is now the best-ranked
    pair that fits among all of x0's — here the twelfth — and their fit is asked once per position (one masked
    context for the twelve pairs at 'film')."""
    def rule(words, pos):
        return [("film", 10.0), ("movie", 9.0)] if pos == 4 else [("the", 10.0)]

    others = [f"w{i}" for i in range(11)]  # better-ranked synonyms the masked LM does not read there

    def f(texts):  # single words: each of w0 … w10 moves the score more than 'movie' does
        gap = {w: 0.4 - 0.02 * i for i, w in enumerate(others)} | {"movie": 0.1, "film": 0.0}
        return np.array([[0.5 - gap[t], 0.5 + gap[t]] if t in gap else [0.3, 0.7] for t in texts])

    clf = as_classifier(f, name="planted-gaps")
    words = PatchWords(clf, [("film", w) for w in [*others, "movie"]])
    assert [p.w2 for p in words.select_many(Sentence.parse(X), None, per_word=None)][-1] == "movie"  # twelfth
    mlm = planted(rule)
    r = SOEnum(clf, k=1, mlm=mlm, kappa=5, delta=1e9, patch_words=words).attack(X, 1)
    assert r.status != "skipped" and r.pair == ["film", "movie"]
    assert mlm.asked[0] == (X, 4) and mlm.asked[1] != (X, 4)  # one context answered the twelve pairs' fit


def _pairs_rule(words, pos):
    """'film' → 'movie' fits at 4, 'meaningful' → 'significant' at 3; 'rich' is what the masked LM reads at 1."""
    return {4: [("film", 10.0), ("movie", 9.0)], 3: [("meaningful", 10.0), ("significant", 9.5)],
            1: [("rich", 10.0)]}.get(pos, [("the", 10.0)])


def _flips(*needs):
    """P(positive) 0.1 once every word of one of ``needs`` (tuples) is in the text, else 0.9 — and on single words a
    gap that ranks 'film' → 'movie' above 'meaningful' → 'significant'."""
    def f(texts):
        out = []
        for t in texts:
            w = set(t.split())
            p = {"movie": 0.5, "significant": 0.7}.get(t, 0.1 if any(all(x in w for x in n) for n in needs) else 0.9)
            out.append([1 - p, p])
        return np.array(out)

    return as_classifier(f, name=f"planted-{needs}")


@BOTH
@pytest.mark.parametrize("method", [SOEnum, SOBeam])
def test_a_nearer_finding_under_another_fitting_pair_comes_before_searching_further_under_p(planted, method):
    """#85 item 3: under p (the best-ranked pair that fits x0) nothing flips within ℓ0 = 1; under the second pair that
    fits, 'a rich and meaningful film .' does — found at ℓ0 = 1 under that pair, which the record names, instead of
    a search beyond ℓ0 = 1 under p. x0 flipping under another pair comes before p's Neighbor_1; when p has a finding
    at ℓ0 = 1 it stays p's. The paper's search (off) never looks at another pair."""
    args = dict(k=2, kappa=5, delta=1e9)
    clf = _flips(("rich", "significant"))
    words = PatchWords(clf, [("film", "movie"), ("meaningful", "significant")])
    assert [(p.w1, p.w2) for p in words.select_many(Sentence.parse(X), None, per_word=None)] == [
        ("film", "movie"), ("meaningful", "significant")]
    r = method(clf, mlm=planted(_pairs_rule), patch_words=words, **args).attack(X, 1)
    assert r.status == "success" and r.pair == ["meaningful", "significant"] and r.patch_position == 3
    assert (r.l0, r.vulnerable, r.vulnerable_patched) == (1, "a rich and meaningful film .", "a rich and significant film .")
    assert (r.vulnerable_prediction, r.vulnerable_patched_prediction) == (1, 0)
    assert r.f_soft == pytest.approx(-0.8)
    paper = method(clf, mlm=planted(_pairs_rule), patch_words=words, naturalness=False, **args).attack(X, 1)
    assert paper.pair == ["film", "movie"] and paper.status == "failed"

    # x0 itself flips under the second pair: ℓ0 = 0 under it, before p's Neighbor_1 (where 'rich' + 'movie' flips)
    clf = _flips(("significant",), ("rich", "movie"))
    words = PatchWords(clf, [("film", "movie"), ("meaningful", "significant")])
    r = method(clf, mlm=planted(_pairs_rule), patch_words=words, **args).attack(X, 1)
    assert (r.status, r.pair, r.l0, r.vulnerable) == ("success", ["meaningful", "significant"], 0, X)
    # both pairs flip a neighbour at ℓ0 = 1: p's comes first, as before
    clf = _flips(("rich", "significant"), ("rich", "movie"))
    words = PatchWords(clf, [("film", "movie"), ("meaningful", "significant")])
    r = method(clf, mlm=planted(_pairs_rule), patch_words=words, **args).attack(X, 1)
    assert (r.status, r.pair, r.l0, r.vulnerable_patched) == ("success", ["film", "movie"], 1, "a rich and meaningful movie .")


LONG = '''
def clf(texts):  # a flaw on any word swapped for "long": "largo" the most, "big" less
    out = []
    for t in texts:
        w = t.split()
        p = 0.1 if "largo" in w else 0.2 if "big" in w else 0.9
        out.append([1 - p, p])
    return out
'''


def test_the_shipped_masked_lm_refuses_a_swap_of_another_language_and_the_header_says_which_search(cli, tmp_path):
    """On the offline minilm-mlm: long → largo (a counter-fitted pair) is the paper's patch, refused here for
    long → big, which the masked LM finds in place; the header records the constraint (absent: the paper's), and a
    file of one is not resumed with the other."""
    (tmp_path / "long.py").write_text(LONG)
    (tmp_path / "d.tsv").write_text("label\ttext\n1\tone long string of things .\n")
    (tmp_path / "pairs.txt").write_text("long,largo\nlong,big\n")
    base = ["attack", "--model", f"{tmp_path}/long.py:clf", "--data", str(tmp_path / "d.tsv"), "--mlm", "minilm-mlm",
            "--pairs-file", str(tmp_path / "pairs.txt"), "--k", "1", "--no-ppl"]
    got = {}
    for setting in ("on", "off"):
        r = cli(*base, "--naturalness", setting, "--output", str(tmp_path / f"{setting}.jsonl"))
        assert r.exit_code == 0, r.output
        lines = [json.loads(x) for x in (tmp_path / f"{setting}.jsonl").read_text().splitlines()]
        got[setting] = lines[0]["header"]["config"], lines[1]
    assert got["off"][1]["pair"] == ["long", "largo"] and got["on"][1]["pair"] == ["long", "big"]
    assert got["on"][1]["status"] == got["off"][1]["status"] == "success"
    assert got["on"][0]["naturalness"] == "mlm-agreement" and "naturalness" not in got["off"][0]
    assert got["on"][0]["patch_choice"] == PATCH_CHOICE and "patch_choice" not in got["off"][0]
    r = cli(*base, "--output", str(tmp_path / "off.jsonl"), "--resume")  # the default (on) over the paper's file
    assert r.exit_code == 2 and "naturalness" in r.output and "Traceback" not in r.output, r.output
    # a file of the constraint before #85 (p among the ten best pairs: no patch_choice in its header) is not resumed
    lines = (tmp_path / "on.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    del header["header"]["config"]["patch_choice"]
    (tmp_path / "old.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    r = cli(*base, "--output", str(tmp_path / "old.jsonl"), "--resume")
    assert r.exit_code == 2 and "patch_choice" in r.output and "Traceback" not in r.output, r.output
    header["header"]["config"]["patch_choice"] = "best-fitting of every pair"  # #85's first choice (session 40)
    (tmp_path / "first.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    r = cli(*base, "--output", str(tmp_path / "first.jsonl"), "--resume")
    assert r.exit_code == 2 and "patch_choice" in r.output and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("command", [["attack", "--model", "cnn"], ["compare", "--models", "cnn", "--output-dir", "x"],
                                     ["harden", "--model", "cnn", "--method", "augment", "--out", "h"]])
def test_a_mistyped_naturalness_is_one_line_not_the_papers_search(cli, tmp_path, command):
    """'--naturalness maybe' ran the paper's search silently: every command that takes it says so in one line, before
    any model loads."""
    r = cli(*[str(tmp_path / a) if a in ("x", "h") else a for a in command], "--naturalness", "maybe")
    assert r.exit_code == 2 and "--naturalness must be on or off (got 'maybe')" in r.output, r.output
    assert "Traceback" not in r.output and not list(tmp_path.iterdir())
