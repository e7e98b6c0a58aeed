"""``audit serve``: any textaudit classifier behind the plain JSON protocol, for remote audits.

``POST /predict`` with ``{"texts": ["...", ["first", "second"], ...]}`` answers
``{"probs": [[...], ...], "labels": [...], "model": "..."}``; ``GET /predict`` (and ``GET /``)
answers ``{"model", "labels", "num_classes", "fingerprint"}``, which is how an
``http(s)://…/predict`` model learns the class names and the weights' fingerprint before its first
query; ``GET /health`` answers ``{"ok": true}``. Needs ``pip install 'textaudit[serve]'`` (FastAPI and
uvicorn). Requests are answered one at a time (the classifier batches and caches; a lock keeps its
cache consistent), and a bad request is a 422 with a message, never a crash.
"""

import threading
from typing import Union

from textaudit.errors import TextAuditError

__all__ = ["make_app", "serve"]


# no "from __future__ import annotations": FastAPI reads the request body's type from the annotation


def make_app(classifier):
    """A FastAPI application serving ``classifier`` (any :class:`~textaudit.models.Classifier`)."""
    try:
        from fastapi import FastAPI
        from fastapi.responses import JSONResponse
        from pydantic import BaseModel
    except ImportError as e:
        raise TextAuditError(f"audit serve needs FastAPI and uvicorn ({e}); pip install 'textaudit[serve]'") from None

    class Texts(BaseModel):
        texts: list[Union[str, tuple[str, str]]]

    lock = threading.Lock()
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

    @app.post("/predict")
    def predict(body: Texts):
        texts = [t if isinstance(t, str) else (t[0], t[1]) for t in body.texts]
        try:
            with lock:
                probs = classifier.predict_proba(texts) if texts else []
        except TextAuditError as e:
            return JSONResponse({"detail": str(e)}, status_code=422)
        return {"probs": [[float(x) for x in row] for row in probs], "labels": described["labels"],
                "model": classifier.name}

    return app


def serve(classifier, host: str = "127.0.0.1", port: int = 8000, announce=print) -> None:
    """Serve ``classifier`` with uvicorn until interrupted (a port in use is a one-line error)."""
    import socket

    app = make_app(classifier)
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
