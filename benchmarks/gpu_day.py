"""The one prepared run on a lent GPU (``../shared/GPU-DAY.md``): every step under one deadline.

    source .gpu/setup.sh && python benchmarks/gpu_day.py --out $OUT --budget 430
    TEXTAUDIT_DATA=../shared/data python benchmarks/gpu_day.py --out /tmp/gd --tiny --device cpu  # try it here

Steps, in order, each a subprocess stopped (SIGTERM, then SIGKILL) at its own cap or the run's
deadline, whichever comes first; a step that fails or overruns is logged and the next one runs:

1. ``engine-<model>``: ``benchmarks/engine.py`` — SO-Beam (β = 20, κ = 20, δ = 3, k = 6) over all 872
   SST-2 dev examples, the in-flight path, one round, ``--floor``: examples/s, the device-busy share
   (CUDA events inside the forwards), host µs per text, wall / floor.
2. ``bert-base-bf16``: a BERT-base-sized sequence classifier (random weights, 110 M parameters)
   through the shared wrapper (``hf:``, bf16 autocast, the device's token budget): classifier
   texts/s on SST-2 *train* sentences (unique, so no cache answers them), beside a bare forward.
3. ``paper-so-enum-<model>``: SO-Enum (k = 2), the slowest cell of ``benchmarks/reproduce_paper.py``,
   into that script's cell file (``runs/few/<model>.so-enum.jsonl``, same header), no perplexities
   (the causal LM does not travel; they are added afterwards on the CPU). The examples are taken in
   a seeded random order (a permutation of dev, seed 0): a run stopped at its deadline has finished
   a uniformly random subset, the longest prefix of the permutation it completed (read it with
   :func:`finished_prefix`); a resume, here or on a CPU, continues the same order. Measured on the first
   run (H200, 2026-11-27): stopped twice, minilm finished 699 of 872, and the 173 left were the long
   examples (each stopped in flight both times), so that prefix was a single example — with 256 in
   flight, a stop strands the slow ones. ``reproduce_paper.py`` shows such a cell as partial, with the
   bounds of the whole set's rate whatever the rest would give.

``minilm`` is trained on the GPU first (``train_model``, what ``audit train --model minilm`` runs): its checkpoint and the MiniLM
encoder the masked LM needs do not both fit in what may travel. Its checkpoint comes back (fp16, in
parts under 16 MiB: ``minilm.part*``) so that the CPU's cells use the same weights.

Beside the steps, ``nvidia-smi`` samples the GPU's busy share every 200 ms (``smi.csv``), and each
step's start and end are logged, so every step's share can be read off the samples.
Writes into ``--out``: ``gpu_day.json`` (environment, every step's figures and seconds),
``gpu_day.log`` (every step's output), ``smi.csv``, ``paper-runs.tar.gz`` (the cells' files) and the
``minilm.part*`` of the trained checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

BERT_SCRIPT = r"""
import json, sys, time, torch
from transformers import BertConfig, BertForSequenceClassification, AutoTokenizer
from textaudit.data import load_dataset
from textaudit.models import load_classifier
from textaudit.resources import resolve

n, device, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
enc_dir = resolve("minilm")
tok = AutoTokenizer.from_pretrained(enc_dir)
torch.manual_seed(0)
model = BertForSequenceClassification(BertConfig(num_labels=2))  # BERT-base: 12 layers, 768 wide, 110 M
model.save_pretrained(out)
tok.save_pretrained(out)
w = min(2000, n // 10)
texts = list(dict.fromkeys(load_dataset("sst2:train")["text"]))[: n + w]
warm, texts = texts[:w], texts[w:]
clf = load_classifier(f"hf:{out}", device=device)
clf.predict_proba(warm)  # kernels compiled, allocator warm
sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
sync(); t0 = time.perf_counter()
clf.predict_proba(texts)
sync(); wrapper_s = time.perf_counter() - t0
m = model.to(device).eval()
bare_texts = sorted(texts, key=len)
sync(); t0 = time.perf_counter()
with torch.inference_mode(), torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=device.startswith("cuda")):
    for s in range(0, len(bare_texts), 512):
        e = tok(bare_texts[s:s + 512], return_tensors="pt", padding=True, truncation=True).to(device)
        m(**e).logits.float().softmax(-1).cpu()
sync(); bare_s = time.perf_counter() - t0
print(json.dumps({"texts": len(texts), "wrapper_texts_per_s": round(len(texts) / wrapper_s, 1),
                  "bare_texts_per_s": round(len(texts) / bare_s, 1), "wrapper_s": round(wrapper_s, 3),
                  "bare_s": round(bare_s, 3), "batch_tokens": getattr(clf, "batch_tokens", None),
                  "precision": str(getattr(getattr(clf, "forward", None), "precision", None))}))
"""


TRAIN_SCRIPT = r"""
import json, sys
from textaudit.models.zoo.build import train_model
print(json.dumps(train_model(sys.argv[1], progress=False), default=str))
"""

SO_ENUM_SCRIPT = r"""
import sys
import numpy as np
from textaudit.attacks import make_attack
from textaudit.attacks.run import run_attack
from textaudit.data import align_labels, dataset_id, load_dataset
from textaudit.formats.compare import cell_path
from textaudit.models import load_classifier
from textaudit.neighborhoods.mlm import load_mlm

model, out, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
ds = load_dataset("sst2:dev")
order = np.random.default_rng(0).permutation(len(ds))[:limit].tolist()  # a uniformly random order
ds = ds.select(order)
clf = load_classifier(model)
ds, _ = align_labels(ds, clf, None)
atk = make_attack("so-enum", clf, seed=0, mlm=load_mlm(None), naturalness=False)  # the paper's search
if hasattr(atk, "rank_patch_words"):  # as run_compare does
    atk.rank_patch_words(load_dataset("sst2:dev")["text"])
path = cell_path(out, model, "so-enum")
path.parent.mkdir(parents=True, exist_ok=True)
run_attack(atk, ds["text"], ds["label"], ids=ds["id"], output=path, resume=path.exists(),
           config={"data": dataset_id("sst2:dev", "dev")}, progress=False)
"""


def finished_prefix(records: list[dict], n: int = 872, seed: int = 0) -> list[dict]:
    """The records of the longest prefix of the seeded permutation of ``n`` dev examples that every
    one of them finished: a uniformly random subset of dev (the examples that happened to finish
    first are the quick ones, so the rest are left out)."""
    import numpy as np

    from textaudit.data import load_dataset

    ids = load_dataset("sst2:dev")["id"]
    by_id = {r.get("id"): r for r in records if r.get("id") is not None}
    out = []
    for i in np.random.default_rng(seed).permutation(n).tolist():
        if ids[i] not in by_id:
            break
        out.append(by_id[ids[i]])
    return out


def run_step(name: str, cmd: list[str], cap: float, deadline: float, log, steps: list[dict]) -> str:
    """Run one step under ``min(cap, deadline - now)`` seconds; log its output; return its stdout."""
    left = min(cap, deadline - time.time())
    step = {"name": name, "cmd": " ".join(cmd), "start": time.time(), "cap_s": round(left, 1)}
    if left < 5:
        step.update(status="skipped (no time left)", seconds=0.0)
        steps.append(step)
        return ""
    log.write(f"\n===== {name}: {step['cmd']} (cap {left:.0f} s) =====\n")
    log.flush()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=left)
        step["status"] = f"rc {p.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            out, _ = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
        step["status"] = "stopped at its cap"
    step["end"] = time.time()
    step["seconds"] = round(step["end"] - step["start"], 2)
    log.write(out or "")
    log.write(f"----- {name}: {step['status']} after {step['seconds']} s\n")
    log.flush()
    steps.append(step)
    return out or ""


def last_json(text: str) -> list[dict]:
    """Every line of ``text`` that is a JSON object."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                found.append(json.loads(line))
            except ValueError:
                pass
    return found


def pack_checkpoint(model: str, out: Path, part_mib: int = 15, half: bool = True) -> None:
    """The zoo checkpoint ``model`` (fp16 tensors with ``half``, else as trained) as ``<model>.tar.partNN``
    files under ``out``."""
    import io

    from safetensors import safe_open
    from safetensors.torch import load_file, save

    from textaudit.resources import cache_dir

    src = cache_dir() / "models" / model
    if not src.is_dir():
        return
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for f in sorted(src.iterdir()):
            if f.name.startswith("."):
                continue
            if f.suffix == ".safetensors" and half:
                t = load_file(str(f))
                with safe_open(str(f), "pt") as h:
                    meta = h.metadata()
                data = save({k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in t.items()},
                            metadata=meta)
                info = tarfile.TarInfo(f.name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.add(f, arcname=f.name)
    blob, step = buf.getvalue(), part_mib << 20
    for i in range(0, len(blob), step):
        (out / f"{model}.tar.part{i // step:02d}").write_bytes(blob[i:i + step])


PAPER_STEPS = (("so-beam", 150), ("bae", 120), ("genetic", 90), ("so-enum", 10_000))


def paper_plan(args, deadline: float, log, steps: list[dict], results: dict) -> None:
    """The second GPU run's plan: Table 2's cells of ``--paper-models`` at the paper's scale, into
    ``benchmarks/reproduce_paper.py``'s own layout (``<out>/paper-runs.tar.gz`` holds its ``runs/``).

    The zoo models the bundle did not carry would be trained here first (``train_model``, their
    checkpoints back whole as ``<model>.tar.partNN``) — but the zoo's training needs GloVe, which does
    not travel (measured on the second run: every training step failed at once). So carry the model
    (``gpu-bundle --models lstm``: one checkpoint fits beside the masked LM's encoder) and first store this
    machine's copy as the bundle restores it there (fp16-rounded, saved as fp32), so that both
    machines hold the same file and fingerprint. Keep the SST-2 train file in the bundle: the data's
    resource is whole only with it. Every cell runs in **fp32** (``--precision fp32``,
    the classifier and the masked LM): its header then matches a CPU run's, so the CPU resumes any
    cell stopped at the deadline, and no number in the table rests on bf16. No perplexities (the
    causal LM does not travel): ``reproduce_paper.py --fill-ppl`` adds them on the CPU. One method
    at a time over every model (SO-Beam, BAE, Genetic on the first 100, then SO-Enum with what is
    left), so a stop leaves the fast methods finished; the masked LM's answers stay in this run's
    store for the next method."""
    from textaudit.resources import cache_dir

    py = sys.executable
    models = args.paper_models.split(",")
    for model in models:
        if not (cache_dir() / "models" / model / "textaudit.json").is_file():
            out = run_step(f"train-{model}", [py, "-c", TRAIN_SCRIPT, model], 120, deadline, log, steps)
            results["figures"][f"train-{model}"] = last_json(out)
            pack_checkpoint(model, args.out, half=False)
    out_dir = Path("/tmp/gpu-day-paper")
    limit = ["--limit", "6", "--few-limit", "3"] if args.tiny else []
    for method, cap in PAPER_STEPS:
        run_step(f"paper-{method}", [py, str(HERE / "reproduce_paper.py"), "--out", str(out_dir), "--models",
                                     ",".join(models), "--methods", method, "--skip", "accuracy,bias", "--no-ppl",
                                     "--precision", "fp32", "--no-progress", *limit],
                 cap, deadline - 12, log, steps)
    runs = out_dir / "runs"
    if runs.is_dir():
        with tarfile.open(args.out / "paper-runs.tar.gz", "w:gz") as tar:
            tar.add(runs, arcname="runs")
        results["figures"]["paper-cells"] = {
            str(p.relative_to(runs)): sum(1 for _ in p.open()) - 1 for p in sorted(runs.rglob("*.jsonl"))}  # records


def environment() -> dict:
    import platform

    env = {"python": platform.python_version(), "machine": platform.machine(), "commit": None}
    try:
        import torch

        env["torch"] = torch.__version__
        env["cuda"] = torch.cuda.is_available()
        if env["cuda"]:
            env["gpu"] = torch.cuda.get_device_name(0)
    except Exception as e:  # noqa: BLE001 — recorded, the steps say more
        env["torch_error"] = repr(e)
    head = HERE.parent / ".git" / "HEAD"
    try:
        env["commit"] = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                       cwd=HERE.parent).stdout.strip() or None
    except OSError:
        env["commit"] = head.read_text().strip() if head.is_file() else None
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget", type=float, default=430, help="seconds for every step together")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--engine-models", default="lstm,minilm")
    ap.add_argument("--paper-models", default="minilm,lstm")
    ap.add_argument("--plan", choices=["engine", "paper"], default="engine",
                    help="engine: the first run's steps (above); paper: Table 2's cells only (paper_plan)")
    ap.add_argument("--tiny", action="store_true", help="a few examples each: try the run on a CPU first")
    ap.add_argument("--commit", default=None, help="the commit the working tree is at (no .git travels)")
    args = ap.parse_args()

    t_start = time.time()
    deadline = t_start + args.budget
    args.out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    limit = 4 if args.tiny else 872
    caps = {"train": 150, "engine": {"lstm": 70, "minilm": 120}, "bert": 45}
    env = environment()
    if args.commit:
        env["commit"] = args.commit
    smi = None
    if args.device.startswith("cuda"):
        try:
            smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,utilization.gpu,memory.used",
                                    "--format=csv,noheader,nounits", "-lms", "200"],
                                   stdout=open(args.out / "smi.csv", "w"), stderr=subprocess.DEVNULL)
            env["nvidia_smi"] = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip()
        except OSError as e:
            env["nvidia_smi"] = f"not run: {e}"
    steps: list[dict] = []
    results: dict = {"environment": env, "budget_s": args.budget, "tiny": args.tiny, "steps": steps, "figures": {}}
    with open(args.out / "gpu_day.log", "w") as log:
        if args.plan == "paper":
            paper_plan(args, deadline, log, steps, results)
        else:
            if not args.tiny:
                out = run_step("train-minilm", [py, "-c", TRAIN_SCRIPT, "minilm"], caps["train"], deadline, log, steps)
                results["figures"]["train-minilm"] = last_json(out)
                pack_checkpoint("minilm", args.out)
            for model in args.engine_models.split(","):
                out = run_step(f"engine-{model}", [py, str(HERE / "engine.py"), "--model", model, "--limit", str(limit),
                                                  "--paths", "in_flight", "--rounds", "1", "--floor", "--device", args.device,
                                                  "--json"], caps["engine"].get(model, 120), deadline, log, steps)
                results["figures"][f"engine-{model}"] = last_json(out)
            out = run_step("bert-base-bf16", [py, "-c", BERT_SCRIPT, str(200 if args.tiny else 40000), args.device,
                                              "/tmp/bert-base-random"], caps["bert"], deadline, log, steps)
            results["figures"]["bert-base-bf16"] = last_json(out)
            runs = Path("/tmp/gpu-day-paper/runs")
            for model in args.paper_models.split(","):
                run_step(f"paper-so-enum-{model}", [py, "-c", SO_ENUM_SCRIPT, model, str(runs / "few"),
                                                    str(3 if args.tiny else 872)], 10_000, deadline - 10, log, steps)
            if runs.is_dir():
                with tarfile.open(args.out / "paper-runs.tar.gz", "w:gz") as tar:
                    tar.add(runs, arcname="runs")
                results["figures"]["paper-so-enum"] = {
                    p.name: sum(1 for _ in p.open()) for p in sorted(runs.rglob("*.jsonl"))}  # lines, header included
    if smi is not None:
        smi.terminate()
    results["seconds"] = round(time.time() - t_start, 1)
    (args.out / "gpu_day.json").write_text(json.dumps(results, indent=1))
    print(json.dumps({k: v for k, v in results.items() if k != "steps"}, indent=1)[:6000])
    for s in steps:
        print(f"{s['name']}: {s['status']}, {s.get('seconds')} s")


if __name__ == "__main__":
    main()
