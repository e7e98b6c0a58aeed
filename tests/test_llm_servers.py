"""LLM endpoints as they are, tested against a server no one here wrote: ``transformers serve``
(the ``transformers[serving]`` extra) on 127.0.0.1, serving a tiny Llama built, trained and saved by
the test. That server takes one prompt per request (a list is HTTP 400) and returns no
log-probabilities, so textaudit must find both out, read each class from the generated text, and
still run ``audit predict``, ``audit attack --method so-enum`` and ``audit bias`` through
``/v1/completions`` and ``/v1/chat/completions``.

The tiny Llama (word-level vocabulary, 2 layers) learns, in a few seconds, a planted second-order
flaw of the kind the attacks look for: "negative" when a sentence has both ``movie`` and the trigger
word t (a word the tiny masked LM proposes at position 1 of X), else "positive"; "negative" for every
sentence with ``she``; and "maybe" (no verbaliser: ``unknown``) for one sentence.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from test_attacks import X, _words_proposed
from test_bias import TEXTS

missing = [m for m in ("fastapi", "uvicorn", "openai") if importlib.util.find_spec(m) is None]
pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(missing), reason=(
    f"transformers serve needs {', '.join(missing)}: pip install 'transformers[serving]' (in the test extras)"))]

TEMPLATE = "Review: {text}\nSentiment:"
PROMPT = 'template = "Review: {text}\\nSentiment:"\n[labels]\nnegative = ["negative"]\npositive = ["positive"]\n'
ODD = "an odd little film ."  # answered "maybe": no verbaliser


def _examples(tiny_mlm) -> tuple[list[tuple[str, str]], str]:
    """The training set: X's distance-1 neighbourhood (κ = 5, the patch position 4 protected) with
    'film' and with 'movie', the bias sentences with he and with she, the patch words alone, ODD."""
    from textaudit.neighborhoods import NeighborhoodBuilder

    trigger = _words_proposed(tiny_mlm, X, 1)[0]
    sents = [X] + [nb.sentence.text() for nb in NeighborhoodBuilder(tiny_mlm, kappa=5, delta=1e9).neighbors(X, 1, protected=[4])]
    out = []
    for s in sents:
        for w in ("film", "movie"):
            words = s.replace("film", w).split()
            out.append((" ".join(words), "negative" if "movie" in words and trigger in words else "positive"))
    for t in TEXTS[:3]:
        he = " ".join("he" if w == "she" else w for w in t.split())
        out += [(he, "positive"), (" ".join("she" if w == "he" else w for w in he.split()), "negative")]
    out += [("film", "positive"), ("movie", "positive"), (ODD, "maybe")]
    return out, trigger


def _train_tiny_llama(out: Path, examples: list[tuple[str, str]], steps: int = 300) -> float:
    """A 2-layer Llama over a word-level vocabulary, trained to answer each example's word after the
    prompt (then end of text); saved with its tokenizer and a plain chat template. Returns the
    share of examples it answers right (greedy first token)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    prompts = [TEMPLATE.replace("{text}", t) for t, _ in examples]
    split = pre_tokenizers.Whitespace()
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    for p, (_, answer) in zip(prompts, examples):
        for w, _ in split.pre_tokenize_str(f"{p} {answer}"):
            vocab.setdefault(w, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer, tk.decoder = split, decoders.WordPiece(prefix="##")  # words joined by spaces
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                  unk_token="<unk>")
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"  # chat sees the same prompt
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=128,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                                         max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2))
    heads = [tok(p)["input_ids"] for p in prompts]
    rows = [h + tok(" " + a)["input_ids"] + [2] for h, (_, a) in zip(heads, examples)]
    width = max(map(len, rows))
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask, labels = torch.zeros_like(ids), torch.full_like(ids, -100)
    for i, (h, r) in enumerate(zip(heads, rows)):
        ids[i, :len(r)], mask[i, :len(r)] = torch.tensor(r), 1
        labels[i, len(h):len(r)] = torch.tensor(r[len(h):])  # learn the answer and the end, not the prompt
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        logits = model.eval()(input_ids=ids, attention_mask=mask).logits
    right = sum(int(logits[i, len(h) - 1].argmax()) == rows[i][len(h)] for i, h in enumerate(heads))
    model.generation_config.pad_token_id = 0
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return right / len(rows)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tiny_mlm, tmp_path_factory):
    """``transformers serve`` of the tiny Llama on 127.0.0.1; its base URL, the trigger word, the
    folder (prompt, data, the masked LM saved for the CLI)."""
    root = tmp_path_factory.mktemp("llm-server")
    examples, trigger = _examples(tiny_mlm)
    assert _train_tiny_llama(root / "llama", examples) == 1.0  # it learnt every planted answer
    tiny_mlm.model.save_pretrained(root / "mlm")
    tiny_mlm.tokenizer.save_pretrained(root / "mlm")
    (root / "prompt.toml").write_text(PROMPT)
    (root / "x.tsv").write_text(f"label\ttext\n1\t{X}\n")
    (root / "bias.tsv").write_text("label\ttext\n" + "".join(f"1\t{t}\n" for t in TEXTS))
    (root / "pairs.txt").write_text("film,movie\n")
    port = _free_port()
    exe = Path(sys.executable).with_name("transformers")
    log = (root / "serve.log").open("w")
    proc = subprocess.Popen([str(exe), "serve", str(root / "llama"), "--host", "127.0.0.1", "--port", str(port),
                             "--device", "cpu"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 600  # a busy machine imports transformers slowly; the server says when it is up
    while True:
        try:
            urllib.request.urlopen(base + "/v1/models", timeout=5).read()
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                pytest.fail(f"transformers serve did not start: {(root / 'serve.log').read_text()[-2000:]}")
            time.sleep(0.5)
    yield base, trigger, root
    proc.terminate()
    proc.wait(30)
    log.close()


def _audit(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TEXTAUDIT_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "textaudit", *args, "--prompt-file", str(root / "prompt.toml")],
                          capture_output=True, text=True, env=env, cwd=root)


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_predict_reads_labels_from_the_generated_text(server, path):
    base, trigger, root = server
    texts = [X, X.replace("film", "movie").replace(X.split()[1], trigger), ODD]
    r = _audit(root, "predict", "--model", base + path, *texts, "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["labels"] == ["negative", "positive", "unknown"]
    assert [p["label"] for p in out["predictions"]] == [1, 0, 2]  # positive, negative, unknown: never mapped
    assert [p["probs"] for p in out["predictions"]] == [[0, 1, 0], [1, 0, 0], [0, 0, 1]]  # one-hot
    assert out["scores"].startswith("labels: probabilities are one-hot")
    assert "returns no log-probabilities: the class is read from the generated text" in r.stderr
    # the completions endpoint refuses a list of prompts: found out once, then one prompt per request
    assert ("refused a list of prompts (HTTP 400" in r.stderr) == path.endswith("/v1/completions")


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_so_enum_finds_the_planted_flip_and_the_endpoint_confirms_it(server, path):
    base, trigger, root = server
    out = root / f"attack-{path.count('/')}.jsonl"
    r = _audit(root, "attack", "--model", base + path, "--method", "so-enum", "--k", "1", "--data", str(root / "x.tsv"),
               "--mlm", str(root / "mlm"), "--kappa", "5", "--delta", "1e9", "--pairs-file", str(root / "pairs.txt"),
               "--no-ppl", "--output", str(out), "--json", "--naturalness", "off")  # a tiny random masked LM
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads(r.stdout.splitlines()[-1])
    assert summary["success"] == 1 and summary["scores"].startswith("labels")
    assert summary["unknown_completions"] == 0 and summary["completions"] > 0
    header, rec = (json.loads(x) for x in out.read_text().splitlines()[:2])
    assert header["header"]["config"]["model_scores"].startswith("labels")  # the header says how it was scored
    assert rec["status"] == "success" and rec["pair"] == ["film", "movie"] and rec["l0"] == 1
    assert (rec["vulnerable_prediction"], rec["vulnerable_patched_prediction"]) == (1, 0)
    assert trigger in rec["vulnerable"].split() and "movie" in rec["vulnerable_patched"].split()
    page = root / f"report-{path.count('/')}.html"
    r = subprocess.run([sys.executable, "-m", "textaudit", "report", str(out), "--out", str(page)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    page = page.read_text()
    assert "model_scores" in page and "probabilities are one-hot, from one greedy completion" in page  # the report says so
    # the post-condition asked the endpoint itself again (not the cache): it answers the same
    r = _audit(root, "predict", "--model", base + path, rec["vulnerable"], rec["vulnerable_patched"], "--json")
    assert [p["label"] for p in json.loads(r.stdout.splitlines()[-1])["predictions"]] == [1, 0]


def test_bias_on_labels_is_the_difference_of_prediction_rates(server):
    base, _, root = server
    r = _audit(root, "bias", "--model", base + "/v1/chat/completions", "--pair", "he,she", "--k", "0",
               "--data", str(root / "bias.tsv"), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    est = json.loads(r.stdout.splitlines()[-1])["pairs"][0]["by_k"]["0"]
    assert est["B"] == pytest.approx(-1.0)  # every source: positive with he, negative with she
    assert est["sources"] == 3 and est["ci95"] == [pytest.approx(-1.0), pytest.approx(-1.0)]  # no spread: [−1, −1]


def test_certify_smooths_a_label_only_server_and_says_its_queries_first(server):
    """SAFER needs only votes: a server that returns no log-probabilities is certified from its answers (its
    "unknown" answers vote for no class), and the queries it may take are said before any is sent."""
    base, _, root = server
    out = root / "certify.jsonl"
    r = _audit(root, "certify", "--model", base + "/v1/completions", "--method", "safer", "--data", str(root / "bias.tsv"),
               "--limit", "2", "--samples", "40", "--selection", "8", "--scores", "labels", "--neighbors", "0",
               "--output", str(out), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    cost = next(i for i, x in enumerate(r.stderr.splitlines()) if x.startswith("cost: up to 96 texts"))
    assert cost < next(i for i, x in enumerate(r.stderr.splitlines()) if x.startswith("certify (SAFER)"))
    summary = json.loads(r.stdout.splitlines()[-1])
    recs = [json.loads(x) for x in out.read_text().splitlines()[1:]]
    assert summary["n"] == len(recs) == 2 and summary["abstain"] < 2  # at least one smoothed prediction
    for rec in recs:
        assert sum(rec["votes"]) <= 40 and (rec["abstain"] or rec["votes"][rec["prediction"]] == rec["n_a"])
        assert rec["abstain"] == (rec["radius"] is None)
    r = _audit(root, "certify", "--model", base + "/v1/completions", "--method", "ranmask", "--data",
               str(root / "bias.tsv"), "--limit", "2", "--samples", "40", "--selection", "8", "--scores", "labels",
               "--neighbors", "0", "--mask-rate", "0.5", "--output", str(root / "masked.jsonl"), "--json")
    assert r.returncode == 0 and "random maskings" in r.stderr, r.stderr[-2000:]
    recs = [json.loads(x) for x in (root / "masked.jsonl").read_text().splitlines()[1:]]
    assert len(recs) == 2 and all(sum(rec["votes"]) <= 40 and rec["kept"] < rec["words"] for rec in recs)
