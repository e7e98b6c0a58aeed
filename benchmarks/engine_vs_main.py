"""Host cost per attacked example of another textaudit checkout (today's main, say), measured the
way ``benchmarks/engine.py`` measures this one: SO-Beam k = 6 on the first N SST-2 dev examples,
host = wall − seconds inside the bare forwards (the classifier's module call; the masked LM's
encoder, head, whole-word mask and top-k).

    git worktree add /tmp/main-checkout <commit>
    TEXTAUDIT_DATA=../shared/data python benchmarks/engine_vs_main.py /tmp/main-checkout [--model cnn] [--limit 50]

It imports the other checkout's ``textaudit`` (its ``src/`` first on the path) and times its bare
forwards by wrapping them (the old ``TorchForward.__call__`` and ``HFMaskedLM._predict`` are
re-stated here with a clock around the module calls, nothing else changed); then it runs
``benchmarks/engine.py``'s ids path of *this* checkout in a second process on the same examples,
and prints both. Prints, asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_OLD = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1] + "/src")
import numpy as np, torch
import textaudit
from textaudit.models import torch_backend
from textaudit.neighborhoods import masked_lm
DEVICE = [0.0]

def call(self, texts):  # main's TorchForward.__call__, clock around the module call
    enc = torch_backend.only_inputs(self.tokenizer(texts), self._inputs)
    enc = {k: (v.to(self.device) if hasattr(v, "to") else v) for k, v in enc.items()}
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = self.module(**enc)
    DEVICE[0] += time.perf_counter() - t0
    logits = getattr(out, "logits", out)
    return logits.float().cpu().numpy()

def predict(self, chunk, top):  # main's HFMaskedLM._predict, clock around encoder + head + top-k
    from textaudit.errors import TextAuditError
    t0 = time.perf_counter()
    enc = self._encode(chunk)
    ids = enc["input_ids"]
    is_mask = ids == self.tokenizer.mask_token_id
    if not bool((is_mask.sum(1) == 1).all()):
        raise TextAuditError("too long")
    enc = {k: v.to(self.device) for k, v in enc.items()}
    d0 = time.perf_counter()
    with torch.inference_mode():
        base = self.model.base_model(**enc)
        hidden = base.last_hidden_state[is_mask.to(self.device)]
        logits = self._hidden_to_logits(hidden)
        if logits is None:
            logits = self.model(**enc).logits[is_mask.to(self.device)]
        if self._allowed_t is None or self._allowed_t.device != logits.device:
            self._allowed_t = torch.from_numpy(self._allowed).to(logits.device)
        logits = logits.float().masked_fill(~self._allowed_t, float("-inf"))
        vals, idx = logits.topk(top, dim=-1)
    DEVICE[0] += time.perf_counter() - d0
    vals, idx = vals.cpu().numpy(), idx.cpu().numpy()
    self.forwards += len(chunk)
    self.forward_seconds += time.perf_counter() - t0
    return [[(self.id_to_word[j], float(v)) for v, j in zip(vr, ir) if np.isfinite(v)] for vr, ir in zip(vals, idx)]

torch_backend.TorchForward.__call__ = call
masked_lm.HFMaskedLM._predict = predict
from textaudit.attacks import SOBeam
from textaudit.data import load_dataset
from textaudit.models import load_classifier
from textaudit.neighborhoods import load_mlm
model, limit = sys.argv[2], int(sys.argv[3])
ds = load_dataset("sst2:dev", limit=limit)
texts, labels = list(ds["text"]), [int(y) for y in ds["label"]]
clf = load_classifier(model)
atk = SOBeam(clf, 6, mlm=load_mlm("minilm-mlm", quiet=True))
atk.rank_patch_words(texts)
clf.clear_cache(); clf.reset_stats()
t0 = time.perf_counter()
records = [atk.attack(t, y).to_dict() for t, y in zip(texts, labels)]
wall = time.perf_counter() - t0
print(json.dumps({"version": textaudit.__file__, "wall_s": wall, "device_s": DEVICE[0],
                  "host_ms_per_example": 1e3 * (wall - DEVICE[0]) / limit, "texts": clf.stats.unique_forwards,
                  "vulnerable": [r.get("vulnerable") for r in records]}))
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", help="the other checkout's root (a git worktree of main, say)")
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--limit", type=int, default=50)
    args = ap.parse_args()
    # the other checkout computes everything, as engine.py's run here does (store and score cache off): a store
    # warm from earlier runs answered its every text (0 forwarded, a wall of seconds) and made the ratio meaningless
    cold = {**os.environ, "TEXTAUDIT_STORE": "off", "TEXTAUDIT_SCORE_CACHE": "off"}
    old = json.loads(subprocess.run([sys.executable, "-c", _OLD, args.checkout, args.model, str(args.limit)],
                                    check=True, capture_output=True, text=True, env=cold).stdout.strip().splitlines()[-1])
    new = json.loads(subprocess.run([sys.executable, str(HERE / "engine.py"), "--model", args.model, "--limit",
                                     str(args.limit), "--json"], check=True, capture_output=True,
                                    text=True).stdout.strip().splitlines()[-1])
    ids = new["paths"]["ids"]
    print(f"{args.model}, SO-Beam k=6, first {args.limit} SST-2 dev examples")
    print(f"| {'':22} | {'other checkout':>14} | {'this one (ids)':>14} | {'ratio':>6} |")
    print(f"| {'-' * 22} | {'-' * 14}:| {'-' * 14}:| {'-' * 6}:|")
    print(f"| {'wall s':22} | {old['wall_s']:14.2f} | {ids['wall_s']:14.2f} | {old['wall_s'] / ids['wall_s']:6.2f} |")
    print(f"| {'device s':22} | {old['device_s']:14.2f} | {ids['device_s']:14.2f} | |")
    print(f"| {'host ms / example':22} | {old['host_ms_per_example']:14.1f} | {ids['host_ms_per_example']:14.1f} | "
          f"{old['host_ms_per_example'] / ids['host_ms_per_example']:6.2f} |")
    print(f"| {'texts forwarded':22} | {old['texts']:14d} | {ids['texts']:14d} | |")


if __name__ == "__main__":
    main()
