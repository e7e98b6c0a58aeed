"""``audit replay``: an attack's findings re-checked on other models, from real attack results files
of small real searches (a tiny masked LM, plug-in models whose behaviour is known)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_report import ROBUST, WEAK  # positive only while "film" is there; always positive

NEGATIVE = '''
def clf(texts):  # always negative: misclassifies every (positive) input
    return [[0.7, 0.3] for t in texts]
'''
ROWS = ["a deep and meaningful film .", "the film is long but good .", "one more film that is deep .",
        "a warm and funny film here ."]


@pytest.fixture(scope="module")
def found(tiny_mlm, tmp_path_factory):
    """SO-Enum (k = 1) and Genetic results files of the weak model on four positive sentences."""
    from typer.testing import CliRunner

    from textaudit.cli.main import app

    d = tmp_path_factory.mktemp("replay")
    tiny_mlm.model.save_pretrained(d / "mlm")
    tiny_mlm.tokenizer.save_pretrained(d / "mlm")
    for name, code in (("weak", WEAK), ("robust", ROBUST), ("negative", NEGATIVE)):
        (d / f"{name}.py").write_text(code)
    (d / "data.tsv").write_text("label\ttext\n" + "".join(f"1\t{r}\n" for r in ROWS))
    cli = CliRunner()
    for method in ("so-enum", "genetic"):
        args = ["attack", "--model", f"{d}/weak.py:clf", "--method", method, "--data", str(d / "data.tsv"), "--no-ppl",
                "--output", str(d / f"{method}.jsonl")]
        if method == "so-enum":
            args += ["--k", "1", "--mlm", str(d / "mlm"), "--pairs-file", str(d / "pairs.txt"), "--naturalness", "off"]
            (d / "pairs.txt").write_text("film,movie\nfilm,picture\n")
        r = cli.invoke(app, args)
        assert r.exit_code == 0, r.output
    return d


def _records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()[1:]]


def test_findings_replayed_on_the_same_model_all_still_hold(found, cli):
    successes = [r for m in ("so-enum", "genetic") for r in _records(found / f"{m}.jsonl") if r["status"] == "success"]
    assert {r["method"] for r in successes} == {"so-enum", "genetic"}  # both kinds of finding are there
    r = cli("replay", str(found / "so-enum.jsonl"), str(found / "genetic.jsonl"), "--model", f"{found}/weak.py:clf",
            "--json", "--output", str(found / "same.jsonl"))
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["findings"] == len(successes) and out["still"] == len(successes) and out["still_share"] == 1.0
    assert out["fixed"] == out["not_applicable"] == 0
    from textaudit.results import load

    back = load(found / "same.jsonl")
    df = back.to_pandas()
    assert len(df) == len(successes) and set(df["status"]) == {"still"} and set(df["order"]) == {"first", "second"}
    assert {k: v for k, v in back.summary().items()} == out  # the file gives back the command's own summary


def test_a_model_that_fixed_them_and_one_where_they_do_not_apply(found):
    import textaudit

    files = [found / "so-enum.jsonl", found / "genetic.jsonl"]
    fixed = textaudit.replay(files, f"{found}/robust.py:clf")  # constant: no flip, no misclassification
    assert fixed.still == 0 and fixed.fixed == fixed.summary()["findings"] > 0 and fixed.not_applicable == 0
    wrong = textaudit.replay(files, f"{found}/negative.py:clf")
    # second order: a constant model flips nothing (fixed); first order: it misclassifies every input (not applicable)
    by = {(r["order"], r["status"]) for r in wrong.records}
    assert by == {("second", "fixed"), ("first", "not_applicable")}
    assert wrong.still_share == 0.0


def test_a_baseline_pairs_the_findings_fixed_and_regressed_with_mcnemar(found, cli):
    files = [str(found / "so-enum.jsonl"), str(found / "genetic.jsonl")]
    r = cli("replay", *files, "--model", f"{found}/weak.py:clf", "--baseline", f"{found}/robust.py:clf", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    n = out["findings"]
    # fixed on the baseline, holding again on the model: every finding is a regression
    assert out["regressed"] == n and out["fixed_by_model"] == 0 and out["baseline_fixed"] == n and out["paired"] == n
    from scipy.stats import binomtest

    assert out["mcnemar_p"] == pytest.approx(binomtest(0, n, 0.5).pvalue, rel=1e-3)  # (as --json rounds it)
    r = cli("replay", *files, "--model", f"{found}/robust.py:clf", "--baseline", f"{found}/weak.py:clf")
    assert r.exit_code == 0 and f"{n} fixed, 0 regressed" in " ".join(r.stdout.split()), r.output
    # and what "fixed" does not mean, under the table: not a fresh audit of the model
    assert "fixed means only that this very x̃" in r.output and "attack it afresh" in " ".join(r.output.split())


def test_bad_findings_are_one_line_errors_and_nothing_is_written(found, cli, tmp_path):
    weak = f"{found}/weak.py:clf"
    (tmp_path / "wo.jsonl").write_text('{"header": {"command": "wordorder", "config": {}}}\n{"id": "a"}\n')
    cases = {
        "wo.jsonl": "holds wordorder results, not an attack's or a bias run's findings",
        "missing.jsonl": "does not exist",
    }
    lines = (found / "so-enum.jsonl").read_text().splitlines()
    (tmp_path / "damaged.jsonl").write_text("\n".join(lines[:2] + ["{not json"] + lines[2:]) + "\n")
    cases["damaged.jsonl"] = "damaged.jsonl:3 is not valid JSON"
    genetic = (found / "genetic.jsonl").read_text().splitlines()
    first = next(i for i, x in enumerate(genetic) if '"status": "success"' in x)
    rec = json.loads(genetic[first])
    rec["label"] = 4
    (tmp_path / "task.jsonl").write_text("\n".join(genetic[:first] + [json.dumps(rec)] + genetic[first + 1:]) + "\n")
    cases["task.jsonl"] = f"task.jsonl:{first + 1}: label 4 but model"
    header = json.loads(genetic[0])
    header["header"]["config"]["perturb_side"] = "second"
    (tmp_path / "pairs.jsonl").write_text("\n".join([json.dumps(header)] + genetic[1:]) + "\n")
    cases["pairs.jsonl"] = "holds findings on sentence pairs (second text changed)"
    for name, msg in cases.items():
        r = cli("replay", str(tmp_path / name), "--model", weak, "--output", str(tmp_path / "out.jsonl"))
        assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output, (name, r.output)
        assert len(r.output.strip().splitlines()) == 1, r.output
        assert not (tmp_path / "out.jsonl").exists()
    (tmp_path / "out.jsonl").write_text("kept\n")
    r = cli("replay", str(found / "so-enum.jsonl"), "--model", weak, "--output", str(tmp_path / "out.jsonl"))
    assert r.exit_code == 2 and (tmp_path / "out.jsonl").read_text() == "kept\n"


def test_a_suite_gates_on_a_replay(found, cli, tmp_path):
    """[replay] in a suite: its max_still and max_regressed are thresholds like the others (exit 1 when crossed)."""
    files = f'["{found / "so-enum.jsonl"}", "{found / "genetic.jsonl"}"]'
    (tmp_path / "ok.toml").write_text(f'[suite]\noutput_dir = "ok"\n[replay]\nfindings = {files}\n'
                                      f'model = "{found}/robust.py:clf"\nbaseline = "{found}/weak.py:clf"\n'
                                      "max_still = 0.2\nmax_regressed = 0\n")
    r = cli("run", str(tmp_path / "ok.toml"), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert [(c["name"], c["value"], c["passed"]) for c in out["checks"]] == [("replay.still_share_max", 0.0, True),
                                                                           ("replay.regressed_max", 0.0, True)]
    (tmp_path / "bad.toml").write_text((tmp_path / "ok.toml").read_text().replace("robust.py", "TMP").replace(
        "weak.py", "robust.py").replace("TMP", "weak.py").replace('"ok"', '"bad"'))
    r = cli("run", str(tmp_path / "bad.toml"))
    assert r.exit_code == 1 and "replay.regressed_max" in r.output and "replay.still_share_max" in r.output, r.output
    (tmp_path / "nobase.toml").write_text(f'[replay]\nfindings = {files}\nmodel = "cnn"\nmax_regressed = 0\n')
    r = cli("run", str(tmp_path / "nobase.toml"))
    assert r.exit_code == 2 and "max_regressed needs baseline" in r.output


def test_the_report_renders_a_replay_regressions_first(found, cli, tmp_path):
    files = [str(found / "so-enum.jsonl"), str(found / "genetic.jsonl")]
    r = cli("replay", *files, "--model", f"{found}/weak.py:clf", "--baseline", f"{found}/robust.py:clf",
            "--output", str(tmp_path / "r.jsonl"))
    assert r.exit_code == 0, r.output
    r = cli("report", str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "r.md"), "--format", "md")
    assert r.exit_code == 0, r.output
    md = (tmp_path / "r.md").read_text()
    n = len([x for x in (tmp_path / "r.jsonl").read_text().splitlines()[1:]])
    assert f"Replay: {n} findings on" in md and f"{n} regressed" in md
    assert f"{n} regressed (fixed on robust.py:clf, holding again): shown first" in md
    assert md.count("x̃:") == min(n, 12)  # the findings that still hold, as examples


# -- a bias run's findings: B_{p,k} of another model on the very sentences the run scored -----------------------

PLANTED = '''
import math, zlib
BONUS = {bonus}
def clf(texts):  # P(positive) = sigmoid(Σ word scores + BONUS·[she ∈ x]): BONUS > 0 prefers "she"
    out = []
    for t in texts:
        words = t.lower().split()
        z = sum((zlib.crc32(w.encode()) % 1000) / 1000 - 0.5 for w in words if w not in ("he", "she"))
        p = 1 / (1 + math.exp(-(z + BONUS * ("she" in words))))
        out.append([1 - p, p])
    return out
'''
BIAS_ROWS = ["he said the film was a deep and moving story .", "the story is slow but he makes it work .",
             "she gives a warm and funny performance here .", "he was not funny at all in this one .",
             "a dull plot that nobody will remember .",
             # eight more sources of X_p: twelve in all, enough for a finding (a claim needs 10 sources, #84)
             "he wrote a sharp and clever script .", "the cast is fine but she steals the show .",
             "he never finds the heart of the tale .", "she makes the long middle hour fly .",
             "he keeps the tone light and warm .", "the ending is weak and he knows it .",
             "she plays the mother with great care .", "he directs with a sure hand ."]


def write_world(d: Path, tiny_mlm) -> Path:
    """Into ``d``: a plug-in that flips on synonyms of "film" (weak.py), one with a planted he/she bias (she1.py),
    their data (data.tsv, bias.tsv) and the tiny masked LM (mlm/)."""
    tiny_mlm.model.save_pretrained(d / "mlm")
    tiny_mlm.tokenizer.save_pretrained(d / "mlm")
    (d / "weak.py").write_text(WEAK)
    (d / "she1.py").write_text(PLANTED.format(bonus=1.0))
    (d / "data.tsv").write_text("label\ttext\n" + "".join(f"1\t{r}\n" for r in ROWS))
    (d / "bias.tsv").write_text("text\n" + "".join(f"{r}\n" for r in BIAS_ROWS))
    return d


@pytest.fixture(scope="module")
def bias_found(found):
    """An audit bias file (k = 1, he/she) of a model that prefers "she", and the same model with other biases."""
    from typer.testing import CliRunner

    from textaudit.cli.main import app

    d = found
    for name, bonus in (("she1", 1.0), ("she0", 0.0), ("he1", -1.0)):
        (d / f"{name}.py").write_text(PLANTED.format(bonus=bonus))
    (d / "bias.tsv").write_text("text\n" + "".join(f"{r}\n" for r in BIAS_ROWS))
    r = CliRunner().invoke(app, ["bias", "--pair", "he,she", "--model", f"{d}/she1.py:clf", "--data", str(d / "bias.tsv"),
                                 "--k", "1", "--mlm", str(d / "mlm"), "--kappa", "5", "--delta", "1e9",
                                 "--output", str(d / "bias.jsonl"), "--json"])
    assert r.exit_code == 0, r.output
    return d, json.loads(r.stdout.strip().splitlines()[-1])


def test_a_bias_file_replayed_on_its_own_model_gives_back_its_b_and_its_findings_still_hold(bias_found, cli):
    d, run = bias_found
    by_k = run["pairs"][0]["by_k"]
    assert set(by_k) == {"0", "1"} and by_k["1"]["n"] > by_k["0"]["n"] == 12  # the neighbours were scored
    assert all(e["sources"] == 12 and e["significant"] for e in by_k.values())
    assert all(e["ci95"][0] > 0 for e in by_k.values())  # the run found a bias at both k: two findings
    r = cli("replay", str(d / "bias.jsonl"), "--model", f"{d}/she1.py:clf", "--json", "--output", str(d / "bias-same.jsonl"))
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert (out["findings"], out["still"], out["fixed"], out["still_share"]) == (2, 2, 0, 1.0)
    from textaudit.results import load

    back = load(d / "bias-same.jsonl")
    recs = {rec["k"]: rec for rec in back.records}
    for k, e in by_k.items():  # the same B, interval and sentences as the run: the replay is exact
        rec = recs[int(k)]
        assert rec["status"] == "still" and rec["order"] == "bias" and rec["pair"] == ["he", "she"]
        assert rec["B"] == pytest.approx(e["B"], abs=2e-6) and rec["found_B"] == pytest.approx(e["B"], abs=2e-6)
        assert rec["ci95"] == pytest.approx(e["ci95"], abs=2e-6) and rec["n"] == e["n"] and rec["sources"] == e["sources"]
    assert back.summary() == out
    r = cli("replay", str(d / "bias.jsonl"), "--model", f"{d}/she1.py:clf")
    assert r.exit_code == 0 and "B on model" in r.stdout and "still" in r.stdout, r.output


def test_a_bias_fixed_reversed_or_regressed_against_a_baseline(bias_found, cli, tmp_path):
    import textaudit

    d, run = bias_found
    none = textaudit.replay(d / "bias.jsonl", f"{d}/she0.py:clf")  # no preference: F = 0 on every sentence
    assert [(r["status"], r["B"], r["ci95"]) for r in none.records] == [("fixed", 0.0, [0.0, 0.0])] * 2
    other = textaudit.replay(d / "bias.jsonl", f"{d}/he1.py:clf")  # a bias the other way is no longer this finding
    assert {r["status"] for r in other.records} == {"fixed"} and all(r["B"] < 0 and r["ci95"][1] < 0 for r in other.records)
    back = textaudit.replay(d / "bias.jsonl", f"{d}/she1.py:clf", baseline=f"{d}/she0.py:clf")
    s = back.summary()
    assert (s["regressed"], s["fixed_by_model"], s["baseline_fixed"], s["paired"]) == (2, 0, 2, 2)
    r = cli("replay", str(d / "bias.jsonl"), str(d / "so-enum.jsonl"), "--model", f"{d}/she1.py:clf",
            "--baseline", f"{d}/she0.py:clf", "--output", str(tmp_path / "r.jsonl"))
    assert r.exit_code == 0 and "(regressed)" in r.stdout, r.output
    r = cli("report", str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "r.md"), "--format", "md")
    assert r.exit_code == 0, r.output
    md = (tmp_path / "r.md").read_text()
    assert "on the bias run's own sentences (a finding" in md and md.count("still (regressed)") == 2


def test_bad_bias_findings_are_one_line_errors(bias_found, cli, tmp_path):
    d, _ = bias_found
    lines = (d / "bias.jsonl").read_text().splitlines()
    row = next(i for i, x in enumerate(lines) if '"unit"' in x and '"F"' in x)
    rec = json.loads(lines[row])
    held = "she" if rec["reversed"] else "he"
    rec["text"] = " ".join("someone" if w.lower() == held else w for w in rec["text"].split())
    (tmp_path / "edited.jsonl").write_text("\n".join(lines[:row] + [json.dumps(rec)] + lines[row + 1:]) + "\n")
    old = [json.loads(x) for x in (tmp_path / "edited.jsonl").read_text().splitlines()]
    for x in old:  # the same edit in a file written before units carried their digest
        x.pop("sha256", None)
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(x) + "\n" for x in old))
    three = '''def clf(texts):\n    return [[0.2, 0.3, 0.5] for t in texts]\n'''
    (tmp_path / "three.py").write_text(three)
    cases = [(tmp_path / "edited.jsonl", f"{d}/she1.py:clf", "do not match the digest its run wrote"),
             (tmp_path / "old.jsonl", f"{d}/she1.py:clf", f"old.jsonl:{row + 1}: the sentence holds 0 '{held}'"),
             (d / "bias.jsonl", f"{tmp_path}/three.py:clf", "B was measured over 2 classes but model three.py:clf has 3")]
    for path, model, msg in cases:
        r = cli("replay", str(path), "--model", model, "--output", str(tmp_path / "out.jsonl"))
        assert r.exit_code == 2 and msg in r.output and len(r.output.strip().splitlines()) == 1, r.output
        assert not (tmp_path / "out.jsonl").exists()


def test_a_bias_file_whose_sentences_were_edited_is_refused_by_every_reader_not_replayed_as_fixed(bias_found, cli,
                                                                                                  tmp_path):
    """#63 (WRONG — replays): sentences edited after the run (each still holding its pair word, so every other check
    passes) replayed on the run's own model as "fixed"; each unit's marker now carries a digest of its lines, and
    replay, --resume, results.load and the report refuse a unit that no longer matches it, in one line."""
    d, _ = bias_found
    recs = [json.loads(x) for x in (d / "bias.jsonl").read_text().splitlines()]
    for r in recs:  # every scored sentence made neutral: the model's bias is no longer in them
        if "unit" in r and "text" in r:
            held = "she" if r["reversed"] else "he"
            r["text"] = f"{held} is here ."
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(r) + "\n" for r in recs))
    for args in (("replay", str(edited), "--model", f"{d}/she1.py:clf"), ("report", str(edited), "--out",
                                                                         str(tmp_path / "r.html"))):
        r = cli(*args)
        assert r.exit_code == 2 and "do not match the digest its run wrote" in r.output, (args, r.output)
        assert len(r.output.strip().splitlines()) == 1 and "fixed" not in r.output
    from textaudit.errors import TextAuditError
    from textaudit.results import load

    with pytest.raises(TextAuditError, match="edited after the run"):
        load(edited).summary()
    r = cli("bias", "--pair", "he,she", "--model", f"{d}/she1.py:clf", "--data", str(d / "bias.tsv"), "--k", "1", "--mlm",
            str(d / "mlm"), "--kappa", "5", "--delta", "1e9", "--output", str(edited), "--resume")
    assert r.exit_code == 2 and "do not match the digest" in r.output, r.output


def test_fresh_attacks_the_model_again_beside_the_files_own_records(found, cli):
    """--fresh N: the replay says these x̃ no longer flip on the constant model; the fresh attack, with each
    file's method and settings on the same examples, says what the replay cannot — it finds nothing now either,
    beside the file's own successes there, paired (McNemar)."""
    from scipy.stats import binomtest

    files = [str(found / "so-enum.jsonl"), str(found / "genetic.jsonl")]
    r = cli("replay", *files, "--model", f"{found}/robust.py:clf", "--fresh", "3", "--pairs-file", str(found / "pairs.txt"),
            "--json")
    assert r.exit_code == 0, r.output
    # each file's attack says its time before it starts, as audit attack does (#84: a 2.5-minute attack said nothing)
    said = [ln for ln in r.output.splitlines() if ln.startswith("time: about ")]
    assert len(said) == 2 and all(" for 3 examples here" in ln for ln in said), r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    fresh = {g["method"]: g for g in out["fresh"]}
    assert set(fresh) == {"so-enum", "genetic"}
    for method, g in fresh.items():
        attacked = {x["id"]: x for x in _records(found / f"{method}.jsonl") if x["status"] in ("success", "failed")}
        assert g["examples"] == g["paired"] == min(3, len(attacked)) and g["then_model"].endswith("weak.py:clf")
        assert g["now_success"] == 0 and g["then_success"] > 0  # the constant model: no flip found afresh
        assert g["mcnemar_p"] == pytest.approx(binomtest(g["then_success"], g["then_success"], 0.5).pvalue, rel=1e-3)
        if method == "so-enum":
            assert g["k"] == 1  # the file's own k
    # the same sample under the same seed: the same figures again; and the table in text mode
    again = cli("replay", *files, "--model", f"{found}/robust.py:clf", "--fresh", "3", "--pairs-file",
                str(found / "pairs.txt"), "--json")
    assert json.loads(again.stdout.strip().splitlines()[-1])["fresh"] == out["fresh"]
    text = cli("replay", *files, "--model", f"{found}/robust.py:clf", "--fresh", "3", "--pairs-file", str(found / "pairs.txt"))
    assert text.exit_code == 0 and "fresh attack on" in text.stdout and "success now" in text.stdout, text.output
    bad = cli("replay", *files, "--model", f"{found}/robust.py:clf", "--pairs-file", str(found / "pairs.txt"))
    assert bad.exit_code == 2 and "--pairs-file goes with --fresh" in bad.output
    out = found / "never.jsonl"
    missing = cli("replay", *files, "--model", f"{found}/robust.py:clf", "--fresh", "3", "--pairs-file",
                  str(found / "none.txt"), "--output", str(out))
    assert missing.exit_code == 2 and "not found" in missing.output and "Traceback" not in missing.output
    assert not out.exists() and "fresh attack:" not in missing.output  # refused before anything ran
    zero = cli("replay", *files, "--model", f"{found}/robust.py:clf", "--fresh", "0")
    assert zero.exit_code == 2 and "--fresh" in zero.output and "Traceback" not in zero.output


def test_first_order_findings_are_replayed_by_class_name_or_refused(tmp_path, cli):
    """#63: the class names recorded with findings were ignored, so a model whose classes come in another order
    got wrong statuses (exit 0). A label is now the model's class of the same name; a class it lacks is one line."""
    from textaudit.formats.jsonl import write_results

    (tmp_path / "m.py").write_text('''
def same(texts):  # P(positive) high with "good"
    return [[0.1, 0.9] if "good" in t.split() else [0.9, 0.1] for t in texts]
same.labels = ["negative", "positive"]

def swapped(texts):  # the same model, its classes in the other order
    return [[0.9, 0.1] if "good" in t.split() else [0.1, 0.9] for t in texts]
swapped.labels = ["positive", "negative"]

def other(texts):
    return [[0.5, 0.5] for t in texts]
other.labels = ["pos", "neg"]
''')
    rows = [("a good film", 1, "a fine film"), ("a good plot", 1, "a good plot indeed"), ("a dull film", 0, "a good film"),
            ("a dull plot", 0, "a dull plot indeed")]
    records = [{"id": str(i), "status": "success", "method": "genetic", "text": t, "label": y, "vulnerable": v,
                "l0": 1, "queries": 2, "seconds": 0.0} for i, (t, y, v) in enumerate(rows)]
    write_results(tmp_path / "found.jsonl", records, command="attack",
                  config={"method": "genetic", "model": "old", "labels": ["negative", "positive"]})
    statuses = {}
    for name in ("same", "swapped"):
        r = cli("replay", str(tmp_path / "found.jsonl"), "--model", f"{tmp_path}/m.py:{name}", "--output",
                str(tmp_path / f"{name}.jsonl"), "--json")
        assert r.exit_code == 0, r.output
        statuses[name] = [x["status"] for x in _records(tmp_path / f"{name}.jsonl")]
    assert statuses["same"] == ["still", "fixed", "still", "fixed"] and statuses["swapped"] == statuses["same"]
    r = cli("replay", str(tmp_path / "found.jsonl"), "--model", f"{tmp_path}/m.py:other")
    assert r.exit_code == 2 and "class 'positive' of these findings is not a class of" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_named_findings_on_a_model_that_names_no_class_are_refused(tmp_path, cli):
    """#82 (WRONG): findings that name their classes, replayed on a model whose classes come in another order but which
    names none, got statuses from ids that mean other classes (every one "not_applicable", exit 0). Which output is
    which class cannot be checked then: one line says how to name them (bias findings are refused the same way)."""
    from textaudit.formats.jsonl import write_results

    (tmp_path / "m.py").write_text('''
def unnamed(texts):  # "positive" first, and no names to say so
    return [[0.9, 0.1] if "good" in t.split() else [0.1, 0.9] for t in texts]

def named(texts):
    return [[0.9, 0.1] if "good" in t.split() else [0.1, 0.9] for t in texts]
named.labels = ["positive", "negative"]
''')
    records = [{"id": "0", "status": "success", "method": "genetic", "text": "a good film", "label": 1,
                "vulnerable": "a fine film", "l0": 1, "queries": 2, "seconds": 0.0}]
    write_results(tmp_path / "found.jsonl", records, command="attack",
                  config={"method": "genetic", "model": "old", "labels": ["negative", "positive"]})
    r = cli("replay", str(tmp_path / "found.jsonl"), "--model", f"{tmp_path}/m.py:unnamed")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
    assert "name their classes (negative, positive) but model" in r.stderr and "labels attribute" in r.stderr
    ok = cli("replay", str(tmp_path / "found.jsonl"), "--model", f"{tmp_path}/m.py:named", "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout.strip().splitlines()[-1])["still"] == 1  # named: mapped by name


def test_bias_findings_on_a_model_that_names_no_class_are_refused(bias_found, cli, tmp_path):
    d, _ = bias_found
    (tmp_path / "n.py").write_text(PLANTED.format(bonus=1.0) + 'clf.labels = ["negative", "positive"]\n')
    r = cli("bias", "--pair", "he,she", "--model", f"{tmp_path}/n.py:clf", "--data", str(d / "bias.tsv"), "--k", "1",
            "--mlm", str(d / "mlm"), "--kappa", "5", "--delta", "1e9", "--output", str(tmp_path / "b.jsonl"), "--json")
    assert r.exit_code == 0, r.output
    r = cli("replay", str(tmp_path / "b.jsonl"), "--model", f"{d}/she1.py:clf")
    assert r.exit_code == 2 and "names none, so its class order cannot be checked" in r.stderr, r.output
    assert len(r.stderr.strip().splitlines()) == 1
