"""Datasets as ``datasets.Dataset`` objects: ``id``, ``text`` (str), ``label`` (int) and, for sentence
pairs, ``pair`` (the second text).

Specs understood by :func:`load_dataset`:

- ``sst2`` — the corpus's default split (``default_split``, "train" unless the caller says
  otherwise: commands that *report* numbers pass "dev");
- ``sst2:train``, ``sst2:dev``, ``sst2:test`` — one split of GLUE SST-2 through the resource
  layer (``$TEXTAUDIT_DATA/sst2/*.tsv`` or ``glue/sst2`` online);
- ``hf:<id>[:<config>][:<split>]`` — a dataset through ``datasets.load_dataset`` (a hub id when
  online, e.g. ``hf:glue:mnli:validation_matched``), or a local directory: one written by
  ``save_to_disk`` (read with ``load_from_disk``) or a script-free folder of data files. A second
  part that names a split (train, validation, dev, test, or any name with "train", "valid", "test"
  in it) is the split, otherwise the config; dev means validation;
- a local ``.csv``, ``.tsv``, ``.jsonl`` (or ``.json`` lines), ``.parquet`` or ``.arrow`` file.

Columns: the text is found by name (``text``/``sentence``/``content``) or ``--text-column``; the label by
``label`` or ``--label-column``; a second text (NLI hypothesis, paraphrase, QA passage) by ``--pair-column``.
Labels are integer class ids 0..C-1 (strings of digits are accepted) or class *names* (strings): names are
numbered in sorted order when read, then mapped onto the model's own class order or a ``--label-map``
(:func:`align_labels`; never used as a model's ids by their sort order), and the map travels with the dataset
as a ``ClassLabel`` feature (results files record it). ``limit`` keeps the first N examples; ``sample`` N
picks N at random (``seed``); each example's ``id`` (``<data>:<row>``) is its row in the full file either way,
so results resume and merge whichever subset ran. Every problem with a file — missing, empty, a missing
column, a bad label — is a one-line :class:`~textaudit.errors.TextAuditError`.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from textaudit.errors import TextAuditError, first_line
from textaudit.files import loads_json
from textaudit.resources import resolve

if TYPE_CHECKING:  # pragma: no cover
    import datasets

__all__ = ["load_dataset", "read_table", "dataset_id", "example_ids", "check_labels", "align_labels", "label_names",
           "parse_label_map", "CORPUS_LABELS",
           "pairs_of", "as_pairs", "split_sides", "check_side", "data_config", "parse_hf_spec", "CORPORA", "SIDES", "FILE_SUFFIXES"]

TEXT_COLUMNS = ("text", "sentence", "content")
LABEL_COLUMNS = ("label",)
CORPORA = {"sst2": ("train", "dev", "test")}
#: the class names of the corpora's labels, by id (shared/data's README: SST-2's 0 is negative, 1 positive)
CORPUS_LABELS: dict[str, list[str]] = {"sst2": ["negative", "positive"]}
#: a dataset's ``info.description`` when its class names were strings of the data, numbered in sorted order (no
#: file said which id each means): they are matched to a model's names, never used as its ids (:func:`align_labels`)
SORTED_NAMES = "textaudit: class names read as strings, numbered in sorted order"
FILE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json", ".parquet", ".arrow")
#: which text of a sentence pair the neighbourhood and the patch word act on (the other stays verbatim)
SIDES = ("first", "second")
_SPLIT_WORDS = ("train", "valid", "dev", "test")


@dataclass
class Table:
    """Rows read from any source, before validation: ``columns``, ``rows`` (dicts), and the class
    names a source declared for its label column (a ``datasets`` ``ClassLabel``)."""

    name: str
    columns: list[str]
    rows: list[dict]
    label_names: dict[str, list[str]]
    first_row: int = 1  # how the file numbers its first data row in messages (2 below a csv header)


def _rows_from_file(path: Path) -> Table:
    suffix = path.suffix.lower()
    try:
        if suffix in (".tsv", ".csv"):
            with open(path, newline="", encoding="utf-8-sig") as f:
                reader = csv.DictReader(f, delimiter="\t" if suffix == ".tsv" else ",", quoting=csv.QUOTE_NONE
                                        if suffix == ".tsv" else csv.QUOTE_MINIMAL)
                rows = list(reader)
                columns = list(reader.fieldnames or [])
            return Table(path.name, columns, rows, {}, 2)
        if suffix in (".jsonl", ".json"):
            rows, columns = [], []
            with open(path, encoding="utf-8-sig") as f:
                for lineno, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        obj = loads_json(line)
                    except json.JSONDecodeError:
                        raise TextAuditError(f"{path}:{lineno} is not valid JSON; expected one JSON object per line") from None
                    if not isinstance(obj, dict):
                        raise TextAuditError(f"{path}:{lineno} is not a JSON object; expected {{\"text\":..., \"label\":...}}")
                    rows.append(obj)
                    columns.extend(k for k in obj if k not in columns)
            return Table(path.name, columns, rows, {})
        if suffix in (".parquet", ".arrow"):
            return _table_from_arrow(path)
    except UnicodeDecodeError:
        raise TextAuditError(f"{path} is not UTF-8 text; re-save it as UTF-8") from None
    except csv.Error as e:  # a field over the csv module's limit (128 KiB), a NUL byte, a quote left open
        raise TextAuditError(f"{path} is not a readable {suffix[1:].upper()} file ({e}); check its rows") from None
    raise TextAuditError(f"unsupported data file '{path.name}'; use {', '.join(FILE_SUFFIXES)} or hf:<dataset>")


def _check_text(value: object, name: str, row: int, where: str) -> None:
    """A text must be a string: a list, bytes or a number would be written out as "['a', 'fine']",
    "b'...'" or "42" and audited as if it were the sentence."""
    if value is None:
        raise TextAuditError(f"{name} row {row}: empty text in {where}")
    if not isinstance(value, str):
        raise TextAuditError(f"{name} row {row}: the text in {where} is {type(value).__name__} {str(value)[:40]!r}, "
                             "not a string; give a column of texts (--text-column)")


def _table_from_arrow(path: Path) -> Table:
    """A parquet file, or an Arrow file (IPC file or stream, as ``datasets`` writes them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if path.suffix.lower() == ".parquet":
            table = pq.read_table(path)
        else:
            try:
                with pa.memory_map(str(path)) as src:
                    table = pa.ipc.open_stream(src).read_all()
            except pa.ArrowInvalid:
                with pa.memory_map(str(path)) as src:
                    table = pa.ipc.open_file(src).read_all()
    except (pa.ArrowInvalid, OSError) as e:
        kind = "parquet" if path.suffix.lower() == ".parquet" else "Arrow"
        first = first_line(e, 120)
        raise TextAuditError(f"{path} is not a readable {kind} file ({first})") from None
    names = _class_names_from_schema(table.schema)
    return Table(path.name, list(table.column_names), table.to_pylist(), names)


def _class_names_from_schema(schema) -> dict[str, list[str]]:
    """Class names a ``datasets`` file keeps in its schema metadata (``ClassLabel`` features)."""
    meta = (schema.metadata or {}).get(b"huggingface")
    if not meta:
        return {}
    try:
        feats = loads_json(meta).get("info", {}).get("features", {})
    except (ValueError, AttributeError):
        return {}
    return {c: list(f["names"]) for c, f in feats.items()
            if isinstance(f, dict) and f.get("_type") == "ClassLabel" and f.get("names")}


def _table_from_hf(ds, name: str) -> Table:
    from datasets import ClassLabel

    names = {c: list(f.names) for c, f in ds.features.items() if isinstance(f, ClassLabel)}
    return Table(name, list(ds.column_names), ds.to_list(), names)


def _pick(columns: list[str], wanted: str | None, defaults: Iterable[str], role: str, where: str) -> str:
    if wanted is not None:
        if wanted not in columns:
            raise TextAuditError(f"{where} has no {role} column '{wanted}' (columns: {', '.join(columns) or 'none'})")
        return wanted
    for c in defaults:
        if c in columns:
            return c
    flag = "--text-column" if role == "text" else "--label-column"
    raise TextAuditError(
        f"{where} has no {role} column (looked for {', '.join(defaults)}; columns: {', '.join(columns) or 'none'}); "
        f"name it with {flag}"
    )


def _as_label(value, where: str, lineno: int) -> int | str:
    """An integer class id, or a class name (a non-numeric string) to be mapped later."""
    if isinstance(value, str) and value.strip() and not value.strip().lstrip("+-").isdigit():
        try:
            value = float(value)
        except ValueError:
            return value.strip()
    try:
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, str):
            value = int(value.strip())
        label = int(value) if not isinstance(value, float) or value.is_integer() else None
        if label is None:
            raise ValueError
    except (TypeError, ValueError):
        raise TextAuditError(
            f"{where} row {lineno}: label {value!r} is neither a class id 0..C-1 nor a class name"
        ) from None
    if label < 0:
        raise TextAuditError(f"{where} row {lineno}: label {label} is negative (unlabelled data?); labels must be 0..C-1")
    return label


def _validate(table: Table, text_column: str | None, label_column: str | None, pair_column: str | None,
              require_labels: bool) -> tuple[list[str], list[str] | None, list[int], list[str] | None, bool]:
    """Return ``(texts, pairs, labels, class names, sorted_names)`` of a table, validated (labels -1 where none
    are needed and the table has none); ``sorted_names``: the names were strings of the data, numbered in sorted
    order (no schema declared their ids)."""
    if not table.rows:
        raise TextAuditError(f"data file '{table.name}' has no rows")
    tcol = _pick(table.columns, text_column, TEXT_COLUMNS, "text", table.name)
    pcol = _pick(table.columns, pair_column, (), "pair", table.name) if pair_column is not None else None
    if pcol is not None and pcol == tcol:
        raise TextAuditError(f"--pair-column '{pcol}' is the text column too; give the second text's column")
    lcol = None
    if require_labels or label_column:
        lcol = _pick(table.columns, label_column, LABEL_COLUMNS, "label", table.name)
    elif any(c in table.columns for c in LABEL_COLUMNS):
        lcol = next(c for c in LABEL_COLUMNS if c in table.columns)
    texts: list[str] = []
    pairs: list[str] | None = [] if pcol else None
    raw: list[int | str] = []
    for i, row in enumerate(table.rows, table.first_row):
        t = row.get(tcol)
        _check_text(t, table.name, i, f"column '{tcol}'")
        if not t.strip():
            raise TextAuditError(f"{table.name} row {i}: empty text in column '{tcol}'")
        texts.append(t.strip())
        if pcol is not None:
            q = row.get(pcol)
            _check_text(q, table.name, i, f"--pair-column '{pcol}'")
            if not q.strip():
                raise TextAuditError(f"{table.name} row {i}: empty second text in --pair-column '{pcol}'")
            pairs.append(q.strip())  # type: ignore[union-attr]
        if lcol is not None:
            raw.append(_as_label(row.get(lcol), table.name, i))
    if lcol is None:
        return texts, pairs, [-1] * len(texts), None, False
    names = table.label_names.get(lcol)
    strings = sorted({y for y in raw if isinstance(y, str)})
    if strings and len(strings) < len(raw) and any(isinstance(y, int) for y in raw):
        first = next(i for i, y in enumerate(raw, table.first_row) if isinstance(y, int))
        raise TextAuditError(f"{table.name}: column '{lcol}' mixes class names ({strings[0]!r}, …) and class ids "
                             f"(row {first}); use one or the other")
    if strings:  # names only: numbered in sorted order, which says nothing of what a model means (align_labels)
        names = strings
        index = {n: i for i, n in enumerate(names)}
        return texts, pairs, [index[y] for y in raw], names, True  # type: ignore[index]
    return texts, pairs, [int(y) for y in raw], names, False


def read_table(path: str | Path, text_column: str | None = None, label_column: str | None = None,
               *, require_labels: bool = True) -> tuple[list[str], list[int]]:
    """Return ``(texts, labels)`` read from a local data file, validated (class names numbered in sorted
    order: give them a model's meaning with :func:`align_labels`)."""
    path = Path(path)
    if not path.is_file():
        raise TextAuditError(f"data file '{path}' does not exist")
    texts, _, labels, _, _ = _validate(_rows_from_file(path), text_column, label_column, None, require_labels)
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


def _is_split(part: str) -> bool:
    low = part.lower()
    return "[" in low or any(w in low for w in _SPLIT_WORDS)


def parse_hf_spec(spec: str, default_split: str) -> tuple[str, str | None, str]:
    """``hf:<id>[:<config>][:<split>]`` → ``(id, config, split)`` (split in the dataset's own words:
    dev is validation)."""
    parts = spec[3:].split(":")
    if not parts[0].strip():
        raise TextAuditError("hf: needs a dataset, e.g. hf:glue:sst2:validation or hf:./my_saved_dataset")
    if len(parts) > 3:
        raise TextAuditError(f"'{spec}' has too many parts; use hf:<id>[:<config>][:<split>]")
    ident, config, split = parts[0], None, None
    if len(parts) == 3:
        config, split = parts[1] or None, parts[2] or None
    elif len(parts) == 2:
        if _is_split(parts[1]):
            split = parts[1]
        else:
            config = parts[1] or None
    split = split or default_split
    return ident, config, "validation" if split.lower() == "dev" else split


def _hf_table(spec: str, default_split: str) -> tuple[Table, str]:
    """Read ``hf:...`` (see the module docstring); return the table and the split read."""
    import datasets

    ident, config, split = parse_hf_spec(spec, default_split)
    local = Path(ident).expanduser()
    if ident.startswith((".", "/", "~")) and not local.exists():  # a path, not a hub id: say so, not "offline"
        raise TextAuditError(f"hf:{ident}: no such directory (give a folder written by save_to_disk, or of data files)")
    try:
        if local.is_dir() and ((local / "dataset_dict.json").is_file() or (local / "state.json").is_file()):
            loaded = datasets.load_from_disk(str(local))  # written by save_to_disk
        else:
            loaded = datasets.load_dataset(str(local) if local.is_dir() else ident, config)
    except FileNotFoundError as e:
        where = "directory" if local.is_dir() else "dataset (not found, or offline here: set HF_DATASETS_OFFLINE=0 online)"
        first = first_line(e, 140)
        raise TextAuditError(f"cannot load {where} '{ident}': {first}") from None
    except (ValueError, OSError, ConnectionError) as e:
        first = first_line(e, 160)
        raise TextAuditError(f"cannot load dataset '{ident}'{f' (config {config})' if config else ''}: {first}") from None
    except Exception as e:  # datasets raises its own types (DatasetNotFoundError, ConfigNamesError ...)
        if type(e).__module__.split(".")[0] != "datasets":
            raise
        first = first_line(e, 160)
        raise TextAuditError(f"cannot load dataset '{ident}': {first}") from None
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            alias = {"validation": ("dev", "valid", "val")}.get(split, ())
            found = next((a for a in alias if a in loaded), None)
            if found is None:
                raise TextAuditError(f"dataset '{ident}' has no split '{split}' (splits: {', '.join(loaded)}); "
                                     f"name one: hf:{ident}{':' + config if config else ''}:<split>")
            split = found
        loaded = loaded[split]
    return _table_from_hf(loaded, Path(ident).name or ident), split


def dataset_id(spec: str, default_split: str = "train") -> str:
    """The canonical name of a data spec, used in example ids and results headers: a corpus with
    its split spelled out (``sst2`` and ``SST2:validation`` are ``sst2:dev`` where dev is the
    default), an ``hf:`` dataset with its config and split (a local one by its folder's name), a
    local file by its name (so a moved file still resumes)."""
    spec = str(spec).strip()
    if spec.startswith("hf:"):
        ident, config, split = parse_hf_spec(spec, default_split)
        local = Path(ident).expanduser()
        name = local.name if local.is_dir() else ident
        return ":".join(["hf", name] + ([config] if config else []) + [split])
    parsed = _parse_spec(spec, default_split)
    if parsed is not None:
        return f"{parsed[0]}:{parsed[1]}"
    return Path(spec).expanduser().name


def example_ids(data: str, n: int, default_split: str = "dev") -> list[str]:
    """Ids of a dataset's first ``n`` rows: ``<canonical data>:<row>`` (``sst2`` is ``sst2:dev``; a
    local file by its name, so a moved file resumes). :func:`load_dataset` puts them in ``ds["id"]``."""
    prefix = dataset_id(data, default_split)
    return [f"{prefix}:{i}" for i in range(n)]


def _table_of(spec: str, default_split: str) -> Table:
    """The rows of a data spec, before validation (a corpus split, ``hf:``, a local file)."""
    parsed = _parse_spec(spec, default_split)
    if spec.startswith("hf:"):
        table, _ = _hf_table(spec, default_split)
    elif parsed is not None:
        name, split = parsed
        path = resolve(name) / f"{split}.tsv"
        if not path.is_file():
            raise TextAuditError(f"{name} split '{split}' is missing: no {path}")
        table = _rows_from_file(path)
    else:
        path = Path(spec).expanduser()
        if not path.exists() and path.suffix.lower() not in FILE_SUFFIXES:
            raise TextAuditError(f"unknown dataset '{spec}'; use one of {', '.join(CORPORA)} (with :train/:dev/:test), "
                                 f"hf:<dataset>, or a path to a {'/'.join(s.lstrip('.') for s in FILE_SUFFIXES)} file")
        if path.is_dir():
            raise TextAuditError(f"'{path}' is a directory; for a saved or local HuggingFace dataset use hf:{spec}")
        if not path.is_file():
            raise TextAuditError(f"data file '{path}' does not exist")
        table = _rows_from_file(path)
    return table


def _kept(n: int, limit: int | None, sample: int | None, seed: int) -> list[int]:
    """The rows ``--limit`` (the first N) or ``--sample`` (N drawn with ``seed``, in file order) keep of ``n``."""
    keep = list(range(n))
    if limit is not None:
        return keep[:limit]
    if sample is not None and sample < n:
        import numpy as np

        return sorted(np.random.default_rng(seed).choice(n, sample, replace=False).tolist())
    return keep


def label_lists(spec: str, column: str, *, default_split: str = "dev", limit: int | None = None,
                sample: int | None = None, seed: int = 0) -> list[list[str]]:
    """A multi-label dataset's column of label *lists*, one per row as :func:`load_dataset` keeps them (the same
    ``limit``/``sample``): a list (JSON lines, parquet, ``hf:``), or a text of one — a JSON list, or names separated by
    ``,``, ``;`` or ``|`` (an empty text: no label on). Anything else is one line naming the row."""
    table = _table_of(str(spec).strip(), default_split)
    if column not in table.columns:
        raise TextAuditError(f"{table.name} has no column {column!r} (columns: {', '.join(table.columns)})")
    out: list[list[str]] = []
    for i, row in enumerate(table.rows):
        v = row.get(column)
        if isinstance(v, str) and v.strip().startswith("["):
            try:
                v = loads_json(v)
            except ValueError:
                pass
        if isinstance(v, str):
            v = [p for p in re.split(r"[,;|]", v) if p.strip()]
        if v is None:
            v = []
        if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
            raise TextAuditError(f"{table.name}: row {i + table.first_row}: column {column} must hold a list of label "
                                 f"names, got {str(v)[:40]!r}")
        out.append([x.strip() for x in v])
    return [out[i] for i in _kept(len(out), limit, sample, seed)]


def check_limit_sample(limit: int | None, sample: int | None) -> None:
    """One-line error for a ``--limit`` or ``--sample`` below 1, or both given (cheap: callers check before loading models)."""
    if limit is not None and limit < 1:
        raise TextAuditError(f"--limit must be at least 1 (got {limit})")
    if sample is not None and sample < 1:
        raise TextAuditError(f"--sample must be at least 1 (got {sample})")
    if limit is not None and sample is not None:
        raise TextAuditError("give --limit N (the first N examples) or --sample N (N at random), not both")


def load_dataset(spec: str, *, text_column: str | None = None, label_column: str | None = None,
                 pair_column: str | None = None, default_split: str = "train", limit: int | None = None,
                 sample: int | None = None, seed: int = 0, require_labels: bool = True) -> "datasets.Dataset":
    """Return a ``datasets.Dataset`` with columns ``id``, ``text``, ``label`` (and ``pair`` with
    ``pair_column``) for ``spec`` (see the module docstring).

    ``limit`` keeps the first ``limit`` rows (in file order, so "first 200 dev examples" is
    reproducible); ``sample`` keeps that many rows drawn without replacement with ``seed``, in file
    order. Class names, when the labels have them, are the ``label`` feature's names
    (:func:`label_names`). With ``require_labels=False`` a source without a label column gets label −1.
    """
    import datasets

    if not spec or not str(spec).strip():
        raise TextAuditError("empty data spec; use sst2:dev, hf:<dataset> or a path to a "
                             f"{'/'.join(s.lstrip('.') for s in FILE_SUFFIXES)} file")
    check_limit_sample(limit, sample)
    spec = str(spec).strip()
    table = _table_of(spec, default_split)
    texts, pairs, labels, names, sorted_names = _validate(table, text_column, label_column, pair_column, require_labels)
    ids = example_ids(spec, len(texts), default_split)
    keep = _kept(len(texts), limit, sample, seed)
    cols: dict[str, list[Any]] = {"id": [ids[i] for i in keep], "text": [texts[i] for i in keep],
                                  "label": [labels[i] for i in keep]}
    feats = {"id": datasets.Value("string"), "text": datasets.Value("string")}
    if pairs is not None:
        cols["pair"] = [pairs[i] for i in keep]
        feats["pair"] = datasets.Value("string")
    feats["label"] = datasets.ClassLabel(names=names) if names and min(labels) >= 0 else datasets.Value("int64")
    features = datasets.Features(feats)
    info = datasets.DatasetInfo(description=SORTED_NAMES if sorted_names else "", features=features)
    return datasets.Dataset.from_dict(cols, features=features, info=info)


def label_names(ds: "datasets.Dataset") -> list[str] | None:
    """The class names of a dataset's labels (None when the labels are bare ids)."""
    from datasets import ClassLabel

    feat = ds.features.get("label")
    return list(feat.names) if isinstance(feat, ClassLabel) else None


def pairs_of(ds: "datasets.Dataset") -> list[str] | None:
    """The second texts of a sentence-pair dataset (None for single texts)."""
    return list(ds["pair"]) if "pair" in ds.column_names else None


def parse_label_map(text: str | None) -> dict[str, int] | None:
    """``--label-map happy=1,unhappy=0`` as ``{"happy": 1, "unhappy": 0}`` (None when not given)."""
    if text is None:
        return None
    out: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, eq, cid = part.rpartition("=")
        if not eq or not name.strip() or not cid.strip().isdigit():
            raise TextAuditError(f"--label-map takes name=id pairs, comma-separated, e.g. happy=1,unhappy=0 (got {part!r}): "
                                 "an id is a whole number from 0")
        if name.strip().lower() in out:
            raise TextAuditError(f"--label-map names {name.strip()!r} twice")
        out[name.strip().lower()] = int(cid)
    if not out:
        raise TextAuditError("--label-map takes name=id pairs, comma-separated, e.g. happy=1,unhappy=0")
    return out


def align_labels(ds: "datasets.Dataset", classifier, label_map: dict[str, int] | None = None
                 ) -> tuple["datasets.Dataset", list[str] | None]:
    """Re-number a dataset's class *names* in the model's own class order and return it with the label
    map (id → name) a results file records: by ``label_map`` (``--label-map``: name → the model's class
    id) when given, else by the model's class names (its ``labels``, e.g. a HuggingFace ``id2label`` or a
    zoo checkpoint's classes). Bare ids are kept as they are; names the model does not have are a one-line
    error. A model without class names keeps the ids a file declared for its names (a ``ClassLabel``),
    but names that were only strings of the data are never numbered by their sort order: that is a
    one-line error asking for ids or a ``--label-map`` (a file labelled happy/unhappy read by sort order
    would invert a model that means 1 = happy, silently)."""
    names = label_names(ds)
    declared = [str(n) for n in (getattr(classifier, "labels", None) or [])]
    model_names = [] if declared == [str(i) for i in range(len(declared))] else declared  # bare ids name nothing
    who = getattr(classifier, "name", "?")
    if names is None:
        if label_map is not None:
            raise TextAuditError("--label-map maps class names, but the data's labels are class ids already; drop it")
        return ds, declared or None
    if label_map is not None:  # the model is not asked here (a plug-in's classes are found by calling it): the
        # ids' range is checked on its answers, as every label is (check_labels)
        missing = [n for n in names if n.lower() not in label_map]
        if missing:
            raise TextAuditError(f"--label-map does not map the data's class {missing[0]!r}")
        remap = [label_map[n.lower()] for n in names]
        by_id = {v: k for k, v in label_map.items() if k in {n.lower() for n in names}}
        size = max(len(model_names), max(by_id) + 1)
        classes = model_names or [next((n for n in names if n.lower() == by_id[i]), by_id[i]) if i in by_id else str(i)
                                  for i in range(size)]
        return _renumbered(ds, remap, classes), classes
    if not model_names:
        if ds.info.description != SORTED_NAMES:
            return ds, names  # the file declared each name's id
        example = ",".join(f"{n}=<id>" for n in names[:2])  # never a guessed map: a guess in sort order inverts
        raise TextAuditError(f"the data's labels are class names ({', '.join(names[:4])}{', …' if len(names) > 4 else ''}) "
                             f"but model {who} has no class names, so which class each name means is not known; give "
                             f"class ids in the data, or map the names to the model's ids (audit attack, evaluate and "
                             f"compare take --label-map {example}, as the model means them)")
    lower = {n.lower(): i for i, n in enumerate(model_names)}
    missing = [n for n in names if n.lower() not in lower]
    if missing:
        raise TextAuditError(f"the data's class {missing[0]!r} is not a class of model {who} ({', '.join(model_names)}); "
                             f"check --label-column, or map the data's names to the model's ids: --label-map "
                             f"{missing[0]}=<id>")
    return _renumbered(ds, [lower[n.lower()] for n in names], model_names), model_names


def _renumbered(ds: "datasets.Dataset", remap: list[int], classes: list[str]) -> "datasets.Dataset":
    """``ds`` with label y replaced by ``remap[y]`` and the classes named ``classes`` (id → name)."""
    import datasets

    cols = {c: ds[c] for c in ds.column_names}
    cols["label"] = [remap[y] for y in cols["label"]]
    feats = ds.features.copy()
    feats["label"] = datasets.ClassLabel(names=classes)
    return datasets.Dataset.from_dict(cols, features=feats)


def check_labels(labels: Iterable[int], num_classes: int, model: str) -> None:
    """A label the model has no class for would count as a success (attack) or a miss (accuracy)
    without meaning anything: refuse it in one line."""
    for i, y in enumerate(labels):
        if int(y) == -1:
            raise TextAuditError(f"example {i} has no label; name the data's label column with --label-column")
        if not 0 <= int(y) < num_classes:
            raise TextAuditError(f"example {i} has label {int(y)}, but model {model} has {num_classes} classes "
                                 f"(0..{num_classes - 1}); check --label-column or the data's labels")


def data_config(data_id: str, classes: Sequence[str] | None, *, sample: int | None = None) -> dict:
    """What a results file's header records about the data: its canonical name, the label map
    (class id → name) when the classes have names, and a ``--sample`` of the data (``data_sample``:
    bias has a ``sample`` of its own, the draws per source). Bare ids (``0``, ``1``, …) record no map,
    so results files written before maps existed still resume."""
    out: dict[str, Any] = {"data": data_id}
    if classes and list(classes) != [str(i) for i in range(len(classes))]:
        out["labels"] = list(classes)
    if sample is not None:
        out["data_sample"] = sample
    return out


def check_side(side: str) -> str:
    """``--perturb-side``: first or second (one-line error otherwise)."""
    if side not in SIDES:
        raise TextAuditError(f"--perturb-side must be first or second (got {side!r})")
    return side


def split_sides(ds: "datasets.Dataset", side: str = "second") -> tuple[list[str], list[str] | None]:
    """``(texts to perturb, texts kept verbatim)`` of a dataset: for single texts the texts and None;
    for pairs the ``side`` text of each pair and the other one."""
    check_side(side)
    pairs = pairs_of(ds)
    if pairs is None:
        return list(ds["text"]), None
    return (pairs, list(ds["text"])) if side == "second" else (list(ds["text"]), pairs)


def as_pairs(texts: Sequence[str], pairs: Sequence[str] | None) -> list:
    """The classifier inputs of a dataset: texts, or ``(text, pair)`` tuples."""
    return list(texts) if pairs is None else list(zip(texts, pairs))
