"""Choose the built-in sentiment prompt of ``llm:`` models on SST-2 *train* (dev and test never read).

    TEXTAUDIT_DATA=../shared/data python benchmarks/llm_prompt_choice.py [--model smollm2] [--n 400] [--seed 0]
    TEXTAUDIT_DATA=../shared/data python benchmarks/llm_prompt_choice.py --endpoint [--n 200] [--chat]

``--endpoint``: the prompt of *label-only* endpoints instead (``[endpoint]`` and
``[[endpoint.examples]]`` of the built-in prompt). A server that returns no log-probabilities must
answer with a verbaliser; the candidates (the built-in template with 0, 1 or 2 few-shot examples per
class from train, in either order, each completion stopped at the first line break) are scored
through ``transformers serve`` of the shipped SmolLM2 (as ``benchmarks/llm_endpoint.py`` starts it),
by textaudit's own label-only reading: accuracy (an unknown answer is wrong) and the unknown share.
``--chat`` scores chat candidates through ``/v1/chat/completions`` too: the completions winner as
user/assistant turns, the same with the built-in ``[endpoint] system`` message, that system message
zero-shot, and the instruction inside the user turn (zero-shot); ``--chat-only`` scores only those
(the built-in prompt's examples as the turns).

Scores every candidate below (templates × verbaliser sets, zero-shot; with --few-shot also with
few-shot examples drawn from train) on N train sentences drawn with --seed, none of them a few-shot
example, and prints accuracy with its Wilson interval and the texts per second. Few-shot prompts
are several times longer, and an attack's cost grows with the prompt's length. The winner is written to
``src/textaudit/assets/sentiment-prompt.toml`` by hand (with the figures in its comment).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

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
    ap.add_argument("--endpoint", action="store_true", help="choose the label-only endpoint prompt instead")
    ap.add_argument("--chat", action="store_true", help="--endpoint: score chat candidates too")
    ap.add_argument("--chat-only", action="store_true", help="--endpoint: only the chat candidates")
    args = ap.parse_args()
    if args.endpoint:
        return choose_endpoint(args)

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


def train_split(n: int, shots_per_class: int, seed: int) -> tuple[list, list, np.ndarray]:
    """Few-shot examples (the first short sentences of each class in a seeded order) and ``n`` other
    train sentences with their labels."""
    from textaudit.data import load_dataset

    train = load_dataset("sst2:train")
    order = np.random.default_rng(seed).permutation(len(train))
    shots: dict[int, list] = {0: [], 1: []}
    used = set()
    for i in order:
        row = train[int(i)]
        y = int(row["label"])
        if len(shots[y]) < shots_per_class and 6 <= len(row["text"].split()) <= 16:
            shots[y].append(row["text"])
            used.add(int(i))
        if all(len(v) == shots_per_class for v in shots.values()):
            break
    rest = [int(i) for i in order if int(i) not in used][:n]
    return shots[0], shots[1], (np.array([train[i]["text"] for i in rest], dtype=object),
                                np.array([train[i]["label"] for i in rest]))


def endpoint_candidates(neg: list[str], pos: list[str]) -> dict[str, str]:
    """Prompt files (TOML text) of the label-only candidates: the built-in template and labels, a
    stop at the first line break, and 0, 1 or 2 examples per class, negative or positive last."""
    import json as _json

    from textaudit.models.prompt import DEFAULT_PROMPT

    base = "\n".join(line for line in DEFAULT_PROMPT.read_text().split("[endpoint]")[0].splitlines()
                     if not line.startswith("#"))

    def toml(examples: list[tuple[str, str]]) -> str:
        shots = "".join(f"\n[[endpoint.examples]]\ntext = {_json.dumps(t)}\nlabel = \"{lab}\"\n" for t, lab in examples)
        return base + '\n[endpoint]\nstop = ["\\n"]\nmax_tokens = 3\n' + shots

    out = {"0-shot": toml([])}
    for k in (1, 2):
        pairs_np = [x for i in range(k) for x in ((neg[i], "negative"), (pos[i], "positive"))]
        pairs_pn = [x for i in range(k) for x in ((pos[i], "positive"), (neg[i], "negative"))]
        out[f"{k}+{k} ending positive"] = toml(pairs_np)
        out[f"{k}+{k} ending negative"] = toml(pairs_pn)
    return out


def choose_endpoint(args) -> None:
    import sys
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from llm_endpoint import serve_smollm2

    neg, pos, (texts, labels) = train_split(args.n, 2, args.seed)
    work = Path(tempfile.mkdtemp(prefix="prompt-choice-"))
    proc, base = serve_smollm2(work)
    rows = []
    try:
        cands = {} if args.chat_only else endpoint_candidates(neg, pos)
        if args.chat_only:
            return score_chat(base, DEFAULT_PROMPT_TEXT(), work, texts, labels)
        for name, toml in cands.items():
            f = work / (name.replace(" ", "_").replace("+", "p") + ".toml")
            f.write_text(toml)
            rows.append((*score_endpoint(base + "/v1/completions", f, texts, labels), name, f))
            acc, ci, unk, sec = rows[-1][:4]
            print(f"completions {name:20s} acc {acc:.4f} {ci}  unknown {unk:.3f}  {len(texts) / sec:.1f} texts/s", flush=True)
        best = max(rows, key=lambda r: (r[0], -r[2]))
        print(f"\nbest on {len(texts)} SST-2 train sentences (seed {args.seed}): {best[4]}, accuracy {best[0]:.4f} "
              f"{best[1]}, unknown {best[2]:.3f}")
        if args.chat:
            score_chat(base, best[5].read_text(), work, texts, labels)
        print("\n" + best[5].read_text())
    finally:
        proc.terminate()
        proc.wait(30)


def DEFAULT_PROMPT_TEXT() -> str:
    from textaudit.models.prompt import DEFAULT_PROMPT

    return DEFAULT_PROMPT.read_text()


def chat_candidates(toml: str) -> dict[str, str]:
    """Chat prompt files from a label-only prompt file: its turns without and with a system message, the system
    message zero-shot, and the instruction inside the user turn (zero-shot)."""
    import json as _json

    import tomllib

    from textaudit.models.prompt import DEFAULT_PROMPT

    system = tomllib.loads(DEFAULT_PROMPT.read_text())["endpoint"]["system"]
    head, _, rest = toml.partition("[endpoint]")
    body = [line for line in rest.splitlines() if not line.startswith("system")]
    shots = "\n".join(body[body.index(next(x for x in body if x.startswith("[[endpoint.examples]]"))):]) \
        if any(x.startswith("[[endpoint.examples]]") for x in body) else ""
    plain = '[endpoint]\nstop = ["\\n"]\nmax_tokens = 3\n'
    with_system = plain + f"system = {_json.dumps(system)}\n"
    template = next(line for line in head.splitlines() if line.startswith("template"))
    inside = head.replace(template, "template = " + _json.dumps(system + "\n\nReview: {text}"))
    return {"turns": head + plain + "\n" + shots, "system + turns": head + with_system + "\n" + shots,
            "system, 0-shot": head + with_system, "instruction in the user turn, 0-shot": inside + plain}


def score_chat(base: str, toml: str, work, texts, labels) -> None:
    for name, cand in chat_candidates(toml).items():
        f = work / ("chat-" + "".join(ch if ch.isalnum() else "_" for ch in name) + ".toml")
        f.write_text(cand)
        acc, ci, unk, sec = score_endpoint(base + "/v1/chat/completions", f, texts, labels)
        print(f"chat {name:38s} acc {acc:.4f} {ci}  unknown {unk:.3f}  {len(texts) / sec:.1f} texts/s", flush=True)


def score_endpoint(url: str, prompt_file, texts, labels) -> tuple[float, str, float, float]:
    """Accuracy (unknown is wrong) with its Wilson interval, unknown share and seconds, label-only."""
    from textaudit.models import load_classifier
    from textaudit.models.options import ModelOptions
    from textaudit.stats import format_ci, wilson

    clf = load_classifier(url, options=ModelOptions(prompt_file=prompt_file, scores="labels", concurrency=2))
    t0 = time.perf_counter()
    pred = clf.predict_proba(list(texts)).argmax(1)
    sec = time.perf_counter() - t0
    right = pred == labels
    return float(right.mean()), format_ci(wilson(int(right.sum()), len(right))), float((pred == clf.unknown_class).mean()), sec


if __name__ == "__main__":
    main()
