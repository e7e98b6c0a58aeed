"""``audit attack``: second-order attacks over a dataset, resumable, with a summary table."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from textaudit.attacks import run_attack
from textaudit.attacks.patch import PatchWords
from textaudit.attacks.registry import METHODS, check_options, default_method, estimate_queries, make_attack
from textaudit.backends import Backend
from textaudit.cli.app import (
    AuditCommand,
    DataOpt,
    InFlightOpt,
    JsonOpt,
    LabelColumnOpt,
    LabelMapOpt,
    LanguageOpt,
    LimitOpt,
    MlmOpt,
    ModelOpt,
    OutputOpt,
    PairColumnOpt,
    PerturbSideOpt,
    ResumeOpt,
    SampleOpt,
    SeedOpt,
    ShardOpt,
    TextColumnOpt,
    app,
    check_output,
    conclude,
    format_ci,
    notice,
    print_sampled,
    print_table,
    score_fields,
    store_fields,
    with_backend_options,
    with_model_options,
    with_store_option,
    with_track_option,
)
from textaudit.data import align_labels, check_side, data_config, dataset_id, load_dataset, parse_label_map, split_sides
from textaudit.errors import TextAuditError
from textaudit.fairness.pairs import load_pairs_file
from textaudit.lm import LazyCausalLM
from textaudit.models import load_classifier
from textaudit.neighborhoods.mlm import load_mlm
from textaudit.sentence import check_language, guess_language

METHOD_HELP = (" | ".join(METHODS) + " | textattack:<recipe> (default: so-enum if k <= 2 else so-beam). "
               + "; ".join(f"{name}: {spec.summary}" for name, spec in METHODS.items()))


def say_cost(method: str, k: int | None, beam: int | None, kappa: int | None, texts) -> int | None:
    """Before a run: at most how many classifier queries one example may cost, for the data's
    median sentence, and how to make a first try quick; that bound (None: the method has none)."""
    import statistics

    spec_k = k if k is not None else (2 if method == "so-enum" else 6)
    words = int(statistics.median(sum(w.isalpha() for w in t.split()) for t in texts)) if len(texts) else 0
    est = estimate_queries(method, spec_k, words, beam=beam or 20, kappa=kappa or 20)
    if est is None:
        return None
    n, how = est
    notice(f"cost: up to {n:,} classifier queries per example ({how}); a search stops at its first vulnerable "
           "example, usually far sooner. A quick first try: --k 2 --limit 5, or cap it with --max-queries")
    return n


@app.command(cls=AuditCommand)
@with_track_option
@with_store_option
@with_model_options
@with_backend_options
def attack(
    model: ModelOpt,
    k: Optional[int] = typer.Option(None, "--k", help="Words the neighbourhood may change (default 6; SO-Enum: k <= 2, default 2)."),
    method: Optional[str] = typer.Option(None, "--method", help=METHOD_HELP),
    data: DataOpt = "sst2:dev",
    text_column: TextColumnOpt = None,
    label_column: LabelColumnOpt = None,
    label_map: LabelMapOpt = None,
    pair_column: PairColumnOpt = None,
    perturb_side: PerturbSideOpt = "second",
    limit: LimitOpt = None,
    sample: SampleOpt = None,
    output: OutputOpt = None,
    resume: ResumeOpt = False,
    shard: ShardOpt = None,
    in_flight: InFlightOpt = None,
    beam: Optional[int] = typer.Option(None, "--beam", help="SO-Beam width β (default 20)."),
    kappa: Optional[int] = typer.Option(None, "--kappa", help="κ: masked-LM candidates per position (default 20)."),
    delta: Optional[float] = typer.Option(None, "--delta", help="δ: keep candidates with logit > best − δ (default 3)."),
    mlm: MlmOpt = None,
    language: LanguageOpt = None,
    pairs_file: Optional[Path] = typer.Option(None, "--pairs-file", help=(
        "Synonym pairs 'w1,w2' (one per line) the patch word p comes from (default: the English counter-fitted "
        "neighbours; needed for other languages).")),
    max_queries: Optional[int] = typer.Option(None, "--max-queries", help="Classifier query budget per example."),
    time_budget: Optional[float] = typer.Option(None, "--time-budget", help="Seconds per example."),
    ppl: bool = typer.Option(True, "--ppl/--no-ppl", help="Perplexity of originals and vulnerable examples (SmolLM2)."),
    lm_constraint: bool = typer.Option(False, "--lm-constraint", help="Genetic: keep the 4 synonyms with the lowest SmolLM2 perplexity."),
    threshold: Optional[float] = typer.Option(None, "--threshold", min=0.0, max=1.0,
                                              help="BAE: MiniLM sentence-similarity threshold (default 0.85)."),
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
    runner: Backend = None,  # from --backend and its options (with_backend_options)
) -> None:
    """Search each example's neighbourhood for a vulnerable example (Double Perturbation)."""

    chosen = method
    method = method or default_method(k)
    lang = check_language(language or guess_language(mlm))
    synonyms = load_pairs_file(str(pairs_file)) if pairs_file is not None else None
    options = dict(k=k, beam=beam, kappa=kappa, delta=delta, max_queries=max_queries, time_budget=time_budget,
                   seed=seed, lm=lm_constraint, threshold=threshold, patch_words=synonyms,
                   language=language)
    spec = check_options(method, options)  # before any model is loaded (or trained)
    if "language" in spec.options:
        options["language"] = lang
        if lang != "en" and synonyms is None:
            raise TextAuditError(f"the counter-fitted synonyms the patch words come from are English; for --language "
                                 f"{lang} give --pairs-file with synonym pairs in that language (w1,w2 per line)")
    data_id = dataset_id(data, "dev")
    check_side(perturb_side)
    side = perturb_side if pair_column else None
    if side is not None and method.startswith("textattack:"):
        raise TextAuditError(f"{method} attacks single texts; for sentence pairs use so-beam, so-enum, genetic or bae")
    part = check_output(output, resume, shard, method=method, k=k, beam=beam, kappa=kappa, delta=delta, max_queries=max_queries,
                 time_budget=time_budget, seed=seed, threshold=threshold, data=data_id, ppl=ppl,
                 lm_constraint=lm_constraint if method == "genetic" else None, perturb_side=side, data_sample=sample)
    ds = load_dataset(data, text_column=text_column, label_column=label_column, pair_column=pair_column,
                      default_split="dev", limit=limit, sample=sample, seed=seed)
    if chosen is None:
        notice(f"method: {method} (the default for {'k <= 2' if method == 'so-enum' else 'k > 2'}; choose with --method)")
    say_cost(method, k, beam, kappa, ds["text"])
    runner.start()  # workers import their libraries while the models load here
    clf = load_classifier(model)
    options["mlm"] = load_mlm(mlm) if spec.needs_mlm else None
    # SmolLM2 is loaded on first use: a run (or a --resume) without a success never loads it
    lm = LazyCausalLM() if ppl or lm_constraint else None
    options["lm"] = lm if lm_constraint else None
    ds, classes = align_labels(ds, clf, parse_label_map(label_map))
    if synonyms is not None:
        options["patch_words"] = PatchWords(clf, synonyms)
    atk = make_attack(method, clf, **options)
    texts, contexts = split_sides(ds, perturb_side)
    if hasattr(atk, "rank_patch_words"):
        notice(f"ranking patch words for {clf.name} ...")
        t0 = time.perf_counter()
        atk.rank_patch_words(texts, side)
        notice(f"ranked patch words for {clf.name} in {time.perf_counter() - t0:.1f} s; attacking")
    if not ppl:
        lm = None
    summary, records = run_attack(atk, texts, ds["label"], ids=ds["id"], output=output, resume=resume, ppl=lm,
                                  config=data_config(data_id, classes, sample=sample), shard=part, backend=runner,
                                  contexts=contexts, side=perturb_side, in_flight=in_flight, say=notice,
                                  estimate=pair_column is None and part is None)  # (a shard: the data's first are others')
    summary["model"] = clf.name
    summary.update(store_fields(options["mlm"]))
    summary.update(score_fields(clf))
    if getattr(clf.stats, "requests", 0):  # a remote model: what this run cost the endpoint
        summary.update(http_requests=clf.stats.requests, http_retries=clf.stats.retries,
                       **({"http_tokens": clf.stats.tokens} if clf.stats.tokens else {}))
    if lm is not None and lm.loaded:
        summary["ppl_load_seconds"] = round(lm.load_seconds, 1)  # part of ppl_sec_per_example
    if conclude(summary, output, json_out):
        return
    per_class = summary.pop("per_class", None)
    sampled = summary.pop("sampled", None)
    rows = [[key, "-" if v is None else v] for key, v in summary.items()]
    title = f"{summary['method']} on {clf.name} ({f'k={atk.k}, ' if atk.k else ''}{data})"
    print_table(title, ["metric", "value"], rows)
    if per_class:
        print_table("per gold class", ["class", "attacked", "success", "success rate", "95% CI"],
                    [[c, v["attacked"], v["success"], v["success_rate"], format_ci(tuple(v["success_rate_ci95"] or ()) or None)]
                     for c, v in per_class.items()])
    if sampled:
        print_sampled(sampled)
    show_examples(records, clf.labels)


def show_examples(records: list[dict], labels, n: int = 3) -> None:
    """The first ``n`` successes as a reader wants to see them: the vulnerable sentence and its
    prediction, and (second order) the same sentence under the swap p with the prediction it flips to."""
    found = [r for r in records if r.get("status") == "success" and r.get("vulnerable")][:n]
    if not found:
        return

    def name(c) -> str:
        return str(labels[c]) if labels and c is not None and 0 <= c < len(labels) else str(c)

    second = found[0].get("pair") is not None
    w = max(len(name(r.get(key))) for r in found for key in ("vulnerable_prediction", "vulnerable_patched_prediction",
                                                                 "prediction"))
    typer.echo("vulnerable examples (x̃ natural, near the input; x̃ ⊕ p: the same with one synonym swapped):" if second
               else "adversarial examples (x′ near the input, predicted differently):")
    for r in found:
        if second:
            w1, w2 = r["pair"]
            typer.echo(f"  x̃     → {name(r['vulnerable_prediction']):>{w}}  {r['vulnerable']}")
            typer.echo(f"  x̃ ⊕ p → {name(r['vulnerable_patched_prediction']):>{w}}  {r['vulnerable_patched']}   (p = {w1}→{w2})")
        else:
            typer.echo(f"  x′ → {name(r['vulnerable_prediction']):>{w}} (was {name(r['prediction'])})  {r['vulnerable']}")
