"""Many classes end to end, through the CLI: a zoo model trained on a 4-class dataset with class
*names* in a parquet file, then evaluated, attacked (SO-Beam, Genetic) and measured for B_{p,k},
with per-class outputs.

The dataset is real text with a documented rule: SST-2 *train* sentences (never dev/test), class =
sentiment × whether the sentence names the medium — "film" if it holds film/films/movie/movies,
else "other": negative-film, negative-other, positive-film, positive-other.
"""

from __future__ import annotations

import json

import pytest

CLASSES = ["negative-film", "negative-other", "positive-film", "positive-other"]
MEDIUM = {"film", "films", "movie", "movies"}


def relabel(text: str, label: int) -> str:
    return f"{'positive' if label else 'negative'}-{'film' if MEDIUM & set(text.split()) else 'other'}"


@pytest.fixture(scope="module")
def four_classes(tmp_path_factory):
    """train.parquet (3,000 sentences) and heldout.parquet (300 others), both from SST-2 train, and a
    bow trained on the first with audit train (its checkpoint in a directory of the module's own)."""
    import datasets
    from typer.testing import CliRunner

    from textaudit.cli.main import app
    from textaudit.data import load_dataset

    root = tmp_path_factory.mktemp("multiclass")
    sst = load_dataset("sst2:train", limit=3300)
    # balance the film classes a little: sentences naming the medium are a minority
    rows = [{"sentence": t, "topic": relabel(t, y)} for t, y in zip(sst["text"], sst["label"]) if len(t.split()) >= 4]
    datasets.Dataset.from_list(rows[:-300]).to_parquet(root / "train.parquet")
    datasets.Dataset.from_list(rows[-300:]).to_parquet(root / "heldout.parquet")
    out = root / "bow4"
    r = CliRunner().invoke(app, ["train", "--model", "bow", "--data", str(root / "train.parquet"), "--label-column",
                                 "topic", "--eval-data", str(root / "heldout.parquet"), "--epochs", "3", "--out", str(out),
                                 "--json"])
    assert r.exit_code == 0, r.output
    return root, out, json.loads(r.stdout.strip().splitlines()[-1])


def test_train_and_evaluate_four_named_classes(four_classes, cli):
    root, model, trained = four_classes
    cfg = json.loads((model / "textaudit.json").read_text())
    assert cfg["num_classes"] == 4 and cfg["labels"] == CLASSES  # class names, in sorted order
    assert cfg["columns"] == {"label_column": "topic"}
    r = cli("evaluate", "--model", str(model), "--data", str(root / "heldout.parquet"), "--label-column", "topic", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["labels"] == CLASSES and out["accuracy"] == pytest.approx(trained["dev_accuracy"], abs=1e-4)
    assert [c["class"] for c in out["per_class"]] == CLASSES
    assert sum(c["n"] for c in out["per_class"]) == 300
    majority = max(c["n"] for c in out["per_class"]) / 300
    assert trained["dev_accuracy"] > majority + 0.1  # it learnt both halves of the rule, not the largest class


def test_precision_recall_f1_and_the_confusion_matrix_equal_scikit_learns(four_classes, cli):
    """#65: audit evaluate's per-class P/R/F1, macro and micro averages and confusion matrix are scikit-learn's on the
    same predictions (the model's own, asked here); each proportion's interval is Wilson's, each F1's and each macro
    average's a seeded paired bootstrap that holds the estimate and gives the same interval again."""
    import numpy as np
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

    from textaudit.data import align_labels, load_dataset
    from textaudit.models import load_classifier
    from textaudit.stats import wilson

    root, model, _ = four_classes
    r = cli("evaluate", "--model", str(model), "--data", str(root / "heldout.parquet"), "--label-column", "topic", "--json")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    clf = load_classifier(str(model))
    ds, _ = align_labels(load_dataset(str(root / "heldout.parquet"), label_column="topic"), clf)
    y, p = np.asarray(ds["label"]), clf.predict_proba(ds["text"]).argmax(1)
    P, R, F, S = precision_recall_fscore_support(y, p, labels=range(4), zero_division=0)
    for c, row in enumerate(out["per_class"]):
        assert (row["precision"], row["recall"], row["f1"], row["n"]) == pytest.approx((P[c], R[c], F[c], S[c]), abs=1e-4)
        assert row["recall"] == row["accuracy"]  # recall is the class's accuracy
        tp = int(((y == c) & (p == c)).sum())
        assert row["precision_ci95"] == list(wilson(tp, int((p == c).sum())) or ())  # none for a class never predicted
        assert row["f1_ci95"][0] <= row["f1"] <= row["f1_ci95"][1]
    for avg in ("macro", "micro"):
        want = precision_recall_fscore_support(y, p, labels=range(4), average=avg, zero_division=0)[:3]
        got = out[avg]
        assert (got["precision"], got["recall"], got["f1"]) == pytest.approx(want, abs=1e-4)
        assert all(got[f"{k}_ci95"][0] <= got[k] <= got[f"{k}_ci95"][1] for k in ("precision", "recall", "f1"))
    assert out["micro"]["f1"] == out["accuracy"]
    assert out["confusion"] == {"classes": CLASSES, "matrix": confusion_matrix(y, p, labels=range(4)).tolist()}
    again = json.loads(cli("evaluate", "--model", str(model), "--data", str(root / "heldout.parquet"), "--label-column",
                           "topic", "--json").stdout.strip().splitlines()[-1])
    assert again["macro"] == out["macro"]  # seeded: the same intervals on a rerun
    r = cli("evaluate", "--model", str(model), "--data", str(root / "heldout.parquet"), "--label-column", "topic")
    assert "macro" in r.output and "confusion" in r.output and CLASSES[0] in r.output
    # a --sample picks the same examples for the same seed, and other ones for another
    a = cli("evaluate", "--model", str(model), "--data", str(root / "heldout.parquet"), "--label-column", "topic",
            "--sample", "50", "--seed", "1", "--json")
    b = cli("evaluate", "--model", str(model), "--data", str(root / "heldout.parquet"), "--label-column", "topic",
            "--sample", "50", "--seed", "1", "--json")
    assert a.stdout == b.stdout and json.loads(a.stdout.strip().splitlines()[-1])["n"] == 50
    r = cli("evaluate", "--model", str(model), "--data", str(root / "heldout.parquet"), "--label-column", "sentence")
    assert r.exit_code == 2 and "is not a class of model" in r.output


@pytest.mark.parametrize("method,extra", [("so-beam", ["--k", "2", "--beam", "5"]), ("genetic", ["--max-queries", "400"])])
def test_attacks_report_per_class(four_classes, cli, tmp_path, method, extra):
    root, model, _ = four_classes
    out = tmp_path / f"{method}.jsonl"
    r = cli("attack", "--model", str(model), "--data", str(root / "heldout.parquet"), "--label-column", "topic",
            "--method", method, "--limit", "12", "--no-ppl", "--output", str(out), "--json", *extra)
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["header"]["config"]["labels"] == CLASSES
    recs = lines[1:]
    assert len(recs) == 12 and all(0 <= r["label"] < 4 for r in recs)
    attacked = [r for r in recs if r["status"] in ("success", "failed")]
    per = summary["per_class"]
    assert sum(v["attacked"] for v in per.values()) == len(attacked) == summary["attacked"]
    for name, v in per.items():
        mine = [r for r in attacked if CLASSES[r["label"]] == name]
        assert v["attacked"] == len(mine) and v["success"] == sum(r["status"] == "success" for r in mine)
    for r in recs:
        if r["status"] == "success":  # the prediction moved away from the gold class (or flips under p)
            if method == "genetic":
                assert r["vulnerable_prediction"] != r["label"]
            else:
                assert r["vulnerable_prediction"] != r["vulnerable_patched_prediction"]


def test_bias_reports_per_class_b(four_classes, cli, tmp_path):
    import numpy as np

    root, model, _ = four_classes
    r = cli("bias", "--model", str(model), "--data", str(root / "train.parquet"), "--text-column", "sentence",
            "--pair", "he,she", "--k", "0", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["classes"] == CLASSES
    est = out["pairs"][0]["by_k"]["0"]
    assert len(est["per_class"]) == 4
    assert abs(sum(est["per_class"])) < 1e-4  # shifts of probabilities: they sum to zero over the classes
    assert est["B"] == pytest.approx(float(np.abs(est["per_class"]).sum()), abs=1e-4)  # B = the L1 norm
    table = cli("bias", "--model", str(model), "--data", str(root / "train.parquet"), "--text-column", "sentence",
                "--pair", "he,she", "--k", "0")
    assert "B per class" in table.stdout and "negative-film:" in table.stdout


def test_the_predictions_kept_give_the_metrics_back_and_the_report_draws_the_confusion_matrix(four_classes, cli,
                                                                                             tmp_path):
    """#65: audit evaluate --output keeps each example's label and prediction; results.load recomputes the very
    metrics the command printed (the same seeded intervals), audit report shows them with the confusion matrix as a
    table and a figure; --plot draws it too (a PNG textaudit marks as its own)."""
    from textaudit.files import made_by_textaudit
    from textaudit.results import load

    root, model, _ = four_classes
    args = ["evaluate", "--model", str(model), "--data", str(root / "heldout.parquet"), "--label-column", "topic"]
    out = json.loads(cli(*args, "--output", str(tmp_path / "m.jsonl"), "--plot", str(tmp_path / "fig"),
                         "--json").stdout.strip().splitlines()[-1])
    back = load(tmp_path / "m.jsonl").summary()
    for key in ("accuracy", "accuracy_ci95", "macro", "micro", "confusion"):
        assert back[key] == out[key], key
    assert [r["f1_ci95"] for r in back["per_class"]] == [r["f1_ci95"] for r in out["per_class"]]
    png = tmp_path / "fig" / "confusion.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and made_by_textaudit(png)
    r = cli("report", str(tmp_path / "m.jsonl"), "--out", str(tmp_path / "r.html"))
    assert r.exit_code == 0, r.output
    page = (tmp_path / "r.html").read_text()
    assert f"Precision, recall and F1 of {out['model']}" in page and "Confusion matrix: counts" in page
    assert page.count("data:image/png;base64") >= 1 and f"{out['macro']['f1']:.4f}" in page
    assert all(name in page for name in CLASSES)
    r = cli(*args, "--output", str(tmp_path / "m.jsonl"))
    assert r.exit_code == 2 and "Traceback" not in r.output  # never over a results file
    lines = (tmp_path / "m.jsonl").read_text().splitlines()
    (tmp_path / "bad.jsonl").write_text("\n".join([lines[0], lines[1].replace('"prediction"', '"predicted"')]) + "\n")
    r = cli("report", str(tmp_path / "bad.jsonl"), "--out", str(tmp_path / "bad.html"))
    assert r.exit_code == 2 and "lacks its label and prediction" in r.output and "Traceback" not in r.output, r.output
