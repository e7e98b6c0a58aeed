"""``audit harden`` stated once: :class:`HardenRequest` holds every option of a hardening run.

The command line, a suite's ``[harden]`` section and a notebook build the same request; :meth:`HardenRequest.check`
turns it into the :class:`~textaudit.harden.run.HardenSettings` a run records in ``settings.json`` (what a resume
must repeat) and raises every one-line error before anything loads; :meth:`HardenRequest.run` mines, trains and
audits before/after into ``out`` (:func:`textaudit.harden.run.harden`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textaudit.attacks.naturalness import naturalness_on
from textaudit.harden.run import METHODS, HardenSettings, harden, parse_eval_attacks
from textaudit.lexicons import parse_pair
from textaudit.request import RANGES, Outcome, option, shared, written

__all__ = ["HardenRequest"]


@dataclass
class HardenRequest:
    """Every option of ``audit harden`` with its default, range and help (:mod:`textaudit.request`)."""

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
    train_sample: int = option(500, low=1, help=(
        "Training examples attacked (split over the rounds of adversarial), or the sources of consistency pairs."))
    max_train: int | None = option(None, low=1, help="Fine-tune on the first N training examples.")
    epochs: int = option(2, low=1, help="Fine-tuning epochs (augment, consistency).")
    rounds: int = option(2, low=1, help="Attack-and-train rounds of adversarial (one epoch each).")
    lr: float | None = option(None, low=0.0, help="Learning rate (default: the architecture's).")
    consistency_weight: float = option(1.0, low=0.0, help="λ of the consistency loss.")
    found_weight: int = option(1, low=1, help=(
        "augment, adversarial: each found example is trained on this many times (found examples are few beside "
        "the training split)."))
    neighbors: int = option(4, low=0, help="Neighbor_1 sentences per consistency source.")
    pairs_per_sentence: int = option(1, low=1, help=(
        "consistency without --pair: the best-ranked patch pairs p of each source sentence (1: the one the "
        "second-order attacks choose)."))
    pair: str | None = option(None, help="Protected pair, e.g. he,she: consistency pairs and B before/after.")
    group: str | None = option(None, help="A protected group's pairs (gender, nationality, …).")
    eval_data: str = option("sst2:dev", help="Held-out examples of the before/after audit.")
    eval_limit: int | None = option(200, low=1, help="Use the first N held-out examples.")
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
    copies: int = option(4, low=1, help="masked, substitute: random copies of each training example trained on.")
    mask_rate: float = option(0.9, **RANGES["mask_rate"], help="masked: ρ, the share of the words masked in each copy (RanMASK's 0.9).")
    mask_token: str = option("[MASK]", help="masked: what a masked word becomes (BERT-like: [MASK]; RoBERTa: <mask>).")
    hops: int = option(2, low=1, high=2, help="substitute: the synonym sets reach 1 or 2 hops of neighbours (SAFER's).")
    cert_samples: int = option(1000, low=1, help="masked, substitute: the before/after certificate's estimation sample n.")
    cert_selection: int = option(100, low=1, help="masked, substitute: the before/after certificate's selection sample n0.")
    cert_neighbors: int = option(1, low=0, high=6, help=(
        "masked, substitute: the certificate's second-order view — natural neighbours up to this many words away "
        "certified too, synonym patches tried on those that are not (0: off)."))
    in_flight: int | None = shared("in_flight")
    seed: int = shared("seed", 0)
    target_label: str | None = shared("target_label")
    label_threshold: float = shared("label_threshold", 0.5)
    naturalness: str = shared("naturalness", "on", choices=("on", "off"))

    def settings(self) -> HardenSettings:
        """The settings the run records in ``settings.json`` (a resume must repeat them)."""
        return HardenSettings(
            model=self.model, method=self.method, attack=self.attack, k=self.k, data=self.data,
            train_sample=self.train_sample, max_train=self.max_train, epochs=self.epochs, rounds=self.rounds,
            lr=self.lr, consistency_weight=self.consistency_weight, found_weight=self.found_weight,
            neighbors=self.neighbors, pairs_per_sentence=self.pairs_per_sentence,
            pairs=[list(parse_pair(self.pair))] if self.pair else None, group=self.group, eval_data=self.eval_data,
            eval_limit=self.eval_limit, eval_attacks=[[m, kk] for m, kk in parse_eval_attacks(self.eval_attack)],
            max_queries=self.max_queries, mlm=self.mlm, lora=self.lora, seed=self.seed,
            from_findings=[str(p) for p in self.from_findings] if self.from_findings else None,
            label=self.target_label, label_threshold=self.label_threshold, naturalness=naturalness_on(self.naturalness),
            copies=self.copies, mask_rate=self.mask_rate, mask_token=self.mask_token, hops=self.hops,
            cert_samples=self.cert_samples, cert_selection=self.cert_selection, cert_neighbors=self.cert_neighbors)

    def check(self) -> HardenSettings:
        """Every one-line error before anything loads; returns the run's settings."""
        settings = self.settings()
        settings.check()
        return settings

    def run(self, *, checked: HardenSettings | None = None, progress: bool = True, device: str | None = None) -> Outcome:
        """Harden (or resume) into ``out``; the outcome's summary is the before/after (``out/harden.json``), its file
        the folder (the hardened model, the mined weaknesses, the before/after results)."""
        summary = harden(checked or self.check(), self.out, progress=progress, in_flight=self.in_flight, device=device)
        return Outcome(summary, [], written(self.out))
