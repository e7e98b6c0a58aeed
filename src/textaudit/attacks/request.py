"""``audit attack`` stated once: :class:`AttackRequest` holds every option of an attack over a dataset.

The command (``audit attack``) and a notebook build the same request; ``check()`` says every one-line error
before anything loads, ``run(backend)`` attacks the examples (appending each record to ``output`` as it
finishes) and returns an :class:`AttackOutcome`.

A second-order search looks for x̃ in Neighbor_k(x) — sentences at most k words from x, each word one of the
masked LM's κ candidates within δ of the best logit — whose prediction flips under one synonym swap
p = (w1, w2): f(x̃) ≠ f(x̃ ⊕ p). SO-Enum enumerates Neighbor_k (k ≤ 2); SO-Beam keeps the β most promising
sentences per round (β = 20, k ≤ 6). Genetic and BAE are the first-order baselines (:data:`METHODS`).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from textaudit.attacks.compare import run_compare
from textaudit.attacks.naturalness import naturalness_on
from textaudit.attacks.patch import PatchWords
from textaudit.attacks.pos import require_tagger
from textaudit.attacks.recipes import DEFAULT_RECIPE, RECIPE_NAMES, recipe_options
from textaudit.attacks.registry import (
    METHODS,
    MethodSpec,
    check_options,
    default_method,
    estimate_queries,
    make_attack,
    method_spec,
)
from textaudit.attacks.run import run_attack
from textaudit.backends import Backend, SerialBackend
from textaudit.data import align_labels, check_side, data_config, dataset_id, load_dataset, parse_label_map, split_sides
from textaudit.errors import TextAuditError
from textaudit.formats.compare import check_distinct_files
from textaudit.lexicons import load_pairs_file
from textaudit.lm import LazyCausalLM
from textaudit.models import load_classifier
from textaudit.models.batched import ALL_LABELS, check_label_threshold, each_label, label_view
from textaudit.neighborhoods.accounting import each_label_outcome, work_fields
from textaudit.neighborhoods.mlm import load_mlm
from textaudit.notices import say as say_line
from textaudit.request import RANGES, EachLabel, Outcome, option, shared, written
from textaudit.runner import check_sharded_output
from textaudit.sentence import check_language, guess_language
from textaudit.shards import Shard

__all__ = ["AttackRequest", "AttackOutcome", "CheckedAttack", "CompareRequest", "METHOD_HELP", "say_cost"]

METHOD_HELP = (" | ".join(METHODS) + " | textattack:<recipe> (default: so-enum if k <= 2 else so-beam). "
               + "; ".join(f"{name}: {spec.summary}" for name, spec in METHODS.items()))


@dataclass
class CheckedAttack:
    """What :meth:`AttackRequest.check` found: the method (and whether it was chosen), its spec and options, the
    language, the synonym pairs of ``--pairs-file``, the data's id, the side of a pair attacked and the shard."""

    method: str
    chosen: bool
    spec: MethodSpec
    options: dict[str, Any]
    language: str
    synonyms: list[tuple[str, str]] | None
    data_id: str
    side: str | None
    shard: Shard | None


@dataclass(kw_only=True)
class AttackOutcome(Outcome):
    """A finished attack (:class:`~textaudit.request.Outcome`: its ``summary``, ``records`` and results file), the
    ``classifier``, the ``attack`` and the causal LM that scored perplexities (None without ``ppl``)."""

    classifier: Any
    attack: Any
    lm: LazyCausalLM | None
    masked_lm: Any


@dataclass
class AttackRequest:
    """Every option of ``audit attack`` with its default, range and help (:mod:`textaudit.request`)."""

    model: str = shared("model", ...)  # required
    k: int | None = option(None, help="Words the neighbourhood may change (default 6; SO-Enum: k <= 2, default 2).")
    method: str | None = option(None, help=METHOD_HELP)
    data: str = shared("data", "sst2:dev")
    text_column: str | None = shared("text_column")
    label_column: str | None = shared("label_column")
    label_map: str | None = shared("label_map")
    target_label: str | None = shared("target_label")
    label_threshold: float = shared("label_threshold", 0.5)
    pair_column: str | None = shared("pair_column")
    perturb_side: str = shared("perturb_side", "second", choices=("second", "first"))
    limit: int | None = shared("limit")
    sample: int | None = shared("sample")
    output: Path | None = shared("output")
    resume: bool = shared("resume", False)
    shard: str | None = shared("shard")
    in_flight: int | None = shared("in_flight")
    beam: int | None = option(None, help="SO-Beam width β (default 20).")
    kappa: int | None = option(None, help="κ: masked-LM candidates per position (default 20).")
    delta: float | None = option(None, help="δ: keep candidates with logit > best − δ (default 3).")
    mlm: str | None = shared("mlm")
    language: str | None = shared("language")
    pairs_file: Path | None = option(None, help=(
        "Synonym pairs 'w1,w2' (one per line) the patch word p comes from (default: the English counter-fitted "
        "neighbours; needed for other languages)."))
    max_queries: int | None = option(None, help="Classifier query budget per example.")
    time_budget: float | None = option(None, help="Seconds per example.")
    ppl: bool = option(True, flags=("--ppl/--no-ppl",), help="Perplexity of originals and vulnerable examples (SmolLM2).")
    lm_constraint: bool = option(False, help="Genetic: keep the 4 synonyms with the lowest SmolLM2 perplexity "
                                             "(Alzantot et al.'s rule).")
    recipe: str | None = option(None, choices=RECIPE_NAMES, help=(
        "Genetic and BAE: 'paper' applies every constraint of the published recipe (Genetic: Jia et al.'s LM rule "
        "with SmolLM2; BAE: the part-of-speech filter and a 15-word similarity window); 'relaxed' (the default) "
        "leaves them out. The results header records which."))
    threshold: float | None = option(None, low=0.0, high=1.0, help="BAE: MiniLM sentence-similarity threshold (default 0.85).")
    naturalness: str = shared("naturalness", "on", choices=("on", "off"))
    seed: int = shared("seed", 0)

    def check(self) -> CheckedAttack:
        """Every one-line error this request can have, before any data, masked LM or model loads (or trains)."""
        method = self.method or default_method(self.k)
        language = check_language(self.language or guess_language(self.mlm))
        synonyms = load_pairs_file(str(self.pairs_file)) if self.pairs_file is not None else None
        natural = "naturalness" in method_spec(method).options  # the second-order searches
        options = dict(k=self.k, beam=self.beam, kappa=self.kappa, delta=self.delta, max_queries=self.max_queries,
                       time_budget=self.time_budget, seed=self.seed, lm=self.lm_constraint, threshold=self.threshold,
                       patch_words=synonyms, language=self.language, recipe=self.recipe,
                       naturalness=naturalness_on(self.naturalness) if natural else None)
        spec = check_options(method, options)
        if method == "textattack:genetic" and self.lm_constraint:
            raise TextAuditError("--lm-constraint is textaudit's Genetic's (Alzantot et al.'s rule); textattack:genetic "
                                 "takes --recipe paper (Jia et al.'s rule)")
        if self.recipe == "paper" and self.lm_constraint:
            raise TextAuditError("--lm-constraint is Alzantot et al.'s LM rule; --recipe paper has its own (Jia et al.'s): "
                                 "give one of them")
        recipe = (self.recipe or DEFAULT_RECIPE) if "recipe" in spec.options else None
        if recipe is not None and recipe_options(method.removeprefix("textattack:"), recipe).get("pos"):
            require_tagger()  # (TextBlob missing: one line now, not after the model and the masked LM load)
        if "language" in spec.options:
            options["language"] = language
            if language != "en" and synonyms is None:
                raise TextAuditError(f"the counter-fitted synonyms the patch words come from are English; for --language "
                                     f"{language} give --pairs-file with synonym pairs in that language (w1,w2 per line)")
        data_id = dataset_id(self.data, "dev")
        check_side(self.perturb_side)
        side = self.perturb_side if self.pair_column else None
        if side is not None and method.startswith("textattack:"):
            raise TextAuditError(f"{method} attacks single texts; for sentence pairs use so-beam, so-enum, genetic or bae")
        settings = dict(method=method, k=self.k, beam=self.beam, kappa=self.kappa, delta=self.delta,
                        max_queries=self.max_queries, time_budget=self.time_budget, seed=self.seed,
                        threshold=self.threshold, data=data_id, ppl=self.ppl,
                        lm_constraint=self.lm_constraint if method == "genetic" else None, recipe=recipe,
                        perturb_side=side,
                        data_sample=self.sample)
        part = check_sharded_output(self.output, self.resume, self.shard, settings)
        return CheckedAttack(method, self.method is not None, spec, options, language, synonyms, data_id, side, part)

    def run_each_label(self, backend: Backend | None = None, *, progress: bool = True,
                       say: Callable[[str], None] = say_line) -> EachLabel:
        """``--label all``: every label of a multi-label model attacked in one run — one model and one masked LM
        loaded once, so each masked context is asked of the masked LM once and each text is forwarded once for all
        labels (their caches are shared) — each label's records in its own file (:func:`each_label`), its gold label
        the data's column of the label's name."""
        model = load_classifier(self.model)
        files = each_label(model, self.output)
        requests = {name: replace(self, target_label=name, output=path, label_column=name) for name, path in files.items()}
        checks = {name: r.check() for name, r in requests.items()}  # every file's one-line error before any work
        first = next(iter(checks.values()))
        mlm = load_mlm(self.mlm) if first.spec.needs_mlm else None
        out: dict[str, AttackOutcome] = {}
        for i, (name, r) in enumerate(requests.items()):
            if i == 1:  # the cost per example is each label's alike: said once (it was repeated per label)
                say(f"cost: the same for the other {len(requests) - 1} labels")
            speak = say if i == 0 else (lambda line: None if line.startswith("cost: ") else say(line))
            out[name] = r.run(backend, checked=checks[name], progress=progress, say=speak, loaded=(model, mlm))
        return each_label_outcome(out, self.output, mlm)

    def run(self, backend: Backend | None = None, *, checked: CheckedAttack | None = None, progress: bool = True,
            say: Callable[[str], None] = say_line, loaded: tuple[Any, Any] | None = None) -> AttackOutcome | EachLabel:
        """Attack the examples (resuming ``output`` with ``resume``) and return the outcome; ``say``: where the
        lines for a person go (the method chosen, the cost, the time estimate, the patch words' ranking);
        ``loaded``: the model and masked LM already loaded (``--label all``: shared by every label). With
        ``target_label`` ``all``: :meth:`run_each_label`'s outcome. The summary's cost fields (the store's, the score
        cache's, an endpoint's) are the run's, whoever runs it."""
        if self.target_label == ALL_LABELS:
            return self.run_each_label(backend, progress=progress, say=say)
        checked = checked or self.check()
        backend = backend or SerialBackend()
        method, options = checked.method, dict(checked.options)
        ds = load_dataset(self.data, text_column=self.text_column, label_column=self.label_column,
                          pair_column=self.pair_column, default_split="dev", limit=self.limit, sample=self.sample,
                          seed=self.seed)
        if not checked.chosen:
            say(f"method: {method} (the default for {'k <= 2' if method == 'so-enum' else 'k > 2'}; choose with --method)")
        say_cost(method, self.k, self.beam, self.kappa, ds["text"], say)
        backend.start()  # workers import their libraries while the models load here
        model, mlm = loaded if loaded is not None else (load_classifier(self.model), None)
        clf = label_view(model, self.target_label, self.label_threshold)
        options["mlm"] = (mlm if mlm is not None else load_mlm(self.mlm)) if checked.spec.needs_mlm else None
        # SmolLM2 is loaded on first use: a run (or a --resume) without a success never loads it
        native = method.removeprefix("textattack:")
        uses_lm = native == "genetic" and (self.lm_constraint or bool(recipe_options(native, self.recipe).get("lm")))
        lm = LazyCausalLM() if self.ppl or uses_lm else None
        options["lm"] = lm if uses_lm else None
        ds, classes = align_labels(ds, clf, parse_label_map(self.label_map))
        if checked.synonyms is not None:
            options["patch_words"] = PatchWords(clf, checked.synonyms)
        atk = make_attack(method, clf, **options)
        texts, contexts = split_sides(ds, self.perturb_side)
        if hasattr(atk, "rank_patch_words"):
            say(f"ranking patch words for {clf.name} ...")
            t0 = time.perf_counter()
            atk.rank_patch_words(texts, checked.side)
            say(f"ranked patch words for {clf.name} in {time.perf_counter() - t0:.1f} s; attacking")
        if not self.ppl:
            lm = None
        summary, records = run_attack(atk, texts, ds["label"], ids=ds["id"], output=self.output, resume=self.resume,
                                      ppl=lm, config=data_config(checked.data_id, classes, sample=self.sample),
                                      shard=checked.shard, backend=backend, contexts=contexts, side=self.perturb_side,
                                      in_flight=self.in_flight, say=say, progress=progress,
                                      estimate=self.pair_column is None and checked.shard is None)
        summary["model"] = clf.name  # (a shard's time is not estimated: the data's first examples are others')
        if loaded is None:  # (--label all: the shared model's and masked LM's counts are every label's, said once)
            summary.update(work_fields(clf, options["mlm"]))
        if lm is not None and lm.loaded:
            summary["ppl_load_seconds"] = round(lm.load_seconds, 1)  # part of ppl_sec_per_example
        return AttackOutcome(summary, records, written(self.output), classifier=clf, attack=atk, lm=lm,
                             masked_lm=options["mlm"])


def say_cost(method: str, k: int | None, beam: int | None, kappa: int | None, texts: Sequence[str],
             say: Callable[[str], None] = say_line) -> int | None:
    """Before a run: at most how many classifier queries one example may cost, for the data's
    median sentence, and how to make a first try quick; that bound (None: the method has none)."""
    spec_k = k if k is not None else (2 if method == "so-enum" else 6)
    words = int(statistics.median(sum(w.isalpha() for w in t.split()) for t in texts)) if len(texts) else 0
    est = estimate_queries(method, spec_k, words, beam=beam or 20, kappa=kappa or 20)
    if est is None:
        return None
    n, how = est
    say(f"cost: up to {n:,} classifier queries per example ({how}); a search stops at its first vulnerable "
        "example, usually far sooner. A quick first try: --k 2 --limit 5, or cap it with --max-queries")
    return n


@dataclass
class CompareRequest:
    """Every option of ``audit compare`` — the Table-2 matrix: every method on every model, one resumable results
    file per cell, success rates with Wilson intervals, McNemar's paired tests and, with a ``margin``,
    non-inferiority of each later model to the first (:func:`textaudit.attacks.compare.run_compare`)."""

    models: list[str] = option(..., sep=",", help="Models, comma-separated (e.g. cnn,lstm,cnn-ibp).")
    methods: list[str] = option(["so-beam", "so-enum", "genetic", "bae"], sep=",",
                                help="Attack methods, comma-separated.")
    output_dir: Path = option(..., scope="command", help=(
        "One results file per cell (<model>.<method>.jsonl) and compare.json; a rerun reuses (resumes) every cell."))
    data: str = shared("data", "sst2:dev")
    label_map: str | None = shared("label_map")
    target_label: str | None = shared("target_label")
    label_threshold: float = shared("label_threshold", 0.5)
    limit: int | None = shared("limit")
    sample: int | None = shared("sample")
    k: int | None = option(None, low=0, help="k of the neighbourhood methods (default: each method's own).")
    mlm: str | None = shared("mlm")
    ppl: bool = option(False, flags=("--ppl/--no-ppl",), help="Perplexities of successes (SmolLM2); off by default.")
    naturalness: str = shared("naturalness", "on", choices=("on", "off"))
    margin: float | None = option(None, **RANGES["margin"], help=(
        "A non-inferiority margin m, a share (0.02 = 2 points): under each method, is every model's success rate no "
        "worse than the first model's by m or more (one-sided test at α = 0.05, Newcombe's paired interval), and "
        "equivalent within ±m (TOST)? Harmful and beneficial flips beside it."))
    seed: int = shared("seed", 0)

    def check(self) -> None:
        """The names' one-line errors (the rest — methods' options, margin, every cell file — are
        :func:`run_compare`'s, also before any model loads)."""
        for what, names in (("models", self.models), ("methods", self.methods)):
            if not names:
                raise TextAuditError(f"--{what} needs at least one name, comma-separated")
            if len(set(names)) != len(names):
                raise TextAuditError(f"--{what} names one twice: {','.join(names)}")
        check_distinct_files(self.models, "--models")
        parse_label_map(self.label_map)
        if self.target_label is not None:
            check_label_threshold(self.label_threshold)
        naturalness_on(self.naturalness)

    def run(self, *, checked: None = None, progress: bool = True) -> Outcome:
        """Run (or reuse) every cell; the outcome's summary is the comparison (``compare.json``'s content), its
        records the cells' summaries, its file the folder of cells."""
        self.check()
        summary = run_compare(self.models, self.methods, self.output_dir, data=self.data, limit=self.limit,
                              sample=self.sample, k=self.k, mlm=self.mlm, ppl=self.ppl, seed=self.seed,
                              margin=self.margin, progress=progress, label_map=parse_label_map(self.label_map),
                              label=self.target_label, label_threshold=self.label_threshold,
                              naturalness=naturalness_on(self.naturalness))
        return Outcome(summary, list(summary["cells"]), [Path(self.output_dir)])
