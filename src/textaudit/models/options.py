"""Settings of ``llm:`` and ``http(s)://`` models that a model string cannot carry.

The CLI puts one :class:`ModelOptions` in effect for a command (:func:`use_model_options`); every
:func:`~textaudit.models.load_classifier` below it, including those of ``audit run`` suites and
``audit compare``, reads it. Python callers pass ``options=`` or use the context manager.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from textaudit.errors import TextAuditError

__all__ = ["ModelOptions", "current_model_options", "use_model_options"]


@dataclass(frozen=True)
class ModelOptions:
    """``prompt_file``: the prompt of an ``llm:`` or OpenAI-compatible model (default: the built-in
    sentiment prompt). HTTP models only: ``api_key_env`` (the environment variable holding the API
    key, sent as ``Authorization: Bearer``; never logged or written), ``concurrency`` (requests in
    flight), ``timeout`` (seconds per request), ``retries`` (on 429, 5xx, timeouts and dropped
    connections, with exponential backoff), ``query_budget`` (texts sent in this run),
    ``cost_budget`` and ``cost_per_1k_tokens`` (stop when the tokens the endpoint reports cost more).
    Torch models and masked LMs: ``precision`` (``fp32`` or ``bf16`` autocast; default bf16 on CUDA,
    fp32 on a CPU) and ``batch_tokens`` (padded tokens per forward; default 4,096 on a CPU, 65,536
    on a GPU)."""

    prompt_file: Path | None = None
    api_key_env: str | None = None
    concurrency: int = 4
    timeout: float = 60.0
    retries: int = 4
    query_budget: int | None = None
    cost_budget: float | None = None
    cost_per_1k_tokens: float | None = None
    precision: str | None = None
    batch_tokens: int | None = None
    scores: str = "auto"
    samples: int = 1
    temperature: float | None = None
    prompts_per_request: int | None = None

    def __post_init__(self) -> None:
        if self.precision is not None and self.precision not in ("fp32", "bf16", "auto"):
            raise TextAuditError(f"--precision must be fp32 or bf16 (got {self.precision!r})")
        if self.batch_tokens is not None and self.batch_tokens < 1:
            raise TextAuditError(f"--batch-tokens must be at least 1 (got {self.batch_tokens})")
        if self.concurrency < 1:
            raise TextAuditError(f"--concurrency must be at least 1 (got {self.concurrency})")
        if not 0 < self.timeout <= 86400:  # NaN and inf too
            raise TextAuditError(f"--timeout must be a number of seconds between 0 and 86400 (got {self.timeout})")
        if self.retries < 0:
            raise TextAuditError(f"--retries must be 0 or more (got {self.retries})")
        if self.query_budget is not None and self.query_budget < 1:
            raise TextAuditError(f"--query-budget must be at least 1 (got {self.query_budget})")
        if self.scores not in ("auto", "logprobs", "labels"):
            raise TextAuditError(f"--scores must be auto, logprobs or labels (got {self.scores!r})")
        if self.samples < 1:
            raise TextAuditError(f"--samples must be at least 1 (got {self.samples})")
        if self.samples > 1 and self.scores == "logprobs":
            raise TextAuditError("--samples applies to label-only scores (--scores labels or auto), not --scores logprobs")
        if self.temperature is not None and not 0 <= self.temperature <= 2:
            raise TextAuditError(f"--temperature must be between 0 and 2 (got {self.temperature})")
        if self.samples > 1 and self.temperature == 0:
            raise TextAuditError(f"--samples {self.samples} at --temperature 0 would be the same completion {self.samples} "
                                 "times; give a temperature above 0 (default with --samples: 1.0)")
        if self.prompts_per_request is not None and self.prompts_per_request < 1:
            raise TextAuditError(f"--prompts-per-request must be at least 1 (got {self.prompts_per_request})")
        if (self.cost_budget is None) != (self.cost_per_1k_tokens is None):
            raise TextAuditError("--cost-budget and --cost-per-1k-tokens go together (the budget, and what 1,000 tokens cost)")

    def http_only(self) -> list[str]:
        """The options given that only HTTP models use."""
        d = ModelOptions()
        names = {"api_key_env": "--api-key-env", "concurrency": "--concurrency", "timeout": "--timeout",
                 "retries": "--retries", "query_budget": "--query-budget", "cost_budget": "--cost-budget",
                 "scores": "--scores", "samples": "--samples", "temperature": "--temperature",
                 "prompts_per_request": "--prompts-per-request"}
        return [flag for attr, flag in names.items() if getattr(self, attr) != getattr(d, attr)]

    def openai_only(self) -> list[str]:
        """The options given that only OpenAI-compatible endpoints use (not plain JSON ones)."""
        d = ModelOptions()
        names = {"scores": "--scores", "samples": "--samples", "temperature": "--temperature",
                 "prompts_per_request": "--prompts-per-request"}
        return [flag for attr, flag in names.items() if getattr(self, attr) != getattr(d, attr)]

    @property
    def sample_temperature(self) -> float:
        """The temperature of label-only completions: as given, else 0 (greedy) for one sample and
        1.0 for several."""
        if self.temperature is not None:
            return self.temperature
        return 1.0 if self.samples > 1 else 0.0


_CURRENT: contextvars.ContextVar[ModelOptions | None] = contextvars.ContextVar("textaudit_model_options", default=None)


def current_model_options() -> ModelOptions:
    """The options in effect (the defaults outside :func:`use_model_options`)."""
    return _CURRENT.get() or ModelOptions()


@contextlib.contextmanager
def use_model_options(options: ModelOptions) -> Iterator[ModelOptions]:
    """Put ``options`` in effect for the models loaded inside the block."""
    token = _CURRENT.set(options)
    try:
        yield options
    finally:
        _CURRENT.reset(token)
