"""llm: models: a causal LM as a zero-/few-shot classifier through a prompt file.

A tiny Llama (random weights, word-level vocabulary) built in the test checks the arithmetic against
direct, unpadded forwards; the shipped SmolLM2-135M checks that the built-in prompt classifies real
SST-2 *train* sentences well above chance, through the CLI.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from textaudit.errors import TextAuditError
from textaudit.models import load_classifier
from textaudit.models.options import ModelOptions, use_model_options
from textaudit.models.prompt import Prompt, default_prompt, load_prompt

WORDS = ("review sentiment negative positive bad good terrible great a the film movie was is not fun dull very and "
         "he she said it premise hypothesis yes no plot acting story , . :").split()
TEXTS = ["a good film .", "the plot was dull and not fun , very dull .", "great", "she said the movie is bad ."]


def tiny_llama(root: Path, words=WORDS, spread: float = 20.0, stops: bool = True) -> Path:
    """Save a tiny random Llama and a word-level tokenizer (with <|endoftext|>) of ``words`` under
    ``root``; its output logits are ``spread`` × the init's; ``stops=False``: generation never stops
    at <|endoftext|>."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<pad>", "<|endoftext|>", "<unk>", *words])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace()])
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<|endoftext|>", unk_token="<unk>")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, pad_token_id=0,
                      tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # a larger spread of logits than the init's, so classes differ clearly
        model.lm_head.weight.mul_(spread)
    if not stops:
        model.generation_config.eos_token_id = None
    d = root / "tiny-llama"
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("llm"))


def write_prompt(path: Path, body: str) -> Path:
    path.write_text(body)
    return path


PROMPT = 'template = "review : {text} sentiment :"\n[labels]\nnegative = ["negative", "bad"]\npositive = ["positive", "good"]\n'


def reference(model_dir: Path, prompt: Prompt, texts) -> np.ndarray:
    """P(c|x) computed the slow way: each text alone, no padding, full softmax, chain rule for
    multi-token verbalisers, summed per class and normalised over classes."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    out = []
    for t in texts:
        ctx = tok("<|endoftext|>" + prompt.render(t), add_special_tokens=False)["input_ids"]
        per_class = []
        for words in prompt.verbalizers:
            total = 0.0
            for w in words:
                v = tok(prompt.lead + w, add_special_tokens=False)["input_ids"]
                with torch.no_grad():
                    logp = torch.log_softmax(model(torch.tensor([ctx + v])).logits[0], -1)
                total += float(np.exp(sum(float(logp[len(ctx) - 1 + i, v[i]]) for i in range(len(v)))))
            per_class.append(total)
        out.append(np.array(per_class) / sum(per_class))
    return np.stack(out)


def test_class_probabilities_are_the_verbalisers_next_token_probabilities(llama_dir, tmp_path):
    prompt_file = write_prompt(tmp_path / "p.toml", PROMPT)
    clf = load_classifier(f"llm:{llama_dir}", options=ModelOptions(prompt_file=prompt_file))
    assert clf.labels == ["negative", "positive"] and clf.num_classes == 2
    assert clf.forward.single  # every verbaliser is one token: one forward of the prompts
    probs = clf.predict_proba(TEXTS)  # one left-padded batch of different lengths
    np.testing.assert_allclose(probs, reference(llama_dir, load_prompt(prompt_file), TEXTS), atol=2e-5)
    assert np.abs(probs[:, 0] - 0.5).max() > 0.05  # the classes differ: the test can fail
    # a batch is the same as each text alone (left padding and position ids are right)
    alone = np.stack([load_classifier(f"llm:{llama_dir}", options=ModelOptions(prompt_file=prompt_file))
                      .predict_proba([t])[0] for t in TEXTS])
    np.testing.assert_allclose(probs, alone, atol=2e-5)


def test_multi_token_verbalisers_and_few_shot_examples(llama_dir, tmp_path):
    body = ('template = "review : {text} sentiment :"\nseparator = " . "\n[labels]\nnegative = ["very bad", "dull"]\n'
            'positive = ["good", "very good fun"]\n[[examples]]\ntext = "a dull movie"\nlabel = "negative"\n'
            '[[examples]]\ntext = "great acting"\nlabel = "positive"\n')
    prompt_file = write_prompt(tmp_path / "few.toml", body)
    prompt = load_prompt(prompt_file)
    assert prompt.render("a film") == ("review : a dull movie sentiment : very bad . review : great acting sentiment : good"
                                       " . review : a film sentiment :")
    clf = load_classifier(f"llm:{llama_dir}", options=ModelOptions(prompt_file=prompt_file))
    assert not clf.forward.single
    np.testing.assert_allclose(clf.predict_proba(TEXTS), reference(llama_dir, prompt, TEXTS), atol=2e-5)


def test_pair_prompts_and_the_prompt_is_part_of_the_fingerprint(llama_dir, tmp_path):
    pair = write_prompt(tmp_path / "nli.toml", 'template = "premise : {first} hypothesis : {second} :"\n'
                        '[labels]\nyes = ["yes"]\nno = ["no"]\n')
    clf = load_classifier(f"llm:{llama_dir}", options=ModelOptions(prompt_file=pair))
    pairs = [("a good film .", "it is good ."), ("a dull film .", "it is good .")]
    np.testing.assert_allclose(clf.predict_proba(pairs), reference(llama_dir, load_prompt(pair), pairs), atol=2e-5)
    with pytest.raises(TextAuditError, match="is for sentence pairs"):
        clf.predict_proba(["a lone text"])
    single = load_classifier(f"llm:{llama_dir}", options=ModelOptions(prompt_file=write_prompt(tmp_path / "p.toml", PROMPT)))
    with pytest.raises(TextAuditError, match="needs a template with {first} and {second}"):
        single.predict_proba([("a", "b")])
    assert clf.fingerprint != single.fingerprint and clf.fingerprint.split("+prompt:")[0] == single.fingerprint.split("+prompt:")[0]


@pytest.mark.parametrize("body,message", [
    ("template = 'x'\n[labels]\na = ['a']\nb = ['b']\n", "needs {text}"),
    ("template = '{text}'\n[labels]\na = ['a']\n", "at least two classes"),
    ("template = '{text}'\n[labels]\na = ['good']\nb = ['Good']\n", "verbaliser 'Good' is in both 'a' and 'b'"),
    ("template = '{text}'\n[labels]\na = ['a']\nb = []\n", "class 'b' needs one or more"),
    ("template = '{text}'\n[labels]\na = ['a']\nb = ['b']\n[[examples]]\ntext = 'x'\nlabel = 'c'\n", "label 'c', not one of a, b"),
    ("template = '{text}'\nlabels = 3\n", "needs a [labels] table"),
    ("template = '{text}'\ntemperature = 0\n[labels]\na = ['a']\nb = ['b']\n", "unknown key(s) temperature"),
    ("template = '{text}\n", "not valid TOML"),
    ("template = '{first} {second}'\n[labels]\na = ['a']\nb = ['b']\n[[examples]]\ntext = 'x'\nlabel = 'a'\n",
     "is for sentence pairs"),
    ("template = 'premise: {first} :'\n[labels]\na = ['a']\nb = ['b']\n", "needs both {first} and {second} (it has only {first})"),
    ("template = '{text}'\n[labels]\na = ['a']\nb = ['b']\n[[endpoint.examples]]\ntext = 'x'\nlabel = 'c'\n",
     "[[endpoint.examples]] example 1 has label 'c', not one of a, b"),
    ("template = '{text}'\n[labels]\na = ['a']\nb = ['b']\n[endpoint]\nexamples = 'x'\n",
     "[[endpoint.examples]] examples must be an array of tables"),
])
def test_prompt_file_mistakes_are_one_line_errors(tmp_path, body, message):
    with pytest.raises(TextAuditError, match=None) as e:
        load_prompt(write_prompt(tmp_path / "bad.toml", body))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_pair_is_filled_in_once_whatever_its_texts_hold():
    from textaudit.models.prompt import Prompt

    p = Prompt(template="P: {first} H: {second} :", labels=("a", "b"), verbalizers=(("a",), ("b",)))
    assert p.fill(("a {second} b", "it {first} is")) == "P: a {second} b H: it {first} is :"


def test_the_built_in_prompt_is_binary_sentiment_in_sst2_order():
    from textaudit.models.prompt import Prompt

    p = default_prompt()
    assert p.labels == ("negative", "positive") and "{text}" in p.template and not p.examples
    # label-only endpoints (which must answer in words) are shown one example of each class and stop at a line break
    assert sorted(c for _, c in p.label_examples) == [0, 1] and p.endpoint["stop"] == ["\n"]
    assert p.render("a fine film") == "Review: a fine film\nSentiment:"  # log-probabilities: zero-shot, as chosen
    shown = p.render("a fine film", labels_only=True)
    assert shown.endswith("\n\nReview: a fine film\nSentiment:") and shown.count("Review: ") == 3
    assert p.fingerprint() != Prompt(template=p.template, labels=p.labels, verbalizers=p.verbalizers,
                                     endpoint=p.endpoint).fingerprint()  # the examples are part of what it asks


@pytest.fixture(scope="module")
def smollm2_cache(tmp_path_factory):
    """A cache holding SmolLM2's de-quantized copy, made once for this module's tests."""
    import os

    cache = tmp_path_factory.mktemp("smol-cache")
    old = os.environ.get("TEXTAUDIT_CACHE")
    os.environ["TEXTAUDIT_CACHE"] = str(cache)
    try:
        from textaudit.lm import load_lm

        load_lm("smollm2")
    finally:
        if old is None:
            os.environ.pop("TEXTAUDIT_CACHE")
        else:
            os.environ["TEXTAUDIT_CACHE"] = old
    return cache


@pytest.mark.slow
def test_smollm2_with_the_built_in_prompt_classifies_sst2_train_well_above_chance(cli, smollm2_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("TEXTAUDIT_CACHE", str(smollm2_cache))
    from textaudit.resources import resolve

    rows = (resolve("sst2") / "train.tsv").read_text().splitlines()[1:61]  # SST-2 *train*: never dev or test
    data = tmp_path / "train60.tsv"
    data.write_text("label\ttext\n" + "\n".join(rows) + "\n")
    r = cli("evaluate", "--model", "llm:smollm2", "--data", str(data), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["labels"] == ["negative", "positive"] and out["n"] == 60
    assert out["accuracy"] >= 0.7 and out["accuracy_ci95"][0] > 0.5, out


def test_attack_bias_and_wordorder_run_on_an_llm_unchanged(cli, llama_dir, tmp_path):
    prompt_file = write_prompt(tmp_path / "p.toml", PROMPT)
    data = tmp_path / "d.tsv"
    data.write_text("label\ttext\n1\ta good film .\n0\the said the plot was dull .\n")
    model = ["--model", f"llm:{llama_dir}", "--prompt-file", str(prompt_file)]
    r = cli("attack", *model, "--data", str(data), "--method", "so-enum", "--k", "1", "--mlm", "minilm-mlm", "--no-ppl",
            "--output", str(tmp_path / "a.jsonl"), "--json")
    assert r.exit_code == 0, r.output
    recs = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert recs[0]["header"]["config"]["model_fingerprint"].endswith("+prompt:" + load_prompt(prompt_file).fingerprint())
    assert {x["status"] for x in recs[1:]} <= {"success", "failed", "skipped"} and len(recs) == 3
    # a resume with another prompt is refused: its fingerprint differs
    other = write_prompt(tmp_path / "q.toml", PROMPT.replace("sentiment :", "sentiment is"))
    r = cli("attack", "--model", f"llm:{llama_dir}", "--prompt-file", str(other), "--data", str(data), "--method",
            "so-enum", "--k", "1", "--mlm", "minilm-mlm", "--no-ppl", "--output", str(tmp_path / "a.jsonl"), "--resume")
    assert r.exit_code == 2 and "fingerprint" in r.stderr, r.output
    r = cli("bias", *model, "--data", str(data), "--pair", "he,she", "--k", "0", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.strip().splitlines()[-1])["pairs"][0]["by_k"]["0"]["n"] >= 1
    r = cli("wordorder", *model, "--data", str(data), "--json")
    assert r.exit_code == 0, r.output


def test_llm_model_errors(tmp_path):
    with pytest.raises(TextAuditError, match="llm: needs a causal LM"):
        load_classifier("llm:")
    with pytest.raises(TextAuditError, match="cannot load causal LM"):
        load_classifier(f"llm:{tmp_path / 'nothing-here'}")
    with pytest.raises(TextAuditError, match="--prompt-file applies to llm: models"):
        load_classifier("bow", options=ModelOptions(prompt_file=tmp_path / "p.toml"))
    with pytest.raises(TextAuditError, match="--concurrency apply to http"):
        with use_model_options(ModelOptions(concurrency=8)):
            load_classifier("bow")
    shutil.rmtree(tmp_path, ignore_errors=True)
