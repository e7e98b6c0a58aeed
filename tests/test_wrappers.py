from __future__ import annotations

import numpy as np
import pytest

from textaudit.errors import TextAuditError
from textaudit.models import BatchedClassifier, Classifier, as_classifier, load_classifier


class Recorder:
    """A real 3-class scorer that records the batches it is given (counts of 'good'/'bad'/'meh')."""

    def __init__(self):
        self.batches: list[list[str]] = []

    def __call__(self, texts):
        self.batches.append(list(texts))
        out = []
        for t in texts:
            w = t.split()
            s = np.array([w.count("bad"), w.count("good"), w.count("meh")], dtype=float) + 0.1
            out.append(s / s.sum())
        return np.array(out)


def test_batching_dedup_cache_and_counters():
    rec = Recorder()
    clf = BatchedClassifier(rec, batch_size=4, name="rec")
    texts = [f"good {'x ' * i}" for i in range(10)] + ["good x "] * 5  # 10 unique + 5 repeats
    probs = clf.predict_proba(texts)
    assert probs.shape == (15, 3) and np.allclose(probs.sum(1), 1)
    assert [len(b) for b in rec.batches] == [4, 4, 2]  # only unique texts, in batches of 4
    assert clf.stats.unique_forwards == 10 and clf.stats.cache_hits == 5 and clf.stats.texts == 15
    # second call: everything from the cache, no forward
    again = clf.predict_proba(texts[:3])
    assert len(rec.batches) == 3 and clf.stats.cache_hits == 8
    np.testing.assert_allclose(again, probs[:3])
    assert isinstance(clf, Classifier) and clf.num_classes == 3


def test_results_keep_input_order_after_length_sorting():
    rec = Recorder()
    clf = BatchedClassifier(rec, batch_size=2)
    texts = ["good good good bad", "bad", "meh meh good", "good"]
    expected = rec(texts)
    rec.batches.clear()
    np.testing.assert_allclose(clf.predict_proba(texts), expected, rtol=1e-6)
    assert rec.batches[0] == ["bad", "good"]  # shortest first


def test_lru_eviction():
    rec = Recorder()
    clf = BatchedClassifier(rec, cache_size=2)
    clf.predict_proba(["a"]); clf.predict_proba(["b"]); clf.predict_proba(["c"])
    clf.predict_proba(["a"])  # evicted, forwarded again
    assert clf.stats.unique_forwards == 4
    clf.predict_proba(["c"])
    assert clf.stats.cache_hits == 1


def test_the_cache_can_be_bounded_in_characters_too():
    rec = Recorder()
    clf = BatchedClassifier(rec)
    clf.cache_chars = 25  # what audit serve sets (in millions of characters)
    long = "good " * 4  # 20 characters
    clf.predict_proba([long, "bad"])  # 23 characters: both kept
    clf.predict_proba(["meh meh"])  # 30 > 25: the oldest (the long one) goes
    assert list(clf._cache) == ["bad", "meh meh"] and clf._cache_chars == 10
    clf.predict_proba([long])
    assert clf.stats.unique_forwards == 4  # forwarded again
    clf.predict_proba_fresh(["bad"])
    clf.clear_cache()
    assert clf._cache_chars == 0 and not clf._cache


def test_logits_and_binary_outputs():
    clf = BatchedClassifier(lambda t: np.array([[0.0, np.log(3.0)]] * len(t)), output="logits")
    np.testing.assert_allclose(clf.predict_proba(["x"]), [[0.25, 0.75]], rtol=1e-6)
    binary = as_classifier(lambda t: np.full(len(t), 0.9))
    np.testing.assert_allclose(binary.predict_proba(["x", "y"]), [[0.1, 0.9], [0.1, 0.9]], rtol=1e-6)
    assert binary.num_classes == 2


@pytest.mark.parametrize("fn, match", [
    (lambda t: np.ones((len(t) + 1, 2)) / 2, "returned shape"),
    (lambda t: np.full((len(t), 2), np.nan), "NaN"),
    (lambda t: np.full((len(t), 2), 0.7), "summing to 1.4.*output='logits'"),
    (lambda t: np.full((len(t), 2), 3.0), "outside \\[0, 1\\]"),
    (lambda t: "nonsense", "not an array|returned shape"),
    (lambda t: np.ones((len(t), 1)), "1 class column"),
])
def test_bad_callable_outputs_are_one_line_errors(fn, match):
    with pytest.raises(TextAuditError, match=match) as e:
        as_classifier(fn).predict_proba(["a", "b"])
    assert "\n" not in str(e.value)


def test_declared_classes_must_match():
    clf = BatchedClassifier(lambda t: np.full((len(t), 2), 0.5), num_classes=3)
    with pytest.raises(TextAuditError, match="declared with 3"):
        clf.predict_proba(["a"])


def test_sklearn_style_object_and_bad_objects():
    class Sk:
        num_classes = 2

        def predict_proba(self, texts):
            return np.array([[0.2, 0.8] if "good" in t else [0.8, 0.2] for t in texts])

    clf = as_classifier(Sk())
    assert clf.predict(["good", "bad"]).tolist() == [1, 0]
    with pytest.raises(TextAuditError, match="cannot use a int"):
        as_classifier(3)
    with pytest.raises(TextAuditError, match="takes strings"):
        clf.predict_proba([1, 2])


PLUGIN = '''
import numpy as np

def sentiment(texts):
    return np.array([[0.1, 0.9] if "good" in t else [0.9, 0.1] for t in texts])

def scores(texts):
    return np.array([[0.0, 2.0] for t in texts])
scores.output = "logits"

class ThreeWay:
    name = "three-way"
    num_classes = 3
    def predict_proba(self, texts):
        return np.tile([0.2, 0.3, 0.5], (len(texts), 1))

NOT_CALLABLE = 42
'''


def test_file_plugin(tmp_path):
    f = tmp_path / "my_model.py"
    f.write_text(PLUGIN)
    clf = load_classifier(f"{f}:sentiment")
    assert clf.predict(["a good film", "a bad film"]).tolist() == [1, 0]
    assert clf.name == "my_model.py:sentiment"
    logit = load_classifier(f"{f}:scores")
    assert logit.predict_proba(["x"])[0, 1] == pytest.approx(1 / (1 + np.exp(-2)), rel=1e-5)
    three = load_classifier(f"{f}:ThreeWay")
    assert three.name == "three-way" and three.predict_proba(["x"]).shape == (1, 3)


def test_bad_plugins(tmp_path):
    f = tmp_path / "my_model.py"
    f.write_text(PLUGIN)
    with pytest.raises(TextAuditError, match="does not exist"):
        load_classifier(f"{tmp_path}/nope.py:f")
    with pytest.raises(TextAuditError, match="has no 'missing' \\(it defines: .*sentiment"):
        load_classifier(f"{f}:missing")
    with pytest.raises(TextAuditError, match="is a int"):
        load_classifier(f"{f}:NOT_CALLABLE")
    bad = tmp_path / "broken.py"
    bad.write_text("def f(texts:\n    return 1\n")
    with pytest.raises(TextAuditError, match="syntax error at line 1"):
        load_classifier(f"{bad}:f")


def test_unknown_model_name():
    with pytest.raises(TextAuditError, match="unknown model 'gpt-17'.*hf:<dir-or-id>"):
        load_classifier("gpt-17")
    with pytest.raises(TextAuditError, match="empty model name"):
        load_classifier("")


class TinyBag:
    """A torch module over a toy tokenizer; records the padded width of every batch."""

    def __new__(cls):
        import torch

        class _M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.emb = torch.nn.EmbeddingBag(50, 4, mode="mean", padding_idx=0)
                self.out = torch.nn.Linear(4, 3)
                self.widths: list[int] = []

            def forward(self, input_ids):
                self.widths.append(input_ids.shape[1])
                return self.out(self.emb(input_ids))

        return _M()


def _toy_tokenizer(texts):
    import torch

    ids = [[1 + (hash(w) % 49) for w in t.split()] for t in texts]
    width = max(len(x) for x in ids)
    return {"input_ids": torch.tensor([x + [0] * (width - len(x)) for x in ids])}


def test_torch_module_wrapper_pads_to_longest_and_matches_bare_forward():
    import torch

    from textaudit.models import torch_classifier

    module = TinyBag()
    clf = torch_classifier(module, _toy_tokenizer, name="tiny", batch_size=3, device="cpu")
    texts = ["a b", "a b c d e", "x", "y y y", "the end of it all now"]
    probs = clf.predict_proba(texts)
    # sorted by length: batches of 3 then 2, each padded to its own longest text (never 512)
    assert module.widths == [3, 6]
    with torch.no_grad():
        bare = torch.softmax(module(**_toy_tokenizer(texts)), -1).numpy()
    np.testing.assert_allclose(probs, bare, rtol=1e-5, atol=1e-6)
    assert clf.num_classes == 3


def test_hf_classifier_from_local_dir(tmp_path):
    """The real HuggingFace path on a tiny randomly initialised model and the shipped MiniLM vocab."""
    import torch
    from transformers import BertTokenizerFast, DistilBertConfig, DistilBertForSequenceClassification

    from textaudit.resources import resolve

    tok = BertTokenizerFast.from_pretrained(resolve("minilm"))
    torch.manual_seed(0)
    cfg = DistilBertConfig(vocab_size=tok.vocab_size, dim=32, hidden_dim=64, n_layers=1, n_heads=2, num_labels=3,
                           id2label={0: "neg", 1: "neu", 2: "pos"}, label2id={"neg": 0, "neu": 1, "pos": 2})
    model = DistilBertForSequenceClassification(cfg).eval()
    model.save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    clf = load_classifier(f"hf:{tmp_path / 'tiny'}")
    assert clf.labels == ["neg", "neu", "pos"] and clf.num_classes == 3
    texts = ["a deep and meaningful film .", "bad"]
    with torch.no_grad():
        enc = tok(texts, padding=True, return_tensors="pt", return_token_type_ids=False)
        ref = torch.softmax(model(**enc).logits, -1).numpy()
    np.testing.assert_allclose(clf.predict_proba(texts), ref, rtol=1e-4, atol=1e-5)
    # a checkpoint directory is also accepted without the prefix
    assert load_classifier(str(tmp_path / "tiny")).num_classes == 3


def test_hf_errors(tmp_path):
    with pytest.raises(TextAuditError, match="not a HuggingFace model directory"):
        load_classifier(f"hf:{tmp_path}")
    with pytest.raises(TextAuditError, match="cannot load HuggingFace classifier 'someone/not-here' as a hub id \\(offline here\\)"):
        load_classifier("hf:someone/not-here")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "config.json").write_text("{ this is not json")
    with pytest.raises(TextAuditError, match="as a directory: .*not a valid JSON"):
        load_classifier(f"hf:{corrupt}")
