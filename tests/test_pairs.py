"""Sentence pairs (NLI, paraphrase): the classifier protocol takes (first, second) tuples, attacks and
B_{p,k} perturb one side and keep the other verbatim. The classifier is a planted NLI rule whose
answer is known: it says "neutral" once the hypothesis holds two words the premise lacks."""

from __future__ import annotations

import json
import re
import textwrap

import numpy as np
import pytest

from textaudit.attacks import SOBeam, make_attack, run_attack
from textaudit.errors import TextAuditError
from textaudit.fairness import CounterfactualBias, run_bias
from textaudit.models.batched import PairView, as_classifier

WORD = re.compile(r"[^\W\d_]+")
PREMISES = [
    "the movie was a wonderful and moving story about a brave family in a small town .",
    "he said the old house near the river was quiet , cold and very dark at night .",
    "a happy boy walked his small dog through the park on a sunny morning .",
]
HYPOTHESES = ["the movie was wonderful .", "he said the house was quiet .", "a happy boy walked his dog ."]


def novel_words(premise: str, hypothesis: str) -> int:
    seen = {w.lower() for w in WORD.findall(premise)}
    return sum(w.lower() not in seen for w in WORD.findall(hypothesis))


def planted(inputs):
    """P(neutral) = σ(3·(novel − 1.5)): entailment (class 0) while at most one hypothesis word is new."""
    rows = []
    for item in inputs:
        assert isinstance(item, tuple), "a pair classifier gets (premise, hypothesis) tuples"
        premise, hypothesis = item
        p1 = 1.0 / (1.0 + np.exp(-3.0 * (novel_words(premise, hypothesis) - 1.5)))
        rows.append([1.0 - p1, p1])
    return np.array(rows)


PLUGIN = textwrap.dedent('''
    import re
    import numpy as np

    WORD = re.compile(r"[^\\W\\d_]+")

    def classify(inputs):
        """A pair arrives as a tuple (premise, hypothesis)."""
        rows = []
        for premise, hypothesis in inputs:
            seen = {w.lower() for w in WORD.findall(premise)}
            novel = sum(w.lower() not in seen for w in WORD.findall(hypothesis))
            p1 = 1.0 / (1.0 + np.exp(-3.0 * (novel - 1.5)))
            rows.append([1.0 - p1, p1])
        return np.array(rows)
''')


def test_the_protocol_takes_pairs_and_pairview_fixes_one_side():
    clf = as_classifier(planted, name="planted-nli")
    probs = clf.predict_proba([(PREMISES[0], HYPOTHESES[0]), [PREMISES[0], "a terrible film ."]])
    # 0 new words; 2 new words ("terrible", "film")
    np.testing.assert_allclose(probs[:, 1], [1 / (1 + np.exp(4.5)), 1 / (1 + np.exp(-1.5))], rtol=1e-5)
    # a repeated pair is answered from the cache
    clf.predict_proba([(PREMISES[0], HYPOTHESES[0])])
    assert clf.stats.cache_hits == 1
    with pytest.raises(TextAuditError, match="pairs of strings"):
        clf.predict_proba([(PREMISES[0], 3)])
    view = PairView(clf, PREMISES[0], "second")
    np.testing.assert_allclose(view.predict_proba([HYPOTHESES[0]]), probs[:1])
    first = PairView(clf, HYPOTHESES[0], "first")  # the premise varies, the hypothesis is kept
    assert first.predict_proba([PREMISES[0]])[0, 1] == pytest.approx(0.0110, abs=1e-4)
    assert view.stats is clf.stats and view.num_classes == 2
    with pytest.raises(TextAuditError, match="first or second"):
        PairView(clf, "x", "middle")


def test_so_beam_on_pairs_changes_the_hypothesis_only(tiny_mlm):
    seen: list = []

    def spy(inputs):
        seen.extend(inputs)
        return planted(inputs)

    clf = as_classifier(spy, name="planted-nli")
    atk = SOBeam(clf, k=3, mlm=tiny_mlm, seed=0, naturalness=False)  # the paper's search: a tiny random masked LM
    summary, records = run_attack(atk, HYPOTHESES, [0, 0, 0], contexts=PREMISES, side="second", progress=False)
    assert summary["attacked"] == 3 and summary["success"] == 3
    for rec, premise in zip(records, PREMISES):
        assert rec["context"] == premise and rec["side"] == "second"
        # the planted rule: x̃ has at most one new word and x̃ ⊕ p one more, so the prediction flips
        x, xp = rec["vulnerable"], rec["vulnerable_patched"]
        assert novel_words(premise, x) <= 1 < novel_words(premise, xp)
        assert rec["vulnerable_prediction"] == 0 and rec["vulnerable_patched_prediction"] == 1
        assert rec["pair"][0] in rec["text"].split()
    # every query kept a premise verbatim as the first text
    assert seen and all(isinstance(q, tuple) and q[0] in PREMISES for q in seen if q[0] != "")


def test_first_side_and_first_order_methods_on_pairs(tiny_mlm):
    clf = as_classifier(planted, name="planted-nli")
    atk = SOBeam(clf, k=2, mlm=tiny_mlm, seed=0, naturalness=False)
    res = atk.attack(PREMISES[0], 0, context=HYPOTHESES[0], side="first")
    assert res.extra["side"] == "first" and res.extra["context"] == HYPOTHESES[0]
    assert res.status in ("success", "failed", "skipped")
    for method, extra in (("genetic", {}), ("bae", {"mlm": tiny_mlm})):
        a = make_attack(method, clf, seed=0, max_queries=300, **extra)
        _, recs = run_attack(a, HYPOTHESES, [0, 0, 0], contexts=PREMISES, progress=False)
        for r, premise in zip(recs, PREMISES):
            assert r["context"] == premise and r["status"] in ("success", "failed", "skipped")
            if r["status"] == "success":  # the adversarial hypothesis really is "neutral" next to its premise
                assert novel_words(premise, r["vulnerable"]) >= 2


def test_bias_on_pairs_keeps_the_premise(tiny_mlm):
    clf = as_classifier(planted, name="planted-nli")
    est = CounterfactualBias(clf, tiny_mlm, blacklist=["he", "she"], side="second")
    premises = [p.replace("the movie", "he thinks the movie") for p in PREMISES[:1]] + PREMISES[1:2]
    hyps = ["he thinks the movie was wonderful .", "he said the house was quiet ."]
    res = run_bias(est, [("he", "she")], 1, hyps, contexts=premises, progress=False)
    by_k = res["planted-nli"][("he", "she")]
    # k = 0: "she" is the one new word next to a premise with "he": σ(−1.5) − σ(−4.5), in every source
    expected = 1 / (1 + np.exp(1.5)) - 1 / (1 + np.exp(4.5))
    assert by_k[0].B == pytest.approx(expected, abs=1e-5) and by_k[0].sources == 2
    assert by_k[1].n > by_k[0].n


def test_cli_attack_and_bias_on_a_pair_file(cli, tmp_path):
    plugin = tmp_path / "nli.py"
    plugin.write_text(PLUGIN)
    data = tmp_path / "nli.jsonl"
    data.write_text("".join(json.dumps({"premise": p, "hypothesis": h, "label": "entailment"}) + "\n"
                            for p, h in zip(PREMISES, HYPOTHESES)))
    out = tmp_path / "a.jsonl"
    # the plug-in names no classes: its class 0 is entailment (a name is never numbered by its sort order)
    r = cli("attack", "--model", f"{plugin}:classify", "--data", str(data), "--text-column", "premise",
            "--pair-column", "hypothesis", "--label-column", "label", "--label-map", "entailment=0", "--k", "3",
            "--no-ppl", "--output", str(out), "--mlm", "minilm-mlm", "--naturalness", "off", "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["attacked"] == 3 and summary["success"] >= 2
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    header, recs = lines[0]["header"], lines[1:]
    assert header["config"]["perturb_side"] == "second" and header["config"]["labels"] == ["entailment"]  # the map given
    assert [r["context"] for r in recs] == PREMISES and [r["id"] for r in recs] == [f"nli.jsonl:{i}" for i in range(3)]
    # bad pair input: one line, exit 2
    r = cli("attack", "--model", f"{plugin}:classify", "--data", str(data), "--text-column", "premise",
            "--pair-column", "claim", "--no-ppl")
    assert r.exit_code == 2 and "no pair column 'claim'" in r.output
    r = cli("attack", "--model", f"{plugin}:classify", "--data", str(data), "--text-column", "premise",
            "--pair-column", "hypothesis", "--perturb-side", "third", "--no-ppl")
    assert r.exit_code == 2 and "--perturb-side must be second or first (got 'third')" in r.output
    r = cli("bias", "--model", f"{plugin}:classify", "--data", str(data), "--text-column", "premise",
            "--pair-column", "hypothesis", "--pair", "he,she", "--k", "0", "--json")
    assert r.exit_code == 0, r.output
    b0 = json.loads(r.stdout.strip().splitlines()[-1])["pairs"][0]["by_k"]["0"]
    # "he said the house was quiet ." next to a premise with "he": "she" is its one new word
    assert b0["B"] == pytest.approx(1 / (1 + np.exp(1.5)) - 1 / (1 + np.exp(4.5)), abs=1e-5)


def test_hf_pair_encoding(tmp_path, cli):
    """hf: models get the tokenizer's own pair encoding (segment ids included)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    from textaudit.models import load_classifier
    from textaudit.resources import resolve

    tok = BertTokenizerFast.from_pretrained(resolve("minilm"))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, num_labels=3, id2label={0: "entailment", 1: "neutral", 2: "contradiction"},
                     label2id={"entailment": 0, "neutral": 1, "contradiction": 2})
    model = BertForSequenceClassification(cfg).eval()
    model.save_pretrained(tmp_path / "nli")
    tok.save_pretrained(tmp_path / "nli")
    clf = load_classifier(f"hf:{tmp_path / 'nli'}")
    pairs = list(zip(PREMISES, HYPOTHESES))
    with torch.no_grad():
        enc = tok([p for p, _ in pairs], [h for _, h in pairs], padding=True, return_tensors="pt")
        assert int(enc["token_type_ids"].sum()) > 0
        ref = torch.softmax(model(**enc).logits, -1).numpy()
    np.testing.assert_allclose(clf.predict_proba(pairs), ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(TextAuditError, match="mixes single texts and sentence pairs"):
        clf.predict_proba([(PREMISES[0], "a new hypothesis ."), "a lone text"])  # not cached: one batch
    # class names in the data map onto the model's id2label order
    data = tmp_path / "nli.csv"
    data.write_text("premise,hypothesis,gold\n" + "".join(f'"{p}","{h}",{g}\n' for (p, h), g in
                                                          zip(pairs, ["neutral", "contradiction", "neutral"])))
    r = cli("evaluate", "--model", f"hf:{tmp_path / 'nli'}", "--data", str(data), "--text-column", "premise",
            "--pair-column", "hypothesis", "--label-column", "gold", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    pred = ref.argmax(1)
    assert out["accuracy"] == pytest.approx(float(np.mean(pred == np.array([1, 2, 1]))), abs=1e-4)
    assert out["labels"] == ["entailment", "neutral", "contradiction"]
    r = cli("evaluate", "--model", f"hf:{tmp_path / 'nli'}", "--data", str(data), "--text-column", "premise",
            "--pair-column", "hypothesis", "--label-column", "premise")
    assert r.exit_code == 2 and "is not a class of model" in r.output
