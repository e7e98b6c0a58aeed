"""Everyday English for minilm-mlm (issue [8/9]): the corpus builders, ``train-mlm --corpus`` and
the quality mode ``--mlm MLM+LM``, on tiny models built here (a random Llama, a random DistilBERT)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors import safe_open
from test_llm import tiny_llama
from test_train_mlm import _args, corpus  # noqa: F401  (the tiny WordNet + SST-2 train fixture)

from textaudit.errors import TextAuditError
from textaudit.lm import CausalLM, load_lm
from textaudit.neighborhoods.corpus import (
    clean_sentence,
    debian_prose,
    degenerate,
    generate_synthetic,
    html_paragraphs,
    read_corpus,
    sentences_of,
)
from textaudit.neighborhoods.rerank import RerankedMaskedLM

PAGE = """<html><body><h1>Chapter 3</h1>
<p>The package manager keeps a list of every installed package. It checks their
dependencies before an upgrade!</p>
<div class="para">Backups should be tested regularly, since an untested backup is only a hope.</div>
<pre>apt-get install foo &amp;&amp; echo done. This is code, not prose.</pre>
<table><tr><td>A table cell is never taken as a sentence of prose here.</td></tr></table>
<ul><li>Run the command as root &amp; read its output carefully before you go on.</li></ul>
<p>See https://example.org for the full list of mirrors near you today.</p>
</body></html>"""

WORDS = "The It She My A the a film phone was is not very good bad and she it said to my new old battery works . . , !".split()


def test_prose_is_taken_from_paragraphs_never_code_and_tokenised_like_sst2():
    paras = html_paragraphs(PAGE)
    assert paras[0].startswith("The package manager") and "untested backup" in paras[1]
    assert not any("apt-get" in p or "table cell" in p for p in paras)
    assert sentences_of(paras[0]) == ["The package manager keeps a list of every installed package.",
                                      "It checks their dependencies before an upgrade!"]
    assert clean_sentence("It doesn't check their dependencies twice, sadly.") == \
        "it does n't check their dependencies twice , sadly ."
    assert clean_sentence("See https://example.org for the full list of mirrors near you.") is None  # a URL
    assert clean_sentence("Too short here.") is None
    assert clean_sentence("x = f(a_1) + g(b_2) holds for all values of the inputs") is None  # code, not prose
    assert degenerate("i love it it it so much".split())
    assert degenerate("the best the best the best the best phone ever".split())
    assert not degenerate("the best phone i have ever owned , by far".split())


def test_debian_prose_reads_the_english_html_of_an_unpacked_package(tmp_path):
    html = tmp_path / "maint-guide" / "usr/share/doc/maint-guide/html"
    html.mkdir(parents=True)
    (html / "start.en.html").write_text(PAGE)
    (html / "start.de.html").write_text("<p>Dieses Paket ist nicht englisch und wird nie gelesen, gar nicht.</p>")
    sents = debian_prose(["maint-guide"], workdir=tmp_path)["maint-guide"]
    assert sents == ["the package manager keeps a list of every installed package .",
                     "it checks their dependencies before an upgrade !",
                     "backups should be tested regularly , since an untested backup is only a hope .",
                     "run the command as root & read its output carefully before you go on ."]
    with pytest.raises(TextAuditError, match="unknown Debian source"):
        debian_prose(["no-such-doc"], workdir=tmp_path)


@pytest.fixture(scope="module")
def babbler(tmp_path_factory):
    """A tiny random Llama that samples sentences (capitals, full stops) and never stops early."""
    return tiny_llama(tmp_path_factory.mktemp("babbler"), words=WORDS, spread=0.05, stops=False)


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_synthetic_corpus_is_the_same_whether_resumed_or_not(babbler, tmp_path):
    opts = dict(batch_size=8, seed=3, max_new_tokens=80, lm=str(babbler), device="cpu", temperature=1.0, top_p=1.0)
    whole = tmp_path / "whole.jsonl"
    stats = generate_synthetic(whole, batches=4, **opts)
    recs = _records(whole)
    assert stats["generated"] == 32 and stats["kept"] == len(recs) > 0 and stats["degenerate_or_short"] > 0
    texts = [r["text"] for r in recs]
    assert len(set(texts)) == len(texts) and all(clean_sentence(t) == t for t in texts)
    assert {r["domain"] for r in recs} <= {"product-review", "news", "support-ticket", "social-post",
                                           "instructions", "dialogue"}
    part = tmp_path / "part.jsonl"
    generate_synthetic(part, batches=2, **opts)
    with part.open("a") as f:
        f.write('{"batch": 2, "domain": "news", "te')  # killed in the middle of a line
    again = generate_synthetic(part, batches=4, **opts)
    assert again["resumed_at"] == 2
    assert [r["text"] for r in _records_ok(part)] == texts
    assert generate_synthetic(part, batches=4, **opts)["generated"] == 0  # nothing left
    with pytest.raises(TextAuditError, match="was sampled with seed 3 \\(now 4\\)"):
        generate_synthetic(part, batches=5, **{**opts, "seed": 4})


def _records_ok(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def test_mlm_corpus_command_writes_sources_and_train_mlm_mixes_it_in(babbler, corpus, tmp_path, cli):  # noqa: F811
    folder = tmp_path / "everyday"
    r = cli("mlm-corpus", "--out", str(folder), "--no-debian", "--synthetic-batches", "3", "--batch-size", "8",
            "--lm", str(babbler), "--device", "cpu")
    assert r.exit_code == 0, r.output
    index = json.loads((folder / "sources.json").read_text())
    assert index["synthetic.jsonl"]["sentences"] == len(read_corpus(folder)) > 0
    assert "Apache-2.0" in index["synthetic.jsonl"]["licence"]
    r = cli("mlm-corpus", "--out", str(folder), "--no-debian")
    assert r.exit_code == 2 and r.stderr.strip() == "error: nothing to write: keep --debian or give --synthetic-batches N"

    (folder / "handmade.txt").write_text("".join(f"the {w} phone works well with my new battery today number {i}\n"
                                                 for i, w in enumerate(["old", "new", "good", "bad"] * 20)))
    out = tmp_path / "mlm.safetensors"
    r = cli("train-mlm", *_args(corpus, out, "--steps", "2", "--corpus", str(folder), "--corpus-share", "0.25"))
    assert r.exit_code == 0, r.output
    with safe_open(str(out), "pt") as f:
        info = json.loads(f.metadata()["info"])
    assert info["corpus"]["corpus_train"] > 0 and info["args"]["corpus_share"] == "0.25"
    assert any("Apache-2.0" in s for s in info["sources"])
    assert "corpus-dev" in info["history"][-1]
    from textaudit.neighborhoods.mlm import load_mlm  # the retrained artifact serves as --mlm FILE

    mine = load_mlm(str(out), device="cpu", quiet=True)
    assert mine.name == str(out) and len(mine.candidates([("the new [MASK] works well".split(), 2)], top=5)[0]) == 5
    for extra, message in ((["--corpus", str(folder)], "--corpus and --corpus-share go together"),
                           (["--corpus", str(folder), "--corpus-share", "0.5"], "must stay below 1"),
                           (["--corpus", str(tmp_path / "none"), "--corpus-share", "0.2"], "does not exist")):
        r = cli("train-mlm", *_args(corpus, tmp_path / "x.safetensors", "--steps", "2", *extra))
        assert r.exit_code == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_quality_mode_reranks_the_mlm_pool_by_sentence_likelihood(tiny_mlm, tmp_path):
    queries = [("the phone was very good .".split(), 4), ("my new battery works".split(), 1)]
    pools = tiny_mlm.candidates(queries, top=12)
    vocab = sorted({w for ws, _ in queries for w in ws} | {w for p in pools for w, _ in p})
    model, tok, _ = load_lm(str(tiny_llama(tmp_path, words=vocab)))  # knows every word it is asked about
    lm = CausalLM(model, tok, "tiny-llama", device="cpu")
    rr = RerankedMaskedLM(tiny_mlm, lm, pool=12, weight=0.5)
    got = rr.candidates(queries, top=5)
    for (words, pos), pool, cands in zip(queries, pools, got):
        expected = sorted(((w, lm.log_likelihood([" ".join(words[:pos] + [w] + words[pos + 1:])])[0] + 0.5 * logit)
                           for w, logit in pool), key=lambda c: -c[1])[:5]
        assert [w for w, _ in cands] == [w for w, _ in expected]
        assert [s for _, s in cands] == pytest.approx([s for _, s in expected], abs=1e-4)
    # λ = 0: the order is the causal LM's alone, and it differs from the masked LM's own order
    pure = RerankedMaskedLM(tiny_mlm, lm, pool=12, weight=0.0).candidates(queries[:1], top=12)[0]
    assert sorted(w for w, _ in pure) == sorted(w for w, _ in pools[0]) and [w for w, _ in pure] != [w for w, _ in pools[0]]
    assert rr.name == "tiny-distilbert+tiny-llama"
    # one top per query (#85: the engine merges κ and P asks): each answer is its own top's
    assert rr.tops_per_item and rr.candidates(queries, top=[5, 3]) == [got[0], got[1][:3]]


def test_quality_mode_by_name(babbler, capsys):
    from textaudit.neighborhoods.mlm import load_mlm

    mlm = load_mlm(f"minilm-mlm+{babbler}", device="cpu")
    assert isinstance(mlm, RerankedMaskedLM) and mlm.name == f"minilm-mlm+{babbler}"
    assert "re-ranked by" in capsys.readouterr().err
    assert len(mlm.candidates([("a deep and moving film .".split(), 3)], top=7)[0]) == 7
    with pytest.raises(TextAuditError, match="the quality mode is MLM\\+LM"):
        load_mlm("minilm-mlm+")


def test_the_real_world_held_out_set_masks_one_whole_word_per_sentence_in_four_domains():
    from transformers import AutoTokenizer

    from textaudit.resources import resolve

    rows = [json.loads(line) for line in
            (Path(__file__).parents[1] / "benchmarks/data/realworld_heldout.jsonl").read_text().splitlines()]
    domains = {}
    for r in rows:
        domains[r["domain"]] = domains.get(r["domain"], 0) + 1
    assert domains == {"product-reviews": 300, "news": 300, "social": 300, "instructions": 300}
    vocab = AutoTokenizer.from_pretrained(resolve("minilm")).get_vocab()
    for r in rows:
        words = r["text"].split()
        assert words[r["position"]] == r["target"] and r["target"].isalpha() and len(r["target"]) >= 3
        assert r["target"] in vocab and 8 <= len(words) <= 40
    assert len({r["text"] for r in rows}) == len(rows)
