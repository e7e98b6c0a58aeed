"""What hardening trains on: weaknesses found on the *training* split.

- :func:`mine` attacks training examples (SO-Beam / SO-Enum / Genetic / BAE on our engine and
  budgets) into a resumable results file; :func:`found_examples` turns every success into training
  examples with the gold label: x̃ and x̃ ⊕ p for a second-order success (the Double Perturbation
  reading: a model should not change its prediction under the swap p = (w1, w2) on natural
  neighbours), the adversarial example for a first-order one.
- :func:`consistency_pairs` builds the pairs (x̃, x̃ ⊕ p) of the consistency loss: x and up to
  ``neighbors`` of its Neighbor_1 sentences (the masked LM's κ/δ one-word replacements, the
  swapped position kept), with p either the attack's patch pair of x (robustness) or a protected
  pair such as (he, she) (counterfactual bias).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from textaudit.attacks.patch import Patch, PatchWords, apply_patch
from textaudit.attacks.registry import make_attack, method_spec
from textaudit.attacks.run import run_attack
from textaudit.errors import TextAuditError
from textaudit.fairness.pairs import find_sources
from textaudit.sentence import Sentence

__all__ = ["mine", "build_attack", "found_examples", "consistency_pairs"]


def mine(classifier, texts: Sequence[str], labels: Sequence[int], ids: Sequence[str], *, method: str, k: int | None,
         mlm, output: Path, seed: int, max_queries: int | None = None, data: str = "train",
         in_flight: int | None = None, progress: bool = True,
         pairs: Sequence[tuple[str, str]] | None = None, naturalness: bool = True) -> list[dict]:
    """Attack ``texts`` (training examples) with ``method`` into ``output`` (resumed when it exists)
    and return the records. ``pairs``: the second-order attacks' p is one of them (either direction)."""
    atk = build_attack(method, classifier, k=k, mlm=mlm, seed=seed, max_queries=max_queries, pairs=pairs,
                       naturalness=naturalness)
    if hasattr(atk, "rank_patch_words"):
        atk.rank_patch_words(texts)
    _, records = run_attack(atk, list(texts), list(labels), ids=list(ids), output=output, resume=output.exists(),
                            config={"data": data, "role": "harden: weaknesses of the training split"},
                            progress=progress, in_flight=in_flight)
    return records


def build_attack(method: str, classifier, *, k: int | None, mlm, seed: int, max_queries: int | None = None,
                 pairs: Sequence[tuple[str, str]] | None = None, naturalness: bool = True):
    """``method`` on ``classifier`` with the options it takes (k, the masked LM, the naturalness constraint); with
    ``pairs``, a second-order attack's p = (w1, w2) is one of them, in either direction."""
    spec = method_spec(method)
    opts = {"seed": seed, "max_queries": max_queries, **({"k": k} if "k" in spec.options else {}),
            **({"mlm": mlm} if spec.needs_mlm else {}),
            **({"naturalness": naturalness} if "naturalness" in spec.options else {})}
    if pairs and "patch_words" in spec.options:
        both = list(dict.fromkeys([(a, b) for a, b in pairs] + [(b, a) for a, b in pairs]))
        opts["patch_words"] = PatchWords(classifier, both)
    return make_attack(method, classifier, **opts)


def found_examples(records: Sequence[dict]) -> list[tuple[str, int]]:
    """``(text, gold label)`` of every success: x̃ and x̃ ⊕ p (second order), or the adversarial
    example (first order). Records without a gold label are left out."""
    out: list[tuple[str, int]] = []
    for r in records:
        if r.get("status") != "success" or r.get("label") is None:
            continue
        for text in (r.get("vulnerable"), r.get("vulnerable_patched")):
            if text:
                out.append((text, int(r["label"])))
    return out


def consistency_pairs(texts: Sequence[str], *, builder, pairs: Sequence[tuple[str, str]] | None = None,
                      patch_words=None, neighbors: int = 4, seed: int = 0, per_sentence: int = 1
                      ) -> list[tuple[str, str]]:
    """Pairs (x̃, x̃ ⊕ p) over ``texts`` and up to ``neighbors`` Neighbor_1 sentences of each.

    ``pairs``: protected pairs (bias): every sentence with exactly one of p's words (either
    direction, :func:`~textaudit.fairness.pairs.find_sources`) is a source. Otherwise
    ``patch_words`` (:class:`~textaudit.attacks.patch.PatchWords`): each sentence's ``per_sentence``
    best-ranked patch pairs (1: the p the second-order attacks choose; more: the next ones too, each
    with its own neighbours). The neighbours are drawn with ``seed``."""
    if (pairs is None) == (patch_words is None):
        raise TextAuditError("consistency pairs need protected pairs or patch words (one of them)")
    sources: list[tuple[Sentence, Patch]] = []
    if pairs is not None:
        for w1, w2 in pairs:
            for src in find_sources(texts, (w1, w2)):
                a, b = (w2, w1) if src.reversed else (w1, w2)
                sources.append((src.sentence, Patch(a, b, src.position, 0.0)))
    else:
        for t in texts:
            s = builder.parse(t)
            sources.extend((s, p) for p in patch_words.select_many(s, per_sentence, per_word=per_sentence))
    rng = np.random.default_rng(seed)
    unique = list(dict.fromkeys(s for s, _ in sources))  # a sentence with several p: its neighbours once
    of = dict(zip(unique, builder.neighbors1(unique))) if neighbors > 0 and unique else {}
    out: list[tuple[str, str]] = []
    for s, p in sources:
        nbrs = of.get(s, [])
        keep = [z for z in nbrs if len(z) > p.position and z.tokens[p.position].lower() == p.w1]  # the swapped word stays
        if len(keep) > neighbors:
            keep = [keep[i] for i in sorted(rng.choice(len(keep), neighbors, replace=False))]
        for z in [s, *keep]:
            out.append((z.text(), apply_patch(z, p).text()))
    return out
