"""Sentences as token ids (textaudit.token_ids): for every tokenizer family we support — the zoo's
vocabulary, WordPiece, SentencePiece, byte-level BPE (tiny ones built here) — a sentence's ids
spliced from per-word caches equal the tokenizer's ids of its text, for real SST-2 sentences,
their neighbours (case restored) and punctuation; the masked LM's masked copies likewise; and the
classifier and the masked LM give the same answers on the id path as on the text path."""

from __future__ import annotations

import time

import numpy as np
import pytest

from textaudit.data import load_dataset
from textaudit.models.zoo.vocab import Vocab, WordTokenizer
from textaudit.sentence import Sentence, restore_case
from textaudit.text import word_tokenize
from textaudit.token_ids import PieceIds, WordIds, pack, pad, piece_ids

TRICKY = [
    "A deep and meaningful film.", "It's not THE worst, is it?", "Don't miss Café Müller - it's well-made!",
    "\"Quoted,\" she said... (twice)", "well -- maybe ; maybe not !!", "The U.S. film cost $5 , or £5.",
    "  leading and trailing spaces  ", "tabs\tand\u00a0odd spaces", "l'homme qu'il a vu n'est pas là",
    "e-mail me @ home #1 50% off", "“Curly” quotes and ‘single’ ones’", "isn't it wasn't couldn't",
]


@pytest.fixture(scope="module")
def sentences() -> list[Sentence]:
    texts = list(load_dataset("sst2:train", limit=1500)["text"]) + TRICKY
    return [Sentence.parse(t) for t in texts]


def neighbours(s: Sentence, words=("Good", "terrible", "FILM", "café", "doesn't", "n't")) -> list[Sentence]:
    """Case-restored one-word replacements at every alphabetic position (what a masked LM proposes),
    and some of their own neighbours: spliced from a parent whose ids were spliced too, with words of
    more or fewer ids than the one they replace."""
    out = [s.replace(i, restore_case(w, s.tokens[i])) for i in range(len(s)) if s.tokens[i].isalpha()
           for w in words[: 1 + i % len(words)]]
    return out + [y.replace(j, w) for y in out[:3] for j in range(len(y)) if y.tokens[j].isalpha() for w in words[4:5]]


# -- the zoo's vocabulary ------------------------------------------------------------------------------
def test_word_ids_splice_equals_retokenising(sentences):
    words = sorted({w for s in sentences for t in s.tokens for w in word_tokenize(t)})
    vocab = Vocab(words[::2])  # every other word unknown: <unk> ids must splice too
    tok, enc = WordTokenizer(vocab, max_len=24), WordIds(vocab, max_len=24)
    checked = 0
    for s in sentences:
        for x in [s, *neighbours(s)]:
            assert enc.ids(x) == tok.ids(x.text()), x.text()
            checked += 1
    assert checked > 5000
    assert enc.ids(Sentence.parse("!")) == tok.ids("!")  # one token
    assert len(enc.ids(sentences[0].replace(0, " ".join(["film"] * 40)))) == 24  # truncation


# -- HuggingFace tokenizers -------------------------------------------------------------------------
def _wordpiece(tmp_path_factory, sentences):
    """A tiny uncased WordPiece vocabulary: the 400 commonest SST-2 words, letters and ## letters."""
    from collections import Counter

    from transformers import BertTokenizerFast

    counts = Counter(t.lower() for s in sentences for t in s.tokens)
    letters = sorted({c for s in sentences for t in s.tokens for c in t.lower()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [w for w, _ in counts.most_common(400)]
    vocab += letters + ["##" + c for c in letters]
    d = tmp_path_factory.mktemp("wordpiece")
    (d / "vocab.txt").write_text("\n".join(dict.fromkeys(vocab)) + "\n", encoding="utf-8")
    return BertTokenizerFast(str(d / "vocab.txt"), do_lower_case=True)


def _sentencepiece(sentences):
    from collections import Counter

    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import XLMRobertaTokenizerFast

    counts = Counter(t for s in sentences for t in s.tokens)
    chars = sorted({c for s in sentences for t in s.tokens for c in t})
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    pieces = [(p, 0.0) for p in specials] + [("\u2581" + w, -2.0) for w, _ in counts.most_common(300)]
    pieces += [("\u2581", -3.0)] + [(c, -5.0) for c in chars]
    tok = Tokenizer(models.Unigram(pieces, unk_id=3, byte_fallback=False))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    return XLMRobertaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", mask_token="<mask>", cls_token="<s>", sep_token="</s>")


def _bytelevel(sentences):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import RobertaTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([s.text() for s in sentences], trainers.BpeTrainer(
        vocab_size=600, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")))
    return RobertaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                pad_token="<pad>", mask_token="<mask>", cls_token="<s>", sep_token="</s>")


@pytest.fixture(scope="module", params=["wordpiece", "sentencepiece", "bytelevel"])
def hf_tokenizer(request, tmp_path_factory, sentences):
    build = {"wordpiece": lambda: _wordpiece(tmp_path_factory, sentences),
             "sentencepiece": lambda: _sentencepiece(sentences), "bytelevel": lambda: _bytelevel(sentences)}
    return request.param, build[request.param]()


def test_two_encoders_in_turn_both_splice_a_child_from_its_parent():
    """Two word models compared on the same sentences (B_{p,k} of a model and its gender-swapped copy) encode
    each sentence in turn: both keep their ids on it, so a child is spliced from its parent for either — one word
    looked up, not the whole sentence — and equals retokenising."""
    words = "the film is a quiet and moving study of grief".split()
    a, b = WordIds(Vocab(words)), WordIds(Vocab(words[::-1] + ["loud"]))
    parent = Sentence.parse("the film is a quiet and moving study of grief .")
    for enc in (a, b):
        enc.ids(parent)
    child = parent.replace(4, "loud")
    looked: list[int] = []
    for enc in (a, b):
        enc._word_at = lambda s, j, enc=enc: looked.append(j) or WordIds._word_at(enc, s, j)
        assert enc.ids(child) == WordIds(enc.vocab).ids(Sentence.parse(child.text()))
    assert looked == [4, 4]  # one word each, spliced
    assert a.ids(child) == WordIds(a.vocab).ids(Sentence.parse(child.text()))  # both memos kept


def test_a_child_of_a_sentence_never_encoded_splices_through_it():
    """The sentences scored are often children of ones that are not (a counterfactual swaps the pair word of a
    neighbour that is never scored itself): the parent is spliced from its own parent first, then the child from
    it — two words looked up, not two sentences."""
    words = "the film is a quiet and moving study of grief".split()
    enc = WordIds(Vocab(words + ["loud", "fast"]))
    root = Sentence.parse("the film is a quiet and moving study of grief .")
    enc.ids(root)
    stem = root.replace(4, "loud")  # never encoded itself
    leaf = stem.replace(6, "fast")
    looked: list[int] = []
    enc._word_at = lambda s, j: looked.append(j) or WordIds._word_at(enc, s, j)
    assert enc.ids(leaf) == WordIds(enc.vocab).ids(Sentence.parse(leaf.text()))
    assert looked == [4, 6] and enc.ids(stem) == WordIds(enc.vocab).ids(Sentence.parse(stem.text()))
    assert looked == [4, 6]  # the stem's ids were kept on the way


def test_piece_ids_splice_equals_retokenising(hf_tokenizer, sentences):
    scheme, tok = hf_tokenizer
    enc = PieceIds(tok, max_length=40)
    assert enc.scheme == scheme and enc.masked_ok
    spliced = unsafe = 0
    for s in sentences:
        for x in [s, *neighbours(s)]:
            if not enc.splice_safe(x):
                unsafe += 1
                continue
            assert enc.ids(x) == tok(x.text(), truncation=True, max_length=40)["input_ids"], (scheme, x.text())
            spliced += 1
    # almost every sentence splices: only odd whitespace and glued punctuation a BPE merges fall back
    assert spliced > 0.97 * (spliced + unsafe), (spliced, unsafe)
    assert piece_ids(tok, 40) is not None  # the probe sentences pass: a model with it takes ids


def test_masked_copies_equal_the_joined_text(hf_tokenizer, sentences):
    scheme, tok = hf_tokenizer
    enc = PieceIds(tok, max_length=256)
    for s in sentences[:300] + sentences[-len(TRICKY):]:
        words = list(s.tokens)
        for i in range(len(words)):
            joined = " ".join(tok.mask_token if j == i else w for j, w in enumerate(words))
            assert enc.masked(words, i) == tok(joined, truncation=True, max_length=256)["input_ids"], (scheme, joined)


def test_tokenizers_that_cannot_splice_keep_texts(hf_tokenizer):
    _, tok = hf_tokenizer
    assert piece_ids(tok) is not None
    assert piece_ids(type("Slow", (), {"is_fast": False, "pad_token_id": 0})()) is None  # a Python tokenizer
    enc = PieceIds(tok)
    odd = Sentence.parse("two  spaces and a tab\there")
    assert enc.splice_safe(odd) == (enc.scheme == "wordpiece")  # whitespace is a token for BPE/SentencePiece


# -- packing -------------------------------------------------------------------------------------------
def test_pack_keeps_every_row_once_within_the_budget():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 60, 500).tolist() + [300]
    batches = pack(lengths, 1000)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    for b in batches:
        width = max(lengths[i] for i in b)
        assert len(b) * width <= 1000 or len(b) == 1
    assert [lengths[i] for i in flat] == sorted(lengths)  # bucketed: shortest first
    assert all(len(b) <= 7 for b in pack(lengths, 10**9, max_rows=7))
    ids, mask = pad([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]


# -- the models on the id path ---------------------------------------------------------------------
def test_hf_classifier_answers_the_same_on_ids(tmp_path_factory, sentences):
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from textaudit.models.hf import load_hf_classifier

    tok = _wordpiece(tmp_path_factory, sentences)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, num_labels=2)
    d = tmp_path_factory.mktemp("hfclf")
    BertForSequenceClassification(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    clf = load_hf_classifier(str(d), device="cpu")
    assert isinstance(clf.forward.ids, PieceIds)
    xs = [x for s in sentences[:200] for x in (s, *neighbours(s)[:2])]
    by_ids = clf.predict_proba(xs)
    clf.clear_cache()
    by_text = clf.predict_proba([x.text() for x in xs])
    np.testing.assert_allclose(by_ids, by_text, atol=1e-5)


def test_zoo_classifier_answers_the_same_on_ids():
    from textaudit.models.zoo import TrainConfig, fit_classifier

    texts = [t for t in load_dataset("sst2:train", limit=600)["text"]][:300]
    labels = [int("good" in t or "best" in t) for t in texts]
    clf = fit_classifier("cnn", texts, labels, config=TrainConfig(arch="cnn", epochs=1, batch_size=32, holdout=0.0),
                         progress=False, device="cpu")
    assert isinstance(clf.forward.ids, WordIds)
    xs = [x for t in texts[:100] for x in (Sentence.parse(t), *neighbours(Sentence.parse(t))[:3])]
    by_ids = clf.predict_proba(xs)
    clf.clear_cache()
    clf.use_ids = False
    by_text = clf.predict_proba(xs)
    np.testing.assert_allclose(by_ids, by_text, atol=1e-6)
    assert clf.stats.device_seconds > 0 and clf.stats.device_seconds <= clf.stats.forward_seconds


def test_a_plug_in_still_receives_strings():
    from textaudit.models import as_classifier

    seen = []

    def f(texts):
        seen.extend(texts)
        return np.tile([0.3, 0.7], (len(texts), 1))

    clf = as_classifier(f)
    clf.predict_proba([Sentence.parse("a fine film ."), "a dull film"])
    assert seen and all(isinstance(t, str) for t in seen) and "a fine film ." in seen


def test_masked_lm_answers_the_same_on_ids(tiny_mlm, sentences):
    queries = [(list(s.tokens), i) for s in sentences[:80] for i in range(len(s)) if s.tokens[i].isalpha()]
    tiny_mlm.clear_cache()
    assert tiny_mlm.pieces is not None
    by_ids = tiny_mlm.candidates(queries, top=10)
    tiny_mlm.clear_cache()
    tiny_mlm.use_ids = False
    try:
        by_text = tiny_mlm.candidates(queries, top=10)
    finally:
        tiny_mlm.use_ids = True
        tiny_mlm.clear_cache()
    for a, b in zip(by_ids, by_text):
        assert [w for w, _ in a] == [w for w, _ in b]
        np.testing.assert_allclose([v for _, v in a], [v for _, v in b], atol=1e-4)


# -- where an audit's time goes --------------------------------------------------------------------
def test_attack_summary_says_where_the_time_went_and_batch_tokens_packs(tiny_mlm):
    """run_attack's summary splits the wall into device_seconds (inside the bare forwards of the
    classifier and the masked LM) and host_seconds, with the mean texts per classifier forward and
    masked sentences per masked-LM forward; a smaller --batch-tokens makes smaller forwards and the
    same records."""
    from textaudit.attacks import PatchWords, SOBeam, run_attack
    from textaudit.models.options import ModelOptions, use_model_options
    from textaudit.models.zoo import TrainConfig, fit

    texts = [t for t in load_dataset("sst2:train", limit=600)["text"] if len(t.split()) >= 5][:200]
    labels = [int("good" in t or "best" in t) for t in texts]
    res = fit("cnn", texts, labels, config=TrainConfig(arch="cnn", epochs=1, batch_size=32, holdout=0.0),
              progress=False, device="cpu")
    from textaudit.models.torch_backend import torch_classifier
    from textaudit.models.zoo.checkpoint import id_encoder

    summaries, records = [], []
    for budget in (4096, 256):
        with use_model_options(ModelOptions(batch_tokens=budget)):
            clf = torch_classifier(res.module, res.tokenizer, device="cpu", ids=id_encoder("cnn", res.tokenizer, 64))
        assert clf.batch_tokens == budget
        atk = SOBeam(clf, 2, beam=3, mlm=tiny_mlm, kappa=5, patch_words=PatchWords(clf, [("film", "movie")]),
                     naturalness=False)  # the paper's search: every example searched (a tiny random masked LM)
        tiny_mlm.clear_cache()
        t0 = time.perf_counter()
        summary, recs = run_attack(atk, ["a deep and meaningful film .", "the film is a moving story ."], None,
                                   progress=False)
        wall = time.perf_counter() - t0
        summaries.append(summary)
        records.append([{k: v for k, v in r.items() if k not in ("seconds", "queries", "mlm_queries")} for r in recs])
        assert summary["device_seconds"] > 0 and summary["host_seconds"] >= 0
        assert summary["device_seconds"] + summary["host_seconds"] <= wall + 0.01
        assert summary["texts_per_forward"] >= 1 and summary["masked_per_forward"] >= 1
    assert records[0] == records[1]
    assert summaries[1]["texts_per_forward"] < summaries[0]["texts_per_forward"]  # 256 tokens: smaller forwards


def test_a_plugins_time_is_the_models_not_the_hosts(tiny_mlm):
    """A plug-in function has no device clock: all of its time is the classifier's (here at least the
    0.02 s it sleeps per call), counted in device_seconds beside the masked LM's, not in host_seconds
    (which the guide calls the time around the forwards)."""
    from textaudit.attacks import PatchWords, SOEnum, run_attack
    from textaudit.models import as_classifier

    calls = {"n": 0}

    def slow(texts):
        calls["n"] += 1
        time.sleep(0.02)
        return np.array([[0.8, 0.2] if "dull" in t.split() else [0.3, 0.7] for t in texts])

    clf = as_classifier(slow, name="slow")
    atk = SOEnum(clf, 1, mlm=tiny_mlm, kappa=3, patch_words=PatchWords(clf, [("film", "movie")]))
    tiny_mlm.clear_cache()
    summary, _ = run_attack(atk, ["a deep and meaningful film .", "the film is a moving story ."], None, progress=False)
    assert calls["n"] >= 2
    assert summary["classifier_seconds"] >= 0.02 * calls["n"] - 1e-3
    assert summary["device_seconds"] == pytest.approx(summary["classifier_seconds"] + summary["mlm_seconds"], abs=2e-3)
    assert summary["mlm_seconds"] > 0
    parts = summary["device_seconds"] + summary["ppl_seconds"] + summary["host_seconds"]
    assert parts == pytest.approx(summary["wall_seconds"], abs=5e-3)
