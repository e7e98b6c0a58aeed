"""Throughput of the shared wrapper vs a bare batched forward of the same module, same texts.

    python benchmarks/wrapper_overhead.py [--n 2000] [--batch-size 128]

Model: the MiniLM-L6 encoder (resource ``minilm``) with a randomly initialised 2-class head, as a
HuggingFace sequence classifier — a realistic forward cost. Texts: the first N SST-2 *train*
sentences, in file order. "bare" = tokenise each batch of ``batch_size`` texts in the given order,
pad to the longest, one forward under inference_mode; "wrapper" = ``BatchedClassifier`` with an
empty cache (it de-duplicates, sorts by length and validates). Ratio = wrapper / bare throughput
(target >= 0.9); a second ratio against a bare forward over the same texts pre-sorted by length
isolates the wrapper's own overhead. Each is timed twice, alternating, best kept.
"""

from __future__ import annotations

import argparse
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=128)
    args = ap.parse_args()

    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from textaudit.data import load_dataset
    from textaudit.models import torch_classifier
    from textaudit.models.torch_backend import hf_tokenize
    from textaudit.resources import resolve

    texts = load_dataset("sst2:train", limit=args.n)["text"]
    path = resolve("minilm")
    tok = AutoTokenizer.from_pretrained(path)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2).eval()
    encode = hf_tokenize(tok)

    def bare(order: list[str]) -> float:
        t0 = time.perf_counter()
        with torch.inference_mode():
            for i in range(0, len(order), args.batch_size):
                enc = encode(order[i:i + args.batch_size])
                torch.softmax(model(**enc).logits, -1).numpy()
        return time.perf_counter() - t0

    def wrapped() -> float:
        clf = torch_classifier(model, encode, batch_size=args.batch_size, device="cpu")
        t0 = time.perf_counter()
        clf.predict_proba(texts)
        return time.perf_counter() - t0

    by_len = sorted(dict.fromkeys(texts), key=len)
    bare(texts); wrapped()  # warm-up
    tb, ts, tw = [], [], []
    for _ in range(2):
        tb.append(bare(texts)); ts.append(bare(by_len)); tw.append(wrapped())
    tb, ts, tw = min(tb), min(ts), min(tw)
    print(f"texts={len(texts)} batch_size={args.batch_size} threads={torch.get_num_threads()}")
    print(f"bare forward, file order      : {len(texts) / tb:8.1f} texts/s ({tb:.2f} s)")
    print(f"bare forward, sorted by length: {len(texts) / ts:8.1f} texts/s ({ts:.2f} s)")
    print(f"wrapper (BatchedClassifier)   : {len(texts) / tw:8.1f} texts/s ({tw:.2f} s)")
    print(f"ratio wrapper/bare throughput = {tb / tw:.2f}  (target >= 0.9)")
    print(f"ratio wrapper/bare-sorted     = {ts / tw:.2f}  (the wrapper's pure overhead)")


if __name__ == "__main__":
    main()
