"""``audit bias`` stated once: :class:`BiasRequest` holds every option of the audit of B_{p,k}.

The command (``audit bias``), a suite's ``[bias]`` section and a notebook build the same request; ``check()``
says every one-line error before anything loads and ``run(backend)`` scores the units, writes the records and
returns a :class:`BiasOutcome` (the estimates and the summary the command prints).

    B_{p,k} = E_{x̃ ∈ Neighbor_k(X_p)} [ f_soft(x̃ with p(1) → p(2)) − f_soft(x̃) ]

over the k-neighbourhoods (κ masked-LM candidates within δ of the best logit, k words away at most) of the
sentences X_p holding exactly one word of the pair p; up to ``enumerate_k`` the neighbourhood is enumerated,
above it ``sample`` draws per source (:mod:`textaudit.fairness.bias`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from textaudit import notices
from textaudit.backends import Backend, SerialBackend
from textaudit.data import check_side, data_config, dataset_id, load_dataset, split_sides
from textaudit.errors import TextAuditError
from textaudit.fairness.bias import CounterfactualBias, report, run_bias, small_samples
from textaudit.fairness.controls import controls_for
from textaudit.fairness.estimates import CI_METHODS
from textaudit.fairness.groups import group_pairs
from textaudit.fairness.pairs import check_some_source, load_pairs_file, parse_pair
from textaudit.formats.jsonl import read_jsonl
from textaudit.models import load_classifier
from textaudit.models.batched import ALL_LABELS, PairView, each_label, label_view
from textaudit.neighborhoods.accounting import each_label_outcome, work_fields
from textaudit.neighborhoods.mlm import load_mlm
from textaudit.perturbations.gender import gender_words
from textaudit.request import SHARED, EachLabel, Outcome, option, shared, written
from textaudit.runner import check_sharded_output
from textaudit.sentence import check_language, guess_language
from textaudit.shards import Shard

__all__ = ["BiasRequest", "BiasOutcome", "CheckedBias"]


@dataclass
class CheckedBias:
    """What :meth:`BiasRequest.check` found: the pairs p, each group's blacklist, the controls, the data's id,
    the language and the shard."""

    pairs: list[tuple[str, str]]
    blacklists: Any
    controls: dict[tuple[str, str], tuple[str, str]] | None
    data_id: str
    language: str
    shard: Shard | None


@dataclass(kw_only=True)
class BiasOutcome(Outcome):
    """A finished audit of B_{p,k} (:class:`~textaudit.request.Outcome`: its ``summary``, the scored units'
    ``records`` and its results file), the ``results`` ({model: {pair: {k: estimate}}}) and what the command shows
    beside them."""

    results: dict
    classifier: Any
    masked_lm: Any
    classes: list[str] | None
    controls: dict | None
    checked: CheckedBias = field(repr=False, default=None)


#: the model ``audit bias`` audits when given none: the one README command 1 trains, which a first user already has
DEFAULT_MODEL = "cnn"


@dataclass
class BiasRequest:
    """Every option of ``audit bias`` with its default, range and help (:mod:`textaudit.request`)."""

    pair: list[str] | None = option(None, help="Protected pair p = (p(1), p(2)), e.g. he,she (repeatable).")
    pairs_file: Path | None = option(None, help="File of pairs, one 'w1,w2' per line.")
    group: str | None = option(None, help=(
        "A protected group's pairs: gender (the paper's six), nationality, religion, sexuality, ethnicity, names, "
        "or all; each pair's neighbourhood never adds a word of its group."))
    group_pairs: str = option("reference", choices=("reference", "all"), help=(
        "Pairs of a --group: reference (each member vs the group's reference: american, christian, straight; "
        "names: male vs female by rank) or all (every two members)."))
    model: str = shared("model", None, help=SHARED["model"].help + (
        f" Default: {DEFAULT_MODEL} (the model README command 1 trains; said when used)."))
    target_label: str | None = shared("target_label")
    compare: str | None = option(None, help="A second model scored on the same sentences.")
    control: str | None = option(None, help=(
        "A control pair c = w1,w2 of neutral words (or auto: the built-in one for each pair's kind of word, matched in "
        "frequency): B_c on the same sentences, c swapped where p stands, and B_p − B_c with its interval — how much "
        "of B is the protected meaning rather than any swap of two such words."))
    k: int = option(3, low=0, help="Largest neighbourhood distance k (B is reported for 0..k).")
    enumerate_k: int = option(2, low=0, help="Enumerate Neighbor_k up to this k; sample above it.")
    sample: int = option(200, low=2, help="Uniform draws per source sentence at each sampled k.")
    filtered: bool = option(False, help="Only X_filter: sentences with |F_soft| < epsilon at k=0.")
    epsilon: float = option(0.005, low=0.0, help="ε of X_filter.")
    data: str = shared("data", "sst2:dev")
    text_column: str | None = shared("text_column")
    pair_column: str | None = shared("pair_column")
    perturb_side: str = shared("perturb_side", "second", choices=("second", "first"))
    limit: int | None = shared("limit")
    sample_examples: int | None = option(None, low=1, help=(
        "Use N sentences of the data drawn at random with --seed (--sample of the other commands; here --sample "
        "is the draws per source)."))
    max_sources: int | None = option(None, low=1, help="Use the first N sentences of X_p per pair.")
    kappa: int = option(20, low=1, help="κ: masked-LM candidates per position.")
    delta: float = option(3.0, low=0.0, help="δ: keep candidates with logit > best − δ.")
    mlm: str | None = shared("mlm")
    language: str | None = shared("language")
    ci: str = option("clustered", choices=tuple(CI_METHODS), help=(
        "95% interval of B: clustered (CLT) or bootstrap (cluster bootstrap, for small X_p)."))
    in_flight: int | None = shared("in_flight")
    seed: int = shared("seed", 0)
    output: Path | None = shared("output")
    resume: bool = shared("resume", False)
    shard: str | None = shared("shard")
    plot: Path | None = option(None, scope="command", help="Directory for histograms, B vs k and the pair bar chart.")

    def __post_init__(self) -> None:
        #: True when no model was given and :data:`DEFAULT_MODEL` is audited (the CLI says so: a default nobody chose)
        self.model_defaulted = self.model is None
        if self.model is None:
            self.model = DEFAULT_MODEL

    def check(self) -> CheckedBias:
        """Every one-line error this request can have, before any data, masked LM or model loads."""
        if self.pair is not None and not self.pair:
            raise TextAuditError("--pair needs a pair w1,w2 (an empty list of pairs measures nothing)")
        if sum(x is not None for x in (self.pair, self.pairs_file, self.group)) != 1:
            raise TextAuditError("give exactly one of --pair w1,w2, --pairs-file FILE or --group gender")
        blacklists = None
        if self.group is not None:
            pairs, blacklists = group_pairs(self.group, self.group_pairs)
        elif self.pair:
            pairs = [parse_pair(p) for p in self.pair]
        else:
            pairs = load_pairs_file(str(self.pairs_file))
        if self.ci not in CI_METHODS:
            raise TextAuditError(f"unknown --ci '{self.ci}'; use one of {', '.join(CI_METHODS)}")
        controls = controls_for(pairs, self.control, blacklists, gender_words()) if self.control else None
        data_id = dataset_id(self.data, "dev")
        check_side(self.perturb_side)
        language = check_language(self.language or guess_language(self.mlm))
        settings = dict(k=self.k, enumerate_k=self.enumerate_k, sample=self.sample, kappa=self.kappa, delta=self.delta,
                        seed=self.seed, data=data_id, perturb_side=self.perturb_side if self.pair_column else None,
                        data_sample=self.sample_examples, group=self.group,
                        group_pairs=self.group_pairs if self.group else None,
                        controls={f"{p[0]},{p[1]}": f"{c[0]},{c[1]}" for p, c in controls.items()} if controls else None)
        part = check_sharded_output(self.output, self.resume, self.shard, settings)
        return CheckedBias(pairs, blacklists, controls, data_id, language, part)

    def run_each_label(self, backend: Backend | None = None, *, progress: bool = True) -> EachLabel:
        """``--label all``: B_{p,k} of every label of a multi-label model in one run — the model and the masked LM
        loaded once, so the neighbourhoods (the same for every label) are built once and each sentence is forwarded
        once for all labels — each label's scored sentences in its own file (:func:`each_label`)."""
        model = load_classifier(self.model)
        files = each_label(model, self.output)
        requests = {name: replace(self, target_label=name, output=path) for name, path in files.items()}
        checks = {name: r.check() for name, r in requests.items()}  # every file's one-line error before any work
        mlm = load_mlm(self.mlm) if self.k > 0 else None
        out: dict[str, BiasOutcome] = {}
        for i, (name, r) in enumerate(requests.items()):
            if i == 1:  # the first label's plan and estimate hold for all: its forwards score every label
                notices.say(f"cost: the other {len(requests) - 1} labels reuse the first label's neighbourhoods and "
                            "forwards (each sentence is scored once for every label)")
            with notices.without(lambda line, later=i > 0: later and line.startswith("cost:")):
                out[name] = r.run(backend, progress=progress, checked=checks[name], loaded=(model, mlm))
        return each_label_outcome(out, self.output, mlm)

    def run(self, backend: Backend | None = None, *, progress: bool = True, config: dict | None = None,
            checked: CheckedBias | None = None, loaded: tuple[Any, Any] | None = None) -> BiasOutcome | EachLabel:
        """Score the units (resuming ``output`` with ``resume``) and return the outcome. ``config``: more of the
        header's settings (a suite's limit); ``checked``: :meth:`check`'s answer when the caller already asked;
        ``loaded``: the model and masked LM already loaded (``--label all``: shared by every label). With
        ``target_label`` ``all``: :meth:`run_each_label`'s outcome. The summary's cost fields (the store's, the
        score cache's) are the run's, whoever runs it."""
        if self.target_label == ALL_LABELS:
            return self.run_each_label(backend, progress=progress)
        checked = checked or self.check()
        backend = backend or SerialBackend()
        ds = load_dataset(self.data, text_column=self.text_column, pair_column=self.pair_column, default_split="dev",
                          limit=self.limit, sample=self.sample_examples, seed=self.seed, require_labels=False)
        texts, contexts = split_sides(ds, self.perturb_side)
        check_some_source(checked.pairs, texts, ds["id"], contexts, checked.language, limit=self.limit,
                          sample=self.sample_examples)
        backend.start()  # workers import their libraries while the models load here
        model, mlm = loaded if loaded is not None else (load_classifier(self.model), None)
        masked_lm = (mlm if mlm is not None else load_mlm(self.mlm)) if self.k > 0 else None
        opts = dict(kappa=self.kappa, delta=self.delta, enumerate_k=self.enumerate_k, sample=self.sample, seed=self.seed,
                    ci=self.ci, side=self.perturb_side, language=checked.language)
        clf = label_view(model, self.target_label)  # B of the label's own probability
        est = CounterfactualBias(clf, masked_lm, blacklists=checked.blacklists, **opts)
        other = (CounterfactualBias(load_classifier(self.compare), masked_lm, blacklists=checked.blacklists, **opts)
                 if self.compare else None)
        n_classes = (clf if contexts is None else PairView(clf, contexts[0], self.perturb_side)).num_classes
        classes = (clf.labels or [str(c) for c in range(n_classes)]) if n_classes > 2 else None
        header = {**data_config(checked.data_id, clf.labels, sample=self.sample_examples), **(config or {})}
        if self.group is not None:  # each pair's blacklist is its group's
            header.update(group=self.group, group_pairs=self.group_pairs)
        results = run_bias(est, checked.pairs, self.k, texts, ids=ds["id"], compare=other, output=self.output,
                           resume=self.resume, filtered=self.filtered, epsilon=self.epsilon,
                           max_sources=self.max_sources, config=header, shard=checked.shard, backend=backend,
                           contexts=contexts, in_flight=self.in_flight, controls=checked.controls, progress=progress)
        out = report(results)
        if est.skipped_pairs:
            out["skipped_pairs"] = [list(p) for p, _ in est.skipped_pairs]
        if classes:
            out["classes"] = list(classes)
        out["mlm"] = getattr(masked_lm, "name", None)
        out["filtered"] = self.filtered
        warnings = small_samples(results, self.ci, label=self.target_label)
        if warnings:
            out["warnings"] = warnings
        if loaded is None:  # (--label all: the shared model's and masked LM's counts are every label's, said once)
            out.update(work_fields(clf, masked_lm))
        records = read_jsonl(self.output) if self.output is not None else []  # (a resumed file's too)
        return BiasOutcome(out, records, written(self.output), results=results, classifier=clf, masked_lm=masked_lm,
                           classes=classes, controls=checked.controls, checked=checked)
