"""Run an attack over a dataset: progress, one JSON line per example as it finishes, resume, summary."""

from __future__ import annotations

import statistics
import time
from typing import Callable, Sequence

from textaudit.errors import TextAuditError
from textaudit.results import JsonlWriter

__all__ = ["run_attack", "summarize", "METHODS", "make_attack", "check_method"]

METHODS = ("so-beam", "so-enum", "random", "genetic", "bae")


def make_attack(method: str | None, classifier, k: int, **kwargs):
    """Return the attack object for ``method`` (None: SO-Enum for k ≤ 2, else SO-Beam).

    First-order baselines (``genetic``, ``bae``) ignore ``k``, ``kappa``, ``delta`` and ``beam``;
    ``textattack:<recipe>`` runs a TextAttack recipe (extra ``textaudit[textattack]``)."""
    from textaudit.attacks.second_order import RandomBaseline, SOBeam, SOEnum

    method = method or ("so-enum" if k <= 2 else "so-beam")
    check_method(method)
    common = {key: kwargs[key] for key in ("max_queries", "time_budget", "seed") if key in kwargs}
    if method.startswith("textattack:"):
        from textaudit.attacks.textattack_interop import TextAttackRecipe

        return TextAttackRecipe(classifier, method.split(":", 1)[1], mlm=kwargs.get("mlm"),
                                encoder=kwargs.get("encoder"), threshold=kwargs.get("threshold"), **common)
    if method in ("genetic", "bae"):
        from textaudit.attacks.first_order import BAE_THRESHOLD, BAEAttack, GeneticAttack

        if method == "genetic":
            return GeneticAttack(classifier, lm=kwargs.get("lm"), **common)
        return BAEAttack(classifier, mlm=kwargs.get("mlm"), encoder=kwargs.get("encoder"),
                         threshold=kwargs.get("threshold") or BAE_THRESHOLD, **common)
    for first_order_only in ("lm", "threshold", "encoder"):
        kwargs.pop(first_order_only, None)
    if method == "so-beam":
        return SOBeam(classifier, k, **kwargs)
    kwargs.pop("beam", None)
    if method == "so-enum":
        return SOEnum(classifier, k, **kwargs)
    return RandomBaseline(classifier, k, **kwargs)


def check_method(method: str | None) -> None:
    """Raise a one-line error for an unknown ``method`` (or ``textattack:`` without the extra) —
    cheap, so callers can check before loading models."""
    if method is None or method in METHODS:
        return
    if method.startswith("textattack:") and method != "textattack:":
        import importlib.util

        if importlib.util.find_spec("textattack") is None:
            raise TextAuditError("TextAttack is not installed; install the extra: "
                                 "pip install 'textaudit[textattack]' (it pins transformers<5)")
        return
    raise TextAuditError(f"unknown attack method '{method}'; use one of {', '.join(METHODS)}, or textattack:<recipe>")


def summarize(records: Sequence[dict], method: str, k: int) -> dict:
    """Return the summary: counts, success_rate = successes / attacked (skipped and errors excluded),
    mean ℓ0 of successes, median perplexities, seconds and classifier queries per example."""
    n = len(records)
    by = {s: [r for r in records if r.get("status") == s] for s in ("success", "failed", "skipped", "error")}
    attacked = len(by["success"]) + len(by["failed"])
    succ = by["success"]
    ppl_o = [r["ppl_original"] for r in succ if r.get("ppl_original") is not None]
    ppl_p = [r["ppl_perturbed"] for r in succ if r.get("ppl_perturbed") is not None]
    ran = [r for r in records if r.get("status") in ("success", "failed")]
    return {
        "method": method, "k": k, "n": n, "attacked": attacked, "success": len(succ), "failed": len(by["failed"]),
        "skipped": len(by["skipped"]), "errors": len(by["error"]),
        "success_rate": round(len(succ) / attacked, 4) if attacked else None,
        "mean_l0": round(statistics.mean(r["l0"] for r in succ), 3) if succ else None,
        "already_vulnerable": sum(1 for r in succ if r.get("l0") == 0),
        "median_ppl_original": round(statistics.median(ppl_o), 2) if ppl_o else None,
        "median_ppl_perturbed": round(statistics.median(ppl_p), 2) if ppl_p else None,
        "sec_per_example": round(statistics.mean(r["seconds"] for r in ran), 3) if ran else None,
        "queries_per_example": round(statistics.mean(r["queries"] for r in ran), 1) if ran else None,
        "mlm": next((r.get("mlm") for r in records if r.get("mlm")), None),
    }


def run_attack(attack, texts: Sequence[str], labels: Sequence[int] | None, *, ids: Sequence[str] | None = None,
               output=None, resume: bool = False, progress: bool = True, ppl=None,
               on_result: Callable[[dict], None] | None = None) -> tuple[dict, list[dict]]:
    """Attack every example (skipping ids already in ``output`` when ``resume``) and return
    ``(summary, records)``; each record is appended to ``output`` (JSONL) and flushed as it finishes.

    ``ppl``: a :class:`~textaudit.lm.CausalLM` for the perplexity of the original and of the
    vulnerable example of each success (None: not computed).
    """
    from tqdm.auto import tqdm

    if len(texts) == 0:
        raise TextAuditError("no examples to attack (empty dataset)")
    ids = list(ids) if ids is not None else [str(i) for i in range(len(texts))]
    writer = JsonlWriter(output, resume=resume)
    done = writer.done
    todo = [i for i, id_ in enumerate(ids) if id_ not in done]
    bar = tqdm(todo, desc=f"{attack.method} k={attack.k}", unit="ex", disable=None if progress else True)
    for i in bar:
        res = attack.attack(texts[i], None if labels is None else int(labels[i]))
        rec = {"id": ids[i], **res.to_dict()}
        if ppl is not None and res.status == "success":
            po, pp = ppl.perplexity([res.text, res.vulnerable])
            rec["ppl_original"], rec["ppl_perturbed"] = round(po, 3), round(pp, 3)
        writer.append(rec)
        if on_result:
            on_result(rec)
        s = summarize(writer.records, attack.method, attack.k)
        bar.set_postfix(success=f"{s['success']}/{s['attacked']}", rate=s["success_rate"])
    bar.close()
    return summarize(writer.records, attack.method, attack.k), writer.records
