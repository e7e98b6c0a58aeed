"""``audit compare``, ``audit report`` and their numbers, on real results files of every kind built
from tiny models; the HTML is parsed, and rendered in headless Chromium when it is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html import escape as html_escape
from html import unescape as html_unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_bias import TEXTS as BIAS_TEXTS
from test_bias import planted as she_planted

from textaudit.attacks.compare import SUMMARY, cell_path, run_compare
from textaudit.fairness import CounterfactualBias, run_bias
from textaudit.results import read_jsonl
from textaudit.stats import mcnemar, wilson

WEAK = '''
def clf(texts):  # positive only while "film" is there: any synonym of "film" flips it
    return [[0.1, 0.9] if "film" in t.split() else [0.8, 0.2] for t in texts]
'''
ROBUST = '''
def clf(texts):  # always positive, whatever the words
    return [[0.3, 0.7] for t in texts]
'''
ROWS = ["a deep and meaningful film .", "the film is long but good .", "one more film that is deep .",
        "a warm and funny film here .", "this film works ."]


@pytest.fixture(scope="module")
def results(tiny_mlm, tmp_path_factory):
    """Real results files: a compare directory (2 models × 2 methods), a bias run, a word-order run,
    a certification, a learnability study and PerturbScore tuples."""
    d = tmp_path_factory.mktemp("results")
    cache = pytest.MonkeyPatch()  # a module fixture starts before the per-test private cache: its own one here
    cache.setenv("TEXTAUDIT_CACHE", str(d / "cache"))
    tiny_mlm.model.save_pretrained(d / "mlm")
    tiny_mlm.tokenizer.save_pretrained(d / "mlm")
    (d / "weak.py").write_text(WEAK)
    (d / "robust.py").write_text(ROBUST)
    (d / "data.tsv").write_text("label\ttext\n" + "".join(f"1\t{r}\n" for r in ROWS))
    models = [f"{d}/weak.py:clf", f"{d}/robust.py:clf"]
    compare = run_compare(models, ["so-beam", "genetic"], d / "cmp", data=str(d / "data.tsv"), k=1, mlm=str(d / "mlm"),
                          progress=False,
                          naturalness=False)  # the paper's search: the tiny random masked LM knows no English
    run_bias(CounterfactualBias(she_planted(1.0), tiny_mlm, kappa=5, delta=1e9), [("he", "she")], 1, BIAS_TEXTS,
             output=d / "bias.jsonl", progress=False)
    from typer.testing import CliRunner

    from textaudit.cli.main import app
    from textaudit.models.zoo import train_model

    cli = CliRunner()
    r = cli.invoke(app, ["wordorder", "--model", models[0], "--data", str(d / "data.tsv"), "--output", str(d / "wo.jsonl")])
    assert r.exit_code == 0, r.output
    train_model("bow-ibp", max_train=1500, epochs=1, progress=False)
    r = cli.invoke(app, ["certify", "--model", "bow-ibp", "--limit", "30", "--output", str(d / "certify.jsonl")])
    assert r.exit_code == 0, r.output
    r = cli.invoke(app, ["learnability", "--model", "bow", "--perturbation", "leet_letters,shuffle_word", "--train-size",
                         "400", "--probabilities", "0.1,1.0", "--output", str(d / "learn.jsonl")])
    assert r.exit_code == 0, r.output
    import torch
    from test_perturbscore import WORDS

    from textaudit.models.torch_backend import torch_classifier
    from textaudit.models.zoo.architectures import build_module
    from textaudit.models.zoo.vocab import Vocab, WordTokenizer
    from textaudit.robustness.perturbscore import build_tuples

    torch.manual_seed(0)
    vocab = Vocab(WORDS)
    tiny = torch_classifier(build_module("cnn", torch.randn(len(vocab), 50) * 0.5, 2).eval(), WordTokenizer(vocab),
                            name="tiny-cnn", device="cpu", num_classes=2)
    build_tuples(tiny, ["a good film and a great story", "the plot is dull and the acting awful"], n=3,
                 output=d / "tuples.jsonl", progress=False, max_eps=2.0)
    cache.undo()
    return {"dir": d, "models": models, "compare": compare}


def test_compare_cells_are_attack_files_and_paired_tests_match_the_records(results):
    d, (weak, robust), c = results["dir"], results["models"], results["compare"]
    assert (d / "cmp" / SUMMARY).is_file()
    by = {(x["model"], x["method"]): x for x in c["cells"]}
    assert set(by) == {(m, a) for m in (weak, robust) for a in ("so-beam", "genetic")}
    recs = {key: [r for r in read_jsonl(cell_path(d / "cmp", *key))] for key in by}
    for key, x in by.items():
        attacked = [r for r in recs[key] if r["status"] in ("success", "failed")]
        wins = sum(r["status"] == "success" for r in attacked)
        assert x["attacked"] == len(attacked) and x["success_rate_ci95"] == list(wilson(wins, len(attacked)))
    assert by[(robust, "so-beam")]["success_rate"] == 0.0  # nothing flips a constant model
    assert by[(weak, "so-beam")]["success_rate"] == 1.0  # every sentence has "film"
    p = next(p for p in c["paired"] if p["a"] == f"{weak}/so-beam" and p["b"] == f"{robust}/so-beam")
    ok = lambda key: {r["id"]: r["status"] == "success" for r in recs[key]}  # noqa: E731
    a, b = ok((weak, "so-beam")), ok((robust, "so-beam"))
    assert p == {**p, **mcnemar([a[i] for i in sorted(a)], [b[i] for i in sorted(a)])}
    assert p["only_a"] == 5 and p["only_b"] == 0 and p["p"] == pytest.approx(2 / 32, rel=5e-3)
    assert not any(x["by"] == "model" and x["a"].endswith("so-beam") and x["b"].endswith("genetic") for x in c["paired"])


def test_results_load_back_into_pandas_with_the_commands_own_summary(results, tmp_path):
    from textaudit.attacks.run import summarize
    from textaudit.errors import TextAuditError
    from textaudit.fairness.bias import estimates_from_records, report
    from textaudit.results import load, read_header

    d, (weak, robust), c = results["dir"], results["models"], results["compare"]
    cell = cell_path(d / "cmp", weak, "so-beam")
    r = load(cell)
    df = r.to_pandas()
    assert len(df) == len(read_jsonl(cell)) == len(r) == len(ROWS)  # one row per record
    assert list(df["id"]) == [x["id"] for x in read_jsonl(cell)] and set(df["status"]) == {"success"}
    assert df.attrs["command"] == "attack" and df.attrs["config"] == read_header(cell)["config"]
    assert r.summary() == {**summarize(read_jsonl(cell), "so-beam", 1), "model": read_header(cell)["config"]["model"]}
    assert r.summary()["success_rate"] == 1.0
    folder = load(d / "cmp")  # a compare folder: every cell, and the matrix with its paired tests
    assert folder.summary()["paired"] == c["paired"] and len(folder.cells) == 4
    assert len(folder.to_pandas()) == sum(len(read_jsonl(cell_path(d / "cmp", m, a)))
                                          for m in (weak, robust) for a in ("so-beam", "genetic"))
    bias = load(d / "bias.jsonl")
    cfg = read_header(d / "bias.jsonl")["config"]
    assert bias.summary() == report(estimates_from_records(read_jsonl(d / "bias.jsonl"), cfg["k"], cfg["enumerate_k"]))
    assert load(d / "wo.jsonl").summary() == {"records": len(read_jsonl(d / "wo.jsonl"))}
    from textaudit.robustness.learnability import aggregate

    learn = read_jsonl(d / "learn.jsonl")
    assert load(d / "learn.jsonl").summary() == aggregate(learn, ["bow"], ["leet_letters", "shuffle_word"], [0.1, 1.0])
    assert len(load(d / "learn.jsonl").summary()["results"]) == 2
    assert load(d / "tuples.jsonl").summary()["model"] == "tiny-cnn"
    cert = load(d / "certify.jsonl").summary()["bow-ibp"]
    assert cert["n"] == 30 and 0 <= cert["certified_accuracy"] <= cert["accuracy"] <= 1
    # every kind of results file a command writes, into pandas: one row per record, the header in attrs
    kinds = {}
    for path in sorted(d.glob("*.jsonl")) + [cell_path(d / "cmp", weak, "genetic")]:
        df = load(path).to_pandas()
        header = read_header(path)
        recs = read_jsonl(path)
        assert len(df) == len(recs) > 0 and set(df.columns) == {key for x in recs for key in x}
        assert df.attrs["command"] == header["command"] and df.attrs["config"] == header["config"]
        kinds[header["command"]] = path.name
    assert set(kinds) == {"attack", "bias", "wordorder", "certify", "learnability", "perturbscore build"}
    page = r._repr_html_()  # what Jupyter shows: the settings and the summary, escaped
    assert "<table>" in page and "success_rate" in page and "<script" not in page
    (tmp_path / "x.jsonl").write_text('{"id": 1}\n')
    for bad, msg in ((tmp_path / "x.jsonl", "no textaudit header line"), (tmp_path / "none.jsonl", "does not exist"),
                     (tmp_path, "without compare.json")):
        with pytest.raises(TextAuditError, match=msg):
            load(bad)


def test_compare_reuses_its_cells(results, capsys):
    d, models = results["dir"], results["models"]
    before = {p.name: p.read_text() for p in (d / "cmp").glob("*.jsonl")}
    again = run_compare(models, ["so-beam", "genetic"], d / "cmp", data=str(d / "data.tsv"), k=1, mlm=str(d / "mlm"),
                        progress=False, naturalness=False)
    assert {p.name: p.read_text() for p in (d / "cmp").glob("*.jsonl")} == before  # nothing recomputed
    assert again["cells"] == results["compare"]["cells"]


def test_cli_compare_prints_the_matrix_and_refuses_bad_input(results, cli, tmp_path):
    d, models = results["dir"], results["models"]
    r = cli("compare", "--models", ",".join(models), "--methods", "so-beam,genetic", "--output-dir", str(d / "cmp"),
            "--data", str(d / "data.tsv"), "--k", "1", "--mlm", str(d / "mlm"), "--json", "--naturalness", "off")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.strip().splitlines()[-1])["cells"] == results["compare"]["cells"]
    r = cli("compare", "--models", "cnn", "--methods", "so-beam,nope", "--output-dir", str(tmp_path / "x"))
    assert r.exit_code == 2 and "unknown" in r.output and "nope" in r.output and not (tmp_path / "x").exists()
    r = cli("compare", "--models", "cnn,cnn", "--output-dir", str(tmp_path / "x"))
    assert r.exit_code == 2 and "names one twice" in r.output
    (tmp_path / "f").write_text("")
    r = cli("compare", "--models", "cnn", "--output-dir", str(tmp_path / "f"))
    assert r.exit_code == 2 and "is a file" in r.output


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.urls, self.tags = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if "id" in a:
            self.ids.append(a["id"])
        for k in ("src", "href", "action", "data"):
            if a.get(k):
                self.urls.append(a[k])


def _report_inputs(d: Path) -> list[str]:
    return [str(d / "cmp"), str(d / "bias.jsonl"), str(d / "wo.jsonl"), str(d / "certify.jsonl"), str(d / "learn.jsonl"),
            str(d / "tuples.jsonl")]


def test_report_has_every_section_and_nothing_external(results, cli, tmp_path):
    d = results["dir"]
    out = tmp_path / "report.html"
    old_mask = os.umask(0o022)
    try:
        r = cli("report", *_report_inputs(d), "--out", str(out))
    finally:
        os.umask(old_mask)
    assert r.exit_code == 0, r.output
    assert out.stat().st_mode & 0o777 == 0o644  # the umask's mode, as any file written here (not mkstemp's 0600)
    html = out.read_text()
    summary = (d / "cmp" / SUMMARY).resolve()
    assert os.path.relpath(summary, tmp_path.resolve()) in html and str(summary) not in html  # named from the report
    page = _Page()
    page.feed(html)
    kinds = {i.rsplit("-", 1)[0] for i in page.ids}
    assert {"summary", "compare", "attack", "bias", "wordorder", "certify", "learnability", "perturbscore"} <= kinds
    assert sum(i.startswith("attack-") and i.count("-") == 1 for i in page.ids) == 4  # the four cells
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", html)
    assert not re.search(r"https?:|//[a-z]|url\(", text, re.I)  # no URL anywhere: no CDN, no font, no link out
    assert all(u.startswith(("#", "data:image/png;base64,")) for u in page.urls), page.urls
    assert sum(u.startswith("data:image/png") for u in page.urls) >= 3  # bias histograms, B vs k, learnability
    assert "<mark>" in html and '<mark class="swap">' in html  # changed and swapped words highlighted
    assert "script" in page.tags and "link" not in page.tags
    # the headline numbers are the records' own: every input but the comparison (whose cells have rows of their own)
    # gives its kind's rows of the summary table, each as wide as the table
    from textaudit.kinds import HEADLINE_COLUMNS
    from textaudit.report.load import load_inputs
    from textaudit.report.sections import headline_rows

    assert "B_(p,1) = +" in html and "certified accuracy" in html
    for item in load_inputs(_report_inputs(d)):
        rows = headline_rows([item])
        assert (rows == []) == (item.kind == "compare") and all(len(row) == len(HEADLINE_COLUMNS) for row in rows)
        assert all(str(row[-1]) in html_unescape(html) for row in rows), item.kind
    # #52: the bias page gives audit bias's warning when B rests on fewer than 30 sources (the CLI's, word for word)
    from textaudit.fairness.bias import estimates_from_records, small_samples
    from textaudit.results import read_header

    cfg = read_header(d / "bias.jsonl")["config"]
    warnings = small_samples(estimates_from_records(read_jsonl(d / "bias.jsonl"), cfg["k"], cfg["enumerate_k"]))
    assert warnings and all(html_escape(w) in html for w in warnings)
    md = tmp_path / "report.md"
    r = cli("report", *_report_inputs(d), "--out", str(md))
    assert r.exit_code == 0, r.output
    text = md.read_text()
    assert text.startswith("# textaudit report") and "| model | so-beam | genetic |" in text and "**" in text


def test_report_bad_inputs_are_one_line_errors(results, cli, tmp_path):
    (tmp_path / "plain.jsonl").write_text('{"id": 1}\n')
    for args, msg in [([str(tmp_path / "nope.jsonl")], "does not exist"),
                      ([str(tmp_path / "plain.jsonl")], "has no header record"),
                      ([str(tmp_path)], "has no header record"),
                      ([str(results["dir"] / "bias.jsonl"), "--format", "pdf"], "unknown --format 'pdf'"),
                      ([str(results["dir"] / "bias.jsonl"), "--out", str(tmp_path)], "is a directory")]:
        r = cli("report", *args)
        assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output, (args, r.output)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _chromium_console(page: Path) -> list[str]:
    """The console messages (and uncaught errors) of ``page`` loaded in headless Chromium."""
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                        "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=600)
    return [line for line in r.stderr.splitlines() if ":CONSOLE" in line]


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt install chromium)")
def test_report_renders_in_chromium_without_console_errors_and_sorts(results, tmp_path):
    from textaudit.report import write_report

    html = write_report(_report_inputs(results["dir"]), tmp_path / "report.html").read_text()
    (tmp_path / "report.html").write_text(html)
    assert _chromium_console(tmp_path / "report.html") == []
    # the control: the same check sees a broken page
    (tmp_path / "broken.html").write_text(html.replace("</body>", "<script>null.f();</script></body>"))
    assert any("Uncaught TypeError" in m for m in _chromium_console(tmp_path / "broken.html"))
    # clicking a heading sorts the table, numbers as numbers
    probe = ("<script>var t = document.querySelectorAll('section[id^=compare] table')[1];"
             "var th = t.tHead.rows[0].cells[4]; th.click(); th.click();"
             "console.log('SORTED ' + Array.prototype.map.call(t.tBodies[0].rows, function (r) {"
             " return r.cells[4].textContent; }).join('|'));</script></body>")
    (tmp_path / "probe.html").write_text(html.replace("</body>", probe))
    logged = [m for m in _chromium_console(tmp_path / "probe.html") if "SORTED" in m]
    assert logged, "the probe did not run"
    values = [float(v) for v in re.search(r"SORTED ([^\"]*)", logged[0]).group(1).split("|")]
    assert values == sorted(values, reverse=True) and len(values) == 4


SHE = '''
import math, zlib
def _score(w):
    return (zlib.crc32(w.encode()) % 1000) / 1000 - 0.5
def clf(texts):  # prefers "she" (test_bias.planted(1.0) as a plug-in)
    out = []
    for t in texts:
        words = t.lower().split()
        z = sum(_score(w) for w in words if w not in ("he", "she")) + 1.0 * ("she" in words)
        p = 1 / (1 + math.exp(-z))
        out.append([1 - p, p])
    return out
'''


def _suite(d: Path, thresholds: str, name: str = "suite.toml") -> Path:
    (d / "she.py").write_text(SHE)
    (d / "gate.tsv").write_text("label\ttext\n" + "".join(f"1\t{t}\n" for t in BIAS_TEXTS + ROWS))
    text = f'''
[suite]
name = "tiny gate"
data = "{d / 'gate.tsv'}"
output_dir = "gate"

[compare]
models = ["{d}/weak.py:clf", "{d}/robust.py:clf"]
methods = ["genetic"]

[bias]
model = "{d}/she.py:clf"
pairs = ["he,she"]
k = 1
mlm = "{d / 'mlm'}"

[thresholds]
{thresholds}
'''
    (d / name).write_text(text)
    return d / name


def test_audit_run_gates_on_thresholds_and_resumes(results, cli):
    d = results["dir"]
    robust = f'"{d}/robust.py:clf"'
    ok = _suite(d, f"genetic.{robust}.success_rate_max = 0.0\nbias.\"he,she\".B_k1_min = 0.05\n")
    r = cli("run", str(ok), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["passed"] and [c["name"] for c in out["checks"]] == [f"genetic.{d}/robust.py:clf.success_rate_max",
                                                                    'bias.he,she.B_k1_min']
    assert out["checks"][1]["value"] > 0.05
    html = Path(out["report"]).read_text()
    assert 'id="thresholds"' in html and "2 of 2 met" in html
    before = {p: p.read_text() for p in (d / "gate").rglob("*.jsonl")}
    fail = _suite(d, "genetic.success_rate_max = 0.0\nbias.\"he,she\".abs_B_k1_max = 0.01\n", "fail.toml")
    r = cli("run", str(fail))
    assert r.exit_code == 1, r.output
    assert "FAIL" in r.stdout and "threshold(s) failed" in r.output and "bias.he,she.abs_B_k1_max" in r.output
    assert {p: p.read_text() for p in (d / "gate").rglob("*.jsonl")} == before  # the same runs, reused


def test_audit_run_writes_its_gates_as_junit_that_a_junit_parser_reads(results, cli):
    """#84: CI systems read JUnit XML. Each gate is a test case with its value, threshold and the results file it
    reads; a failed gate a failure; B on a handful of sources carries audit bias's few-sources warning there, in the
    table's notes, --json and the report. A file textaudit did not write is never overwritten."""
    from junitparser import Failure, JUnitXml

    d = results["dir"]
    robust = f'"{d}/robust.py:clf"'
    junit = d / "gates.xml"
    fail = _suite(d, f"genetic.{robust}.success_rate_max = 0.0\nbias.\"he,she\".abs_B_k1_max = 0.01\n", "junit.toml")
    r = cli("run", str(fail), "--junit", str(junit), "--json")
    assert r.exit_code == 1, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    xml = JUnitXml.fromfile(str(junit))
    suites = list(xml)
    assert [s.name for s in suites] == ["tiny gate"] and xml.tests == 2 and xml.failures == 1
    cases = {c.name: c for c in suites[0]}
    assert set(cases) == {c["name"] for c in out["checks"]}
    for check in out["checks"]:
        case = cases[check["name"]]
        props = case_properties(case)
        assert props["value"] == repr(check["value"]) and props["threshold"] == f"{check['op']} {check['limit']}"
        assert props["file"] == check["file"] and Path(check["file"]).exists()
        assert case.is_passed == check["passed"] and case.classname.startswith("textaudit.tiny_gate.")
        assert case_properties(case) and f"must be {check['op']} {check['limit']}" in case.system_out
        assert [type(x) for x in case.result] == ([] if check["passed"] else [Failure])
    bias = next(c for c in out["checks"] if c["name"].startswith("bias."))
    assert bias["file"] == str(d / "gate" / "bias.jsonl") and not bias["passed"]
    # the bias rests on few sources: the gate says so wherever it is read
    sources = results_sources(Path(bias["file"]))
    assert sources < 10 and bias["note"] == (f"B for he→she rests on {sources} source sentences: its interval is rough "
                                             "and no claim is made (a claim needs 10)")
    assert case_properties(cases[bias["name"]])["note"] == bias["note"] and bias["note"] in cases[bias["name"]].system_out
    assert f"warning: {bias['name']}: {bias['note']}" in r.stderr
    assert bias["note"] in Path(out["report"]).read_text()
    genetic = next(c for c in out["checks"] if c["name"].startswith("genetic."))
    cell = Path(genetic["file"])  # the robust model's genetic cell, the file its success rate is read from
    assert cell.parent == d / "gate" / "compare" and cell.name.endswith("robust.py_clf.genetic.jsonl") and cell.is_file()
    # run again: textaudit's own JUnit file is replaced; a file it did not write is refused before any audit runs
    assert cli("run", str(fail), "--junit", str(junit)).exit_code == 1
    theirs = d / "theirs.xml"
    theirs.write_text("<?xml version='1.0'?><testsuites name=\"their tests\"/>")
    r = cli("run", str(fail), "--junit", str(theirs))
    assert r.exit_code == 2 and "textaudit did not write it" in r.output and "Traceback" not in r.output
    assert theirs.read_text() == "<?xml version='1.0'?><testsuites name=\"their tests\"/>"


def case_properties(case) -> dict:
    """A JUnit test case's ``<properties>`` as junitparser reads them."""
    from junitparser import Properties, Property

    props = case.child(Properties)
    return {} if props is None else {p.name: p.value for p in props.iterchildren(Property)}


def results_sources(path: Path) -> int:
    """How many source sentences a bias results file's B rests on (its records' distinct sources)."""
    from textaudit.fairness.bias import estimates_from_records
    from textaudit.results import read_header

    cfg = read_header(path)["config"]
    by_pair = next(iter(estimates_from_records(read_jsonl(path), cfg["k"], cfg["enumerate_k"]).values()))
    return min(e.sources for by_k in by_pair.values() for e in by_k.values())


@pytest.mark.parametrize("body,msg", [
    ("[suite]\nlimit = 3\n", "declares no audit"),
    ("[compare]\nmodels = ['cnn']\nmethods = ['so-beam']\n[extra]\nx = 1\n", "unknown section [extra]"),
    ("[compare]\nmodels = ['cnn']\nmethods = ['so-beam']\nbeam = 3\n", "unknown key 'beam' in [compare]"),
    ("[compare]\nmodels = 'cnn'\nmethods = ['so-beam']\n", "models must be a non-empty list"),
    ("[compare]\nmodels = ['cnn']\nmethods = ['so-beam']\n[thresholds]\ngenetic.success_rate_max = 1\n",
     "'genetic' is not a method of [compare]"),
    ("[compare]\nmodels = ['cnn']\nmethods = ['so-beam']\n[thresholds]\nso_beam.speed_max = 1\n", "attack metrics are"),
    ("[compare]\nmodels = ['cnn']\nmethods = ['so-beam']\n[thresholds]\nso_beam.success_rate = 1\n", "_max or _min"),
    ("[compare]\nmodels = ['cnn']\nmethods = ['so-beam']\n[thresholds]\nso_beam.lstm.success_rate_max = 1\n",
     "'lstm' is not a model of [compare]"),
    ("[bias]\nmodel = 'cnn'\npairs = ['he,she']\nk = 1\n[thresholds]\nbias.'man,woman'.B_k1_max = 1\n",
     "pair 'man,woman' is not among [bias] pairs"),
    ("[bias]\nmodel = 'cnn'\npairs = ['he,she']\nk = 1\n[thresholds]\nbias.'he,she'.B_k3_max = 1\n", "k <= the [bias] k"),
    ("[attack]\nmodel = 'cnn'\n[thresholds]\nattack.speed_max = 1\n", "write attack.<found_share"),
    ("[evaluate]\nmodel = 'cnn'\n[thresholds]\nevaluate.speed_min = 1\n", "write evaluate.[<class"),
    ("[wordorder]\nmodel = 'cnn'\nrho = 2\n", "[wordorder] rho must be a number >= 0 and <= 1 (got 2"),
    ("[learnability]\nmodel = ['bow']\ndata = 'x.tsv'\n", "[learnability] learnability tests on held-out texts"),
    ("[certify]\nmodels = ['transformer']\nmethod = 'ibp'\n", "not transformer"),
    ("[certify]\nmodels = ['cnn']\nmethod = 'ranmask'\nmask_rate = 1.5\n", "[certify] mask_rate must be a number >= 0 and < 1 (got 1.5)"),
    ("[certify]\nmodels = ['cnn']\nsamples = 0\n", "[certify] samples must be a whole number >= 1 (got 0)"),
    ("[certify]\nmodel = 'cnn'\nmodels = ['cnn']\n", "[certify] takes models = "),
    ("[compare\nmodels = 1", "is not valid TOML"),
    # values of the wrong type in every section: one line before any model loads (they were tracebacks,
    # or errors after a model had trained)
    ("[compare]\nmodels = ['cnn']\nmethods = ['so-beam']\nk = '2'\n", "[compare] k must be a whole number >= 0"),
    ("[compare]\nmodels = ['cnn']\nmethods = ['so-beam']\nmlm = 3\n", "[compare] mlm must be a string (got 3)"),
    ("[bias]\nmodel = 'bow'\npairs = ['he,she']\nk = 'two'\n", "[bias] k must be a whole number >= 0"),
    ("[bias]\nmodel = 'bow'\npairs = ['he,she']\nsample = 1.5\n", "[bias] sample must be a whole number >= 2"),
    ("[bias]\nmodel = 'bow'\npairs = ['he,she']\nci = 3\n", "[bias] ci must be clustered or bootstrap"),
    ("[bias]\nmodel = 'bow'\npairs = ['he,she']\nenumerate_k = -1\n", "[bias] enumerate_k must be a whole number"),
    ("[bias]\nmodel = 'bow'\npairs = ['he,she']\nk = true\n", "[bias] k must be a whole number >= 0"),
])
def test_audit_run_refuses_a_bad_suite_before_running(cli, tmp_path, body, msg):
    (tmp_path / "s.toml").write_text(body)
    r = cli("run", str(tmp_path / "s.toml"))
    assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output, r.output
    assert not any(tmp_path.glob("s/*"))  # nothing ran
    r = cli("run", str(tmp_path / "none.toml"))
    assert r.exit_code == 2 and "does not exist" in r.output


def test_example_suites_are_valid():
    from textaudit.suite import load_suite

    suites = sorted((Path(__file__).parent.parent / "examples").glob("*.toml"))
    assert suites
    for s in suites:
        load_suite(s)


def test_separate_attack_files_get_their_matrix_too(results, tmp_path):
    from textaudit.report import render_report

    cells = sorted(str(p) for p in (results["dir"] / "cmp").glob("*.jsonl"))
    md = render_report(cells, "md").replace("\\[", "[").replace("\\]", "]")  # (Markdown's escapes)
    assert "## Comparison matrix on " in md and "4 attack files" in md
    data = results["compare"]["data"]
    for c in results["compare"]["cells"]:  # the same numbers as audit compare printed (models by their names)
        k = c["k"] if c["k"] is not None else "–"
        lo, hi = c["found_share_ci95"]
        row = (f"| {Path(c['model']).name} | {c['method']} | {data} | {k} | {c['n']} | {c['found_share']:.2f} "
               f"[{lo:.2f}, {hi:.2f}] | {c['skipped']} | {c['attacked']} | {c['success_rate']} |")
        assert row in md, row
    assert md.count("only a") == 1  # the paired tests too
    assert "Comparison matrix" not in render_report(cells[:1], "md")  # one attack: no matrix


def test_attack_files_of_two_data_sets_are_never_one_matrix_row(results, tmp_path):
    """#67: explicit files on two data sets (here the fixture's data and another file, other k) pooled into one row
    of one matrix; now one matrix per data set, each named, and the every-cell table has a data column."""
    from textaudit.attacks.compare import run_compare
    from textaudit.report import render_report

    d = results["dir"]
    (tmp_path / "other.tsv").write_text("label\ttext\n1\ta film that is deep .\n1\tthe film works here .\n")
    run_compare([f"{d}/weak.py:clf", f"{d}/robust.py:clf"], ["so-beam"], tmp_path / "other", data=str(tmp_path / "other.tsv"),
                k=2, mlm=str(d / "mlm"), progress=False)
    ours = sorted(str(p) for p in (d / "cmp").glob("*.jsonl"))
    other = sorted(str(p) for p in (tmp_path / "other").glob("*.jsonl"))
    md = render_report(ours + other, "md")
    first, second = results["compare"]["data"], "other.tsv"  # (a data file is named by its file name)
    assert md.count("## Comparison matrix on ") == 2 and "4 attack files" in md and "2 attack files" in md
    rows = [ln for ln in md.splitlines() if ln.startswith("| weak.py:clf | so-beam | ")]
    # the weak model's SO-Beam on each data set: two rows of the every-cell tables, one per data set, own k each
    assert sorted(r.split(" | ")[2:4] for r in rows) == sorted([[first, "1"], [second, "2"]]), rows


def test_a_report_replaces_an_earlier_report_and_nothing_else(results, tmp_path):
    from textaudit.errors import TextAuditError
    from textaudit.report import write_report
    from textaudit.report.render import is_report

    inputs = [results["dir"] / "bias.jsonl"]
    for name in ("r.html", "r.md"):
        out = write_report(inputs, tmp_path / name, title="first")
        assert is_report(out) and "first" in out.read_text()
        write_report(inputs, out, title="second")  # an earlier report: replaced
        assert "second" in out.read_text() and "first" not in out.read_text()
    mine = tmp_path / "mine.md"
    mine.write_text("# my notes\n")
    with pytest.raises(TextAuditError, match="exists and is not a textaudit report"):
        write_report(inputs, mine)
    assert mine.read_text() == "# my notes\n"
    before = (results["dir"] / "bias.jsonl").read_bytes()
    with pytest.raises(TextAuditError, match="is not a textaudit report"):
        write_report(inputs, results["dir"] / "bias.jsonl")
    assert (results["dir"] / "bias.jsonl").read_bytes() == before


def test_markdown_reports_keep_what_they_copy_as_text(results, tmp_path):
    from textaudit.report import write_report
    from textaudit.report.render import md_code, md_text

    hostile = "<script>alert(1)</script> [click](javascript:alert(1)) <!-- the rest is hidden\n# a heading | a cell"
    text = md_text(hostile)
    assert "\n" not in text and "<" not in text and "\\[click\\]" in text and "\\|" in text and "<!--" not in text
    assert md_code("a `b` c") == "``a `b` c``" and md_code("x\ny") == "`x y`"
    out = write_report([results["dir"] / "bias.jsonl"], tmp_path / "r.md", title=hostile)
    page = out.read_text()
    first = page.splitlines()[0]
    assert first.startswith("# &lt;script&gt;") and "\n# a heading" not in page and "<!--" not in page
    assert "\\[click\\](javascript:alert(1))" in page  # escaped brackets: text, not a link


def test_the_word_diff_stays_linear_on_long_repetitive_texts():
    from textaudit.report.sections import marked

    assert marked("a b c d", "a x c d e") == [("a", False), ("x", True), ("c", False), ("d", False), ("e", True)]
    assert marked("the film", "the long film") == [("the", False), ("long", True), ("film", False)]
    long = "la " * 200_000
    out = marked(long + "end", "la " + long + "fin")  # 400,000 words: the head and tail, then a whole middle
    assert len(out) == 200_002 and out[-1] == ("fin", True) and not out[0][1]
    out = marked("a " + "x y " * 1500 + "z", "a " + "y x " * 1500 + "q z")  # a long middle: marked whole
    assert out[0] == ("a", False) and out[-1] == ("z", False) and all(changed for _, changed in out[1:-1])


def _attack_file(path: Path, method: str, data: str, ids: list[str], shard: str | None = None, seed: int = 0) -> Path:
    """A small attack results file: every example a success with ℓ0 1 except the last (failed)."""
    header = {"header": {"command": "attack", "config": {"method": method, "model": "cnn", "k": 2, "seed": seed,
                                                         "data": data}, **({"shard": shard} if shard else {})}}
    recs = [{"id": i, "text": "a film .", "status": "success" if n < len(ids) - 1 else "failed", "l0": 1,
             "seconds": 0.1, "queries": 5, "method": method, "k": 2} for n, i in enumerate(ids)]
    path.write_text("\n".join(json.dumps(r) for r in [header, *recs]) + "\n")
    return path


def test_the_matrix_counts_an_example_once_and_never_pools_runs_on_other_data(cli, tmp_path):
    """Class 4 of #38: a merged file reported with its shards counted every record twice, and runs on
    other data were pooled into one cell. Now a cell's files must be runs of the same audit, an example in
    several of them counts once, and files on other data are a matrix of their own (#67: not a refusal)."""
    from textaudit.report import render_report

    merged = _attack_file(tmp_path / "merged.jsonl", "so-beam", "sst2:dev", ["0", "1", "2", "3"])
    shard = _attack_file(tmp_path / "shard0.jsonl", "so-beam", "sst2:dev", ["0", "2"], shard="0/2")
    other = _attack_file(tmp_path / "genetic.jsonl", "genetic", "sst2:dev", ["0", "1", "2", "3"])
    md = render_report([merged, shard, other], "md").replace("\\[", "[").replace("\\]", "]")  # (Markdown's escapes)
    row = "| {} | sst2:dev | {} | 4 | 0.75 [0.30, 0.95] | 0 | 4 | 0.75 |"  # 4 inputs (once each), 3 found, 4 attacked
    assert row.format("cnn | so-beam", 2) in md and row.format("cnn | genetic", "–") in md, md
    elsewhere = _attack_file(tmp_path / "test.jsonl", "so-beam", "sst2:test", ["0", "1"])
    md = render_report([merged, elsewhere, other], "md").replace("\\[", "[").replace("\\]", "]")
    # the dev matrix counts dev's 4 examples; the test split's run is its own section, in no dev row
    assert md.count("## Comparison matrix on ") == 1 and row.format("cnn | so-beam", 2) in md, md
    assert "| attack | cnn | so-beam, k=2 | – | sst2:test | 0 | found for 1 of 2 inputs (50.0%) [9.4, 90.5]" in md
    # runs of one cell on the same data with other settings are still refused, naming what differs
    reseeded = _attack_file(tmp_path / "seed1.jsonl", "so-beam", "sst2:dev", ["0", "1"], seed=1)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    r = cli("report", str(merged), str(reseeded), str(other), "--out", str(tmp_path / "r.html"))
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    # the error names both files (#67: in a folder, it named neither)
    assert f"run with other settings ({merged} and {reseeded}) (seed: 0 vs 1)" in " ".join(r.output.split()), r.output
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no report written


def test_audit_run_reuses_a_certification_only_for_the_same_examples(results, cli, tmp_path, monkeypatch):
    """Class 4 of #38: a finished certification was reused whatever the suite's limit."""
    d = results["dir"]
    monkeypatch.setenv("TEXTAUDIT_CACHE", str(d / "cache"))  # the bow-ibp the fixture trained

    def suite(limit: int) -> Path:
        p = tmp_path / f"s{limit}.toml"
        p.write_text(f"[suite]\noutput_dir = '{tmp_path / 'out'}'\ndata = '{d / 'data.tsv'}'\nlimit = {limit}\n"
                     "[certify]\nmodels = ['bow-ibp']\n")
        return p

    r = cli("run", str(suite(3)), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.strip().splitlines()[-1])["passed"]
    r = cli("run", str(suite(3)))  # the same suite: reused
    assert r.exit_code == 0, r.output
    r = cli("run", str(suite(5)))
    assert r.exit_code == 2 and "limit: 3" in r.output and "Traceback" not in r.output, r.output


def test_one_reader_refuses_what_would_mix_runs_for_load_and_report_alike(results, cli, tmp_path):
    """#53: two runs joined into one file, a record pasted twice, a compare cell that is a link to another
    run's file, and a header-only bias file (what Ctrl-C leaves): load and audit report agree, as one line
    or as the right (empty) result — never a traceback, never two runs read as one."""
    from textaudit.errors import TextAuditError
    from textaudit.results import load

    cell = cell_path(results["dir"] / "cmp", results["models"][0], "so-beam")
    lines = cell.read_text().splitlines(keepends=True)
    (tmp_path / "joined.jsonl").write_text("".join(lines + lines))
    (tmp_path / "pasted.jsonl").write_text("".join(lines + lines[1:2]))
    cases = {"joined.jsonl": "is a second header record", "pasted.jsonl": "repeats the record of line 2"}
    folder = tmp_path / "cmp"
    shutil.copytree(results["dir"] / "cmp", folder)
    other = tmp_path / "elsewhere.jsonl"
    other.write_text(cell.read_text())
    (folder / cell.name).unlink()
    (folder / cell.name).symlink_to(other)
    for name, says in [*cases.items(), ("cmp", "is a link or leads out of")]:
        with pytest.raises(TextAuditError, match=says):
            load(tmp_path / name)
        r = cli("report", str(tmp_path / name), "--out", str(tmp_path / "r.html"))
        assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output, (name, r.output)
        assert not (tmp_path / "r.html").exists()
    head = (results["dir"] / "bias.jsonl").read_text().splitlines(keepends=True)[0]
    (tmp_path / "stopped.jsonl").write_text(head)
    summary = load(tmp_path / "stopped.jsonl").summary()
    assert summary["pairs"] == [] and "--resume" in summary["note"] and summary["model"]
    r = cli("report", str(tmp_path / "stopped.jsonl"), "--out", str(tmp_path / "r.html"))
    assert r.exit_code == 0, r.output
    assert "no sentence pair is scored yet" in (tmp_path / "r.html").read_text()


def test_an_attack_page_with_more_vulnerable_examples_than_it_shows_says_so(tmp_path):
    """#52: the attack page showed 12 of 50 vulnerable examples without saying it was a subset."""
    from textaudit.report import render_report

    header = {"header": {"command": "attack", "config": {"method": "so-beam", "model": "cnn", "k": 2, "seed": 0,
                                                         "data": "sst2:dev"}}}
    recs = [{"id": str(i), "text": "a fine film .", "status": "success", "l0": 1, "seconds": 0.1, "queries": 5,
             "method": "so-beam", "k": 2, "label": 1, "prediction": 1, "vulnerable": "a good film .",
             "vulnerable_prediction": 1, "vulnerable_patched": "a good movie .", "vulnerable_patched_prediction": 0,
             "pair": ["film", "movie"]} for i in range(15)]
    for n, name in ((15, "many.jsonl"), (12, "few.jsonl")):
        (tmp_path / name).write_text("\n".join(json.dumps(r) for r in [header, *recs[:n]]) + "\n")
    md = render_report([tmp_path / "many.jsonl"], "md")
    assert "showing the 12 most natural of 15 vulnerable examples" in md and "every one is in many.jsonl" in md
    assert "showing the" not in render_report([tmp_path / "few.jsonl"], "md")  # all shown: nothing to say


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).parent.parent / "examples").glob("*.toml")))
def test_every_example_suite_runs_end_to_end(name, cli, tmp_path):
    """Each suite in examples/ as shipped, run with small limits on its own (real) zoo models, trained
    small here: every audit runs, every threshold gets a value (met or not), the report is written.
    The shipped ci-gate once stopped after its attacks: its [suite] limit had cut the bias data too."""
    import sys

    from textaudit.models.zoo import train_model
    from textaudit.suite import load_suite

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    spec = tomllib.loads((Path(__file__).parent.parent / "examples" / name).read_text())
    models = set(spec.get("compare", {}).get("models", [])) | set(spec.get("certify", {}).get("models", []))
    models |= {spec["bias"]["model"]} if "bias" in spec else set()
    for m in sorted(models):
        train_model(m, max_train=1500, epochs=1, progress=False)
    # the file as shipped, its sizes made small: 6 examples (a first-order cell needs one the model gets
    # right), k = 1 (SO-Beam and SO-Enum), 3 sources
    small = (Path(__file__).parent.parent / "examples" / name).read_text()
    small = re.sub(r"(?m)^limit = \d+", "limit = 6", small)
    small = re.sub(r'(?m)^output_dir = "[^"]*"', f'output_dir = "{tmp_path / "out"}"', small)
    small = small.replace("[compare]\n", "[compare]\nk = 1\n", 1)
    small = re.sub(r"(?m)^max_sources = \d+", "max_sources = 3", small)
    if "[bias]" in small and "max_sources" not in small:
        small = small.replace("[bias]\n", "[bias]\nmax_sources = 3\n", 1)
    suite = tmp_path / name
    suite.write_text(small)
    assert load_suite(suite).get("suite", "limit") == 6
    r = cli("run", str(suite), "--json")
    assert r.exit_code in (0, 1), r.output  # thresholds met or not: the gate's verdict, not an error
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["checks"] and all(c["value"] is not None for c in out["checks"]), out["checks"]
    assert Path(out["report"]).is_file()


def test_a_suite_whose_data_holds_no_pair_stops_before_its_attacks(cli, tmp_path):
    """Said in one line before any audit runs (it was said after minutes of attacks), naming the
    [bias] limit that cut the data and the suite's way to bound the work instead."""
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta fine film .\n0\ta dull film .\n1\the is great here .\n")
    (tmp_path / "t.toml").write_text(
        f'[suite]\ndata = "{tmp_path / "d.tsv"}"\nlimit = 2\n[compare]\nmodels = ["cnn"]\nmethods = ["so-beam"]\n'
        '[bias]\nmodel = "cnn"\npairs = ["he,she"]\nk = 1\nlimit = 2\n')
    r = cli("run", str(tmp_path / "t.toml"))
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "[bias] limit = 2 cuts the data X_p is drawn from" in r.output and "max_sources = N" in r.output, r.output
    assert not any((tmp_path / "t").rglob("*.jsonl"))  # no attack ran (cnn was not even trained)


def test_a_junit_file_holds_no_secret_this_process_knows(tmp_path):
    """The JUnit file is an output like any other: a gate named after an endpoint with a credential in its URL is
    written without the credential (the one redaction), and the file still reads as JUnit."""
    from junitparser import JUnitXml

    from textaudit.formats.junit import write_junit
    from textaudit.secrets import register
    from textaudit.suite import Check

    register("sk-junit-secret-4711")
    name = "so_beam.https://user:sk-junit-secret-4711@host/v1.success_rate_max"
    path = write_junit(tmp_path / "g.xml", "s", [Check(name, 0.5, "<=", 0.2, False, "out/c.jsonl", None)])
    text = path.read_text()
    assert "sk-junit-secret-4711" not in text and "host/v1.success_rate_max" in text
    assert JUnitXml.fromfile(str(path)).failures == 1
