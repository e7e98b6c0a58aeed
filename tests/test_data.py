from __future__ import annotations

import json

import pytest

from textaudit.data import load_dataset
from textaudit.errors import TextAuditError


def test_sst2_splits():
    dev = load_dataset("sst2:dev")
    assert dev.column_names == ["id", "text", "label"]
    assert dev["id"][:2] == ["sst2:dev:0", "sst2:dev:1"]
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


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path, suffix):
    # Excel and Notepad save UTF-8 with a BOM: the first column is still 'text', not '\ufefftext'
    p = tmp_path / f"bom{suffix}"
    if suffix == ".jsonl":
        body = json.dumps({"text": "a fine film", "label": 1}) + "\n"
    else:
        sep = "\t" if suffix == ".tsv" else ","
        body = f"text{sep}label\na fine film{sep}1\n"
    p.write_bytes("\ufeff".encode() + body.encode())
    ds = load_dataset(str(p))
    assert ds["text"] == ["a fine film"] and ds["label"] == [1]


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
    mixed = tmp_path / "w.csv"
    mixed.write_text("text,label\nfine,pos\nbad,0\n")
    with pytest.raises(TextAuditError, match="mixes class names .* and class ids \\(row 3\\)"):
        load_dataset(str(mixed))
    floaty = tmp_path / "f.csv"
    floaty.write_text("text,label\nfine,0.5\n")
    with pytest.raises(TextAuditError, match="row 2: label 0.5 is neither a class id"):
        load_dataset(str(floaty))
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
    with pytest.raises(TextAuditError, match="x.parquet is not a readable parquet file"):
        (tmp_path / "x.parquet").write_text("x")
        load_dataset(str(tmp_path / "x.parquet"))
    with pytest.raises(TextAuditError, match="unsupported data file 'x.xlsx'"):
        (tmp_path / "x.xlsx").write_text("x")
        load_dataset(str(tmp_path / "x.xlsx"))


ROWS = [("a fine film", "positive", "it is good"), ("dull , dull , dull", "negative", "it is dull"),
        ("so-so", "neutral", "it is fine"), ("a great cast", "positive", "actors shine")]


def _hf_dataset():
    import datasets

    return datasets.Dataset.from_dict({"review": [r[0] for r in ROWS], "stars": [r[1] for r in ROWS],
                                       "claim": [r[2] for r in ROWS]})


def test_class_names_become_ids_in_sorted_order(tmp_path):
    from textaudit.data import label_names

    p = tmp_path / "d.jsonl"
    p.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y, _ in ROWS))
    ds = load_dataset(str(p))
    assert label_names(ds) == ["negative", "neutral", "positive"] and ds["label"] == [2, 0, 1, 2]


def test_parquet_and_arrow_files(tmp_path):
    from textaudit.data import label_names

    ds = _hf_dataset()
    ds.to_parquet(tmp_path / "d.parquet")
    got = load_dataset(str(tmp_path / "d.parquet"), text_column="review", label_column="stars", pair_column="claim")
    assert got["text"] == [r[0] for r in ROWS] and got["pair"] == [r[2] for r in ROWS]
    assert label_names(got) == ["negative", "neutral", "positive"] and got["id"][0] == "d.parquet:0"
    # an Arrow file as datasets writes it, with a ClassLabel feature: its names are kept, ids as stored
    typed = ds.class_encode_column("stars")
    typed.save_to_disk(tmp_path / "saved1")
    arrow = next((tmp_path / "saved1").glob("*.arrow"))
    got = load_dataset(str(arrow), text_column="review", label_column="stars")
    assert label_names(got) == typed.features["stars"].names and got["label"] == typed["stars"]


def test_hf_datasets_saved_to_disk_and_local_folders(tmp_path):
    import datasets

    from textaudit.data import dataset_id, label_names

    ds = _hf_dataset()
    datasets.DatasetDict({"train": ds, "validation": ds.select([0, 1])}).save_to_disk(tmp_path / "saved")
    dev = load_dataset(f"hf:{tmp_path / 'saved'}:dev", text_column="review", label_column="stars")
    assert dev["text"] == ["a fine film", "dull , dull , dull"] and dev["id"] == ["hf:saved:validation:0", "hf:saved:validation:1"]
    assert label_names(dev) == ["negative", "positive"]
    assert len(load_dataset(f"hf:{tmp_path / 'saved'}", text_column="review", label_column="stars")) == 4  # train
    with pytest.raises(TextAuditError, match="has no split 'test' \\(splits: train, validation\\)"):
        load_dataset(f"hf:{tmp_path / 'saved'}:test", text_column="review", label_column="stars")
    # a script-free folder of data files goes through datasets.load_dataset itself
    folder = tmp_path / "folder"
    folder.mkdir()
    ds.to_csv(folder / "train.csv", index=False)
    ds.select([2, 3]).to_csv(folder / "test.csv", index=False)
    test = load_dataset(f"hf:{folder}:test", text_column="review", label_column="stars", pair_column="claim")
    assert test["text"] == ["so-so", "a great cast"] and test["pair"] == ["it is fine", "actors shine"]
    assert dataset_id(f"hf:{folder}:test") == "hf:folder:test"
    assert dataset_id("hf:glue:mnli:validation_matched") == "hf:glue:mnli:validation_matched"
    assert dataset_id("hf:imdb", "dev") == "hf:imdb:validation"
    # the hub, offline here: one line
    with pytest.raises(TextAuditError, match="cannot load .*'someone/nothing-here'"):
        load_dataset("hf:someone/nothing-here")
    with pytest.raises(TextAuditError, match="hf: needs a dataset"):
        load_dataset("hf:")
    with pytest.raises(TextAuditError, match="is a directory; .* use hf:"):
        load_dataset(str(folder))


def test_sample_and_limit():
    a = load_dataset("sst2:dev", sample=20, seed=3)
    b = load_dataset("sst2:dev", sample=20, seed=3)
    c = load_dataset("sst2:dev", sample=20, seed=4)
    assert a["id"] == b["id"] and a["id"] != c["id"] and len(set(a["id"])) == 20
    rows = [int(i.rsplit(":", 1)[1]) for i in a["id"]]
    assert rows == sorted(rows)  # file order, each keeping its row's id
    full = load_dataset("sst2:dev")
    assert a["text"] == [full["text"][r] for r in rows]
    assert len(load_dataset("sst2:dev", sample=5000)) == 872  # more than there are: all of them
    with pytest.raises(TextAuditError, match="not both"):
        load_dataset("sst2:dev", sample=5, limit=5)


def test_pair_column_errors(tmp_path):
    p = tmp_path / "nli.csv"
    p.write_text("premise,hypothesis,label\na man sleeps,a person rests,0\na cat,,1\n")
    with pytest.raises(TextAuditError, match="row 3: empty second text in --pair-column 'hypothesis'"):
        load_dataset(str(p), text_column="premise", pair_column="hypothesis")
    with pytest.raises(TextAuditError, match="has no pair column 'claim'"):
        load_dataset(str(p), text_column="premise", pair_column="claim")
    with pytest.raises(TextAuditError, match="is the text column too"):
        load_dataset(str(p), text_column="premise", pair_column="premise")


def test_label_maps_are_recorded_for_named_classes_only(cli, tmp_path):
    """A header records the class map when the classes have names; bare ids record none, so results
    files written before label maps existed (no "labels" in their header) still resume."""
    from textaudit.data import data_config

    assert data_config("d.tsv", ["0", "1"]) == {"data": "d.tsv"}
    assert data_config("d.tsv", ["neg", "pos"], sample=5) == {"data": "d.tsv", "labels": ["neg", "pos"], "data_sample": 5}
    plugin = tmp_path / "m.py"
    plugin.write_text("def clf(texts):\n    return [[0.3, 0.7] if 'good' in t else [0.7, 0.3] for t in texts]\n")
    data = tmp_path / "d.tsv"
    data.write_text("label\ttext\n1\ta good film .\n0\ta dull film .\n1\tgood acting .\n")
    out = tmp_path / "r.jsonl"
    args = ["attack", "--model", f"{plugin}:clf", "--method", "genetic", "--data", str(data), "--no-ppl", "--output", str(out)]
    r = cli(*args, "--limit", "2")
    assert r.exit_code == 0, r.output
    assert "labels" not in json.loads(out.read_text().splitlines()[0])["header"]["config"]
    r = cli(*args, "--resume")
    assert r.exit_code == 0, r.output
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()[1:]] == ["d.tsv:0", "d.tsv:1", "d.tsv:2"]
