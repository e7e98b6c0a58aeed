"""``audit serve``: any textaudit classifier behind the plain JSON protocol, for remote audits.

``POST /predict`` with ``{"texts": ["...", ["first", "second"], ...]}`` answers
``{"probs": [[...], ...], "labels": [...], "model": "..."}``; ``GET /predict`` (and ``GET /``)
answers ``{"model", "labels", "num_classes", "fingerprint"}``, which is how an
``http(s)://…/predict`` model learns the class names and the weights' fingerprint before its first
query; ``GET /health`` answers ``{"ok": true}``. Needs ``pip install 'textaudit[serve]'`` (FastAPI and
uvicorn).

What anyone who can reach the port may send is bounded: a body over ``max_body_bytes`` or a batch of
more than ``max_batch`` texts is a 413 (read no further), the classifier's cache is bounded in
characters as well as entries, and a request's texts go through the model one classifier batch at a
time under a first-come-first-served lock, so a small request is answered while a large one is
still running (the classifier batches and caches; the lock keeps its cache consistent). A bad request
is a 422 with a message, never a crash; an error inside the model is logged here and answered with a
500 that says only that (its text may hold paths or data the client should not see).
"""

import collections
import logging
import threading
from typing import Union

from textaudit.errors import TextAuditError

__all__ = ["make_app", "serve", "FairLock", "MAX_BODY_BYTES", "MAX_BATCH", "CACHE_CHARS"]

MAX_BODY_BYTES = 1 << 20  #: the largest request body read (1 MiB; --max-body-bytes)
MAX_BATCH = 512  #: the most texts one request may send (--max-batch)
CACHE_CHARS = 32 << 20  #: the characters of cached texts a server keeps (32 Mi characters)
CHUNK = 32  #: texts scored per turn of the lock, for a classifier without a batch size
log = logging.getLogger("textaudit.serve")


class FairLock:
    """A lock handed to waiting threads in the order they asked (``threading.Lock`` lets the thread that
    releases it take it straight back, so a large request's next chunk would starve a small request)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiting: collections.deque = collections.deque()
        self._held = False

    def __enter__(self) -> "FairLock":
        with self._guard:
            if not self._held:
                self._held = True
                return self
            turn = threading.Event()
            self._waiting.append(turn)
        turn.wait()  # the releasing thread hands the lock over: _held stays True
        return self

    def __exit__(self, *exc: object) -> None:
        with self._guard:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._held = False


# no "from __future__ import annotations": FastAPI reads the request body's type from the annotation


#: a body refused as too large is still read (and dropped) up to this size, so that the client gets its 413
DRAIN_BYTES = 256 * 2**20


def make_app(classifier, *, max_body_bytes: int = MAX_BODY_BYTES, max_batch: int = MAX_BATCH):
    """A FastAPI application serving ``classifier`` (any :class:`~textaudit.models.Classifier`)."""
    try:
        from fastapi import FastAPI, Request
        from fastapi.responses import JSONResponse
        from pydantic import BaseModel, ValidationError
    except ImportError as e:
        raise TextAuditError(f"audit serve needs FastAPI and uvicorn ({e}); pip install 'textaudit[serve]'") from None

    class Texts(BaseModel):
        texts: list[Union[str, tuple[str, str]]]

    if getattr(classifier, "cache_chars", False) is None:
        classifier.cache_chars = CACHE_CHARS
    if hasattr(classifier, "score_cache"):  # texts from anyone, without end: nothing of them is kept on disk
        classifier.score_cache = None
    lock = FairLock()
    app = FastAPI(title=f"textaudit: {classifier.name}", docs_url=None, redoc_url=None)

    def info() -> dict:
        labels = getattr(classifier, "labels", None)  # class names, when the model has them
        return {"model": classifier.name, "labels": list(labels) if labels else None,
                "num_classes": classifier.num_classes, "fingerprint": getattr(classifier, "fingerprint", None)}

    with lock:
        described = info()  # num_classes may need one forward: do it now, not on the first request

    @app.get("/")
    @app.get("/predict")
    def describe() -> dict:
        return described

    @app.get("/health")
    def health() -> dict:
        return {"ok": True}

    @app.post("/")
    def wrong_path() -> JSONResponse:
        return JSONResponse({"detail": 'POST {"texts": [...]} to /predict (this is its base URL; GET / describes '
                                       "the model)"}, status_code=405, headers={"Allow": "GET"})

    def too_large(what: str) -> JSONResponse:
        return JSONResponse({"detail": f"{what}; send fewer or shorter texts per request"}, status_code=413,
                            headers={"Connection": "close"})

    @app.post("/predict")
    async def predict(request: Request):
        body, refused = await _read_body(request, max_body_bytes)
        if refused is not None:
            return too_large(refused)
        try:
            texts = Texts.model_validate_json(body).texts
        except ValidationError as e:
            return JSONResponse({"detail": e.errors(include_url=False, include_context=False, include_input=False)},
                                status_code=422)
        if len(texts) > max_batch:
            return too_large(f"{len(texts)} texts, over this server's {max_batch} per request")
        texts = [t if isinstance(t, str) else (t[0], t[1]) for t in texts]
        from starlette.concurrency import run_in_threadpool

        try:
            probs = await run_in_threadpool(_score_in_turns, classifier, lock, texts)
        except TextAuditError as e:
            if getattr(classifier, "user_code", False):  # the model's own exception text stays here
                log.warning("the model failed on a request: %s", e)
                return JSONResponse({"detail": "the model failed on this request (the server's log says why)"},
                                    status_code=500)
            return JSONResponse({"detail": str(e)}, status_code=422)
        return {"probs": [[float(x) for x in row] for row in probs], "labels": described["labels"],
                "model": classifier.name}

    return app


async def _drain(request) -> None:
    """Read (and drop) a body refused as too large, up to :data:`DRAIN_BYTES`: a server that answers and
    closes while the client is still sending resets the connection, and the client sees a broken pipe
    instead of the 413 (an 8 MB body through urllib did, every time)."""
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > DRAIN_BYTES:
            break


async def _read_body(request, max_body_bytes: int) -> tuple:
    """``(body, None)``, or ``(None, why)`` for a body over ``max_body_bytes`` (declared, or as it streams in: a
    chunked body has no length to check up front; the rest of a refused one is read and dropped)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > max_body_bytes:
        await _drain(request)
        return None, f"the body is {int(declared)} bytes, over this server's {max_body_bytes}"
    body, seen = bytearray(), 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen <= max_body_bytes:
            body += chunk
        elif seen > DRAIN_BYTES:  # past the limit the rest is read and dropped (see _drain), up to this
            break
    if seen > max_body_bytes:
        return None, f"the body is over this server's {max_body_bytes} bytes"
    return bytes(body), None


def _score_in_turns(classifier, lock, texts: list) -> list:
    """The rows of ``texts``, one classifier batch at a time under the fair lock: other requests get turns
    between batches."""
    rows: list = []
    chunk = getattr(classifier, "batch_size", None) or CHUNK  # one forward batch per turn: no extra forwards
    for start in range(0, len(texts), chunk):
        with lock:
            rows.extend(classifier.predict_proba(texts[start:start + chunk]))
    return rows


def serve(classifier, host: str = "127.0.0.1", port: int = 8000, announce=print, *,
          max_body_bytes: int = MAX_BODY_BYTES, max_batch: int = MAX_BATCH) -> None:
    """Serve ``classifier`` with uvicorn until interrupted (a port in use is a one-line error)."""
    import socket

    app = make_app(classifier, max_body_bytes=max_body_bytes, max_batch=max_batch)
    import uvicorn

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as e:
        raise TextAuditError(f"cannot listen on {host}:{port} ({e.strerror or e}); pick another --port") from None
    announce(f"serving {classifier.name} at http://{host}:{port}/predict "
             '(POST {"texts": [...]} -> {"probs": [[...]]}); Ctrl-C stops')
    uvicorn.run(app, host=host, port=port, log_level="warning")
