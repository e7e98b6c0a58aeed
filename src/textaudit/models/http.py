"""``http(s)://…`` models: a classifier behind an HTTP endpoint, audited like a local one.

Two protocols, chosen by the URL's path:

- **plain JSON** (any other path; what ``audit serve`` speaks): ``POST {"texts": [...]}`` →
  ``{"probs": [[...], ...]}`` (a sentence pair is a list of two strings). A ``GET`` on the same URL
  may answer ``{"labels": [...], "fingerprint": "..."}``; the class names and the model's identity
  are then known before any query.
- **OpenAI-compatible** (``…/completions`` or ``…/chat/completions``; OpenAI, vLLM, llama.cpp,
  TGI, …): the prompt (``--prompt-file``, as for ``llm:`` models) is rendered for every text and the
  endpoint is asked for one token with its ``logprobs``; a verbaliser's log-probability is that of the
  top tokens equal to it (case and surrounding spaces aside), or, when none is among them, the
  smallest top log-probability (an upper bound); class scores s_c = logsumexp_{v ∈ V_c} and
  P(c|x) = softmax_c(s_c). The remote model's name is the prompt file's ``[endpoint] model``.

  Many servers (``transformers serve``, several hosted APIs) return no log-probabilities: with
  ``--scores labels`` — chosen automatically when the probe request made at load (``--scores auto``,
  the default) comes back without them, with a notice — the class is *read from the generated text*
  (:func:`read_label`: the completion's first word(s) equal to one verbaliser, case and punctuation
  around it aside). A completion matching no verbaliser is the extra class ``unknown`` (the last
  one): counted, reported, never mapped to a class, and never half of a vulnerable pair. The
  probabilities are one-hot, or with ``--samples N`` (temperature > 0, default 1.0, ``seed`` i for
  the i-th sample) the frequencies of the N completions. Audits that need scores (Genetic, BAE,
  TextAttack recipes) refuse one-hot labels; SO-Enum, SO-Beam and B_{p,k} (a difference of
  prediction rates) run on them.
- A completions server that refuses a list of prompts (HTTP 400) is sent one prompt per request from
  then on (``--prompts-per-request 1`` says so up front), ``concurrency`` at a time.

Every request goes through one transport (:mod:`textaudit.models.transport`): one retry loop (429, 5xx,
timeouts and dropped connections retried ``retries`` times with exponential backoff, or the server's
``Retry-After``; any other failure, or the last retry's, a one-line error), ``concurrency`` requests in flight
at once, the API key read from an environment variable and sent only in the ``Authorization`` header: never
in a name, a message, a results file or a log. This module is what the answers mean. A run stops with
a one-line error before it sends more texts than ``query_budget`` or spends more than
``cost_budget`` (tokens the endpoint reports × ``cost_per_1k_tokens`` / 1000); what was written so far
is kept, and ``--resume`` continues.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import numpy as np

import textaudit.notices as notices
from textaudit.errors import StopRun, TextAuditError
from textaudit.models.batched import BatchedClassifier, QueryStats
from textaudit.models.options import ModelOptions
from textaudit.models.prompt import LABEL_TOKENS, Prompt, check_endpoint_prompt, default_prompt
from textaudit.models.transport import RETRY_STATUS, EndpointRefused, Transport
from textaudit.secrets import (  # noqa: F401 - public_url and secret_forms re-exported
    public_url,
    redact,
    register,
    register_url,
    secret_forms,
    unencoded_credentials,
)

__all__ = ["Endpoint", "load_http_classifier", "protocol_of", "public_url", "read_label", "RETRY_STATUS"]

#: texts per request: plain JSON, completions (a list of prompts), chat (one message)
PER_REQUEST = {"json": 32, "completions": 16, "chat": 1}
#: what the probe at load (``--scores auto``) asks about: two texts, so that a server refusing a
#: list of prompts is found out at the same time
PROBE_TEXTS = ("a gripping , beautifully acted film .", "a dull and lifeless film .")
#: the logit of a class no sampled completion chose (exp(-1e4) is exactly 0)
NEVER = -1e4


def read_label(completion: str, verbalizers) -> int | None:
    """The class whose verbaliser the generated ``completion`` starts with (case, whitespace and
    quotes or markup around it aside; the longest matching verbaliser wins), or None: ``unknown``.
    " Positive." and "**positive**" read as positive; "not positive" and "pos" read as nothing."""
    text = str(completion).strip().lower().lstrip("\"'*`_:([-> ")
    best: tuple[int, int] | None = None
    for c, words in enumerate(verbalizers):
        for w in words:
            w = w.strip().lower()
            end = len(w)
            if w and text.startswith(w) and (len(text) == end or not (text[end].isalnum() or text[end] in "-'")):
                if best is None or end > best[1]:
                    best = (c, end)
    return None if best is None else best[0]


def protocol_of(url: str) -> str:
    """``chat`` (…/chat/completions), ``completions`` (…/completions) or ``json`` (anything else)."""
    path = urlsplit(url).path.rstrip("/")
    if path.endswith("/chat/completions"):
        return "chat"
    return "completions" if path.endswith("/completions") else "json"


def _logsumexp(values: list[float]) -> float:
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


class Endpoint:
    """A remote endpoint as a bare forward (see the module docstring): called with texts, it answers one row each —
    a plain JSON endpoint's probabilities, an OpenAI-compatible one's class log-probabilities or label counts — and
    :func:`load_http_classifier` puts it under a :class:`~textaudit.models.batched.BatchedClassifier` like every
    other backend's forward, declaring the traits it learnt at load (its labels, how it scores, its fingerprint).
    ``stats.requests`` counts every HTTP request (retries and the ``GET`` of the class names included),
    ``stats.retries`` the retried ones, ``stats.tokens`` the tokens endpoints reported (the classifier counts into
    the same :class:`~textaudit.models.batched.QueryStats`)."""

    def __init__(self, url: str, *, options: ModelOptions | None = None, prompt: Prompt | None = None):
        register_url(url)  # its user:password@ and credential query values: redacted from every output from now on
        if unencoded_credentials(url):
            raise TextAuditError(f"the user:password of {public_url(url)} holds a / ? or # that a URL cannot carry "
                                 "unencoded; percent-encode it (/ as %2F, ? as %3F, # as %23)")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TextAuditError(f"'{public_url(url)}' is not an http(s) URL with a host")
        register(parts.query)  # and the whole query, as this endpoint has always treated it
        self.url = url
        self.protocol = protocol_of(url)
        self.options = options or ModelOptions()
        if self.protocol == "json" and prompt is not None:
            raise TextAuditError("a plain JSON endpoint returns probabilities itself: it takes no prompt")
        self.prompt = prompt if self.protocol == "json" or prompt is not None else default_prompt()
        if self.prompt is not None:
            check_endpoint_prompt(self.prompt)
        if self.protocol == "json" and self.options.openai_only():
            raise TextAuditError(f"{', '.join(self.options.openai_only())} apply to OpenAI-compatible endpoints "
                                 "(…/completions, …/chat/completions); a plain JSON endpoint returns probabilities itself")
        self.name = public_url(url)
        self.labels: list[str] | None = list(self.prompt.labels) if self.prompt else None
        self._num_classes: int | None = len(self.prompt.labels) if self.prompt else None
        self.output = "probs" if self.protocol == "json" else "logits"
        self.stats = QueryStats()
        self.transport = Transport(url, public_url(url), self.options, count=self._count, key_names=(
            ("OPENAI_API_KEY", "TEXTAUDIT_API_KEY") if self.protocol != "json" else ("TEXTAUDIT_API_KEY",)))
        self.per_request = PER_REQUEST[self.protocol]
        if self.protocol == "completions" and self.options.prompts_per_request:
            self.per_request = self.options.prompts_per_request
        self.batch_size = self.per_request * self.options.concurrency  # (as asked: before a probe may lower it)
        self.sent = 0  # texts sent in this run (the query budget)
        self.tokens = 0  # tokens the endpoint reported (the cost budget)
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.fingerprint = self._identity()
        #: ``logprobs`` or ``labels`` (OpenAI-compatible endpoints), None (plain JSON: its own probabilities)
        self.scores: str | None = None
        self.samples = self.options.samples
        self.temperature = self.options.sample_temperature
        self.unknown_class: int | None = None
        self.completions = 0  # label-only: completions read in this run ...
        self.unknown = 0  # ... and those that matched no verbaliser
        self._switched = False
        if self.protocol != "json":
            self._use_scores(self._probe() if self.options.scores == "auto" else self.options.scores)

    def _redact(self, text: str) -> str:
        """``text`` without any secret, in any form a server may echo it (:meth:`Transport.redact`)."""
        return Transport.redact(text)

    def _request(self, method: str, payload: dict | None = None, *, quiet: bool = False):
        """The decoded JSON answer of one request (:meth:`Transport.request`: retried, bounded, no redirect)."""
        return self.transport.request(method, payload, quiet=quiet)

    def _count(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                setattr(self.stats, k, getattr(self.stats, k) + v)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_pool": None, "_lock": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the key, never the query string
        return f"Endpoint({self.name!r}, protocol={self.protocol!r})"

    def _identity(self) -> str | None:
        """What the results header records as the model's fingerprint: the endpoint's own (plain
        JSON, from a GET), or the URL, the remote model and the prompt."""
        if self.protocol == "json":
            info = self._request("GET", quiet=True)
            if isinstance(info, dict):
                if isinstance(info.get("labels"), list) and len(info["labels"]) >= 2:
                    self.labels = [str(x) for x in info["labels"]]
                    self._num_classes = len(self.labels)
                elif isinstance(info.get("num_classes"), int) and info["num_classes"] >= 2:
                    self._num_classes = info["num_classes"]
                if info.get("fingerprint"):
                    return f"{self.name}#{self._safe_fingerprint(info['fingerprint'])}"
            return self.name
        model = self.prompt.endpoint.get("model", "") if self.prompt else ""
        return f"{self.name}#{model}+prompt:{self.prompt.fingerprint()}" if self.prompt else self.name

    def _safe_fingerprint(self, value: object) -> str:
        """The endpoint's fingerprint as results headers may carry it: a short plain token as it is;
        anything else (an object, a long text, one holding the key or the URL's secrets: an endpoint
        that echoes the request's headers) only as a hash, which still tells two models apart."""
        if isinstance(value, str) and re.fullmatch(r"[\w.:@+/-]{1,80}", value) and self._redact(value) == value:
            return value
        blob = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        return "sha256:" + hashlib.sha256(blob.encode("utf-8", "replace")).hexdigest()[:16]

    # -- budgets ----------------------------------------------------------------------------------
    def _spend(self, n: int) -> None:
        opts = self.options
        with self._lock:
            if opts.query_budget is not None and self.sent + n > opts.query_budget:
                raise StopRun(f"the query budget is spent ({self.sent} of --query-budget {opts.query_budget} texts "
                                     "sent); raise it")
            if opts.cost_budget is not None and self.tokens * opts.cost_per_1k_tokens / 1000 >= opts.cost_budget:
                raise StopRun(f"the cost budget is spent ({self.tokens} tokens cost "
                                     f"{self.tokens * opts.cost_per_1k_tokens / 1000:.4g} of --cost-budget "
                                     f"{opts.cost_budget:g}); raise it")
            self.sent += n

    # -- how the endpoint scores ---------------------------------------------------------------------
    def _probe(self) -> str:
        """``--scores auto``: one request at load (the prompts of :data:`PROBE_TEXTS`, asking for
        log-probabilities) tells whether the endpoint returns them (``logprobs``) or not (``labels``,
        with a notice); a completions server that refuses the list of two is sent one prompt, and is
        sent one per request from then on. Its tokens count towards ``--cost-budget``; its texts are
        not queries of the audit."""
        prompts = [self.prompt.render(t) for t in PROBE_TEXTS]
        payload = self._logprob_payload()
        answer = None
        if self.protocol == "completions" and self.per_request > 1:
            try:
                answer = self._request("POST", {**payload, "prompt": prompts})
            except EndpointRefused as e:
                if e.status != 400:
                    raise
                self._one_per_request(e)
        if answer is None:
            body = {"prompt": prompts[0]} if self.protocol == "completions" else self._messages(prompts[0])
            answer = self._request("POST", {**payload, **body})
        self._used(answer)
        try:
            (self._top_completions if self.protocol == "completions" else self._top_chat)(answer)
            return "logprobs"
        except StopRun:
            notices.notice(f"endpoint {self.name} returns no log-probabilities: the class is read from the generated text "
                           f"(label-only scores, as --scores labels; {self._describe('labels')})")
            return "labels"

    def _use_scores(self, mode: str) -> None:
        self.scores = mode
        if mode == "labels":
            names = list(self.prompt.labels)
            self.unknown_class = len(names)
            self.labels = [*names, "unknown" if "unknown" not in names else "(unknown)"]
            self._num_classes = len(self.labels)
            # a results file resumed with another way of scoring is refused (the header's fingerprint)
            self.fingerprint = f"{self.fingerprint}+labels" + (f":{self.samples}@{self.temperature:g}"
                                                                if self.samples > 1 else "")
        elif self.samples > 1:
            raise TextAuditError(f"--samples applies to label-only scores; endpoint {self.name} returns log-probabilities "
                                 "(give --scores labels to sample completions anyway)")

    def _describe(self, mode: str | None = None) -> str:
        mode = mode or self.scores
        if mode == "logprobs":
            return "class scores from the next token's top log-probabilities"
        if self.samples > 1:
            return (f"probabilities are the frequencies of {self.samples} completions sampled at temperature "
                    f"{self.temperature:g}")
        return "probabilities are one-hot, from one greedy completion per text"

    @property
    def scores_description(self) -> str | None:
        """What the results header and summary say about how this endpoint was scored."""
        if self.scores is None:
            return None
        return f"{self.scores}: {self._describe()}"

    def label_summary(self) -> dict:
        """For summaries: how the endpoint was scored, and (label-only) the completions read and
        the share that matched no verbaliser."""
        out: dict = {"scores": self.scores_description}
        if self.scores == "labels":
            out.update(completions=self.completions, unknown_completions=self.unknown,
                       unknown_share=round(self.unknown / self.completions, 4) if self.completions else None)
        return out

    def _one_per_request(self, e: EndpointRefused) -> None:
        with self._lock:
            first = not self._switched
            self.per_request, self._switched = 1, True
        if first:
            why = str(e).split(" answered ", 1)[-1]
            notices.notice(f"endpoint {self.name} refused a list of prompts ({why}); sending one prompt per request "
                           f"from now on, {self.options.concurrency} at a time (--prompts-per-request 1 says so up front)")

    # -- protocols --------------------------------------------------------------------------------
    def __call__(self, texts: list) -> np.ndarray:
        """The forward: one row per text (probabilities, or log-probabilities and log label frequencies)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.options.concurrency, thread_name_prefix="textaudit-http")
        if self.protocol == "json":
            self._spend(len(texts))
            chunks = [texts[s:s + self.per_request] for s in range(0, len(texts), self.per_request)]
            return np.asarray([row for part in self._map(self._json, chunks) for row in part], dtype=np.float64)
        self._spend(len(texts) * self.samples)
        per = self.per_request
        units = [(s, i) for s in range(self.samples) for i in range(0, len(texts), per)]
        answers = self._map(lambda u: self._ask(texts[u[1]:u[1] + per], u[0]), units)
        if self.scores == "logprobs":
            return np.asarray([row for part in answers for row in part], dtype=np.float64)
        counts = np.zeros((len(texts), len(self.labels)))
        for (_, i), classes in zip(units, answers):
            for j, c in enumerate(classes):
                counts[i + j, self.unknown_class if c is None else c] += 1
        return np.where(counts > 0, np.log(np.maximum(counts, 1) / self.samples), NEVER)

    def _map(self, fn, items: list) -> list:
        return list(self._pool.map(fn, items) if len(items) > 1 else map(fn, items))  # type: ignore[union-attr]

    def _json(self, texts: list) -> list:
        answer = self._request("POST", {"texts": [t if isinstance(t, str) else list(t) for t in texts]})
        probs = answer.get("probs") if isinstance(answer, dict) else None
        if not isinstance(probs, list) or len(probs) != len(texts):
            raise StopRun(f"endpoint {self.name} must answer {{\"probs\": [[...], ...]}} with one row per text "
                                 f"(sent {len(texts)}, got {type(probs).__name__ if probs is None else len(probs)} rows)")
        for i, row in enumerate(probs):  # numbers only: numpy would read "0.5" as 0.5 and choke on ragged rows
            if not isinstance(row, list) or len(row) < 2 or not all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) for x in row):
                raise StopRun(f"endpoint {self.name} answered row {i} = {str(row)[:60]}; each row of \"probs\" must be "
                              "a list of at least two numbers")
            if len(row) != len(probs[0]):
                raise StopRun(f"endpoint {self.name} answered rows of different lengths ({len(probs[0])} numbers in "
                              f"row 0, {len(row)} in row {i}); every row needs one number per class")
        return probs

    def _used(self, answer: dict) -> None:
        usage = answer.get("usage") if isinstance(answer, dict) else None
        if isinstance(usage, dict) and isinstance(usage.get("total_tokens"), (int, float)):
            self._count(tokens=int(usage["total_tokens"]))  # the statistics (reset per example) ...
            with self._lock:
                self.tokens += int(usage["total_tokens"])  # ... and the run's cost budget (never reset)

    def _payload(self) -> dict:
        payload: dict = {}
        if self.prompt.endpoint.get("model"):
            payload["model"] = str(self.prompt.endpoint["model"])
        return payload

    def _logprob_payload(self) -> dict:
        top = int(self.prompt.endpoint.get("top_logprobs", 5))
        extra = {"logprobs": top} if self.protocol == "completions" else {"logprobs": True, "top_logprobs": top}
        return {**self._payload(), "max_tokens": 1, "temperature": 0, **extra}

    def _label_payload(self, sample: int) -> dict:
        out = {**self._payload(), "max_tokens": int(self.prompt.endpoint.get("max_tokens", LABEL_TOKENS)),
               "temperature": self.temperature}
        if self.prompt.endpoint.get("stop"):  # the answer ends where the prompt's format says (a line break)
            stop = self.prompt.endpoint["stop"]
            out["stop"] = [stop] if isinstance(stop, str) else list(stop)
        if self.temperature > 0:
            out["seed"] = sample  # the i-th sample of every text: the same on a rerun, where the server honours seeds
        return out

    def _system(self) -> list[dict]:
        """``[endpoint] system``: a chat's system message (what the task and the answer's form are), or none."""
        system = self.prompt.endpoint.get("system") if self.prompt is not None else None
        return [{"role": "system", "content": system}] if system else []

    def _messages(self, prompt: str) -> dict:
        return {"messages": [*self._system(), {"role": "user", "content": prompt}]}

    def _label_messages(self, text: object) -> dict:
        """A label-only chat: the system message (``[endpoint] system``), each few-shot example a user turn
        answered by the assistant with its class's first verbaliser, then the text's turn (so the model has
        seen the answer's form)."""
        turns: list[dict] = self._system()
        for t, c in self.prompt.shots_for(labels_only=True):
            turns += [{"role": "user", "content": self.prompt.fill(t)},
                      {"role": "assistant", "content": self.prompt.verbalizers[c][0]}]
        return {"messages": [*turns, {"role": "user", "content": self.prompt.fill(text)}]}

    def _ask(self, texts: list, sample: int) -> list:
        """One unit of work: the rows (log-probability scores) or the classes read (labels; None
        for unknown) of ``texts``, in one request or, where the server takes one prompt at a
        time, one request each."""
        if self.protocol == "completions" and len(texts) > 1 and self.per_request > 1:
            try:
                return self._completions(texts, sample)
            except EndpointRefused as e:
                if e.status != 400 or self.options.prompts_per_request:
                    raise
                self._one_per_request(e)  # one at a time; a 400 on one prompt is that input's error
        one = self._completions if self.protocol == "completions" else self._chat
        return [row for t in texts for row in one([t], sample)]

    def _completions(self, texts: list, sample: int) -> list:
        prompts = [self.prompt.render(t, labels_only=self.scores == "labels") for t in texts]
        body = self._logprob_payload() if self.scores == "logprobs" else self._label_payload(sample)
        answer = self._request("POST", {**body, "prompt": prompts if len(prompts) > 1 else prompts[0]})
        self._used(answer)
        if self.scores == "logprobs":
            tops = self._top_completions(answer)
        else:
            try:
                choices = sorted(answer["choices"], key=lambda c: c.get("index", 0))
                tops = [str(c["text"]) for c in choices]
            except (KeyError, TypeError, AttributeError):
                raise StopRun(f"endpoint {self.name} answered without choices[].text") from None
        if len(tops) != len(texts):
            raise StopRun(f"endpoint {self.name} answered {len(tops)} choices for {len(texts)} prompts")
        return [self._scores(t) for t in tops] if self.scores == "logprobs" else [self._read(t) for t in tops]

    def _top_completions(self, answer) -> list[dict]:
        try:
            choices = sorted(answer["choices"], key=lambda c: c.get("index", 0))
            tops = [dict(c["logprobs"]["top_logprobs"][0]) for c in choices]
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            raise StopRun(f"endpoint {self.name} answered without choices[].logprobs.top_logprobs; "
                          "does it support logprobs? (--scores labels reads the class from the generated text)") from None
        return tops

    def _top_chat(self, answer) -> dict:
        try:
            first = answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            return {d["token"]: d["logprob"] for d in first}
        except (KeyError, IndexError, TypeError, AttributeError):
            raise StopRun(f"endpoint {self.name} answered without choices[0].logprobs.content[0].top_logprobs; "
                          "does it support logprobs? (--scores labels reads the class from the generated text)") from None

    def _chat(self, texts: list, sample: int) -> list:
        rows = []
        for t in texts:
            if self.scores == "logprobs":
                body = {**self._logprob_payload(), **self._messages(self.prompt.render(t))}
            else:
                body = {**self._label_payload(sample), **self._label_messages(t)}
            answer = self._request("POST", body)
            self._used(answer)
            if self.scores == "logprobs":
                rows.append(self._scores(self._top_chat(answer)))
                continue
            try:
                rows.append(self._read(str(answer["choices"][0]["message"]["content"] or "")))
            except (KeyError, IndexError, TypeError):
                raise StopRun(f"endpoint {self.name} answered without choices[0].message.content") from None
        return rows

    def _read(self, completion: str) -> int | None:
        """The class of one label-only completion (None: unknown), counted."""
        c = read_label(completion, self.prompt.verbalizers)
        with self._lock:
            self.completions += 1
            self.unknown += c is None
        return c

    def _scores(self, top: dict) -> list[float]:
        """Class scores s_c from one position's top log-probabilities (see the module docstring)."""
        if not top:
            raise StopRun(f"endpoint {self.name} returned no top log-probabilities")
        floor = min(float(v) for v in top.values())
        scores = []
        for words in self.prompt.verbalizers:
            per_word = []
            for w in words:
                hits = [float(lp) for tok, lp in top.items() if tok.strip().lower() == w.strip().lower()]
                per_word.append(_logsumexp(hits) if hits else floor)
            scores.append(_logsumexp(per_word))
        return scores


def load_http_classifier(url: str, *, options: ModelOptions | None = None, prompt: Prompt | None = None,
                         batch_size: int | None = None, cache_size: int = 100_000) -> BatchedClassifier:
    """The classifier of ``url`` (``--model http(s)://…``): its :class:`Endpoint` under a
    :class:`~textaudit.models.batched.BatchedClassifier`, with the traits the endpoint declared at load
    (:class:`~textaudit.model_traits.ModelTraits`: remote, its protocol, how it scores, its unknown class; its answers
    kept on disk only with ``--score-cache all``) and its counters as the classifier's."""
    endpoint = Endpoint(url, options=options, prompt=prompt)
    clf = BatchedClassifier(endpoint, output=endpoint.output, num_classes=endpoint._num_classes,
                            batch_size=batch_size or endpoint.batch_size, cache_size=cache_size, name=endpoint.name,
                            labels=endpoint.labels)
    clf.stats = endpoint.stats
    clf.fingerprint = endpoint.fingerprint
    clf.score_kind = "remote"  # an endpoint can change behind its URL
    clf.remote = True  # audits re-check what they found at the endpoint itself (predict_proba_fresh)
    clf.protocol, clf.scores, clf.samples, clf.temperature = (endpoint.protocol, endpoint.scores, endpoint.samples,
                                                              endpoint.temperature)
    clf.unknown_class, clf.scores_description = endpoint.unknown_class, endpoint.scores_description
    return clf
