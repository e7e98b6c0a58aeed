"""Choose the built-in sentiment prompt of ``llm:`` models on SST-2 *train* (dev and test never read).

    TEXTAUDIT_DATA=../shared/data python benchmarks/llm_prompt_choice.py [--model smollm2] [--n 400] [--seed 0]

Scores every candidate below (templates × verbaliser sets, zero-shot; with --few-shot also with
few-shot examples drawn from train) on N train sentences drawn with --seed, none of them a few-shot
example, and prints accuracy with its Wilson interval and the texts per second. Few-shot prompts
are several times longer, and an attack's cost grows with the prompt's length. The winner is written to
``src/textaudit/assets/sentiment-prompt.toml`` by hand (with the figures in its comment).
"""

from __future__ import annotations

import argparse
import time

TEMPLATES = {
    "review": "Review: {text}\nSentiment:",
    "movie-review": "Movie review: {text}\nWas the review positive or negative? Answer:",
    "quote": 'Sentence: "{text}"\nThe sentiment of this sentence is',
    "it-was": "{text} All in all, the movie was",
}
VERBALIZERS = {
    "pos/neg": (["negative"], ["positive"]),
    "good/bad": (["bad"], ["good"]),
    "both": (["negative", "bad", "terrible"], ["positive", "good", "great"]),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--shots", type=int, default=4, help="few-shot examples per class in the few-shot candidates")
    ap.add_argument("--few-shot", action="store_true", help="also score every candidate with few-shot examples")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import numpy as np

    from textaudit.data import load_dataset
    from textaudit.lm import load_lm
    from textaudit.models.llm import llm_classifier
    from textaudit.models.prompt import Prompt
    from textaudit.stats import format_ci, wilson

    train = load_dataset("sst2:train")
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(train))
    shots_idx, per = [], {0: 0, 1: 0}
    for i in order:  # the first `shots` short sentences of each class become examples
        y = int(train[int(i)]["label"])
        if per[y] < args.shots and 6 <= len(train[int(i)]["text"].split()) <= 16:
            shots_idx.append(int(i))
            per[y] += 1
        if len(shots_idx) == 2 * args.shots:
            break
    rest = [int(i) for i in order if int(i) not in set(shots_idx)][: args.n]
    texts = [train[i]["text"] for i in rest]
    labels = np.array([train[i]["label"] for i in rest])
    shots = tuple((train[i]["text"], int(train[i]["label"])) for i in sorted(shots_idx, key=lambda j: order.tolist().index(j)))

    model, tok, _ = load_lm(args.model)
    rows = []
    for tname, template in TEMPLATES.items():
        for vname, verbs in VERBALIZERS.items():
            for few in ((False, True) if args.few_shot else (False,)):
                prompt = Prompt(template=template, labels=("negative", "positive"), verbalizers=(tuple(verbs[0]), tuple(verbs[1])),
                                examples=shots if few else ())
                clf = llm_classifier(model, tok, prompt)
                t0 = time.perf_counter()
                probs = clf.predict_proba(texts)
                sec = time.perf_counter() - t0
                right = probs.argmax(1) == labels
                # balanced threshold: accuracy if the decision threshold on P(positive) were the median
                rows.append((float(right.mean()), tname, vname, "few" if few else "zero",
                             format_ci(wilson(int(right.sum()), len(right))), len(texts) / sec,
                             float((probs.argmax(1) == 1).mean())))
                print(f"{tname:13s} {vname:9s} {rows[-1][3]:4s} acc {rows[-1][0]:.4f} {rows[-1][4]}  "
                      f"{rows[-1][5]:.1f} texts/s  predicted positive {rows[-1][6]:.2f}", flush=True)
    best = max(rows)
    print(f"\nbest on {len(texts)} SST-2 train sentences: template={best[1]} verbalizers={best[2]} {best[3]}-shot "
          f"accuracy {best[0]:.4f} {best[4]}")
    if best[3] == "few":
        print("few-shot examples (train rows):", shots_idx)


if __name__ == "__main__":
    main()
