from __future__ import annotations

import json

import pytest

from textaudit.data import load_dataset
from textaudit.errors import TextAuditError


def test_sst2_splits():
    dev = load_dataset("sst2:dev")
    assert dev.column_names == ["text", "label"]
    assert len(dev) == 872 and set(dev["label"]) == {0, 1}
    assert dev[0]["text"] == "one long string of cliches ."
    assert len(load_dataset("sst2:test")) == 1821
    assert len(load_dataset("sst2")) == 67349  # default split is train
    assert len(load_dataset("sst2", default_split="dev")) == 872
    assert len(load_dataset("sst2:validation", limit=5)) == 5


def test_unknown_split_and_dataset():
    with pytest.raises(TextAuditError, match="unknown split 'holdout'"):
        load_dataset("sst2:holdout")
    with pytest.raises(TextAuditError, match="unknown dataset 'imdbx'"):
        load_dataset("imdbx")
    with pytest.raises(TextAuditError, match="empty data spec"):
        load_dataset("  ")


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_local_files(tmp_path, suffix):
    rows = [("a fine film", 1), ("dull , dull , dull", 0), ("so-so", 2)]
    p = tmp_path / f"d{suffix}"
    if suffix == ".jsonl":
        p.write_text("\n".join(json.dumps({"review": t, "y": y}) for t, y in rows) + "\n")
    else:
        sep = "\t" if suffix == ".tsv" else ","
        body = "\n".join(f'"{t}"{sep}{y}' if sep == "," else f"{t}{sep}{y}" for t, y in rows)
        p.write_text(f"review{sep}y\n{body}\n")
    ds = load_dataset(str(p), text_column="review", label_column="y")
    assert ds["text"] == [t for t, _ in rows] and ds["label"] == [1, 0, 2]


def test_default_column_names(tmp_path):
    p = tmp_path / "d.tsv"
    p.write_text("label\tsentence\n1\tgreat\n0\tbad\n")
    assert load_dataset(str(p))["text"] == ["great", "bad"]


def test_bad_files(tmp_path):
    empty = tmp_path / "e.csv"
    empty.write_text("text,label\n")
    with pytest.raises(TextAuditError, match="has no rows"):
        load_dataset(str(empty))
    nolabel = tmp_path / "n.csv"
    nolabel.write_text("text,score\nfine,1\n")
    with pytest.raises(TextAuditError, match="no label column.*--label-column"):
        load_dataset(str(nolabel))
    with pytest.raises(TextAuditError, match="no text column 'body'"):
        load_dataset(str(nolabel), text_column="body")
    words = tmp_path / "w.csv"
    words.write_text("text,label\nfine,pos\n")
    with pytest.raises(TextAuditError, match="label 'pos' is not an integer"):
        load_dataset(str(words))
    neg = tmp_path / "neg.tsv"
    neg.write_text("label\ttext\n-1\tunlabelled\n")
    with pytest.raises(TextAuditError, match="negative"):
        load_dataset(str(neg))
    broken = tmp_path / "b.jsonl"
    broken.write_text('{"text": "ok", "label": 1}\n{not json\n')
    with pytest.raises(TextAuditError, match="b.jsonl:2 is not valid JSON"):
        load_dataset(str(broken))
    with pytest.raises(TextAuditError, match="does not exist"):
        load_dataset(str(tmp_path / "missing.csv"))
    with pytest.raises(TextAuditError, match="unsupported data file"):
        (tmp_path / "x.parquet").write_text("x")
        load_dataset(str(tmp_path / "x.parquet"))
