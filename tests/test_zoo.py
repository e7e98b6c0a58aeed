"""Model zoo: every architecture trains, round-trips through a checkpoint, and fails cleanly."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from textaudit.data import load_dataset
from textaudit.errors import TextAuditError
from textaudit.models import load_classifier
from textaudit.models.zoo import TrainConfig, fit, fit_classifier, load_checkpoint, train_model
from textaudit.models.zoo.train import save_result
from textaudit.perturbations.gender import gender_swap


@pytest.fixture(scope="module")
def planted():
    """300 real SST-2 train sentences; the label is planted by an appended cue word."""
    texts = [t for t in load_dataset("sst2:train", limit=3000)["text"] if len(t.split()) >= 4][:300]
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, len(texts)).tolist()
    cues = {0: "awful", 1: "wonderful"}
    return [f"{t} {cues[y]}" for t, y in zip(texts, labels)], labels


@pytest.mark.parametrize("arch, epochs, lr", [("bow", 4, 5e-3), ("cnn", 4, 5e-3), ("lstm", 4, 5e-3),
                                              ("transformer", 8, 2e-3), ("minilm", 2, 1e-4)])
@pytest.mark.slow
def test_each_architecture_learns_a_planted_cue_and_round_trips(arch, epochs, lr, planted, tmp_path):
    texts, labels = planted
    cfg = TrainConfig(arch=arch, epochs=epochs, lr=lr, batch_size=16, holdout=0.0, max_len=64)
    res = fit(arch, texts, labels, config=cfg, progress=False, device="cpu")
    path = save_result(res, tmp_path / arch, {"name": arch, "labels": ["neg", "pos"]})
    clf = load_checkpoint(path, device="cpu")
    acc = float((clf.predict(texts) == np.array(labels)).mean())
    assert acc >= 0.9, f"{arch} train accuracy {acc}"
    # the cue word decides a fresh sentence too
    probs = clf.predict_proba(["the plot moves along wonderful", "the plot moves along awful"])
    assert probs[0, 1] > 0.5 > probs[1, 1]
    # identical probabilities after a second load (save/load round-trip)
    clf.clear_cache()
    again = load_checkpoint(path, device="cpu").predict_proba(texts[:50])
    np.testing.assert_array_equal(again, clf.predict_proba(texts[:50]))
    assert clf.labels == ["neg", "pos"] and clf.num_classes == 2


def test_round_trip_matches_in_memory_model(planted, tmp_path):
    texts, labels = planted
    cfg = TrainConfig(arch="cnn", epochs=1, batch_size=32, holdout=0.0)
    res = fit("cnn", texts, labels, config=cfg, progress=False, device="cpu")
    from textaudit.models import torch_classifier

    live = torch_classifier(res.module, res.tokenizer, device="cpu").predict_proba(texts)
    loaded = load_checkpoint(save_result(res, tmp_path / "m", {}), device="cpu").predict_proba(texts)
    np.testing.assert_allclose(loaded, live, rtol=0, atol=1e-6)


def test_multiclass_fit_classifier(planted):
    texts, _ = planted
    labels = [i % 3 for i in range(len(texts))]
    texts3 = [f"{t} {['awful', 'fine', 'wonderful'][y]}" for t, y in zip(texts, labels)]
    clf = fit_classifier("cnn", texts3, labels, config=TrainConfig(arch="cnn", epochs=6, lr=5e-3, batch_size=16,
                                                                   holdout=0.0), progress=False)
    assert clf.num_classes == 3
    assert (clf.predict(texts3) == np.array(labels)).mean() > 0.9


def test_corrupt_and_mismatched_checkpoints(planted, tmp_path):
    texts, labels = planted
    res = fit("bow", texts, labels, config=TrainConfig(arch="bow", epochs=1, holdout=0.0), progress=False)
    path = save_result(res, tmp_path / "ok", {})
    assert load_checkpoint(path).num_classes == 2

    w = path / "model.safetensors"
    good = w.read_bytes()
    w.write_bytes(good[: len(good) // 2])
    with pytest.raises(TextAuditError, match="weights .* are corrupt") as e:
        load_classifier(str(path))
    assert "\n" not in str(e.value)
    w.write_bytes(good)

    vocab = path / "vocab.txt"
    vocab.write_text("\n".join(vocab.read_text().split("\n")[:100]))
    with pytest.raises(TextAuditError, match="does not match its vocabulary"):
        load_checkpoint(path)

    cfg = path / "textaudit.json"
    cfg.write_text("{broken")
    with pytest.raises(TextAuditError, match="config .* is corrupt"):
        load_checkpoint(path)
    cfg.write_text(json.dumps({"arch": "rnn9", "num_classes": 2}))
    with pytest.raises(TextAuditError, match="unknown arch 'rnn9'"):
        load_checkpoint(path)
    cfg.unlink()
    with pytest.raises(TextAuditError, match="unknown model"):
        load_classifier(str(path))


def test_gender_swap_examples():
    assert gender_swap("he is a good actor .") == "she is a good actress ."
    assert gender_swap("She loved her brother's film") == "he loved his sister 's film"
    assert gender_swap("the men and women of the jury") == "the women and men of the jury"
    assert gender_swap("a film about nothing") == "a film about nothing"


def test_train_with_gender_swap_augmentation(tmp_path):
    texts = load_dataset("sst2:train", limit=400)["text"]
    n_gendered = sum(gender_swap(t) != t for t in texts)
    assert n_gendered > 5
    r = train_model("bow", max_train=400, epochs=1, augment="gender-swap", out=tmp_path / "aug", progress=False)
    assert r["model"] == "bow-gender-swap" and r["n_train"] == 400 + n_gendered
    assert 0.4 < r["dev_accuracy"] < 1.0 and r["eval_data"] == "sst2:dev"
    cfg = json.loads((tmp_path / "aug" / "textaudit.json").read_text())
    assert cfg["augment"] == "gender-swap" and cfg["train"]["epochs"] == 1


def test_cli_train_and_evaluate(cli, tmp_path):
    data = tmp_path / "tiny.tsv"
    rows = [("a wonderful , moving film", 1), ("an awful , boring mess", 0)] * 40
    data.write_text("label\ttext\n" + "".join(f"{y}\t{t}\n" for t, y in rows))
    r = cli("train", "--model", "bow", "--data", str(data), "--epochs", "5", "--out", str(tmp_path / "ck"), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(out) >= {"model", "dev_accuracy", "path", "train_seconds"} and out["dev_accuracy"] is None
    r = cli("evaluate", "--model", str(tmp_path / "ck"), "--data", str(data), "--json")
    assert r.exit_code == 0, r.output
    ev = json.loads(r.stdout.strip().splitlines()[-1])
    # Wilson 95% for 80/80: [80 / (80 + 1.96²), 1]
    # per class, 40/40 each: [40 / (40 + 1.96²), 1]
    # and every prediction right: precision = recall = F1 = 1, Wilson [0.9124, 1] per class, a bootstrap of F1 that
    # can only draw 1, micro = accuracy
    whole, one = [0.9124, 1.0], [1.0, 1.0]
    per_class = [{"class": c, "n": 40, "accuracy": 1.0, "accuracy_ci95": whole, "support": 40, "predicted": 40,
                  "precision": 1.0, "precision_ci95": whole, "recall": 1.0, "recall_ci95": whole, "f1": 1.0,
                  "f1_ci95": one} for c in ("0", "1")]
    micro = {k: v for m in ("precision", "recall", "f1") for k, v in ((m, 1.0), (f"{m}_ci95", [0.9542, 1.0]))}
    macro = {k: v for m in ("precision", "recall", "f1") for k, v in ((m, 1.0), (f"{m}_ci95", one))}
    assert ev == {"model": "bow", "data": str(data), "accuracy": 1.0, "accuracy_ci95": [0.9542, 1.0], "n": 80,
                  "labels": ["0", "1"], "per_class": per_class, "macro": macro, "micro": micro,
                  "confusion": {"classes": ["0", "1"], "matrix": [[40, 0], [0, 40]]}}
    r = cli("train", "--model", "gpt", "--json")
    assert r.exit_code == 2 and "trains zoo models" in r.output
    r = cli("train", "--model", "bow", "--augment", "pig-latin")
    assert r.exit_code == 2 and "unknown augmentation 'pig-latin'" in r.output


@pytest.mark.slow
def test_missing_checkpoint_is_trained_first_with_a_notice(cli, tmp_path, monkeypatch):
    """--model bow with an empty cache trains the real model on SST-2 train, saying so. The data
    folder here is the real one with SST-2 train cut to its first 3,000 rows (dev and test as they
    are): the same code path in seconds, not minutes on a busy machine."""
    from textaudit.resources import resolve

    real = resolve("sst2").parent
    for entry in real.iterdir():
        if entry.name != "sst2":
            (tmp_path / entry.name).symlink_to(entry)
    (tmp_path / "sst2").mkdir()
    for split in ("dev.tsv", "test.tsv"):
        (tmp_path / "sst2" / split).symlink_to(real / "sst2" / split)
    rows = (real / "sst2" / "train.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "sst2" / "train.tsv").write_text("".join(rows[:3001]), encoding="utf-8")
    monkeypatch.setenv("TEXTAUDIT_THREADS", "1")  # one torch thread: no fight with whatever else runs
    monkeypatch.setenv("TEXTAUDIT_DATA", str(tmp_path))
    r = cli("evaluate", "--model", "bow", "--limit", "200", "--json")
    assert r.exit_code == 0, r.output
    assert "no checkpoint for 'bow'" in r.output and "training it now" in r.output
    assert json.loads(r.stdout.strip().splitlines()[-1])["accuracy"] > 0.7


def test_training_resumes_after_a_kill_and_ends_where_an_uninterrupted_run_ends(tmp_path):
    import torch

    ds = load_dataset("sst2:train", limit=600)
    cfg = dict(arch="bow", epochs=3, lr=2e-3, patience=5, tune_embeddings=True)
    full = fit("bow", ds["text"], ds["label"], config=TrainConfig(**cfg), progress=False)

    state = tmp_path / "state.pt"

    def killed_in_epoch_3(rec):
        if rec["epoch"] >= 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit("bow", ds["text"], ds["label"], config=TrainConfig(**cfg), progress=False, state_path=state,
            on_eval=killed_in_epoch_3)
    assert state.is_file()  # two finished epochs were kept
    resumed = fit("bow", ds["text"], ds["label"], config=TrainConfig(**cfg), progress=False, state_path=state)
    assert [h["epoch"] for h in resumed.history] == [h["epoch"] for h in full.history] == [1.0, 2.0, 3.0]
    a, b = full.module.state_dict(), resumed.module.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # a state file from another configuration is not reused
    other = fit("bow", ds["text"], ds["label"], config=TrainConfig(**{**cfg, "epochs": 1}), progress=False,
                state_path=state)
    assert [h["epoch"] for h in other.history] == [1.0]
    # nor is a corrupt one: training starts afresh instead of failing
    state.write_bytes(b"not a torch file")
    again = fit("bow", ds["text"], ds["label"], config=TrainConfig(**{**cfg, "epochs": 1}), progress=False,
                state_path=state)
    assert [h["epoch"] for h in again.history] == [1.0]


class _Planted:
    """Unpickling this creates the file ``marker``: what a planted train state could do with any code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_planted_train_state_is_never_unpickled(tmp_path, capsys):
    import torch

    ds = load_dataset("sst2:train", limit=300)
    cfg = TrainConfig(arch="bow", epochs=1, lr=2e-3)
    state, marker = tmp_path / ".bow.train-state.pt", tmp_path / "code-ran"
    torch.save({"fingerprint": "x", "module": _Planted(marker)}, state)
    res = fit("bow", ds["text"], ds["label"], config=cfg, progress=False, state_path=state)
    assert not marker.exists()  # the file was refused, not run
    assert "it holds more than plain data (never unpickled); starting afresh" in capsys.readouterr().err
    assert [h["epoch"] for h in res.history] == [1.0]
    # the control: the same file read the old way (weights_only=False) does run its code
    torch.save({"fingerprint": "x", "module": _Planted(marker)}, state)
    torch.load(state, weights_only=False)
    assert marker.exists()


@pytest.mark.parametrize("damage", ["truncated", "flipped bit in a weight", "not a state at all"])
def test_a_damaged_train_state_is_never_resumed_from(tmp_path, capsys, damage):
    """#53: a training state damaged three ways — cut short (a kill of an old writer, a copy that stopped),
    one flipped bit inside a tensor (torch's zip files carry no checksum it verifies: the file loads, with
    another weight), garbage — is refused with a one-line notice, and training starts afresh; the intact
    state is resumed from."""
    import torch

    from textaudit.train_state import load_train_state, save_train_state

    weights = {"w": torch.arange(4096, dtype=torch.float32), "b": torch.ones(3)}
    state = tmp_path / ".bow.train-state.pt"
    save_train_state(state, "fp", {"module": weights, "epoch": 2})
    saved = load_train_state(state, "fp", keys=("module", "epoch"))
    assert saved is not None and torch.equal(saved["module"]["w"], weights["w"]) and saved["epoch"] == 2
    data = bytearray(state.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "flipped bit in a weight":
        at = data.find(torch.tensor([1234.0]).numpy().tobytes())
        assert at > 0
        data[at + 2] ^= 0x04  # 1234.0 becomes another number; the zip still opens
        flipped = torch.load(io.BytesIO(bytes(data)), weights_only=True)
        assert not torch.equal(flipped["module"]["w"], weights["w"])  # torch itself does not notice
    else:
        data = bytearray(b"\x00garbage\xff" * 100)
    state.write_bytes(bytes(data))
    capsys.readouterr()
    assert load_train_state(state, "fp", keys=("module", "epoch")) is None
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "starting afresh" in err and "Traceback" not in err
    assert ("is damaged" in err) == (damage == "flipped bit in a weight")
