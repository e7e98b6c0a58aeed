"""The shipped SmolLM2 behind a server no one here wrote, audited label-only, against ``llm:smollm2``.

    TEXTAUDIT_DATA=../shared/data python benchmarks/llm_endpoint.py [--limit 100] [--attack-limit 10]
        [--path /v1/completions] [--max-tokens 3] [--verbalisers builtin|single] [--same-context]
        [--zero-shot] [--kappa 20] [--skip-evaluate] [--paired N] [--json]

Starts ``transformers serve`` (``pip install 'transformers[serving]'``) on 127.0.0.1 with the
shipped SmolLM2-135M (the GGUF's weights saved as a HuggingFace folder, as ``llm:smollm2`` loads
them), which takes one prompt per request and returns no log-probabilities. Then, with the built-in sentiment prompt
(label-only, the endpoint is shown its ``[[endpoint.examples]]`` and stops at a line break;
``--zero-shot`` leaves the examples out, as before they were chosen):

1. ``audit evaluate`` of the endpoint on the first ``--limit`` SST-2 dev sentences (label-only, found
   out by the probe; the share of unknown completions) and of ``llm:smollm2`` (the same weights and
   prompt, scored by verbaliser log-probabilities in-process);
2. the agreement of the two on the examples whose completion is a verbaliser (the endpoint's class
   was read, not unknown);
3. ``audit attack --method so-enum --k 1`` on the first ``--attack-limit`` dev sentences through the
   endpoint: the vulnerable examples found, each re-checked at the endpoint (the post-condition).

Two things separate the endpoint's reading from ``llm:smollm2``'s besides our parsing: the rule
(the greedy first token of the whole vocabulary vs. the class whose verbalisers sum to the most
probability: the built-in prompt has three per class) and the context (``llm:`` models read a
prompt as the start of a document, after SmolLM2's ``<|endoftext|>``; a server tokenises the raw
prompt). ``--verbalisers single`` (negative/positive only) and ``--same-context`` (the endpoint's
template starts with ``<|endoftext|>``, which the server's tokenizer reads as that token) take
them away, so that what remains is the reading of completions itself.

``--paired N`` instead: both models' predictions on the first N dev sentences, in this process, and
for the first 100 and for all N: each one's accuracy with its Wilson interval, the endpoint's unknown
share, and McNemar's exact test of "right" on the endpoint vs ``llm:smollm2`` (are they different?).

Prints the figures (and with ``--json`` one object as the last line); asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import tomllib

from textaudit.data import load_dataset
from textaudit.models import load_classifier
from textaudit.models.options import ModelOptions
from textaudit.models.prompt import DEFAULT_PROMPT
from textaudit.resources import resolve


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    exe = Path(sys.executable).with_name("transformers")
    proc = subprocess.Popen([str(exe), "serve", model, "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    while True:
        try:
            urllib.request.urlopen(base + "/v1/models", timeout=5).read()
            return proc, base
        except OSError:
            if proc.poll() is not None:
                sys.exit(f"transformers serve did not start: {log.read_text()[-2000:]}")
            time.sleep(0.5)


def to_toml(spec: dict) -> str:
    """A prompt file's dict as TOML (strings as JSON writes them: TOML's basic strings read them alike)."""
    out = [f"template = {json.dumps(spec['template'])}", "", "[labels]"]
    out += [f"{name} = {json.dumps(words)}" for name, words in spec["labels"].items()]
    endpoint = dict(spec.get("endpoint", {}))
    examples = endpoint.pop("examples", [])
    out += ["", "[endpoint]"] + [f"{k} = {json.dumps(v)}" for k, v in endpoint.items()]
    for ex in examples:
        out += ["", "[[endpoint.examples]]", f"text = {json.dumps(ex['text'])}", f"label = {json.dumps(ex['label'])}"]
    return "\n".join(out) + "\n"


def serve_smollm2(work: Path) -> tuple[subprocess.Popen, str]:
    """``transformers serve`` of the shipped SmolLM2 on 127.0.0.1 (weights written under ``work``)."""
    # transformers serve's own GGUF loading (<dir>:<file>.gguf) fails on this file (the GGUF's config
    # names no architecture: "config.architectures[0]" is None); the same weights saved as a
    # HuggingFace folder (what llm:smollm2 loads) serve fine
    from textaudit.lm import load_lm

    model, tok, _ = load_lm("smollm2")
    model.config.architectures = [type(model).__name__]
    plain = type(model)(model.config)  # a GGUF-loaded model refuses save_pretrained: copy its weights out
    plain.load_state_dict(model.state_dict())
    plain.save_pretrained(work / "smollm2")
    tok.save_pretrained(work / "smollm2")
    del model, plain
    return start_server(str(work / "smollm2"), work / "serve.log")


def audit(*args: str) -> tuple[dict, str]:
    r = subprocess.run([sys.executable, "-m", "textaudit", *args, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"audit {args[0]} failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.splitlines()[-1]), r.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--attack-limit", type=int, default=10)
    ap.add_argument("--kappa", type=int, default=20, help="κ of the attack's neighbourhood (5: about a quarter of the requests)")
    ap.add_argument("--skip-evaluate", action="store_true", help="only the attack")
    ap.add_argument("--path", default="/v1/completions")
    ap.add_argument("--max-tokens", type=int, default=None, help="[endpoint] max_tokens of the label-only completions "
                    "(default: the built-in prompt's)")
    ap.add_argument("--zero-shot", action="store_true", help="without the built-in prompt's [[endpoint.examples]]")
    ap.add_argument("--verbalisers", choices=["builtin", "single"], default="builtin")
    ap.add_argument("--same-context", action="store_true", help="the endpoint's prompt starts with <|endoftext|>")
    ap.add_argument("--paired", type=int, default=None, help="only the paired comparison on the first N dev sentences")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    gguf = Path(resolve("smollm2"))
    work = Path(tempfile.mkdtemp(prefix="llm-endpoint-"))
    spec = tomllib.loads(DEFAULT_PROMPT.read_text())  # the built-in prompt, as both models read it
    if args.verbalisers == "single":
        spec["labels"] = {"negative": ["negative"], "positive": ["positive"]}
    if args.same_context:
        spec["template"] = "<|endoftext|>" + spec["template"]
    if args.max_tokens is not None:
        spec["endpoint"]["max_tokens"] = args.max_tokens
    if args.zero_shot:
        spec["endpoint"].pop("examples", None)
    prompt = local_prompt = work / "sentiment.toml"
    prompt.write_text(to_toml(spec))
    t0 = time.perf_counter()
    proc, base = serve_smollm2(work)
    print(f"transformers serve {gguf.name} (as a folder) on {base} (up in {time.perf_counter() - t0:.0f} s)", flush=True)
    url = base + args.path
    out: dict = {"url_path": args.path, "limit": args.limit, "verbalisers": args.verbalisers,
                 "same_context": args.same_context, "zero_shot": args.zero_shot}
    try:
        if args.paired:
            out["paired"] = paired(url, prompt, local_prompt, args.paired)
            args.skip_evaluate, args.attack_limit = True, 0
        if not args.skip_evaluate:
            common = ["--prompt-file", str(prompt), "--data", "sst2:dev", "--limit", str(args.limit)]
            t0 = time.perf_counter()
            ev, err = audit("evaluate", "--model", url, *common)
            out["endpoint"] = {k: ev.get(k) for k in ("accuracy", "accuracy_ci95", "scores", "unknown", "unknown_share")}
            out["endpoint"]["seconds"] = round(time.perf_counter() - t0, 1)
            print(f"endpoint   {ev['accuracy']:.4f} {ev['accuracy_ci95']}  unknown {ev['unknown']}/{ev['n']}  "
                  f"({ev['scores']})", flush=True)
            print("  stderr: " + " | ".join(line for line in err.splitlines() if line.startswith("notice")), flush=True)
            ev_llm, _ = audit("evaluate", "--model", "llm:smollm2", *[str(local_prompt) if a == str(prompt) else a
                                                                     for a in common])
            out["llm"] = {k: ev_llm.get(k) for k in ("accuracy", "accuracy_ci95")}
            print(f"llm:smollm2 {ev_llm['accuracy']:.4f} {ev_llm['accuracy_ci95']}", flush=True)

            # agreement, example by example, on the completions that named a class
            ds = load_dataset("sst2:dev", default_split="dev", limit=args.limit)
            remote = load_classifier(url, options=ModelOptions(prompt_file=prompt))
            local = load_classifier("llm:smollm2", options=ModelOptions(prompt_file=local_prompt))
            pr, pl = remote.predict_proba(ds["text"]).argmax(1), local.predict_proba(ds["text"]).argmax(1)
            read = pr != remote.unknown_class
            agree = float((pr[read] == pl[read]).mean()) if read.any() else float("nan")
            out["agreement_on_read"] = round(agree, 4)
            out["read"] = int(read.sum())
            print(f"agreement on the {int(read.sum())} examples whose completion is a verbaliser: {agree:.4f}", flush=True)

        if not args.attack_limit:
            return
        t0 = time.perf_counter()
        res, _ = audit("attack", "--model", url, "--prompt-file", str(prompt), "--data", "sst2:dev", "--limit",
                       str(args.attack_limit), "--method", "so-enum", "--k", "1", "--kappa", str(args.kappa), "--no-ppl",
                       "--output",
                       str(work / "attack.jsonl"))
        recs = [json.loads(x) for x in (work / "attack.jsonl").read_text().splitlines()[1:]]
        out["attack"] = {k: res.get(k) for k in ("attacked", "success", "success_rate", "skipped", "completions",
                                                 "unknown_completions", "scores")}
        out["attack"]["errors"] = sum(r["status"] == "error" for r in recs)
        out["attack"]["seconds"] = round(time.perf_counter() - t0, 1)
        print(f"so-enum k=1 on {args.attack_limit}: {res.get('success')} vulnerable of {res.get('attacked')} attacked, "
              f"{out['attack']['errors']} errors (a failed post-condition is one), "
              f"{res.get('unknown_completions')} unknown of {res.get('completions')} completions, "
              f"{out['attack']['seconds']:.0f} s", flush=True)
        for r in recs:
            if r["status"] == "success":
                print(f"  {r['vulnerable']!r} -> {r['vulnerable_prediction']} | {r['vulnerable_patched']!r} -> "
                      f"{r['vulnerable_patched_prediction']}")
    finally:
        proc.terminate()
        proc.wait(30)
        if args.json:
            print(json.dumps(out))


def paired(url: str, prompt: Path, local_prompt: Path, n: int) -> dict:
    """The endpoint and llm:smollm2 on the same first ``n`` dev sentences: accuracy, unknown share, McNemar."""
    from textaudit.stats import mcnemar, wilson

    ds = load_dataset("sst2:dev", default_split="dev", limit=n)
    y = np.asarray(ds["label"])
    remote = load_classifier(url, options=ModelOptions(prompt_file=prompt))
    local = load_classifier("llm:smollm2", options=ModelOptions(prompt_file=local_prompt))
    t0 = time.perf_counter()
    pr = remote.predict_proba(ds["text"]).argmax(1)
    t1 = time.perf_counter()
    pl = local.predict_proba(ds["text"]).argmax(1)
    t2 = time.perf_counter()
    out = {"seconds": {"endpoint": round(t1 - t0, 1), "llm": round(t2 - t1, 1)}}
    for m in sorted({min(100, n), n}):
        re, lo = pr[:m] == y[:m], pl[:m] == y[:m]
        test = mcnemar(lo.tolist(), re.tolist())
        row = {"endpoint": round(float(re.mean()), 4), "endpoint_ci95": [round(v, 4) for v in wilson(int(re.sum()), m)],
               "llm": round(float(lo.mean()), 4), "llm_ci95": [round(v, 4) for v in wilson(int(lo.sum()), m)],
               "unknown_share": round(float((pr[:m] == remote.unknown_class).mean()), 4),
               "only_endpoint_right": int((re & ~lo).sum()), "only_llm_right": int((lo & ~re).sum()),
               "mcnemar_p": round(float(test["p"]), 4)}
        out[str(m)] = row
        print(f"first {m} dev: endpoint {row['endpoint']:.4f} {row['endpoint_ci95']} (unknown {row['unknown_share']:.3f}), "
              f"llm:smollm2 {row['llm']:.4f} {row['llm_ci95']}; difference {row['endpoint'] - row['llm']:+.4f}; "
              f"only one right: endpoint {row['only_endpoint_right']}, llm {row['only_llm_right']}, McNemar p "
              f"{row['mcnemar_p']}", flush=True)
    return out


if __name__ == "__main__":
    os.environ.setdefault("TEXTAUDIT_THREADS", "1")
    np.set_printoptions(precision=4)
    main()
