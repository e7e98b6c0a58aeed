"""``audit neighbors``: print Neighbor_k of a sentence."""

from __future__ import annotations

from typing import Optional

import typer

from textaudit.cli.app import AuditCommand, app
from textaudit.cli.options import JsonOpt, LanguageOpt, LimitOpt, MlmOpt, SeedOpt, with_store_option
from textaudit.cli.output import emit_json, notice, print_table
from textaudit.errors import TextAuditError
from textaudit.neighborhoods import NeighborhoodBuilder, load_mlm
from textaudit.neighborhoods.accounting import store_fields
from textaudit.sentence import check_language, guess_language


@app.command(cls=AuditCommand)
@with_store_option
def neighbors(
    text: str = typer.Argument(..., help="The sentence (raw or SST-style tokenised)."),
    k: int = typer.Option(1, "--k", min=0, help="Maximum number of recursive single-word replacements."),
    limit: LimitOpt = None,
    kappa: int = typer.Option(20, "--kappa", min=1, help="κ: candidates kept per position (top-κ)."),
    delta: float = typer.Option(3.0, "--delta", min=0.0, help="δ: keep candidates with logit > best − δ."),
    protect: Optional[list[str]] = typer.Option(None, "--protect", help="A word whose position never changes (repeatable)."),
    blacklist: Optional[list[str]] = typer.Option(None, "--blacklist", help="A word never introduced (repeatable)."),
    sample: Optional[int] = typer.Option(None, "--sample", min=1, help="Draw N sentences uniformly from Neighbor_k instead."),
    mlm: MlmOpt = None,
    language: LanguageOpt = None,
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
) -> None:
    """Print the natural neighbourhood Neighbor_k of a sentence (masked-LM replacements)."""

    if k < 1:
        raise TextAuditError(f"--k must be at least 1 (got {k})")
    if limit is not None and limit < 1:
        raise TextAuditError(f"--limit must be at least 1 (got {limit})")
    lang = check_language(language or guess_language(mlm))
    builder = NeighborhoodBuilder(load_mlm(mlm), kappa=kappa, delta=delta, blacklist=blacklist or (), seed=seed,
                                  language=lang)
    x = builder.parse(text)
    prot = []
    for w in protect or []:
        hits = [i for i, t in enumerate(x.tokens) if t.lower() == w.lower()]
        if not hits:
            raise TextAuditError(f"--protect '{w}' does not occur in the sentence")
        prot += hits
    if sample:
        found = builder.sample(x, k, sample, protected=prot)
    else:
        found = builder.neighbors(x, k, protected=prot, limit=limit)
    notice(f"{len(found)} sentences (masked LM: {builder.mlm.name})")
    if json_out:
        emit_json({"text": text, "k": k, "mlm": builder.mlm.name, "kappa": kappa, "delta": delta, "n": len(found),
                   "neighbors": [{"text": nb.text, "distance": nb.distance, "l0": nb.l0,
                                  "changed": [[i, x.tokens[i], nb.sentence.tokens[i]] for i in x.diff(nb.sentence)]}
                                 for nb in found], **store_fields(builder.mlm)})
        return
    print_table(f"Neighbor_{k} of: {text}", ["distance", "ℓ0", "sentence"],
                [[nb.distance, nb.l0, nb.text] for nb in found])
