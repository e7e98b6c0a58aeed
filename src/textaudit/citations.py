"""What to cite: the software and the papers each command implements (``audit cite``).

One table, :data:`PAPERS` (a BibTeX key and its entry, read from ``assets/papers.bib``), and one map,
:data:`COMMANDS` (a command and the keys of what it implements or reads). The software entry is built from the package's own version,
so it always names the release that produced a results file. ``CITATION.cff`` at the repository root
says the same for GitHub's "Cite this repository" and Zenodo.
"""

from __future__ import annotations

import re
from importlib.resources import files

from textaudit.version import __version__


def _read_papers() -> dict[str, str]:
    """The BibTeX entries of ``assets/papers.bib`` by key (entries are separated by a blank line)."""
    text = (files("textaudit") / "assets" / "papers.bib").read_text(encoding="utf-8")
    return {re.match(r"@\w+\{([^,]+),", entry).group(1): entry  # type: ignore[union-attr]
            for entry in re.split(r"\n\n(?=@)", text.strip())}


#: BibTeX entries, by key: the papers textaudit implements, and the data and models it ships or reads
#: (``assets/papers.bib``: one entry per paper, kept as BibTeX).
PAPERS: dict[str, str] = _read_papers()

_NEIGHBOURHOODS = ["zhang2021double", "wang2020minilm"]
#: the statistics of paired decisions: non-inferiority and equivalence at a margin (--margin)
_DECISIONS = ["newcombe1998paired", "schuirmann1987tost"]
_SST2 = ["socher2013recursive"]

#: Each command and what it implements or reads (after the software itself, which every command cites).
COMMANDS: dict[str, list[str]] = {
    "attack": [*_NEIGHBOURHOODS, "mrksic2016counter", "alzantot2018generating", "jia2019certified",
               "garg2020bae", "morris2020textattack", "chen2021codex", *_SST2],
    "compare": [*_NEIGHBOURHOODS, "mrksic2016counter", "alzantot2018generating", "jia2019certified",
                "garg2020bae", *_DECISIONS, *_SST2],
    "neighbors": _NEIGHBOURHOODS,
    "replay": [*_DECISIONS, "chen2021codex", "zhang2021double"],
    "bias": [*_NEIGHBOURHOODS, "zhao2018gender", "ribeiro2020beyond", "speer2022wordfreq", *_SST2],
    "certify": ["jia2019certified", "ye2020safer", "zeng2023ranmask", "cohen2019certified", "mrksic2016counter", *_NEIGHBOURHOODS, *_SST2],
    "train": ["jia2019certified", "zhang2021double", *_SST2],
    "train-mlm": ["wang2020minilm", "hu2022lora", "zhang2021double"],
    "wordorder": ["clouatre2021demystifying", *_SST2],
    "learnability": ["zhang2022interpreting", *_SST2],
    "perturbscore": ["li2023perturbscore", *_SST2],
    "evaluate": ["guo2017calibration", "brier1950verification", *_SST2],
    "run": [*_DECISIONS, *_NEIGHBOURHOODS],
    # mining = the second-order attacks; adversarial training as TextAttack's; the consistency loss is
    # stability training's (on natural neighbours) and, on protected pairs, counterfactual logit pairing
    "harden": [*_NEIGHBOURHOODS, "morris2020textattack", "zheng2016stability", "garg2019counterfactual",
               "hu2022lora", *_SST2],
}


def software_bibtex() -> str:
    """The BibTeX entry of this release of textaudit."""
    return f"""@software{{textaudit,
  title = {{textaudit: auditing NLP text classifiers beyond their test set}},
  author = {{{{textaudit developers}}}},
  version = {{{__version__}}},
  year = {{2026}},
  license = {{MIT}}
}}"""


def keys_for(command: str | None) -> list[str]:
    """The paper keys ``command`` cites (every paper when None), in the order of :data:`COMMANDS`."""
    if command is None:
        return list(PAPERS)
    return list(dict.fromkeys(COMMANDS.get(command, [])))


def bibtex(command: str | None = None) -> str:
    """The software's entry and the papers of ``command`` (all of them when None), as one BibTeX file."""
    return "\n\n".join([software_bibtex(), *(PAPERS[k] for k in keys_for(command))]) + "\n"
