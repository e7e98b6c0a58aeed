"""Randomized smoothing (SAFER, RanMASK) against IBP on the same SST-2 dev examples (issue #50; figures in
benchmarks/certify.md).

    TEXTAUDIT_DATA=../shared/data python benchmarks/certify.py [--limit 200] [--models cnn,lstm] [--samples 1000]
        [--selection 100] [--methods safer,ranmask] [--mask-rates 0.9,0.5] [--second-order cnn] [--neighbor-sample 8]
        [--patches 2] [--threads 2] [--out DIR] [--json] [--hardened runs/cnn-masked/model,...]

For each model M of ``--models``: ``audit certify --model M --method safer`` and ``--method ranmask`` at each
``--mask-rates`` ρ (each its own process, as a user runs it; the zoo model trains on first use) on the first
``--limit`` dev sentences — the smoothed accuracy and the certified accuracy at radius 0, 1, 2, … with Wilson
intervals — and ``audit certify --model M-ibp --method ibp`` on the same sentences: IBP certifies every word
substituted at once. With ``--second-order M`` that model's SAFER run adds the second-order view (k = 1): of its
certified inputs, the share with a natural neighbour not certified, and the share with one whose smoothed
prediction flips under a synonym patch.

``--hardened`` adds a model ``audit harden --method masked|substitute`` trained (issue #83): certified under the
threat model it was trained for (``audit certify`` reads it from the model), with its fingerprint, the second-order
view, and RanMASK's published figure beside it (over 50 % of SST-2 certified against any 2-word change: RoBERTa
trained on masked copies, ρ = 0.9).

Prints the figures (``--json``: one object as the last line); asserts nothing. The SAFER paper's own figures
are for IMDB and Amazon reviews with its own perturbation sets, not for SST-2: benchmarks/certify.md says so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def certify(threads: int, *args: str) -> tuple[float, dict, str]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "textaudit", "--threads", str(threads), "certify", *args, "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"audit certify {' '.join(args)} failed:\n{r.stderr[-2000:]}")
    return time.perf_counter() - t0, json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def report(what: str, wall: float, s: dict) -> dict:
    """Print one smoothing run's figures and return them."""
    print(f"{what}: smoothed accuracy {s['accuracy']} {s['accuracy_ci95']}, {s['abstain']} abstained, {wall:.0f} s",
          flush=True)
    for c in s["curve"][:6]:
        print(f"  radius {c['radius']}: certified accuracy {c['certified_accuracy']} {c['certified_accuracy_ci95']}",
              flush=True)
    if s.get("median_radius_share_correct") is not None:
        print(f"  median certified share of the words (right predictions): {s['median_radius_share_correct']}", flush=True)
    if s.get("second_order"):
        so = s["second_order"]
        print(f"  second order (k = 1): {so['certified_inputs']} certified inputs, {so['neighbors']} neighbours; with a "
              f"neighbour not certified {so['with_uncertified_neighbor_share']} {so['with_uncertified_neighbor_ci95']}; "
              f"with a patch-flipping neighbour {so['with_patch_flip_share']} {so['with_patch_flip_ci95']}", flush=True)
    return {"seconds": round(wall, 1), **{k: s.get(k) for k in ("accuracy", "accuracy_ci95", "abstain", "curve",
                                                                "median_radius_correct", "median_radius_share_correct",
                                                                "second_order")}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--models", default="cnn,lstm")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--selection", type=int, default=100)
    ap.add_argument("--methods", default="safer,ranmask", help="the smoothing methods (and ibp: the M-ibp model)")
    ap.add_argument("--mask-rates", default="0.9,0.5", help="RanMASK's ρ values")
    ap.add_argument("--no-ibp", action="store_true", help="leave the M-ibp runs out")
    ap.add_argument("--second-order", default="cnn", help="the model whose run adds the second-order view ('' for none)")
    ap.add_argument("--neighbor-sample", type=int, default=8)
    ap.add_argument("--patches", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="a folder for the results files (default: a temporary one)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--hardened", default="", help="hardened model folders (audit harden --method masked|substitute)")
    args = ap.parse_args()
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="certify-bench-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    out: dict = {"limit": args.limit, "samples": args.samples, "selection": args.selection, "models": {}}
    methods = [x.strip() for x in args.methods.split(",") if x.strip()]
    common = ["--data", "sst2:dev", "--limit", str(args.limit)]
    sample = ["--samples", str(args.samples), "--selection", str(args.selection)]
    for m in [x.strip() for x in args.models.split(",") if x.strip()]:
        row: dict = {}
        if "safer" in methods:
            second = m == args.second_order
            extra = ["--neighbors", "1", "--neighbor-sample", str(args.neighbor_sample), "--patches", str(args.patches)] \
                if second else ["--neighbors", "0"]
            wall, s, _ = certify(args.threads, "--model", m, "--method", "safer", *common, *sample, *extra,
                                 "--output", str(out_dir / f"{m}.safer.jsonl"))
            row["safer"] = report(f"{m} SAFER", wall, s)
        if "ranmask" in methods:
            for rate in [x.strip() for x in args.mask_rates.split(",") if x.strip()]:
                wall, s, _ = certify(args.threads, "--model", m, "--method", "ranmask", "--mask-rate", rate, *common,
                                     *sample, "--neighbors", "0", "--output", str(out_dir / f"{m}.ranmask{rate}.jsonl"))
                row[f"ranmask_{rate}"] = report(f"{m} RanMASK ρ = {rate}", wall, s)
        if not args.no_ibp:
            wall, ibp, _ = certify(args.threads, "--model", f"{m}-ibp", "--method", "ibp", *common)
            row["ibp"] = {"model": f"{m}-ibp", "seconds": round(wall, 1), **ibp}
            print(f"{m}-ibp IBP: accuracy {ibp['accuracy']} {ibp.get('accuracy_ci95')}, certified accuracy (every word) "
                  f"{ibp['certified_accuracy']} {ibp.get('certified_accuracy_ci95')}", flush=True)
        out["models"][m] = row
    for path in [x.strip() for x in args.hardened.split(",") if x.strip()]:
        name = Path(path).parent.name or Path(path).name
        extra = ["--neighbors", "1", "--neighbor-sample", str(args.neighbor_sample), "--patches", str(args.patches)]
        result = out_dir / f"{name}.hardened.jsonl"
        wall, s, _ = certify(args.threads, "--model", path, *common, *sample, *extra, "--output", str(result))
        header = json.loads(result.read_text().splitlines()[0])["header"]["config"]
        print(f"{name} (hardened; fingerprint {header.get('model_fingerprint')}; {header.get('method')}"
              f"{', ρ = ' + str(header['mask_rate']) if 'mask_rate' in header else ''}) — RanMASK's published figure: "
              "over 50 % of SST-2 at radius 2 (RoBERTa, ρ = 0.9)", flush=True)
        out["models"][name] = {"hardened": {"fingerprint": header.get("model_fingerprint"), "method": header.get("method"),
                                            **report(f"{name} hardened", wall, s)}}
    print(f"files: {out_dir}")
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
