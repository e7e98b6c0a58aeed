"""``audit serve``: put a model behind the plain JSON endpoint that ``--model http://…`` audits."""

from __future__ import annotations

from typing import Annotated

import typer

from textaudit.cli.app import AuditCommand, app
from textaudit.cli.options import ModelOpt, with_model_options
from textaudit.cli.output import notice
from textaudit.errors import TextAuditError
from textaudit.models import load_classifier
from textaudit.serve import serve as run_server


@app.command(cls=AuditCommand)
@with_model_options
def serve(
    model: ModelOpt,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (0.0.0.0: every interface).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = 8000,
    max_body_bytes: Annotated[int, typer.Option("--max-body-bytes", min=1, help=(
        "Largest request body read; a larger one is answered 413."))] = 1 << 20,
    max_batch: Annotated[int, typer.Option("--max-batch", min=1, help=(
        "Most texts in one request; more is answered 413."))] = 512,
) -> None:
    """Serve a model (zoo, hf:, llm:, file.py:obj, …) on POST /predict {"texts": [...]} -> {"probs": [[...]]},
    so that a team can audit it remotely with --model http://host:port/predict."""
    try:  # FastAPI missing is an error before the model loads
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise TextAuditError(f"audit serve needs FastAPI and uvicorn ({e}); pip install 'textaudit[serve]'") from None
    run_server(load_classifier(model), host=host, port=port, announce=notice, max_body_bytes=max_body_bytes,
               max_batch=max_batch)
