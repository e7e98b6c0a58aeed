"""First-order baselines (Genetic, BAE-R) on planted classifiers, the tiny masked LM and the real
MiniLM sentence encoder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from textaudit.attacks import BAEAttack, GeneticAttack, make_attack
from textaudit.models import as_classifier
from textaudit.models.encoders import SentenceEncoder
from textaudit.results import read_jsonl

X = "a deep and meaningful film ."
NEIGHBORS = {"film": ["movie", "picture"], "deep": ["profound", "thick"], "meaningful": ["significant"]}


def flips_on(word: str, name: str = "planted"):
    """P(positive) = 0.9, but 0.1 once ``word`` occurs (a synonym the model misreads)."""

    def f(texts):
        return np.array([[0.9, 0.1] if word in t.split() else [0.1, 0.9] for t in texts])

    return as_classifier(f, name=name)


@pytest.fixture(scope="module")
def encoder():
    return SentenceEncoder(device="cpu")


def test_genetic_finds_the_flipping_synonym():
    atk = GeneticAttack(flips_on("picture"), neighbors=NEIGHBORS, population=8, generations=5, seed=1)
    r = atk.attack(X, label=1)
    assert r.status == "success" and r.vulnerable == "a deep and meaningful picture ." and r.l0 == 1
    assert r.prediction == 1 and r.vulnerable_prediction == 0 and r.queries > 0


def test_genetic_needs_two_words_when_one_is_not_enough():
    def f(texts):
        return np.array([[0.9, 0.1] if {"picture", "profound"} <= set(t.split()) else
                         [0.4, 0.6] if "picture" in t.split() else [0.1, 0.9] for t in texts])

    atk = GeneticAttack(as_classifier(f), neighbors=NEIGHBORS, population=10, generations=10, max_perturb_ratio=0.5)
    r = atk.attack(X, label=1)
    assert r.status == "success" and r.l0 == 2 and {"picture", "profound"} <= set(r.vulnerable.split())
    # at most 20% of the 5 words may change: one word, so the same model cannot be fooled
    r = GeneticAttack(as_classifier(f), neighbors=NEIGHBORS, population=10, generations=10).attack(X, label=1)
    assert r.status == "failed" and r.reason == "no adversarial example found"


def test_genetic_skips_and_errors():
    atk = GeneticAttack(flips_on("picture"), neighbors=NEIGHBORS, population=4, generations=2)
    assert atk.attack("the of and .", label=1).status == "skipped"  # stop words only
    r = atk.attack(X, label=0)
    assert r.status == "skipped" and r.reason == "already misclassified"
    assert atk.attack("", label=1).status == "error"


def test_sentence_encoder_similarity(encoder):
    sim = encoder.similarity("a great film .", ["a great film .", "a great movie .", "the tax office closes at noon ."])
    assert sim[0] == pytest.approx(1.0, abs=1e-5) and sim[1] > 0.8 > sim[2]


def test_bae_replaces_the_important_word_with_an_mlm_candidate(tiny_mlm, encoder):
    from textaudit.sentence import Sentence

    words = [w for w, _ in tiny_mlm.candidates([(list(Sentence.parse(X).tokens), 3)], top=50)[0]
             if w.isalpha() and w not in X.split()]
    trigger = words[0]
    clf = flips_on(trigger)
    r = BAEAttack(clf, mlm=tiny_mlm, encoder=encoder, threshold=0.0).attack(X, label=1)
    assert r.status == "success" and r.l0 == 1 and trigger in r.vulnerable.split()
    strict = BAEAttack(clf, mlm=tiny_mlm, encoder=encoder, threshold=0.99999).attack(X, label=1)
    assert strict.status == "failed"  # the similarity constraint rejects every candidate


def test_make_attack_and_cli_run_first_order(cli, tmp_path, tiny_mlm):
    assert isinstance(make_attack("genetic", flips_on("picture")), GeneticAttack)
    (tmp_path / "p.py").write_text(
        "def clf(texts):\n    return [[0.9, 0.1] if 'movie' in t.split() else [0.1, 0.9] for t in texts]\n")
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta deep and meaningful film .\n1\tthe of and .\n0\tgood film .\n")
    r = cli("attack", "--model", f"{tmp_path}/p.py:clf", "--method", "genetic", "--data", str(tmp_path / "d.tsv"),
            "--no-ppl", "--json", "--output", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["method"] == "genetic" and s["n"] == 3 and s["skipped"] == 2 and s["success"] == 1
    lines = sorted(read_jsonl(tmp_path / "o.jsonl"), key=lambda l: l["id"])  # written as they finish
    assert [l["status"] for l in lines] == ["success", "skipped", "skipped"]
    assert lines[0]["vulnerable"] == "a deep and meaningful movie ." and lines[0]["l0"] == 1



@pytest.mark.slow
def test_genetic_lm_constraint_keeps_the_likeliest_synonyms():
    from textaudit.engine.scheduler import run_now
    from textaudit.lm import load_causal_lm
    from textaudit.sentence import Sentence

    lm = load_causal_lm(device="cpu")
    many = {"film": ["movie", "films", "cinema", "picture", "kino"]}
    windows = {w: f"and meaningful {w} ." for w in many["film"]}
    ppl = dict(zip(windows, lm.perplexity(list(windows.values()))))
    top2 = sorted(ppl, key=ppl.get)[:2]
    worst = max(ppl, key=ppl.get)
    x0 = Sentence.parse(X)
    # with the constraint, a model fooled only by the least likely synonym is never fooled
    atk = GeneticAttack(flips_on(worst), neighbors=many, population=4, generations=3, lm=lm, lm_top=2, lm_window=2)
    assert atk.attack(X, label=1).status == "failed"
    kept = run_now(atk._perturb([x0] * 4, x0, {4: many["film"]}, 1, 1, np.random.default_rng(0)))
    assert all(m.tokens[4] in top2 for m in kept)
    assert GeneticAttack(flips_on(top2[0]), neighbors=many, population=4, generations=3, lm=lm,
                         lm_top=2, lm_window=2).attack(X, label=1).status == "success"


def test_text_window_is_textattacks():
    """BAE's similarity window (and Jia et al.'s LM window): ``size`` words centred on the index, moved inside the
    sentence at either end, one more before than after for an even size — TextAttack's text_window_around_index."""
    from textaudit.attacks.first_order import text_window

    assert text_window(20, 10, 15) == (3, 17)
    assert text_window(20, 0, 15) == (0, 14) and text_window(20, 19, 15) == (5, 19)
    assert text_window(20, 10, 6) == (7, 12)  # six words: three before, two after
    assert text_window(5, 2, 15) == (0, 4)  # a sentence shorter than the window: all of it
    assert all(b - a + 1 == 15 for a, b in (text_window(30, i, 15) for i in range(30)))


def test_the_part_of_speech_filter_tags_in_context_with_the_pattern_tagger():
    """TextAttack's PartOfSpeech constraint as BAE's recipe applies it: the word and the candidate tagged in the
    original's context (four words before, three after), universal tags, a noun may become a verb."""
    from textaudit.attacks.pos import PartOfSpeech, universal_tag

    pos = PartOfSpeech()
    words = X.split()
    assert pos.tag(words, 4) == "NOUN" and [pos.tag(words, 1, c) for c in ("shallow", "ocean", "quickly")] == \
        ["ADJ", "NOUN", "ADV"]
    assert pos.can_replace(words, 4, ["movie", "quickly", "run", "beautiful", "the"]) == [True, False, True, False, False]
    assert not PartOfSpeech(allow_verb_noun_swap=False).compatible("NOUN", "VERB")
    assert universal_tag("VBZ") == "VERB" and universal_tag("PRP$") == "PRON" and universal_tag("UH") == "X"
    asked = pos.asked
    pos.can_replace(words, 4, ["movie"])
    assert pos.asked == asked  # each context is tagged once


def _bae_candidates(tiny_mlm, text: str, i: int) -> list[str]:
    from textaudit.sentence import Sentence

    x = Sentence.parse(text)
    return [w for w, _ in tiny_mlm.candidates([(list(x.tokens), i)], top=150)[0]
            if w.isalpha() and w.lower() != x.tokens[i].lower()][:50]


def test_bae_paper_recipe_filters_by_part_of_speech_and_compares_a_window(tiny_mlm, encoder):
    """The published recipe refuses a candidate of another part of speech (the relaxed one finds it), and compares
    the similarity of the 15 words around the swap — a shorter sentence is not compared at all, as TextAttack's
    skip_text_shorter_than_window does."""
    from textaudit.attacks.pos import PartOfSpeech

    pos = PartOfSpeech()
    words = X.split()
    cands = _bae_candidates(tiny_mlm, X, 4)
    other = next(w for w, ok in zip(cands, pos.can_replace(words, 4, cands)) if not ok)
    same = next(w for w, ok in zip(cands, pos.can_replace(words, 4, cands)) if ok)
    fooled_by_other = flips_on(other)
    relaxed = BAEAttack(fooled_by_other, mlm=tiny_mlm, encoder=encoder, threshold=0.0)
    assert relaxed.attack(X, label=1).status == "success" and relaxed.settings()["recipe"] == "relaxed"
    paper = BAEAttack(fooled_by_other, mlm=tiny_mlm, encoder=encoder, threshold=0.0, recipe="paper")
    settings = paper.settings()
    assert {k: v for k, v in settings.items() if k != "pos_tagger"} == {"recipe": "paper", "top": 50, "threshold": 0.0,
                                                                         "pos_filter": True, "window": 15}
    assert settings["pos_tagger"].startswith("textblob-pattern ")  # the tagger is in the header: another, other records
    assert other not in (paper.attack(X, label=1).vulnerable or "").split()
    # six words < 15: not compared, so even a threshold no candidate meets lets the swap through
    r = BAEAttack(flips_on(same), mlm=tiny_mlm, encoder=encoder, threshold=0.99999, recipe="paper").attack(X, label=1)
    assert r.status == "success" and same in r.vulnerable.split()
    # 16 words: the window is compared, and that threshold refuses every candidate
    long = "a deep and meaningful film . " + " ".join(["it is good ."] * 2) + " we saw it twice ."
    assert len(long.split()) >= 15
    i = long.split().index("film")
    c = _bae_candidates(tiny_mlm, long, i)
    trigger = next(w for w, ok in zip(c, pos.can_replace(long.split(), i, c)) if ok)
    strict = BAEAttack(flips_on(trigger), mlm=tiny_mlm, encoder=encoder, threshold=0.99999, recipe="paper")
    assert strict.attack(long, label=1).status == "failed"
    assert BAEAttack(flips_on(trigger), mlm=tiny_mlm, encoder=encoder, threshold=0.0,
                     recipe="paper").attack(long, label=1).status == "success"


def test_a_recipe_is_paper_or_relaxed_and_recorded(cli, tmp_path):
    """``--recipe`` goes with Genetic and BAE only, not with Alzantot's --lm-constraint (the paper recipe has Jia et
    al.'s); the header records it, and a file made with one recipe is not resumed with the other."""
    from textaudit.errors import TextAuditError

    with pytest.raises(TextAuditError, match="--recipe must be one of paper, relaxed"):
        GeneticAttack(flips_on("picture"), neighbors=NEIGHBORS, recipe="published")
    (tmp_path / "p.py").write_text(
        "def clf(texts):\n    return [[0.9, 0.1] if 'movie' in t.split() else [0.1, 0.9] for t in texts]\n")
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta deep and meaningful film .\n")
    base = ["attack", "--model", f"{tmp_path}/p.py:clf", "--data", str(tmp_path / "d.tsv"), "--no-ppl"]
    r = cli(*base, "--method", "so-beam", "--recipe", "paper")
    assert r.exit_code == 2 and "--recipe applies to --method genetic, bae, textattack:genetic, textattack:bae only" in r.output, r.output
    r = cli(*base, "--method", "genetic", "--recipe", "paper", "--lm-constraint")
    assert r.exit_code == 2 and "give one of them" in r.output and "Traceback" not in r.output
    import sys

    with pytest.MonkeyPatch.context() as mp:  # TextBlob not installed: one line, before any model loads
        mp.setitem(sys.modules, "textblob.en.taggers", None)
        r = cli(*base, "--method", "bae", "--recipe", "paper")
    assert r.exit_code == 2 and "pip install 'textaudit[recipes]'" in r.output and "Traceback" not in r.output, r.output
    out = tmp_path / "o.jsonl"
    r = cli(*base, "--method", "genetic", "--output", str(out))
    assert r.exit_code == 0, r.output
    from textaudit.formats.jsonl import read_header

    config = read_header(out)["config"]
    assert config["recipe"] == "relaxed" and config["lm_constraint"] is False
    r = cli(*base, "--method", "genetic", "--recipe", "paper", "--output", str(out), "--resume")
    assert r.exit_code == 2 and "recipe" in r.output, r.output


@pytest.mark.slow
def test_genetic_paper_recipe_keeps_candidates_within_five_nats_of_x0s_window():
    """Jia et al.'s LM rule (TextAttack's faster-alzantot recipe), with SmolLM2: a synonym whose 6-word window is more
    than 5 nats less likely than x0's is never tried, so a model fooled only by it is not fooled."""
    from textaudit.engine.scheduler import run_now
    from textaudit.lm import load_causal_lm
    from textaudit.sentence import Sentence

    lm = load_causal_lm(device="cpu")
    many = {"film": ["movie", "picture", "kino", "zzyzx"]}
    x0 = Sentence.parse(X)
    windows = [x0.span(0, 6)] + [x0.replace(4, w).span(0, 6) for w in many["film"]]
    ref, *lps = lm.log_likelihood(windows)
    kept = [w for w, lp in zip(many["film"], lps) if lp > ref - 5.0]
    dropped = [w for w, lp in zip(many["film"], lps) if lp <= ref - 5.0]
    assert kept and dropped, (ref, lps)  # (the data of the test: both kinds among the synonyms)
    atk = GeneticAttack(flips_on(dropped[0]), neighbors=many, population=4, generations=3, lm=lm, recipe="paper")
    assert atk.settings()["lm_rule"] == "jia" and atk.lm_window == 6 and atk.settings()["lm"] == lm.name
    assert atk.attack(X, label=1).status == "failed"
    members = run_now(atk._perturb([x0] * 4, x0, {4: many["film"]}, 1, 1, np.random.default_rng(0)))
    assert all(m.tokens[4] in kept for m in members)
    assert GeneticAttack(flips_on(kept[0]), neighbors=many, population=4, generations=3, lm=lm,
                         recipe="paper").attack(X, label=1).status == "success"


class _WindowsAsked:
    """SmolLM2 as it is, keeping every distinct text the search asks it about (the windows its rule judges)."""

    def __init__(self, lm):
        self.lm, self.name, self.asked = lm, lm.name, set()

    def log_likelihood(self, texts):
        self.asked.update(texts)
        return self.lm.log_likelihood(texts)


@pytest.mark.slow
def test_jias_rule_judged_lazily_chooses_what_judging_every_option_chooses_with_fewer_lm_windows():
    """The published Genetic recipe asks the LM only until a member's best option by the classifier passes Jia et al.'s
    rule (each option is judged alone, so the first to pass in the classifier's order is the option judging all of
    them, then classifying the survivors, would choose): on real SST-2 sentences, counter-fitted synonyms and
    SmolLM2, every perturbation step and every attack's record equal the eager evaluation's, which asks the LM about
    more windows."""
    import zlib

    from textaudit.data import load_dataset
    from textaudit.engine.scheduler import run_now
    from textaudit.lm import load_causal_lm
    from textaudit.sentence import Sentence

    def graded(texts):  # a classifier whose scores order the options (and flip about a tenth of the texts)
        u = np.array([zlib.crc32(t.encode()) / 2 ** 32 for t in texts])
        return np.stack([1 - (0.45 + 0.55 * u), 0.45 + 0.55 * u], axis=1)

    lm = load_causal_lm(device="cpu")
    texts = [t for t in load_dataset("sst2:train", limit=40)["text"] if 8 <= len(t.split()) <= 14][:3]
    assert len(texts) == 3
    runs = {}
    for lazy in (True, False):
        seen = _WindowsAsked(lm)
        atk = GeneticAttack(as_classifier(graded, name="graded"), population=8, generations=4, lm=seen,
                            recipe="paper")
        atk.lazy_lm = lazy
        steps = []
        for t in texts:
            x0 = Sentence.parse(t)
            cands = atk._candidates(x0)
            rng = np.random.default_rng(0)
            members = [x0] * 8
            for _ in range(3):
                members = run_now(atk._perturb(members, x0, cands, 3, 1, rng))
                steps.append([m.tokens for m in members])
        records = [{k: v for k, v in atk.attack(t).to_dict().items() if k not in ("seconds", "queries")}
                   for t in texts]
        runs[lazy] = steps, records, len(seen.asked)
    (steps, records, lazy_windows), (eager_steps, eager_records, eager_windows) = runs[True], runs[False]
    assert steps == eager_steps and records == eager_records
    assert any(len({tuple(m) for m in step}) > 1 for step in steps)  # (the steps changed words: there was a choice)
    assert {r["status"] for r in records} >= {"success"}
    assert lazy_windows < eager_windows, (lazy_windows, eager_windows)
    # lazily by default; eagerly where the classifier's queries are what counts (the lazy rule classifies every option)
    clf = as_classifier(graded, name="graded")
    assert GeneticAttack(clf, lm=seen, recipe="paper").judges_lazily()
    assert not GeneticAttack(clf, lm=seen, recipe="paper", max_queries=5000).judges_lazily()
    clf.remote = True  # (the trait an endpoint declares: textaudit.model_traits)
    assert not GeneticAttack(clf, lm=seen, recipe="paper").judges_lazily()
    # the order changes what a record's queries count, so the header says which
    assert GeneticAttack(clf, lm=seen, recipe="paper").settings()["lm_order"] == "every option"
    clf.remote = False
    assert GeneticAttack(clf, lm=seen, recipe="paper").settings()["lm_order"] == "best first"


def test_genetic_without_repeats_substitutes_a_word_once_and_none_past_the_cap():
    """``repeat=False`` (TextAttack's RepeatModification and 20% cap): a member's changed word never changes again, and a
    member at the cap is left as it is; the header says so (the default, repeats allowed, adds nothing to it)."""
    from textaudit.engine.scheduler import run_now
    from textaudit.sentence import Sentence

    many = {"deep": ["profound", "thick"], "meaningful": ["significant", "important"], "film": ["movie", "picture"]}
    text = "a deep and meaningful film about a deep and meaningful film ."
    x0 = Sentence.parse(text)
    atk = GeneticAttack(flips_on("zebra"), neighbors=many, population=6, generations=2, repeat=False)
    assert atk.settings()["repeat"] is False and "repeat" not in GeneticAttack(flips_on("zebra")).settings()
    assert GeneticAttack(flips_on("zebra"), recipe="paper", lm=object()).repeat is False  # (the published recipe's)
    cands = atk._candidates(x0)
    rng = np.random.default_rng(0)
    members = [x0] * 6
    for _ in range(6):  # the cap here: floor(0.2 × 12 words) = 2
        before = members
        members = run_now(atk._perturb(members, x0, cands, 2, 1, rng))
        for b, m in zip(before, members):
            assert set(x0.diff(b)) <= set(x0.diff(m)) and len(x0.diff(m)) <= 2  # no change undone or past the cap
            assert all(m.tokens[i] == b.tokens[i] for i in x0.diff(b))  # a changed word is not changed again
    assert all(len(x0.diff(m)) == 2 for m in members)
