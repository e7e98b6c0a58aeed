"""DND / IDC on hand-made permutations, reorderings at three granularities, and audit wordorder."""

from __future__ import annotations

import json
import random
import re

import pytest

from textaudit.errors import TextAuditError
from textaudit.perturbations.wordorder import char_permutation, dnd, idc, perturb, units


@pytest.mark.parametrize("perm, want_idc, want_dnd", [
    ([0, 1, 2, 3], 0.0, 0.0),                 # identity
    ([3, 2, 1, 0], 2 / 4, 3 / 3),             # full reversal: mean |j-P[j]| = (3+1+1+3)/4 = 2, every pair broken
    ([1, 0, 2, 3, 4], 0.4 / 5, 2 / 4),        # one adjacent swap: displacements 1,1,0,0,0; pairs (0,1),(1,2) broken
    ([3, 4, 5, 0, 1, 2], 3 / 6, 1 / 5),       # two halves swapped: every char moves 3; only the seam is broken
    ([0], 0.0, 0.0),
])
def test_metrics_by_hand(perm, want_idc, want_dnd):
    assert idc(perm) == pytest.approx(want_idc)
    assert dnd(perm) == pytest.approx(want_dnd)


def test_not_a_permutation():
    with pytest.raises(TextAuditError, match="not a permutation"):
        dnd([0, 0, 1])


def test_char_permutation_rule_for_repeats():
    assert char_permutation("abcab", "abcab") == [0, 1, 2, 3, 4]
    assert char_permutation("ab cd", "cd ab") == [3, 4, 2, 0, 1]
    # "aa" block moved as a block: runs are kept together
    assert char_permutation("xaay", "aayx") == [1, 2, 3, 0]
    with pytest.raises(TextAuditError, match="not permutations"):
        char_permutation("abc", "abd")


@pytest.mark.parametrize("level", ["word", "subword", "char"])
@pytest.mark.parametrize("kind", ["full_shuffle", "phrase_shuffle", "neighbor_flip"])
def test_every_reordering_is_a_consistent_permutation(level, kind):
    text = "an unbelievably  gorgeous film , truly ."
    out, perm = perturb(text, kind, level, random.Random(3), rho=0.5)
    assert len(out) == len(text) and sorted(perm) == list(range(len(text)))
    assert all(out[j] == text[perm[j]] for j in range(len(text)))
    assert re.findall(r"\s+", out) == re.findall(r"\s+", text)  # the spacing pattern is kept
    if level == "char":  # one-character units: every space stays exactly where it was
        assert [j for j, c in enumerate(out) if c == " "] == [j for j, c in enumerate(text) if c == " "]


def test_seeded_exact_outputs():
    t = "the cat sat on the mat"
    assert perturb(t, "neighbor_flip", "word", random.Random(0), rho=1.0)[0] == "cat the on sat mat the"
    assert perturb(t, "neighbor_flip", "word", random.Random(0), rho=0.0)[0] == t
    a = perturb(t, "full_shuffle", "word", random.Random(42))[0]
    assert a == perturb(t, "full_shuffle", "word", random.Random(42))[0] and sorted(a.split()) == sorted(t.split())
    assert perturb(t, "phrase_shuffle", "word", random.Random(1), rho=0.0)[0] == t  # one phrase: nothing moves
    assert perturb("ab cd", "neighbor_flip", "char", random.Random(0), rho=1.0)[0] == "ba dc"


def test_subword_units_are_wordpieces():
    text = "unbelievably good"
    spans = units(text, "subword")
    assert [text[s:e] for s, e in spans][-1] == "good" and len(spans) > 2
    out, perm = perturb(text, "neighbor_flip", "subword", random.Random(0), rho=1.0)
    assert dnd(perm) > 0 and sorted(out.replace(" ", "")) == sorted(text.replace(" ", ""))


def test_local_vs_global():
    t = "one two three four five six seven eight nine ten"
    _, flip = perturb(t, "neighbor_flip", "word", random.Random(0), rho=1.0)
    _, halves = perturb(t, "phrase_shuffle", "word", random.Random(5), rho=0.15)
    assert idc(flip) < 0.1 and dnd(flip) > 0.1  # local damage, little global displacement


PLUGIN = '''
import numpy as np
POS = {"good", "great", "fine"}
def bag(texts):
    return np.array([[0.2, 0.8] if POS & set(t.split()) else [0.8, 0.2] for t in texts])
def first_word(texts):
    return np.array([[0.2, 0.8] if t.split()[0] == "good" else [0.8, 0.2] for t in texts])
'''


def test_cli_wordorder(cli, tmp_path):
    (tmp_path / "p.py").write_text(PLUGIN)
    rows = [("good film , really", 1), ("bad film , really", 0), ("good and fine", 1), ("dull and slow", 0)] * 5
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(f"{y}\t{t}\n" for t, y in rows))
    r = cli("wordorder", "--model", f"{tmp_path}/p.py:bag", "--data", str(tmp_path / "d.tsv"), "--perturbation",
            "full_shuffle", "--level", "word", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert d["accuracy"] == 1.0 and d["dnd"] > 0.1 and 0 < d["bleu4"] < 1 and d["levenshtein"] > 0
    r = cli("wordorder", "--model", f"{tmp_path}/p.py:first_word", "--data", str(tmp_path / "d.tsv"), "--sweep",
            "--plot", str(tmp_path / "plots"), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert d["clean_accuracy"] == 1.0 and len(d["rows"]) == 27
    assert d["accuracy_vs_dnd"]["rho"] < 0  # more local damage, lower accuracy for an order-sensitive model
    assert (tmp_path / "plots" / "accuracy_vs_dnd_idc.png").stat().st_size > 1000
    r = cli("wordorder", "--model", f"{tmp_path}/p.py:bag", "--data", str(tmp_path / "d.tsv"), "--level", "phoneme")
    assert r.exit_code == 2 and "--level must be word or subword or char (got 'phoneme')" in r.output
    r = cli("wordorder", "--model", f"{tmp_path}/p.py:bag", "--data", str(tmp_path / "d.tsv"), "--rho", "1.5")
    assert r.exit_code == 2 and "Invalid value for '--rho': Input should be less than or equal to 1" in r.output
