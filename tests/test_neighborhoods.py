"""Neighbourhood builder properties (Algorithm 1 of Double Perturbation) on a tiny real masked LM."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from textaudit.errors import TextAuditError
from textaudit.neighborhoods import NeighborhoodBuilder
from textaudit.sentence import Sentence

X = "a deep and meaningful film ."


def test_sentence_round_trip():
    for text in ["a deep and meaningful film .", "  Hello, world!  It's (really) well-made.\n", "it 's a film that does n't work ."]:
        s = Sentence.parse(text)
        assert s.text() == text
    s = Sentence.parse("Hello, world!")
    assert s.tokens == ("Hello", ",", "world", "!")
    assert s.replace(2, "there").text() == "Hello, there!"
    assert Sentence.parse("it 's good").tokens == ("it", "'s", "good")


def test_neighbor1_differs_in_exactly_one_word_and_respects_kappa_delta(tiny_mlm):
    b = NeighborhoodBuilder(tiny_mlm, kappa=5, delta=3.0)
    x = Sentence.parse(X)
    n1 = b.neighbors(X, 1)
    assert n1 and all(nb.distance == 1 and nb.l0 == 1 for nb in n1)
    assert all(len(x.diff(nb.sentence)) == 1 for nb in n1)
    assert len({nb.sentence.tokens for nb in n1}) == len(n1)
    # per position: at most κ candidates, all above best − δ, never the original, punctuation never replaced
    by_pos = Counter(x.diff(nb.sentence)[0] for nb in n1)
    assert max(by_pos.values()) <= 5 and 5 not in by_pos
    for i in by_pos:
        cands = tiny_mlm.candidates([(list(x.tokens), i)], top=5)[0]
        best = cands[0][1]
        kept = {w for w, v in cands if v > best - 3.0 and w.isalpha() and w != x.tokens[i]}
        got = {nb.sentence.tokens[i] for nb in n1 if x.diff(nb.sentence) == [i]}
        assert got == kept


def test_delta_zero_keeps_nothing_and_large_delta_keeps_kappa(tiny_mlm):
    assert NeighborhoodBuilder(tiny_mlm, kappa=5, delta=0.0).neighbors(X, 1) == []
    n = NeighborhoodBuilder(tiny_mlm, kappa=4, delta=1e9, alphabetic_only=False).neighbors(X, 1)
    # 5 word positions + "." (non-alphabetic positions allowed now), up to 4 candidates each minus the original
    assert 6 * 3 <= len(n) <= 6 * 4


def test_neighbor2_contains_neighbor1_and_is_deterministic(tiny_mlm):
    b = NeighborhoodBuilder(tiny_mlm, kappa=3, delta=1e9)
    n1 = {nb.sentence.tokens for nb in b.neighbors(X, 1)}
    n2 = b.neighbors(X, 2)
    s2 = {nb.sentence.tokens for nb in n2}
    assert n1 < s2 and Sentence.parse(X).tokens not in s2
    assert [nb.distance for nb in n2] == sorted(nb.distance for nb in n2)  # distance 1 first, then 2
    assert all(nb.l0 <= 2 for nb in n2)
    assert b.counts(X, 2) == [len(n1), len(s2) - len(n1)]
    again = NeighborhoodBuilder(tiny_mlm, kappa=3, delta=1e9).neighbors(X, 2)
    assert [nb.text for nb in again] == [nb.text for nb in n2]


def test_protected_positions_and_blacklist(tiny_mlm):
    b0 = NeighborhoodBuilder(tiny_mlm, kappa=5, delta=1e9)
    introduced = Counter(w for nb in b0.neighbors(X, 1) for w in nb.sentence.tokens)
    banned = {w for w, _ in introduced.most_common(3) if w not in X.split()}
    b = NeighborhoodBuilder(tiny_mlm, kappa=5, delta=1e9, blacklist=banned)
    nbrs = b.neighbors(X, 2, protected=[3])
    assert nbrs
    for nb in nbrs:
        assert nb.sentence.tokens[3] == "meaningful"
        assert not banned & set(nb.sentence.tokens)


def test_max_positions_limits_and_is_seeded(tiny_mlm):
    b = NeighborhoodBuilder(tiny_mlm, kappa=3, delta=1e9, max_positions=2, seed=7)
    pos = {Sentence.parse(X).diff(nb.sentence)[0] for nb in b.neighbors(X, 1)}
    assert len(pos) == 2
    assert pos == {Sentence.parse(X).diff(nb.sentence)[0]
                   for nb in NeighborhoodBuilder(tiny_mlm, kappa=3, delta=1e9, max_positions=2, seed=7).neighbors(X, 1)}


def test_raw_text_keeps_spacing_and_case(tiny_mlm):
    text = "Heavy rain, sadly, flooded the town!"
    for nb in NeighborhoodBuilder(tiny_mlm, kappa=3, delta=1e9).neighbors(text, 1):
        i = Sentence.parse(text).diff(nb.sentence)[0]
        new = nb.sentence.tokens[i]
        assert nb.text.replace(new, "@", 1) == text.replace(text.split()[0] if i == 0 else Sentence.parse(text).tokens[i], "@", 1)
        if i == 0:
            assert new[0].isupper()


@pytest.mark.parametrize("bad, match", [("", "empty sentence"), ("   ", "empty sentence"), ("wow", "fewer than two words"),
                                        ("wow !", "fewer than two words")])
def test_empty_and_one_word_input(tiny_mlm, bad, match):
    with pytest.raises(TextAuditError, match=match):
        NeighborhoodBuilder(tiny_mlm).neighbors(bad, 1)


def test_bad_parameters(tiny_mlm):
    with pytest.raises(TextAuditError, match="kappa"):
        NeighborhoodBuilder(tiny_mlm, kappa=0)
    with pytest.raises(TextAuditError, match="delta"):
        NeighborhoodBuilder(tiny_mlm, delta=-1)


def test_one_mlm_call_per_frontier(tiny_mlm):
    calls = []

    class Counting:
        name = "counting"

        def candidates(self, batch, top=20):
            calls.append(len(batch))
            return tiny_mlm.candidates(batch, top)

    NeighborhoodBuilder(Counting(), kappa=3, delta=1e9).neighbors(X, 2)
    # level 1: one call with the 5 word positions of x; level 2: one call for the whole frontier
    assert calls[0] == 5 and len(calls) == 2


def test_a_level_counts_its_contexts_when_it_begins(tiny_mlm):
    """A level of d asks every position of its frontier, counted when it begins (what an ETA counts for an enumeration
    in flight); level 2 asks as many as level 1's sentences × the start's positions (a neighbour has as many words:
    what a search announces for its next level while it checks one)."""
    from textaudit.engine.scheduler import run_now

    b = NeighborhoodBuilder(tiny_mlm, kappa=3, delta=1e9)
    x0 = b.parse(X)
    level1 = run_now(b.ask_level(x0, [x0], {x0.tokens}, 1))
    assert b.level_contexts == [5, 5]
    seen = {x0.tokens} | {nb.sentence.tokens for nb in level1}
    run_now(b.ask_level(x0, [nb.sentence for nb in level1], seen, 2))
    assert b.level_contexts[0] == 5 + len(level1) * len(b.positions(x0)) > 5


def test_uniform_sampler_matches_enumeration(tiny_mlm):
    x = "a truly deep film"
    b = NeighborhoodBuilder(tiny_mlm, kappa=3, delta=1e9, seed=3)
    universe = [nb.sentence.tokens for nb in b.neighbors(x, 2)]
    draws = b.sample(x, 2, 3000)
    assert {d.sentence.tokens for d in draws} <= set(universe)
    counts = Counter(d.sentence.tokens for d in draws)
    observed = np.array([counts[u] for u in universe])
    p = stats.chisquare(observed).pvalue
    assert p > 1e-3, (p, len(universe))
    # seeded: the same draws again
    assert [d.text for d in b.sample(x, 2, 20, seed=11)] == [d.text for d in b.sample(x, 2, 20, seed=11)]


def test_cli_neighbors(cli, tiny_mlm, tmp_path):
    tiny_mlm.model.save_pretrained(tmp_path / "m")
    tiny_mlm.tokenizer.save_pretrained(tmp_path / "m")
    r = cli("neighbors", X, "--k", "2", "--limit", "7", "--mlm", str(tmp_path / "m"), "--kappa", "3", "--delta", "1e9",
            "--protect", "film", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert d["n"] == 7 and len(d["neighbors"]) == 7
    assert all(nb["l0"] == len(nb["changed"]) for nb in d["neighbors"])
    assert all(nb["text"].split()[4] == "film" for nb in d["neighbors"])
    for bad, msg in [("wow", "fewer than two words"), ("", "empty sentence")]:
        r = cli("neighbors", bad, "--mlm", str(tmp_path / "m"))
        assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output
    r = cli("neighbors", X, "--mlm", str(tmp_path / "m"), "--protect", "banana")
    assert r.exit_code == 2 and "--protect 'banana' does not occur" in r.output
