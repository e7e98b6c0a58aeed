"""``audit certify`` stated once: :class:`CertifyRequest` holds every option of a certification.

Two kinds of certificate (:mod:`textaudit.kinds`): **IBP** (interval bound propagation) bounds the zoo's
robust word models' logits over every word substituted at once by its counter-fitted neighbours, one pass over
the data; **randomized smoothing** — SAFER over synonym substitutions, RanMASK over masked words (ρ of the
words masked per draw) — certifies the smoothed classifier of any model: it names the class with ``selection``
draws (n0), bounds p_A from below with ``samples`` draws (n, Clopper–Pearson at 1 − α) and gives each example
its certified radius R (:mod:`textaudit.robustness.smoothing`). ``neighbors`` > 0 adds the second-order view:
natural neighbours of each certified input (k words away) certified too, synonym patches tried on those that
are not.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from textaudit.backends import Backend
from textaudit.classification import one_class_warning
from textaudit.data import align_labels, check_labels, dataset_id, load_dataset
from textaudit.engine.pace import measure_pace
from textaudit.errors import TextAuditError
from textaudit.files import loads_json
from textaudit.formats.harden import hardened_threat
from textaudit.formats.jsonl import check_output, write_results
from textaudit.lexicons import counterfitted_neighbors
from textaudit.model_traits import traits_of
from textaudit.models import load_classifier
from textaudit.models.batched import ALL_LABELS, each_label, label_view, masked_lm_identity
from textaudit.models.zoo.names import ROBUST_ARCHS, ZOO_MODELS, parse_name, split_robust
from textaudit.neighborhoods.accounting import each_label_outcome
from textaudit.neighborhoods.builder import NeighborhoodBuilder
from textaudit.neighborhoods.mlm import load_mlm
from textaudit.notices import say as say_line
from textaudit.progress import duration
from textaudit.request import RANGES, EachLabel, Outcome, option, range_words, shared, within, written
from textaudit.robustness.certify_clock import first_examples
from textaudit.robustness.smoothing import SAFER, SMOOTHING, PerturbationSets, RanMASK, run_certify

__all__ = ["CertifyRequest", "CertifyOutcome", "METHODS"]

#: the certification methods: IBP, then randomized smoothing's (:data:`textaudit.robustness.smoothing.SMOOTHING`)
METHODS = ("ibp", *SMOOTHING)


def read_synonyms(path: Path) -> dict[str, list[str]]:
    """A ``--synonyms`` file, normalised as the data is: ``{word: [substitutes, closest first]}`` with every word
    in lower case and stripped (a key written ``Good`` is ``good``, and merged with it), substitutes de-duplicated
    in order. A key holding no letter is refused in one line: smoothing substitutes only words with a letter, so
    it could never apply, and a certificate would claim a threat model it never drew."""
    try:
        raw = loads_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TextAuditError(f"--synonyms {path}: not a readable JSON file ({type(e).__name__})") from None
    if not isinstance(raw, dict) or not all(isinstance(v, list) and all(isinstance(x, str) for x in v)
                                            for v in raw.values()):
        raise TextAuditError(f"--synonyms {path} must be a JSON object {{word: [substitutes]}}")
    table: dict[str, list[str]] = {}
    for key, subs in raw.items():
        word = key.strip().lower()
        if not any(ch.isalpha() for ch in word):
            raise TextAuditError(f"--synonyms {path}: the key {key!r} holds no letter; smoothing substitutes only "
                                 "words with a letter, so it could never apply: remove it")
        table[word] = list(dict.fromkeys([*table.get(word, []), *(x.strip().lower() for x in subs if x.strip())]))
    return table


def synonyms_digest(table: dict[str, list[str]] | None) -> str | None:
    """What identifies a ``--synonyms`` table in a results header (its content, not its path: a resume after the
    file changed would mix two threat models); None for the counter-fitted neighbours."""
    if table is None:
        return None
    return hashlib.sha256(json.dumps(table, sort_keys=True).encode("utf-8")).hexdigest()[:16]


@dataclass(kw_only=True)
class CertifyOutcome(Outcome):
    """A finished certification (:class:`~textaudit.request.Outcome`: its ``summary``, ``records`` and results
    file), its ``method``, the ``classifier`` and the number of ``examples``."""

    method: str
    classifier: Any
    examples: int = 0
    synonym_table: dict | None = field(default=None, repr=False)


@dataclass
class CertifyRequest:
    """Every option of ``audit certify`` with its default, range and help (:mod:`textaudit.request`)."""

    model: str = shared("model", ...)  # required
    target_label: str | None = shared("target_label")
    label_threshold: float = shared("label_threshold", 0.5)
    method: str | None = option(None, help=(
        "ibp (interval bound propagation: the zoo's bow/cnn/lstm word models, e.g. cnn-ibp), safer (randomized "
        "smoothing over synonym substitutions: any model, endpoints and label-only ones too) or ranmask (randomized "
        "smoothing over masked words: any model; certifies any replacement of up to R words, not only synonyms). "
        "Default: ibp for a zoo *-ibp model, else safer."))
    data: str = shared("data", "sst2:dev")
    limit: int | None = shared("limit")
    output: Path | None = shared("output")
    resume: bool = shared("resume", False)
    samples: int = option(1000, low=1, help="Smoothing: the estimation sample n (draws per example).")
    selection: int = option(100, low=1, help="Smoothing: the selection sample n0 that names the class.")
    alpha: float = option(0.05, help="Smoothing: 1 − the confidence of p_A's Clopper–Pearson lower bound.")
    mask_rate: float | None = option(None, **RANGES["mask_rate"], help=(
        "RanMASK: ρ, the share of the words masked in each draw (the paper's 0.9 suits models trained on masked "
        "text; a model that never saw masks keeps more accuracy with a lower rate, and a smaller radius). Default: "
        "what the model was hardened for (audit harden --method masked), else 0.9."))
    mask_token: str | None = option(None, help=(
        "RanMASK: what a masked word becomes (BERT-like tokenizers: [MASK]; RoBERTa: <mask>). Default: the "
        "model's hardening's, else [MASK]."))
    synonyms: Path | None = option(None, help=(
        "SAFER: a JSON file {word: [substitutes, closest first]} (default: the counter-fitted neighbours IBP uses)."))
    hops: int | None = option(None, low=1, high=2, help=(
        "SAFER: what smoothing draws from: 1, a word and its substitutes; 2, their substitutes too (tighter). "
        "Default: the model's hardening's (audit harden --method substitute), else 2."))
    neighbors: int = option(1, low=0, help=(
        "Smoothing's second-order view: for each certified input, certify natural neighbours up to k words away (the "
        "masked LM's) and try synonym patches on those that are not; 0: off."))
    neighbor_sample: int = option(8, low=1, help="Neighbours certified per certified input.")
    patches: int = option(4, low=0, help="Synonym swaps tried on each neighbour whose radius is below 1 (one synonym "
                                          "may change it).")
    view_radius: int = option(0, low=0, help=(
        "The second-order view's 'certified': right with a certified radius of at least this (0: right at confidence "
        "1 − α; 1: no single substitution changes it)."))
    mlm: str | None = shared("mlm")
    seed: int = shared("seed", 0)
    in_flight: int | None = shared("in_flight")

    @property
    def threat(self) -> dict | None:
        """The threat model ``model`` was hardened for (``audit harden --method masked|substitute``), or None."""
        return hardened_threat(self.model)

    @property
    def chosen_method(self) -> str:
        """``method``, or its default: the smoothing a hardened model was trained for, IBP for a zoo *-ibp (or
        *-ibp-jia) model, else SAFER."""
        threat = self.threat
        return self.method or (threat["method"] if threat else None) or \
            ("ibp" if self.model in ZOO_MODELS and split_robust(self.model)[1] else "safer")

    def _setting(self, name: str, default: Any) -> Any:
        """An option's value: as given, else the model's hardening's, else ``default``."""
        given = getattr(self, name)
        return given if given is not None else (self.threat or {}).get(name, default)

    @property
    def rate(self) -> float:
        """RanMASK's ρ (``--mask-rate``, else the hardening's, else 0.9)."""
        return float(self._setting("mask_rate", 0.9))

    @property
    def token(self) -> str:
        """RanMASK's mask token (``--mask-token``, else the hardening's, else ``[MASK]``)."""
        return str(self._setting("mask_token", "[MASK]"))

    @property
    def synonym_hops(self) -> int:
        """SAFER's hops (``--hops``, else the hardening's, else 2)."""
        return int(self._setting("hops", 2))

    def _check_threat(self, method: str) -> None:
        """A hardened model is certified under the threat model it was trained for: another is one line."""
        threat = self.threat
        if not threat:
            return
        asked = {"method": method, **({"mask_rate": self.rate, "mask_token": self.token} if method == "ranmask" else
                                      {"hops": self.synonym_hops} if method == "safer" else {})}
        differ = [k for k in threat if asked.get(k) != threat[k]]
        if differ:
            said = ", ".join(f"{k} {threat[k]}" for k in threat)
            asked_said = f"method {method}" if method != threat["method"] else \
                ", ".join(f"{k} {asked.get(k)}" for k in differ)
            raise TextAuditError(f"{self.model} was hardened for {said}; certifying it under {asked_said} measures a "
                                 "threat model it was not trained for: leave --method, --mask-rate, --mask-token and "
                                 "--hops out (they follow its training), or certify the model it was hardened from")

    def check(self) -> dict | None:
        """Every one-line error before any data or model loads; returns the ``--synonyms`` table (None: the
        counter-fitted neighbours)."""
        if not within("mask_rate", self.rate):  # (the hardening's record too: a file anyone may edit)
            raise TextAuditError(f"--mask-rate must be {range_words('mask_rate')} (got {self.rate}); RanMASK's paper "
                                 "uses 0.9")
        method = self.chosen_method
        self._check_threat(method)
        if method not in METHODS:
            raise TextAuditError(f"unknown --method '{method}'; use ibp (zoo bow/cnn/lstm word models), "
                                 f"{' or '.join(SMOOTHING)} (any model)")
        if method == "ibp":
            if self.resume:
                raise TextAuditError("--resume applies to --method safer (an IBP certification is one pass: run it again)")
            if self.model in ZOO_MODELS and parse_name(self.model)[0] not in ROBUST_ARCHS:  # before it trains
                raise TextAuditError(f"certify --method ibp supports the zoo's {'/'.join(ROBUST_ARCHS)} word models (e.g. "
                                     f"cnn-ibp), not {self.model}; --method safer certifies any model")
            check_output(self.output, None, {"data": dataset_id(self.data, "dev")})
            return None
        if not 0 < self.alpha < 0.5:
            raise TextAuditError(f"--alpha must be above 0 and below 0.5 (got {self.alpha}); 0.05 is usual")
        ranmask = method == "ranmask"
        if ranmask and not self.token.strip():
            raise TextAuditError("--mask-token must not be empty (BERT-like tokenizers: [MASK]; RoBERTa: <mask>)")
        table = read_synonyms(Path(self.synonyms)) if self.synonyms is not None else None
        k = self.neighbors
        check_output(self.output, self.resume, dict(
            method=method, samples=self.samples, selection=self.selection, alpha=self.alpha, seed=self.seed,
            data=dataset_id(self.data, "dev"), hops=self.synonym_hops if (k or not ranmask) else None, neighbors_k=k,
            neighbors=self.neighbor_sample if k else None, patches=self.patches if k else None,
            view_radius=self.view_radius if k else None, synonyms_digest=synonyms_digest(table),
            **({"mask_rate": self.rate, "mask_token": self.token} if ranmask else {})))
        return table

    def run_each_label(self, backend: Backend | None = None, *, progress: bool = True,
                       say: Callable[[str], None] = say_line) -> EachLabel:
        """``--label all``: every label of a multi-label model certified in one run — the model (and the second-order
        view's masked LM) loaded once, so a drawn text is forwarded once for every label — each label's records in
        its own file (:func:`each_label`), its gold label the data's column of the label's name."""
        if self.chosen_method == "ibp":  # the zoo's word models, all single-label
            raise TextAuditError("--label all certifies a multi-label model's labels by smoothing: give --method safer "
                                 "or ranmask (IBP certifies the zoo's single-label word models)")
        model = load_classifier(self.model)
        files = each_label(model, self.output)
        requests = {name: replace(self, target_label=name, output=path) for name, path in files.items()}
        tables = {name: r.check() for name, r in requests.items()}  # every file's one-line error before any work
        mlm = load_mlm(self.mlm) if self.neighbors and self.chosen_method != "ibp" else None
        return each_label_outcome({name: r.run(backend, checked=tables[name], progress=progress, say=say,
                                               loaded=(model, mlm)) for name, r in requests.items()}, self.output)

    def run(self, backend: Backend | None = None, *, checked: dict | None = None, progress: bool = True,
            say: Callable[[str], None] = say_line, config: dict | None = None,
            loaded: tuple[Any, Any] | None = None) -> CertifyOutcome | EachLabel:
        """Certify the examples and return the outcome (``checked``: :meth:`check`'s answer, the synonym table;
        ``config``: more of the results header's settings, e.g. a suite's limit; ``loaded``: the model and masked LM
        already loaded — ``--label all``: shared by every label; with ``target_label`` ``all``,
        :meth:`run_each_label`'s outcome). A smoothed classifier that answers one class for nearly every input is
        said in the summary's ``warnings`` (its certificates are a constant's), whoever runs it."""
        if self.target_label == ALL_LABELS:
            return self.run_each_label(backend, progress=progress, say=say)
        table = self.check() if checked is None else checked  # (None again: the counter-fitted neighbours)
        method = self.chosen_method
        ds = load_dataset(self.data, default_split="dev", limit=self.limit,  # bad data: an error before a model trains
                          label_column=self.target_label)  # a multi-label model's label: the data's column of its name
        model, mlm = loaded if loaded is not None else (load_classifier(self.model), None)
        clf = label_view(model, self.target_label, self.label_threshold)
        ds, _ = align_labels(ds, clf)  # class names by the model's, never by their sort order
        check_labels(ds["label"], clf.num_classes, clf.name)
        if method == "ibp":
            from textaudit.models.zoo.ibp import certify_classifier  # torch at import: only when IBP runs

            res = {**certify_classifier(clf, ds["text"], ds["label"]), "model": self.model}
            records = [{"id": self.model, **res}]
            if self.output:
                write_results(self.output, records, command="certify",
                              config={"model": self.model, "model_fingerprint": clf.fingerprint,
                                      "data": dataset_id(self.data, "dev"), **(config or {})})
            return CertifyOutcome(res, records, written(self.output), method=method, classifier=clf, examples=len(ds))
        ranmask, k = method == "ranmask", self.neighbors
        self._say_cost(clf, list(ds["text"]), ranmask, say)
        builder = NeighborhoodBuilder(mlm if mlm is not None else load_mlm(self.mlm), seed=self.seed) if k else None
        # RanMASK draws no synonyms: its sets serve only the second-order view's patches
        sets = PerturbationSets({} if ranmask and not k else table if table is not None else counterfitted_neighbors(),
                                hops=self.synonym_hops)
        kind: type[SAFER] = RanMASK if ranmask else SAFER
        safer = kind(clf, sets, samples=self.samples, selection=self.selection, alpha=self.alpha, seed=self.seed,
                     builder=builder, neighbors_k=k, neighbors=self.neighbor_sample, patches=self.patches,
                     view_radius=self.view_radius,
                     **({"rate": self.rate, "mask_token": self.token} if ranmask else {}))
        lexicon = str(self.synonyms) if self.synonyms is not None else "counterfitted-neighbors"
        summary, records = run_certify(safer, ds["text"], ds["label"], ds["id"], output=self.output,
                                       resume=self.resume, in_flight=self.in_flight, progress=progress, backend=backend,
                                       say=say,
                                       config={"data": dataset_id(self.data, "dev"),
                                               "synonyms": lexicon if k or not ranmask else None,
                                               "synonyms_digest": synonyms_digest(table),
                                               **masked_lm_identity(builder and builder.mlm),
                                               **(config or {})})
        summary["model"] = clf.name
        collapsed = self._collapsed(clf, records, ranmask)
        if collapsed:
            summary["warnings"] = [collapsed]
        return CertifyOutcome(summary, records, written(self.output), method=method, classifier=clf, examples=len(ds))

    def _collapsed(self, clf: Any, records: list[dict], ranmask: bool) -> str | None:
        """The warning when the smoothed classifier is (nearly) constant: its certificates are a constant's."""
        said = [r for r in records if r.get("prediction") is not None]
        collapsed = one_class_warning(clf, np.array([r["prediction"] for r in said]),
                                      np.array([r["label"] for r in said]),
                                      clf.labels or [str(i) for i in range(clf.num_classes)])
        if not collapsed:
            return None
        return collapsed.replace("its answers barely depend on the text", "the smoothed classifier barely depends "
                                 "on the text and its certificates are a constant's") + (
            f"; a model that never saw masked text may answer one class under {self.rate:.0%} masks: try a "
            "lower --mask-rate, a --mask-token it knows, or a model trained on masked copies (audit harden --method "
            "masked)" if ranmask else "")

    def _say_cost(self, clf: Any, texts: list[str], ranmask: bool, say: Callable[[str], None]) -> None:
        """Before the draws: how many texts they ask at most, and at the pace measured here, how long."""
        n, per, patches, k = len(texts), self.neighbor_sample, self.patches, self.neighbors
        budget = (" (an endpoint's --query-budget and --cost-budget stop it, results kept)"
                  if traits_of(clf).protocol else "")
        per_text = self.samples + self.selection
        more = (f", and up to {n * per * (1 + patches) * per_text:,} more for the second-order view ({per} neighbours of "
                f"each certified input, {patches} patches of each one of radius 0; --neighbors 0 turns it off)") if k else ""
        drawn = "maskings" if ranmask else "synonym substitutions"
        say(f"cost: up to {n * per_text:,} texts to {clf.name} — {self.selection} + {self.samples} random {drawn} "
            f"of each of {n} examples (repeats are asked once){more}{budget}; --samples and --limit bound it")
        pace = measure_pace(clf, None, texts)  # (the data's first texts: asked again from the cache)
        first = first_examples(n)
        timed = (f"the first {first} examples run first and are timed for an estimate of the rest" if first < n else
                 "the progress line follows the texts asked")
        if pace is not None:
            view = (f"; the second-order view up to {duration(n * per * (1 + patches) * per_text * pace.text_seconds)} "
                    "more, and its masked LM's time (for the inputs it certifies)") if k else ""
            say(f"time: the draws take up to {duration(n * per_text * pace.text_seconds)} at {1 / pace.text_seconds:,.0f} "
                f"texts/s measured here{view}; {timed}")
