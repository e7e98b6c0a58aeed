"""audit harden: a tiny real model with a planted weakness (``movie`` flips it negative: in its
training data every ``movie`` sentence is negative and every ``film`` one positive) is hardened,
and the before/after on held-out sentences — where film and movie occur regardless of the label —
shows the weakness gone; nothing held out is attacked or trained on."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from textaudit.results import read_jsonl

POS = ["great", "wonderful", "charming", "funny", "brilliant", "delightful", "moving", "lovely"]
NEG = ["dull", "boring", "awful", "tedious", "weak", "lame", "poor", "bland"]
TEMPLATES = ["the {n} is {a} .", "a {a} {n} with a strong cast .", "this {n} was {a} and long .",
             "i thought the {n} was {a} .", "what a {a} little {n} ."]
#: held-out sentences are built from other templates (so none of them is a training sentence by chance)
HELD_OUT = ["the {n} felt {a} to me .", "my friends found the {n} {a} .", "honestly , a {a} {n} ."]


def _rows(seed: int, planted: bool, n: int) -> list[tuple[int, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        y = i % 2
        noun = ("film" if y else "movie") if planted else rng.choice(["film", "movie"])
        out.append((y, rng.choice(TEMPLATES if planted else HELD_OUT).format(n=noun, a=rng.choice(POS if y else NEG))))
    return out


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """train.tsv (the planted shortcut), dev.tsv (held out; one of its sentences is also in train.tsv)
    and a zoo bow trained on train.tsv."""
    from textaudit.models.zoo.build import train_model

    root = tmp_path_factory.mktemp("planted")
    train, dev = _rows(0, True, 600), _rows(1, False, 40)
    train.append(dev[0])
    for name, rows in (("train.tsv", train), ("dev.tsv", dev)):
        (root / name).write_text("label\ttext\n" + "".join(f"{y}\t{t}\n" for y, t in rows))
    train_model("bow", data=str(root / "train.tsv"), out=root / "bow", epochs=8, progress=False,
                eval_data=str(root / "dev.tsv"))
    return root


def _args(root: Path, out: Path, *extra: str) -> list[str]:
    return ["harden", "--model", str(root / "bow"), "--data", str(root / "train.tsv"), "--eval-data",
            str(root / "dev.tsv"), "--mlm", "minilm-mlm", "--pair", "film,movie", "--out", str(out), *extra]


def test_consistency_removes_the_planted_flip_and_the_report_says_so(cli, planted, tmp_path):
    out = tmp_path / "h"
    args = _args(planted, out, "--method", "consistency", "--train-sample", "100", "--epochs", "5",
                 "--consistency-weight", "5", "--json")
    r = cli(*args)
    assert r.exit_code == 0, r.output
    # before anything is spent, what it will take here: the pairs' neighbours, the fine-tuning at the model's own
    # training pace (its checkpoint records it), the before/after audit (#67: harden gave no estimate)
    time_line = next(ln for ln in r.stderr.splitlines() if ln.startswith("time: about "))
    assert ("the natural neighbours of 100 training sentences" in time_line and "(at its own training pace)" in time_line
            and "the before/after audit of 40 held-out examples" in time_line), time_line
    assert r.stderr.index(time_line) < r.stderr.index("harden: building consistency pairs")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    # the headline: SO-Enum k=1 with p = (film, movie) finds a flipping neighbour of (almost) every
    # held-out sentence before, and of far fewer after; McNemar on the paired examples says it is no accident
    assert res["before"]["success_rate"] >= 0.9
    assert res["after"]["success_rate"] <= res["before"]["success_rate"] - 0.2
    assert res["mcnemar_p"] < 0.01
    assert res["after"]["accuracy"] >= res["before"]["accuracy"] - 0.1  # at most 4 of 40
    (b,) = res["bias"]
    assert b["pair"] == ["film", "movie"] and abs(b["before"]["B"]) > 0.2
    assert abs(b["after"]["B"]) < abs(b["before"]["B"]) / 3 and b["interval_excludes_before"] and b["abs_B_lower"]
    lo, hi = b["after"]["ci95"]
    assert lo <= b["after"]["B"] <= hi
    # held out: the dev sentence planted in train.tsv was left out of training; dev was never attacked for training
    assert res["held_out"] == {"eval_examples": 40, "train_examples": 600, "train_overlap_removed": 1,
                               "attacked_for_training": 0}
    # the hardened model is a checkpoint every command takes
    assert res["model"] == str(out / "model")
    a = cli("attack", "--model", res["model"], "--data", str(planted / "dev.tsv"), "--limit", "2", "--k", "1",
            "--mlm", "minilm-mlm", "--no-ppl", "--json")
    assert a.exit_code == 0, a.output
    # the report renders the before/after from the folder
    rep = cli("report", str(out), "--out", str(tmp_path / "r.md"))
    assert rep.exit_code == 0, rep.output
    md = (tmp_path / "r.md").read_text()
    assert "Hardening: " in md and "consistency" in md and "film→movie" in md
    row = next(line for line in md.splitlines() if line.startswith("| so-enum k=1: success rate"))
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    assert float(cells[1]) == pytest.approx(res["before"]["success_rate"], abs=5e-4)
    assert float(cells[3]) == pytest.approx(res["after"]["success_rate"], abs=5e-4)
    assert float(cells[5]) == pytest.approx(res["mcnemar_p"], rel=1e-3)
    html = cli("report", str(out), "--out", str(tmp_path / "r.html"))
    assert html.exit_code == 0 and "data:image/png;base64" in (tmp_path / "r.html").read_text()
    # the folder into pandas: every held-out attack record, before and after; the summary is harden.json's
    from textaudit.results import load

    for path in (out, out / "harden.json"):
        loaded = load(path)
        df = loaded.to_pandas()
        assert df.attrs["command"] == "harden" and df.attrs["config"]["method"] == "consistency"
        assert sorted(set(df["role"])) == ["after", "before"] and set(df["attack"]) == {"so-enum k=1"}
        for role in ("before", "after"):
            side = df[df["role"] == role]
            assert list(side["id"]) == [x["id"] for x in read_jsonl(out / f"{role}.so-enum-k1.jsonl")]
            attacked = side[side["status"].isin(["success", "failed"])]
            assert (attacked["status"] == "success").mean() == pytest.approx(res[role]["success_rate"], abs=1e-4)
        assert loaded.summary()["mcnemar_p"] == res["mcnemar_p"] and loaded.summary()["model"] == res["model"]
        assert "hardened model" in loaded._repr_html_() and "<script" not in loaded._repr_html_()
    # a rerun resumes: nothing is trained again and the numbers are the same
    again = cli(*args)
    assert again.exit_code == 0, again.output
    assert "already trained" in again.stderr
    assert json.loads(again.stdout.strip().splitlines()[-1])["after"] == res["after"]
    # the same folder with other settings is refused in one line
    other = cli(*_args(planted, out, "--method", "consistency", "--epochs", "1"))
    assert other.exit_code == 2 and "other settings" in other.output and "epochs" in other.output


def test_augment_trains_on_what_it_found_in_the_training_split_only(planted, tmp_path):
    from textaudit.harden import HardenRequest, harden
    from textaudit.models import load_classifier

    dev_texts = {line.split("\t", 1)[1].strip() for line in (planted / "dev.tsv").read_text().splitlines()[1:]}
    train_lines = (planted / "train.tsv").read_text().splitlines()[1:]
    s = HardenRequest(model=str(planted / "bow"), method="augment", out=tmp_path / "h", k=1,
                      data=str(planted / "train.tsv"), train_sample=120, epochs=3, found_weight=10, pair="film,movie",
                      eval_data=str(planted / "dev.tsv"), mlm="minilm-mlm",
                      naturalness="off")  # the paper's search: a flaw planted on film/movie whatever reads naturally
    res = harden(s, tmp_path / "h", progress=False)
    found = read_jsonl(tmp_path / "h" / "found.jsonl")
    assert len(found) == 120 == res["held_out"]["attacked_for_training"]
    again = harden(s, tmp_path / "h", progress=False)  # a rerun evaluates the saved model and says the same
    assert again["held_out"] == res["held_out"] and again["after"] == res["after"]
    for r in found:  # training examples only, never a held-out one (the planted duplicate included)
        assert r["id"].startswith("train.tsv:") and r["text"] not in dev_texts
        assert f"{r['label']}\t{r['text']}" in train_lines
    wins = [r for r in found if r["status"] == "success"]
    assert len(wins) >= 60 and all({r["pair"][0], r["pair"][1]} == {"film", "movie"} for r in wins)
    # what it trained on: x̃ and x̃ ⊕ p with the gold label, so the model learns that the swap changes nothing
    info = json.loads((tmp_path / "h" / "model" / "textaudit.json").read_text())
    assert info["hardened"]["found"] == 2 * len(wins) and info["hardened"]["method"] == "augment"
    assert "dev_accuracy" not in info
    (b,) = res["bias"]
    assert abs(b["after"]["B"]) < abs(b["before"]["B"]) / 2 and b["interval_excludes_before"]
    assert res["after"]["success_rate"] <= res["before"]["success_rate"] - 0.2 and res["mcnemar_p"] < 0.01
    after = load_classifier(str(tmp_path / "h" / "model"))
    p = after.predict_proba(["the movie is great .", "the film is great ."])
    before = load_classifier(str(planted / "bow")).predict_proba(["the movie is great .", "the film is great ."])
    assert abs(p[0, 1] - p[1, 1]) < abs(before[0, 1] - before[1, 1])


def test_adversarial_attacks_each_round_with_the_model_of_the_round_before(planted, tmp_path):
    from textaudit.harden import HardenRequest, harden
    from textaudit.results import read_header

    s = HardenRequest(model=str(planted / "bow"), method="adversarial", out=tmp_path / "h", k=1,
                      data=str(planted / "train.tsv"), train_sample=80, rounds=2, found_weight=10, pair="film,movie",
                      eval_data=str(planted / "dev.tsv"), mlm="minilm-mlm")
    res = harden(s, tmp_path / "h", progress=False)
    assert res["found_files"] == ["found.round1.jsonl", "found.round2.jsonl"]
    r1, r2 = (read_jsonl(tmp_path / "h" / f) for f in res["found_files"])
    assert len(r1) == len(r2) == 40 and not {r["id"] for r in r1} & {r["id"] for r in r2}  # a fresh sample
    assert read_header(tmp_path / "h" / "found.round1.jsonl")["config"]["model"] == str(planted / "bow")
    assert read_header(tmp_path / "h" / "found.round2.jsonl")["config"]["model"].endswith("+adversarial@round1")
    # what both rounds found, trained in: the planted swap moves the held-out predictions far less
    (b,) = res["bias"]
    assert abs(b["after"]["B"]) < abs(b["before"]["B"]) / 2 and b["interval_excludes_before"]
    assert not list((tmp_path / "h").glob(".round*.pt"))  # intermediate weights are removed once saved


@pytest.mark.parametrize("args, message", [
    (["--model", "x.py:clf"], "whose weights textaudit cannot train"),
    (["--model", "http://127.0.0.1:9/v1/completions"], "whose weights textaudit cannot train"),
    (["--model", "llm:smollm2"], "whose weights textaudit cannot train"),
    (["--method", "magic"], "--method must be augment or adversarial or consistency or masked or substitute (got 'magic')"),
    (["--eval-data", "sst2:train"], "is the training split"),
    (["--eval-attack", "so-enum:x"], "k must be a whole number"),
    (["--eval-attack", "genetic:2"], "genetic has no k"),
    (["--eval-attack", "so-enum:5"], "k <= 2"),
    (["--pair", "he,she", "--group", "gender"], "--pair or --group"),
    (["--lora"], "--lora fine-tunes adapters of hf: models"),
    (["--attack", "nope"], "unknown attack method 'nope'"),
    (["--attack", "so-enum", "--k", "3"], "k <= 2"),
    (["--eval-attack", ","], "needs at least one method"),
    (["--eval-attack", "so-enum:1,so-enum:1"], "names so-enum:1 twice"),
    (["--eval-attack", "magic:1"], "unknown attack method 'magic'"),
    (["--pair", "he"], "he"),
    (["--group", "martians"], "unknown group 'martians'"),
    (["--model", "/no/such/dir"], "unknown model '/no/such/dir'"),
    (["--train-sample", "0"], "--train-sample"),
    (["--found-weight", "0"], "--found-weight"),
    # #53: every number within what a run can do, checked before anything loads
    (["--found-weight", "1000000000"], "Invalid value for '--found-weight': Input should be less than or equal to 1000"),
    (["--consistency-weight", "inf"], "--consistency-weight (λ) must be a number from 0 to 10,000"),
    (["--consistency-weight", "1e30"], "--consistency-weight (λ) must be a number from 0 to 10,000"),
    (["--consistency-weight", "nan"], "Invalid value for '--consistency-weight'"),
    (["--lr", "nan"], "Invalid value for '--lr'"),
    (["--lr", "0"], "--lr must be a learning rate above 0"),
    (["--lr", "5"], "--lr must be a learning rate above 0"),
    (["--epochs", "100000"], "Invalid value for '--epochs': Input should be less than or equal to 1000"),
    (["--rounds", "1000"], "Invalid value for '--rounds': Input should be less than or equal to 100"),
    (["--neighbors", "100000"], "Invalid value for '--neighbors': Input should be less than or equal to 1000"),
    (["--train-sample", "1000000000"], "Invalid value for '--train-sample': Input should be less than or equal to 10000000"),
    (["--pairs-per-sentence", "5000"], "Invalid value for '--pairs-per-sentence': Input should be less than or equal to 1000"),
    (["--eval-data", "sst2:train", "--data", "sst2"], "is the training split"),
    (["--pair", "he,she", "--group", "gender"], "give --pair or --group, not both"),
])
def test_what_harden_cannot_do_is_one_line_before_anything_loads(cli, tmp_path, args, message):
    """Each is a bad input that must cost nothing: exit 2, one line, no folder, no model trained."""
    base = {"--model": "cnn", "--method": "augment", "--out": str(tmp_path / "o")}
    flat = dict(zip(args[::2], args[1::2])) if len(args) % 2 == 0 else {}
    argv = ["harden"] + [x for k, v in {**base, **flat}.items() for x in (k, v)]
    if args == ["--lora"]:
        argv = ["harden", *[x for k, v in base.items() for x in (k, v)], "--lora"]
    r = cli(*argv)
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output
    assert not (tmp_path / "o").exists()  # nothing was written, no model was trained


@pytest.mark.parametrize("lora", [False, True])
def test_an_hf_classifier_is_fine_tuned_and_saved_where_hf_loads_it(tmp_path, lora):
    """A tiny real BERT classifier (built here over the shipped MiniLM vocabulary): hardened with
    the consistency loss (whole, or LoRA adapters merged back), saved as a HuggingFace folder that
    --model and hf: take."""
    if lora:
        pytest.importorskip("peft", reason="--lora needs the lora extra (pip install 'textaudit[lora]')")
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    from textaudit.harden import HardenRequest, harden
    from textaudit.models import load_classifier
    from textaudit.resources import resolve

    tok = BertTokenizerFast.from_pretrained(resolve("minilm"))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, num_labels=2, id2label={0: "negative", 1: "positive"},
                     label2id={"negative": 0, "positive": 1})
    src = tmp_path / "tiny-bert"
    BertForSequenceClassification(cfg).save_pretrained(src)
    tok.save_pretrained(src)
    data = tmp_path / "train.tsv"
    rows = _rows(0, True, 120)
    data.write_text("label\ttext\n" + "".join(f"{'positive' if y else 'negative'}\t{t}\n" for y, t in rows))
    dev = tmp_path / "dev.tsv"
    dev.write_text("label\ttext\n" + "".join(f"{'positive' if y else 'negative'}\t{t}\n" for y, t in _rows(1, False, 8)))
    s = HardenRequest(model=f"hf:{src}", method="consistency", out=tmp_path / "h", data=str(data), train_sample=20,
                      neighbors=0, epochs=1, pair="film,movie", eval_data=str(dev), eval_limit=8,
                      eval_attack="so-enum:1", mlm="minilm-mlm", lora=lora, lr=1e-2 if lora else None)
    res = harden(s, tmp_path / "h", progress=False)
    saved = tmp_path / "h" / "model"
    if lora:  # the adapters were merged: a plain BERT classifier, no peft needed to load it
        assert not (saved / "adapter_config.json").exists()
        assert "lora" not in (saved / "model.safetensors").read_bytes()[:4096].decode("latin-1")
    assert (saved / "config.json").is_file() and (saved / "textaudit-harden.json").is_file()
    assert json.loads((saved / "textaudit-harden.json").read_text())["method"] == "consistency"
    after = load_classifier(str(saved))
    assert after.labels == ["negative", "positive"]
    texts = ["the film is great .", "a dull movie ."]
    assert not torch.allclose(torch.tensor(after.predict_proba(texts)),
                              torch.tensor(load_classifier(f"hf:{src}").predict_proba(texts)))
    assert load_classifier(f"hf:{saved}").predict_proba(texts).shape == (2, 2)
    assert res["accuracy"]["before"]["n"] == 8 and res["bias"][0]["pair"] == ["film", "movie"]


def test_a_folder_harden_did_not_write_is_never_written_into(cli, tmp_path):
    base = ["harden", "--model", "cnn", "--method", "augment"]
    (tmp_path / "file").write_text("x")
    r = cli(*base, "--out", str(tmp_path / "file"))
    assert r.exit_code == 2 and "is a file" in r.output
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    r = cli(*base, "--out", str(tmp_path / "mine"))
    assert r.exit_code == 2 and "not a harden run" in r.output
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "settings.json").write_text("{not json")
    r = cli(*base, "--out", str(tmp_path / "bad"))
    assert r.exit_code == 2 and "is damaged" in r.output


@pytest.mark.parametrize("content, message", [
    ("{", "is not a readable harden summary"),
    ('{"header": {"command": "attack"}}', "is not an audit harden summary"),
    ('{"header": {"command": "harden"}}', "is not an audit harden summary"),
])
def test_report_refuses_a_damaged_harden_summary_in_one_line(cli, tmp_path, content, message):
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "harden.json").write_text(content)
    r = cli("report", str(tmp_path / "h"), "--out", str(tmp_path / "r.md"))
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output


_SIDE = {"attack": "so-enum", "success_rate": 0.5, "success_rate_ci95": [0.2, 0.8], "accuracy": 0.8}
_ATTACK = {"method": "so-enum", "k": 1, "before": {"success_rate": 0.5, "ci95": [0.2, 0.8], "mean_l0": 1.0},
           "after": {"success_rate": 0.2, "ci95": [0.1, 0.5], "mean_l0": 1.0}, "mcnemar": {"p": 0.5}}
_SUMMARY = {"header": {"command": "harden", "config": {}}, "from": "cnn", "method": "augment", "model": "h/model",
            "data": "sst2:train", "eval_data": "sst2:dev", "held_out": {"eval_examples": 10},
            "before": _SIDE, "after": _SIDE, "bias": [], "cost": {},
            "accuracy": {"before": {"rate": 0.8, "ci95": [0.5, 0.9]}, "after": {"rate": 0.8, "ci95": [0.5, 0.9]},
                         "mcnemar": {"p": 1.0}}}


@pytest.mark.parametrize("change, message", [
    ({"attacks": {"method": "so-enum"}}, "is not a list"),
    ({"attacks": [{"k": 1}]}, "without its method"),
    ({"attacks": [{**_ATTACK, "files": ["before.jsonl"]}]}, "does not name its before and after files"),
    ({"attacks": [{**_ATTACK, "files": ["../outside.jsonl", "after.jsonl"]}]}, "does not name its before"),
    ({"attacks": [{**_ATTACK, "files": ["before.jsonl", "missing.jsonl"]}]}, "does not exist"),
    ({"attacks": [], "before": {"attack": "so-enum"}}, "'before' lacks the headline"),
    ({"attacks": [{**_ATTACK, "before": None, "files": ["before.jsonl", "before.jsonl"]}]}, "is damaged: TypeError"),
    ({"attacks": [], "header": {"command": "harden", "config": "x"}}, "'config' is not an object"),
    ({"attacks": [], "header": "harden"}, "is not an audit harden summary"),
    ({"attacks": [], "from": None}, "'from' is not a string"),
    ({"attacks": [], "held_out": {}}, "'held_out' does not count"),
])
def test_a_damaged_harden_folder_is_one_line_for_load_and_for_report(cli, tmp_path, change, message):
    """``results.load`` and ``audit report`` read a harden summary through one check: every field
    they read is there and of its type, and its file names stay in the folder."""
    from textaudit.errors import TextAuditError
    from textaudit.results import load

    (tmp_path / "outside.jsonl").write_text('{"header": {"command": "attack", "config": {}}}\n')
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "before.jsonl").write_text('{"header": {"command": "attack", "config": {}}}\n')
    (tmp_path / "h" / "harden.json").write_text(json.dumps({**_SUMMARY, **change}))
    with pytest.raises(TextAuditError, match=message) as e:
        load(tmp_path / "h")
    assert "\n" not in str(e.value)
    if message != "does not exist":  # the report does not read the attack files
        r = cli("report", str(tmp_path / "h"), "--out", str(tmp_path / "r.md"))
        assert r.exit_code == 2 and message.split(":")[0] in r.output and "Traceback" not in r.output
        assert not (tmp_path / "r.md").exists()


def test_a_sound_minimal_harden_summary_loads(cli, tmp_path):
    """The check refuses only what is damaged: the same summary, sound, loads (the two files exist)
    and renders."""
    from textaudit.results import load

    (tmp_path / "h").mkdir()
    for name in ("before.jsonl", "after.jsonl"):
        (tmp_path / "h" / name).write_text('{"header": {"command": "attack", "config": {}}}\n')
    (tmp_path / "h" / "harden.json").write_text(json.dumps({**_SUMMARY, "attacks": [
        {**_ATTACK, "files": ["before.jsonl", "after.jsonl"]}]}))
    r = load(tmp_path / "h")
    assert set(r.cells) == {("before", "so-enum k=1"), ("after", "so-enum k=1")}
    assert r.summary()["before"] == _SIDE and r.to_pandas().empty
    for out in ("r.md", "r.html"):
        rep = cli("report", str(tmp_path / "h"), "--out", str(tmp_path / out))
        assert rep.exit_code == 0, rep.output
    assert "| so-enum k=1: success rate | 0.5 |" in (tmp_path / "r.md").read_text()


@pytest.mark.parametrize("case, message", [
    ("link", "is a link or leads out of"),
    ("truncated", "disagrees with"),
    ("missing", "does not exist"),
])
def test_a_harden_folder_whose_files_are_not_its_own_or_disagree_is_refused_by_load_and_report(cli, tmp_path, case,
                                                                                                message):
    """#53: a before-file that is a link to another run's file, one cut short of what the summary counted,
    or one missing: load and audit report read the folder through one reader and refuse it alike."""
    from textaudit.errors import TextAuditError
    from textaudit.results import load

    header = '{"header": {"command": "attack", "config": {}}}\n'
    rec = '{"id": "%s", "status": "%s", "seconds": 0.1, "queries": 3, "l0": 1}\n'
    (tmp_path / "h").mkdir()
    (tmp_path / "other.jsonl").write_text(header + rec % ("0", "success") + rec % ("1", "failed"))
    (tmp_path / "h" / "before.jsonl").write_text(header + rec % ("0", "success") + rec % ("1", "failed"))
    (tmp_path / "h" / "after.jsonl").write_text(header + rec % ("0", "failed") + rec % ("1", "failed"))
    attack = {**_ATTACK, "before": {**_ATTACK["before"], "attacked": 2, "success": 1},
              "after": {**_ATTACK["after"], "attacked": 2, "success": 0}, "files": ["before.jsonl", "after.jsonl"]}
    (tmp_path / "h" / "harden.json").write_text(json.dumps({**_SUMMARY, "attacks": [attack]}))
    assert load(tmp_path / "h").summary()["before"] == _SIDE  # sound as written
    before = tmp_path / "h" / "before.jsonl"
    if case == "link":
        before.unlink()
        before.symlink_to(tmp_path / "other.jsonl")
    elif case == "truncated":
        before.write_text(header + rec % ("0", "success"))
    else:
        before.unlink()
    with pytest.raises(TextAuditError, match=message) as e:
        load(tmp_path / "h")
    assert "\n" not in str(e.value)
    r = cli("report", str(tmp_path / "h"), "--out", str(tmp_path / "r.md"))
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
    assert not (tmp_path / "r.md").exists()


def test_the_consistency_batches_depend_on_the_step_not_on_the_run(planted):
    """A training run killed and resumed draws the same pair batches as one that was not: the draw
    is seeded by the step. Both texts of a pair go through the model in one forward."""
    import torch

    from textaudit.harden.losses import consistency_objective
    from textaudit.models.zoo.checkpoint import load_module

    module, tok, _ = load_module(planted / "bow")
    seen: list[list[list[int]]] = []

    class Recording(torch.nn.Module):
        def forward(self, **enc):
            seen.append(enc["input_ids"].tolist())
            return module(**enc)

    pairs = [(f"the film is {a} .", f"the movie is {a} .") for a in POS + NEG]
    batch = {k: v for k, v in dict(tok(["the film is dull ."])).items()}
    y = torch.tensor([0])
    loss = {}
    for run in ("first", "resumed"):
        objective = consistency_objective(pairs, tok, weight=1.0, batch_size=4, seed=3, device="cpu")
        loss[run] = float(objective(Recording(), batch, y, 0.25).detach())
    assert len(seen) == 4 and seen[1] == seen[3] and len(seen[1]) == 8  # one forward of 4 pairs, the same draw
    assert loss["first"] == pytest.approx(loss["resumed"]) and loss["first"] > float(
        torch.nn.functional.cross_entropy(module(**batch), y).detach())  # the swap moves this model: KL > 0
    consistency_objective(pairs, tok, weight=1.0, batch_size=4, seed=3, device="cpu")(Recording(), batch, y, 0.5)
    assert seen[5] != seen[1]  # another step, another draw


def test_a_detokenised_copy_of_a_held_out_sentence_is_not_trained_on():
    """#53: the leakage check compared texts up to case and white space only, so "manner." stayed in
    training beside the held-out "manner ."; texts are now compared as the models read them."""
    from textaudit.harden.run import not_held_out

    held = ["it 's a charming and often affecting journey .", "the film does n't work in any manner .",
            "unflinchingly bleak and desperate"]
    train = ["It's a charming and often affecting journey.", "The film doesn't work in any manner.",
             "UNFLINCHINGLY   bleak and desperate", "a different sentence about a film .", "it 's charming ."]
    assert not_held_out(train, held) == [3, 4]


def test_a_before_after_b_on_few_sources_carries_the_small_sample_warning_everywhere(cli, planted, tmp_path):
    """#53: a before/after B from a handful of source sentences had tight-looking intervals and no word; the
    summary, the CLI and the report now give audit bias's small-sample warning."""
    out = tmp_path / "h"
    r = cli(*_args(planted, out, "--method", "augment", "--train-sample", "4", "--epochs", "1", "--eval-limit", "6",
                   "--max-queries", "1", "--json"))
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    small = [w for w in summary["warnings"]
             if "rests on 6 source sentences: its interval is rough and no claim is made (a claim needs 10)" in w]
    assert len(small) == 1 and small[0] in r.stderr
    rep = cli("report", str(out), "--out", str(tmp_path / "r.md"))
    assert rep.exit_code == 0 and small[0] in (tmp_path / "r.md").read_text()
    # #53: the hardened model's record of its training damaged ("hardened" not a table): one line saying to
    # rerun harden (not "retrain with audit train"), not a traceback
    cfg = out / "model" / ("textaudit-harden.json" if (out / "model" / "textaudit-harden.json").is_file() else "textaudit.json")
    content = json.loads(cfg.read_text())
    cfg.write_text(json.dumps({**content, "hardened": "x"} if cfg.name == "textaudit.json" else []))
    r = cli(*_args(planted, out, "--method", "augment", "--train-sample", "4", "--epochs", "1", "--eval-limit", "6",
                   "--max-queries", "1"))
    assert r.exit_code == 2 and "is damaged" in r.output and "rerun the same audit harden" in r.output, r.output
    assert "Traceback" not in r.output and "audit train" not in r.output
    # the record restored, the checkpoint's own config damaged instead: its loader would say "audit train"
    cfg.write_text(json.dumps({**content, "arch": None, "num_classes": None}))
    r = cli(*_args(planted, out, "--method", "augment", "--train-sample", "4", "--epochs", "1", "--eval-limit", "6",
                   "--max-queries", "1"))
    assert r.exit_code == 2 and "rerun the same audit harden" in r.output and "audit train" not in r.output, r.output


def test_nothing_found_to_harden_is_said():
    """#53: when the mining attack found no weakness, the summary says the "hardened" model is the original
    fine-tuned on its training data alone (it was reported as hardened with no word)."""
    from textaudit.harden.run import HardenRequest, _warnings

    failed = [{"id": str(i), "status": "failed", "text": "a film", "label": 1} for i in range(5)]
    found = failed[:4] + [{"id": "4", "status": "success", "text": "a film", "label": 1, "vulnerable": "a movie",
                           "vulnerable_patched": "a film", "pair": ["film", "movie"], "patch_position": 1}]
    for method in ("augment", "adversarial"):
        said = _warnings(HardenRequest(model="cnn", method=method, out=Path("h")), failed, [])
        assert len(said) == 1 and "found no weakness in the 5 training examples" in said[0]
        assert _warnings(HardenRequest(model="cnn", method=method, out=Path("h")), found, []) == []
    assert _warnings(HardenRequest(model="cnn", method="consistency", out=Path("h")), failed, []) == []


def test_a_second_harden_on_a_folder_in_use_names_out(cli, tmp_path):
    """#53: two hardens on one folder: the second is one line naming --out (the lock error said --output,
    an option harden does not have), before anything loads."""
    import subprocess
    import sys

    out = tmp_path / "h"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom textaudit.files import file_lock\n"
                               f"lock = file_lock({str(out)!r})\nlock.acquire()\nprint('held', flush=True)\ntime.sleep(120)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = cli("harden", "--model", "cnn", "--method", "augment", "--out", str(out))
    finally:
        holder.kill()
        holder.wait()
    assert r.exit_code == 2 and "--out" in r.output and "another audit harden" in r.output and "--output" not in r.output
    assert not out.exists()


@pytest.mark.parametrize("content", ["[]", "null", "3", '"augment"'])
def test_settings_that_are_not_a_table_are_a_damaged_folder(cli, tmp_path, content):
    """#53: a settings.json that is valid JSON but not an object ([] or null) was a TypeError traceback."""
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "settings.json").write_text(content)
    r = cli("harden", "--model", "cnn", "--method", "augment", "--out", str(tmp_path / "h"))
    assert r.exit_code == 2 and "settings.json is damaged" in r.output and "Traceback" not in r.output
    assert sorted(p.name for p in (tmp_path / "h").iterdir()) == ["settings.json"]


@pytest.mark.parametrize("which", ["--data", "--eval-data"])
def test_a_label_the_model_has_no_class_for_is_refused_before_anything_trains(cli, planted, tmp_path, which):
    """#53: a training label outside the model's classes was an IndexError after mining; a bad held-out
    label was caught only after the whole training. Both are one line now, before mining, and no folder."""
    name = "train.tsv" if which == "--data" else "dev.tsv"
    rows = (planted / name).read_text().splitlines()
    rows[3] = "5\t" + rows[3].split("\t", 1)[1]
    bad = tmp_path / f"bad-{name}"
    bad.write_text("\n".join(rows) + "\n")
    args = _args(planted, tmp_path / "h", "--method", "augment")
    args[args.index(which) + 1] = str(bad)
    r = cli(*args)
    assert r.exit_code == 2 and f"{which} {bad}" in r.output and "has label 5" in r.output, r.output
    assert "Traceback" not in r.output and not (tmp_path / "h").exists()


def test_two_files_of_one_name_are_not_the_training_split(tmp_path):
    """#53: --data a/dev.tsv and --eval-data b/dev.tsv (different files, one name) were refused as "the training
    split"; the same file under two names still is."""
    from textaudit.errors import TextAuditError
    from textaudit.harden.run import HardenRequest

    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "dev.tsv").write_text(f"label\ttext\n1\ta {d} film .\n")
    HardenRequest(model="cnn", method="augment", out=tmp_path / "h", data=str(tmp_path / "a" / "dev.tsv"),
                   eval_data=str(tmp_path / "b" / "dev.tsv")).check()
    (tmp_path / "same.tsv").symlink_to(tmp_path / "a" / "dev.tsv")
    with pytest.raises(TextAuditError, match="is the training split"):
        HardenRequest(model="cnn", method="augment", out=tmp_path / "h", data=str(tmp_path / "a" / "dev.tsv"),
                       eval_data=str(tmp_path / "same.tsv")).check()


def test_a_round_checkpoint_that_is_not_plain_weights_is_refused_in_one_line(tmp_path):
    """#53: a round's .pt holding more than tensors (or cut short) was a weights_only traceback; it is one line
    that says nothing in it ran."""
    import collections
    from types import SimpleNamespace

    import torch

    from textaudit.errors import TextAuditError
    from textaudit.harden.run import _load_weights, _save_weights

    t = SimpleNamespace(module=torch.nn.Linear(3, 2))
    good = tmp_path / ".round1.pt"
    _save_weights(t, good)
    other = SimpleNamespace(module=torch.nn.Linear(3, 2))
    _load_weights(other, good)
    assert torch.equal(other.module.weight, t.module.weight)
    torch.save({"weight": collections.Counter("abc")}, tmp_path / "pickled.pt")  # not a tensor: refused unread
    (tmp_path / "cut.pt").write_bytes(good.read_bytes()[:100])
    data = bytearray(good.read_bytes())  # one flipped bit in a weight: torch loads it; the checksum does not agree
    at = data.find(t.module.weight.detach()[0, 0].numpy().tobytes())
    data[at + 1] ^= 0x20
    (tmp_path / "flipped.pt").write_bytes(bytes(data))
    torch.save(t.module.state_dict(), tmp_path / "bare.pt")  # weights with no checksum: not what a round writes
    for name in ("pickled.pt", "cut.pt", "flipped.pt", "bare.pt"):
        with pytest.raises(TextAuditError, match="is not a round's plain weights") as e:
            _load_weights(other, tmp_path / name)
        assert "\n" not in str(e.value) and "rerun the same audit harden" in str(e.value)


def test_a_full_disk_while_saving_a_round_is_one_line_and_leaves_no_half_file(tmp_path):
    """#53: torch.save on a full disk was an OSError traceback; on a real 64 KiB tmpfs it is one line, and the
    atomic write leaves no partial checkpoint behind."""
    import subprocess
    from types import SimpleNamespace

    import torch

    from textaudit.errors import TextAuditError
    from textaudit.harden.run import _save_weights

    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        t = SimpleNamespace(module=torch.nn.Linear(200, 200))  # 160 KB of weights
        with pytest.raises(TextAuditError, match="is the disk full") as e:
            _save_weights(t, disk / ".round1.pt")
        assert "\n" not in str(e.value) and "rerun the same audit harden" in str(e.value)
        assert not (disk / ".round1.pt").exists()
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)  # lazy: torch may still hold the failed file


def test_a_pair_no_held_out_sentence_holds_is_refused_before_training_and_the_folder_stays_free(cli, planted, tmp_path):
    """#53: a --pair whose words no held-out sentence holds failed only after the whole training, and the
    fix it suggested was then refused on the same --out (its settings were written); now it is one line
    before anything is written, so the same --out takes the corrected run."""
    args = _args(planted, tmp_path / "h", "--method", "augment")
    args[args.index("--pair") + 1] = "he,she"
    r = cli(*args)
    assert r.exit_code == 2 and "no held-out sentence" in r.output and "he/she" in r.output, r.output
    assert "Traceback" not in r.output and not (tmp_path / "h").exists()


def test_training_rows_that_are_all_too_short_are_named_as_such(cli, planted, tmp_path):
    """#53: a training file whose rows were all shorter than harden attacks was refused as "an empty dataset"."""
    (tmp_path / "short.tsv").write_text("label\ttext\n" + "".join(f"{i % 2}\tgood film\n" for i in range(10)))
    args = _args(planted, tmp_path / "h", "--method", "augment")
    args[args.index("--data") + 1] = str(tmp_path / "short.tsv")
    r = cli(*args)
    assert r.exit_code == 2 and "none of its 10 training examples has 4 words or more" in r.output, r.output
    assert "empty dataset" not in r.output and not (tmp_path / "h").exists()


@pytest.mark.parametrize("damage, says", [
    ("cut mid-record", None),  # a kill while writing: the example is mined again, the rest kept
    ("invalid line", "found.jsonl:6 is not valid JSON"),
    ("edited text", "holds the text"),  # valid JSON, another text for its id: never counted as found
    ("another model's header", "was written with other settings (model: cnn"),
])
def test_a_damaged_found_file_is_resumed_or_refused_in_one_line(cli, planted, tmp_path, damage, says):
    """#53: the mined weaknesses (found.jsonl) of a harden killed before training, damaged four ways, then
    the same audit harden rerun: a cut last line is mined again (the found examples equal an undamaged
    run's); a damaged line, an edited record and another run's header are one line naming the file, and
    nothing is trained."""
    args = _args(planted, tmp_path / "h", "--method", "augment", "--train-sample", "20", "--epochs", "1",
                 "--eval-limit", "10")
    assert cli(*args).exit_code == 0
    whole = (tmp_path / "h" / "found.jsonl").read_text()
    out = tmp_path / "d"
    out.mkdir()
    (out / "settings.json").write_text((tmp_path / "h" / "settings.json").read_text())
    lines = whole.splitlines()
    if damage == "cut mid-record":
        text = whole[: len(whole) - len(lines[-1]) // 2 - 1]
    elif damage == "invalid line":
        text = "\n".join(lines[:5] + [lines[5][:-20]] + lines[6:]) + "\n"
    elif damage == "edited text":
        rec = json.loads(lines[3])
        rec["text"] = rec["text"].replace(" ", "  ", 1) + " x"
        text = "\n".join(lines[:3] + [json.dumps(rec)] + lines[4:]) + "\n"
    else:
        head = json.loads(lines[0])
        head["header"]["config"]["model"] = "cnn"
        text = "\n".join([json.dumps(head)] + lines[1:]) + "\n"
    (out / "found.jsonl").write_text(text)
    r = cli(*[str(out) if a == str(tmp_path / "h") else a for a in args])
    if says is None:
        assert r.exit_code == 0, r.output
        key = lambda rec: {k: v for k, v in rec.items() if k not in ("seconds", "queries")}  # noqa: E731
        assert sorted(map(json.dumps, map(key, read_jsonl(out / "found.jsonl")))) == \
            sorted(map(json.dumps, map(key, read_jsonl(tmp_path / "h" / "found.jsonl"))))
        assert (out / "model").is_dir()
        return
    assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output, r.output
    assert len([line for line in r.output.splitlines() if line.startswith("error:")]) == 1
    assert not (out / "model").exists() and not (out / "harden.json").exists()


def test_the_report_names_the_masked_lm_a_harden_used_by_default(cli, planted, tmp_path):
    """#52: without --mlm (the default masked LM), the report's summary row showed the masked LM as "–"."""
    args = _args(planted, tmp_path / "h", "--method", "augment", "--train-sample", "4", "--epochs", "1",
                 "--eval-limit", "6", "--max-queries", "1", "--json")
    i = args.index("--mlm")
    del args[i:i + 2]
    r = cli(*args)
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "h" / "settings.json").read_text())["mlm"] is None  # the settings keep the default
    assert json.loads((tmp_path / "h" / "harden.json").read_text())["mlm"] == "minilm-mlm"  # offline: the shipped one
    assert cli("report", str(tmp_path / "h"), "--out", str(tmp_path / "r.md")).exit_code == 0
    row = next(line for line in (tmp_path / "r.md").read_text().splitlines() if line.startswith("| harden |"))
    assert "| minilm-mlm |" in row, row


def test_harden_from_findings_mined_elsewhere_trains_on_them_and_replays_them(cli, planted, tmp_path):
    """--from: the successes of an attack run elsewhere are round 1's found examples (nothing is mined);
    one that holds a held-out sentence is left out; the summary replays them on the original and the
    hardened model — they held before, training fixed most of them."""
    (tmp_path / "pairs.txt").write_text("film,movie\n")
    r = cli("attack", "--model", str(planted / "bow"), "--data", str(planted / "train.tsv"), "--method", "so-enum",
            "--k", "1", "--mlm", "minilm-mlm", "--pairs-file", str(tmp_path / "pairs.txt"), "--limit", "100",
            "--no-ppl", "--output", str(tmp_path / "mined.jsonl"))
    assert r.exit_code == 0, r.output
    wins = [json.loads(x) for x in (tmp_path / "mined.jsonl").read_text().splitlines()[1:] if '"success"' in x]
    assert len(wins) >= 30
    r = cli(*_args(planted, tmp_path / "h", "--method", "augment", "--epochs", "3", "--found-weight", "10",
                   "--eval-attack", "so-enum:1", "--from", str(tmp_path / "mined.jsonl"), "--json"))
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout.strip().splitlines()[-1])
    found = read_jsonl(tmp_path / "h" / "found.jsonl")
    assert [f["text"] for f in found] == [w["text"] for w in wins]  # exactly the given findings, nothing mined
    assert res["held_out"]["attacked_for_training"] == len(wins)
    rp = res["replay_found"]
    assert rp["findings"] == len(wins) and rp["baseline_still"] == len(wins)  # all held on the original
    assert rp["fixed_by_model"] >= len(wins) // 2 and rp["still"] < rp["baseline_still"] and rp["mcnemar_p"] < 0.01
    r = cli(*_args(planted, tmp_path / "c", "--method", "consistency", "--from", str(tmp_path / "mined.jsonl")))
    assert r.exit_code == 2 and "--from gives found examples to train on" in r.output
    assert not (tmp_path / "c").exists()


def test_a_suite_harden_section_writes_the_records_the_command_writes(cli, planted, tmp_path):
    """[harden] is audit harden's request (#62): the same mined findings, the same before/after records and
    numbers, and its thresholds gate the hardened model."""
    cmd = tmp_path / "cmd"
    options = {"method": "augment", "k": 1, "train_sample": 30, "epochs": 1, "found_weight": 5, "eval_limit": 20}
    flags = [part for key, value in options.items() for part in (f"--{key.replace('_', '-')}", str(value))]
    r = cli(*_args(planted, cmd, *flags, "--json"))
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout.strip().splitlines()[-1])
    section = "".join(f"{key} = {json.dumps(value)}\n" for key, value in options.items())
    (tmp_path / "s.toml").write_text(
        f'[suite]\ndata = "{planted / "dev.tsv"}"\noutput_dir = "out"\n'  # [suite] data: the held-out data
        f'[harden]\nmodel = "{planted / "bow"}"\ndata = "{planted / "train.tsv"}"\nmlm = "minilm-mlm"\n'
        f'pair = "film,movie"\n{section}'
        f'[thresholds]\nharden.after.success_rate_max = {res["after"]["success_rate"]}\n'
        f'harden.before.accuracy_min = 1.01\n')
    s = cli("run", str(tmp_path / "s.toml"), "--json")
    assert s.exit_code == 1, s.output  # the accuracy gate cannot be met; the success-rate one is
    checks = {c["name"]: c for c in json.loads(s.stdout.strip().splitlines()[-1])["checks"]}
    assert checks["harden.after.success_rate_max"]["passed"] and not checks["harden.before.accuracy_min"]["passed"]
    assert checks["harden.after.success_rate_max"]["value"] == res["after"]["success_rate"]
    suite = tmp_path / "out" / "harden"
    files = sorted(p.name for p in cmd.glob("*.jsonl"))
    assert "found.jsonl" in files and "before.so-enum-k1.jsonl" in files and "bias.jsonl" in files
    assert files == sorted(p.name for p in suite.glob("*.jsonl"))
    strip = lambda path: [{k: v for k, v in x.items() if "seconds" not in k} for x in read_jsonl(path)]  # noqa: E731
    for name in files:
        assert strip(cmd / name) == strip(suite / name), name
    again = json.loads((suite / "harden.json").read_text())
    for key in ("before", "after", "mcnemar_p", "held_out", "bias"):
        assert again[key] == res[key], key
    # a bad value in the section is one line naming it, before anything runs
    (tmp_path / "bad.toml").write_text(f'[harden]\nmodel = "{planted / "bow"}"\nmethod = "augment"\nepochs = 0\n')
    bad = cli("run", str(tmp_path / "bad.toml"))
    assert bad.exit_code == 2 and "[harden] epochs must be a whole number >= 1" in bad.output
    (tmp_path / "bad.toml").write_text(f'[harden]\nmodel = "{planted / "bow"}"\nmethod = "augment"\nrounds = 1000\n')
    bad = cli("run", str(tmp_path / "bad.toml"))
    assert bad.exit_code == 2 and "[harden] rounds must be a whole number >= 1 and <= 100 (got 1000)" in bad.output


def test_the_before_after_audit_reads_and_keeps_the_score_cache(cli, planted, tmp_path):
    """The score cache (#64) under harden: the before/after audit keeps the original's and the hardened model's answers
    in the store; a second harden reads the original's instead of computing them, and the hardened model, asked
    what its after-audit asked, computes nothing."""
    import sqlite3

    import numpy as np

    from textaudit.models import load_classifier
    from textaudit.neighborhoods.score_cache import use_score_cache
    from textaudit.neighborhoods.store import use_store

    store = tmp_path / "s.sqlite"
    counts = []
    for name in ("h1", "h2"):
        r = cli(*_args(planted, tmp_path / name, "--method", "consistency", "--train-sample", "40", "--epochs", "2",
                       "--store", str(store), "--json"))
        assert r.exit_code == 0, r.output
        with sqlite3.connect(store) as db:
            counts.append(list(db.execute("SELECT identity, hits, misses FROM classifiers ORDER BY id")))
    (orig, h1), (orig2, _, _) = counts[0], counts[1]
    assert orig[1] == 0 and orig[2] > 0 and h1[2] > 0  # the first harden computed both models' answers, and kept them
    assert orig2[0] == orig[0] and orig2[1] > 0 and orig2[2] == orig[2]  # the second read the original's: none computed
    after = read_jsonl(tmp_path / "h1" / "after.so-enum-k1.jsonl")
    texts = [rec["text"] for rec in after if rec.get("text")]
    with use_store(str(store)), use_score_cache("auto"):  # (as every command runs)
        hardened = load_classifier(str(tmp_path / "h1" / "model"))
        probs = hardened.predict_proba(texts)
    assert texts and hardened.stats.unique_forwards == 0 and hardened.stats.store_hits == len(set(texts))
    fresh = load_classifier(str(tmp_path / "h1" / "model"))  # (another batching: equal up to a float32's last bit)
    assert np.allclose(probs, fresh.predict_proba_fresh(texts), rtol=0, atol=1e-6)


def test_a_harden_request_built_in_code_is_checked_by_its_own_ranges_and_recorded_as_older_folders_hold_it(tmp_path):
    """One declaration: the ranges the command line and a suite check are the request's own, so a request built in
    Python meets them too (one line naming the flag); what a run keeps in settings.json has the keys older folders
    hold, so a folder written before the settings were folded into the request still resumes."""
    import re

    from textaudit.errors import TextAuditError
    from textaudit.harden import HardenRequest

    for field, value, said in (("epochs", 0, "--epochs must be a whole number >= 1 and <= 1000 (got 0)"),
                               ("rounds", 1000, "--rounds must be a whole number >= 1 and <= 100 (got 1000)"),
                               ("method", "melt", "--method must be augment or adversarial or consistency")):
        with pytest.raises(TextAuditError, match=re.escape(said)):
            HardenRequest(**{"model": "cnn", "method": "augment", "out": tmp_path / "h", field: value}).check()
    r = HardenRequest(model="cnn", method="masked", out=tmp_path / "h", pair="he,she", eval_attack="so-enum:1,genetic",
                      naturalness="off", target_label=None)
    assert r.record() == {
        "model": "cnn", "method": "masked", "attack": "so-beam", "k": 3, "data": "sst2", "train_sample": 500,
        "max_train": None, "epochs": 2, "rounds": 2, "lr": None, "consistency_weight": 1.0, "found_weight": 1,
        "neighbors": 4, "pairs_per_sentence": 1, "pairs": [["he", "she"]], "group": None, "bias_k": 1,
        "eval_data": "sst2:dev", "eval_limit": 200, "eval_attacks": [["so-enum", 1], ["genetic", None]],
        "max_queries": None, "mlm": None, "lora": False, "seed": 0, "label": None, "label_threshold": 0.5,
        "naturalness": False, "from_findings": None, "copies": 4, "mask_rate": 0.9, "mask_token": "[MASK]",
        "hops": 2, "cert_samples": 1000, "cert_selection": 100, "cert_neighbors": 1}
