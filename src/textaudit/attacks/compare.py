"""The comparison matrix (the paper's Table 2): several attack methods on several models, one
results file per cell, summarized with Wilson 95% intervals and paired McNemar tests.

Each cell (model m, method a) is an ordinary ``audit attack`` results file,
``<dir>/<m>.<a>.jsonl``, so a cell is resumable and can be run, merged or reported on its own.
Two cells are *paired* when they attacked the same examples: two models under one method, or two
methods on one model. Their success/failure on the examples both attacked is compared with
McNemar's exact test (:func:`textaudit.stats.mcnemar`): only the examples where exactly one of the
two succeeded count.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Iterable, Sequence

from textaudit.attacks.recipes import recipe_options
from textaudit.attacks.registry import check_options, make_attack, method_spec
from textaudit.attacks.run import run_attack, summarize
from textaudit.data import align_labels, check_limit_sample, data_config, dataset_id, load_dataset
from textaudit.errors import TextAuditError
from textaudit.files import atomic_path
from textaudit.formats.compare import MATRIX_COLUMNS, MATRIX_FOUND, SUMMARY, cell_path
from textaudit.formats.jsonl import check_output
from textaudit.lm import LazyCausalLM
from textaudit.models import load_classifier
from textaudit.models.batched import ALL_LABELS, each_label, label_view
from textaudit.neighborhoods.mlm import load_mlm
from textaudit.secrets import redact_obj
from textaudit.stats import check_margin, mcnemar, non_inferiority

__all__ = ["cell_path", "compare_cells", "cells_from_files", "run_compare", "MATRIX_COLUMNS", "SUMMARY"]


def _outcomes(records: Iterable[dict]) -> dict[str, bool]:
    """id -> success, for the examples actually attacked (success or failed)."""
    return {r["id"]: r["status"] == "success" for r in records if r.get("status") in ("success", "failed")}


def compare_cells(cells: dict[tuple[str, str], Sequence[dict]], margin: float | None = None) -> dict:
    """``{"cells": [...], "paired": [...]}`` for ``{(model, method): records}``.

    ``cells``: one summary per cell (:data:`MATRIX_COLUMNS`). ``paired``: for every two cells with
    the same method (two models) or the same model (two methods), McNemar's exact test on the
    examples both attacked: ``{"a", "b", "n", "only_a", "only_b", "p", "rate_a", "rate_b"}``.
    ``margin``: two models under one method also get ``non_inferiority``: is b's success rate no
    worse than a's (a: the model named first) by ``margin`` or more (:func:`textaudit.stats.non_inferiority`);
    and ``accuracy`` holds each later model's accuracy tested against the first model's the same way."""
    out_cells = []
    for (model, method), records in cells.items():
        k = next((r["k"] for r in records if r.get("k") is not None), None) if "k" in method_spec(method).options else None
        s = summarize(records, method, k)  # k: None for a method without one (first-order)
        out_cells.append({"model": model, "method": method, **{c: s.get(c) for c in (*MATRIX_COLUMNS[2:], *MATRIX_FOUND)}})
    outcomes = {key: _outcomes(recs) for key, recs in cells.items()}
    paired = []
    for a, b in itertools.combinations(cells, 2):
        if a[0] != b[0] and a[1] != b[1]:
            continue
        both = sorted(set(outcomes[a]) & set(outcomes[b]))
        if not both:
            continue
        xa, xb = [outcomes[a][i] for i in both], [outcomes[b][i] for i in both]
        test = mcnemar(xa, xb)
        paired.append({"a": f"{a[0]}/{a[1]}", "b": f"{b[0]}/{b[1]}",
                       "by": "method" if a[0] == b[0] else "model", **test,
                       "rate_a": round(sum(xa) / len(xa), 4), "rate_b": round(sum(xb) / len(xb), 4)})
        if margin is not None and a[0] != b[0]:  # two models, one method: is b no less robust than a?
            paired[-1]["non_inferiority"] = non_inferiority(xa, xb, margin)
    out = {"cells": out_cells, "paired": paired}
    if margin is not None:
        out.update(margin=margin, accuracy=_accuracy_tests(cells, margin))
    return out


def _accuracy_tests(cells: dict[tuple[str, str], Sequence[dict]], margin: float) -> list[dict]:
    """Each later model's accuracy against the first model's, non-inferior at ``margin``, on the examples both
    predicted (a model's prediction of an example is the same in every method's cell)."""
    right: dict[str, dict[str, bool]] = {}
    for (model, _), records in cells.items():
        seen = right.setdefault(model, {})
        for r in records:
            if r.get("prediction") is not None and r.get("label") is not None:
                seen.setdefault(r["id"], r["prediction"] == r["label"])
    models = list(right)
    out = []
    for b in models[1:]:
        both = sorted(set(right[models[0]]) & set(right[b]))
        if both:
            out.append({"a": models[0], "b": b, "non_inferiority": non_inferiority(
                [right[models[0]][i] for i in both], [right[b][i] for i in both], margin, higher_is_worse=False)})
    return out


def cells_from_files(files: Iterable[tuple]) -> dict[tuple[str, str], list[dict]]:
    """``{(model, method): records}`` of attack results, given as ``(header, records)`` pairs, or
    ``(header, records, path)`` (the error then names the files) — the cells of a matrix that
    ``audit compare`` did not write: separate ``audit attack`` runs.

    Files of one cell are pooled only when they are runs of the same audit: their settings must
    agree (data, k, seed, the model's fingerprint …; a shard and the file merged from the shards do),
    else a one-line error names what differs. An example in several of them (a merged file reported
    with its shards, a file given twice) counts once."""
    cells: dict[tuple[str, str], list[dict]] = {}
    settings: dict[tuple[str, str], dict] = {}
    where: dict[tuple[str, str], object] = {}
    seen: dict[tuple[str, str], set] = {}
    for item in files:
        header, records = item[0], item[1]
        path = item[2] if len(item) > 2 else None
        if header.get("command") != "attack":
            continue
        cfg = header.get("config", {})
        key = (str(cfg.get("model")), str(cfg.get("method")))
        first = settings.setdefault(key, cfg)
        where.setdefault(key, path)
        differ = sorted(k for k in set(first) | set(cfg) if first.get(k) != cfg.get(k))
        if differ:
            shown = "; ".join(f"{k}: {first.get(k)!r} vs {cfg.get(k)!r}" for k in differ[:3])
            files_ = f" ({where[key]} and {path})" if path is not None and where[key] is not None else ""
            raise TextAuditError(f"two {key[1]} results on {key[0]} were run with other settings{files_} ({shown}): "
                                 "a matrix would pool them; report them separately")
        ids = seen.setdefault(key, set())
        for r in records:
            if r.get("id") not in ids:
                ids.add(r.get("id"))
                cells.setdefault(key, []).append(r)
    return cells


def run_compare(models: Sequence[str], methods: Sequence[str], output_dir: str | Path, *, data: str = "sst2:dev",
                limit: int | None = None, sample: int | None = None, k: int | None = None, mlm: str | None = None,
                ppl: bool = False, seed: int = 0, progress: bool = True, in_flight: int | None = None, margin: float | None = None,
                label_map: dict[str, int] | None = None, label: str | None = None,
                label_threshold: float = 0.5, naturalness: bool = True, recipe: str | None = None) -> dict:
    """Run (or resume) every method on every model into ``output_dir`` (:func:`cell_path`), write
    :data:`SUMMARY` there and return it: ``{"data", "mlm", "seed", "cells", "paired", "files"}``.
    ``in_flight``: examples each attack searches at once (:func:`~textaudit.attacks.run.run_attack`).

    ``limit``: the first N examples of ``data``; ``sample``: N drawn uniformly at random with ``seed`` instead (an
    estimate of the whole data's rates, each example attacked as in a run over all of it).
    ``k`` goes to the methods that have one (None: each method's default). Every option and every
    cell file is checked before any attack runs. ``margin``: see :func:`compare_cells` (two models or more).
    ``label_map``: the model's class id of each class name of the data (:func:`textaudit.data.align_labels`).
    ``label`` (``--label``): multi-label models audited on that label (a row ``model[label]``, the data's column of
    the label's name as its gold), or on every label with ``"all"`` (one row per label; each model loaded once, its
    forwards shared by its labels) — :func:`~textaudit.models.batched.label_view`. ``naturalness``: the second-order
    searches' constraint (:mod:`textaudit.attacks.naturalness`; False: the paper's search). ``recipe``: the first-order
    methods' (:mod:`textaudit.attacks.recipes`; None: their default)."""
    output_dir = Path(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise TextAuditError(f"--output-dir {output_dir} is a file; give a directory")

    check_margin(margin, len(models) > 1 or label == ALL_LABELS, "two models or more")
    check_limit_sample(limit, sample)
    specs = {method: method_spec(method) for method in methods}
    given = {method: {"seed": seed, **({"k": k} if k is not None and "k" in spec.options else {}),
                      **({"naturalness": naturalness} if "naturalness" in spec.options else {}),
                      **({"recipe": recipe} if recipe is not None and "recipe" in spec.options else {})}
             for method, spec in specs.items()}  # k, the naturalness constraint and the recipe: to the methods that have them
    for method in methods:
        check_options(method, given[method])
    data_id = dataset_id(data, "dev")
    data_cfg = data_config(data_id, None, sample=sample)  # the data and a --sample, as an attack's header records them
    expected = {"method": None, "seed": seed, "ppl": ppl, **data_cfg}

    def check_cells(rows: Sequence[str]) -> None:
        for row in rows:
            for method in methods:
                path = cell_path(output_dir, row, method)
                check_output(path, path.exists(), {**expected, "method": method})

    if label != ALL_LABELS:  # the rows are known before any model loads
        check_cells([m if label is None else f"{m}[{label}]" for m in models])
    masked_lm = load_mlm(mlm) if any(s.needs_mlm for s in specs.values()) else None
    rows = _rows(models, label, label_threshold)
    check_cells(list(rows))
    lm = LazyCausalLM() if ppl else None
    cells, datasets = {}, {}
    for row, (clf, column) in rows.items():
        if column not in datasets:
            datasets[column] = load_dataset(data, default_split="dev", limit=limit, sample=sample, seed=seed,
                                            label_column=column)
        ds = datasets[column]
        row_ds, _ = align_labels(ds, clf, label_map)  # class names by the model's, never by their sort order
        for method in methods:
            path = cell_path(output_dir, row, method)
            shared_lm = {}  # SmolLM2 loaded once, for the perplexities and a recipe's LM constraint
            if lm is not None and "recipe" in specs[method].options and recipe_options(method, recipe).get("lm"):
                shared_lm["lm"] = lm
            atk = make_attack(method, clf, **given[method], **({"mlm": masked_lm} if specs[method].needs_mlm else {}),
                              **shared_lm)
            if hasattr(atk, "rank_patch_words"):
                atk.rank_patch_words(ds["text"])
            _, records = run_attack(atk, ds["text"], row_ds["label"], ids=ds["id"], output=path, resume=path.exists(),
                                    ppl=lm, config=data_cfg, progress=progress, in_flight=in_flight)
            cells[(row, method)] = records
    result = {"data": data_id, "mlm": getattr(masked_lm, "name", None), "seed": seed, **compare_cells(cells, margin),
              "files": [cell_path(output_dir, row, a).name for row in rows for a in methods]}
    with atomic_path(output_dir / SUMMARY) as tmp:
        tmp.write_text(json.dumps(redact_obj({"header": {"command": "compare"}, **result}), indent=1))
    return result


def _rows(models: Sequence[str], label: str | None, threshold: float) -> dict[str, tuple[object, str | None]]:
    """The matrix's rows: ``{row name: (classifier, the data's label column)}`` — a model, or with ``label`` its
    label's view (``model[label]``), or with ``"all"`` one view per label of each multi-label model (loaded once)."""
    rows: dict[str, tuple[object, str | None]] = {}
    for model in models:
        clf = load_classifier(model)
        names = [label] if label != ALL_LABELS else list(each_label(clf, None))
        for name in names:
            rows[model if name is None else f"{model}[{name}]"] = (label_view(clf, name, threshold), name)
    return rows
