"""A bias run's findings replayed on another model: B_{p,k} of that model on the very sentences the run scored.

A bias results file (``audit bias --output``) holds every scored neighbourhood sentence y of every
source s of X_p (the sentence as it stands, holding the source's word of p, its distance from s and
F_soft(y; p) under the model of the run). Replaying it on a model M scores exactly those sentences
again — no masked LM, no neighbourhood built — as F_soft(y; p) = f_soft(y with p(2)) − f_soft(y with
p(1)) under M, and pools them as the run did (:func:`textaudit.fairness.estimates.aggregate`): B_{p,k}
of M for every pair p and every k′ ≤ k of the file, with the same clustered 95% interval over the
source sentences. On the model the run measured, it gives back the run's own B (to the 6 decimals F
is written with).

A *finding* is a (p, k′) whose B_{p,k′} was significant in the run (its 95% interval excludes 0).
On M it is **still** when M's interval excludes 0 on the same side, **fixed** otherwise; a (p, k′)
the run found no bias for is **not_applicable** (nothing was found), yet its B on M is reported too.
A ``--filtered`` run's file holds every source's unit (X_filter is not in the records), so its
replay, like :func:`textaudit.fairness.bias.estimates_from_records`, pools them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from textaudit.errors import TextAuditError
from textaudit.fairness.bias import CounterfactualBias, _finished_units, estimates_from_records
from textaudit.fairness.estimates import BiasEstimate, ScoredUnit, aggregate
from textaudit.fairness.pairs import Source
from textaudit.models.batched import Classifier, unknown_class
from textaudit.sentence import Sentence

__all__ = ["BiasFindings", "read_bias_findings", "bias_status", "estimate_fields", "replay_row", "REPLAY_COLUMNS"]


@dataclass
class _Unit:
    """One finished unit of the file: its source, its scored sentences (parsed, with the pair's position)."""

    source: Source
    sampled_k: int | None
    weight: float | None
    sentences: list[Sentence]
    positions: list[int]
    distance: np.ndarray


@dataclass
class BiasFindings:
    """The scored units of one bias results file, per pair, and the run's own B_{p,k′} (see the module docstring)."""

    file: str
    line: int  # the first line of a scored sentence: where a finding of this file points
    found_on: str
    k: int
    enumerate_k: int
    language: str
    side: str
    classes: int  # the number of classes F_soft was taken over (2: a scalar F)
    labels: list[str] | None
    units: dict[tuple[str, str], list[_Unit]]
    found: dict[tuple[str, str], dict[int, BiasEstimate]]

    def estimates(self, classifier: Classifier) -> dict[tuple[str, str], dict[int, BiasEstimate]]:
        """B_{p,k′} of ``classifier`` on the file's sentences: one batched call per pair."""
        check_task(self, classifier)
        est = CounterfactualBias(classifier, mlm=None, blacklist=(), enumerate_k=self.enumerate_k, language=self.language,
                                 side=self.side)
        out = {}
        for pair, units in self.units.items():
            est.check_pair(pair)  # a word model that does not know the pair's words: one line, as audit bias says it
            sents = [s for u in units for s in u.sentences]
            pos = [p for u in units for p in u.positions]
            ctx = [u.source.context for u in units for _ in u.sentences]
            F = est.pair_shift(sents, pos, pair, ctx if any(c is not None for c in ctx) else None)
            scored, at = [], 0
            for u in units:
                n = len(u.sentences)
                scored.append(ScoredUnit(u.source, u.sampled_k, [], u.distance, F[at:at + n], u.weight))
                at += n
            out[pair] = aggregate(scored, pair, self.k, self.enumerate_k)
        return out


def _named(classes: object) -> bool:
    return isinstance(classes, (list, tuple)) and bool(classes) and \
        list(map(str, classes)) != [str(i) for i in range(len(classes))]


def check_task(found: BiasFindings, classifier: Classifier) -> None:
    """Findings of another task than the model's: another number of classes, or other class names."""
    n = getattr(classifier, "num_classes", None)
    unknown = unknown_class(classifier)
    if n is not None and unknown is not None:
        n -= 1  # a label-only model's "unknown" answer is no class of the task
    name = getattr(classifier, "name", "?")
    if n is not None and n != found.classes:
        raise TextAuditError(f"{found.file}:{found.line}: B was measured over {found.classes} classes but model {name} has "
                             f"{n}: these findings are of another task or dataset than the model's")
    labels = getattr(classifier, "labels", None)
    if _named(found.labels) and not _named(labels):  # B's sign depends on the class order: it must be checked
        raise TextAuditError(f"{found.file}:1: the run's classes are {', '.join(found.labels)} but model {name} names none, "
                             "so its class order cannot be checked: give the model a labels attribute naming its outputs "
                             "in order")
    if found.labels and labels and list(labels) != list(found.labels):
        raise TextAuditError(f"{found.file}:1: the run's classes are {', '.join(found.labels)} but model {name}'s are "
                             f"{', '.join(labels)}: these findings are of another task or dataset than the model's")


def read_bias_findings(path: str, header: dict, records: list[dict], lines: list[int]) -> BiasFindings:
    """The units of a (checked) bias results file, each sentence parsed and its pair word found; a row that does
    not hold exactly one word of its pair is one line naming the file and line."""
    cfg = header.get("config", {})
    if not isinstance(cfg.get("k"), int) or not isinstance(cfg.get("enumerate_k"), int):
        raise TextAuditError(f"{path}:1: the header has no k or enumerate_k; is it a bias results file?")
    at = {id(r): line for r, line in zip(records, lines)}
    models = list(dict.fromkeys(r["model"] for r in records if "unit_done" in r))
    if not models:
        raise TextAuditError(f"{path} holds no finished unit of a bias run: nothing to replay (resume the run first)")
    model = models[0]  # with --compare both models scored the same sentences: the first one's rows are read
    language = str(cfg.get("language", "en"))
    side = str(cfg.get("perturb_side") or "second")
    units: dict[tuple[str, str], list[_Unit]] = {}
    classes = None
    first_line = None
    for (_, name), (marker, rows) in _finished_units(records).items():
        if name != model or not rows:
            continue
        pair = (str(marker["pair"][0]), str(marker["pair"][1]))
        reversed_ = bool(rows and rows[0].get("reversed"))
        held = pair[1] if reversed_ else pair[0]
        sents, pos = [], []
        for r in rows:
            line = at[id(r)]
            first_line = line if first_line is None else min(first_line, line)
            F = r.get("F")
            c = 2 if isinstance(F, (int, float)) and not isinstance(F, bool) else len(F) if isinstance(F, list) else None
            if c is None or (classes is not None and c != classes):
                raise TextAuditError(f"{path}:{line}: F must be a number (two classes) or one number per class, as the "
                                     "other rows; was the file edited?")
            classes = c
            if not isinstance(r.get("text"), str) or not isinstance(r.get("distance"), int):
                raise TextAuditError(f"{path}:{line}: a scored sentence needs its text and distance; was the file edited?")
            s = Sentence.parse(r["text"], language)
            hits = [i for i, t in enumerate(s.tokens) if t.lower() == held]
            if len(hits) != 1:
                raise TextAuditError(f"{path}:{line}: the sentence holds {len(hits)} '{held}' (its source holds one, "
                                     "which the neighbourhood never touches); was the file edited?")
            sents.append(s)
            pos.append(hits[0])
        src = Source(str(marker["source"]), sents[0], pos[0], reversed_, marker.get("context"))
        units.setdefault(pair, []).append(_Unit(src, marker.get("sampled_k"), marker.get("weight"), sents, pos,
                                                np.array([r["distance"] for r in rows], dtype=int)))
    found = estimates_from_records([r for r in records if r.get("model") == model], cfg["k"], cfg["enumerate_k"])
    return BiasFindings(str(path), first_line or 2, str(cfg.get("model", model)), int(cfg["k"]), int(cfg["enumerate_k"]),
                        language, side, classes or 2, cfg.get("labels"), units, found.get(model, {}))


def bias_status(found: BiasEstimate, now: BiasEstimate | None) -> str:
    """``still`` / ``fixed`` / ``not_applicable`` of one (p, k′) (see the module docstring)."""
    if not found.significant:
        return "not_applicable"
    if now is None or not now.significant:
        return "fixed"
    return "still" if np.sign(now.B) == np.sign(found.B) else "fixed"


def estimate_fields(e: BiasEstimate | None, prefix: str = "") -> dict[str, Any]:
    """A replay record's fields of one estimate: B, its interval, the sentences and sources it pools."""
    if e is None:
        return {f"{prefix}B": None, f"{prefix}ci95": None}
    d = e.to_dict()
    return {f"{prefix}B": d["B"], f"{prefix}ci95": d["ci95"], f"{prefix}n": d["n"], f"{prefix}sources": d["sources"]}


#: the columns of a replayed bias table (the CLI's and the report's): B as the run found it, on the model, on the baseline
REPLAY_COLUMNS = ["pair", "k", "B found", "B on model [95% CI]", "B on baseline", "status"]


def replay_row(r: dict, base: bool) -> list:
    """One (p, k′) replay record as a row of :data:`REPLAY_COLUMNS` (``base``: the replay had a baseline)."""

    def b(prefix: str) -> str:
        if r.get(f"{prefix}B") is None:
            return "–"
        lo, hi = r.get(f"{prefix}ci95") or (None, None)
        return f"{r[f'{prefix}B']:+.5f}" + (f" [{lo:+.5f}, {hi:+.5f}]" if None not in (lo, hi) else "")

    regressed = base and r.get("baseline_status") == "fixed" and r["status"] == "still"
    return ["/".join(r["pair"]), r["k"], b("found_"), b(""), b("baseline_") if base else "–",
            r["status"] + (" (regressed)" if regressed else "")]
