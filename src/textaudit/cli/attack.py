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
    k: int = typer.Option(6, "--k", help="Words the neighbourhood may change (SO-Enum: k <= 2)."),
    method: Optional[str] = typer.Option(None, "--method", help="so-beam | so-enum | random | genetic | bae | textattack:<recipe> (default: so-enum if k<=2 else so-beam)."),
    data: str = typer.Option("sst2:dev", "--data", help="sst2[:split] or a .csv/.tsv/.jsonl file."),
    text_column: Optional[str] = typer.Option(None, "--text-column"),
    label_column: Optional[str] = typer.Option(None, "--label-column"),
    limit: Optional[int] = typer.Option(None, "--limit", help="Attack the first N examples."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="JSONL file, one line per example, written as it goes."),
    resume: bool = typer.Option(False, "--resume", help="Skip examples whose id is already in --output."),
    beam: int = typer.Option(20, "--beam", help="SO-Beam width β."),
    kappa: int = typer.Option(20, "--kappa", help="κ: masked-LM candidates per position."),
    delta: float = typer.Option(3.0, "--delta", help="δ: keep candidates with logit > best − δ."),
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
    from textaudit.attacks import make_attack, run_attack
    from textaudit.attacks.run import check_method
    from textaudit.data import load_dataset
    from textaudit.models import load_classifier
    from textaudit.neighborhoods.mlm import load_mlm

    if output is None and resume:
        raise TextAuditError("--resume needs --output (the JSONL file to continue)")
    check_method(method)  # before any model is loaded (or trained)
    if lm_constraint and method != "genetic":
        raise TextAuditError("--lm-constraint applies to --method genetic only")
    if threshold is not None and method not in ("bae", "textattack:bae"):
        raise TextAuditError("--threshold applies to --method bae or textattack:bae only")
    if time_budget is not None and (method or "").startswith("textattack:"):
        raise TextAuditError("a time budget cannot stop a TextAttack search; use --max-queries")
    ds = load_dataset(data, text_column=text_column, label_column=label_column, default_split="dev", limit=limit)
    clf = load_classifier(model)
    uses_mlm = method in (None, "so-beam", "so-enum", "random", "bae", "textattack:bae")
    masked_lm = load_mlm(mlm) if uses_mlm else None
    lm = None
    if ppl or lm_constraint:
        from textaudit.lm import load_causal_lm

        lm = load_causal_lm()
    atk = make_attack(method, clf, k, mlm=masked_lm, kappa=kappa, delta=delta, beam=beam, max_queries=max_queries,
                      time_budget=time_budget, seed=seed, lm=lm if lm_constraint else None, threshold=threshold)
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
    print_table(f"{summary['method']} on {clf.name} (k={k}, {data})", ["metric", "value"], rows)
