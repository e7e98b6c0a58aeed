"""An ``audit harden`` folder's summary, ``harden.json``: read back checked (:func:`read_harden`),
and the tables the CLI and the report print from it (:func:`summary_rows`, :func:`bias_rows`,
:func:`cost_rows`)."""

from __future__ import annotations

import json
from pathlib import Path

from textaudit.errors import TextAuditError
from textaudit.files import loads_json
from textaudit.formats.compare import folder_file, plain_name
from textaudit.formats.jsonl import RecordSpec, check_results, read_header, read_jsonl
from textaudit.request import within
from textaudit.stats import format_ci, format_p, wilson

__all__ = ["SUMMARY", "hardened_threat",
           "read_harden", "read_harden_folder", "summary_rows", "bias_rows", "cost_rows", "SUMMARY_COLUMNS", "BIAS_COLUMNS",
           "COST_COLUMNS"]

#: the summary file ``audit harden`` writes in its ``--out`` folder
SUMMARY = "harden.json"

#: the columns of :func:`summary_rows` and :func:`bias_rows` (the CLI's tables and the report's)
SUMMARY_COLUMNS = ["metric", "before", "95% CI", "after", "95% CI", "McNemar p"]
COST_COLUMNS = ["attacking the training sample", "building consistency pairs", "training", "evaluation"]
BIAS_COLUMNS = ["pair", "k", "B before", "95% CI", "B after", "95% CI", "|B| lower", "after's interval excludes before"]


def hardened_threat(model: str | Path) -> dict | None:
    """The threat model a hardened model was trained for (``audit harden --method masked|substitute``): ``{"method":
    "ranmask", "mask_rate", "mask_token"}`` or ``{"method": "safer", "hops"}``, read from the model's folder
    (``textaudit-harden.json``, or a zoo checkpoint's ``textaudit.json``); None for any other model."""
    path = Path(str(model)).expanduser()
    if not path.is_dir():
        return None
    for name, key in (("textaudit-harden.json", None), ("textaudit.json", "hardened")):
        f = path / name
        if not f.is_file():
            continue
        try:
            info = loads_json(f.read_text())
        except (OSError, ValueError):
            return None
        if key is not None:
            info = info.get(key) if isinstance(info, dict) else None
        threat = info.get("threat") if isinstance(info, dict) else None
        if threat is None:
            return None
        if not _sound_threat(threat):  # a hostile or damaged record: never a certificate's settings
            raise TextAuditError(f"{f}: its record of the threat model the model was hardened for is damaged; "
                                 "rerun the audit harden that made it, or certify with --method and its options")
        return threat
    return None


def _sound_threat(threat: object) -> bool:
    """A threat model as harden records it: RanMASK's ρ in [0, 1) and a mask token, or SAFER's hops 1 or 2."""
    if not isinstance(threat, dict):
        return False
    if threat.get("method") == "ranmask":
        return set(threat) == {"method", "mask_rate", "mask_token"} and \
            within("mask_rate", threat["mask_rate"]) and isinstance(threat["mask_token"], str) and bool(threat["mask_token"].strip())
    return threat.get("method") == "safer" and set(threat) == {"method", "hops"} and threat["hops"] in (1, 2) and \
        not isinstance(threat["hops"], bool)


def read_harden(path: str | Path) -> dict:
    """The content of a ``harden.json``, checked: what the report and :func:`textaudit.results.load`
    read of it is there and of its type; a damaged one is a one-line error, not a traceback where it is read."""
    path = Path(path)
    try:
        content = loads_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TextAuditError(f"{path} is not a readable harden summary ({e}); rerun audit harden") from None
    header = content.get("header") if isinstance(content, dict) else None
    if not isinstance(header, dict) or header.get("command") != "harden" or "attacks" not in content:
        raise TextAuditError(f"{path} is not an audit harden summary; rerun audit harden with its --out")
    damaged = f"{path} is damaged: %s; rerun audit harden with its --out"
    if not isinstance(header.get("config", {}), dict):
        raise TextAuditError(damaged % "its header's 'config' is not an object")
    if not isinstance(content["attacks"], list):
        raise TextAuditError(damaged % "'attacks' is not a list")
    for a in content["attacks"]:
        if not isinstance(a, dict) or not isinstance(a.get("method"), str):
            raise TextAuditError(damaged % "an evaluation attack without its method")
        files = a.get("files")
        # the before/after files are the folder's own: a name with a path in it is not followed
        if not (isinstance(files, list) and len(files) == 2 and all(plain_name(f) for f in files)):
            raise TextAuditError(damaged % f"{a['method']} does not name its before and after files in the folder")
    for key in ("from", "method", "model", "data", "eval_data"):
        if not isinstance(content.get(key), str):
            raise TextAuditError(damaged % f"'{key}' is not a string")
    if not isinstance(content.get("held_out"), dict) or "eval_examples" not in content["held_out"]:
        raise TextAuditError(damaged % "'held_out' does not count the evaluation examples")
    for side in ("before", "after"):
        if not isinstance(content.get(side), dict) or not {"attack", "success_rate", "accuracy"} <= set(content[side]):
            raise TextAuditError(damaged % f"'{side}' lacks the headline (attack, success_rate, accuracy)")
    try:  # the tables the report and the CLI print from it
        summary_rows(content), bias_rows(content), cost_rows(content)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as e:
        raise TextAuditError(damaged % f"{type(e).__name__}: {e}") from None
    return content


def read_harden_folder(folder: str | Path, spec: RecordSpec | None = None) -> tuple[dict, dict[str, tuple[dict, list[dict]]]]:
    """An ``audit harden`` folder read back whole and checked: ``(summary, {file name: (header, records)})``
    for the before and after file of every evaluation attack. Each file must be the folder's own (no link
    out of it), a sound results file, and agree with the summary's attacked and successful counts (a
    truncated or swapped file is a one-line error, never a silent disagreement; ``spec``: an attack file's records,
    ``textaudit.kinds.BY_ID["attack"].records``). ``audit report`` and :func:`textaudit.results.load` both read
    folders here."""
    folder = Path(folder)
    content = read_harden(folder / SUMMARY)
    files: dict[str, tuple[dict, list[dict]]] = {}
    for a in content["attacks"]:
        for role, name in zip(("before", "after"), a["files"]):
            path = folder_file(folder, name, f"the {role} file of {a['method']}")
            header, records = read_header(path), read_jsonl(path)
            check_results(path, header, records, spec)
            side = a.get(role) if isinstance(a.get(role), dict) else {}
            attacked = sum(r.get("status") in ("success", "failed") for r in records)
            success = sum(r.get("status") == "success" for r in records)
            if side.get("attacked", attacked) != attacked or side.get("success", success) != success:
                raise TextAuditError(f"{path} disagrees with {folder / SUMMARY}: {attacked} examples attacked, {success} "
                                     f"successful, where the summary says {side.get('attacked')} and "
                                     f"{side.get('success')} (a truncated or replaced file?); rerun audit harden with "
                                     "its --out")
            files[name] = (header, records)
    return content, files


def summary_rows(summary: dict) -> list[list]:
    """Rows of :data:`SUMMARY_COLUMNS`: clean accuracy, then each evaluation attack's success rate and
    the mean ℓ0 of its successes, before and after."""

    def r3(v):
        return None if v is None else round(v, 3)

    acc = summary["accuracy"]
    rows = [["clean accuracy", r3(acc["before"]["rate"]), format_ci(acc["before"]["ci95"], 3), r3(acc["after"]["rate"]),
             format_ci(acc["after"]["ci95"], 3), format_p(acc["mcnemar"]["p"])]]
    for a in summary["attacks"]:
        name = a["method"] + (f" k={a['k']}" if a["k"] is not None else "")
        rows.append([f"{name}: success rate", r3(a["before"]["success_rate"]), format_ci(a["before"]["ci95"], 3),
                     r3(a["after"]["success_rate"]), format_ci(a["after"]["ci95"], 3), format_p(a["mcnemar"]["p"])])
        rows.append([f"{name}: mean ℓ0 of successes", r3(a["before"]["mean_l0"]), "", r3(a["after"]["mean_l0"]), "", ""])
    cert = summary.get("certificate")
    if cert:  # a hardening for a certificate: both models smoothed under the threat model it trained for
        b, a = cert["before"], cert["after"]
        rows.append([f"{cert['method']}: smoothed accuracy", r3(b["accuracy"]), format_ci(b["accuracy_ci95"], 3),
                     r3(a["accuracy"]), format_ci(a["accuracy_ci95"], 3), ""])
        curves = [{c["radius"]: c for c in side["curve"]} for side in (b, a)]
        for radius in range(max(len(b["curve"]), len(a["curve"]))):
            cells = []
            for side, curve in zip((b, a), curves):  # past a curve's end nothing is certified at that radius
                c = curve.get(radius) or {"certified_accuracy": 0.0, "certified_accuracy_ci95": wilson(0, side["n"])}
                cells += [r3(c["certified_accuracy"]), format_ci(c["certified_accuracy_ci95"], 3)]
            rows.append([f"{cert['method']}: certified accuracy at radius {radius}", *cells, ""])
        views = [side.get("second_order") for side in (b, a)]
        if all(views):  # of the certified inputs: a natural neighbour not certified, or flipping under a patch
            for key, label in (("with_uncertified_neighbor", "certified inputs with an uncertified neighbour"),
                               ("with_patch_flip", "certified inputs whose neighbour flips under a synonym patch")):
                cells = []
                for v in views:
                    cells += [r3(v[f"{key}_share"]), format_ci(v[f"{key}_ci95"], 3)]
                rows.append([f"{cert['method']}: {label}", *cells, ""])
    return rows


def bias_rows(summary: dict) -> list[list]:
    """Rows of :data:`BIAS_COLUMNS`: B_(p,k) of each pair before and after."""
    return [[f"{b['pair'][0]}→{b['pair'][1]}", b["k"], b["before"]["B"], format_ci(b["before"]["ci95"], 5),
             b["after"]["B"], format_ci(b["after"]["ci95"], 5), b["abs_B_lower"], b["interval_excludes_before"]]
            for b in summary.get("bias", [])]


def cost_rows(summary: dict) -> list[list]:
    """One row of :data:`COST_COLUMNS` (seconds; "–" for a step the method has not)."""
    c = summary.get("cost", {})
    return [[c.get("attack_train_seconds", "–"), c.get("pairs_seconds", "–"), c.get("train_seconds", 0),
             c.get("evaluate_seconds", 0)]]
