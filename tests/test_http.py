"""http(s):// models against real servers on 127.0.0.1.

- ``audit serve`` in a subprocess, audited over HTTP: the same probabilities, accuracy and attack
  records as the local model.
- A small OpenAI-compatible server (stdlib ``http.server``, started here) serving a zoo model's
  probabilities as next-token logprobs: completions and chat, a forced 429 retried, a timeout as a
  one-line error, budgets that stop a run whose results a ``--resume`` continues, and an API key
  that reaches the server but no output.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from textaudit.errors import TextAuditError
from textaudit.models import load_classifier
from textaudit.models.options import ModelOptions

KEY = "sk-test-SECRET-4242-do-not-leak"
PROMPT = 'template = "Review: {text}\\nSentiment:"\n[labels]\nnegative = ["negative"]\npositive = ["positive"]\n' \
         '[endpoint]\nmodel = "test-model"\n'


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """A real zoo checkpoint (bow, 1 epoch on 300 SST-2 train sentences) and its local classifier."""
    from textaudit.models.zoo.build import train_model

    root = tmp_path_factory.mktemp("zoo")
    os.environ["TEXTAUDIT_CACHE"] = str(root / "cache")
    r = train_model("bow", max_train=300, epochs=1, progress=False, out=root / "bow")
    return Path(r["path"]), load_classifier(r["path"])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from textaudit.resources import resolve

    rows = [r for r in (resolve("sst2") / "train.tsv").read_text().splitlines()[1:]  # SST-2 train, never dev/test
            if r.split("\t", 1)[1].split().count("he") == 1][:8]  # B_{he,she} has sources
    path = tmp_path_factory.mktemp("data") / "d.tsv"
    path.write_text("label\ttext\n" + "\n".join(rows) + "\n")
    return path


class OpenAIHandler(BaseHTTPRequestHandler):
    """``/v1/completions`` and ``/v1/chat/completions`` answering one token with logprobs: the verbaliser
    tokens carry 0.6 × the zoo model's class probabilities, two distractors the rest."""

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, status: int, obj: dict, headers: dict | None = None) -> None:
        blob = json.dumps(obj).encode()
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(blob)))
        self.end_headers()
        self.wfile.write(blob)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        srv = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with srv.lock:
            srv.log.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
            fail = srv.failures.pop(0) if srv.failures else None
        if fail == "echo401":
            return self._send(401, {"error": f"invalid key: {self.headers.get('Authorization')}"})
        if fail is not None:
            return self._send(fail, {"error": "slow down"}, {"Retry-After": "0"})
        with srv.lock:
            srv.inflight += 1
            srv.most = max(srv.most, srv.inflight)
        try:
            time.sleep(srv.sleep)
        finally:
            with srv.lock:
                srv.inflight -= 1
        chat = self.path.endswith("/chat/completions")
        prompt = body["messages"][-1]["content"] if chat else body["prompt"]  # the text's turn: after any examples
        if srv.mode == "one-prompt" and not isinstance(prompt, str):  # as transformers serve answers a list
            return self._send(400, {"detail": "prompt must be a string."})
        prompts = [prompt] if isinstance(prompt, str) else prompt  # the OpenAI spec: a string or a list
        # the text is the last "Review: …\nSentiment:" (few-shot examples, answered, come before it)
        texts = [re.search(r"(?:^|\n\n)Review: ((?:(?!\n\nReview: ).)*)\nSentiment:$", p, re.S).group(1) for p in prompts]
        with srv.lock:
            probs = srv.model.predict_proba(texts)
        if srv.mode in ("no-logprobs", "gibberish", "fewer"):  # text only: the argmax class's verbaliser
            words = [("Maybe." if srv.mode == "gibberish" else " Positive." if p[1] > p[0] else " negative\n")
                     for p in probs]
            if chat:
                return self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": words[0]}}]})
            choices = [{"index": i, "text": w} for i, w in enumerate(words)]
            return self._send(200, {"choices": choices[:-1] if srv.mode == "fewer" else choices})
        tops = [{" negative": math.log(0.6 * p[0]), " positive": math.log(0.6 * p[1]), " the": math.log(0.3),
                 "\n": math.log(0.1)} for p in probs]
        usage = {"prompt_tokens": 9 * len(texts), "completion_tokens": len(texts), "total_tokens": 10 * len(texts)}
        if chat:
            content = [{"token": " positive", "logprob": tops[0][" positive"],
                        "top_logprobs": [{"token": t, "logprob": lp} for t, lp in tops[0].items()]}]
            return self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": " positive"},
                                                 "logprobs": {"content": content}}], "usage": usage})
        choices = [{"index": i, "text": " the", "logprobs": {"tokens": [" the"], "top_logprobs": [t]}}
                   for i, t in enumerate(tops)]
        return self._send(200, {"choices": choices[::-1], "usage": usage})  # any order: the client sorts by index


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:  # a client that timed out closed its socket
        pass


@pytest.fixture
def openai_server(zoo):
    srv = QuietServer(("127.0.0.1", 0), OpenAIHandler)
    srv.model, srv.lock, srv.log, srv.failures, srv.sleep = zoo[1], threading.Lock(), [], [], 0.0
    srv.mode = None  # or: one-prompt (a list is HTTP 400), no-logprobs, gibberish (no verbaliser), fewer (choices)
    srv.inflight = srv.most = 0
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def url(srv, path: str = "/v1/completions") -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}{path}"


@pytest.fixture
def prompt_file(tmp_path):
    p = tmp_path / "prompt.toml"
    p.write_text(PROMPT)
    return p


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_openai_endpoints_give_the_zoo_models_probabilities(openai_server, zoo, data, prompt_file, path, monkeypatch):
    monkeypatch.setenv("TA_TEST_KEY", KEY)
    clf = load_classifier(url(openai_server, path), options=ModelOptions(prompt_file=prompt_file, api_key_env="TA_TEST_KEY"))
    assert clf.labels == ["negative", "positive"] and KEY not in repr(clf) and KEY not in str(clf.fingerprint)
    texts = [r.split("\t", 1)[1] for r in data.read_text().splitlines()[1:]]
    np.testing.assert_allclose(clf.predict_proba(texts), zoo[1].predict_proba(texts), atol=1e-5)
    log = openai_server.log
    assert {e["auth"] for e in log} == {f"Bearer {KEY}"}  # the key reached the server
    assert all(e["body"]["model"] == "test-model" and e["body"]["max_tokens"] == 1 for e in log)
    # the probe at load (--scores auto: two prompts in one request, or one chat message) found logprobs
    assert clf.scores == "logprobs" and clf.unknown_class is None
    assert clf.stats.requests == len(log) == 1 + (1 if path == "/v1/completions" else len(texts))
    assert clf.stats.tokens == 10 * (len(texts) + (2 if path == "/v1/completions" else 1))


def test_429_and_5xx_are_retried_and_every_request_counts(openai_server, zoo, prompt_file):
    openai_server.failures = [429, 503]
    opts = ModelOptions(prompt_file=prompt_file, retries=2, scores="logprobs")  # no probe: every request is a query
    clf = load_classifier(url(openai_server), options=opts)
    p = clf.predict_proba(["a gorgeous film", "a dull mess"])
    np.testing.assert_allclose(p, zoo[1].predict_proba(["a gorgeous film", "a dull mess"]), atol=1e-5)
    assert clf.stats.requests == 3 and clf.stats.retries == 2 and len(openai_server.log) == 3
    openai_server.failures = [429, 429, 429]
    clf2 = load_classifier(url(openai_server), options=opts)
    with pytest.raises(TextAuditError, match=r"answered HTTP 429: .*\(3 attempts\); try again later, raise --retries"):
        clf2.predict_proba(["a film"])
    openai_server.failures = [400]  # not worth a retry
    with pytest.raises(TextAuditError, match=r"answered HTTP 400"):
        load_classifier(url(openai_server), options=opts).predict_proba(["x"])


@pytest.mark.parametrize("concurrency", [1, 4])
def test_requests_go_in_parallel_up_to_the_concurrency(openai_server, zoo, prompt_file, concurrency):
    openai_server.sleep = 0.3
    clf = load_classifier(url(openai_server), options=ModelOptions(prompt_file=prompt_file, concurrency=concurrency,
                                                                    scores="logprobs"))
    texts = [f"film number {i}" for i in range(64)]  # 4 requests of 16 prompts
    np.testing.assert_allclose(clf.predict_proba(texts), zoo[1].predict_proba(texts), atol=1e-5)
    assert openai_server.most == concurrency and clf.stats.requests == 4  # requests in flight at once


def test_a_timeout_is_a_one_line_error(cli, openai_server, data, prompt_file):
    openai_server.sleep = 2.0
    t0 = time.perf_counter()
    r = cli("evaluate", "--model", url(openai_server), "--prompt-file", str(prompt_file), "--data", str(data),
            "--timeout", "0.3", "--retries", "1")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [f"error: endpoint {url(openai_server)} timed out after 0.3 s (2 attempts); raise "
                                     "--timeout, lower --concurrency"]  # evaluate writes no results: it promises none
    assert time.perf_counter() - t0 < 10


def test_the_api_key_never_appears_in_any_output(cli, openai_server, data, prompt_file, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # the default variable of OpenAI-compatible endpoints
    model = ["--model", url(openai_server), "--prompt-file", str(prompt_file)]
    outputs = []
    for args in (["attack", "--method", "so-enum", "--k", "1", "--mlm", "minilm-mlm", "--no-ppl", "--limit", "3",
                  "--output", str(tmp_path / "attack.jsonl")],
                 ["bias", "--pair", "he,she", "--k", "0", "--output", str(tmp_path / "bias.jsonl")],
                 ["evaluate", "--json"]):
        r = cli(args[0], *model, "--data", str(data), *args[1:])
        assert r.exit_code == 0, r.output
        outputs.append(r.stdout + r.stderr)
    r = cli("report", str(tmp_path / "attack.jsonl"), str(tmp_path / "bias.jsonl"), "--out", str(tmp_path / "report"))
    assert r.exit_code == 0, r.output
    openai_server.failures = ["echo401"]  # a server that echoes the key in its error
    r = cli("evaluate", *model, "--data", str(data))
    assert r.exit_code == 2 and "answered HTTP 401: {\"error\": \"invalid key: Bearer ***\"}; check the API key" in r.stderr
    outputs.append(r.stdout + r.stderr)
    assert all(e["auth"] == f"Bearer {KEY}" for e in openai_server.log)  # it was sent every time ...
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 4
    for text in outputs + [p.read_bytes().decode("utf-8", "replace") for p in files]:
        assert KEY not in text  # ... and written nowhere


@pytest.mark.slow
def test_budgets_stop_a_run_and_resume_continues(cli, openai_server, data, prompt_file, tmp_path):
    model = ["--model", url(openai_server), "--prompt-file", str(prompt_file), "--data", str(data)]

    def attack(out: Path, *more: str):
        return cli("attack", *model, "--method", "so-enum", "--k", "1", "--mlm", "minilm-mlm", "--no-ppl",
                   "--output", str(out), *more)

    def records(out: Path) -> list[dict]:
        return [json.loads(x) for x in out.read_text().splitlines()][1:]

    r = attack(tmp_path / "full.jsonl")  # also ranks the data's patch words, which the cache keeps
    assert r.exit_code == 0, r.output
    full = records(tmp_path / "full.jsonl")
    spent = sum(x["queries"] for x in full)
    out = tmp_path / "a.jsonl"
    r = attack(out, "--query-budget", str(8 + spent // 2))  # 8: the probes that key the patch-word cache
    assert r.exit_code == 2 and "the query budget is spent" in r.stderr, r.output
    assert f"; the results so far are kept in {out}: rerun with --resume to continue" in r.stderr
    kept = records(out)
    assert 0 < len(kept) < len(full)  # stopped half way, and what it finished is kept
    r = attack(out, "--resume", "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["http_requests"] >= 1 and summary["http_retries"] == 0 and summary["http_tokens"] > 0
    keep = ("id", "status", "vulnerable", "queries")
    assert [{k: x.get(k) for k in keep} for x in records(out)] == [{k: x.get(k) for k in keep} for x in full]
    r = attack(tmp_path / "c.jsonl", "--cost-budget", "0.05", "--cost-per-1k-tokens", "1.0")  # 10 tokens a text
    assert r.exit_code == 2 and "the cost budget is spent" in r.stderr, r.output
    r = cli("attack", *model, "--method", "so-enum", "--k", "1", "--mlm", "minilm-mlm", "--no-ppl", "--query-budget", "9")
    assert r.exit_code == 2 and r.stderr.strip().endswith("nothing was kept: give --output to keep what a run finishes")
    r = cli("evaluate", *model, "--cost-budget", "0.05")
    assert r.exit_code == 2 and "--cost-budget and --cost-per-1k-tokens go together" in r.stderr


def test_a_server_that_refuses_a_list_gets_one_prompt_per_request(openai_server, zoo, prompt_file, capfd):
    openai_server.mode = "one-prompt"
    clf = load_classifier(url(openai_server), options=ModelOptions(prompt_file=prompt_file, concurrency=3))
    assert "refused a list of prompts (HTTP 400: {\"detail\": \"prompt must be a string.\"})" in capfd.readouterr().err
    assert clf.scores == "logprobs" and clf.forward.per_request == 1  # the probe found out both
    texts = [f"film number {i}" for i in range(20)]
    np.testing.assert_allclose(clf.predict_proba(texts), zoo[1].predict_proba(texts), atol=1e-5)
    bodies = [e["body"]["prompt"] for e in openai_server.log]
    assert isinstance(bodies[0], list) and all(isinstance(b, str) for b in bodies[1:])  # one refusal, then strings
    assert clf.stats.requests == len(bodies) == 2 + len(texts)
    openai_server.log.clear()  # said up front: never a list, never a refusal, no probe
    clf = load_classifier(url(openai_server), options=ModelOptions(prompt_file=prompt_file, prompts_per_request=1,
                                                                   scores="logprobs"))
    np.testing.assert_allclose(clf.predict_proba(texts[:5]), zoo[1].predict_proba(texts[:5]), atol=1e-5)
    assert [isinstance(e["body"]["prompt"], str) for e in openai_server.log] == [True] * 5
    openai_server.mode = "one-prompt"  # a list refused when the user said lists were fine is an error
    clf = load_classifier(url(openai_server), options=ModelOptions(prompt_file=prompt_file, prompts_per_request=16,
                                                                   scores="logprobs"))
    with pytest.raises(TextAuditError, match=r"answered HTTP 400: .*prompt must be a string"):
        clf.predict_proba(texts[:3])


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_no_logprobs_means_labels_read_from_the_generated_text(openai_server, zoo, prompt_file, path, capfd):
    from textaudit.attacks import make_attack

    openai_server.mode = "no-logprobs"
    clf = load_classifier(url(openai_server, path), options=ModelOptions(prompt_file=prompt_file))
    assert "returns no log-probabilities: the class is read from the generated text" in capfd.readouterr().err
    assert clf.scores == "labels" and clf.labels == ["negative", "positive", "unknown"] and clf.unknown_class == 2
    texts = [f"a {w} film" for w in ("gorgeous", "dull", "witty", "lifeless", "moving", "tedious")]
    probs = clf.predict_proba(texts)
    assert probs.tolist() == np.eye(3)[zoo[1].predict(texts)].tolist()  # one-hot on the class the text names
    assert clf.forward.completions == len(texts) and clf.forward.unknown == 0  # (the endpoint's own counts)
    assert clf.fingerprint.endswith("+labels")  # a results file scored otherwise is not resumed with it
    assert all("logprobs" not in e["body"] and e["body"]["max_tokens"] == 5 for e in openai_server.log[1:])
    for method in ("genetic", "bae"):  # they rank words by scores: refused, with what to do instead
        with pytest.raises(TextAuditError, match=rf"{method} ranks words by class scores.*labels only.*--samples N"):
            make_attack(method, clf)
    sampled = load_classifier(url(openai_server, path), options=ModelOptions(prompt_file=prompt_file, samples=3))
    assert sampled.temperature == 1.0 and sampled.fingerprint.endswith("+labels:3@1")
    n = len(openai_server.log)
    assert sampled.predict_proba(texts[:2]).tolist() == np.eye(3)[zoo[1].predict(texts[:2])].tolist()
    sent = openai_server.log[n:]
    assert sorted(e["body"]["seed"] for e in sent) == sorted([0, 1, 2] * (2 if path.endswith("chat/completions") else 1))
    assert {e["body"]["temperature"] for e in sent} == {1.0}
    make_attack("genetic", sampled)  # sampled frequencies are scores: allowed


def test_a_completion_matching_no_verbaliser_is_unknown_never_a_class(cli, openai_server, data, prompt_file, tmp_path):
    from textaudit.models.http import read_label

    verbs = (("negative", "bad"), ("positive", "good"))
    assert [read_label(t, verbs) for t in (" Positive.", "**bad**", "good-natured", "not good", "goodness", "pos", "")] \
        == [1, 0, None, None, None, None, None]
    openai_server.mode = "gibberish"
    r = cli("evaluate", "--model", url(openai_server), "--prompt-file", str(prompt_file), "--data", str(data), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["accuracy"] == 0.0 and out["unknown"] == out["n"] == 8 and out["unknown_share"] == 1.0
    assert out["scores"].startswith("labels") and out["labels"] == ["negative", "positive", "unknown"]
    r = cli("attack", "--model", url(openai_server), "--prompt-file", str(prompt_file), "--data", str(data),
            "--method", "so-enum", "--k", "1", "--mlm", "minilm-mlm", "--no-ppl", "--limit", "2", "--json",
            "--output", str(tmp_path / "a.jsonl"))
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.splitlines()[-1])
    assert summary["skipped"] == 2 and summary["unknown_completions"] == summary["completions"] > 0
    recs = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()[1:]]
    assert {x["reason"] for x in recs} == {"the model's completion for this input matches no verbaliser (unknown)"}


@pytest.mark.parametrize("scores", ["labels", "logprobs"])
def test_a_different_number_of_choices_than_prompts_stops_the_run(openai_server, prompt_file, scores):
    from textaudit.errors import StopRun

    openai_server.mode = "fewer" if scores == "labels" else None
    clf = load_classifier(url(openai_server), options=ModelOptions(prompt_file=prompt_file, scores=scores))
    if scores == "logprobs":  # a server that drops one logprobs choice
        clf.forward._top_completions = lambda answer: [dict(c["logprobs"]["top_logprobs"][0]) for c in answer["choices"][1:]]
    with pytest.raises(StopRun, match=r"answered 2 choices for 3 prompts"):
        clf.predict_proba(["a film", "a movie", "a story"])


def test_a_found_flip_is_confirmed_at_the_endpoint_not_from_the_cache(openai_server, prompt_file, tiny_mlm):
    from test_attacks import X, _words_proposed, planted

    from textaudit.attacks import PatchWords, SOEnum

    t = _words_proposed(tiny_mlm, X, 1)[0]
    openai_server.model, openai_server.mode = planted([t]), "no-logprobs"
    clf = load_classifier(url(openai_server), options=ModelOptions(prompt_file=prompt_file))
    r = SOEnum(clf, k=1, mlm=tiny_mlm, kappa=5, delta=1e9, patch_words=PatchWords(clf, [("film", "movie")]),
               naturalness=False).attack(X, 1)  # the paper's search: the tiny random masked LM knows no English
    assert r.status == "success" and r.vulnerable.split()[1] == t
    asked = [e["body"]["prompt"] for e in openai_server.log[1:]]
    asked = [q for b in asked for q in ([b] if isinstance(b, str) else b)]
    for text in (r.vulnerable, r.vulnerable_patched):  # in the search, and again by the post-condition
        assert asked.count(f"Review: {text}\nSentiment:") == 2


def test_so_beam_on_labels_keeps_a_seeded_random_beam(openai_server, prompt_file, tiny_mlm):
    from test_attacks import X, _words_proposed, planted

    from textaudit.attacks import PatchWords, SOBeam

    t1, t3 = _words_proposed(tiny_mlm, X, 1)[0], _words_proposed(tiny_mlm, X, 3)[0]
    openai_server.model, openai_server.mode = planted([t1, t3]), "no-logprobs"  # a flip two words away

    def run(seed: int):
        clf = load_classifier(url(openai_server), options=ModelOptions(prompt_file=prompt_file))
        atk = SOBeam(clf, k=2, beam=20, mlm=tiny_mlm, kappa=5, delta=1e9, seed=seed,
                     patch_words=PatchWords(clf, [("film", "movie")]), naturalness=False)
        r = atk.attack(X, 1).to_dict()
        return {k: v for k, v in r.items() if k not in ("seconds", "queries", "mlm_queries")}  # caches differ

    first = run(0)
    assert first["status"] == "success" and first["l0"] == 2  # one-hot losses are flat: the beam is a random 20
    assert run(0) == first  # ... drawn under the example's seed: the same records every time


class PlainHandler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        n = len(json.loads(self.rfile.read(int(self.headers["Content-Length"])))["texts"])
        rows = getattr(self.server, "rows", None)
        blob = json.dumps({"probs": rows if rows is not None else [[0.5, 0.5]] * (n + self.server.extra)}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(blob)))
        self.end_headers()
        self.wfile.write(blob)


def test_plain_json_endpoint_errors_are_one_line():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), PlainHandler)
    srv.extra = 1
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        clf = load_classifier(url(srv, "/score"))  # GET is not answered (501): no labels, still usable
        assert clf.labels is None
        with pytest.raises(TextAuditError, match=r"one row per text \(sent 2, got 3 rows\)"):
            clf.predict_proba(["a", "b"])
        srv.extra = 0
        assert clf.predict_proba(["a", ("b", "c")]).tolist() == [[0.5, 0.5], [0.5, 0.5]]
        for rows, message in (([[0.5, 0.5], [0.2, 0.3, 0.5]], r"rows of different lengths \(2 numbers in row 0, 3 in row 1\)"),
                              ([["0.5", "0.5"], [0.5, 0.5]], r"row 0 = \['0.5', '0.5'\]; each row .* list of at least two numbers"),
                              ([[0.5, 0.5], 0.5], r"row 1 = 0.5"), ([[True, False], [0.5, 0.5]], r"row 0 = \[True, False\]")):
            srv.rows = rows
            with pytest.raises(TextAuditError, match=message):
                clf.predict_proba(["d", "e"])
        srv.rows = None
        with pytest.raises(TextAuditError, match="--prompt-file is for llm: models and OpenAI-compatible"):
            load_classifier(url(srv, "/score"), options=ModelOptions(prompt_file=Path("p.toml")))
    finally:
        srv.shutdown()
        srv.server_close()
    with pytest.raises(TextAuditError, match=r"connection failed .*\(1 attempt\)"):
        load_classifier(url(srv, "/score"), options=ModelOptions(retries=0)).predict_proba(["a"])
    with pytest.raises(TextAuditError, match="--api-key-env NOPE_UNSET: that environment variable is not set"):
        load_classifier("https://example.invalid/v1/completions", options=ModelOptions(api_key_env="NOPE_UNSET"))
    clf = load_classifier("https://user:pw@example.invalid/predict?key=abc", options=ModelOptions(retries=0, timeout=1))
    assert clf.name == "https://example.invalid/predict"


class DrippingHandler(BaseHTTPRequestHandler):
    """Answers a valid reply one byte every 0.2 s (about 30 s in all): each read is quick, the whole is not."""

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        n = len(json.loads(self.rfile.read(int(self.headers["Content-Length"])))["texts"])
        blob = json.dumps({"probs": [[0.25, 0.75]] * n}).encode() + b" " * 120
        self.send_response(200)
        self.send_header("Content-Length", str(len(blob)))
        self.end_headers()
        try:
            for i in range(len(blob)):
                self.wfile.write(blob[i:i + 1])
                self.wfile.flush()
                time.sleep(self.server.drip)
        except (BrokenPipeError, ConnectionResetError):
            pass


def test_the_timeout_bounds_a_whole_request_not_each_read(cli):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), DrippingHandler)
    srv.drip = 0.2
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        clf = load_classifier(url(srv, "/score"), options=ModelOptions(retries=0, timeout=2))
        t0 = time.monotonic()
        with pytest.raises(TextAuditError, match=r"timed out after 2 s \(1 attempt\); raise --timeout"):
            clf.predict_proba(["a fine film"])
        assert time.monotonic() - t0 < 15  # about 2 s (within one read of the deadline); the whole answer takes ~30 s
        srv.drip = 0.0  # the same reply at once: read whole, one row per text
        assert clf.predict_proba(["a", "b"]).tolist() == [[0.25, 0.75], [0.25, 0.75]]
    finally:
        srv.shutdown()
        srv.server_close()
    for bad in ("inf", "nan", "0"):
        r = cli("predict", "--model", "http://127.0.0.1:9/score", "--timeout", bad, "x")
        assert r.exit_code == 2 and "Traceback" not in r.output and "--timeout" in r.output, (bad, r.output)


class RedirectHandler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(307)
        self.send_header("Location", "http://127.0.0.1:9/elsewhere")
        self.send_header("Content-Length", "0")
        self.end_headers()


def test_a_redirect_is_named_not_called_not_json(cli):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), RedirectHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        r = cli("predict", "--model", url(srv, "/score"), "--retries", "0", "a fine film")
    finally:
        srv.shutdown()
        srv.server_close()
    assert r.exit_code == 2 and r.stderr.splitlines() == [
        f"error: endpoint {url(srv, '/score')} answered HTTP 307, a redirect to http://127.0.0.1:9/elsewhere; textaudit "
        "follows no redirects: give the final URL as --model"]


class EchoHandler(BaseHTTPRequestHandler):
    """A plain JSON endpoint whose GET echoes the request's Authorization header as its fingerprint."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        blob = json.dumps({"labels": ["neg", "pos"], "fingerprint": self.server.fingerprint
                           or f"model v1, asked with {self.headers.get('Authorization')}"}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(blob)))
        self.end_headers()
        self.wfile.write(blob)


def test_an_endpoint_fingerprint_never_carries_the_key_into_results(monkeypatch):
    monkeypatch.setenv("TA_TEST_KEY", KEY)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        prints = {}
        for fp in (None, {"weights": "abc"}, "v3.1+sha:9f2c"):
            srv.fingerprint = fp
            clf = load_classifier(url(srv, "/score"), options=ModelOptions(api_key_env="TA_TEST_KEY"))
            prints[str(fp)] = clf.fingerprint
            assert KEY not in str(clf.fingerprint) and "Bearer" not in str(clf.fingerprint)
            assert clf.labels == ["neg", "pos"]
    finally:
        srv.shutdown()
        srv.server_close()
    assert re.fullmatch(r".*#sha256:[0-9a-f]{16}", prints["None"])  # echoed headers: only a hash
    assert re.fullmatch(r".*#sha256:[0-9a-f]{16}", prints[str({"weights": "abc"})]) and len(set(prints.values())) == 3
    assert prints["v3.1+sha:9f2c"].endswith("#v3.1+sha:9f2c")  # a plain token stays readable


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_served(proc: subprocess.Popen, port: int, tries: int = 600) -> None:
    """Wait for ``audit serve`` (``proc``) to answer /health on ``port`` (a slow start on a busy machine)."""
    import httpx

    for _ in range(tries):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            if proc.poll() is not None:
                pytest.fail("audit serve did not start: " + proc.stderr.read())
            time.sleep(0.2)
    pytest.fail("audit serve did not answer /health")


def test_audit_serve_is_audited_remotely_with_the_local_models_numbers(cli, zoo, data, tmp_path):
    import httpx

    port = _free_port()
    env = {**os.environ, "TEXTAUDIT_CACHE": str(tmp_path / "serve-cache")}
    proc = subprocess.Popen([sys.executable, "-m", "textaudit", "serve", "--model", str(zoo[0]), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        remote = f"http://127.0.0.1:{port}/predict"
        _wait_until_served(proc, port)
        assert httpx.post(remote, json={"texts": [3]}).status_code == 422  # a bad request is refused, not a crash
        wrong = httpx.post(f"http://127.0.0.1:{port}/", json={"texts": ["a"]})  # the base URL: a hint, not a bare 405
        assert wrong.status_code == 405 and "/predict" in wrong.json()["detail"]
        results = {}
        for name, model in (("local", str(zoo[0])), ("remote", remote)):
            r = cli("predict", "--model", model, "a gorgeous film", "a dull mess", "--json")
            assert r.exit_code == 0, r.output
            pred = json.loads(r.stdout.strip().splitlines()[-1])
            r = cli("evaluate", "--model", model, "--data", str(data), "--json")
            assert r.exit_code == 0, r.output
            ev = json.loads(r.stdout.strip().splitlines()[-1])
            out = tmp_path / f"{name}.jsonl"
            r = cli("attack", "--model", model, "--data", str(data), "--method", "so-enum", "--k", "1", "--mlm",
                    "minilm-mlm", "--no-ppl", "--limit", "4", "--output", str(out))
            assert r.exit_code == 0, r.output
            lines = [json.loads(x) for x in out.read_text().splitlines()]
            results[name] = (pred, ev, lines)
        (lp, le, la), (rp, re_, ra) = results["local"], results["remote"]
        np.testing.assert_allclose([p["probs"] for p in rp["predictions"]], [p["probs"] for p in lp["predictions"]], atol=1e-6)
        assert (re_["accuracy"], re_["n"]) == (le["accuracy"], le["n"])
        keep = ("id", "status", "vulnerable", "perturbed", "label")
        by_id = lambda lines: sorted(({k: x.get(k) for k in keep} for x in lines[1:]), key=lambda x: x["id"])  # noqa: E731
        assert by_id(ra) == by_id(la)  # (a file holds its records in the order they finished: a skip finishes first)
        # the remote model carries the served model's fingerprint
        assert ra[0]["header"]["config"]["model_fingerprint"].endswith("#" + la[0]["header"]["config"]["model_fingerprint"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)


SLOW_PLUGIN = """
import time
def clf(texts):
    if any("boom" in t for t in texts):
        raise ValueError("cannot read /srv/secret/weights.bin")
    time.sleep(0.02 * len(texts))
    return [[0.25, 0.75]] * len(texts)
"""


def test_serve_bounds_what_a_client_may_send_and_answers_a_small_request_beside_a_large_one(tmp_path):
    import httpx

    (tmp_path / "slow.py").write_text(SLOW_PLUGIN)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "textaudit", "serve", "--model", f"{tmp_path}/slow.py:clf", "--port",
                             str(port), "--max-batch", "1000", "--max-body-bytes", "40000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TEXTAUDIT_CACHE": str(tmp_path / "cache")})
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_served(proc, port)
        # 413 before the model runs: too many texts, a declared body too large, a chunked body too large
        r = httpx.post(f"{base}/predict", json={"texts": ["a"] * 1001})
        assert r.status_code == 413 and "1001 texts, over this server's 1000" in r.json()["detail"]
        r = httpx.post(f"{base}/predict", json={"texts": ["a" * 50_000]})
        assert r.status_code == 413 and "over this server's 40000" in r.json()["detail"]
        r = httpx.post(f"{base}/predict", content=iter([b'{"texts": ["', b"a" * 30_000, b"a" * 30_000, b'"]}']))
        assert r.status_code == 413
        # #53: a body far over the limit reached urllib as a broken pipe (the server answered and closed while it
        # was still sending); the rest of the body is now read and dropped, so the client gets its 413
        import urllib.error
        import urllib.request

        for _ in range(3):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(urllib.request.Request(f"{base}/predict", data=b'{"texts": ["' + b"a" * 8_000_000
                                                              + b'"]}', headers={"Content-Type": "application/json"}),
                                       timeout=60)
            assert e.value.code == 413
        # the model's own exception text stays on the server
        r = httpx.post(f"{base}/predict", json={"texts": ["boom"]})
        assert r.status_code == 500 and "secret" not in r.text and "server's log" in r.json()["detail"]
        # a large request (600 texts, about 12 s of model time) and, while it runs, a small one
        large: dict = {}
        worker = threading.Thread(target=lambda: large.update(r=httpx.post(
            f"{base}/predict", json={"texts": [f"text {i}" for i in range(600)]}, timeout=600)))
        worker.start()
        time.sleep(1.0)
        small = httpx.post(f"{base}/predict", json={"texts": ["one small text"]}, timeout=600)
        assert small.status_code == 200 and small.json()["probs"] == [[0.25, 0.75]]
        assert worker.is_alive()  # answered between the large request's chunks, not after all of them
        worker.join()
        assert large["r"].status_code == 200 and len(large["r"].json()["probs"]) == 600
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "cannot read /srv/secret/weights.bin" in err  # ... logged where the operator reads it


def test_serve_refuses_a_port_in_use(zoo, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "textaudit", "serve", "--model", str(zoo[0]), "--port", str(port)],
                           capture_output=True, text=True, timeout=600,
                           env={**os.environ, "TEXTAUDIT_CACHE": str(tmp_path)})
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith(f"error: cannot listen on 127.0.0.1:{port}")


ECHOED_KEY = "sk-proj/Ab+c=d&e/9z"


def echoed_form(form: str, key: str) -> str:
    """``key`` as a server may echo it (``form``)."""
    import base64
    import html
    import re
    from urllib.parse import quote

    slashed = json.dumps(key)[1:-1].replace("/", "\\/")
    return {"raw": key, "json-slash": slashed, "url": quote(key, safe=""),
            "url-lower": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(key, safe="")),
            "unicode": "".join(c if c.isalnum() else f"\\u{ord(c):04x}" for c in key),
            "unicode-upper": "".join(c if c.isalnum() else f"\\u{ord(c):04X}" for c in key),
            "json-twice": json.dumps(slashed)[1:-1],  # a JSON document quoted inside another one
            "base64": base64.b64encode(key.encode()).decode(), "html": html.escape(key)}[form]


class EchoKeyHandler(BaseHTTPRequestHandler):
    """An OpenAI-compatible path that refuses every key, echoing it in the form the server names."""

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        self.server.seen.append(key)
        echoed = echoed_form(self.server.form, key)
        blob = ('{"error": "invalid api key: ' + echoed + '"}').encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(blob)))
        self.end_headers()
        self.wfile.write(blob)


@pytest.mark.parametrize("form", ["raw", "json-slash", "url", "url-lower", "unicode", "unicode-upper", "json-twice",
                                  "base64", "html"])
@pytest.mark.parametrize("saved", ["plain", "crlf"])
def test_a_key_the_endpoint_echoes_in_any_encoding_is_never_shown(cli, tmp_path, monkeypatch, form, saved):
    """#53 (security): an endpoint that echoes the key back — JSON-escaped with \\/ (once, or twice: JSON inside
    JSON), URL-encoded (%2F or %2f), as \\u escapes (either case), HTML-escaped, base64-encoded or as sent —
    never gets it into the error line; a key saved with a trailing CR/LF
    (a key file from Windows) is sent without it and redacted too."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), EchoKeyHandler)
    srv.form, srv.seen = form, []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("OPENAI_API_KEY", ECHOED_KEY + ("\r\n" if saved == "crlf" else ""))
        (tmp_path / "d.tsv").write_text("label\ttext\n1\ta good film .\n")
        r = cli("evaluate", "--model", f"http://127.0.0.1:{srv.server_address[1]}/v1/completions",
                "--data", str(tmp_path / "d.tsv"), "--retries", "0")
    finally:
        srv.shutdown()
    assert srv.seen and set(srv.seen) == {ECHOED_KEY}  # sent as the header carries it
    assert r.exit_code == 2 and "401" in r.output and "***" in r.output, r.output
    from textaudit.models.http import secret_forms

    for f in secret_forms(ECHOED_KEY):
        assert f not in r.output
    assert echoed_form(form, ECHOED_KEY) not in r.output
    for part in ("Ab+c", "Ab%2Bc", "Ab\\u002bc", "9z"):
        assert part not in r.output, r.output


def test_a_key_no_header_can_carry_is_one_line_that_does_not_show_it(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-clé-secrète")
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta good film .\n")
    r = cli("evaluate", "--model", "http://127.0.0.1:9/v1/completions", "--data", str(tmp_path / "d.tsv"))
    assert r.exit_code == 2 and "holds a non-ASCII character" in r.output and "Traceback" not in r.output
    assert "clé" not in r.output and "secrète" not in r.output


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_a_label_only_endpoint_is_shown_the_answer_form_by_the_built_in_prompt(openai_server, zoo, path):
    """Without --prompt-file: a server without log-probabilities gets the built-in prompt's answered
    examples (a completions prompt holds them; a chat holds them as user/assistant turns) and a stop
    at the line break; one scored by log-probabilities gets the zero-shot prompt, no stop."""
    from textaudit.models.prompt import default_prompt

    p = default_prompt()
    openai_server.mode = "no-logprobs"
    clf = load_classifier(url(openai_server, path))
    texts = ["a gorgeous , witty film", "a dull , lifeless film"]
    n = len(openai_server.log)
    assert clf.predict_proba(texts).tolist() == np.eye(3)[zoo[1].predict(texts)].tolist()
    sent = [e["body"] for e in openai_server.log[n:]]
    assert sent and all(b["stop"] == ["\n"] and b["max_tokens"] == 3 for b in sent)
    if path.endswith("chat/completions"):
        turns = sent[0]["messages"]
        assert [t["role"] for t in turns] == ["system", "user", "assistant", "user", "assistant", "user"]
        assert turns[0]["content"] == p.endpoint["system"] and "one word: positive or negative" in turns[0]["content"]
        assert [t["content"] for t in turns[2::2]] == [p.verbalizers[c][0] for _, c in p.label_examples]
        assert turns[1]["content"] == p.fill(p.label_examples[0][0])
        assert sorted(b["messages"][-1]["content"] for b in sent) == sorted(p.fill(t) for t in texts)
    else:
        prompts = [b["prompt"] for b in sent]
        prompts = [x for pr in prompts for x in (pr if isinstance(pr, list) else [pr])]
        assert sorted(prompts) == sorted(p.render(t, labels_only=True) for t in texts)  # (in any order)
        assert prompts[0].startswith(f"Review: {p.label_examples[0][0]}\nSentiment: ")
    openai_server.mode = None
    scored = load_classifier(url(openai_server, path))
    scored.predict_proba(["a warm film"])
    body = openai_server.log[-1]["body"]
    assert "stop" not in body
    assert (body["messages"] if "messages" in body else [{"content": body["prompt"]}]) [-1]["content"] \
        == "Review: a warm film\nSentiment:"
    if "messages" in body:  # a chat scored by log-probabilities is told the task too
        assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_a_prompt_files_system_message_opens_every_chat_and_a_bad_one_is_one_line(openai_server, tmp_path):
    base = 'template = "Review: {text}\\nSentiment:"\n[labels]\nnegative = ["negative"]\npositive = ["positive"]\n'
    (tmp_path / "sys.toml").write_text(base + '[endpoint]\nsystem = "Say positive or negative."\n')
    clf = load_classifier(url(openai_server, "/v1/chat/completions"), options=ModelOptions(prompt_file=tmp_path / "sys.toml"))
    clf.predict_proba(["a warm film"])
    assert openai_server.log[-1]["body"]["messages"][0] == {"role": "system", "content": "Say positive or negative."}
    (tmp_path / "nosys.toml").write_text(base)
    clf = load_classifier(url(openai_server, "/v1/chat/completions"), options=ModelOptions(prompt_file=tmp_path / "nosys.toml"))
    clf.predict_proba(["a cold film"])
    assert [m["role"] for m in openai_server.log[-1]["body"]["messages"]] == ["user"]  # a file without one: none
    (tmp_path / "bad.toml").write_text(base + "[endpoint]\nsystem = 3\n")
    with pytest.raises(TextAuditError, match=r"\[endpoint\] system must be the text of a chat's system message \(got 3\)"):
        load_classifier(url(openai_server, "/v1/chat/completions"), options=ModelOptions(prompt_file=tmp_path / "bad.toml"))


class FilteringHandler(BaseHTTPRequestHandler):
    """A plain JSON endpoint with a content filter: a request holding a text with a filtered word is refused with
    HTTP 400 (that input's fault, as hosted APIs answer); every other text gets P(positive) from its words."""

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["texts"]
        with self.server.lock:
            self.server.batches.append(len(texts))
        if any(w in str(t).split() for t in texts for w in self.server.filtered):
            status, obj = 400, {"detail": "the content filter refused this input"}
        else:
            status = 200
            obj = {"probs": [[0.2, 0.8] if any(w in str(t).split() for w in ("good", "great")) else [0.7, 0.3]
                             for t in texts]}
        blob = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(blob)))
        self.end_headers()
        self.wfile.write(blob)


def test_a_word_the_endpoint_refuses_is_left_out_of_the_patch_ranking_not_the_whole_attack(tiny_mlm, capfd):
    """#63 (open since the last battery): ranking the patch words sent every word in one batch, and one word an
    endpoint's content filter refused (HTTP 400) aborted the whole attack; now it is that word's alone — said
    once, never p — as the search treats a refused input as that example's error."""
    from textaudit.attacks import PatchWords, SOEnum

    srv = ThreadingHTTPServer(("127.0.0.1", 0), FilteringHandler)
    srv.filtered, srv.batches, srv.lock = {"awful"}, [], threading.Lock()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        clf = load_classifier(url(srv, "/score"), options=ModelOptions(retries=0))
        pw = PatchWords(clf, [("good", "great"), ("good", "awful"), ("bad", "awful"), ("film", "movie")],
                        disk_cache=False)
        pw.fit(["good", "bad", "film", "awful"])
        assert set(pw.refused) == {"awful"} and "content filter" in pw.refused["awful"]
        assert [w2 for _, w2 in pw._best_for["good"]] == ["great"]  # (good, awful) is not ranked
        assert pw._best_for["bad"] == [] and [w2 for _, w2 in pw._best_for["film"]] == ["movie"]
        said = capfd.readouterr().err
        assert said.count("the model refused 1 of the 6 words") == 1 and "awful" in said
        asked = len(srv.batches)
        pw.fit(["awful", "bad"])  # a refused word is not asked again
        assert len(srv.batches) == asked
        # a whole attack over data holding the filtered word runs to its end: that example is its own error
        atk = SOEnum(clf, k=1, mlm=tiny_mlm, kappa=5, delta=1e9, patch_words=pw)
        texts = ["a good film with a fine cast", "an awful film with a dull cast", "a bad film with a weak cast"]
        atk.rank_patch_words(texts)
        results = [atk.attack(t, 1 if "good" in t else 0) for t in texts]
        assert results[1].status == "error" and "content filter" in results[1].reason
        assert all(r.status != "error" for r in (results[0], results[2]))
    finally:
        srv.shutdown()
        srv.server_close()


def test_an_endpoints_requests_count_into_its_classifier_after_its_counters_are_reset(openai_server, prompt_file):
    """The endpoint is a forward that counts its HTTP requests into the classifier's counters: zeroing them (as a
    run does between phases) must not leave the endpoint counting into a copy the classifier no longer holds."""
    clf = load_classifier(url(openai_server), options=ModelOptions(prompt_file=prompt_file, scores="logprobs"))
    clf.predict_proba(["a gorgeous film"])
    old = clf.reset_stats()
    assert old.requests == 1 and clf.stats.requests == 0
    clf.predict_proba(["a dull mess", "a fine cast"])
    assert clf.stats.requests == 1 == len(openai_server.log) - 1 and clf.stats.texts == 2
