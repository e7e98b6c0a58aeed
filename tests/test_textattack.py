"""TextAttack interop (extra ``textaudit[textattack]``): our classifiers as TextAttack model
wrappers, real TextAttack searches on planted classifiers, offline components, one-line errors."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from textaudit.errors import TextAuditError
from textaudit.models import as_classifier
from textaudit.results import read_jsonl

X = "a deep and meaningful film ."
NEIGHBORS = {"film": ["movie", "picture"], "deep": ["profound", "thick"], "meaningful": ["significant"]}

pytestmark = pytest.mark.textattack  # README command 2 runs these in .venv-textattack (-m textattack)

needs_textattack = pytest.mark.skipif(importlib.util.find_spec("textattack") is None,
                                      reason="TextAttack extra not installed (pip install 'textaudit[textattack]')")


def flips_on(word: str):
    def f(texts):
        return np.array([[0.9, 0.1] if word in t.split() else [0.1, 0.9] for t in texts])

    return as_classifier(f, name=f"flips-on-{word}")


def test_missing_extra_is_a_one_line_error(monkeypatch):
    from textaudit.attacks import make_attack, textattack_interop

    monkeypatch.setattr(textattack_interop, "_TA", None)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "textattack" else real(name, *a))
    with pytest.raises(TextAuditError, match=r"pip install 'textaudit\[textattack\]'"):
        make_attack("textattack:genetic", flips_on("movie"))


@needs_textattack
def test_model_wrapper_returns_probabilities():
    from textaudit.attacks.textattack_interop import model_wrapper

    clf = flips_on("movie")
    w = model_wrapper(clf)
    assert w.model is clf
    out = w(["a good movie .", "a good film ."])
    assert isinstance(out, np.ndarray) and out.shape == (2, 2)
    np.testing.assert_allclose(out, [[0.9, 0.1], [0.1, 0.9]])


@needs_textattack
def test_counterfitted_embedding_proposes_exactly_the_lists():
    from textattack.shared import AttackedText
    from textattack.transformations import WordSwapEmbedding

    from textaudit.attacks.textattack_interop import counterfitted_embedding

    emb = counterfitted_embedding(NEIGHBORS)
    swap = WordSwapEmbedding(max_candidates=8, embedding=emb)
    out = {t.text for t in swap(AttackedText(X), indices_to_modify={4})}
    assert out == {"a deep and meaningful movie .", "a deep and meaningful picture ."}
    assert emb.nearest_neighbours(emb.word2index("meaningful"), 8).tolist() == [emb.word2index("significant")] + \
        [emb.word2index("meaningful")] * 7  # padded with the word itself, which TextAttack skips
    from textaudit.models.zoo.vocab import glove_index

    ix, glove = glove_index()
    np.testing.assert_allclose(emb["film"], glove[ix["film"]])  # GloVe-50d vectors


@needs_textattack
def test_textattack_genetic_finds_the_planted_synonym():
    from textaudit.attacks import textattack_interop as ti

    attack = ti.build_recipe("genetic", flips_on("picture"), neighbors=NEIGHBORS)
    result = attack.attack(X, 1)
    assert type(result).__name__ == "SuccessfulAttackResult"
    assert result.perturbed_result.attacked_text.text == "a deep and meaningful picture ."
    # a model that no synonym fools: TextAttack's search fails
    assert type(ti.build_recipe("genetic", flips_on("zebra"), neighbors=NEIGHBORS).attack(X, 1)).__name__ \
        == "FailedAttackResult"
    # budgets: TextAttack's query budget is passed through and reported; a time budget is refused
    r = ti.TextAttackRecipe(flips_on("zebra"), "genetic", neighbors=NEIGHBORS).attack(X, label=1)
    assert r.status == "failed" and r.seconds > 0  # its search is one engine step: its time still reaches the record
    # a success's record is written a step later (its verification asks again): its search's seconds count once there
    # too (they counted twice before: a run's records summed to 1.4–1.8× its wall). On a clock that only TextAttack's
    # search moves, 5 s a search, every record reads 5 s.
    import time

    from textaudit.attacks import run_attack

    clock = [100.0]
    recipe = ti.TextAttackRecipe(flips_on("picture"), "genetic", neighbors=NEIGHBORS)
    search = recipe._attack.attack

    def timed(*args, **kwargs):
        out = search(*args, **kwargs)
        clock[0] += 5.0
        return out

    recipe._attack.attack = timed
    real = time.perf_counter
    time.perf_counter = lambda: clock[0]
    try:
        _, records = run_attack(recipe, [X, "a deep film .", "a meaningful film ."], [1, 1, 1], progress=False,
                                in_flight=2)
    finally:
        time.perf_counter = real
    assert [(r["status"], r["seconds"]) for r in records] == [("success", 5.0)] * 3
    r = ti.TextAttackRecipe(flips_on("zebra"), "genetic", neighbors=NEIGHBORS, max_queries=3).attack(X, label=1)
    assert r.status == "failed" and r.reason == "query budget exhausted"
    with pytest.raises(TextAuditError, match="use a query budget"):
        ti.TextAttackRecipe(flips_on("zebra"), "genetic", time_budget=5.0)
    # its search holds a wrapper of single texts: a sentence pair is refused in one line
    with pytest.raises(TextAuditError, match="attacks single texts; for sentence pairs use so-beam"):
        ti.TextAttackRecipe(flips_on("zebra"), "genetic", neighbors=NEIGHBORS).attack(X, 1, context="a premise .")


@needs_textattack
def test_textattack_bae_with_our_mlm_and_encoder_and_the_cli(cli, tmp_path):
    from textaudit.attacks import make_attack
    from textaudit.models.encoders import SentenceEncoder
    from textaudit.neighborhoods import load_mlm
    from textaudit.sentence import Sentence

    mlm = load_mlm("minilm-mlm", quiet=True)
    enc = SentenceEncoder(device="cpu")
    cands = [w for w, _ in mlm.candidates([(list(Sentence.parse(X).tokens), 3)], top=10)[0]
             if w.isalpha() and w not in X.split()]
    trigger = cands[0]
    atk = make_attack("textattack:bae", flips_on(trigger), mlm=mlm, encoder=enc, threshold=0.0)
    r = atk.attack(X, label=1)
    assert r.method == "textattack:bae" and r.status == "success" and r.l0 == 1
    assert trigger in r.vulnerable.split() and r.vulnerable_prediction == 0 and r.queries > 0
    # the MiniLM constraint is applied: nothing passes a threshold of 1
    strict = make_attack("textattack:bae", flips_on(trigger), mlm=mlm, encoder=enc, threshold=0.99999)
    assert strict.attack(X, label=1).status == "failed"

    (tmp_path / "p.py").write_text(
        "def clf(texts):\n    return [[0.9, 0.1] if 'movie' in t.split() else [0.1, 0.9] for t in texts]\n")
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta deep and meaningful film .\n0\tgood film .\n")
    r = cli("attack", "--model", f"{tmp_path}/p.py:clf", "--method", "textattack:genetic", "--data",
            str(tmp_path / "d.tsv"), "--no-ppl", "--json", "--output", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["method"] == "textattack:genetic" and s["success"] == 1 and s["skipped"] == 1
    # records are written as examples finish (the misclassified one is skipped first): find it by status
    (line,) = [rec for rec in read_jsonl(tmp_path / "o.jsonl") if rec["status"] == "success"]
    assert line["vulnerable"] == "a deep and meaningful movie ." and line["l0"] == 1
    r = cli("attack", "--model", f"{tmp_path}/p.py:clf", "--method", "textattack:no-such-recipe", "--data",
            str(tmp_path / "d.tsv"), "--no-ppl")
    assert r.exit_code == 2 and "unknown TextAttack recipe 'no-such-recipe'" in r.output


@needs_textattack
def test_importing_textattack_leaves_our_caches_alone(tmp_path):
    """``import textattack`` re-points XDG_CACHE_HOME/HF_HOME at its own dir; textaudit restores them
    (else the zoo cache and the HuggingFace cache would move mid-run)."""
    import os
    import subprocess
    import sys

    code = ("import os, json; from textaudit.resources import cache_dir; before = (dict(os.environ), str(cache_dir()));"
            "from textaudit.attacks.textattack_interop import import_textattack; import_textattack();"
            "after = (dict(os.environ), str(cache_dir()));"
            "keys = ['XDG_CACHE_HOME', 'HF_HOME', 'PYTORCH_TRANSFORMERS_CACHE'];"
            "print(json.dumps([[before[0].get(k) for k in keys], [after[0].get(k) for k in keys], before[1], after[1]]))")
    env = {k: v for k, v in os.environ.items() if k not in ("TEXTAUDIT_CACHE", "XDG_CACHE_HOME", "HF_HOME")}
    env["HOME"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stderr[-2000:]
    before_env, after_env, before_cache, after_cache = json.loads(out.stdout.strip().splitlines()[-1])
    assert after_env == before_env == [None, None, None]
    assert after_cache == before_cache == str(tmp_path / ".cache" / "textaudit")


@needs_textattack
def test_textattack_does_not_warn_about_our_model_wrapper(capfd):
    """TextAttack's "Unknown if model ... compatible" warning is noise for our wrapper: filtered."""
    from textaudit.attacks import textattack_interop as ti

    ti.build_recipe("genetic", flips_on("picture"), neighbors=NEIGHBORS).attack(X, 1)
    captured = capfd.readouterr()
    assert "Unknown if model" not in captured.err + captured.out


def _needs(module: str):
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"{module} not installed (README command 2 installs it in .venv-textattack)")


@needs_textattack
@_needs("textblob")
@_needs("gguf")
@pytest.mark.slow
def test_paper_recipe_constraints_decide_as_textaudits_own_over_the_same_objects():
    """``--recipe paper`` on TextAttack's side: its LM constraint (faster-alzantot's) and part-of-speech constraint
    (bae's), fed textaudit's SmolLM2 and tagger, accept exactly the swaps textaudit's Genetic and BAE accept."""
    from textattack.shared import AttackedText

    from textaudit.attacks import textattack_interop as ti
    from textaudit.attacks.first_order import window_span
    from textaudit.attacks.pos import PartOfSpeech
    from textaudit.lexicons import counterfitted_neighbors
    from textaudit.lm import load_causal_lm
    from textaudit.sentence import Sentence

    lm, pos = load_causal_lm(device="cpu"), PartOfSpeech()
    lm_rule, pos_rule = ti.CausalLMWindow(lm), ti.TaggerPartOfSpeech(pos)
    assert (lm_rule.window_size, lm_rule.max_log_prob_diff) == (6, 5.0)
    neighbors = counterfitted_neighbors()
    decisions = {"lm": [], "pos": []}
    for text in ("the acting is strong and the story moves with real purpose",
                 "a gorgeous and deeply moving film about a small town family"):
        x0, ref = Sentence.parse(text), AttackedText(text)
        assert list(x0.tokens) == ref.words  # (no punctuation: word i is token i on both sides)
        for i, w in enumerate(ref.words):
            for c in [c for c in neighbors.get(w, []) if c.isalpha()][:8]:
                x = ref.replace_word_at_index(i, c)
                lo, hi = window_span(x0, i, 6)
                ours_lm = lm.log_likelihood([x0.replace(i, c).span(lo, hi)])[0] > \
                    lm.log_likelihood([x0.span(lo, hi)])[0] - 5.0
                decisions["lm"].append((ours_lm, bool(lm_rule._check_constraint(x, ref))))
                decisions["pos"].append((pos.can_replace(ref.words, i, [c])[0], bool(pos_rule._check_constraint(x, ref))))
    for name, pairs in decisions.items():
        assert len(pairs) > 40 and all(a == b for a, b in pairs), name
        assert {a for a, _ in pairs} == {True, False}, name  # (both kinds among the swaps: the test can fail)


@needs_textattack
@_needs("textblob")
@_needs("gguf")
@pytest.mark.slow
def test_paper_recipe_on_textattacks_searches(cli, tmp_path):
    """textattack:genetic and textattack:bae with ``recipe="paper"``: the swap the LM or the tagger rejects never
    fools the model (it does with ``relaxed``); BAE's similarity skips a sentence shorter than its 15-word window;
    the header records the recipe, the LM and the tagger; --recipe for TextAttack's own recipes is refused."""
    from textaudit.attacks import make_attack
    from textaudit.attacks.pos import PartOfSpeech
    from textaudit.lm import load_causal_lm
    from textaudit.models.encoders import SentenceEncoder
    from textaudit.neighborhoods import load_mlm
    from textaudit.sentence import Sentence

    lm = load_causal_lm(device="cpu")
    many = {"film": ["movie", "zzyzx"]}
    ref, movie, junk = lm.log_likelihood([X.rstrip(" ."), "a deep and meaningful movie", "a deep and meaningful zzyzx"])
    assert movie > ref - 5.0 >= junk  # (the data of the test)
    for word, status in (("movie", "success"), ("zzyzx", "failed")):
        atk = make_attack("textattack:genetic", flips_on(word), neighbors=many, recipe="paper", lm=lm, max_queries=2000)
        assert atk.attack(X, label=1).status == status, word
        assert make_attack("textattack:genetic", flips_on(word), neighbors=many).attack(X, label=1).status == "success"
    assert atk.settings() == {"recipe": "paper", "lm": lm.name}
    assert make_attack("textattack:genetic", flips_on("movie"), neighbors=many).settings() == {"recipe": "relaxed"}

    mlm, enc, pos = load_mlm("minilm-mlm", quiet=True), SentenceEncoder(device="cpu"), PartOfSpeech()
    tokens = list(Sentence.parse(X).tokens)
    cands = [w for w, _ in mlm.candidates([(tokens, 3)], top=50)[0] if w.isalpha() and w not in X.split()]
    ok = dict(zip(cands, pos.can_replace(tokens, 3, cands)))
    same, other = next(w for w in cands if ok[w]), next(w for w in cands if not ok[w])
    for trigger, status in ((same, "success"), (other, "failed")):
        # threshold 0.99999: only a sentence the 15-word window skips can pass (X has 5 words)
        paper = make_attack("textattack:bae", flips_on(trigger), mlm=mlm, encoder=enc, pos=pos, threshold=0.99999,
                            recipe="paper")
        assert paper.attack(X, label=1).status == status, trigger
    assert make_attack("textattack:bae", flips_on(same), mlm=mlm, encoder=enc, threshold=0.99999,
                       recipe="relaxed").attack(X, label=1).status == "failed"
    assert paper.settings() == {"recipe": "paper", "pos_tagger": pos.name}

    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta deep and meaningful film .\n")
    refused = "--recipe applies to --method genetic, bae, textattack:genetic, textattack:bae only"
    for extra, message in ((["--method", "textattack:pwws", "--recipe", "paper"], refused),
                           (["--method", "textattack:genetic", "--lm-constraint"], "takes --recipe paper")):
        r = cli("attack", "--model", "bow", "--data", str(tmp_path / "d.tsv"), "--no-ppl", *extra)
        assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output
