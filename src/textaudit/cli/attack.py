"""``audit attack``: second-order attacks over a dataset, resumable, with a summary table."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from textaudit.cli.main import app, emit_json, notice, print_table
from textaudit.errors import TextAuditError

MODEL_HELP = "Zoo name (bow, cnn, lstm, transformer, minilm), hf:<dir-or-id>, checkpoint dir or file.py:obj."


@app.command()
def attack(
    model: str = typer.Option(..., "--model", "-m", help=MODEL_HELP),
    k: Optional[int] = typer.Option(None, "--k", help="Words the neighbourhood may change (default 6; SO-Enum: k <= 2, default 2)."),
    method: Optional[str] = typer.Option(None, "--method", help="so-beam | so-enum | random | genetic | bae | textattack:<recipe> (default: so-enum if k<=2 else so-beam)."),
    data: str = typer.Option("sst2:dev", "--data", help="sst2[:split] or a .csv/.tsv/.jsonl file."),
    text_column: Optional[str] = typer.Option(None, "--text-column"),
    label_column: Optional[str] = typer.Option(None, "--label-column"),
    limit: Optional[int] = typer.Option(None, "--limit", help="Attack the first N examples."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="JSONL file, one line per example, written as it goes."),
    resume: bool = typer.Option(False, "--resume", help="Skip examples whose id is already in --output."),
    beam: Optional[int] = typer.Option(None, "--beam", help="SO-Beam width β (default 20)."),
    kappa: Optional[int] = typer.Option(None, "--kappa", help="κ: masked-LM candidates per position (default 20)."),
    delta: Optional[float] = typer.Option(None, "--delta", help="δ: keep candidates with logit > best − δ (default 3)."),
    mlm: Optional[str] = typer.Option(None, "--mlm", help="Masked LM (default: distilbert if available, else minilm-mlm)."),
    max_queries: Optional[int] = typer.Option(None, "--max-queries", help="Classifier query budget per example."),
    time_budget: Optional[float] = typer.Option(None, "--time-budget", help="Seconds per example."),
    ppl: bool = typer.Option(True, "--ppl/--no-ppl", help="Perplexity of originals and vulnerable examples (SmolLM2)."),
    lm_constraint: bool = typer.Option(False, "--lm-constraint", help="Genetic: keep the 4 synonyms with the lowest SmolLM2 perplexity."),
    threshold: Optional[float] = typer.Option(None, "--threshold", help="BAE: MiniLM sentence-similarity threshold (default 0.85)."),
    seed: int = typer.Option(0, "--seed"),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as one JSON object on the last line."),
) -> None:
    """Search each example's neighbourhood for a vulnerable example (Double Perturbation)."""
    from textaudit.attacks import run_attack
    from textaudit.attacks.registry import check_options, default_method, make_attack
    from textaudit.data import load_dataset
    from textaudit.models import load_classifier
    from textaudit.neighborhoods.mlm import load_mlm

    if output is None and resume:
        raise TextAuditError("--resume needs --output (the JSONL file to continue)")
    method = method or default_method(k)
    options = dict(k=k, beam=beam, kappa=kappa, delta=delta, max_queries=max_queries, time_budget=time_budget,
                   seed=seed, lm=lm_constraint, threshold=threshold)
    spec = check_options(method, options)  # before any model is loaded (or trained)
    ds = load_dataset(data, text_column=text_column, label_column=label_column, default_split="dev", limit=limit)
    clf = load_classifier(model)
    options["mlm"] = load_mlm(mlm) if spec.needs_mlm else None
    lm = None
    if ppl or lm_constraint:
        from textaudit.lm import load_causal_lm

        lm = load_causal_lm()
    options["lm"] = lm if lm_constraint else None
    atk = make_attack(method, clf, **options)
    if hasattr(atk, "patch_words"):
        notice(f"ranking patch words for {clf.name} ...")
        atk.patch_words.fit()
    if not ppl:
        lm = None
    prefix = data if ":" in data or not Path(data).exists() else Path(data).name
    ids = [f"{prefix}:{i}" for i in range(len(ds))]
    summary, records = run_attack(atk, ds["text"], ds["label"], ids=ids, output=output, resume=resume, ppl=lm)
    summary["model"] = clf.name
    if output:
        notice(f"results: {output}")
    if json_out:
        emit_json(summary)
        return
    rows = [[key, "-" if v is None else v] for key, v in summary.items()]
    title = f"{summary['method']} on {clf.name} ({f'k={atk.k}, ' if atk.k else ''}{data})"
    print_table(title, ["metric", "value"], rows)
