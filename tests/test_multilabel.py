"""#65: multi-label models (one independent probability per label, the Jigsaw scheme) audited one label at a time
(``--label NAME``): a plug-in with planted per-label behaviour, and a tiny real HF model saved with
``problem_type = "multi_label_classification"``."""

from __future__ import annotations

import json

import numpy as np
import pytest

TOXIC = '''
multilabel = True
labels = ["toxic", "insult", "identity_hate"]
def clf(texts):  # toxic: an identity effect ("gay") and a flip on "film"; insult: neither; identity_hate: a tie on "film"
    out = []
    for t in texts:
        w = t.lower().split()
        toxic = 0.8 if "gay" in w else 0.6 if "film" in w else 0.3
        identity = 0.5 if "film" in w else 0.3
        out.append([toxic, 0.1 + 0.001 * len(w), identity])
    return out
clf.multilabel, clf.labels = multilabel, labels
'''
ROWS = ["a deep and meaningful film .", "the film is long but good .", "one more film that is deep ."]
BIAS = ["the gay man said the story was moving .", "a gay couple runs the shop .", "the gay teacher was kind .",
        "my gay neighbour waved .", "a gay friend called today ."]


@pytest.fixture
def world(tmp_path, tiny_mlm):
    tiny_mlm.model.save_pretrained(tmp_path / "mlm")
    tiny_mlm.tokenizer.save_pretrained(tmp_path / "mlm")
    (tmp_path / "tox.py").write_text(TOXIC)
    (tmp_path / "data.tsv").write_text("toxic\ttext\n" + "".join(f"1\t{r}\n" for r in ROWS))
    (tmp_path / "bias.tsv").write_text("text\n" + "".join(f"{r}\n" for r in BIAS))
    (tmp_path / "pairs.txt").write_text("film,movie\n")
    return tmp_path


def _json(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_planted_identity_effect_is_found_on_its_label_and_not_on_the_others(world, cli):
    got = {}
    for label in ("toxic", "insult"):
        out = _json(cli("bias", "--model", f"{world}/tox.py:clf", "--label", label, "--pair", "gay,straight", "--data",
                        str(world / "bias.tsv"), "--k", "0", "--json"))
        got[label] = out["pairs"][0]["by_k"]["0"]
        assert out["model"] == f"tox.py:clf[{label}]"
    lo, hi = got["toxic"]["ci95"]
    assert got["toxic"]["B"] == pytest.approx(-0.5, abs=1e-6) and hi < 0  # 0.3 with "straight" − 0.8 with "gay"
    lo, hi = got["insult"]["ci95"]
    assert got["insult"]["B"] == pytest.approx(0.0, abs=1e-6) and lo <= 0 <= hi


def test_a_planted_flip_on_one_label_is_found_by_so_beam_there_and_ties_are_never_flips(world, cli):
    runs = {}
    for label in ("toxic", "insult", "identity_hate"):
        runs[label] = _json(cli("attack", "--model", f"{world}/tox.py:clf", "--label", label, "--label-column", "toxic",
                                "--method", "so-beam", "--k", "1", "--beam", "2", "--data", str(world / "data.tsv"),
                                "--mlm", str(world / "mlm"), "--pairs-file", str(world / "pairs.txt"), "--naturalness", "off", "--no-ppl",
                                "--json", "--output", str(world / f"{label}.jsonl")))
    assert runs["toxic"]["success"] == len(ROWS)  # film → movie takes toxic from 0.6 to 0.3: across 0.5
    assert runs["insult"]["success"] == 0
    assert runs["identity_hate"]["success"] == 0  # 0.5 → 0.3: p = t is a tie, neither side: no flip
    rec = json.loads((world / "toxic.jsonl").read_text().splitlines()[1])
    assert rec["pair"] == ["film", "movie"]
    header = json.loads((world / "toxic.jsonl").read_text().splitlines()[0])["header"]["config"]
    assert header["model"] == "tox.py:clf[toxic]" and header["model_fingerprint"].endswith("[toxic@0.5]")
    # another threshold is another threat model: 0.55 < 0.6 still flips; 0.65 > 0.6: x is not toxic to begin with
    out = _json(cli("attack", "--model", f"{world}/tox.py:clf", "--label", "toxic", "--label-threshold", "0.65",
                    "--label-column", "toxic", "--method", "so-beam", "--k", "1", "--beam", "2", "--data",
                    str(world / "data.tsv"), "--mlm", str(world / "mlm"), "--pairs-file", str(world / "pairs.txt"), "--naturalness", "off",
                    "--no-ppl", "--json"))
    assert out["success"] == 0


def test_one_line_errors_for_labels_that_make_no_sense(world, cli):
    bad = world / "bad.py"
    bad.write_text("def clf(texts):\n    return [[0.1, 0.2] for t in texts]\nclf.multilabel = True\n"
                   "clf.labels = ['toxic', 'insult', 'threat']\n")
    cases = [
        (["evaluate", "--model", f"{world}/tox.py:clf", "--label", "threat", "--data", str(world / "data.tsv"),
          "--label-column", "toxic"], "has no label 'threat'; its labels: toxic, insult, identity_hate"),
        (["attack", "--model", f"{world}/tox.py:clf", "--method", "genetic", "--data", str(world / "data.tsv"),
          "--label-column", "toxic"], "is multi-label (toxic, insult, identity_hate): give --label NAME"),
        (["evaluate", "--model", "bow", "--label", "toxic", "--data", "sst2:dev", "--limit", "3"],
         "is single-label"),
        (["evaluate", "--model", f"{bad}:clf", "--label", "toxic", "--data", str(world / "data.tsv"), "--label-column",
          "toxic"], "returned shape (3, 2) for 3 texts; expected (3, 3): one probability per label (toxic, insult, threat)"),
        (["evaluate", "--model", f"{world}/tox.py:clf", "--label", "toxic", "--label-threshold", "1", "--data",
          str(world / "data.tsv"), "--label-column", "toxic"], "--label-threshold must be a number > 0 and < 1"),
    ]
    for args, says in cases:
        r = cli(*args)
        assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output, (args, r.output)
        assert len([x for x in r.output.splitlines() if x.startswith("error:")]) == 1


def test_an_hf_model_saved_as_multi_label_is_read_with_a_sigmoid_per_label(tmp_path, cli):
    import torch

    from textaudit.models import load_classifier

    model, tok = _tiny_multilabel_bert(tmp_path / "hf", bias=(2.0, -2.0, 0.0))
    texts = ["you are a fine person", "what a day"]
    clf = load_classifier(f"hf:{tmp_path / 'hf'}")
    got = clf.predict_proba(texts)
    with torch.no_grad():
        logits = model(**tok(texts, return_tensors="pt", padding=True)).logits
    assert clf.multilabel and clf.labels == ["toxic", "insult", "threat"]
    assert np.allclose(got, torch.sigmoid(logits).numpy(), atol=1e-5)  # independent probabilities, not a softmax
    assert not np.allclose(got.sum(1), 1.0)
    (tmp_path / "d.tsv").write_text("toxic\ttext\n1\tyou are a fine person\n0\twhat a day\n")
    out = _json(cli("evaluate", "--model", f"hf:{tmp_path / 'hf'}", "--label", "toxic", "--data", str(tmp_path / "d.tsv"),
                    "--label-column", "toxic", "--json"))
    assert out["model"].endswith("[toxic]") and out["labels"] == ["not toxic", "toxic"]
    assert out["accuracy"] == pytest.approx(float(np.mean((got[:, 0] > 0.5) == np.array([True, False]))), abs=1e-6)


def _records(path):
    lines = path.read_text().splitlines()
    return json.loads(lines[0])["header"]["config"], [json.loads(x) for x in lines[1:]]


def test_label_all_gives_each_labels_records_while_asking_each_masked_context_and_each_text_once(world):
    """--label all over three labels: each label's results file equals a --label NAME run's, record for record and
    setting for setting, while the masked LM is asked each masked context once (not once per label) and the model
    forwards each sentence once for every label (counted on the objects themselves, no store)."""
    from textaudit.fairness.request import BiasRequest
    from textaudit.neighborhoods.store import use_store

    common = dict(model=f"{world}/tox.py:clf", pair=["gay,straight"], data=str(world / "bias.tsv"), k=1,
                  mlm=str(world / "mlm"), kappa=5, delta=1e9)
    with use_store("off"):
        every = BiasRequest(**common, target_label="all", output=world / "all.jsonl").run(progress=False).labels
        alone = {name: BiasRequest(**common, target_label=name, output=world / f"one.{name}.jsonl").run(progress=False)
                 for name in every}
    assert list(every) == ["toxic", "insult", "identity_hate"]
    for name in every:
        assert _records(world / f"all.{name}.jsonl") == _records(world / f"one.{name}.jsonl"), name
        assert every[name].summary["pairs"] == alone[name].summary["pairs"]
    mlm = {id(o.masked_lm) for o in every.values()}
    assert len(mlm) == 1  # one masked LM for every label
    shared_mlm = every["toxic"].masked_lm
    assert shared_mlm.forwards == alone["toxic"].masked_lm.forwards > 0  # the neighbourhoods' work once, not three times
    sentences = len({r["text"] for r in _records(world / "all.toxic.jsonl")[1] if "text" in r})
    model = every["toxic"].classifier.model
    texts = 2 * sentences  # each neighbour with p(1) and with p(2)
    assert model.stats.unique_forwards == texts  # each text forwarded once for the three labels
    assert sum(o.classifier.model.stats.unique_forwards for o in alone.values()) == 3 * texts


def test_label_all_on_the_command_line_and_its_one_line_errors(world, cli):
    (world / "data3.tsv").write_text("toxic\tinsult\tidentity_hate\ttext\n" + "".join(f"1\t0\t0\t{r}\n" for r in ROWS))
    out = _json(cli("attack", "--model", f"{world}/tox.py:clf", "--label", "all", "--method", "so-beam", "--k", "1",
                    "--beam", "2", "--data", str(world / "data3.tsv"), "--mlm", str(world / "mlm"), "--pairs-file",
                    str(world / "pairs.txt"), "--naturalness", "off", "--no-ppl", "--json", "--output", str(world / "a.jsonl")))
    assert {k: v["success"] for k, v in out["labels"].items()} == {"toxic": 3, "insult": 0, "identity_hate": 0}
    assert sorted(p.name for p in world.glob("a.*.jsonl")) == ["a.identity_hate.jsonl", "a.insult.jsonl", "a.toxic.jsonl"]
    r = cli("attack", "--model", f"{world}/tox.py:clf", "--label", "all", "--method", "so-beam", "--k", "1", "--data",
            str(world / "data.tsv"), "--mlm", str(world / "mlm"), "--pairs-file", str(world / "pairs.txt"), "--naturalness", "off",
            "--no-ppl")
    assert r.exit_code == 2 and "insult" in r.output and "Traceback" not in r.output, r.output  # no insult column
    r = cli("bias", "--model", "bow", "--label", "all", "--pair", "he,she", "--data", "sst2:dev", "--limit", "3", "--k", "0")
    assert r.exit_code == 2 and "is single-label" in r.output, r.output
    from textaudit.models.zoo.names import checkpoint_dir

    assert not checkpoint_dir("bow").exists()  # said from its name: a zoo model is not trained to learn it (#84)


def test_replay_and_certify_take_a_label_too(world, cli):
    """Findings of --label toxic replayed on the same label all still hold; on another label they are another task's
    findings (their classes are "not toxic"/"toxic"): one line, as any other task's; SAFER certifies one label of
    the model (the data's column of the label's name is its gold label)."""
    args = ["--method", "so-beam", "--k", "1", "--beam", "2", "--data", str(world / "data.tsv"), "--mlm", str(world / "mlm"),
            "--pairs-file", str(world / "pairs.txt"), "--naturalness", "off", "--no-ppl", "--label-column", "toxic"]
    _json(cli("attack", "--model", f"{world}/tox.py:clf", "--label", "toxic", *args, "--output", str(world / "t.jsonl"),
              "--json"))
    same = _json(cli("replay", str(world / "t.jsonl"), "--model", f"{world}/tox.py:clf", "--label", "toxic", "--json"))
    assert same["findings"] == len(ROWS) and same["still"] == len(ROWS)
    r = cli("replay", str(world / "t.jsonl"), "--model", f"{world}/tox.py:clf", "--label", "insult")
    assert r.exit_code == 2 and "class 'toxic' of these findings is not a class of tox.py:clf[insult]" in r.output
    (world / "syn.json").write_text('{"film": ["movie"]}')
    cert = _json(cli("certify", "--model", f"{world}/tox.py:clf", "--label", "toxic", "--method", "safer", "--data",
                     str(world / "data.tsv"), "--synonyms", str(world / "syn.json"), "--hops", "1", "--samples", "50",
                     "--selection", "10", "--neighbors", "0", "--json"))
    assert cert["n"] == len(ROWS)


def test_evaluate_every_label_at_once_equals_scikit_learn(world, cli):
    """Without --label, a multi-label model is evaluated on every label: per-label P/R/F1, micro and macro, subset
    accuracy and Hamming loss equal scikit-learn's on the same decisions; a label column missing from the data, or
    not 0/1, and a --label-columns name the model lacks are one line each."""
    from sklearn.metrics import accuracy_score, hamming_loss, precision_recall_fscore_support

    from textaudit.models import load_classifier

    texts = ROWS + BIAS + ["a quiet evening .", "the gay film was long ."]
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, (len(texts), 3))
    (world / "ml.tsv").write_text("toxic\tinsult\tidentity_hate\ttext\n" +
                                  "".join(f"{a}\t{b}\t{c}\t{t}\n" for (a, b, c), t in zip(truth, texts)))
    out = _json(cli("evaluate", "--model", f"{world}/tox.py:clf", "--data", str(world / "ml.tsv"), "--json"))
    decided = load_classifier(f"{world}/tox.py:clf").predict_proba(texts) > 0.5
    P, R, F, S = precision_recall_fscore_support(truth, decided, zero_division=0)
    for j, row in enumerate(out["per_label"]):
        assert (row["precision"], row["recall"], row["f1"], row["support"]) == pytest.approx((P[j], R[j], F[j], S[j]),
                                                                                            abs=1e-4)
    for avg in ("micro", "macro"):
        want = precision_recall_fscore_support(truth, decided, average=avg, zero_division=0)[:3]
        assert (out[avg]["precision"], out[avg]["recall"], out[avg]["f1"]) == pytest.approx(want, abs=1e-4)
    assert out["subset_accuracy"] == pytest.approx(accuracy_score(truth, decided), abs=1e-4)
    assert out["hamming_loss"] == pytest.approx(hamming_loss(truth, decided), abs=1e-4)
    lo, hi = out["hamming_loss_ci95"]
    assert lo <= out["hamming_loss"] <= hi
    r = cli("evaluate", "--model", f"{world}/tox.py:clf", "--data", str(world / "ml.tsv"))
    assert "subset accuracy" in r.output and "identity_hate" in r.output
    (world / "two.tsv").write_text("toxic\tinsult\ttext\n1\t0\ta film .\n")
    (world / "bad.tsv").write_text("toxic\tinsult\tidentity_hate\ttext\n1\t2\t0\ta film .\n0\t1\t0\tfine .\n")
    for args, says in [((str(world / "two.tsv"),), "identity_hate"), ((str(world / "bad.tsv"),), "must hold 0 or 1"),
                       ((str(world / "ml.tsv"), "--label-columns", "toxic,threat"), "has no label 'threat'")]:
        r = cli("evaluate", "--model", f"{world}/tox.py:clf", "--data", *args)
        assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output, (args, r.output)


def test_one_column_of_label_lists_gives_what_the_0_1_columns_give(world, cli):
    """The same data as one column of label lists — JSON lines with lists, a TSV with names separated by | — gives
    the metrics the 0/1 columns give; a name the model lacks, or a row that is no list, is one line."""
    texts = ROWS + BIAS + ["a quiet evening ."]
    truth = np.random.default_rng(1).integers(0, 2, (len(texts), 3))
    names = ["toxic", "insult", "identity_hate"]
    (world / "cols.tsv").write_text("toxic\tinsult\tidentity_hate\ttext\n" +
                                    "".join(f"{a}\t{b}\t{c}\t{t}\n" for (a, b, c), t in zip(truth, texts)))
    (world / "lists.jsonl").write_text("".join(json.dumps({"text": t, "labels": [n for n, on in zip(names, row) if on]})
                                               + "\n" for row, t in zip(truth, texts)))
    (world / "lists.tsv").write_text("labels\ttext\n" + "".join(f"{'|'.join(n for n, on in zip(names, row) if on)}\t{t}\n"
                                                                for row, t in zip(truth, texts)))
    want = _json(cli("evaluate", "--model", f"{world}/tox.py:clf", "--data", str(world / "cols.tsv"), "--json"))
    for data in ("lists.jsonl", "lists.tsv"):
        got = _json(cli("evaluate", "--model", f"{world}/tox.py:clf", "--data", str(world / data), "--label-columns",
                        "labels", "--json"))
        assert {k: got[k] for k in ("per_label", "micro", "macro", "subset_accuracy", "hamming_loss")} == \
            {k: want[k] for k in ("per_label", "micro", "macro", "subset_accuracy", "hamming_loss")}, data
    (world / "odd.jsonl").write_text(json.dumps({"text": "a film .", "labels": ["toxic", "spam"]}) + "\n")
    (world / "num.jsonl").write_text(json.dumps({"text": "a film .", "labels": 3}) + "\n")
    for data, says in (("odd.jsonl", "lists 'spam', which is not a label"), ("num.jsonl", "must hold a list of label")):
        r = cli("evaluate", "--model", f"{world}/tox.py:clf", "--data", str(world / data), "--label-columns", "labels")
        assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output, r.output


def test_compare_takes_a_label_and_every_label(world, cli):
    """audit compare --label all: one row per label (model[label]), each cell's records equal to a compare --label NAME
    run's; --label NAME on a single-label model is the one line attack gives."""
    (world / "data3.tsv").write_text("toxic\tinsult\tidentity_hate\ttext\n" + "".join(f"1\t0\t0\t{r}\n" for r in ROWS))
    args = ["--methods", "so-beam", "--k", "1", "--data", str(world / "data3.tsv"), "--mlm", str(world / "mlm"), "--json",
            "--naturalness", "off"]
    model = f"{world}/tox.py:clf"
    every = _json(cli("compare", "--models", model, "--label", "all", "--output-dir", str(world / "all"), *args))
    rates = {c["model"]: c["success_rate"] for c in every["cells"]}
    # identity_hate is 0.5 on every row: a tie at the threshold, no prediction to attack (no rate, never a flip)
    assert rates == {f"{model}[toxic]": 1.0, f"{model}[insult]": 0.0, f"{model}[identity_hate]": None}
    assert {p["by"] for p in every["paired"]} == {"model"}  # the labels paired under the one method
    one = _json(cli("compare", "--models", model, "--label", "toxic", "--output-dir", str(world / "one"), *args))
    assert [c["model"] for c in one["cells"]] == [f"{model}[toxic]"]
    name = every["files"][0]
    assert name == one["files"][0] and name.endswith("tox.py_clf_toxic.so-beam.jsonl")
    untimed = lambda path: [{k: v for k, v in r.items() if k != "seconds"} for r in _records(path)[1]]  # noqa: E731
    assert untimed(world / "all" / name) == untimed(world / "one" / name)
    assert _records(world / "all" / name)[0] == _records(world / "one" / name)[0]
    r = cli("compare", "--models", "bow", "--label", "toxic", "--output-dir", str(world / "bow"), *args)
    assert r.exit_code == 2 and "is single-label" in r.output and "Traceback" not in r.output, r.output
    r = cli("compare", "--models", model, "--label", "toxic", "--label-threshold", "1", "--output-dir",
            str(world / "t"), *args)
    assert r.exit_code == 2 and "--label-threshold must be a number > 0 and < 1" in r.output, r.output


def test_certify_every_label_in_one_run_equals_each_label_alone(world, cli):
    """certify --label all: each label's file holds what --label NAME writes (the seeded draws are the same), the
    drawn texts forwarded once for the three labels; IBP is refused in one line."""
    from textaudit.robustness.request import CertifyRequest

    (world / "data3.tsv").write_text("toxic\tinsult\tidentity_hate\ttext\n" + "".join(f"1\t0\t0\t{r}\n" for r in ROWS))
    (world / "syn.json").write_text('{"film": ["movie"], "deep": ["profound"]}')
    common = dict(model=f"{world}/tox.py:clf", method="safer", data=str(world / "data3.tsv"), synonyms=world / "syn.json",
                  hops=1, samples=40, selection=10, neighbors=0)
    every = CertifyRequest(**common, target_label="all", output=world / "c.jsonl").run(progress=False).labels
    assert list(every) == ["toxic", "insult", "identity_hate"]
    alone = {}
    for name in every:
        r = CertifyRequest(**common, target_label=name, output=world / f"one.{name}.jsonl")
        alone[name] = r.run(checked=r.check(), progress=False)
        untimed = lambda path: [{k: v for k, v in x.items() if k != "seconds"} for x in _records(path)[1]]  # noqa: E731
        assert untimed(world / f"c.{name}.jsonl") == untimed(world / f"one.{name}.jsonl"), name
    # the planted film → movie flip of toxic: half the draws on each side, the smoothed classifier abstains on all
    # three; insult never moves: right (gold 0) on all three
    assert {n: (o.summary["accuracy"], o.summary["abstain"]) for n, o in every.items() if n != "identity_hate"} == {
        "toxic": (0.0, 3), "insult": (1.0, 0)}
    model = every["toxic"].classifier.model
    assert model.stats.unique_forwards == alone["toxic"].classifier.model.stats.unique_forwards > 0  # once, not 3 times
    out = _json(cli("certify", "--model", f"{world}/tox.py:clf", "--label", "all", "--method", "safer", "--data",
                    str(world / "data3.tsv"), "--synonyms", str(world / "syn.json"), "--hops", "1", "--samples", "40",
                    "--selection", "10", "--neighbors", "0", "--json", "--output", str(world / "cli.jsonl")))
    assert set(out["labels"]) == {"toxic", "insult", "identity_hate"} and out["forwards"] == model.stats.unique_forwards
    r = cli("certify", "--model", f"{world}/tox.py:clf", "--label", "all", "--method", "ibp", "--data",
            str(world / "data3.tsv"))
    assert r.exit_code == 2 and "--method safer" in r.output and "Traceback" not in r.output, r.output


def _tiny_multilabel_bert(path, bias=(0.0, 0.0, 0.0)):
    """A tiny real BERT saved at ``path`` with problem_type = "multi_label_classification" (toxic, insult, threat),
    its heads' biases ``bias``: ``(model, tokenizer)``."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    from textaudit.resources import resolve

    tok = BertTokenizerFast.from_pretrained(resolve("minilm"))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, num_labels=3, problem_type="multi_label_classification",
                     id2label={0: "toxic", 1: "insult", 2: "threat"}, label2id={"toxic": 0, "insult": 1, "threat": 2})
    model = BertForSequenceClassification(cfg).eval()
    with torch.no_grad():
        model.classifier.bias[:] = torch.tensor(bias)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return model, tok


def test_harden_trains_one_label_of_a_multi_label_model_and_keeps_the_others(tmp_path, cli):
    """audit harden --label toxic on a tiny multi-label BERT: toxic learns its gold (its held-out accuracy rises),
    insult and threat stay the original's probabilities (their targets are the original's own: they barely move while
    toxic moves), the saved model is still multi-label; the before/after audits are toxic's; --label on a zoo model,
    --label all and no --label on a multi-label model are one line each."""
    from textaudit.harden import HardenRequest, harden
    from textaudit.models import load_classifier

    src = tmp_path / "tiny"
    _tiny_multilabel_bert(src)
    bad = ["awful", "vile", "nasty", "horrid"]
    good = ["fine", "kind", "sweet", "lovely"]

    def rows(n, seed, when="today"):
        rng = np.random.default_rng(seed)
        out = []
        for i in range(n):
            y = i % 2
            out.append((y, f"the {rng.choice(['film', 'movie'])} was {rng.choice(bad if y else good)} {when} ."))
        return out

    for name, n, seed, when in (("train", 160, 0, "today"), ("dev", 16, 1, "again")):  # no dev sentence in train
        (tmp_path / f"{name}.tsv").write_text("toxic\tinsult\tthreat\ttext\n" +
                                              "".join(f"{y}\t0\t0\t{t}\n" for y, t in rows(n, seed, when)))
    s = HardenRequest(model=f"hf:{src}", method="consistency", out=tmp_path / "h", data=str(tmp_path / "train.tsv"),
                      train_sample=20, neighbors=0, epochs=15, pair="film,movie", eval_data=str(tmp_path / "dev.tsv"),
                      eval_limit=16, eval_attack="so-enum:1", mlm="minilm-mlm", lr=5e-3, target_label="toxic")
    res = harden(s, tmp_path / "h", progress=False)
    assert res["accuracy"]["after"]["rate"] > res["accuracy"]["before"]["rate"]
    assert res["accuracy"]["after"]["rate"] >= 0.9
    assert res["bias"][0]["pair"] == ["film", "movie"]
    after = load_classifier(str(tmp_path / "h" / "model"))
    before = load_classifier(f"hf:{src}")
    assert after.multilabel and after.labels == ["toxic", "insult", "threat"]
    texts = [t for _, t in rows(40, 2, "again")]
    moved = np.abs(after.predict_proba(texts) - before.predict_proba(texts)).mean(axis=0)
    assert moved[0] > 0.2 and moved[1] < moved[0] / 5 and moved[2] < moved[0] / 5, moved
    header = json.loads((tmp_path / "h" / "harden.json").read_text())["header"]["config"]
    assert header["label"] == "toxic" and header["label_threshold"] == 0.5

    base = ["harden", "--method", "consistency", "--data", str(tmp_path / "train.tsv"), "--eval-data",
            str(tmp_path / "dev.tsv")]
    for args, said in ((["--model", "cnn", "--label", "toxic"], "is single-label"),
                       (["--model", f"hf:{src}", "--label", "all"], "one label at a time"),
                       (["--model", f"hf:{src}"], "give --label NAME")):
        r = cli(*base, *args, "--out", str(tmp_path / "x"))
        assert r.exit_code == 2 and said in r.output and "Traceback" not in r.output, r.output
        assert not (tmp_path / "x").exists()


def test_every_labels_decisions_kept_give_the_metrics_back_and_a_panel_per_label(world, cli):
    """A multi-label evaluate --output keeps each example's 0/1 truth and decision per label: results.load gives the
    per-label metrics, subset accuracy and Hamming loss the command printed; the report draws one 2×2 per label."""
    from textaudit.results import load

    (world / "data3.tsv").write_text("toxic\tinsult\tidentity_hate\ttext\n1\t0\t0\ta film .\n0\t1\t0\tso gay .\n"
                                     "0\t0\t1\twhat a day .\n1\t0\t0\tthe film again .\n")
    out = _json(cli("evaluate", "--model", f"{world}/tox.py:clf", "--data", str(world / "data3.tsv"), "--output",
                    str(world / "m.jsonl"), "--plot", str(world / "fig"), "--json"))
    back = load(world / "m.jsonl").summary()
    for key in ("per_label", "micro", "macro", "subset_accuracy", "hamming_loss", "hamming_loss_ci95"):
        assert back[key] == out[key], key
    assert (world / "fig" / "confusion.png").is_file()
    r = cli("report", str(world / "m.jsonl"), "--out", str(world / "r.html"))
    assert r.exit_code == 0, r.output
    page = (world / "r.html").read_text()
    assert "subset accuracy" in page and "identity_hate" in page and "data:image/png;base64" in page


HOSTILE_LABELS = '''
def _rows(texts):
    return [[0.9 if "bad" in t else 0.1, 0.8 if "awful" in t else 0.2, 0.3] for t in texts]

def nolabels(texts):
    return _rows(texts)
nolabels.multilabel = True

def twice(texts):
    return _rows(texts)
twice.multilabel, twice.labels = True, ["toxic", "toxic", "c"]

def empty(texts):
    return _rows(texts)
empty.multilabel, empty.labels = True, ["toxic", " ", "c"]

def spaced(texts):  # "a b" and "a_b": one file part each by the old naming
    return _rows(texts)
spaced.multilabel, spaced.labels = True, ["a b", "a_b", "c"]

def single(texts):
    return [[0.3, 0.7] for t in texts]
'''


def test_one_line_for_every_multi_label_input_that_made_a_traceback_or_a_wrong_count(world, cli):
    """#82: a multi-label plug-in without ``labels`` (a TypeError / StopIteration traceback), labels named twice,
    ``--label-columns ,`` (a ValueError), ``--label-columns toxic,toxic`` (a label counted twice), ``--label-columns``
    on a single-label model (ignored) or with ``--label``, and ``--perturbed`` on a multi-label model without
    ``--label`` (silently no calibration): each one line, exit 2, before anything is computed."""
    (world / "h.py").write_text(HOSTILE_LABELS)
    (world / "ml.tsv").write_text("text\ttoxic\tinsult\tidentity_hate\nbad film\t1\t0\t0\nawful bad\t1\t1\t0\n")
    cases = {
        ("evaluate", "--model", f"{world}/h.py:nolabels"): "is multi-label (multilabel = True) but names no labels",
        ("attack", "--model", f"{world}/h.py:nolabels", "--label", "all", "--method", "genetic"): "names no labels",
        ("evaluate", "--model", f"{world}/h.py:twice"): "names 'toxic' twice among its labels",
        ("evaluate", "--model", f"{world}/h.py:empty"): "has an empty label name",
        ("evaluate", "--model", f"{world}/tox.py:clf", "--label-columns", ","): "names no column",
        ("evaluate", "--model", f"{world}/tox.py:clf", "--label-columns", "toxic,toxic"): "names 'toxic' twice",
        ("evaluate", "--model", f"{world}/h.py:single", "--label-columns", "toxic"): "is single-label: remove it",
        ("evaluate", "--model", f"{world}/tox.py:clf", "--label-columns", "toxic", "--label", "toxic"): "give one of them",
        ("evaluate", "--model", f"{world}/tox.py:clf", "--perturbed", "whitespace_perturbation"):
            "--perturbed calibrates one label of multi-label model",
    }
    for args, message in cases.items():
        r = cli(*args, "--data", str(world / "ml.tsv"))
        assert r.exit_code == 2 and "Traceback" not in r.output, (args, r.output)
        assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, (args, r.stderr)


def test_labels_whose_file_names_would_be_one_get_a_file_each(world, cli):
    """#82: labels ``a b`` and ``a_b`` were one output file under ``--label all`` (the second label's run read the
    first's as its own, after the first label ran). Each label's file is its own; ``--resume`` finds each."""
    from textaudit.models.batched import label_file_parts

    (world / "h.py").write_text(HOSTILE_LABELS)
    (world / "ab.tsv").write_text("text\ta b\ta_b\tc\nbad film\t1\t0\t0\nawful bad\t1\t1\t0\n")
    out = world / "r.jsonl"
    r = cli("attack", "--model", f"{world}/h.py:spaced", "--label", "all", "--method", "genetic", "--data",
            str(world / "ab.tsv"), "--no-ppl", "--output", str(out), "--json")
    assert r.exit_code == 0, r.output
    parts = label_file_parts(["a b", "a_b", "c"])
    assert len(set(parts.values())) == 3 and parts["c"] == "c"
    files = sorted(p.name for p in world.glob("r.*.jsonl"))
    assert files == sorted(f"r.{p}.jsonl" for p in parts.values())
    from textaudit.results import read_jsonl

    for part in parts.values():  # each file is its label's run alone
        assert len(read_jsonl(world / f"r.{part}.jsonl")) == 2
    again = cli("attack", "--model", f"{world}/h.py:spaced", "--label", "all", "--method", "genetic", "--data",
                str(world / "ab.tsv"), "--no-ppl", "--output", str(out), "--resume", "--json")
    assert again.exit_code == 0, again.output


def test_label_all_on_one_source_gives_no_interval_no_claim_one_warning_per_label_and_one_row_per_label(world, cli):
    """#84: the multi-label guide's example rested every pair on one source sentence: a zero-width "95 % CI" at k = 1
    said "CI excludes 0: yes", k = 0 printed [+nan, +nan], no warning was given, the table ran to hundreds of lines and
    the cost was said once per label. Now: no interval and no claim from one source, the few-sources warning for each
    label (stderr and --json), one row per label in a log, the cost said once."""
    (world / "one.tsv").write_text("text\nthe gay teacher was kind and the gay story moved me .\nmy gay neighbour waved .\n")
    args = ("bias", "--model", f"{world}/tox.py:clf", "--label", "all", "--pair", "gay,straight", "--pair",
            "neighbour,friend", "--data", str(world / "one.tsv"), "--k", "1", "--mlm", str(world / "mlm"))
    out = _json(cli(*args, "--json"))
    assert set(out["labels"]) == {"toxic", "insult", "identity_hate"}
    for label, summary in out["labels"].items():
        for pair in summary["pairs"]:
            for kk, e in pair["by_k"].items():
                assert e["sources"] == 1 and e["ci95"] == [None, None] and not e["significant"], (label, pair, kk)
                assert e["claim"] == "no interval (1 source)" and e["ci_method"].startswith("none: one source")
        assert summary["warnings"] == [
            f"warning: B for {p[0]}→{p[1]} on tox.py:clf[{label}] (label {label}) rests on 1 source sentence: no interval "
            "and no claim (an interval needs at least two); give more data (--data, --max-sources)"
            for p in (["gay", "straight"], ["neighbour", "friend"])]
    r = cli(*args)
    assert r.exit_code == 0, r.output
    for summary in out["labels"].values():
        assert all(w in r.stderr for w in summary["warnings"])
    table = [line for line in r.stdout.splitlines() if line.startswith("│")]
    assert [row.split("│")[1].strip() for row in table] == ["toxic", "insult", "identity_hate"], r.stdout  # not one
    assert "one row per label (every pair and k: --json, or audit report" in " ".join(r.stdout.split())  # (the title
    # wraps in the table's width)
    assert all("no interval (1 source)" in row for row in table) and " yes " not in r.stdout
    costs = [line for line in r.stderr.splitlines() if line.startswith("cost:")]
    assert sum("units to score" in c for c in costs) == 1 and any("the other 2 labels reuse" in c for c in costs), costs


def test_label_all_attack_says_its_cost_once_and_a_label_nothing_was_attacked_on_says_so(world, cli):
    """#84: --label all repeated the same cost line for every label and printed 'None of 0' for a label whose inputs
    were all skipped; its time estimate said '0s to 0s'."""
    (world / "data3.tsv").write_text("toxic\tinsult\tidentity_hate\ttext\n" + "".join(f"1\t0\t0\t{r}\n" for r in ROWS))
    r = cli("attack", "--model", f"{world}/tox.py:clf", "--label", "all", "--method", "so-beam", "--k", "1", "--beam", "2",
            "--data", str(world / "data3.tsv"), "--mlm", str(world / "mlm"), "--pairs-file", str(world / "pairs.txt"),
            "--naturalness", "off", "--no-ppl")
    assert r.exit_code == 0, r.output
    costs = [line for line in r.stderr.splitlines() if line.startswith("cost: ")]
    assert len(costs) == 2 and costs[0].startswith("cost: up to ") and costs[1] == "cost: the same for the other 2 labels"
    assert " 0s to 0s " not in r.stderr
    rows = {line.split("│")[1].strip(): line for line in r.stdout.splitlines() if line.startswith("│")}
    assert "None" not in r.stdout and set(rows) == {"toxic", "insult", "identity_hate"}, r.stdout
    skipped_all = [name for name, line in rows.items() if "– (none attacked)" in line]
    assert skipped_all == ["identity_hate"], r.stdout  # its ties on "film" are skipped, never attacked
