"""Datasets as ``datasets.Dataset`` objects with two columns: ``text`` (str) and ``label`` (int).

Specs understood by :func:`load_dataset`:

- ``sst2`` — the corpus's default split (``default_split``, "train" unless the caller says
  otherwise: commands that *report* numbers pass "dev");
- ``sst2:train``, ``sst2:dev``, ``sst2:test`` — one split of GLUE SST-2 through the resource
  layer (``$TEXTAUDIT_DATA/sst2/*.tsv`` or ``glue/sst2`` online);
- a local ``.csv``, ``.tsv``, ``.jsonl`` (or ``.json`` lines) file; its text and label columns are
  found by name (``text``/``sentence``/``content`` and ``label``) or given explicitly.

Labels must be integer class ids 0..C-1 (strings of digits are accepted). Every problem with a
file — missing, empty, missing column, non-integer or negative labels — is a one-line
:class:`~textaudit.errors.TextAuditError`.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from textaudit.errors import TextAuditError
from textaudit.resources import resolve

if TYPE_CHECKING:  # pragma: no cover
    import datasets

__all__ = ["load_dataset", "read_table", "dataset_id", "example_ids", "check_labels", "CORPORA"]

TEXT_COLUMNS = ("text", "sentence", "content")
LABEL_COLUMNS = ("label",)
CORPORA = {"sst2": ("train", "dev", "test")}


def _rows_from_file(path: Path) -> tuple[list[str], list[dict]]:
    suffix = path.suffix.lower()
    try:
        if suffix in (".tsv", ".csv"):
            with open(path, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f, delimiter="\t" if suffix == ".tsv" else ",", quoting=csv.QUOTE_NONE
                                        if suffix == ".tsv" else csv.QUOTE_MINIMAL)
                rows = list(reader)
                columns = list(reader.fieldnames or [])
        elif suffix in (".jsonl", ".json"):
            rows, columns = [], []
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError:
                        raise TextAuditError(f"{path}:{lineno} is not valid JSON; expected one JSON object per line") from None
                    if not isinstance(obj, dict):
                        raise TextAuditError(f"{path}:{lineno} is not a JSON object; expected {{\"text\":..., \"label\":...}}")
                    rows.append(obj)
                    columns.extend(k for k in obj if k not in columns)
        else:
            raise TextAuditError(f"unsupported data file '{path.name}'; use .csv, .tsv or .jsonl")
    except UnicodeDecodeError:
        raise TextAuditError(f"{path} is not UTF-8 text; re-save it as UTF-8") from None
    return columns, rows


def _pick(columns: list[str], wanted: str | None, defaults: Iterable[str], role: str, path: Path) -> str:
    if wanted is not None:
        if wanted not in columns:
            raise TextAuditError(f"{path.name} has no {role} column '{wanted}' (columns: {', '.join(columns) or 'none'})")
        return wanted
    for c in defaults:
        if c in columns:
            return c
    flag = "--text-column" if role == "text" else "--label-column"
    raise TextAuditError(
        f"{path.name} has no {role} column (looked for {', '.join(defaults)}; columns: {', '.join(columns) or 'none'}); "
        f"name it with {flag}"
    )


def _as_label(value, path: Path, lineno: int) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        label = int(value) if not isinstance(value, float) or value.is_integer() else None
        if label is None:
            raise ValueError
    except (TypeError, ValueError):
        raise TextAuditError(
            f"{path.name} row {lineno}: label {value!r} is not an integer class id; labels must be 0..C-1"
        ) from None
    if label < 0:
        raise TextAuditError(f"{path.name} row {lineno}: label {label} is negative (unlabelled data?); labels must be 0..C-1")
    return label


def read_table(path: str | Path, text_column: str | None = None, label_column: str | None = None,
               *, require_labels: bool = True) -> tuple[list[str], list[int]]:
    """Return ``(texts, labels)`` read from a local csv/tsv/jsonl file, validated."""
    path = Path(path)
    if not path.is_file():
        raise TextAuditError(f"data file '{path}' does not exist")
    columns, rows = _rows_from_file(path)
    if not rows:
        raise TextAuditError(f"data file '{path}' has no rows")
    tcol = _pick(columns, text_column, TEXT_COLUMNS, "text", path)
    lcol = _pick(columns, label_column, LABEL_COLUMNS, "label", path) if require_labels or label_column else None
    texts, labels = [], []
    for i, row in enumerate(rows, 2 if path.suffix.lower() in (".csv", ".tsv") else 1):
        t = row.get(tcol)
        if t is None or not str(t).strip():
            raise TextAuditError(f"{path.name} row {i}: empty text in column '{tcol}'")
        texts.append(str(t).strip())
        if lcol is not None:
            labels.append(_as_label(row.get(lcol), path, i))
    return texts, labels


def _parse_spec(spec: str, default_split: str) -> tuple[str, str] | None:
    name, _, split = spec.partition(":")
    if name.lower() not in CORPORA:
        return None
    split = (split or default_split).lower()
    if split == "validation":
        split = "dev"
    if split not in CORPORA[name.lower()]:
        raise TextAuditError(f"unknown split '{split}' of {name}; use one of {', '.join(CORPORA[name.lower()])}")
    return name.lower(), split


def dataset_id(spec: str, default_split: str = "train") -> str:
    """The canonical name of a data spec, used in example ids and results headers: a corpus with
    its split spelled out (``sst2`` and ``SST2:validation`` are ``sst2:dev`` where dev is the
    default), a local file by its name (so a moved file still resumes)."""
    parsed = _parse_spec(str(spec).strip(), default_split)
    if parsed is not None:
        return f"{parsed[0]}:{parsed[1]}"
    return Path(str(spec).strip()).expanduser().name


def example_ids(data: str, n: int, default_split: str = "dev") -> list[str]:
    """Ids of a dataset's examples: ``<canonical data>:<i>`` (``sst2`` is ``sst2:dev``; a local file by
    its name, so a moved file resumes)."""
    prefix = dataset_id(data, default_split)
    return [f"{prefix}:{i}" for i in range(n)]


def load_dataset(spec: str, *, text_column: str | None = None, label_column: str | None = None,
                 default_split: str = "train", limit: int | None = None) -> "datasets.Dataset":
    """Return a ``datasets.Dataset`` with columns ``text`` and ``label`` for ``spec``.

    ``limit`` keeps the first ``limit`` rows (in file order, so "first 200 dev examples" is
    reproducible).
    """
    import datasets

    if not spec or not str(spec).strip():
        raise TextAuditError("empty data spec; use sst2:dev or a path to a .csv/.tsv/.jsonl file")
    parsed = _parse_spec(str(spec), default_split)
    if parsed is not None:
        name, split = parsed
        root = resolve(name)
        path = root / f"{split}.tsv"
        if not path.is_file():
            raise TextAuditError(f"{name} split '{split}' is missing: no {path}")
        texts, labels = read_table(path, text_column, label_column)
    else:
        path = Path(spec).expanduser()
        if not path.exists() and path.suffix.lower() not in (".csv", ".tsv", ".jsonl", ".json"):
            raise TextAuditError(f"unknown dataset '{spec}'; use one of {', '.join(CORPORA)} (with :train/:dev/:test) "
                                 "or a path to a .csv/.tsv/.jsonl file")
        texts, labels = read_table(path, text_column, label_column)
    if limit is not None:
        if limit < 1:
            raise TextAuditError(f"--limit must be at least 1 (got {limit})")
        texts, labels = texts[:limit], labels[:limit]
    return datasets.Dataset.from_dict({"text": texts, "label": labels})


def check_labels(labels: Iterable[int], num_classes: int, model: str) -> None:
    """A label the model has no class for would count as a success (attack) or a miss (accuracy)
    without meaning anything: refuse it in one line."""
    for i, y in enumerate(labels):
        if not 0 <= int(y) < num_classes:
            raise TextAuditError(f"example {i} has label {int(y)}, but model {model} has {num_classes} classes "
                                 f"(0..{num_classes - 1}); check --label-column or the data's labels")
