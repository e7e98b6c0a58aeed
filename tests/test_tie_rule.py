"""#82 (WRONG — a tie counted as a decision): one rule for "the model decided class c" in every audit
(:mod:`textaudit.decision`): the class with the strictly largest probability, and none where two classes share it.
A contract over every audit, run on a plug-in that ties on most texts: evaluate (accuracy, the confusion matrix),
calibration under ``--perturbed``, ``audit predict``, attacks (both searches and Genetic), certify, word order and
replay — a tie is never right, never a class's prediction, never a flip, never a vote."""

from __future__ import annotations

import json

import numpy as np
import pytest

from textaudit.decision import TIE, decisions

TIES = '''
import numpy as np

def clf(texts):  # decides only on "great" (positive); ties on every other text
    return np.array([[0.1, 0.9] if "great" in t.split() else [0.5, 0.5] for t in texts])
clf.labels = ["negative", "positive"]

def always(texts):  # ties on every text
    return np.array([[0.5, 0.5]] * len(texts))
always.labels = ["negative", "positive"]
'''

ROWS = [("a great film", 1), ("a dull film", 0), ("a dull plot", 0), ("a slow story", 0)]


@pytest.fixture(scope="module")
def ties(tmp_path_factory, tiny_mlm):
    d = tmp_path_factory.mktemp("ties")
    (d / "t.py").write_text(TIES)
    (d / "d.tsv").write_text("text\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in ROWS))
    tiny_mlm.model.save_pretrained(d / "mlm")
    tiny_mlm.tokenizer.save_pretrained(d / "mlm")
    return d


def _json(r) -> dict:
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_rule_itself():
    assert decisions(np.array([[0.5, 0.5], [0.4, 0.6], [1.0, 0.0]])).tolist() == [TIE, 1, 0]
    assert decisions(np.array([[0.3, 0.3, 0.4], [0.4, 0.4, 0.2]])).tolist() == [2, TIE]  # the largest tied: none


def test_evaluate_counts_a_tie_as_no_decision(ties, cli, tmp_path):
    """The issue's example: a model answering 0.5/0.5 was counted as deciding class 0 (accuracy 1.0 where 1 of 4 is
    right). One of four is right: the one it decided; the ties are in no cell of the confusion matrix."""
    out = _json(cli("evaluate", "--model", f"{ties}/t.py:clf", "--data", str(ties / "d.tsv"), "--json",
                    "--output", str(tmp_path / "e.jsonl")))
    assert out["accuracy"] == 0.25 and out["ties"] == 3
    assert out["confusion"]["matrix"] == [[0, 0], [0, 1]]
    assert [c["accuracy"] for c in out["per_class"]] == [0.0, 1.0]
    from textaudit.results import load

    again = load(tmp_path / "e.jsonl").summary()  # the kept predictions give the same (a tie kept as -1)
    assert again["accuracy"] == 0.25 and again["confusion"]["matrix"] == [[0, 0], [0, 1]]


def test_calibration_under_perturbation_counts_a_tie_as_wrong(ties, cli):
    out = _json(cli("evaluate", "--model", f"{ties}/t.py:clf", "--data", str(ties / "d.tsv"), "--json",
                    "--perturbed", "whitespace_perturbation"))
    cal = out["calibration"]
    assert cal["original"]["accuracy"] == 0.25, cal  # the three ties are not right


def test_predict_names_no_class_for_a_tie(ties, cli):
    out = _json(cli("predict", "--model", f"{ties}/t.py:clf", "--json", "a great film", "a dull film"))
    assert [p["label"] for p in out["predictions"]] == [1, None]
    table = cli("predict", "--model", f"{ties}/t.py:clf", "a dull film")
    assert table.exit_code == 0 and "tie: no decision" in table.output


@pytest.mark.parametrize("method, extra", [("so-enum", ("--k", "1", "--naturalness", "off", "--mlm")), ("genetic", ())])
def test_an_attack_finds_no_flip_from_a_tie(ties, cli, method, extra):
    extra = (*extra, str(ties / "mlm")) if extra else ()
    out = _json(cli("attack", "--model", f"{ties}/t.py:always", "--method", method, *extra, "--data",
                    str(ties / "d.tsv"), "--no-ppl", "--json"))
    assert out["success"] == 0 and out["skipped"] == len(ROWS)  # a tie is no prediction to flip


def test_certify_never_votes_with_a_tie(ties, cli):
    out = _json(cli("certify", "--model", f"{ties}/t.py:always", "--method", "safer", "--data", str(ties / "d.tsv"),
                    "--samples", "20", "--selection", "5", "--json"))
    assert out["abstain"] == len(ROWS) and out["accuracy"] == 0.0


def test_word_order_counts_a_tie_as_wrong(ties, cli):
    out = _json(cli("wordorder", "--model", f"{ties}/t.py:always", "--data", str(ties / "d.tsv"), "--json"))
    assert out["accuracy"] == 0.0  # was 0.75: every tie taken for class 0, the gold of three of the four


def test_replay_never_counts_a_tie_as_a_flip(ties, cli, tmp_path):
    from textaudit.formats.jsonl import write_results

    records = [{"id": "0", "status": "success", "method": "so-enum", "text": "a great film", "label": 1,
                "vulnerable": "a great film", "vulnerable_patched": "a grand film", "pair": ["great", "grand"], "l0": 0,
                "queries": 2, "seconds": 0.0},
               {"id": "1", "status": "success", "method": "genetic", "text": "a great film", "label": 1,
                "vulnerable": "a dull film", "l0": 1, "queries": 2, "seconds": 0.0}]
    write_results(tmp_path / "f.jsonl", records, command="attack",
                  config={"method": "so-enum", "model": "old", "labels": ["negative", "positive"]})
    r = cli("replay", str(tmp_path / "f.jsonl"), "--model", f"{ties}/t.py:clf", "--output", str(tmp_path / "r.jsonl"),
            "--json")
    assert r.exit_code == 0, r.output
    statuses = [json.loads(x)["status"] for x in (tmp_path / "r.jsonl").read_text().splitlines()[1:]]
    assert statuses == ["fixed", "fixed"]  # x̃ ⊕ p ties: no flip; x' ties: not misclassified, so the attack is fixed


def test_a_tied_reference_has_no_draw_that_flips_from_it():
    """A finding whose x̃ ties over a sampling endpoint's draws has no decision to flip from: none of x̃ ⊕ p's draws
    counts as a flip (with the old argmax reference, every draw naming class 1 did)."""
    from textaudit.models.batched import flips_in_draws

    assert flips_in_draws([0.3, 0.7], 0, None, 20) == 14 and flips_in_draws([0.3, 0.7], 1, None, 20) == 6
    assert flips_in_draws([0.3, 0.7], TIE, None, 20) == 0
