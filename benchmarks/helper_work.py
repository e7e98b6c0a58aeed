"""What a first-order search asks of its helpers per classifier text: the constants behind the time estimate of
``--recipe paper`` (:data:`textaudit.attacks.estimate.HELPER_ITEMS_PER_TEXT`).

    TEXTAUDIT_DATA=../shared/data python benchmarks/helper_work.py [--model cnn] [--genetic 8] [--bae 40]

Runs Genetic (``--recipe paper``: Jia et al.'s LM rule) on the first ``--genetic`` SST-2 dev examples and BAE
(``relaxed`` and ``paper``) on the first ``--bae``, each from cold caches, and prints, per run, the classifier texts
the model or the store answered (not its memory cache: the records' ``queries`` unit) and, per helper, the items it
computed (LM windows scored, sentences encoded, contexts tagged) — their ratio is the helper's items per classifier
text — and the seconds each took.
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--genetic", type=int, default=8)
    ap.add_argument("--bae", type=int, default=40)
    args = ap.parse_args()

    from textaudit.attacks import make_attack, run_attack
    from textaudit.attacks.pos import PartOfSpeech
    from textaudit.data import load_dataset
    from textaudit.lm import load_causal_lm
    from textaudit.models import load_classifier
    from textaudit.models.batched import query_stats
    from textaudit.models.encoders import SentenceEncoder
    from textaudit.neighborhoods import load_mlm

    mlm = load_mlm(quiet=True)
    runs = [("genetic", "paper", args.genetic), ("bae", "relaxed", args.bae), ("bae", "paper", args.bae)]
    out = {}
    for method, recipe, n in runs:
        if not n:
            continue
        clf = load_classifier(args.model)
        ds = load_dataset("sst2:dev", limit=n)
        if method == "genetic":
            helpers = {"lm": load_causal_lm()}
            atk = make_attack("genetic", clf, recipe=recipe, lm=helpers["lm"], seed=0)
        else:
            helpers = {"encoder": SentenceEncoder()}
            if recipe == "paper":
                helpers["pos"] = PartOfSpeech()
            atk = make_attack("bae", clf, recipe=recipe, mlm=mlm, seed=0, **helpers)
        run_attack(atk, ds["text"], ds["label"], progress=False)
        stats = query_stats(atk.classifier)  # (texts the model or the store answered: the records' unit)
        texts = float(getattr(stats, "answered", 0) or 0) - float(getattr(stats, "cache_hits", 0) or 0)
        items = {"lm": lambda h: h.forwards, "encoder": lambda h: len(h._cache), "pos": lambda h: h.asked}
        row = {"classifier_texts": texts}
        for name, h in helpers.items():
            k = items[name](h)
            row[name] = {"items": k, "per_text": round(k / max(texts, 1.0), 3), "seconds": round(h.seconds, 1),
                         "seconds_per_item": round(h.seconds / max(k, 1), 5)}
        out[f"{method} {recipe}"] = row
        print(f"{method} {recipe} ({n} examples): {json.dumps(row)}", flush=True)
    print(json.dumps({"model": args.model, "runs": out}))


if __name__ == "__main__":
    main()
