"""A six-label toxicity model in the Jigsaw scheme (toxic, severe_toxic, obscene, threat, insult, identity_hate) for
benchmarks/multilabel.py: one independent sigmoid per label over counts of words, with an identity term on
identity_hate and toxic — a stand-in, written out here, for the multi-label classifiers people audit (it is fast, so
the benchmark measures what textaudit shares between labels: the masked LM's neighbourhoods and the forwards)."""

import math

WORDS = {
    "toxic": {"bad": 1.0, "worst": 1.5, "stupid": 2.0, "dull": 0.5, "mess": 1.0, "gay": 0.8, "muslim": 0.8},
    "severe_toxic": {"worst": 1.0, "stupid": 1.0, "hate": 2.0},
    "obscene": {"mess": 0.8, "damn": 2.0},
    "threat": {"kill": 2.5, "hurt": 1.5},
    "insult": {"stupid": 2.0, "dull": 0.8, "boring": 0.8},
    "identity_hate": {"gay": 1.2, "muslim": 1.2, "jewish": 1.2, "she": 0.3, "he": 0.1},
}
LABELS = list(WORDS)


def clf(texts):
    out = []
    for t in texts:
        words = t.lower().split()
        out.append([1 / (1 + math.exp(-(sum(w.get(x, 0.0) for x in words) - 1.5))) for w in WORDS.values()])
    return out


clf.multilabel = True
clf.labels = LABELS
