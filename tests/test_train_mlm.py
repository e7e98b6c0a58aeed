"""``python -m textaudit.neighborhoods.train_mlm`` end to end on a tiny corpus (CPU, seconds)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from safetensors import safe_open

from textaudit.neighborhoods.minilm_mlm import load_minilm_mlm
from textaudit.neighborhoods.train_mlm import sst_corpus, wordnet_corpus

GLOSSES = [
    ("a domestic animal kept as a pet", "the small dog barked at the mailman"),
    ("a large body of salt water", "they sailed across the wide ocean for days"),
    ("move fast on foot", "she likes to run in the park every morning"),
    ("having a pleasant taste", "the soup was warm and very tasty tonight"),
    ("a building where people live", "their old house stood at the end of the road"),
    ("a period of darkness", "the night was cold and the sky was clear"),
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlmdata")
    wn = root / "wordnet"
    wn.mkdir()
    for pos in ("noun", "verb", "adj", "adv"):
        lines = ["  1 This software and database is being provided ... (licence header)"]
        for i in range(40):  # offsets ≡ 0, 1, 2 … (mod 20): held-out, dev and train synsets
            d, e = GLOSSES[i % len(GLOSSES)]
            lines.append(f"{1000 + i:08d} 03 n 01 word 0 000 | {d}; \"{e} number {i}\"")
        (wn / f"data.{pos}").write_text("\n".join(lines) + "\n")
    sst = root / "train.tsv"
    rows = ["sentence\tlabel"] + [f"{e} , a {w} film\t{i % 2}" for i, ((_, e), w) in
                                  enumerate((g, w) for g in GLOSSES for w in ("great", "dull", "fine", "moving", "long"))]
    sst.write_text("\n".join(rows) + "\n")
    return wn, sst


def _args(corpus, out, *extra):
    wn, sst = corpus
    return ["--wordnet-dir", str(wn), "--sst-train", str(sst), "--batch-size", "8", "--rank", "4", "--alpha", "8",
            "--eval-every", "2", "--eval-words", "30", "--device", "cpu", "--out", str(out), *extra]


def test_corpora_split_and_never_mix(corpus):
    wn, sst = corpus
    c = wordnet_corpus(wn)
    assert c["heldout"] and c["dev"] and c["train"]
    assert not set(c["heldout"]) & set(c["train"]) and not set(c["dev"]) & set(c["train"])
    assert all("number 0" in s or "number 20" in s for s in c["heldout"])
    s = sst_corpus(sst)
    assert not set(s["dev"]) & set(s["train"]) and len(s["train"]) + len(s["dev"]) == 30


def test_train_writes_a_loadable_artifact_and_warm_starts(corpus, tmp_path, cli):
    out = tmp_path / "mlm.safetensors"
    r = cli("train-mlm", *_args(corpus, out, "--steps", "4", "--sst-share", "0.75"))
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 4 and summary["steps_per_s"] > 0 and summary["out"] == str(out)
    with safe_open(str(out), "pt") as f:
        meta = f.metadata()
        keys = list(f.keys())
    info = json.loads(meta["info"])
    assert float(meta["scale"]) == 2.0 and info["args"]["sst_share"] == "0.75" and info["device"] == "cpu"
    assert [h["step"] for h in info["history"]][:1] == [2] and info["best_step"] in (2, 4)
    assert sum(k.startswith("lora.") for k in keys) == 6 * 6 * 2  # 6 layers × 6 linear layers × (A, B)
    mlm = load_minilm_mlm(out, device="cpu")
    cands = mlm.candidates([("the night was [MASK] and the sky was clear".split(), 3)], top=10)[0]
    assert len(cands) == 10 and not any(w.startswith("##") for w, _ in cands)

    # warm start from that artifact; --max-minutes 0 stops after the first step (and evaluates it)
    out2 = tmp_path / "mlm2.safetensors"
    r = cli("train-mlm", *_args(corpus, out2, "--steps", "50", "--init", str(out), "--max-minutes", "0"))
    err = r.stderr
    assert "warm start: " in err and "--max-minutes 0.0 reached after step 1" in err
    with safe_open(str(out2), "pt") as f:
        assert json.loads(f.metadata()["info"])["best_step"] == 1

    # an artifact of another rank does not fit: one line, exit 2, nothing written
    out3 = tmp_path / "mlm3.safetensors"
    r = cli("train-mlm", *_args(corpus, out3, "--steps", "2", "--init", str(out)), "--rank", "8")
    assert r.exit_code == 2 and "does not fit this model" in r.stderr
    r = cli("train-mlm", *_args(corpus, out3, "--steps", "2", "--init", str(tmp_path / "nothing.safetensors")))
    assert r.exit_code == 2
    err = r.stderr
    assert err.strip().splitlines()[-1].startswith("error: --init ") and "Traceback" not in err
    assert not out3.exists()


def test_bad_share_and_missing_wordnet(tmp_path):
    r = subprocess.run([sys.executable, "-m", "textaudit", "train-mlm", "--sst-share", "1.5"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--sst-share must lie strictly between 0 and 1" in r.stderr
    r = subprocess.run([sys.executable, "-m", "textaudit", "train-mlm", "--steps", "0"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--steps must be at least 1 (got 0)" in r.stderr
    r = subprocess.run([sys.executable, "-m", "textaudit", "train-mlm", "--wordnet-dir", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("error: WordNet data files not found")
    assert "Traceback" not in r.stderr


def _tensors(path):
    with safe_open(str(path), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, json.loads(f.metadata()["info"])


def test_a_killed_run_resumes_and_ends_where_an_uninterrupted_run_ends(corpus, tmp_path, monkeypatch, cli):
    import torch

    from textaudit.neighborhoods import train_mlm

    full = tmp_path / "full" / "mlm.safetensors"
    assert cli("train-mlm", *_args(corpus, full, "--steps", "4", "--save-minutes", "0")).exit_code == 0
    assert not (full.parent / ".mlm.safetensors.train-state.pt").exists()  # finished: no state left

    out = tmp_path / "killed" / "mlm.safetensors"
    state = out.parent / ".mlm.safetensors.train-state.pt"
    real_batch, calls = train_mlm.Masker.batch, []

    def killed_in_step_3(self, idx, rng):  # two batches (WordNet, SST-2) per step
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real_batch(self, idx, rng)

    monkeypatch.setattr(train_mlm.Masker, "batch", killed_in_step_3)
    r = cli("train-mlm", *_args(corpus, out, "--steps", "4", "--save-minutes", "0"))
    assert r.exit_code == 130
    assert state.is_file() and "run the same command again to resume" in r.stderr
    monkeypatch.setattr(train_mlm.Masker, "batch", real_batch)

    r = cli("train-mlm", *_args(corpus, out, "--steps", "4", "--save-minutes", "0"))
    assert "notice: resuming after step 2" in r.stderr and not state.exists()
    (a, info_a), (b, info_b) = _tensors(full), _tensors(out)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [h["step"] for h in info_b["history"]] == [h["step"] for h in info_a["history"]] == [2, 4]
    assert [h["general"] for h in info_b["history"]] == [h["general"] for h in info_a["history"]]

    # a state left by another configuration is not reused
    assert cli("train-mlm", *_args(corpus, out, "--steps", "4", "--max-minutes", "0")).exit_code == 0
    assert state.is_file()
    r = cli("train-mlm", *_args(corpus, out, "--steps", "4", "--lr", "1e-4"))
    assert "belongs to another run" in r.stderr


def test_without_out_the_artifact_goes_to_the_cache_and_is_used_from_there(tmp_path, monkeypatch):
    import shutil

    from textaudit.neighborhoods.train_mlm import SHIPPED, TrainMLMConfig, default_out
    from textaudit.resources import locate

    monkeypatch.setenv("TEXTAUDIT_CACHE", str(tmp_path / "cache"))
    assert TrainMLMConfig().out == default_out() == tmp_path / "cache" / "minilm-mlm" / "minilm-mlm.safetensors"
    assert locate("minilm-mlm").source == "package"  # nothing trained yet: the shipped one
    default_out().parent.mkdir(parents=True)
    shutil.copy(SHIPPED, default_out())  # what a train-mlm run without --out leaves
    res = locate("minilm-mlm")
    assert res.source == "cache" and res.path == default_out()
