"""Join the results files of one run's shards into one file and recompute its summary (``audit merge``).

The files must come from the same command with the same settings (their header records agree,
shard aside); records are de-duplicated by their id, so merging a shard twice, or a shard with a
resumed copy of itself, adds nothing. The merged file is an ordinary results file: its header is
the shards' without ``shard`` (plus ``merged_from``), so ``--resume`` on it continues the whole run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from textaudit.errors import TextAuditError
from textaudit.formats.jsonl import JsonlWriter, check_results, config_conflicts, read_header, read_jsonl, record_key

__all__ = ["merge_results", "summarize_records", "record_key"]


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
        check_results(p, h, contents[-1])
        headers.append(h)
    first = headers[0]
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
    key = record_key(str(first.get("command")))
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


def summarize_records(header: dict, records: list[dict]) -> dict[str, Any]:
    """The summary the command prints, recomputed from ``records`` alone."""
    command, config = header.get("command"), header.get("config", {})
    if command == "attack":
        from textaudit.attacks.run import summarize

        out = summarize(records, config.get("method"), config.get("k"), config.get("labels"))
        out["model"] = config.get("model")
        return out
    if command == "bias":
        from textaudit.fairness.bias import estimates_from_records, report

        out = report(estimates_from_records(records, config["k"], config["enumerate_k"]))
        out["model"] = out["model"] or config.get("model")
        return out
    if command == "learnability":
        from textaudit.robustness.learnability import aggregate

        models = list(dict.fromkeys(r["model"] for r in records))
        perts = list(dict.fromkeys(r["perturbation"] for r in records))
        probabilities = sorted({float(r["p"]) for r in records if r["p"] != "robustness"})
        return aggregate(records, models, perts, probabilities)
    if command == "certify":
        from textaudit.robustness.smoothing import SMOOTHING, summarize_certify

        if config.get("method") not in SMOOTHING:
            raise TextAuditError("an IBP certification has one record per model: there is nothing to merge")
        return {**summarize_certify(records, config["method"]), "model": config.get("model")}
    if command == "evaluate":
        from textaudit.robustness.calibration import summarize_calibration

        return {"model": config.get("model"), "perturbed_by": config.get("perturbed_by"),
                **summarize_calibration(records, int(config.get("bins", 10)), int(config.get("seed", 0)))}
    if command == "replay":
        return summarize_replay(records, str(config.get("model")), config.get("baseline"), config.get("margin"))
    if command == "perturbscore build":
        from textaudit.robustness.perturbscore.tuples import summarize_tuples

        return {"model": config.get("model"), "perturbation": config.get("perturbation"), **summarize_tuples(records)}
    raise TextAuditError(f"cannot summarize '{command}' results")


#: what a replayed finding can be (:mod:`textaudit.findings`)
REPLAY_STATUSES = ("still", "fixed", "not_applicable")


def summarize_replay(records: list[dict], model: str, baseline: str | None = None,
                     margin: float | None = None) -> dict[str, Any]:
    """An ``audit replay``'s summary from its records: still / fixed / not_applicable overall and per
    (method, pair), the share still holding among the applicable ones with its Wilson interval; with a
    baseline, the paired counts (``fixed_by_model``, ``regressed``) and McNemar's exact p of "still"
    on the baseline vs the model over the findings applicable on both; with a ``margin`` too, the
    non-inferiority and equivalence of the model's still-rate to the baseline's
    (:func:`textaudit.stats.non_inferiority`: ``non_inferiority``), regressions being the harmful flips."""
    from textaudit.stats import mcnemar, non_inferiority, wilson

    def count(key: str, status: str) -> int:
        return sum(r.get(key) == status for r in records)

    still, fixed = count("status", "still"), count("status", "fixed")
    out: dict[str, Any] = {"model": model, "findings": len(records), "still": still, "fixed": fixed,
                           "not_applicable": count("status", "not_applicable"),
                           "still_share": round(still / (still + fixed), 4) if still + fixed else None}
    if still + fixed:
        lo, hi = wilson(still, still + fixed)
        out["still_share_ci95"] = [round(lo, 4), round(hi, 4)]
    groups: dict[tuple, dict] = {}
    for r in records:
        g = groups.setdefault((r["method"], "/".join(r["pair"]) if r.get("pair") else None),
                              {"method": r["method"], "pair": r.get("pair"), **{s: 0 for s in REPLAY_STATUSES},
                               "regressed": 0})
        g[r["status"]] += 1
        g["regressed"] += r.get("baseline_status") == "fixed" and r["status"] == "still"
    out["by_method"] = list(groups.values())
    sampled = [r for r in records if isinstance(r.get("draws"), int) and isinstance(r.get("flips"), int)]
    if sampled:  # a sampling endpoint: how often the findings flip over their draws
        from textaudit.stats import hit_rates

        out["sampled"] = hit_rates([r["flips"] for r in sampled if r["draws"] == sampled[0]["draws"]],
                                   sampled[0]["draws"])
    if baseline is not None:
        both = [r for r in records if "not_applicable" not in (r["status"], r.get("baseline_status"))]
        test = mcnemar([r["baseline_status"] == "still" for r in both], [r["status"] == "still" for r in both])
        out.update(baseline=baseline, baseline_still=count("baseline_status", "still"),
                   baseline_fixed=count("baseline_status", "fixed"),
                   fixed_by_model=sum(r.get("baseline_status") == "still" and r["status"] == "fixed" for r in records),
                   regressed=sum(r.get("baseline_status") == "fixed" and r["status"] == "still" for r in records),
                   paired=len(both), mcnemar_p=round(float(test["p"]), 6))
        if margin is not None and both:
            out["non_inferiority"] = non_inferiority([r["baseline_status"] == "still" for r in both],
                                                     [r["status"] == "still" for r in both], float(margin))
    return out
