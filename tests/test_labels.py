"""Class names are never numbered by their sort order for a model ([6/7] 1): a newcomer's CSV labelled
happy/unhappy on a model without class names got accuracy 0.033, exit 0, no notice (unhappy sorts after
happy; the model meant 1 = happy). Now: one line asking for ids or ``--label-map``, or the explicit map,
recorded in the header; the zoo's SST-2 models name their classes; a schema's declared ids are kept."""

from __future__ import annotations

import json

import pytest

NAMELESS = '''
def clf(texts):  # 1 = happy: "great" makes it happy
    return [[0.1, 0.9] if "great" in t.split() else [0.9, 0.1] for t in texts]
'''
NAMED = NAMELESS + "\nclf.labels = ['negative', 'positive']\n"
ROWS = [("happy", "a great film ."), ("unhappy", "a dull film ."), ("happy", "great acting and a great cast ."),
        ("unhappy", "slow and long ."), ("happy", "great fun .")]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "nameless.py").write_text(NAMELESS)
    (tmp_path / "named.py").write_text(NAMED)
    (tmp_path / "d.csv").write_text("label,text\n" + "".join(f"{y},{t}\n" for y, t in ROWS))
    return tmp_path


def _json(r) -> dict:
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_names_on_a_nameless_model_are_one_line_never_a_silent_sort(files, cli):
    for command in (["evaluate"], ["attack", "--method", "genetic", "--no-ppl"], ["wordorder"]):
        r = cli(*command, "--model", f"{files}/nameless.py:clf", "--data", str(files / "d.csv"))
        assert r.exit_code == 2, (command, r.output)
        # no guessed map: happy=0,unhappy=1 (the sort order) was the inverse of this model (#84)
        assert "has no class names" in r.output and "--label-map happy=<id>,unhappy=<id>" in r.output, r.output
        assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1


def test_an_explicit_label_map_is_used_and_recorded(files, cli, tmp_path):
    r = cli("evaluate", "--model", f"{files}/nameless.py:clf", "--data", str(files / "d.csv"),
            "--label-map", "happy=1,unhappy=0", "--json")
    assert r.exit_code == 0, r.output
    assert _json(r)["accuracy"] == 1.0 and _json(r)["labels"] == ["unhappy", "happy"]
    out = tmp_path / "a.jsonl"
    r = cli("attack", "--model", f"{files}/nameless.py:clf", "--data", str(files / "d.csv"), "--method", "genetic",
            "--no-ppl", "--label-map", "HAPPY=1, unhappy=0", "--output", str(out), "--json")
    assert r.exit_code == 0, r.output
    header = json.loads(out.read_text().splitlines()[0])["header"]
    assert header["config"]["labels"] == ["unhappy", "happy"]  # the map, class id → name, in the header
    records = [json.loads(x) for x in out.read_text().splitlines()[1:]]
    assert {x["id"]: x["label"] for x in records} == {f"d.csv:{i}": int(y == "happy") for i, (y, _) in enumerate(ROWS)}
    r = cli("attack", "--model", f"{files}/nameless.py:clf", "--data", str(files / "d.csv"), "--method", "genetic",
            "--no-ppl", "--label-map", "happy=0,unhappy=1", "--output", str(out), "--resume")
    assert r.exit_code == 2 and "labels" in r.output  # another map: another run, never mixed into this file


@pytest.mark.parametrize("label_map, message", [
    ("happy=1", "does not map the data's class 'unhappy'"),
    ("happy=1,unhappy=2", "has label 2, but model nameless.py:clf has 2 classes (0..1)"),
    ("happy:1,unhappy=0", "--label-map takes name=id pairs"),
    ("happy=1,happy=0", "names 'happy' twice"),
])
def test_a_bad_label_map_is_one_line(files, cli, label_map, message):
    r = cli("evaluate", "--model", f"{files}/nameless.py:clf", "--data", str(files / "d.csv"), "--label-map", label_map)
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output


def test_a_label_map_on_ids_and_names_a_model_does_not_have(files, cli):
    (files / "ids.csv").write_text("label,text\n1,a great film .\n0,a dull film .\n")
    r = cli("evaluate", "--model", f"{files}/nameless.py:clf", "--data", str(files / "ids.csv"), "--label-map", "a=1")
    assert r.exit_code == 2 and "labels are class ids already" in r.output, r.output
    r = cli("evaluate", "--model", f"{files}/named.py:clf", "--data", str(files / "d.csv"))
    assert r.exit_code == 2 and "'happy' is not a class of model named.py:clf (negative, positive)" in r.output
    r = cli("evaluate", "--model", f"{files}/named.py:clf", "--data", str(files / "d.csv"),
            "--label-map", "happy=1,unhappy=0", "--json")
    assert r.exit_code == 0 and _json(r)["accuracy"] == 1.0, r.output


def test_a_file_of_one_class_name_maps_by_name_not_to_class_0(files, cli):
    """All labels "positive": the sorted order made positive class 0 and an accurate model look always wrong."""
    (files / "pos.csv").write_text("label,text\npositive,a great film .\npositive,great fun .\n")
    r = cli("evaluate", "--model", f"{files}/named.py:clf", "--data", str(files / "pos.csv"), "--json")
    assert r.exit_code == 0 and _json(r)["accuracy"] == 1.0, r.output


def test_declared_class_ids_of_a_schema_are_kept_for_a_nameless_model(files, cli):
    """A dataset whose schema declares each name's id (a ClassLabel) says what each id means: kept as declared."""
    import datasets

    ds = datasets.Dataset.from_dict({"text": [t for _, t in ROWS], "label": [1 if y == "happy" else 0 for y, _ in ROWS]},
                                    features=datasets.Features({"text": datasets.Value("string"),
                                                                "label": datasets.ClassLabel(names=["unhappy", "happy"])}))
    ds.save_to_disk(files / "saved")
    r = cli("evaluate", "--model", f"{files}/nameless.py:clf", "--data", f"hf:{files / 'saved'}", "--json")
    assert r.exit_code == 0 and _json(r)["accuracy"] == 1.0 and _json(r)["labels"] == ["unhappy", "happy"], r.output


def test_the_zoos_sst2_models_name_their_classes():
    from textaudit.models.zoo.checkpoint import class_names

    assert class_names({"num_classes": 2, "data": "sst2", "labels": ["0", "1"]}) == ["negative", "positive"]
    assert class_names({"num_classes": 2, "data": "sst2:train"}) == ["negative", "positive"]
    assert class_names({"num_classes": 3, "data": "reviews.csv", "labels": ["bad", "good", "ok"]}) == ["bad", "good", "ok"]
    assert class_names({"num_classes": 2, "data": "reviews.csv", "labels": ["0", "1"]}) == ["0", "1"]


def test_a_swapped_label_map_is_noticed_below_chance_with_its_interval(files, cli, tmp_path):
    """#84: a swapped map gave accuracy 0.205, exit 0, no word. A two-class accuracy whose whole interval is below
    chance now warns that the map may be inverted — evaluate and attack alike (the attack skips the inputs it reads as
    already misclassified) — and the right map gives no warning."""
    rows = ROWS * 3  # 15 examples: an interval that can lie below ½
    (files / "d15.csv").write_text("label,text\n" + "".join(f"{y},{t}\n" for y, t in rows))
    swapped = ("--model", f"{files}/nameless.py:clf", "--data", str(files / "d15.csv"), "--label-map", "happy=0,unhappy=1")
    r = cli("evaluate", *swapped, "--json")
    assert r.exit_code == 0, r.output
    out = _json(r)
    assert out["accuracy"] == 0.0 and out["accuracy_ci95"][1] < 0.5
    warning = ("warning: accuracy 0.000 [0.000, 0.204] on 15 examples is below chance (0.5) for two classes: the label "
               "map may be inverted (the data's 0 read as the model's 1); check the model's class names or --label-map")
    assert out["warnings"] == [warning] and warning in r.stderr
    r = cli("attack", *swapped, "--method", "genetic", "--no-ppl", "--json")
    assert r.exit_code == 0, r.output
    out = _json(r)
    assert out["skip_reasons"] == {"already misclassified": 15} and out["warnings"] == [warning] and warning in r.stderr
    right = ("--model", f"{files}/nameless.py:clf", "--data", str(files / "d15.csv"), "--label-map", "happy=1,unhappy=0")
    for command in (["evaluate"], ["attack", "--method", "genetic", "--no-ppl"]):
        r = cli(*command, *right, "--json")
        assert r.exit_code == 0 and "warnings" not in _json(r) and "below chance" not in r.output, r.output
