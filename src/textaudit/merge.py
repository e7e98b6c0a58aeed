"""Join the results files of one run's shards into one file and recompute its summary (``audit merge``).

The files must come from the same command (of a kind that merges, :mod:`textaudit.kinds`) with the same
settings (their header records agree, shard aside); records are de-duplicated by their id, so merging a shard twice, or a shard with a
resumed copy of itself, adds nothing. The merged file is an ordinary results file: its header is
the shards' without ``shard`` (plus ``merged_from``), so ``--resume`` on it continues the whole run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from textaudit.errors import TextAuditError
from textaudit.formats.jsonl import JsonlWriter, config_conflicts, read_header, read_jsonl
from textaudit.kinds import REPLAY_STATUSES, check_records, kind_of, summarize_records, summarize_replay

__all__ = ["merge_results", "summarize_records", "summarize_replay", "REPLAY_STATUSES"]


def merge_results(output: str | Path, inputs: Sequence[str | Path]) -> tuple[dict, list[dict]]:
    """Write the de-duplicated records of ``inputs`` to ``output`` and return ``(header, records)``;
    a one-line error for a missing input, one without a header, or one from another run."""
    if not inputs:
        raise TextAuditError("give the shards' results files to merge, e.g. audit merge all.jsonl part-*.jsonl")
    if Path(output).exists():  # audit merge has no --resume: it writes a new file or nothing
        raise TextAuditError(f"{output} already exists; audit merge writes a new file: give another name or remove it")
    headers, contents = [], []
    for p in inputs:
        if not Path(p).is_file():
            raise TextAuditError(f"{p} does not exist")
        h = read_header(p)
        if h is None:
            raise TextAuditError(f"{p} has no header record, so it cannot be checked against the other shards")
        contents.append(read_jsonl(p))  # read once: checked here, merged below
        check_records(p, h, contents[-1])
        headers.append(h)
    first = headers[0]
    refusal = kind_of(first).merge_refusal  # before anything is written: a refused merge leaves no file
    if refusal:
        raise TextAuditError(f"{inputs[0]}: {refusal}")
    for p, h in zip(inputs[1:], headers[1:]):
        if h.get("command") != first.get("command"):
            raise TextAuditError(f"{p} holds '{h.get('command')}' results, {inputs[0]} '{first.get('command')}'; "
                                 "merge the shards of one run only")
        bad = config_conflicts(first["config"], h["config"], exact=True)
        if bad:
            raise TextAuditError(f"{p} was written with other settings than {inputs[0]} ({'; '.join(bad)}); "
                                 "merge the shards of one run only")
    splits = sorted({str(h["shard"]) for h in headers if h.get("shard")})
    if len({s.split("/")[1] for s in splits}) > 1:
        raise TextAuditError(f"the files are shards of different splits ({', '.join(splits)}): merge the shards of "
                             "one --shard i/N run only")
    key = kind_of(first).records.key  # the kind's: an id, a bias unit's (unit, model, i)
    seen: set = set()
    records: list[dict] = []
    for part in contents:
        for r in part:
            k = key(r)
            if k not in seen:
                seen.add(k)
                records.append(r)
    shards = sorted({h["shard"] for h in headers if h.get("shard")})
    writer = JsonlWriter(output, command=first.get("command"), config=first["config"],
                         extra={"merged_from": [Path(p).name for p in inputs], "shards": shards or None})
    writer.extend(records, keep=False)
    writer.close()
    return {**first, "shards": shards}, records
