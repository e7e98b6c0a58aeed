"""``audit bias``: counterfactual token bias B_{p,k} for protected word pairs."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from textaudit.backends import Backend
from textaudit.cli.app import (
    AuditCommand,
    DataOpt,
    InFlightOpt,
    JsonOpt,
    LanguageOpt,
    LimitOpt,
    MlmOpt,
    ModelOpt,
    OutputOpt,
    PairColumnOpt,
    PerturbSideOpt,
    ResumeOpt,
    SeedOpt,
    ShardOpt,
    TextColumnOpt,
    app,
    check_output,
    emit_json,
    finished,
    notice,
    print_table,
    score_fields,
    store_fields,
    with_backend_options,
    with_model_options,
    with_store_option,
    with_track_option,
)
from textaudit.data import check_side, data_config, dataset_id, load_dataset, split_sides
from textaudit.errors import TextAuditError
from textaudit.fairness import CounterfactualBias, load_pairs_file, parse_pair, report, run_bias
from textaudit.fairness.bias import BIAS_COLUMNS, K0_NOTE, bias_rows, small_samples
from textaudit.fairness.controls import controls_for
from textaudit.fairness.estimates import CI_METHODS
from textaudit.fairness.groups import group_pairs
from textaudit.fairness.pairs import check_some_source
from textaudit.fairness.plots import plot_bias
from textaudit.models import load_classifier
from textaudit.models.batched import PairView
from textaudit.neighborhoods.mlm import load_mlm
from textaudit.perturbations.gender import gender_words
from textaudit.sentence import check_language, guess_language


@app.command(cls=AuditCommand)
@with_track_option
@with_store_option
@with_model_options
@with_backend_options
def bias(
    pair: Optional[str] = typer.Option(None, "--pair", help="Protected pair p = (p(1), p(2)), e.g. he,she."),
    pairs_file: Optional[Path] = typer.Option(None, "--pairs-file", help="File of pairs, one 'w1,w2' per line."),
    group: Optional[str] = typer.Option(None, "--group", help=(
        "A protected group's pairs: gender (the paper's six), nationality, religion, sexuality, ethnicity, names, "
        "or all; each pair's neighbourhood never adds a word of its group.")),
    group_pairs_mode: str = typer.Option("reference", "--group-pairs", help=(
        "Pairs of a --group: reference (each member vs the group's reference: american, christian, straight; "
        "names: male vs female by rank) or all (every two members).")),
    model: ModelOpt = "lstm",
    compare: Optional[str] = typer.Option(None, "--compare", help="A second model scored on the same sentences."),
    control: Optional[str] = typer.Option(None, "--control", help=(
        "A control pair c = w1,w2 of neutral words (or auto: the built-in one for each pair's kind of word, matched in "
        "frequency): B_c on the same sentences, c swapped where p stands, and B_p − B_c with its interval — how much "
        "of B is the protected meaning rather than any swap of two such words.")),
    k: int = typer.Option(3, "--k", min=0, help="Largest neighbourhood distance k (B is reported for 0..k)."),
    enumerate_k: int = typer.Option(2, "--enumerate-k", min=0, help="Enumerate Neighbor_k up to this k; sample above it."),
    sample: int = typer.Option(200, "--sample", min=2, help="Uniform draws per source sentence at each sampled k."),
    filtered: bool = typer.Option(False, "--filtered", help="Only X_filter: sentences with |F_soft| < epsilon at k=0."),
    epsilon: float = typer.Option(0.005, "--epsilon", min=0.0, help="ε of X_filter."),
    data: DataOpt = "sst2:dev",
    text_column: TextColumnOpt = None,
    pair_column: PairColumnOpt = None,
    perturb_side: PerturbSideOpt = "second",
    limit: LimitOpt = None,
    sample_examples: Optional[int] = typer.Option(None, "--sample-examples", min=1, help=(
        "Use N sentences of the data drawn at random with --seed (--sample of the other commands; here --sample "
        "is the draws per source).")),
    max_sources: Optional[int] = typer.Option(None, "--max-sources", min=1, help="Use the first N sentences of X_p per pair."),
    kappa: int = typer.Option(20, "--kappa", min=1, help="κ: masked-LM candidates per position."),
    delta: float = typer.Option(3.0, "--delta", min=0.0, help="δ: keep candidates with logit > best − δ."),
    mlm: MlmOpt = None,
    language: LanguageOpt = None,
    output: OutputOpt = None,
    resume: ResumeOpt = False,
    shard: ShardOpt = None,
    in_flight: InFlightOpt = None,
    ci: str = typer.Option("clustered", "--ci", help="95% interval of B: clustered (CLT) or bootstrap (cluster bootstrap, for small X_p)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Directory for histograms, B vs k and the pair bar chart."),
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
    runner: Backend = None,  # from --backend and its options (with_backend_options)
) -> None:
    """Measure B_{p,k}: the mean shift of f_soft when p(1) → p(2) over the k-neighbourhood of the data."""

    if sum(x is not None for x in (pair, pairs_file, group)) != 1:
        raise TextAuditError("give exactly one of --pair w1,w2, --pairs-file FILE or --group gender")
    blacklists = None
    if group is not None:
        pairs, blacklists = group_pairs(group, group_pairs_mode)
    else:
        pairs = [parse_pair(pair)] if pair else load_pairs_file(str(pairs_file))
    if ci not in CI_METHODS:
        raise TextAuditError(f"unknown --ci '{ci}'; use one of {', '.join(CI_METHODS)}")
    controls = controls_for(pairs, control, blacklists, gender_words()) if control else None
    data_id = dataset_id(data, "dev")
    check_side(perturb_side)
    lang = check_language(language or guess_language(mlm))
    part = check_output(output, resume, shard, k=k, enumerate_k=enumerate_k, sample=sample, kappa=kappa, delta=delta, seed=seed,
                 data=data_id, perturb_side=perturb_side if pair_column else None, data_sample=sample_examples,
                 group=group, group_pairs=group_pairs_mode if group else None,
                 controls={f"{p[0]},{p[1]}": f"{c[0]},{c[1]}" for p, c in controls.items()} if controls else None)
    ds = load_dataset(data, text_column=text_column, pair_column=pair_column, default_split="dev", limit=limit,
                      sample=sample_examples, seed=seed, require_labels=False)
    texts, contexts = split_sides(ds, perturb_side)
    check_some_source(pairs, texts, ds["id"], contexts, lang, limit=limit, sample=sample_examples)
    runner.start()  # workers import their libraries while the models load here
    masked_lm = load_mlm(mlm) if k > 0 else None
    opts = dict(kappa=kappa, delta=delta, enumerate_k=enumerate_k, sample=sample, seed=seed, ci=ci, side=perturb_side,
                language=lang)
    clf = load_classifier(model)
    est = CounterfactualBias(clf, masked_lm, blacklists=blacklists, **opts)
    other = CounterfactualBias(load_classifier(compare), masked_lm, blacklists=blacklists, **opts) if compare else None
    n_classes = (clf if contexts is None else PairView(clf, contexts[0], perturb_side)).num_classes
    classes = (clf.labels or [str(c) for c in range(n_classes)]) if n_classes > 2 else None
    config = data_config(data_id, clf.labels, sample=sample_examples)
    if group is not None:  # each pair's blacklist is its group's
        config.update(group=group, group_pairs=group_pairs_mode)
    results = run_bias(est, pairs, k, texts, ids=ds["id"], compare=other, output=output, resume=resume,
                       filtered=filtered, epsilon=epsilon, max_sources=max_sources, config=config,
                       shard=part, backend=runner, contexts=contexts, in_flight=in_flight, controls=controls)
    if output:
        notice(f"scored sentence pairs: {output}")
    if plot:
        for path in plot_bias(results, plot):
            notice(f"plot: {path}")
    out = report(results)
    if est.skipped_pairs:
        out["skipped_pairs"] = [list(p) for p, _ in est.skipped_pairs]
        shown = ", ".join("/".join(p) for p, _ in est.skipped_pairs[:8]) + (" …" if len(est.skipped_pairs) > 8 else "")
        notice(f"notice: {len(est.skipped_pairs)} of {len(pairs)} pairs left out (no sentence of the data holds "
               f"exactly one of their words, or a model does not know one): {shown}")
    if classes:
        out["classes"] = list(classes)
    out["mlm"] = getattr(masked_lm, "name", None)
    out.update(store_fields(masked_lm))
    out.update(score_fields(clf))
    if "store_hits" in out:
        notice(f"neighbourhood store: {out['store_hits']} masked contexts answered from it, {out['store_misses']} "
               f"computed; {out['mlm_seconds_saved']} s of masked-LM time saved"
               + (f"; {out['score_hits']} classifier scores from it, {out['score_forwards']} computed"
                  if "score_hits" in out else ""))
    out["filtered"] = filtered
    warnings = small_samples(results, ci)
    for w in warnings:
        notice(w)
    if warnings:
        out["warnings"] = warnings
    finished(out, [output])
    if json_out:
        emit_json(out)
        return
    columns = BIAS_COLUMNS + (["B per class"] if classes else [])
    print_table(f"B_(p,k) on {data}{' (X_filter)' if filtered else ''}, mlm={out['mlm']}", columns,
                bias_rows(results, classes, controls))
    if any(kk == 0 for per_pair in results.values() for by_k in per_pair.values() for kk in by_k):
        typer.echo(K0_NOTE)
