"""The one redaction every output passes: the secrets this process knows, and the text without them.

A secret becomes known when textaudit reads it: a model spec's URL (its user:password@ and the values of
query keys that carry credentials, :func:`public_url`), an endpoint's API key, a tracker's token or
password (:func:`register_env`). :func:`redact` replaces each of them, in every form a server or a
library may echo it (:func:`secret_forms`: as sent, URL-, JSON-, HTML-escaped, base64), by ``***``, and
removes user:password@ and credential query values from any URL it finds. The outputs call it at
their one place each — the streams of a command (:class:`RedactingStream`), results files and their
names (:mod:`textaudit.formats.jsonl`, :func:`safe_name`), compare summaries, tracker fields — and
``tests/test_secrets.py`` holds the writers to that.
"""

from __future__ import annotations

import io
import json
import re
import threading
from typing import Any, Iterable
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

__all__ = ["register", "register_url", "unencoded_credentials", "register_env", "redact", "redact_obj", "safe_name", "public_url",
           "secret_forms", "RedactingStream", "MASK", "MIN_SECRET", "CREDENTIAL_KEYS", "ENV_SECRETS"]

#: what a secret becomes
MASK = "***"
#: a shorter value is never treated as a secret (it would mask ordinary words)
MIN_SECRET = 4
#: query keys whose values are credentials (a value this long is one whatever its key: a token)
CREDENTIAL_KEYS = re.compile(r"key|token|secret|sig|signature|password|passwd|pass|pwd|auth|code|credential|session",
                             re.I)
LONG_VALUE = 16
#: environment variables whose values are secrets (API keys, tracker tokens and passwords)
ENV_SECRETS = ("OPENAI_API_KEY", "TEXTAUDIT_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "MLFLOW_TRACKING_TOKEN",
               "MLFLOW_TRACKING_PASSWORD", "AZURE_OPENAI_API_KEY", "ANTHROPIC_API_KEY")

_lock = threading.Lock()
_secrets: set[str] = set()
_forms: list[str] = []  # every form of every secret, longest first
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>,]+")


def secret_forms(secret: str) -> list[str]:
    """Every form in which a server may echo ``secret``: as sent, white space removed, URL-encoded (%2F or
    %2f, and + for spaces), JSON-escaped (with \\/ for /, \\uXXXX or \\uxxxx for every non-alphanumeric
    character, or escaped twice: a JSON string inside a JSON string), HTML-escaped and base64-encoded
    (standard or URL-safe, with or without padding); longest first, so a longer form is replaced whole."""
    import base64
    import html
    from urllib.parse import quote, quote_plus

    plain = "".join(secret.split())
    json_form = json.dumps(plain)[1:-1]
    escaped = "".join(ch if ch.isalnum() else f"\\u{ord(ch):04x}" for ch in plain)
    url = quote(plain, safe="")
    b64 = [base64.b64encode(plain.encode()).decode(), base64.urlsafe_b64encode(plain.encode()).decode()]
    forms = {secret, plain, url, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), url), quote_plus(plain, safe=""),
             json_form, json_form.replace("/", "\\/"), json.dumps(json_form)[1:-1],
             json.dumps(json_form.replace("/", "\\/"))[1:-1], escaped,
             re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), escaped), html.escape(plain),
             *b64, *(b.rstrip("=") for b in b64)}
    return sorted((f for f in forms if f), key=len, reverse=True)


def register(*secrets: str | None) -> None:
    """Make each secret (at least :data:`MIN_SECRET` characters) known to :func:`redact`, in all its forms."""
    new = [s.strip() for s in secrets if isinstance(s, str) and len(s.strip()) >= MIN_SECRET]
    if not new:
        return
    global _forms
    with _lock:
        fresh = [s for s in new if s not in _secrets]
        if not fresh:
            return
        _secrets.update(fresh)
        forms = set(_forms)
        for s in fresh:
            forms.update(f for f in secret_forms(s) if len(f) >= MIN_SECRET)
        _forms = sorted(forms, key=len, reverse=True)


def _split_url(url: str) -> tuple[str, str | None, str]:
    """``(scheme://, userinfo or None, the rest)``. The userinfo is the authority's part before its last ``@``
    (the authority ends at the first ``/ ? #``), as every URL parser reads it; and when a password holds an
    unencoded ``/ ? #`` — the authority then ends inside it, with a "port" that is not a number, and the
    ``@`` that closes the userinfo comes after — the userinfo runs to that ``@``, so the secret is found whole."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "", None, url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        userinfo, _, host = authority.rpartition("@")
        return scheme + "://", userinfo, host + tail
    port = authority.rpartition(":")[2] if ":" in authority else ""
    if port and not port.isdigit() and "@" in tail:  # "user:pa/ss@host": the password runs past the first /
        at = tail.index("@")
        return scheme + "://", authority + tail[:at], tail[at + 1:]
    return scheme + "://", None, rest


def _url_secrets(url: str) -> list[str]:
    """The credentials a URL carries: its user and password, user:password (as basic authentication sends
    them), and the values of its credential query keys."""
    scheme, userinfo, rest = _split_url(url)
    out: list[str] = []
    if userinfo:
        user, colon, password = userinfo.partition(":")
        out += [password, unquote(password)] if password else []  # as typed, and as sent (percent-decoded)
        if user and (colon or len(user) >= LONG_VALUE):  # a user alone is a name, unless it is a token
            out += [user, unquote(user)]
        if user and password:
            out += [userinfo, f"{unquote(user)}:{unquote(password)}"]
    query = rest.partition("?")[2].partition("#")[0]
    for key, value in parse_qsl(query, keep_blank_values=False):
        if CREDENTIAL_KEYS.search(key) or len(value) >= LONG_VALUE:
            out.append(value)
    return list(dict.fromkeys(x for x in out if x))


def unencoded_credentials(url: str) -> bool:
    """True when ``url``'s user:password holds a character a URL cannot carry unencoded there (``/ ? #``): no
    client reads such a URL as meant, so it is refused (percent-encode them: ``/`` as ``%2F``)."""
    _, userinfo, _ = _split_url(url)
    return bool(userinfo) and any(c in userinfo for c in "/?#")


def public_url(url: str) -> str:
    """``url`` without user:password@ and without its query string (either may hold a secret)."""
    scheme, _, rest = _split_url(url)
    bare = scheme + rest.partition("?")[0].partition("#")[0]
    try:
        parts = urlsplit(bare)
        host = parts.hostname or ""
        netloc = host + (f":{parts.port}" if parts.port else "")
    except ValueError:  # a port that is not a number: the bare URL, as typed
        return bare
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def register_url(url: str) -> str:
    """Make ``url``'s credentials known (:func:`_url_secrets`) and return its public form (:func:`public_url`)."""
    register(*_url_secrets(url))
    return public_url(url) if "://" in url else url


def register_env(names: Iterable[str] = ()) -> None:
    """Make the values of :data:`ENV_SECRETS` and of ``names`` set in the environment known, and the
    credentials of a tracking URI (``MLFLOW_TRACKING_URI``'s user:password@ and query)."""
    import os

    register(*(os.environ.get(n) for n in (*ENV_SECRETS, *names)))
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        register(*_url_secrets(uri))


def _forget_all() -> None:
    """Forget every secret (the tests' isolation: one test's secrets are not the next one's; a process, one CLI
    run, keeps what it learnt)."""
    global _forms
    with _lock:
        _secrets.clear()
        _forms = []


def redact(text: str) -> str:
    """``text`` with every known secret, in every form, replaced by ``***``, and with any URL's
    user:password@ and credential query values removed."""
    if not text:
        return text

    def url(m: re.Match) -> str:
        u = m.group(0)
        found = _url_secrets(u)
        if not found:
            return u
        register(*found)
        for s in sorted(found, key=len, reverse=True):
            u = u.replace(s, MASK)
        return u

    if "://" in text:
        text = _URL.sub(url, text)
    forms = _forms
    if forms:
        for f in forms:
            if f in text:
                text = text.replace(f, MASK)
    return text


def redact_obj(obj: Any) -> Any:
    """``obj`` (JSON-like: dicts, lists, strings, numbers) with :func:`redact` applied to every string, keys too."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact(k) if isinstance(k, str) else k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact_obj(v) for v in obj) if isinstance(obj, list) else [redact_obj(v) for v in obj]
    return obj


def safe_name(text: str) -> str:
    """A file-name part from ``text`` (a model spec, say): redacted, then every character a file name
    should not hold (a path separator, ``:``, ``?``, ``*``, …) replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9._+=@-]+", "_", redact(public_url(text) if "://" in text else text)).strip("_") or "_"


class RedactingStream(io.TextIOBase):
    """A text stream that writes :func:`redact` of each write to ``inner`` (a command's stdout or stderr).
    Each write is redacted whole: click, rich and tqdm write a message, a table or a bar in one call, so a
    secret is never split between two writes by them."""

    def __init__(self, inner: Any):
        self.inner = inner

    def write(self, s: str) -> int:  # type: ignore[override]
        self.inner.write(redact(s))
        return len(s)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return bool(getattr(self.inner, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
