"""Quality mode: a masked LM's candidates re-ranked by a causal LM's sentence likelihood.

``--mlm minilm-mlm+smollm2`` (any ``MLM+LM`` pair :func:`textaudit.neighborhoods.mlm.load_mlm`
knows): the masked LM proposes a pool of ``P`` whole-word candidates for the masked position; each
is put into the sentence and the causal LM scores the whole sentence, so the words *after* the
position count too (a masked LM of six layers often proposes a word that reads well on its left
only). The score of candidate w at position i of x is

    s(w) = log P_LM(x with x_i = w) + λ · logit_MLM(w)

in nats; candidates come back best first with s as their logit, so a neighbourhood's δ window
(top κ within δ of the best) means "within δ nats of the most likely sentence". λ and P were
chosen on the training-time dev sets (WordNet dev examples and the SST-2 *train* hold-out, 250
masked words each), never on a held-out evaluation set: ``benchmarks/mlm_quality.py --choose-rerank``
gave mean top-10 0.624 for minilm-mlm alone (P = 10: its own top 10), 0.650–0.672 with P = 20,
0.648–0.678 with P = 30 and 0.652–0.692 with P = 50 over λ ∈ {0, 0.25, 0.5, 1, 2}; the best,
P = 50 and λ = 1 (0.676 / 0.708), is the default.

Every candidate sentence is one row of a batched causal-LM forward (rows sorted by length, cached
per sentence), so the quality mode costs about P causal-LM sentences per masked sentence.
"""

from __future__ import annotations

from typing import Sequence

from textaudit.neighborhoods.masked_lm import MaskedLM, Query
from textaudit.neighborhoods.store import tops_per_query

__all__ = ["RerankedMaskedLM", "POOL", "WEIGHT"]

#: P: candidates the masked LM proposes per position before re-ranking
POOL = 50
#: λ: weight of the masked LM's logit beside the causal LM's log-likelihood (nats)
WEIGHT = 1.0


class RerankedMaskedLM:
    """:class:`~textaudit.neighborhoods.masked_lm.MaskedLM` whose candidates are ``mlm``'s top ``pool``
    re-ranked by ``lm.log_likelihood`` of the filled sentence plus ``weight`` × the MLM logit."""

    def __init__(self, mlm: MaskedLM, lm, *, pool: int = POOL, weight: float = WEIGHT):
        self.mlm, self.lm, self.pool, self.weight = mlm, lm, pool, weight
        self.name = f"{mlm.name}+{lm.name}"

    @property
    def tokenizer(self):
        return getattr(self.mlm, "tokenizer", None)

    @property
    def forwards(self) -> int:
        """Masked-LM forwards (the causal LM's are ``lm.forwards``)."""
        return int(getattr(self.mlm, "forwards", 0))

    def clear_cache(self) -> None:
        getattr(self.mlm, "clear_cache", lambda: None)()
        self.lm.clear_cache()

    #: ``candidates`` takes one ``top`` per query (as its masked LM's, when that one does)
    @property
    def tops_per_item(self) -> bool:
        return bool(getattr(self.mlm, "tops_per_item", False))

    def candidates(self, batch: list[Query], top: int | Sequence[int] = 20) -> list[list[tuple[str, float]]]:
        """Per ``(words, position)``: the ``top`` candidates ``(word, s(word))`` best first (``top``: one for all,
        or one per query)."""
        tops = tops_per_query(top, len(batch))
        wide = [max(self.pool, t) for t in tops]  # (one value for all unless the tops differ: any masked LM takes that)
        proposals = self.mlm.candidates(batch, top=wide if len(set(wide)) > 1 else max(self.pool, *tops[:1]))
        texts = [_filled(words, pos, w) for (words, pos), props in zip(batch, proposals) for w, _ in props]
        ll = iter(self.lm.log_likelihood(texts))
        out = []
        for props, t in zip(proposals, tops):
            scored = [(w, next(ll) + self.weight * logit) for w, logit in props]
            scored.sort(key=lambda c: -c[1])
            out.append(scored[:t])
        return out


def _filled(words: Sequence[str], pos: int, word: str) -> str:
    return " ".join([*words[:pos], word, *words[pos + 1:]])
