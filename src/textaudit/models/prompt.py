"""Prompts that make a language model a classifier: a template, verbalisers per class, few-shot examples.

A prompt file (``--prompt-file``, TOML) looks like::

    template = "Review: {text}\\nSentiment:"     # {text}; a sentence pair uses {first} and {second}
    separator = "\\n\\n"                          # between few-shot examples (optional)

    [labels]                  # class order is the order here (class 0 first)
    negative = ["negative", "bad"]
    positive = ["positive", "good"]

    [[examples]]              # optional few-shot examples, shown before the text
    text = "a gorgeous, witty film"
    label = "positive"

    [endpoint]                # optional: OpenAI-compatible endpoints only
    model = "gpt-3.5-turbo-instruct"
    stop = ["\\n"]             # label-only completions end at the first line break
    max_tokens = 3            # ... and take at most this many tokens
    system = "Answer with one word: positive or negative."   # chat endpoints: the system message

    [[endpoint.examples]]     # optional: few-shot examples for label-only endpoints only (they
    text = "a dull mess"      # must *answer* with a verbaliser; a model scored by log-probabilities
    label = "negative"        # needs no demonstration of the format)

The class probabilities of a text are the language model's next-token probabilities of each class's
verbalisers after the rendered prompt, summed per class and normalised over classes:
P(c | x) = Σ_{v ∈ V_c} P(v | prompt(x)) / Σ_{c'} Σ_{v ∈ V_c'} P(v | prompt(x)).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from textaudit.errors import TextAuditError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["Prompt", "load_prompt", "default_prompt", "DEFAULT_PROMPT", "check_endpoint_prompt", "LABEL_TOKENS"]

#: the prompt ``llm:`` and OpenAI-compatible models use without ``--prompt-file``: binary sentiment
#: (class 0 negative, class 1 positive), chosen on SST-2 *train* (benchmarks/llm_prompt_choice.py)
DEFAULT_PROMPT = Path(__file__).resolve().parents[1] / "assets" / "sentiment-prompt.toml"


@dataclass(frozen=True)
class Prompt:
    """A classification prompt. ``labels``: class names in class order; ``verbalizers[c]``: the words
    whose next-token probability counts for class ``c``; ``examples``: few-shot ``(text, class)``."""

    template: str
    labels: tuple[str, ...]
    verbalizers: tuple[tuple[str, ...], ...]
    examples: tuple[tuple[object, int], ...] = ()
    separator: str = "\n\n"
    endpoint: dict = field(default_factory=dict)
    source: str = "built-in"
    #: few-shot examples shown to label-only endpoints instead of ``examples`` (None: ``examples``)
    label_examples: tuple[tuple[object, int], ...] | None = None

    def __post_init__(self) -> None:
        fields = [f for f in ("{text}", "{first}", "{second}") if f in self.template]
        if not fields:
            raise TextAuditError(f"prompt {self.source}: the template needs {{text}} (or {{first}} and {{second}} for pairs)")
        if "{text}" in fields and len(fields) > 1:
            raise TextAuditError(f"prompt {self.source}: use {{text}}, or {{first}} and {{second}}, not both")
        if "{text}" not in fields and len(fields) == 1:  # the model would never see the other text
            raise TextAuditError(f"prompt {self.source}: a sentence-pair template needs both {{first}} and {{second}} "
                                 f"(it has only {fields[0]})")
        if len(self.labels) < 2:
            raise TextAuditError(f"prompt {self.source}: [labels] needs at least two classes")
        seen: dict[str, str] = {}
        for name, words in zip(self.labels, self.verbalizers):
            if not words or not all(isinstance(w, str) and w.strip() for w in words):
                raise TextAuditError(f"prompt {self.source}: class '{name}' needs one or more non-empty verbaliser words")
            for w in words:
                key = w.strip().lower()
                if key in seen and seen[key] != name:
                    raise TextAuditError(f"prompt {self.source}: verbaliser '{w}' is in both '{seen[key]}' and '{name}'")
                seen[key] = name

    @property
    def pairs(self) -> bool:
        """Whether the template is for sentence pairs ({first}, {second})."""
        return "{text}" not in self.template

    def fill(self, text: object) -> str:
        """The template with ``text`` (a string, or a ``(first, second)`` pair) in it."""
        if isinstance(text, str):
            if self.pairs:
                raise TextAuditError(f"prompt {self.source} is for sentence pairs ({{first}}, {{second}}); got a single text")
            return self.template.replace("{text}", text)
        if not self.pairs:
            raise TextAuditError(f"prompt {self.source} has {{text}}; a sentence pair needs a template with {{first}} and {{second}}")
        parts = dict(zip(("first", "second"), text))  # type: ignore[arg-type]
        # one pass: a premise that contains "{second}" stays as it is, not filled with the hypothesis
        return re.sub(r"\{(first|second)\}", lambda m: parts[m.group(1)], self.template)

    def render(self, text: object, *, labels_only: bool = False) -> str:
        """The whole prompt of ``text``: the few-shot examples (each answered with its class's first
        verbaliser), then the template with the text, ending where the verbaliser would follow.
        ``labels_only``: for a model that must generate its answer, with :meth:`shots_for` it."""
        shots = [self.fill(t) + self.lead + self.verbalizers[c][0] for t, c in self.shots_for(labels_only)]
        return self.separator.join([*shots, self.fill(text)])

    def shots_for(self, labels_only: bool = False) -> tuple[tuple[object, int], ...]:
        """The few-shot examples shown: ``[[endpoint.examples]]`` to label-only endpoints where the file
        has them, else ``[[examples]]``."""
        return self.label_examples if labels_only and self.label_examples is not None else self.examples

    @property
    def lead(self) -> str:
        """What comes between the prompt and a verbaliser: a space, unless the template ends in whitespace."""
        return "" if self.template[-1:].isspace() else " "

    def fingerprint(self) -> str:
        """12 hex digits identifying what the prompt asks (a results header records it via the model's fingerprint)."""
        parts = [self.template, self.labels, self.verbalizers, self.examples, self.separator, self.endpoint]
        if self.label_examples is not None:  # (absent from older prompts' fingerprints, which stay the same)
            parts.append(self.label_examples)
        blob = json.dumps(parts, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _parse(data: dict, source: str) -> Prompt:
    unknown = set(data) - {"template", "labels", "examples", "separator", "endpoint"}
    if unknown:
        raise TextAuditError(f"prompt {source}: unknown key(s) {', '.join(sorted(unknown))}; "
                             "use template, labels, examples, separator, endpoint")
    template, labels = data.get("template"), data.get("labels")
    if not isinstance(template, str) or not template.strip():
        raise TextAuditError(f"prompt {source}: needs template = \"... {{text}} ...\"")
    if not isinstance(labels, dict) or not labels:
        raise TextAuditError(f"prompt {source}: needs a [labels] table: class name = [\"verbaliser\", ...]")
    names = [str(k) for k in labels]
    verbs = tuple(tuple([v] if isinstance(v, str) else list(v)) if isinstance(v, (str, list)) else ()
                  for v in labels.values())
    shots = _examples(data.get("examples", []), names, source, "example")
    endpoint = data.get("endpoint", {})
    if not isinstance(endpoint, dict):
        raise TextAuditError(f"prompt {source}: [endpoint] must be a table (model = \"...\")")
    endpoint = dict(endpoint)
    label_shots = None
    if "examples" in endpoint:
        label_shots = tuple(_examples(endpoint.pop("examples"), names, source, "[[endpoint.examples]] example"))
    return Prompt(template=template, labels=tuple(names), verbalizers=verbs, examples=tuple(shots),
                  separator=str(data.get("separator", "\n\n")), endpoint=endpoint, source=source,
                  label_examples=label_shots)


def _examples(items: object, names: list[str], source: str, what: str) -> list[tuple[object, int]]:
    """``[[examples]]`` (or ``[[endpoint.examples]]``) as ``(text, class)``; a malformed one is a one-line error."""
    if not isinstance(items, list):
        raise TextAuditError(f"prompt {source}: {what}s must be an array of tables ([[...]] with text and label)")
    shots = []
    for i, ex in enumerate(items):
        if not isinstance(ex, dict) or "label" not in ex or not ({"text"} <= set(ex) or {"first", "second"} <= set(ex)):
            raise TextAuditError(f"prompt {source}: {what} {i + 1} needs text (or first and second) and label")
        if str(ex["label"]) not in names:
            raise TextAuditError(f"prompt {source}: {what} {i + 1} has label '{ex['label']}', not one of {', '.join(names)}")
        text = ex["text"] if "text" in ex else (str(ex["first"]), str(ex["second"]))
        shots.append((text, names.index(str(ex["label"]))))
    return shots


def load_prompt(path: str | Path) -> Prompt:
    """Read a prompt file (TOML; see the module docstring); every mistake is a one-line error."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise TextAuditError(f"prompt file '{p}' does not exist")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise TextAuditError(f"prompt file '{p}' is not valid TOML: {e}") from None
    except (RecursionError, ValueError) as e:  # nested 100,000 deep; an integer of more digits than Python converts
        what = "nested too deeply" if isinstance(e, RecursionError) else "a value too large"
        raise TextAuditError(f"prompt file '{p}' is not valid TOML: {what} to read") from None
    prompt = _parse(data, str(p))
    for text, _ in (*prompt.examples, *(prompt.label_examples or ())):
        prompt.fill(text)  # an example of the wrong kind (pair vs text) fails here, not mid-run
    return prompt


def default_prompt() -> Prompt:
    """The built-in sentiment prompt (:data:`DEFAULT_PROMPT`)."""
    return load_prompt(DEFAULT_PROMPT)


#: tokens a label-only completion may take (``[endpoint] max_tokens`` overrides)
LABEL_TOKENS = 5
#: the [endpoint] keys a prompt may set for an OpenAI-compatible endpoint (and [[endpoint.examples]])
ENDPOINT_KEYS = ("model", "top_logprobs", "max_tokens", "stop", "system")


def check_endpoint_prompt(prompt: Prompt) -> None:
    """A prompt's ``[endpoint]`` table as an OpenAI-compatible endpoint takes it: known keys only, a system message
    that is text, one to four stop strings, a whole number of tokens; one line naming the prompt's file otherwise."""
    unknown = set(prompt.endpoint) - set(ENDPOINT_KEYS)
    if unknown:
        raise TextAuditError(f"prompt {prompt.source}: unknown [endpoint] key(s) {', '.join(sorted(unknown))}; "
                             f"use {', '.join(ENDPOINT_KEYS)}, [[endpoint.examples]]")
    system = prompt.endpoint.get("system")
    if system is not None and not (isinstance(system, str) and system.strip()):
        raise TextAuditError(f"prompt {prompt.source}: [endpoint] system must be the text of a chat's "
                             f"system message (got {system!r})")
    stop = prompt.endpoint.get("stop", ["\n"])
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not 0 < len(stop) <= 4 or not all(isinstance(x, str) and x for x in stop):
        raise TextAuditError(f"prompt {prompt.source}: [endpoint] stop must be one to four non-empty "
                             f"strings (as OpenAI's API takes them; got {prompt.endpoint['stop']!r})")
    mt = prompt.endpoint.get("max_tokens", LABEL_TOKENS)
    if not isinstance(mt, int) or isinstance(mt, bool) or mt < 1:
        raise TextAuditError(f"prompt {prompt.source}: [endpoint] max_tokens must be a whole number "
                             f"of at least 1 (got {mt!r})")
