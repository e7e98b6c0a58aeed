"""Neighbourhood builder speed: builder vs a bare masked-LM forward, and the size/time of Neighbor_2.

    TEXTAUDIT_DATA=../shared/data python benchmarks/neighborhood_throughput.py [--mlm minilm-mlm] [--device cuda]
        [--only chunk]

1. Throughput (masked positions/s). The workload is one realistic frontier: Neighbor_1 of five
   15–25-word SST-2 dev sentences, expanded once more (every replaceable position of every
   sentence in the frontier masked). "bare" tokenises and runs the same list of masked copies
   through the encoder + MLM head at the masked positions in batches of the same size, then top-κ
   — no filtering, no cache, no de-duplication. "builder" = ``NeighborhoodBuilder.neighbors1`` on
   that frontier with an empty cache (it includes parsing, filtering, building sentences, and the
   cache that notices masked contexts shared between sentences; its masked copies are spliced from
   token ids and packed to the masked LM's token budget). Ratio = builder / bare (target ≥ 0.9).
   On CUDA the bare forward's inputs are moved to the GPU and both timings synchronise.
2. Neighbor_2 (κ = 20, δ = 3) of each of the five sentences: size per distance and seconds.
3. The frontier chunk (``NeighborhoodBuilder(frontier_chunk=…)``: frontier sentences per masked-LM ask) for one
   search alone, the case smaller asks could slow: Neighbor_2 of the same five sentences with the default (32) and
   with 256 (the default before #84), alternating which goes first, with an empty cache each time. Ratio =
   32's seconds / 256's (target ≤ 1.1: in a run the smaller asks let the engine's other searches' small asks —
   naturalness checks — through between them).
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlm", default=None)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--device", default=None)
    ap.add_argument("--only", choices=["chunk"], default=None, help="run the frontier-chunk comparison (3.) alone")
    ap.add_argument("--chunks", default="32,256", help="frontier chunks compared in 3. (the first is the default's)")
    args = ap.parse_args()

    import torch

    from textaudit.data import load_dataset
    from textaudit.neighborhoods import NeighborhoodBuilder, load_mlm

    mlm = load_mlm(args.mlm, device=args.device)
    mlm.batch_size = args.batch_size
    cuda = str(mlm.device).startswith("cuda")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()
    texts = [t for t in load_dataset("sst2:dev")["text"] if 15 <= len(t.split()) <= 25][:5]
    if args.only == "chunk":
        frontier_chunk(mlm, texts, sync, [int(c) for c in args.chunks.split(",")])
        return
    b = NeighborhoodBuilder(mlm, kappa=20, delta=3.0)
    frontier = [nb.sentence for t in texts for nb in b.neighbors(t, 1)]
    queries = [(list(s.tokens), i) for s in frontier for i in b.positions(s)]
    print(f"frontier: {len(frontier)} sentences, {len(queries)} masked positions")

    def bare() -> float:
        tok, model = mlm.tokenizer, mlm.model
        t0 = time.perf_counter()
        with torch.inference_mode():
            for s in range(0, len(queries), args.batch_size):
                chunk = queries[s:s + args.batch_size]
                words = [w[:i] + [tok.mask_token] + w[i + 1:] for w, i in chunk]
                enc = tok(words, is_split_into_words=True, padding="longest", return_tensors="pt")
                enc = {k: v.to(mlm.device) for k, v in enc.items()}  # the ids on the model's device
                hidden = model.base_model(**enc).last_hidden_state[enc["input_ids"] == tok.mask_token_id]
                mlm._hidden_to_logits(hidden).topk(20, dim=-1)
        sync()
        return time.perf_counter() - t0

    def builder() -> float:
        mlm._cache.clear()
        t0 = time.perf_counter()
        b.neighbors1(frontier)
        sync()
        return time.perf_counter() - t0

    bare(); builder()
    tb = min(bare(), bare())
    tn = min(builder(), builder())
    unique = len({(tuple(w[:i]), tuple(w[i + 1:])) for w, i in queries})
    print(f"bare MLM forward : {len(queries) / tb:8.1f} masked positions/s ({tb:.2f} s)")
    print(f"builder          : {len(queries) / tn:8.1f} masked positions/s ({tn:.2f} s; {unique} unique masked contexts)")
    print(f"ratio builder/bare = {tb / tn:.2f}  (target >= 0.9)")

    print("\nNeighbor_2, kappa=20, delta=3:")
    for t in texts:
        mlm._cache.clear()
        t0 = time.perf_counter()
        counts = b.counts(t, 2)
        dt = time.perf_counter() - t0
        print(f"  {len(t.split()):2d} words: |N1|={counts[0]:5d} |N2 new|={counts[1]:7d} total={sum(counts):7d}  {dt:6.1f} s  | {t[:60]}")
    frontier_chunk(mlm, texts, sync, [int(c) for c in args.chunks.split(",")])


def frontier_chunk(mlm, texts: list[str], sync, chunks: list[int]) -> None:
    """3.: Neighbor_2 of each text with each frontier chunk, the order rotated from one text to the next."""
    from textaudit.neighborhoods import NeighborhoodBuilder

    print("\nfrontier chunk, Neighbor_2 of one search alone (empty cache each time):")
    seconds = dict.fromkeys(chunks, 0.0)
    mlm.store = None  # (the neighbourhood store would answer the second of each pair)
    for n, t in enumerate(texts):
        for chunk in chunks[n % len(chunks):] + chunks[:n % len(chunks)]:
            mlm._cache.clear()
            t0 = time.perf_counter()
            NeighborhoodBuilder(mlm, kappa=20, delta=3.0, frontier_chunk=chunk).counts(t, 2)
            sync()
            seconds[chunk] += time.perf_counter() - t0
    base = chunks[-1]
    print("  " + "   ".join(f"{c}: {seconds[c]:.1f} s" for c in chunks) + "   ratio to " + str(base) + ": "
          + ", ".join(f"{c} {seconds[c] / seconds[base]:.2f}" for c in chunks[:-1]) + "  (target <= 1.1)")


if __name__ == "__main__":
    main()
