"""General English for ``minilm-mlm`` to learn from, obtained offline and legitimately (issue [8/9]).

Two sources, each written as one sentence per line, tokenised like SST-2
(:func:`textaudit.text.word_tokenize`), into a corpus folder that ``audit train-mlm --corpus``
mixes into training:

- :func:`debian_prose` — English documentation shipped in Debian packages (fetched with
  ``apt-get download``, unpacked with ``dpkg-deb``; :data:`DEBIAN_SOURCES` names each with its
  licence): prose paragraphs (``<p>``, ``<li>``, ``<div class="para">``) of their HTML, never
  code blocks.
- :func:`generate_synthetic` — text sampled from the shipped SmolLM2-135M under diverse prompts
  (:data:`DOMAINS`: product reviews, news, support tickets, social posts, instructions, dialogue),
  batched (on CUDA when present), appended batch by batch to a JSONL file so that an interrupted run
  resumes where it stopped; batch b is sampled with seed ``seed + b``, so the same seed gives the
  same corpus however often it was resumed. Each generation is cut into sentences; sentences with
  degenerate repetition (:func:`degenerate`) and repeats of a sentence already kept are dropped.

Never used: SST-2 dev/test, and the sentiment corpora inside PyPI packages (VADER's review, news and
tweet snippets are the held-out evaluation set of ``benchmarks/mlm_quality.py``), nor the
``sgt-puzzles`` manual (held out likewise).
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterable

from textaudit.device import pick_device
from textaudit.errors import TextAuditError
from textaudit.files import loads_json
from textaudit.lm import load_lm
from textaudit.progress import progress
from textaudit.text import word_tokenize

__all__ = ["DEBIAN_SOURCES", "DOMAINS", "sentences_of", "clean_sentence", "degenerate", "html_paragraphs",
           "debian_prose", "synthetic_prompts", "generate_synthetic", "read_corpus"]

#: Debian package -> (folders of English HTML inside it, file pattern, licence)
DEBIAN_SOURCES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "debian-handbook": (("usr/share/doc/debian-handbook/html/en-US",), "*.html", "GPL-2.0+ or CC-BY-SA-3.0"),
    "debian-reference-en": (("usr/share/debian-reference",), "*.en.html", "GPL-2.0+"),
    "maint-guide": (("usr/share/doc/maint-guide/html",), "*.en.html", "GPL-2.0+ or MIT"),
    "python3.11-doc": (tuple(f"usr/share/doc/python3.11/html/{d}" for d in
                             ("tutorial", "howto", "faq", "using", "whatsnew")), "*.html", "PSF-2.0"),
}

_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def clean_sentence(text: str, *, min_words: int = 6, max_words: int = 48) -> str | None:
    """``text`` tokenised like SST-2 and joined by spaces, or ``None`` when it is not prose: non-ASCII,
    a URL or e-mail address, fewer than ``min_words`` or more than ``max_words`` tokens, fewer than
    70 % alphabetic tokens, or degenerate (:func:`degenerate`)."""
    text = " ".join(text.split())
    if not text.isascii() or re.search(r"https?:|www\.|\S@\S|[{}<>|\\=_]", text):
        return None
    words = word_tokenize(text)
    if not min_words <= len(words) <= max_words or sum(w.isalpha() for w in words) < 0.7 * len(words):
        return None
    return None if degenerate(words) else " ".join(words)


def degenerate(words: list[str]) -> bool:
    """Degenerate repetition, as small LMs produce: a word three times in a row, or fewer than 80 %
    of the sentence's word trigrams distinct (a phrase looping)."""
    if any(words[i] == words[i + 1] == words[i + 2] for i in range(len(words) - 2)):
        return True
    tri = [tuple(words[i:i + 3]) for i in range(len(words) - 2)]
    return bool(tri) and len(set(tri)) < 0.8 * len(tri)


def sentences_of(paragraph: str) -> list[str]:
    """Split a paragraph into sentences at . ! ? followed by a capital or digit."""
    return [s for s in _SPLIT.split(" ".join(paragraph.split())) if s]


class _Prose(HTMLParser):
    """Text of <p>, <li> and <div class="para"> (Publican's paragraphs) elements, skipping <pre>,
    scripts, styles and tables."""

    SKIP = {"pre", "script", "style", "table"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._buf: list[str] | None = None
        self._skip = 0
        self._div = False  # the open paragraph is a <div class="para"> (ends at the next </div>)

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self._skip += 1
        elif (tag in ("p", "li") or (tag == "div" and ("class", "para") in attrs)) and self._skip == 0:
            self._flush()
            self._buf = []
            self._div = tag == "div"

    def handle_endtag(self, tag):
        if tag in self.SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag in ("p", "li") or (tag == "div" and self._div):
            self._flush()

    def handle_data(self, data):
        if self._buf is not None and self._skip == 0:
            self._buf.append(data)

    def _flush(self):
        if self._buf:
            self.paragraphs.append(" ".join("".join(self._buf).split()))
        self._buf = None


def html_paragraphs(html: str) -> list[str]:
    """Prose paragraphs of an HTML page."""
    p = _Prose()
    p.feed(html)
    p.close()
    p._flush()
    return [x for x in p.paragraphs if x]


def debian_prose(packages: Iterable[str] = tuple(DEBIAN_SOURCES), workdir: str | Path | None = None) -> dict[str, list[str]]:
    """``{package: sentences}`` of the English documentation in Debian ``packages`` (deduplicated, in
    file order). Needs ``apt-get`` and ``dpkg-deb`` (Debian, Ubuntu) and access to a Debian mirror."""
    out: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(workdir) if workdir else Path(tmp_dir)
        tmp.mkdir(parents=True, exist_ok=True)
        for pkg in packages:
            if pkg not in DEBIAN_SOURCES:
                raise TextAuditError(f"unknown Debian source {pkg!r}; choose from {', '.join(DEBIAN_SOURCES)}")
            folders, pattern, _ = DEBIAN_SOURCES[pkg]
            root = tmp / pkg
            if not root.is_dir():
                try:
                    subprocess.run(["apt-get", "download", "-q", pkg], cwd=tmp, check=True, capture_output=True, text=True)
                    deb = next(tmp.glob(f"{pkg}_*.deb"))
                    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True, capture_output=True)
                except (OSError, subprocess.CalledProcessError, StopIteration) as e:
                    detail = getattr(e, "stderr", "") or str(e)
                    raise TextAuditError(f"cannot fetch Debian package {pkg} ({str(detail).strip()[:120]}); "
                                         "this needs apt-get and dpkg-deb with a reachable Debian mirror") from None
            seen: dict[str, None] = {}
            for folder in folders:
                for page in sorted((root / folder).glob(pattern)):
                    for para in html_paragraphs(page.read_text(encoding="utf-8", errors="replace")):
                        for s in sentences_of(para):
                            c = clean_sentence(s)
                            if c:
                                seen.setdefault(c)
            out[pkg] = list(seen)
    return out


#: domain -> (prompt templates, the fillers of their {slot})
DOMAINS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "product-review": (
        ("Customer review of a {x}, 4 out of 5 stars:\n", "I bought this {x} last month. My honest review:\n",
         "Review: the {x} I ordered online\n"),
        ("wireless headphones", "coffee maker", "running shoes", "laptop bag", "vacuum cleaner", "phone case",
         "kitchen knife set", "electric toothbrush", "office chair", "winter jacket", "blender", "smart watch",
         "garden hose", "baby stroller", "tent", "printer", "desk lamp", "backpack", "air fryer", "mattress",
         "board game", "hair dryer", "bicycle helmet", "water bottle", "microwave", "sofa", "camera lens")),
    "news": (
        ("Local news. {x}\n\n", "The following is a newspaper article about {x}.\n\n", "BREAKING: {x}\n\n"),
        ("heavy rain and flooding in northern towns", "the city council's new budget", "a strike by train drivers",
         "rising food prices", "a new hospital opening", "the election results", "a school closing early",
         "a storm damaging homes", "the central bank raising interest rates", "a wildfire near the coast",
         "a local football team winning the cup", "a bridge reopening after repairs", "unemployment figures",
         "a museum exhibition", "a power outage across the region", "new rules for electric scooters")),
    "support-ticket": (
        ("Support ticket #{n}\nSubject: {x}\n\nHello,\n", "Customer: Hi, {x}.\nAgent:",
         "Help desk request: {x}. Details:\n"),
        ("my order has not arrived", "I was charged twice", "the app crashes when I log in",
         "I cannot reset my password", "the item arrived damaged", "I want to cancel my subscription",
         "my internet connection keeps dropping", "the printer will not connect to wifi",
         "I need to change my delivery address", "the refund has not been processed", "my account was locked")),
    "social-post": (
        ("Just posted: {x}\n", "My thoughts on {x} (a thread)\n", "Forum post - Re: {x}\n"),
        ("my weekend trip to the mountains", "the new season of my favourite show", "learning to cook",
         "my first marathon", "working from home", "adopting a rescue dog", "the concert last night",
         "moving to a new city", "the traffic this morning", "my garden this spring", "a terrible haircut",
         "the best pizza in town", "starting a new job")),
    "instructions": (
        ("How to {x}\n\nStep 1:", "A beginner's guide: how to {x}.\n\n", "Instructions: {x}\n\nFirst,"),
        ("bake bread at home", "change a flat tyre", "set up a home network", "plant tomatoes",
         "write a cover letter", "clean a coffee machine", "paint a room", "back up your phone",
         "train a puppy", "make a budget", "tie a tie", "prepare for a job interview", "install a shelf")),
    "dialogue": (
        ("A conversation between two friends about {x}.\n\nA:", "Interview transcript about {x}.\n\nQ:",
         "Two coworkers talk about {x}.\n\nSam:"),
        ("a film they saw", "holiday plans", "a difficult exam", "the weather", "a new restaurant",
         "their families", "a football match", "buying a car", "a book they are reading", "moving house")),
}


def synthetic_prompts(n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` ``(domain, prompt)`` pairs, domains in turn, template and filler drawn with ``seed``."""
    rng = random.Random(seed)
    names = list(DOMAINS)
    out = []
    for i in range(n):
        d = names[i % len(names)]
        templates, fillers = DOMAINS[d]
        out.append((d, rng.choice(templates).format(x=rng.choice(fillers), n=rng.randint(1000, 99999))))
    return out


def read_corpus(path: str | Path) -> list[str]:
    """Sentences of a corpus folder or file: ``*.txt`` (one per line) and ``*.jsonl`` (``{"text"}``)."""
    path = Path(path)
    files = sorted(path.glob("*.txt")) + sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise TextAuditError(f"no corpus at {path}: give a folder of *.txt / *.jsonl files (audit mlm-corpus writes one)")
    out: dict[str, None] = {}
    for f in files:
        try:
            lines = f.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as e:
            raise TextAuditError(f"corpus file {f} is not UTF-8 text (byte {e.start}); convert it or remove it") from None
        for n, line in enumerate(lines, 1):
            if line.strip():
                out.setdefault(line.strip() if f.suffix != ".jsonl" else _jsonl_text(f, n, line))
    return list(out)


def _jsonl_text(f: Path, n: int, line: str) -> str:
    """The ``text`` of line ``n`` of a corpus ``.jsonl`` file, or a one-line error naming the line."""
    try:
        row = loads_json(line)
    except ValueError:
        raise TextAuditError(f"{f}, line {n}: not a JSON object; each line is {{\"text\": \"...\"}}") from None
    text = row.get("text") if isinstance(row, dict) else None
    if not isinstance(text, str):
        raise TextAuditError(f"{f}, line {n}: 'text' must be a string (got {type(text).__name__}); each line is "
                             "{\"text\": \"...\"}")
    return text


def _done_batches(path: Path) -> tuple[int, set[str]]:
    """(the next batch to sample, the sentences kept so far) of a synthetic-corpus file; a last line
    cut off when a run was killed is removed, so that appending starts on a line of its own."""
    last, seen = -1, set()
    if path.exists():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            with path.open("r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                r = loads_json(line)
            except ValueError:  # a line cut off when the run was killed
                continue
            else:
                last = max(last, r["batch"])
                seen.add(r["text"])
    return last + 1, seen


def generate_synthetic(out: str | Path, *, batches: int, batch_size: int = 32, seed: int = 0,
                       max_new_tokens: int = 96, temperature: float = 0.9, top_p: float = 0.95,
                       lm: str | None = None, device: str | None = None, show_progress: bool = True) -> dict:
    """Append sentences sampled from a causal LM (default SmolLM2-135M) to the JSONL file ``out``,
    batch ``b`` of ``batch_size`` prompts sampled with seed ``seed + b``, until ``batches`` batches
    are done (a re-run continues after the last finished batch). Each record: ``{"batch", "domain",
    "text"}``. Returns counts."""
    import torch

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    settings = {"batch_size": batch_size, "seed": seed, "max_new_tokens": max_new_tokens, "temperature": temperature,
                "top_p": top_p, "lm": lm or "smollm2"}
    sidecar = out.with_name(out.name + ".settings.json")
    if out.exists() and sidecar.is_file() and loads_json(sidecar.read_text(encoding="utf-8")) != settings:
        old = loads_json(sidecar.read_text(encoding="utf-8"))
        diff = ", ".join(f"{k} {old.get(k)} (now {v})" for k, v in settings.items() if old.get(k) != v)
        raise TextAuditError(f"{out} was sampled with {diff}; rerun with the same settings to extend it, "
                             "or write to another folder")
    sidecar.write_text(json.dumps(settings), encoding="utf-8")
    start, seen = _done_batches(out)
    stats = {"batches": batches, "resumed_at": start, "generated": 0, "kept": 0, "degenerate_or_short": 0,
             "duplicates": 0}
    if start >= batches:
        return stats
    model, tok, _ = load_lm(lm)
    dev = pick_device(device)
    model = model.to(dev).eval()
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    prompts = synthetic_prompts(batches * batch_size, seed)
    bar = progress(total=batches, initial=start, desc="sample corpus", unit="batch", enabled=show_progress)
    with out.open("a", encoding="utf-8") as f:
        for b in range(start, batches):
            chunk = prompts[b * batch_size:(b + 1) * batch_size]
            enc = tok([p for _, p in chunk], return_tensors="pt", padding=True).to(dev)
            torch.manual_seed(seed + b)
            with torch.inference_mode():
                gen = model.generate(**enc, do_sample=True, temperature=temperature, top_p=top_p,
                                     max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id)
            texts = tok.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            lines = []
            for (domain, _), text in zip(chunk, texts):
                stats["generated"] += 1
                parts = [s for line in text.splitlines() for s in sentences_of(line)]
                if parts and not re.search(r"[.!?][\"')]*$", parts[-1]):
                    parts = parts[:-1]  # cut off by max_new_tokens
                for s in parts:
                    s = re.sub(r"^(?:[A-Z][a-z]*|Q|A|Step \d+):\s+", "", s)  # speaker labels, "Step 2:"
                    c = clean_sentence(s)
                    if c is None:
                        stats["degenerate_or_short"] += 1
                    elif c in seen:
                        stats["duplicates"] += 1
                    else:
                        seen.add(c)
                        stats["kept"] += 1
                        lines.append(json.dumps({"batch": b, "domain": domain, "text": c}) + "\n")
            f.write("".join(lines))  # a batch at once: an interrupted run leaves whole batches
            f.flush()
            bar.update(1)
    bar.close()
    return stats
