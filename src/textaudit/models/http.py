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

Every request goes through one retry loop: 429, 5xx, timeouts and dropped connections are retried
``retries`` times with exponential backoff (0.5 s, 1 s, 2 s, … with jitter, or the server's
``Retry-After``); any other failure, or the last retry's, is a one-line error. ``concurrency``
requests are in flight at once. The API key is read from an environment variable and is sent only in
the ``Authorization`` header: never in a name, a message, a results file or a log. A run stops with
a one-line error before it sends more texts than ``query_budget`` or spends more than
``cost_budget`` (tokens the endpoint reports × ``cost_per_1k_tokens`` / 1000); what was written so far
is kept, and ``--resume`` continues.
"""

from __future__ import annotations

import math
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from textaudit.errors import StopRun, TextAuditError
from textaudit.models.batched import BatchedClassifier
from textaudit.models.options import ModelOptions
from textaudit.models.prompt import Prompt, default_prompt

__all__ = ["HttpClassifier", "load_http_classifier", "protocol_of", "public_url", "RETRY_STATUS"]

#: statuses worth another try
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
#: statuses that say this request (its input) is wrong, not the endpoint: one example's error
PER_INPUT_STATUS = frozenset({400, 413, 422})
#: texts per request: plain JSON, completions (a list of prompts), chat (one message)
PER_REQUEST = {"json": 32, "completions": 16, "chat": 1}


def protocol_of(url: str) -> str:
    """``chat`` (…/chat/completions), ``completions`` (…/completions) or ``json`` (anything else)."""
    path = urlsplit(url).path.rstrip("/")
    if path.endswith("/chat/completions"):
        return "chat"
    return "completions" if path.endswith("/completions") else "json"


def public_url(url: str) -> str:
    """``url`` without user:password@ and without its query string (either may hold a secret)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _logsumexp(values: list[float]) -> float:
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


class HttpClassifier(BatchedClassifier):
    """A :class:`BatchedClassifier` whose forward is a remote endpoint (see the module docstring).
    ``stats.requests`` counts every HTTP request (retries and the ``GET`` of the class names
    included), ``stats.retries`` the retried ones, ``stats.tokens`` the tokens endpoints reported."""

    def __init__(self, url: str, *, options: ModelOptions | None = None, prompt: Prompt | None = None,
                 batch_size: int | None = None, cache_size: int = 100_000):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TextAuditError(f"'{public_url(url)}' is not an http(s) URL with a host")
        self.url = url
        self.protocol = protocol_of(url)
        self.options = options or ModelOptions()
        if self.protocol == "json" and prompt is not None:
            raise TextAuditError("a plain JSON endpoint returns probabilities itself: it takes no prompt")
        self.prompt = prompt if self.protocol == "json" or prompt is not None else default_prompt()
        if self.prompt is not None:
            unknown = set(self.prompt.endpoint) - {"model", "top_logprobs"}
            if unknown:
                raise TextAuditError(f"prompt {self.prompt.source}: unknown [endpoint] key(s) {', '.join(sorted(unknown))}; "
                                     "use model, top_logprobs")
        self._key = self._read_key()
        self.per_request = PER_REQUEST[self.protocol]
        super().__init__(self._remote, output="probs" if self.protocol == "json" else "logits",
                         num_classes=len(self.prompt.labels) if self.prompt else None,
                         batch_size=batch_size or self.per_request * self.options.concurrency,
                         cache_size=cache_size, name=public_url(url),
                         labels=list(self.prompt.labels) if self.prompt else None)
        self.sent = 0  # texts sent in this run (the query budget)
        self.tokens = 0  # tokens the endpoint reported (the cost budget)
        self._lock = threading.Lock()
        self._client = None
        self._pool: ThreadPoolExecutor | None = None
        self.fingerprint = self._identity()

    # -- secrets ----------------------------------------------------------------------------------
    def _read_key(self) -> str | None:
        env = self.options.api_key_env
        if env:
            key = os.environ.get(env)
            if not key:
                raise TextAuditError(f"--api-key-env {env}: that environment variable is not set")
            return key
        for name in (("OPENAI_API_KEY", "TEXTAUDIT_API_KEY") if self.protocol != "json" else ("TEXTAUDIT_API_KEY",)):
            if os.environ.get(name):
                return os.environ[name]
        return None

    def _redact(self, text: str) -> str:
        text = " ".join(str(text).split())
        for secret in filter(None, (self._key, urlsplit(self.url).password, urlsplit(self.url).query)):
            text = text.replace(secret, "***")
        return text

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.update(_client=None, _pool=None, _lock=None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the key, never the query string
        return f"HttpClassifier({self.name!r}, protocol={self.protocol!r})"

    # -- transport --------------------------------------------------------------------------------
    def _http(self):
        if self._client is None:
            import httpx

            headers = {"User-Agent": "textaudit", "Content-Type": "application/json"}
            if self._key:
                headers["Authorization"] = f"Bearer {self._key}"
            limits = httpx.Limits(max_connections=self.options.concurrency)
            self._client = httpx.Client(headers=headers, timeout=self.options.timeout, limits=limits)
        return self._client

    def _count(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                setattr(self.stats, k, getattr(self.stats, k) + v)

    def _request(self, method: str, payload: dict | None = None, *, quiet: bool = False):
        """The decoded JSON answer of one request, retried as the module docstring says; ``quiet``:
        None instead of an error (the optional GET of the class names)."""
        import httpx

        client, opts = self._http(), self.options
        last = ""
        for attempt in range(opts.retries + 1):
            self._count(requests=1)
            wait = min(30.0, 0.5 * 2 ** attempt) * (1 + 0.25 * random.random())
            try:
                r = client.request(method, self.url, json=payload)
            except httpx.TimeoutException:
                last = f"timed out after {opts.timeout:g} s"
            except httpx.TransportError as e:
                last = f"connection failed ({type(e).__name__}: {self._redact(e)})"
            else:
                if r.status_code < 400:
                    try:
                        return r.json()
                    except ValueError:
                        if quiet:
                            return None
                        raise StopRun(f"endpoint {self.name} answered HTTP {r.status_code} with something "
                                      "that is not JSON") from None
                body = self._redact(r.text)[:160]
                last = f"answered HTTP {r.status_code}" + (f": {body}" if body else "")
                if quiet:
                    return None
                if r.status_code not in RETRY_STATUS:
                    hint = "; check the API key (--api-key-env)" if r.status_code in (401, 403) else ""
                    # a request this input makes invalid (too long, ...) fails this example only;
                    # the endpoint refusing every request (the key, the URL) stops the run
                    err = TextAuditError if r.status_code in PER_INPUT_STATUS else StopRun
                    raise err(f"endpoint {self.name} {last}{hint}")
                after = r.headers.get("Retry-After")
                if after is not None:
                    try:
                        wait = min(60.0, max(0.0, float(after)))
                    except ValueError:
                        pass
            if quiet:
                return None
            if attempt < opts.retries:
                self._count(retries=1)
                time.sleep(wait)
        tries = opts.retries + 1
        hint = "raise --timeout, lower --concurrency" if last.startswith("timed out") else "try again later, raise --retries"
        raise StopRun(f"endpoint {self.name} {last} ({tries} attempt{'s' * (tries > 1)}); {hint}; "
                             "results written so far are kept (--resume continues)")

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
                    return f"{self.name}#{info['fingerprint']}"
            return self.name
        model = self.prompt.endpoint.get("model", "") if self.prompt else ""
        return f"{self.name}#{model}+prompt:{self.prompt.fingerprint()}" if self.prompt else self.name

    # -- budgets ----------------------------------------------------------------------------------
    def _spend(self, n: int) -> None:
        opts = self.options
        with self._lock:
            if opts.query_budget is not None and self.sent + n > opts.query_budget:
                raise StopRun(f"the query budget is spent ({self.sent} of --query-budget {opts.query_budget} texts "
                                     "sent); results written so far are kept: raise it and rerun with --resume")
            if opts.cost_budget is not None and self.tokens * opts.cost_per_1k_tokens / 1000 >= opts.cost_budget:
                raise StopRun(f"the cost budget is spent ({self.tokens} tokens cost "
                                     f"{self.tokens * opts.cost_per_1k_tokens / 1000:.4g} of --cost-budget "
                                     f"{opts.cost_budget:g}); results written so far are kept: raise it and rerun with --resume")
            self.sent += n

    # -- protocols --------------------------------------------------------------------------------
    def _remote(self, texts: list) -> np.ndarray:
        self._spend(len(texts))
        chunks = [texts[s:s + self.per_request] for s in range(0, len(texts), self.per_request)]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.options.concurrency, thread_name_prefix="textaudit-http")
        one = {"json": self._json, "completions": self._completions, "chat": self._chat}[self.protocol]
        rows: list = []
        for part in (self._pool.map(one, chunks) if len(chunks) > 1 else map(one, chunks)):
            rows.extend(part)
        return np.asarray(rows, dtype=np.float64)

    def _json(self, texts: list) -> list:
        answer = self._request("POST", {"texts": [t if isinstance(t, str) else list(t) for t in texts]})
        probs = answer.get("probs") if isinstance(answer, dict) else None
        if not isinstance(probs, list) or len(probs) != len(texts):
            raise StopRun(f"endpoint {self.name} must answer {{\"probs\": [[...], ...]}} with one row per text "
                                 f"(sent {len(texts)}, got {type(probs).__name__ if probs is None else len(probs)} rows)")
        return probs

    def _used(self, answer: dict) -> None:
        usage = answer.get("usage") if isinstance(answer, dict) else None
        if isinstance(usage, dict) and isinstance(usage.get("total_tokens"), (int, float)):
            self._count(tokens=int(usage["total_tokens"]))  # the statistics (reset per example) ...
            with self._lock:
                self.tokens += int(usage["total_tokens"])  # ... and the run's cost budget (never reset)

    def _openai_payload(self) -> dict:
        payload: dict = {"max_tokens": 1, "temperature": 0}
        if self.prompt.endpoint.get("model"):
            payload["model"] = str(self.prompt.endpoint["model"])
        return payload

    def _completions(self, texts: list) -> list:
        top = int(self.prompt.endpoint.get("top_logprobs", 5))
        answer = self._request("POST", {**self._openai_payload(), "prompt": [self.prompt.render(t) for t in texts],
                                        "logprobs": top})
        self._used(answer)
        try:
            choices = sorted(answer["choices"], key=lambda c: c.get("index", 0))
            tops = [c["logprobs"]["top_logprobs"][0] for c in choices]
        except (KeyError, IndexError, TypeError):
            raise StopRun(f"endpoint {self.name} answered without choices[].logprobs.top_logprobs; "
                                 "does it support logprobs?") from None
        if len(tops) != len(texts):
            raise StopRun(f"endpoint {self.name} answered {len(tops)} choices for {len(texts)} prompts")
        return [self._scores(dict(t)) for t in tops]

    def _chat(self, texts: list) -> list:
        top = int(self.prompt.endpoint.get("top_logprobs", 5))
        rows = []
        for t in texts:
            answer = self._request("POST", {**self._openai_payload(), "logprobs": True, "top_logprobs": top,
                                            "messages": [{"role": "user", "content": self.prompt.render(t)}]})
            self._used(answer)
            try:
                first = answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
                rows.append(self._scores({d["token"]: d["logprob"] for d in first}))
            except (KeyError, IndexError, TypeError):
                raise StopRun(f"endpoint {self.name} answered without choices[0].logprobs.content[0].top_logprobs; "
                                     "does it support logprobs?") from None
        return rows

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
                         batch_size: int | None = None) -> HttpClassifier:
    """An :class:`HttpClassifier` for ``url`` (``--model http(s)://…``)."""
    return HttpClassifier(url, options=options, prompt=prompt, batch_size=batch_size)
