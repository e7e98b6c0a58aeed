"""#63 (batch invariance of plug-ins): a model whose score of a text depends on the other texts of its batch would
make textaudit's records depend on how it batches them, silently. A plug-in or ``hf:`` model is probed on first use
(a few texts asked again alone and in another order) and a dependence is one warning with the measured difference
and how to run it one text at a time; a batch-invariant model (a tiny real HF model, a plain plug-in) says nothing."""

from __future__ import annotations

import json

import numpy as np

#: the packaged model's bug: an LSTM fed batch-first ids without batch_first, so the batch is read as time and a
#: text's state carries the texts before it in its batch
LSTM_PLUGIN = '''
import torch
torch.manual_seed(0)
EMB, LSTM, HEAD = torch.nn.Embedding(50, 8), torch.nn.LSTM(8, 8), torch.nn.Linear(8, 2)
def clf(texts):
    rows = [[sum(map(ord, w)) % 49 + 1 for w in t.split()] for t in texts]
    width = max(map(len, rows))
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])  # (batch, time)
    with torch.no_grad():
        out, _ = LSTM(EMB(ids))  # read as (time, batch): the batch is taken for time
        return torch.softmax(HEAD(out[:, -1]), -1).tolist()
'''
PLAIN = '''
import math
def clf(texts):
    return [[1 - (p := 1 / (1 + math.exp(-len(t) / 10 + 2))), p] for t in texts]
'''
TEXTS = ["a deep and meaningful film .", "the plot is thin .", "an unflinching look at the mess we make .",
         "it is not the worst , is it ?", "a warm , funny film ."]


def _predict(cli, model: str):
    r = cli("predict", "--model", model, *TEXTS, "--json")
    assert r.exit_code == 0, r.output
    return r, np.array([row["probs"] for row in json.loads(r.stdout.strip().splitlines()[-1])["predictions"]])


def _warnings(r) -> list[str]:
    return [x for x in r.stderr.splitlines() if "scores a text differently with other texts in its batch" in x]


def test_an_lstm_fed_batch_first_data_is_found_and_said_once_with_its_measured_difference(tmp_path, cli):
    (tmp_path / "lstm.py").write_text(LSTM_PLUGIN)
    r, batched = _predict(cli, f"{tmp_path}/lstm.py:clf")
    (warning,) = _warnings(r)
    import importlib.util

    spec = importlib.util.spec_from_file_location("lstm_probe", tmp_path / "lstm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    alone = np.array([mod.clf([t])[0] for t in TEXTS])
    assert np.abs(batched - alone).max() > 1e-3  # the bug is real: a text's score depends on its batch
    said = float(warning.split("by up to ")[1].split(" ")[0])
    assert 1e-3 < said <= np.abs(batched - alone).max() + 1e-6 and "batch_size = 1" in warning
    (tmp_path / "lstm1.py").write_text(LSTM_PLUGIN + "\nclf.batch_size = 1\n")
    r, one = _predict(cli, f"{tmp_path}/lstm1.py:clf")  # the hint followed: each text scored alone, nothing said
    assert _warnings(r) == [] and np.allclose(one, alone, atol=1e-6)


def test_a_batch_invariant_plugin_and_a_tiny_hf_model_say_nothing(tmp_path, cli):
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    from textaudit.models import load_classifier
    from textaudit.resources import resolve

    (tmp_path / "plain.py").write_text(PLAIN)
    r, _ = _predict(cli, f"{tmp_path}/plain.py:clf")
    assert _warnings(r) == []
    tok = BertTokenizerFast.from_pretrained(resolve("minilm"))
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=64, num_labels=2)).eval()
    model.save_pretrained(tmp_path / "hf")
    tok.save_pretrained(tmp_path / "hf")
    clf = load_classifier(f"hf:{tmp_path / 'hf'}")
    clf.predict_proba(TEXTS)
    assert clf.batch_dependence is not None and clf.batch_dependence < 1e-4  # measured, and float noise only
    assert clf.stats.unique_forwards == len(TEXTS)  # the probe's forwards count in no statistic
    r, _ = _predict(cli, f"hf:{tmp_path / 'hf'}")
    assert _warnings(r) == []


def test_the_probe_runs_once_per_model(tmp_path):
    from textaudit.models import load_classifier

    (tmp_path / "lstm.py").write_text(LSTM_PLUGIN)
    clf = load_classifier(f"{tmp_path}/lstm.py:clf")
    clf.predict_proba(TEXTS[:1])  # one text: nothing to compare yet
    assert clf.batch_dependence is None and clf.probe_batches
    clf.predict_proba(TEXTS)
    first = clf.batch_dependence
    assert first > 1e-3 and not clf.probe_batches
    clf.clear_cache()
    clf.predict_proba(TEXTS[::-1])
    assert clf.batch_dependence == first  # probed once
