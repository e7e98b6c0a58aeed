"""``audit harden``: train the weaknesses the audits find out of a model, and prove it on examples
it never saw.

Methods (``--method``):

- **augment**: attack a sample of the *training* split (``--attack``, ``--k``), add every found x̃
  and x̃ ⊕ p with the gold label, fine-tune on train + found (each found example ``--found-weight``
  times: found examples are few beside a training split, and a shortcut the split teaches outweighs
  them unless they count more).
- **adversarial**: the same inside the training loop: ``--rounds`` rounds, each attacking a fresh
  sample of training examples with the *current* model and fine-tuning one epoch on train + all
  found so far (TextAttack's adversarial training, on our engine and budgets).
- **masked** (RanMASK's training) and **substitute** (SAFER's): fine-tune on the training split plus ``--copies``
  random copies of each example drawn exactly as the certificate draws them — words masked at ``--mask-rate``
  with ``--mask-token`` (:class:`~textaudit.robustness.smoothing.RanMASK`), or each word replaced by a random
  member of its synonym set (:class:`~textaudit.robustness.smoothing.SAFER`, ``--hops``) — so that the smoothed
  classifier votes over inputs like its training data. The hardened model records the threat model it was trained
  for, and ``audit certify`` on it uses that by default (:data:`CERTIFIED`).
- **consistency**: fine-tune with cross-entropy + λ × the symmetric KL between f(x̃) and f(x̃ ⊕ p)
  over pairs from training sentences and their Neighbor_1 (:mod:`textaudit.harden.losses`); p is
  each sentence's patch pair, or the protected pairs of ``--pair``/``--group`` (counterfactual
  consistency).

``--pair``/``--group`` name the weakness: they are p of the second-order attacks (mining and
evaluation: a natural neighbour whose prediction flips under the swap), the consistency pairs, and
the pairs of B_{p,k} before and after.

Held out, honestly: harden trains and attacks only the training split (examples whose text also
occurs in the evaluation data are dropped from it), then audits the original and the hardened model
on the *same* evaluation examples (:mod:`textaudit.harden.before_after`). Everything goes into one
folder: ``settings.json``, the mined weaknesses (``found*.jsonl``), the hardened model (``model/``,
what ``--model`` takes), the before/after results files and ``harden.json`` (what ``audit report``
renders). A rerun with the same settings resumes: finished files are reused, training continues from
its last epoch.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

import textaudit.notices as notices
from textaudit.attacks.estimate import measure_pace, work_per_word
from textaudit.attacks.naturalness import naturalness_on
from textaudit.attacks.patch import PatchWords
from textaudit.attacks.registry import check_options, method_spec
from textaudit.data import check_labels, dataset_id, load_dataset
from textaudit.device import keep_threads, pick_device
from textaudit.errors import TextAuditError, first_line
from textaudit.fairness.bias import MIN_SOURCES, few_sources
from textaudit.fairness.groups import group_pairs
from textaudit.fairness.pairs import measurable_sources
from textaudit.files import atomic_path, loads_json, lock_or_fail
from textaudit.findings import attack_files, read_findings, replay
from textaudit.formats.harden import SUMMARY  # the summary audit report and results.load read
from textaudit.formats.jsonl import read_header, read_jsonl, write_results
from textaudit.harden.before_after import accuracy_before_after, attack_before_after, bias_before_after, certificate_before_after
from textaudit.harden.losses import LabelTarget, consistency_objective
from textaudit.harden.model import check_trainable, load_trainable
from textaudit.harden.weaknesses import consistency_pairs, found_examples, mine
from textaudit.lexicons import counterfitted_neighbors, parse_pair
from textaudit.models import load_classifier
from textaudit.models.batched import ALL_LABELS, check_label_threshold, label_view
from textaudit.models.zoo.names import ZOO_MODELS, check_zoo_label
from textaudit.models.zoo.train import DEFAULTS, TrainConfig, fit
from textaudit.neighborhoods import NeighborhoodBuilder
from textaudit.neighborhoods.mlm import load_mlm
from textaudit.progress import duration
from textaudit.request import RANGES, Outcome, check_fields, option, range_words, shared, within, written
from textaudit.robustness.smoothing import SAFER, PerturbationSets, RanMASK
from textaudit.secrets import redact_obj
from textaudit.text import word_tokenize
from textaudit.train_state import state_digest

__all__ = ["HardenRequest", "harden", "METHODS", "CERTIFIED", "SUMMARY", "parse_eval_attacks", "threat_model"]

METHODS = ("augment", "adversarial", "consistency", "masked", "substitute")
#: the methods that train for a smoothing certificate, and the certificate (``audit certify --method``) each is for
CERTIFIED = {"masked": "ranmask", "substitute": "safer"}
#: the settings a rerun on the same --out must repeat
SETTINGS = "settings.json"
#: the mark of a harden folder's settings file (what makes the folder textaudit's: files.check_folder)
SETTINGS_FORMAT = "textaudit-harden-settings"
MODEL_DIR = "model"
#: the fewest words of a training example harden attacks or pairs
MIN_WORDS = 4


def parse_eval_attacks(spec: str | list[str] | tuple[str, ...]) -> list[tuple[str, int | None]]:
    """``so-enum:1,so-beam:6,genetic`` → ``[("so-enum", 1), ("so-beam", 6), ("genetic", None)]`` (a
    method without ``:k`` takes its default k); unknown methods and bad k are one-line errors."""
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if not items:
        raise TextAuditError("--eval-attack needs at least one method, e.g. so-enum:1")
    out = []
    for item in items:
        method, _, k = item.partition(":") if not item.startswith("textattack:") else (item, "", "")
        try:
            kk = int(k) if k else None
        except ValueError:
            raise TextAuditError(f"--eval-attack '{item}': k must be a whole number (method:k, e.g. so-enum:1)") from None
        spec_ = method_spec(method)
        if kk is not None and "k" not in spec_.options:
            raise TextAuditError(f"--eval-attack '{item}': {method} has no k; write it as '{method}'")
        check_options(method, {"k": kk} if kk is not None else {})
        if (method, kk) in out:
            raise TextAuditError(f"--eval-attack names {item} twice")
        out.append((method, kk))
    return out


@dataclass
class HardenRequest:
    """Every option of ``audit harden`` with its default, range and help (:mod:`textaudit.request`), stated once: the
    command line, a suite's ``[harden]`` section and a notebook build it, :meth:`check` raises every one-line error
    before anything loads, :meth:`record` is what the run keeps in ``settings.json`` (what a resume must repeat) and
    :meth:`run` mines, trains and audits before/after into ``out`` (:func:`harden`)."""

    model: str = shared("model", "cnn")
    method: str = option(..., help=(
        "augment (attack a training sample, add every x̃ and x̃ ⊕ p with the gold label, fine-tune), adversarial "
        "(the same, a fresh sample each round with the current model) or consistency (symmetric-KL loss between "
        "f(x̃) and f(x̃ ⊕ p); with --pair/--group: counterfactual consistency), masked (RanMASK's training: random "
        "masked copies, for audit certify --method ranmask) or substitute (SAFER's: random synonym substitutions, for "
        "--method safer)."), choices=METHODS)
    out: Path = option(..., scope="command", help=(
        "Results folder: mined weaknesses, the hardened model (out/model: give it to --model), before/after files, "
        "harden.json (audit report renders it). A rerun with the same settings resumes."))
    attack: str = option("so-beam", help="Attack that mines the training split (augment, adversarial).")
    k: int = option(3, low=1, help="k of the mining attack.")
    data: str = shared("data", "sst2")
    train_sample: int = option(500, low=1, high=10_000_000, help=(
        "Training examples attacked (split over the rounds of adversarial), or the sources of consistency pairs."))
    max_train: int | None = option(None, low=1, high=100_000_000, help="Fine-tune on the first N training examples.")
    epochs: int = option(2, low=1, high=1000, help="Fine-tuning epochs (augment, consistency).")
    rounds: int = option(2, low=1, high=100, help="Attack-and-train rounds of adversarial (one epoch each).")
    lr: float | None = option(None, low=0.0, help="Learning rate (default: the architecture's).")
    consistency_weight: float = option(1.0, low=0.0, help="λ of the consistency loss.")
    found_weight: int = option(1, low=1, high=1000, help=(
        "augment, adversarial: each found example is trained on this many times (found examples are few beside "
        "the training split)."))
    neighbors: int = option(4, low=0, high=1000, help="Neighbor_1 sentences per consistency source.")
    pairs_per_sentence: int = option(1, low=1, high=1000, help=(
        "consistency without --pair: the best-ranked patch pairs p of each source sentence (1: the one the "
        "second-order attacks choose)."))
    pair: str | None = option(None, help="Protected pair, e.g. he,she: consistency pairs and B before/after.")
    group: str | None = option(None, help="A protected group's pairs (gender, nationality, …).")
    eval_data: str = option("sst2:dev", help="Held-out examples of the before/after audit.")
    eval_limit: int | None = option(200, low=1, high=10_000_000, help="Use the first N held-out examples.")
    eval_attack: str = option("so-enum:1", help=(
        "Attacks of the before/after audit, method[:k] comma-separated (e.g. so-enum:1,so-beam:6,genetic); the "
        "first is the headline."))
    max_queries: int | None = option(None, low=1, help="Query budget per attacked example.")
    mlm: str | None = shared("mlm")
    lora: bool = option(False, help="hf: models: train LoRA adapters (peft), merged into the saved model.")
    from_findings: list[str] | None = option(None, flags=("--from",), help=(
        "augment, adversarial: train on the successes of these attack results files (or compare / harden folders), "
        "mined by any run, instead of mining the first round; repeat for several. Findings holding a held-out "
        "sentence are left out."))
    copies: int = option(4, low=1, high=1000, help="masked, substitute: random copies of each training example trained on.")
    mask_rate: float = option(0.9, **RANGES["mask_rate"], help="masked: ρ, the share of the words masked in each copy (RanMASK's 0.9).")
    mask_token: str = option("[MASK]", help="masked: what a masked word becomes (BERT-like: [MASK]; RoBERTa: <mask>).")
    hops: int = option(2, low=1, high=2, help="substitute: the synonym sets reach 1 or 2 hops of neighbours (SAFER's).")
    cert_samples: int = option(1000, low=1, high=10_000_000, help=(
        "masked, substitute: the before/after certificate's estimation sample n."))
    cert_selection: int = option(100, low=1, high=10_000_000, help=(
        "masked, substitute: the before/after certificate's selection sample n0."))
    cert_neighbors: int = option(1, low=0, high=6, help=(
        "masked, substitute: the certificate's second-order view — natural neighbours up to this many words away "
        "certified too, synonym patches tried on those that are not (0: off)."))
    in_flight: int | None = shared("in_flight")
    seed: int = shared("seed", 0)
    target_label: str | None = shared("target_label")
    label_threshold: float = shared("label_threshold", 0.5)
    naturalness: str = shared("naturalness", "on", choices=("on", "off"))

    #: B_(p,k)'s k of the before/after bias audit
    bias_k: ClassVar[int] = 1

    @property
    def pairs(self) -> list[list[str]] | None:
        """``--pair`` as the protected pairs (``[[w1, w2]]``; None: a group's, or none)."""
        return [list(parse_pair(self.pair))] if self.pair else None

    @property
    def label(self) -> str | None:
        """The multi-label model's label hardened (``--label``; None: a single-label model)."""
        return self.target_label

    @property
    def eval_attacks(self) -> list[list]:
        """``--eval-attack`` as ``[[method, k], …]`` (k None: the method's default)."""
        return [[m, kk] for m, kk in parse_eval_attacks(self.eval_attack)]

    @property
    def natural(self) -> bool:
        """The second-order attacks' naturalness constraint is on (mining and the before/after audit)."""
        return naturalness_on(self.naturalness)

    def record(self) -> dict[str, Any]:
        """What the run keeps in ``settings.json`` and the summary's header: every setting the results depend on
        (not where they go, ``out``, nor how fast, ``in_flight``), as older runs' folders hold them."""
        return {"model": self.model, "method": self.method, "attack": self.attack, "k": self.k, "data": self.data,
                "train_sample": self.train_sample, "max_train": self.max_train, "epochs": self.epochs,
                "rounds": self.rounds, "lr": self.lr, "consistency_weight": self.consistency_weight,
                "found_weight": self.found_weight, "neighbors": self.neighbors,
                "pairs_per_sentence": self.pairs_per_sentence, "pairs": self.pairs, "group": self.group,
                "bias_k": self.bias_k, "eval_data": self.eval_data, "eval_limit": self.eval_limit,
                "eval_attacks": self.eval_attacks, "max_queries": self.max_queries, "mlm": self.mlm,
                "lora": self.lora, "seed": self.seed, "label": self.label, "label_threshold": self.label_threshold,
                "naturalness": self.natural,
                "from_findings": [str(p) for p in self.from_findings] if self.from_findings else None,
                "copies": self.copies, "mask_rate": self.mask_rate, "mask_token": self.mask_token, "hops": self.hops,
                "cert_samples": self.cert_samples, "cert_selection": self.cert_selection,
                "cert_neighbors": self.cert_neighbors}

    def check(self) -> "HardenRequest":
        """Every one-line error before anything loads (each field's range and choices, whoever built the request,
        then what the fields say together); returns the request."""
        check_fields(self)
        check_trainable(self.model)
        self._check_label()
        spec = method_spec(self.attack)
        check_options(self.attack, {"k": self.k if "k" in spec.options else None, "max_queries": self.max_queries})
        parse_eval_attacks(self.eval_attack)  # a bad --eval-attack: its one line
        if self.pair and self.group:
            raise TextAuditError("give --pair or --group, not both")
        if not within("mask_rate", self.mask_rate):
            raise TextAuditError(f"--mask-rate must be {range_words('mask_rate')} (got {self.mask_rate}); RanMASK's "
                                 "paper uses 0.9")
        if not str(self.mask_token).strip():
            raise TextAuditError("--mask-token must not be empty (BERT-like tokenizers: [MASK]; RoBERTa: <mask>)")
        if self.from_findings:
            if self.method not in ("augment", "adversarial"):
                raise TextAuditError(f"--from gives found examples to train on: it applies to --method augment or "
                                     f"adversarial, not {self.method} (which trains on neighbour pairs)")

            if not read_findings([str(p) for p in self.from_findings], bias=False):
                raise TextAuditError(f"--from {' '.join(map(str, self.from_findings))}: no success to train on")
        if not (isinstance(self.consistency_weight, (int, float)) and 0 <= self.consistency_weight <= 1e4):
            raise TextAuditError(f"--consistency-weight (λ) must be a number from 0 to 10,000 (got {self.consistency_weight}); "
                                 "λ weighs the consistency loss against cross-entropy: 1 to 100 are usual")
        if self.lr is not None and not (isinstance(self.lr, (int, float)) and 0 < self.lr <= 1):
            raise TextAuditError(f"--lr must be a learning rate above 0 and at most 1 (got {self.lr})")
        if self.lora and not self.model.strip().startswith("hf:") and not Path(self.model).expanduser().joinpath(
                "config.json").is_file():
            raise TextAuditError("--lora fine-tunes adapters of hf: models; a zoo model is small enough to train whole")
        train_id, eval_id = dataset_id(self.data, "train"), dataset_id(self.eval_data, "dev")
        a, b = Path(self.data).expanduser(), Path(self.eval_data).expanduser()
        same = a.resolve() == b.resolve() if a.is_file() and b.is_file() else train_id == eval_id  # two files: by path
        if same:
            raise TextAuditError(f"--eval-data {self.eval_data} is the training split harden attacks and trains on; "
                                 "evaluate on held-out examples (e.g. sst2:dev)")
        if eval_id.split(":")[-1] == "train" and train_id.split(":")[0] == eval_id.split(":")[0]:
            raise TextAuditError(f"--eval-data {self.eval_data} is training data; evaluate on held-out examples")

        return self

    def _check_label(self) -> None:
        """``--label``: one label of a multi-label hf: model (a zoo model is single-label), one at a time."""
        if self.label is None:
            return
        if self.label == ALL_LABELS:
            raise TextAuditError("audit harden trains one label at a time: give --label NAME (--label all is for the "
                                 "audits: attack, bias, certify, compare)")
        check_zoo_label(self.model, self.label)
        check_label_threshold(self.label_threshold)

    def run(self, *, checked: "HardenRequest | None" = None, progress: bool = True, device: str | None = None) -> Outcome:
        """Harden (or resume) into ``out``; the outcome's summary is the before/after (``out/harden.json``), its file
        the folder (the hardened model, the mined weaknesses, the before/after results)."""
        summary = harden(checked or self, self.out, progress=progress, in_flight=self.in_flight, device=device)
        return Outcome(summary, [], written(self.out))


def threat_model(s: HardenRequest) -> dict[str, Any] | None:
    """What a ``masked`` or ``substitute`` hardening trained for: the certificate's method and parameters, recorded
    with the hardened model (``audit certify`` reads them: :func:`textaudit.formats.harden.hardened_threat`)."""
    method = CERTIFIED.get(s.method)
    if method == "ranmask":
        return {"method": method, "mask_rate": s.mask_rate, "mask_token": s.mask_token}
    if method == "safer":
        return {"method": method, "hops": s.hops}
    return None


def smoothing_sampler(s: HardenRequest):
    """The certificate's own sampler for ``s``'s threat model (its ``draws``), seeded by ``s.seed``."""
    if s.method == "masked":
        return RanMASK(None, PerturbationSets({}), rate=s.mask_rate, mask_token=s.mask_token, seed=s.seed)
    return SAFER(None, PerturbationSets(counterfitted_neighbors(), hops=s.hops), seed=s.seed)


def _say(msg: str, progress: bool) -> None:
    if progress:
        notices.say(msg)


def _check_out(out: Path, settings: HardenRequest) -> None:
    if out.exists() and not out.is_dir():
        raise TextAuditError(f"--out {out} is a file; give a directory for the harden results")
    prev = out / SETTINGS  # the folder's mark: a non-empty folder without it is not a harden run (refused below)
    if prev.is_file():
        try:
            old = loads_json(prev.read_text())
        except (OSError, ValueError):
            old = None
        if not isinstance(old, dict):  # unreadable, or JSON that is not a table of settings ([], null, 3)
            raise TextAuditError(f"{prev} is damaged (not a table of harden settings); delete {out} or choose "
                                 "another --out")
        old.pop("format", None)  # the file's mark (SETTINGS_FORMAT), no setting
        new = json.loads(json.dumps(settings.record()))
        # a setting added since that run had its default then: the folder still resumes
        defaults = json.loads(json.dumps(HardenRequest(model=settings.model, method=settings.method, out=settings.out).record()))
        old = {**{k: v for k, v in defaults.items() if k not in old}, **old}
        differ = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        if differ:
            shown = "; ".join(f"{k}: {old.get(k)!r} → {new.get(k)!r}" for k in differ[:3])
            raise TextAuditError(f"{out} holds a harden run with other settings ({shown}); rerun with its settings to "
                                 "resume, or choose another --out")
    elif out.is_dir() and any(out.iterdir()):
        raise TextAuditError(f"--out {out} is a non-empty folder that is not a harden run; choose another --out")


def _norm(text: str) -> str:
    """A text as the models read it: lower-cased word tokens, clitics and punctuation split, so a
    detokenised copy ("manner." for "manner .", "don't" for "do n't") is the same text."""
    return " ".join(word_tokenize(str(text)))


def not_held_out(train_texts, held_texts) -> list[int]:
    """The indices of the training texts that are not one of the held-out texts as the models read them
    (:func:`_norm`: case, white space, detokenised punctuation and clitics aside)."""
    held = {_norm(t) for t in held_texts}
    return [i for i, t in enumerate(train_texts) if _norm(t) not in held]


def harden(settings: HardenRequest, out: str | Path, *, progress: bool = True, in_flight: int | None = None,
           device: str | None = None) -> dict:
    """Run (or resume) ``settings`` into folder ``out`` and return the summary written to
    ``out/harden.json``: ``before``/``after`` (clean accuracy and the first evaluation attack's
    success rate, each with its 95% interval), ``mcnemar_p`` (that attack, paired), ``accuracy``,
    ``attacks`` and ``bias`` (every before/after), ``cost`` and ``model`` (the hardened model's path).
    The folder is locked while it runs: a second harden on it is one line naming ``--out``."""
    settings.check()
    out = Path(out)
    _check_out(out, settings)
    with lock_or_fail(out, f"--out {out} is being written by another audit harden; wait for it to finish or choose "
                           "another --out"):
        return _harden(settings, out, progress=progress, in_flight=in_flight, device=device)


@dataclass
class HeldOut:
    """The held-out split (phase 1): the training examples harden attacks and trains on — none of them an
    evaluation sentence as the models read it — the evaluation examples, and the order training examples are
    drawn in (a permutation by the seed, of those of at least :data:`MIN_WORDS` words)."""

    train_id: str
    eval_id: str
    texts: list[str]
    labels: list[int]
    ids: list[str]
    order: list[int]
    held: Any  # the evaluation dataset
    overlap: int  # training examples left out: their text is an evaluation sentence


def held_out_split(s: HardenRequest, progress: bool) -> HeldOut:
    """Phase 1: load both datasets and leave every evaluation sentence out of training."""
    train_id, eval_id = dataset_id(s.data, "train"), dataset_id(s.eval_data, "dev")
    # a multi-label model's label: the data's column of the label's name is its gold (0/1)
    train = load_dataset(s.data, default_split="train", label_column=s.label)
    held = load_dataset(s.eval_data, default_split="dev", limit=s.eval_limit, label_column=s.label)
    keep = not_held_out(train["text"], held["text"])
    overlap = len(train) - len(keep)
    if s.max_train is not None:
        keep = keep[:s.max_train]
    texts = [train["text"][i] for i in keep]
    if overlap:
        _say(f"notice: {overlap} training examples also occur in {eval_id}; left out of training", progress)
    # the examples attacked (or the sources of consistency pairs) are drawn from the training examples of
    # at least MIN_WORDS words: a one- or two-word phrase has no natural neighbourhood worth hardening
    rng = np.random.default_rng(s.seed)
    order = [i for i in rng.permutation(len(texts)) if len(texts[i].split()) >= MIN_WORDS]
    if not order:  # the rows are there, but all too short: not "an empty dataset"
        raise TextAuditError(f"--data {s.data}: none of its {len(texts)} training examples has {MIN_WORDS} words or "
                             "more, and harden attacks (or pairs) only those; give longer training sentences")
    return HeldOut(train_id, eval_id, texts, [int(train["label"][i]) for i in keep], [train["id"][i] for i in keep],
                   order, held, overlap)


@dataclass
class Trained:
    """What phase 2 leaves: the hardened model's record (``info``), its ``cost``, the mined files and records."""

    info: dict
    cost: dict[str, float]
    found_files: list[str]
    mined: list[dict]


@dataclass
class _Hardening:
    """One harden run's state across its phases (:func:`harden`)."""

    s: HardenRequest
    out: Path
    split: HeldOut
    original: Any  # the trainable model (textaudit.harden.model)
    before: Any  # its classifier
    mlm: Any
    pairs: list[tuple[str, str]] | None
    blacklists: dict | None
    progress: bool
    in_flight: int | None
    device: str | None

    @property
    def name(self) -> str:
        return str(self.s.model)

    @property
    def model_dir(self) -> Path:
        return self.out / MODEL_DIR

    def view(self, classifier):
        """What the audits see of a classifier: with ``--label``, that label's decision (:func:`label_view`)."""
        return label_view(classifier, self.s.label, self.s.label_threshold) if self.s.label is not None else classifier

    def label_target(self) -> LabelTarget | None:
        """``--label``: the label trained on and the original module whose probabilities keep the other labels."""
        if self.s.label is None:
            return None
        return LabelTarget(list(self.original.labels).index(self.s.label), self.original.module)

    @property
    def trained(self) -> bool:
        return (self.model_dir / "textaudit-harden.json").is_file() or _hardened_checkpoint(self.model_dir)

    def train(self) -> Trained:
        """Phase 2: mine and fine-tune (augment, adversarial) or build pairs and fine-tune (consistency), save the
        hardened model; a finished one is read back instead."""
        if self.trained:
            _say(f"harden: {self.model_dir} is already trained; evaluating", self.progress)
            info = _read_info(self.model_dir)
            found_files = sorted(p.name for p in self.out.glob("found*.jsonl"))
            return Trained(info, dict(info.get("cost", {})), found_files,
                           [r for f in found_files for r in read_jsonl(self.out / f)])
        s, split = self.s, self.split
        hardened = self.original.copy()
        t0 = time.perf_counter()
        if s.method in ("augment", "adversarial"):
            done = self._mine_and_fine_tune(hardened)
        elif s.method in CERTIFIED:
            done = self._smoothing_copies(hardened)
        else:
            done = self._consistency(hardened)
        done.cost["harden_seconds"] = time.perf_counter() - t0
        threat = threat_model(s)
        done.info = {"name": f"{self.name}+harden-{s.method}", "from": self.name, "method": s.method,
                     "settings": s.record(), "n_train": len(split.texts), "found": len(found_examples(done.mined)),
                     "cost": _round(done.cost), **({"threat": threat} if threat else {})}
        hardened.save(self.model_dir, done.info)
        for p in [*self.out.glob(".round*.pt"), *self.out.glob(".train-state*.pt")]:
            p.unlink()
        return done

    def _mine_and_fine_tune(self, hardened) -> Trained:
        """augment (one round) or adversarial (``rounds``): attack a fresh share of the training sample with the
        current model, fine-tune on train + every found example so far; each round's weights are kept, so a
        rerun goes on from the last finished round."""
        s, split, out = self.s, self.split, self.out
        rounds = 1 if s.method == "augment" else s.rounds
        per = max(1, s.train_sample // rounds)
        cost: dict[str, float] = {}
        found: list[tuple[str, int]] = []
        files: list[str] = []
        mined: list[dict] = []
        for r in range(rounds):
            tag = "" if s.method == "augment" else f".round{r + 1}"
            idx = split.order[r * per:(r + 1) * per]
            f = out / f"found{tag}.jsonl"
            round_state = out / f".round{r + 1}.pt"
            clf = self.before if r == 0 else self.view(
                hardened.classifier(f"{self.name}+{s.method}@round{r}", device=self.device))
            tm = time.perf_counter()
            if r == 0 and s.from_findings:
                recs = _given_findings([str(p) for p in s.from_findings], f, split.held["text"], self.progress)
            else:
                _say(f"harden: attacking {len(idx)} training examples with {s.attack} (round {r + 1}/{rounds}) → {f}",
                     self.progress)
                recs = mine(clf, [split.texts[i] for i in idx], [split.labels[i] for i in idx],
                            [split.ids[i] for i in idx], method=s.attack, k=s.k, mlm=self.mlm, output=f, seed=s.seed,
                            max_queries=s.max_queries, data=split.train_id, in_flight=self.in_flight,
                            progress=self.progress, pairs=self.pairs, naturalness=s.natural)
            cost["attack_train_seconds"] = cost.get("attack_train_seconds", 0.0) + time.perf_counter() - tm
            mined += recs
            found += found_examples(recs)
            files.append(f.name)
            tt = time.perf_counter()
            if round_state.is_file():
                _load_weights(hardened, round_state)
            else:
                _say(f"harden: fine-tuning on {len(split.texts)} training examples + {len(found)} found", self.progress)
                w = s.found_weight  # each found example counts w times (TextAttack's share of adversarial examples)
                _fine_tune(hardened, split.texts + [t for t, _ in found] * w, split.labels + [y for _, y in found] * w,
                           s, epochs=s.epochs if s.method == "augment" else 1, seed=s.seed + r,
                           state=out / f".train-state{tag}.pt", device=self.device, progress=self.progress,
                           label=self.label_target())
                _save_weights(hardened, round_state)
            cost["train_seconds"] = cost.get("train_seconds", 0.0) + time.perf_counter() - tt
        return Trained({}, cost, files, mined)

    def _smoothing_copies(self, hardened) -> Trained:
        """masked, substitute: fine-tune on the training split plus ``copies`` random copies of each example, drawn
        by the certificate's own sampler (its stream 2: the certificate's selection and estimation samples are
        streams 0 and 1), so the base classifier learns the inputs the smoothed classifier votes over."""
        s, split = self.s, self.split
        sampler = smoothing_sampler(s)
        what = f"masked at ρ = {s.mask_rate}" if s.method == "masked" else f"synonym substitutions ({s.hops} hops)"
        _say(f"harden: fine-tuning on {len(split.texts)} training examples + {s.copies} copies of each, {what}",
             self.progress)
        tm = time.perf_counter()
        copies = [c for t, i in zip(split.texts, split.ids) for c in sampler.draws(t, f"harden|{i}", s.copies, 2)]
        cost: dict[str, float] = {"copies_seconds": time.perf_counter() - tm, "copies": len(copies)}
        tt = time.perf_counter()
        _fine_tune(hardened, split.texts + copies, split.labels + [y for y in split.labels for _ in range(s.copies)], s,
                   epochs=s.epochs, seed=s.seed, state=self.out / ".train-state.pt", device=self.device,
                   progress=self.progress, label=self.label_target())
        cost["train_seconds"] = time.perf_counter() - tt
        return Trained({}, cost, [], [])

    def _consistency(self, hardened) -> Trained:
        """consistency: pairs (x̃, x̃ ⊕ p) from training sentences and their Neighbor_1, then fine-tuning with
        cross-entropy + λ × the symmetric KL between f(x̃) and f(x̃ ⊕ p)."""
        s, split = self.s, self.split
        src = [split.texts[i] for i in split.order[:s.train_sample]]
        _say(f"harden: building consistency pairs from {len(src)} training sentences and their Neighbor_1 "
             f"(up to {s.neighbors} each) …", self.progress)
        # a protected group's neighbourhoods never add one of its words (as audit bias builds them)
        builder = NeighborhoodBuilder(self.mlm, blacklist=set().union(*self.blacklists.values()) if self.blacklists
                                      else ())
        tm = time.perf_counter()
        cpairs = consistency_pairs(src, builder=builder, pairs=self.pairs,
                                   patch_words=None if self.pairs else PatchWords(self.before), neighbors=s.neighbors,
                                   seed=s.seed, per_sentence=s.pairs_per_sentence)
        if self.pairs:  # every training sentence with a protected word is a pair too (no neighbours: cheap)
            rest = [split.texts[i] for i in split.order[s.train_sample:]]
            cpairs += consistency_pairs(rest, builder=builder, pairs=self.pairs, neighbors=0, seed=s.seed)
        cost: dict[str, float] = {"pairs_seconds": time.perf_counter() - tm}
        if not cpairs:
            raise TextAuditError("no consistency pairs: no training sentence holds a word of the pairs; give "
                                 "more --train-sample or other pairs")
        _say(f"harden: fine-tuning with the consistency loss on {len(cpairs)} pairs (λ = {s.consistency_weight})",
             self.progress)
        tt = time.perf_counter()
        _fine_tune(hardened, split.texts, split.labels, s, epochs=s.epochs, seed=s.seed,
                   state=self.out / ".train-state.pt", device=self.device, progress=self.progress, pairs=cpairs,
                   label=self.label_target())
        cost["train_seconds"] = time.perf_counter() - tt
        cost["consistency_pairs"] = len(cpairs)
        return Trained({}, cost, [], [])

    def hardened_classifier(self, info: dict):
        try:
            after = load_classifier(str(self.model_dir), device=self.device)
        except TextAuditError as e:  # harden wrote it: rerunning harden rebuilds it (audit train would not)
            why = str(e).split(";")[0]
            raise TextAuditError(f"the hardened model in {self.model_dir} cannot be loaded ({why}); delete "
                                 f"{self.model_dir} and rerun the same audit harden to train it again") from None
        after.name = info["name"]
        return self.view(after)

    def before_after(self, trained: Trained, evals: list[tuple[str, int | None]]) -> dict:
        """Phase 3: the original and the hardened model audited on the same held-out examples — clean accuracy,
        every evaluation attack, B_{p,k} of the protected pairs, the mined findings replayed — as the summary."""
        s, split, out, progress = self.s, self.split, self.out, self.progress
        after, before, cost = self.hardened_classifier(trained.info), self.before, trained.cost
        te = time.perf_counter()
        held = split.held
        texts, labels, ids = list(held["text"]), [int(y) for y in held["label"]], list(held["id"])
        acc = accuracy_before_after(before, after, texts, labels)
        attacks = []
        for method, k in evals:
            _say(f"harden: {method}{'' if k is None else f' k={k}'} on {len(texts)} held-out examples, before and "
                 "after", progress)
            attacks.append(attack_before_after(before, after, method, k, texts, labels, ids, mlm=self.mlm, out=out,
                                               seed=s.seed, data=split.eval_id, max_queries=s.max_queries,
                                               in_flight=self.in_flight, progress=progress, pairs=self.pairs,
                                               naturalness=s.natural))
        bias = []
        if self.pairs:
            _say(f"harden: B_(p,{s.bias_k}) of {len(self.pairs)} pairs on {split.eval_id}, before and after", progress)
            bias = bias_before_after(before, after, self.pairs, texts, ids, mlm=self.mlm, k=s.bias_k,
                                     out=out / "bias.jsonl", seed=s.seed, data=split.eval_id,
                                     blacklists=self.blacklists, in_flight=self.in_flight, progress=progress)
        certificate = None
        threat = threat_model(s)
        if threat is not None:
            _say(f"harden: certifying both models by {threat['method']} on {len(texts)} held-out examples", progress)
            builder = NeighborhoodBuilder(self.mlm, seed=s.seed) if s.cert_neighbors and self.mlm is not None else None
            certificate = certificate_before_after(before, after, threat, texts, labels, ids, out=out, seed=s.seed,
                                                   samples=s.cert_samples, selection=s.cert_selection,
                                                   in_flight=self.in_flight, progress=progress, builder=builder,
                                                   neighbors_k=s.cert_neighbors)
        mined, found_files = trained.mined, trained.found_files
        replayed = None
        if found_files and any(r.get("status") == "success" for r in mined):
            # the mining findings on the hardened model, paired with the original: what training fixed (and broke)
            replayed = replay([out / f for f in found_files], after, baseline=before).summary()
        cost["evaluate_seconds"] = time.perf_counter() - te
        warnings = _warnings(s, mined, bias)
        for w in warnings:
            _say(w, progress)
        head = attacks[0]
        side = lambda role: {"accuracy": acc[role]["rate"], "accuracy_ci95": acc[role]["ci95"],  # noqa: E731
                             "attack": head["method"], "success_rate": head[role]["success_rate"],
                             "success_rate_ci95": head[role]["ci95"]}
        return {
            "model": str(self.model_dir), "from": self.name, "method": s.method, "data": split.train_id,
            "eval_data": split.eval_id,
            "mlm": getattr(self.mlm, "name", None),  # the masked LM in use (the settings say None for the default)
            "before": side("before"), "after": side("after"),
            "mcnemar_p": head["mcnemar"]["p"], "accuracy": acc, "attacks": attacks, "bias": bias,
            "held_out": {"eval_examples": len(texts), "train_examples": len(split.texts),
                         "train_overlap_removed": split.overlap,
                         "attacked_for_training": len({r.get("id") for r in mined})},
            "found_files": found_files, "cost": _round(cost), **({"replay_found": replayed} if replayed else {}),
            **({"threat": threat, "certificate": certificate} if certificate is not None else {}),
            **({"warnings": warnings} if warnings else {})}


def _harden(settings: HardenRequest, out: Path, *, progress: bool, in_flight: int | None, device: str | None) -> dict:
    """The three phases: the held-out split, mining and training, the before/after audit."""
    keep_threads()  # it trains after its attacks: a busy machine must not change the threads training runs on
    s = settings
    evals = parse_eval_attacks([f"{m}:{k}" if k is not None else m for m, k in s.eval_attacks])
    pairs, blacklists = _protected_pairs(s)
    # a model that needs no training loads first: whether it is multi-label decides which column is the gold
    original = None if s.model.strip() in ZOO_MODELS else load_trainable(s.model)
    if original is not None and original.multilabel and s.label is None:
        raise TextAuditError(f"model {s.model} is multi-label ({', '.join(original.labels or [])}): give --label NAME, "
                             "the label to harden (audit harden trains one label at a time)")
    split = held_out_split(s, progress)
    _say(f"harden: {s.method} of {s.model}: loading the model and the data …", progress)
    original = original or load_trainable(s.model)
    before = label_view(original.classifier(str(s.model), device=device), s.label, s.label_threshold)
    _check_before(s, split, before, pairs)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / SETTINGS) as tmp:
        tmp.write_text(json.dumps(redact_obj({"format": SETTINGS_FORMAT, **s.record()}), indent=1))
    needs_mlm = s.method == "consistency" or any(_needs_mlm(m) for m, _ in evals) or _needs_mlm(s.attack) or \
        (s.method in CERTIFIED and s.cert_neighbors > 0)
    run = _Hardening(s, out, split, original, before, load_mlm(s.mlm) if needs_mlm else None, pairs, blacklists,
                     progress, in_flight, device)
    if not run.trained:
        _say_time(s, original, before, run.mlm, [split.texts[i] for i in split.order], len(split.texts),
                  list(split.held["text"]), evals, progress)
    summary = run.before_after(run.train(), evals)
    with atomic_path(out / SUMMARY) as tmp:
        tmp.write_text(json.dumps(redact_obj({"header": {"command": "harden", "config": s.record()}, **summary}), indent=1))
    return summary


def _check_before(s: HardenRequest, split: HeldOut, before, pairs) -> None:
    """Refuse, before anything is mined or trained, a label the model has no class for and protected pairs no
    held-out sentence can measure."""
    for flag, spec, labels in (("--data", s.data, split.labels), ("--eval-data", s.eval_data, split.held["label"])):
        try:
            check_labels(labels, before.num_classes, str(s.model))
        except TextAuditError as e:
            raise TextAuditError(f"{flag} {spec}: {e}") from None
    held = split.held
    if pairs and not any(measurable_sources(list(held["text"]), tuple(p)) for p in pairs):  # B before/after: nothing
        shown = ", ".join("/".join(p) for p in pairs[:4]) + (" …" if len(pairs) > 4 else "")
        raise TextAuditError(f"no held-out sentence ({split.eval_id}, {len(held)} examples) holds exactly one word of a "
                             f"pair ({shown}), so B before and after cannot be measured; give --eval-data with such "
                             "sentences or a larger --eval-limit")


def _given_findings(paths: list[str], found: Path, held_texts, progress: bool) -> list[dict]:
    """``--from``: the successes of results files mined by any run, as round 1's found examples, copied into
    ``found`` (so a resume and the report read them as mined here); those whose texts occur in the held-out
    data are left out (training on them would leak into the before/after audit)."""
    if found.is_file() and (read_header(found) or {}).get("command") == "attack":
        return read_jsonl(found)
    held = {_norm(t) for t in held_texts}
    recs, left_out = [], 0
    for given in paths:
        for path in attack_files(Path(given).expanduser()):
            for r in read_jsonl(path):
                if r.get("status") != "success" or r.get("label") is None:
                    continue
                if {_norm(str(t)) for t in (r.get("text"), r.get("vulnerable"), r.get("vulnerable_patched")) if t} & held:
                    left_out += 1
                    continue
                recs.append({**r, "id": f"{path.name}:{r.get('id')}"})
    if left_out:
        _say(f"notice: {left_out} findings of --from hold a held-out sentence; left out of training", progress)
    _say(f"harden: training on {len(recs)} findings of --from (no mining in round 1) → {found}", progress)
    write_results(found, recs, command="attack", config={"from": [str(p) for p in paths]})
    return recs


def _say_time(s: HardenRequest, original, before, mlm, sources: list[str], n_train: int, held: list[str],
              evals: list[tuple[str, int | None]], progress: bool) -> None:
    """Before anything is spent: what harden will take here — mining (or building pairs), fine-tuning, and
    the before/after audit — from this machine's pace (:func:`~textaudit.attacks.estimate.measure_pace`), what
    an SST-2 search asks per word at its k (:func:`~textaudit.attacks.estimate.work_per_word`) and, for a zoo model,
    its own training time per example and epoch (its checkpoint records it)."""
    if not progress:
        return
    pace = measure_pace(before, mlm, sources)
    if pace is None:
        return
    s_q, s_m = pace.text_seconds, pace.context_seconds or 0.0

    def attack_seconds(method: str, texts: list[str], k: int | None) -> float | None:
        work = work_per_word(method, k)
        return None if work is None else sum(len(t.split()) for t in texts) * (work[0] * s_q + work[1] * s_m)

    mined = sources[:s.train_sample]
    parts, total = [], 0.0
    if s.method in ("augment", "adversarial"):
        t = attack_seconds(s.attack, mined, s.k)
        parts.append(f"mining {len(mined)} training examples with {s.attack} {duration(t)}" if t is not None else
                     f"mining {len(mined)} training examples with {s.attack} (not estimated)")
        total += t or 0.0
        found = int(0.9 * len(mined)) * s.found_weight  # an SST-2 model: about nine in ten are found
        example_epochs = (s.epochs if s.method == "augment" else s.rounds) * (n_train + found)
    elif s.method in CERTIFIED:
        parts.append(f"{s.copies} random copies of each of the {n_train} training examples (no mining)")
        example_epochs = s.epochs * n_train * (1 + s.copies)
    else:
        t = sum(len(x.split()) for x in mined) * s_m
        parts.append(f"the natural neighbours of {len(mined)} training sentences {duration(t)}")
        total += t
        example_epochs = s.epochs * (n_train + len(mined) * s.neighbors)
    cfg = getattr(original, "config", None) or {}
    history = cfg.get("history") or []
    seconds, trained = cfg.get("train_seconds"), cfg.get("n_train")
    if seconds and trained and history:
        t = float(seconds) / (float(trained) * float(history[-1].get("epoch") or 1)) * example_epochs
        parts.append(f"fine-tuning {duration(t)} (at its own training pace)")
        total += t
    else:
        parts.append("fine-tuning (not estimated: the model's training time is not recorded)")
    if s.method in CERTIFIED:  # the before/after certificate: selection + estimation draws of each held-out example
        draws = 2 * len(held) * (s.cert_samples + s.cert_selection)
        t = draws * s_q
        parts.append(f"the before/after certificate, up to {draws:,} texts {duration(t)}")
        total += t
    audit = [attack_seconds(m, held, k if k is not None else (2 if m == "so-enum" else 6)) for m, k in evals]
    if all(a is not None for a in audit):
        t = 2 * sum(audit)  # type: ignore[arg-type]
        parts.append(f"the before/after audit of {len(held)} held-out examples {duration(t)}")
        total += t
    _say(f"time: about {duration(total)} here — {'; '.join(parts)} (at {1 / s_q:,.0f} texts/s and "
         f"{(1 / s_m) if s_m else 0:,.0f} masked-LM contexts/s measured; a search costed as an SST-2 one on the zoo's "
         "lstm asks: a more robust model takes longer). Each attack says its own time again when it starts", progress)


def _warnings(s: HardenRequest, mined: list[dict], bias: list[dict]) -> list[str]:
    """What the summary must say beside its numbers: nothing was found to harden (the "hardened" model is
    the original fine-tuned on its training data alone), or a before/after B rests on too few sources."""
    out = []
    if s.method in ("augment", "adversarial") and not found_examples(mined):
        out.append(f"warning: the mining attack found no weakness in the {len({r.get('id') for r in mined})} training "
                   "examples it attacked: there was nothing to harden, so 'after' is the model fine-tuned on its "
                   "training data alone (attack more examples: --train-sample, or another --attack)")
    for b in bias:
        n = min(int(b["before"].get("sources") or 0), int(b["after"].get("sources") or 0))
        if n < MIN_SOURCES:
            out.append(f"warning: B for {b['pair'][0]}→{b['pair'][1]} before and after {few_sources(n)}; give "
                       "more held-out data (--eval-data, --eval-limit)")
    return out


def _round(cost: dict) -> dict:
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in cost.items()}


def _needs_mlm(method: str) -> bool:
    return method_spec(method).needs_mlm


def _protected_pairs(s: HardenRequest):
    if s.group:
        return group_pairs(s.group)
    if s.pairs:
        return [tuple(p) for p in s.pairs], None
    return None, None


def _hardened_checkpoint(path: Path) -> bool:
    cfg = path / "textaudit.json"
    if not cfg.is_file():
        return False
    try:
        content = loads_json(cfg.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(content, dict) and "hardened" in content


def _read_info(path: Path) -> dict:
    """What the hardened model's folder says of its training (its name, the cost); damaged: one line that
    says to rerun harden (the model is harden's, not audit train's)."""
    f = path / "textaudit-harden.json"
    try:
        info = loads_json(f.read_text()) if f.is_file() else loads_json((path / "textaudit.json").read_text())["hardened"]
    except (OSError, ValueError, KeyError, TypeError):
        info = None
    if not isinstance(info, dict) or not isinstance(info.get("name"), str) or not isinstance(info.get("cost", {}), dict):
        raise TextAuditError(f"the hardened model in {path} is damaged (its record of the hardening is missing or "
                             f"not a table); delete {path} and rerun the same audit harden to train it again")
    return info


def _save_weights(t, path: Path) -> None:
    """Save a round's weights atomically (a kill or a full disk never leaves half a file); a write that
    fails is one line that says what is kept."""
    import torch

    weights = t.module.state_dict()
    try:
        with atomic_path(path, unmarked="a round's weights in the harden folder (_check_out took it)") as tmp:
            torch.save({"weights": weights, "checksum": state_digest(weights)}, tmp)
    except (OSError, RuntimeError) as e:  # torch's writer says a full disk as RuntimeError("... iostream error")
        why = getattr(e, "strerror", None) or first_line(e, 80)
        raise TextAuditError(f"cannot write {path} ({why}: is the disk full?); what was mined so far is kept in "
                             f"{path.parent}: free some space and rerun the same audit harden to continue") from None


def _load_weights(t, path: Path) -> None:
    """Load a round's saved weights: plain tensors only (``weights_only``: nothing in the file runs); a file
    holding anything else, or damaged, is one line."""
    import pickle

    import torch

    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(saved, dict) or set(saved) != {"weights", "checksum"}:
            raise ValueError("not a round's checkpoint")
        if saved["checksum"] != state_digest(saved["weights"]):  # torch's zip files carry no checksum it checks
            raise ValueError("its checksum disagrees with its weights: damaged")
        t.module.load_state_dict(saved["weights"])
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, TypeError, OSError) as e:
        first = first_line(e, 120)
        raise TextAuditError(f"{path} is not a round's plain weights ({first}); it was refused without running "
                             f"anything in it: delete it and rerun the same audit harden") from None


def _fine_tune(t, texts: list[str], labels: list[int], s: HardenRequest, *, epochs: int, seed: int, state: Path,
               device: str | None, progress: bool, pairs: list[tuple[str, str]] | None = None,
               label: LabelTarget | None = None) -> None:
    """Go on training ``t.module`` (in place) on ``texts`` for ``epochs`` epochs, and keep the last
    weights: no early stopping on held-out accuracy, which would pick the epoch that has learned the
    least of what hardening teaches (the held-out before/after judges the result). ``label``: a multi-label
    model's label, ``labels`` its 0/1 (:class:`~textaudit.harden.losses.LabelTarget`)."""
    base = dict(DEFAULTS.get(t.arch, DEFAULTS["minilm"]))
    base.pop("epochs", None)
    base.pop("tune_embeddings", None)
    cfg = TrainConfig(arch=t.arch, epochs=epochs, seed=seed, max_len=t.max_len, select_best=False,
                      **{k: v for k, v in base.items() if k != "max_len"})
    if s.lr is not None:
        cfg.lr = s.lr
    if s.lora:
        t.module = _with_lora(t.module)
    embed = getattr(t.module, "embed", None)
    if t.config.get("train", {}).get("tune_embeddings") and embed is not None:
        # a word model trained with tuned GloVe rows goes on tuning them (sparse updates): swapping w1 for w2
        # stops mattering most directly where their vectors move together
        embed.sparse = True
        embed.weight.requires_grad_(True)
    objective, select = None, None
    if label is not None:
        label.reference.to(pick_device(device)).eval()
        select = label.agreement(s.label_threshold)
    if pairs or label is not None:
        objective = consistency_objective(pairs or [], t.encoder(), weight=s.consistency_weight,
                                          batch_size=cfg.batch_size, seed=seed, device=pick_device(device), label=label)
    res = fit(t.arch, texts, labels, num_classes=t.num_classes, config=cfg, progress=progress, device=device,
              objective=objective, select=select, state_path=state, init=(t.module, t.tokenizer))
    t.module = res.module
    if s.lora:
        t.module = t.module.merge_and_unload()


def _with_lora(module):
    try:
        from peft import LoraConfig, TaskType, get_peft_model
    except ImportError:
        raise TextAuditError("--lora needs peft: pip install 'textaudit[lora]'") from None
    return get_peft_model(module, LoraConfig(task_type=TaskType.SEQ_CLS, r=8, lora_alpha=16, lora_dropout=0.0))
