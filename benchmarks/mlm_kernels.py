"""Cheaper masked-LM forwards on a CPU? The same masked sentences through four kernels, side by side (#54).

minilm-mlm (the offline default) answers masked contexts from SST-2 *train* sentences (every word position
of ``--sentences`` sentences), recorded as the padded batches the neighbourhood builder sends. Each kernel
replays exactly those batches — the encoder, the MLM head at the masked positions, the whole-word mask,
top-20 — best of ``--repeat``:

- eager fp32: today's path (``HFMaskedLM.bare_forward``);
- int8: ``torch.ao.quantization.quantize_dynamic`` of every ``nn.Linear`` (weights int8, activations
  quantized on the fly);
- compile: ``torch.compile(encoder, dynamic=True)`` (its compile time said apart);
- ONNX Runtime: the encoder exported with ``torch.onnx.export`` (dynamic batch and length) and run by
  ``onnxruntime`` on the CPU; the head and top-k as in eager.

For each: masked sentences per second, the ratio to eager, and agreement with eager's answers — the
share of rows whose top-20 words are identical in order, and the mean overlap of the top-20 sets.

    pip install onnxruntime onnx onnxscript   # only for the ONNX Runtime row
    python benchmarks/mlm_kernels.py [--sentences 150] [--threads 2]
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path


def replay(fn, batches) -> tuple[float, list]:
    t0 = time.perf_counter()
    out = []
    for enc, where, top in batches:
        vals, idx = fn(enc, where, top)
        out.append(idx.cpu())
    return time.perf_counter() - t0, out


def agreement(ref: list, got: list) -> tuple[float, float]:
    same = overlap = rows = 0
    for a, b in zip(ref, got):
        for ra, rb in zip(a.tolist(), b.tolist()):
            rows += 1
            same += ra == rb
            overlap += len(set(ra) & set(rb)) / len(ra)
    return same / rows, overlap / rows


def main(argv: list[str] | None = None) -> int:
    import torch

    from textaudit.data import load_dataset
    from textaudit.neighborhoods.masked_lm import HFMaskedLM
    from textaudit.neighborhoods.minilm_mlm import load_minilm_mlm

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=150)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    mlm = load_minilm_mlm(device="cpu")
    texts = [t.split() for t in load_dataset("sst2", default_split="train", limit=4 * args.sentences)["text"]
             if 5 <= len(t.split()) <= 30][: args.sentences]
    queries = [(w, i) for w in texts for i in range(len(w))]
    mlm.recorder = []
    mlm.candidates(queries, top=20)
    batches, mlm.recorder = mlm.recorder, None
    n = sum(int(w.sum()) for _, w, _ in batches)
    print(f"{n} masked sentences from {len(texts)} SST-2 train sentences, {len(batches)} batches, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")

    def best(fn):
        times, out = [], None
        for _ in range(args.repeat):
            t, out = replay(fn, batches)
            times.append(t)
        return min(times), out

    eager_t, ref = best(mlm.bare_forward)
    rows = [("eager fp32", eager_t, 1.0, 1.0, "")]

    q = copy.deepcopy(mlm.model)
    q = torch.ao.quantization.quantize_dynamic(q, {torch.nn.Linear}, dtype=torch.qint8)
    int8 = HFMaskedLM.__new__(HFMaskedLM)
    int8.__dict__.update({**mlm.__dict__, "_model": q, "_allowed_t": None})  # model is a property over _model
    t, out = best(int8.bare_forward)
    rows.append(("int8 (dynamic)", t, *agreement(ref, out), ""))

    comp = HFMaskedLM.__new__(HFMaskedLM)
    cm = copy.deepcopy(mlm.model)
    prefix = cm.base_model_prefix
    setattr(cm, prefix, torch.compile(getattr(cm, prefix), dynamic=True))
    comp.__dict__.update({**mlm.__dict__, "_model": cm, "_allowed_t": None})
    t0 = time.perf_counter()
    replay(comp.bare_forward, batches)  # compiles (and recompiles for new shapes)
    compile_s = time.perf_counter() - t0
    t, out = best(comp.bare_forward)
    rows.append(("torch.compile", t, *agreement(ref, out), f"first pass (compiling) {compile_s:.1f} s"))

    try:
        import onnxruntime as ort
    except ImportError:
        rows.append(("ONNX Runtime", float("nan"), float("nan"), float("nan"), "not installed: pip install onnxruntime onnx onnxscript"))
    else:
        rows.append(ort_row(mlm, batches, ref, ort, best))

    print(f"{'kernel':<16} {'masked/s':>9} {'vs eager':>9} {'same top-20':>12} {'top-20 overlap':>15}")
    for name, t, same, overlap, note in rows:
        print(f"{name:<16} {n / t:9.0f} {eager_t / t:8.2f}x {same:12.3f} {overlap:15.3f}  {note}")
    return 0


def ort_row(mlm, batches, ref, ort, best):
    import numpy as np
    import torch

    base = mlm.model.base_model
    names = [k for k in batches[0][0]]

    class Encoder(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *inputs):
            return self.m(**dict(zip(names, inputs))).last_hidden_state

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "encoder.onnx"
        example = tuple(batches[0][0][k] for k in names)
        dyn = {k: {0: "batch", 1: "length"} for k in names}
        t0 = time.perf_counter()
        torch.onnx.export(Encoder(base).eval(), example, str(path), input_names=names, output_names=["hidden"],
                          dynamic_axes={**dyn, "hidden": {0: "batch", 1: "length"}}, dynamo=False)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = torch.get_num_threads()
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        export_s = time.perf_counter() - t0

        def fn(enc, where, top):
            hidden = sess.run(None, {k: np.ascontiguousarray(enc[k].numpy()) for k in names})[0]
            h = torch.from_numpy(hidden)[where]
            with torch.inference_mode():
                logits = mlm._hidden_to_logits(h)
                allowed = torch.from_numpy(mlm._allowed)
                return logits.float().masked_fill(~allowed, float("-inf")).topk(top, dim=-1)

        t, out = best(fn)
    return ("ONNX Runtime", t, *agreement(ref, out), f"export + session {export_s:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
