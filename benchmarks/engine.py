"""The engine's host cost: SO-Beam through the old string path and through token ids, side by side.

    TEXTAUDIT_DATA=../shared/data python benchmarks/engine.py [--model cnn --model lstm] [--limit 50]
        [--k 6] [--device cpu|cuda] [--json]

For each model, SO-Beam (β = 20, κ = 20, δ = 3, k = 6) attacks the first ``--limit`` SST-2 dev
examples on two paths in one process, each with its own classifier and masked LM (fresh caches),
example by example side by side (alternating which path goes first):

- ``strings``: the old path — every classifier text and every masked copy is tokenised from its
  text (the zoo's regex tokeniser + ``Vocab.encode``, the HuggingFace tokenizer), batches of a fixed
  number of texts, the garbage collector as Python sets it;
- ``ids``: sentences as token ids — per-word cached ids spliced, batches packed to a token budget,
  the models' objects frozen out of the garbage collector's walks (:mod:`textaudit.engine.heap`).

What both paths share (the new ``Sentence``, the classifier's cache) is faster than today's main
too, so the ratio printed here understates the gain over main; ``benchmarks/engine.md`` also
quotes main measured side by side.

Printed per path: examples/s, classifier texts/s, masked sentences/s, device seconds (inside the
bare ``nn.Module`` calls; CUDA events on a GPU), host µs per classifier text and per masked sentence
((wall − device seconds) / count), texts and masked sentences per forward, and ``floor_ratio``:
wall / floor, the floor being each example's padded batches of the ids path replayed at once
through bare forwards (the same texts and masked sentences on pre-built tensors: what the device
alone would need). The
records of the two paths are compared (status, pair, vulnerable text, predictions, ℓ0; F_soft to
1e-5). This prints; it asserts nothing (speed is not a test). With ``--json`` the last line is
``{"model", "limit", "device", "records_identical", "paths": {"strings": {...}, "ids": {...}}}``
(one object per model; a line per model).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time

from textaudit.engine import frozen_heap


def _records_identical(a: list[dict], b: list[dict]) -> bool:
    keys = ("status", "pair", "patch_position", "vulnerable", "vulnerable_patched", "vulnerable_prediction",
            "vulnerable_patched_prediction", "prediction", "l0", "reason")
    for x, y in zip(a, b):
        if any(x.get(k) != y.get(k) for k in keys):
            return False
        fx, fy = x.get("f_soft"), y.get("f_soft")
        if (fx is None) != (fy is None) or (fx is not None and abs(fx - fy) > 1e-5):
            return False
    return len(a) == len(b)


def _floor_seconds(clf, mlm, clf_batches: list, mlm_batches: list) -> float:
    """Seconds of the recorded padded batches through bare forwards (no tokenising, no bookkeeping)."""
    import torch

    fwd = clf.forward
    t0 = time.perf_counter()
    for enc in clf_batches:
        with torch.inference_mode():
            fwd.module(**enc)
    for enc, where, top in mlm_batches:
        mlm.bare_forward(enc, where, top)
    if str(fwd.device).startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - t0


class Path:
    """One path's own classifier and masked LM, its attack and its counters (over every round)."""

    def __init__(self, name: str, model: str, device: str | None, k: int, texts, method: str = "so-beam",
                 in_flight: int | None = None, floor: bool = False, batch_tokens: int | None = None):
        from textaudit.attacks import make_attack
        from textaudit.attacks.registry import method_spec
        from textaudit.engine.scheduler import default_in_flight
        from textaudit.models import load_classifier
        from textaudit.models.encoders import SentenceEncoder
        from textaudit.neighborhoods import load_mlm

        self.name = name
        self.clf = load_classifier(model, device=device)
        self.mlm = load_mlm("minilm-mlm", device=device, quiet=True)
        self.clf.use_ids = self.mlm.use_ids = name != "strings"
        if batch_tokens and name == "in_flight":  # the in_flight path's forwards this big (default: the device's)
            self.clf.batch_tokens = self.mlm.batch_tokens = batch_tokens
        self.in_flight = (in_flight or default_in_flight(self.mlm.device)) if name == "in_flight" else 1
        options = {"k": k, "mlm": self.mlm, "encoder": SentenceEncoder(device=device) if method == "bae" else None}
        self.atk = make_attack(method, self.clf, **{o: v for o, v in options.items()
                                                    if o in method_spec(method).options and v is not None})
        if hasattr(self.atk, "rank_patch_words"):
            self.atk.rank_patch_words(texts)  # ranked before the clock starts (as the CLI does)
        self.floor_on = floor and name != "strings"
        self.fresh()
        self.clf.reset_stats()
        self.wall = self.floor = 0.0
        self.attacked = 0
        self.records: list[dict] = []

    def fresh(self) -> None:
        """Empty caches: every round does the whole work."""
        self.clf.clear_cache()
        self.mlm.clear_cache()

    def run(self, texts: list[str], labels: list[int]) -> list[dict]:
        """Attack every example (timed; fresh caches), one at a time or ``in_flight`` at once; with
        ``floor``, replay the padded batches through the bare forwards afterwards."""
        self.fresh()
        rec_clf: list = []
        rec_mlm: list = []
        if self.floor_on:
            self.clf.forward.recorder, self.mlm.recorder = rec_clf, rec_mlm
        # the old path ran with the garbage collector as Python sets it; the engine keeps it off the
        # models' objects (textaudit.engine.heap, as run_attack does for a whole run)
        heap = frozen_heap(collect=False) if self.name != "strings" else contextlib.nullcontext()
        out: list[dict | None] = [None] * len(texts)
        t0 = time.perf_counter()
        with heap:
            jobs = [(i, (t, y, None)) for i, (t, y) in enumerate(zip(texts, labels))]
            for i, res in self.atk.attack_many(jobs, in_flight=self.in_flight):
                out[i] = res.to_dict()
                print(f"\r{self.name}: {sum(r is not None for r in out)}/{len(texts)}", end="", file=sys.stderr,
                      flush=True)
        self.wall += time.perf_counter() - t0
        self.attacked += len(texts)
        self.clf.forward.recorder = self.mlm.recorder = None
        if self.floor_on:
            self.floor += _floor_seconds(self.clf, self.mlm, rec_clf, rec_mlm)
        print(file=sys.stderr)
        return out  # type: ignore[return-value]

    def figures(self) -> dict:
        st, mlm, wall, n = self.clf.stats, self.mlm, self.wall, self.attacked
        device = st.device_seconds + mlm.clock.seconds
        host = max(wall - device, 0.0)
        n_texts, n_masked = st.unique_forwards, mlm.forwards
        out = {
            "in_flight": self.in_flight,
            "wall_s": round(wall, 2),
            "examples_per_s": round(n / wall, 3),
            "texts_per_s": round(n_texts / wall, 1),
            "masked_per_s": round(n_masked / wall, 1),
            "texts": n_texts, "masked": n_masked,
            "device_s": round(device, 2),
            "host_s": round(host, 2),
            "busy_share": round(device / wall, 3),
            "host_ms_per_example": round(1e3 * host / n, 1),
            "host_us_per_text": round(1e6 * host / max(n_texts, 1), 2),
            "host_us_per_masked": round(1e6 * host / max(n_masked, 1), 1),
            "texts_per_forward": round(n_texts / max(st.batches, 1), 1),
            "masked_per_forward": round(n_masked / max(mlm.clock.calls, 1), 1),
            "success": sum(r["status"] == "success" for r in self.records),
        }
        if self.floor:
            out["floor_s"] = round(self.floor, 2)
            out["floor_ratio"] = round(wall / self.floor, 3)
        return out


def _exactly_identical(a: list[dict], b: list[dict]) -> bool:
    """Every field but ``seconds`` equal (queries included), F_soft to 1e-6: a float32 probability
    can differ in its last bit between batch compositions (4e-10 measured on cnn between a batch
    of one and of eight), which moves a 6-decimal F_soft by one unit now and then."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        fx, fy = x.get("f_soft"), y.get("f_soft")
        if (fx is None) != (fy is None) or (fx is not None and abs(fx - fy) > 1.5e-6):
            return False
        if any(x.get(k) != y.get(k) for k in set(x) | set(y) if k not in ("seconds", "f_soft")):
            return False
    return True


def _f_soft_last_digit(a: list[dict], b: list[dict]) -> int:
    """How many records' F_soft differ in the sixth decimal (everything else equal)."""
    return sum(x.get("f_soft") != y.get("f_soft") for x, y in zip(a, b))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", help="zoo model (repeat; default: cnn and lstm)")
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--method", default="so-beam", help="any method of the registry (records compared the same way)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--paths", default="ids,in_flight", help="comma-separated: strings, ids, in_flight")
    ap.add_argument("--in-flight", type=int, default=None, help="the in_flight path's examples in flight "
                    "(default: the engine's, 32 on a CPU)")
    ap.add_argument("--batch-tokens", type=int, default=None, help="the in_flight path's padded tokens per "
                    "forward, classifier and masked LM (default: the device's, 4,096 on a CPU)")
    ap.add_argument("--rounds", type=int, default=2, help="whole passes per path, in palindromic order (ABBA)")
    ap.add_argument("--floor", action="store_true", help="replay the padded batches through bare forwards")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from textaudit.neighborhoods.score_cache import use_score_cache
    from textaudit.neighborhoods.store import use_store

    # every path computes what it asks: neither the neighbourhood store nor the classifiers' score cache answers
    # (the first path would fill them for the next, which would then forward nothing)
    with use_store("off"), use_score_cache("off"):
        _measure(args)


def _measure(args: argparse.Namespace) -> None:
    from textaudit.data import load_dataset
    from textaudit.progress import quiet_third_party_bars

    quiet_third_party_bars()
    ds = load_dataset("sst2:dev", limit=args.limit)
    texts, labels = list(ds["text"]), [int(y) for y in ds["label"]]
    names = [p.strip() for p in args.paths.split(",") if p.strip()]
    for name in args.model or ["cnn", "lstm"]:
        paths = {p: Path(p, name, args.device, args.k, texts, args.method, args.in_flight, args.floor, args.batch_tokens)
                 for p in names}
        device = next(iter(paths.values())).mlm.device
        # side by side: whole passes in palindromic order (A B B A), so that a busy stretch of the
        # machine falls on every path alike
        order = [p for r in range(args.rounds) for p in (names if r % 2 == 0 else names[::-1])]
        for p in order:
            recs = paths[p].run(texts, labels)
            if not paths[p].records:
                paths[p].records = recs
            elif not _exactly_identical(paths[p].records, recs):
                print(f"warning: {p}'s records differ between rounds", file=sys.stderr)
        figs = {p: paths[p].figures() for p in names}
        base = names[0]
        same = {p: (_exactly_identical(paths[base].records, paths[p].records) if "strings" not in (p, base)
                    else _records_identical(paths[base].records, paths[p].records)) for p in names[1:]}
        last = {p: _f_soft_last_digit(paths[base].records, paths[p].records) for p in names[1:]}
        print(f"\n{name}: {args.method} k={args.k} on the first {args.limit} SST-2 dev examples, device {device}, "
              f"{args.rounds} rounds per path; records identical to {base}'s (F_soft to 1e-6): {same}; "
              f"F_soft differing in the 6th decimal: {last}")
        rows = [("in flight", "in_flight"), ("examples/s", "examples_per_s"), ("classifier texts/s", "texts_per_s"),
                ("masked sentences/s", "masked_per_s"), ("wall s", "wall_s"), ("device s", "device_s"),
                ("device-busy share", "busy_share"), ("host s", "host_s"), ("host ms / example", "host_ms_per_example"),
                ("host µs / classifier text", "host_us_per_text"), ("host µs / masked sentence", "host_us_per_masked"),
                ("texts / forward", "texts_per_forward"), ("masked / forward", "masked_per_forward"),
                ("wall / floor", "floor_ratio"), ("successes", "success")]
        others = names[1:]
        head = "".join(f" {p:>10} |" for p in names) + "".join(f" {p + ' / ' + base:>20} |" for p in others)
        print(f"| {'':28} |{head}")
        print(f"| {'-' * 28} |" + "".join(f" {'-' * 10}:|" for _ in names) + "".join(f" {'-' * 20}:|" for _ in others))
        for label, key in rows:
            vals = [figs[p].get(key) for p in names]
            cells = "".join(f" {'' if v is None else v:>10} |" for v in vals)
            b = figs[base].get(key)
            for p in others:
                a = figs[p].get(key)
                ratio = f"{a / b:.2f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else ""
                cells += f" {ratio:>20} |"
            print(f"| {label:28} |{cells}")
        if args.json:
            print(json.dumps({"model": name, "limit": args.limit, "device": device, "rounds": args.rounds,
                              "in_flight_batch_tokens": args.batch_tokens,
                              "records_identical": same, "f_soft_last_digit": last, "paths": figs}))


if __name__ == "__main__":
    main()
