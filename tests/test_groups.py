"""Protected groups of audit bias --group: their pairs, their blacklists, and runs over several groups."""

from __future__ import annotations

import json

import pytest

from textaudit.errors import TextAuditError
from textaudit.fairness import CounterfactualBias
from textaudit.fairness.groups import GROUP_NAMES, group_pairs, protected_group
from textaudit.models import as_classifier


def test_pairs_are_each_member_against_the_reference_or_every_two_members():
    religion, _ = group_pairs("religion")
    assert ("muslim", "christian") in religion and ("jew", "christian") in religion
    assert all(b == "christian" and a != b for a, b in religion)
    assert not any(" " in w or "-" in w for p in religion for w in p)  # 'roman catholic' is two words: left out
    assert ("gay", "straight") in group_pairs("sexuality")[0]  # the paper's examples
    assert ("asian", "american") in group_pairs("ethnicity")[0]
    assert ("chinese", "american") in group_pairs("nationality")[0]
    names, _ = group_pairs("names")
    assert names[:2] == [("michael", "jennifer"), ("christopher", "jessica")]  # male vs female, rank by rank
    assert group_pairs("gender")[0] == [("he", "she"), ("his", "her"), ("him", "her"), ("men", "women"),
                                        ("man", "woman"), ("actor", "actress")]
    n = len(protected_group("sexuality").members)
    assert len(group_pairs("sexuality", "all")[0]) == n * (n - 1) // 2
    every, blacklists = group_pairs("all")
    assert len(every) == len(set(every)) == len(blacklists)
    assert {p for g in GROUP_NAMES for p in group_pairs(g)[0]} == set(every)
    with pytest.raises(TextAuditError, match="unknown group 'astrology'"):
        group_pairs("astrology")
    with pytest.raises(TextAuditError, match="unknown --group-pairs 'some'"):
        group_pairs("religion", "some")


def test_each_pair_is_blacklisted_its_own_groups_words():
    _, bl = group_pairs("all")
    assert protected_group("religion").blacklist <= bl[("muslim", "christian")]
    assert "gay" not in bl[("muslim", "christian")] and "gay" in bl[("lesbian", "straight")]
    assert "waitress" in bl[("he", "she")]  # gender keeps every gendered word of the swap map


def test_the_neighbourhood_never_adds_a_word_of_the_pairs_group():
    """minilm-mlm proposes nationalities for 'chinese' in this sentence: under a nationality pair they
    are blacklisted, under a sexuality pair they are not (and 'gay' is)."""
    from textaudit.neighborhoods import load_mlm

    mlm = load_mlm("minilm-mlm")
    clf = as_classifier(lambda texts: [[0.5, 0.5]] * len(texts))
    nationalities, sexualities = set(protected_group("nationality").members), set(protected_group("sexuality").members)
    x = "an american story about chinese immigrants ."
    _, bl = group_pairs("all")
    seen = {}
    for pair in (("indian", "american"), ("gay", "straight")):
        est = CounterfactualBias(clf, mlm, blacklists=bl)
        nb = est.builder(pair).neighbors(x, 1, protected=[1])
        seen[pair] = {t.lower() for n in nb for t in n.sentence.tokens} - set(x.split())
    assert not seen[("indian", "american")] & nationalities
    assert seen[("gay", "straight")] & nationalities and not seen[("gay", "straight")] & sexualities


def test_bias_over_a_group_and_over_all_groups(cli, tmp_path):
    plugin = tmp_path / "m.py"
    plugin.write_text("def clf(texts):\n    return [[0.8, 0.2] if 'muslim' in t else [0.4, 0.6] for t in texts]\n")
    data = tmp_path / "d.tsv"
    data.write_text("label\ttext\n1\ta muslim family drama that never finds its heart .\n"
                    "0\tthe christian comedy is a tired mess .\n1\ta gay romance , told with wit .\n"
                    "1\tan asian epic of real beauty .\n0\tnothing happens here .\n")
    model = ["--model", f"{plugin}:clf", "--data", str(data), "--mlm", "minilm-mlm", "--k", "1"]
    r = cli("bias", *model, "--group", "religion", "--output", str(tmp_path / "r.jsonl"), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    measured = {tuple(p["pair"]): p["by_k"] for p in out["pairs"]}
    # every (member, christian) pair has the christian sentence as a (reversed) source; muslim has both
    assert set(measured) == set(group_pairs("religion")[0]) and "skipped_pairs" not in out
    assert measured[("muslim", "christian")]["0"]["n"] == 2
    # F_soft = f_soft(x with christian) - f_soft(x with muslim) = 0.6 - 0.2 on both sources, and
    # blacklisting keeps 'muslim' out of every neighbour, so B stays 0.4 at k = 1 as well
    assert measured[("muslim", "christian")]["0"]["B"] == pytest.approx(0.4, abs=1e-6)
    assert measured[("muslim", "christian")]["1"]["B"] == pytest.approx(0.4, abs=1e-6)
    assert measured[("hindu", "christian")]["0"]["B"] == pytest.approx(0.0, abs=1e-6)
    religion = set(protected_group("religion").members)
    scored = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()[1:]]
    texts = [x["text"] for x in scored if "text" in x]
    assert texts and all(len(set(t.lower().split()) & religion) == 1 for t in texts)  # only the pair's own word
    header = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])["header"]["config"]
    assert (header["group"], header["group_pairs"]) == ("religion", "reference")
    r = cli("bias", *model, "--group", "sexuality", "--output", str(tmp_path / "r.jsonl"), "--resume")
    assert r.exit_code == 2 and "group" in r.stderr  # another group's blacklists: not the same results
    r = cli("bias", *model, "--group", "ethnicity", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert [p["pair"] for p in out["pairs"]] == [["asian", "american"]] and len(out["skipped_pairs"]) == 5
    assert "5 of 6 pairs left out" in r.stderr
    r = cli("bias", *model, "--group", "all", "--json")
    assert r.exit_code == 0, r.output
    pairs = {tuple(p["pair"]) for p in json.loads(r.stdout.strip().splitlines()[-1])["pairs"]}
    assert {("muslim", "christian"), ("gay", "straight"), ("asian", "american")} <= pairs
    plain = tmp_path / "plain.tsv"
    plain.write_text("label\ttext\n0\tnothing happens here .\n1\ta fine film .\n")
    r = cli("bias", "--model", f"{plugin}:clf", "--data", str(plain), "--k", "0", "--group", "names")
    assert r.exit_code == 2 and "none of the 100 pairs can be measured on this data and model" in r.stderr
