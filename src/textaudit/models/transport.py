"""An endpoint's HTTP transport, apart from what its answers mean (:mod:`textaudit.models.http`).

One request's decoded JSON answer, through one retry loop: 429, 5xx, timeouts and dropped connections are retried
``retries`` times with exponential backoff (0.5 s, 1 s, 2 s, … with jitter, or the server's ``Retry-After``); any
other failure, or the last retry's, is a one-line error; a request is bounded as a whole by ``timeout`` (not each
read); no redirect is followed. ``concurrency`` connections at most. The API key is read from an environment
variable, sent only in the ``Authorization`` header, and registered with :mod:`textaudit.secrets` (so are the URL's
credentials): no message of this module, nor anything a server echoes, carries it.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any, Callable

from textaudit.errors import StopRun, TextAuditError
from textaudit.models.options import ModelOptions
from textaudit.secrets import redact, register

__all__ = ["Transport", "EndpointRefused", "RETRY_STATUS", "PER_INPUT_STATUS", "header_key"]

#: statuses worth another try
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
#: statuses that say this request (its input) is wrong, not the endpoint: one example's error
PER_INPUT_STATUS = frozenset({400, 413, 422})


class EndpointRefused(TextAuditError):
    """The endpoint refused one request (HTTP 400, 413, 422): this input, not the endpoint."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def header_key(key: str, name: str) -> str:
    """An API key as an HTTP header carries it: surrounding white space (a key file saved with CR/LF)
    dropped; a character a header cannot carry (non-ASCII, a control character) is a one-line error that
    never shows the key."""
    key = key.strip()
    bad = next((i for i, ch in enumerate(key) if not 0x21 <= ord(ch) <= 0x7E), None)
    if bad is not None:
        what = "a non-ASCII character" if ord(key[bad]) > 0x7E else "a control character or a space"
        raise TextAuditError(f"the API key in {name} holds {what} (at position {bad + 1}), which an HTTP header cannot "
                             "carry; check the key (it is not shown)")
    return key


class Transport:
    """The requests to one ``url`` (named ``name`` in every message: its public form). ``key_names``: the
    environment variables an API key is read from when ``options.api_key_env`` names none; ``count(requests=…,
    retries=…)`` is told of every request and retry (the classifier's statistics)."""

    def __init__(self, url: str, name: str, options: ModelOptions, *, key_names: tuple[str, ...],
                 count: Callable[..., None]):
        self.url, self.name, self.options, self.count = url, name, options, count
        self.key = self._read_key(key_names)
        register(self.key)
        self._client: Any = None

    def _read_key(self, key_names: tuple[str, ...]) -> str | None:
        env = self.options.api_key_env
        if env:
            key = os.environ.get(env)
            if not key:
                raise TextAuditError(f"--api-key-env {env}: that environment variable is not set")
            return header_key(key, env)
        for name in key_names:
            if os.environ.get(name):
                return header_key(os.environ[name], name)
        return None

    @staticmethod
    def redact(text: object) -> str:
        """``text`` on one line without any secret (the API key, the URL's password and query) in any form a server
        may echo it: as sent, URL-encoded, JSON- or HTML-escaped (see :func:`textaudit.secrets.secret_forms`)."""
        return redact(" ".join(str(text).split()))  # the key and the URL's secrets were registered when it was built

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_client": None}

    def client(self):
        """The connection pool (made on first use, in each process)."""
        if self._client is None:
            import httpx

            headers = {"User-Agent": "textaudit", "Content-Type": "application/json"}
            if self.key:
                headers["Authorization"] = f"Bearer {self.key}"
            limits = httpx.Limits(max_connections=self.options.concurrency)
            self._client = httpx.Client(headers=headers, timeout=self.options.timeout, limits=limits)
        return self._client

    def send(self, client, method: str, payload: dict | None):
        """One request, its answer read whole, bounded as a whole by ``--timeout``: httpx's timeout
        bounds each read, so an endpoint dripping a byte every half second would hold a request for as
        long as it likes; here the deadline is checked after every chunk (a request ends within one
        read of it) and a late answer is a timeout like any other."""
        import httpx

        deadline = time.monotonic() + self.options.timeout
        with client.stream(method, self.url, json=payload) as r:
            chunks = []
            for chunk in r.iter_bytes():
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout(f"the answer took longer than {self.options.timeout:g} s", request=r.request)
            # the chunks are decoded already (gzip and the like): the headers that describe the raw stream go
            headers = [(k, v) for k, v in r.headers.multi_items()
                       if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
            return httpx.Response(r.status_code, headers=headers, content=b"".join(chunks), request=r.request)

    def request(self, method: str, payload: dict | None = None, *, quiet: bool = False):
        """The decoded JSON answer of one request, retried as the module docstring says; ``quiet``:
        None instead of an error (the optional GET of the class names)."""
        import httpx

        client, opts = self.client(), self.options
        last = ""
        for attempt in range(opts.retries + 1):
            self.count(requests=1)
            wait = min(30.0, 0.5 * 2 ** attempt) * (1 + 0.25 * random.random())
            try:
                r = self.send(client, method, payload)
            except httpx.TimeoutException:
                last = f"timed out after {opts.timeout:g} s"
            except httpx.TransportError as e:
                last = f"connection failed ({type(e).__name__}: {self.redact(e)})"
            else:
                if 300 <= r.status_code < 400:  # no redirect is followed (a key must not travel to another host)
                    if quiet:
                        return None
                    to = self.redact(r.headers.get("Location", "")) or "nowhere"
                    raise StopRun(f"endpoint {self.name} answered HTTP {r.status_code}, a redirect to {to}; textaudit "
                                  "follows no redirects: give the final URL as --model")
                if r.status_code < 400:
                    try:
                        return r.json()
                    except ValueError:
                        if quiet:
                            return None
                        raise StopRun(f"endpoint {self.name} answered HTTP {r.status_code} with something "
                                      "that is not JSON") from None
                body = self.redact(r.text)[:160]
                last = f"answered HTTP {r.status_code}" + (f": {body}" if body else "")
                if quiet:
                    return None
                if r.status_code not in RETRY_STATUS:
                    hint = "; check the API key (--api-key-env)" if r.status_code in (401, 403) else ""
                    # a request this input makes invalid (too long, ...) fails this example only;
                    # the endpoint refusing every request (the key, the URL) stops the run
                    if r.status_code in PER_INPUT_STATUS:
                        raise EndpointRefused(f"endpoint {self.name} {last}", r.status_code)
                    raise StopRun(f"endpoint {self.name} {last}{hint}")
                after = r.headers.get("Retry-After")
                if after is not None:
                    try:
                        wait = min(60.0, max(0.0, float(after)))
                    except ValueError:
                        pass
            if quiet:
                return None
            if attempt < opts.retries:
                self.count(retries=1)
                time.sleep(wait)
        tries = opts.retries + 1
        hint = "raise --timeout, lower --concurrency" if last.startswith("timed out") else "try again later, raise --retries"
        raise StopRun(f"endpoint {self.name} {last} ({tries} attempt{'s' * (tries > 1)}); {hint}")


