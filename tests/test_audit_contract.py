"""#81 items 1 and 7: every audit's request keeps one contract — ``check()``, then ``run(checked=..., progress=...)``
giving an :class:`~textaudit.request.Outcome` (summary, records, files) — checked by the public battery
:func:`textaudit.testing.check_audit` on each of the ten audits, on small real settings (a planted rule as a plug-in
model, a tiny zoo bow, a tiny masked LM); and the battery fails a request that breaks the contract, naming the
check."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from test_harden_certify import NEG, POS, _rows  # (sentences whose label is carried by a sprinkling of words)

from textaudit.audits import AUDITS
from textaudit.errors import TextAuditError
from textaudit.formats.jsonl import read_header
from textaudit.kinds import kind_of
from textaudit.request import Outcome
from textaudit.testing import AuditCheckError, check_audit, check_kind

RULE = f'''
import math
POS, NEG = set({POS!r}), set({NEG!r})
labels = ["negative", "positive"]
def clf(texts):  # the share of sentiment words decides; "film" leans positive (a flip under film -> movie)
    out = []
    for t in texts:
        w = t.lower().split()
        s = sum(x in POS for x in w) - sum(x in NEG for x in w) + 0.5 * ("film" in w) - 0.25
        p = 1 / (1 + math.exp(-2 * s))
        out.append([1 - p, p])
    return out
clf.labels = labels
'''


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_mlm):
    """train.tsv and dev.tsv, the rule as a plug-in, a zoo bow trained on train.tsv, a tiny masked LM, a synonym
    table and a pairs file."""
    from textaudit.models.zoo.build import train_model

    root = tmp_path_factory.mktemp("contract")
    for name, rows in (("train.tsv", _rows(0, 300)), ("dev.tsv", _rows(1, 8))):
        (root / name).write_text("label\ttext\n" + "".join(f"{y}\t{t}\n" for y, t in rows))
    (root / "rule.py").write_text(RULE)
    train_model("bow", data=str(root / "train.tsv"), out=root / "bow", epochs=2, progress=False,
                eval_data=str(root / "dev.tsv"))
    tiny_mlm.model.save_pretrained(root / "mlm")
    tiny_mlm.tokenizer.save_pretrained(root / "mlm")
    (root / "syn.json").write_text(json.dumps({"film": ["movie"], "great": ["fine"], "dull": ["flat"]}))
    (root / "pairs.txt").write_text("film,movie\n")
    return root


def _requests(w: Path, out: Path) -> dict:
    """Each of the ten audits' requests on the world, into ``out``."""
    from textaudit.attacks.request import AttackRequest, CompareRequest
    from textaudit.evaluation import EvaluateRequest
    from textaudit.fairness.request import BiasRequest
    from textaudit.findings import ReplayRequest
    from textaudit.harden.request import HardenRequest
    from textaudit.robustness.learnability import LearnabilityRequest
    from textaudit.robustness.perturbscore.request import TuplesRequest
    from textaudit.robustness.request import CertifyRequest
    from textaudit.robustness.wordorder import WordOrderRequest

    rule, dev, mlm = f"{w}/rule.py:clf", str(w / "dev.tsv"), str(w / "mlm")
    search = dict(k=1, mlm=mlm, kappa=5, naturalness="off", ppl=False)
    return {
        "attack": AttackRequest(model=rule, data=dev, method="so-beam", beam=2, pairs_file=w / "pairs.txt",
                                output=out / "attack.jsonl", **search),
        "compare": CompareRequest(models=[rule], methods=["so-enum"], data=dev, limit=3, k=1, mlm=mlm,
                                  naturalness="off", output_dir=out / "compare"),
        "bias": BiasRequest(model=rule, pair=["film,movie"], data=dev, k=0, output=out / "bias.jsonl"),
        "certify": CertifyRequest(model=rule, method="safer", data=dev, synonyms=w / "syn.json", hops=1, samples=40,
                                  selection=10, neighbors=0, output=out / "certify.jsonl"),
        "replay": ReplayRequest(findings=[w / "findings.jsonl"], model=rule, output=out / "replay.jsonl"),
        "harden": HardenRequest(model=str(w / "bow"), method="masked", data=str(w / "train.tsv"), eval_data=dev,
                                epochs=1, copies=1, eval_attack="so-enum:1", mlm=mlm, naturalness="off",
                                cert_samples=20, cert_selection=10, cert_neighbors=0, out=out / "harden"),
        "evaluate": EvaluateRequest(model=rule, data=dev, output=out / "evaluate.jsonl"),
        "learnability": LearnabilityRequest(model=["bow"], perturbation="butter_fingers_perturbation",
                                            train_size=40, probabilities="1.0", data=str(w / "train.tsv"),
                                            eval_data=dev, output=out / "learnability.jsonl"),
        "wordorder": WordOrderRequest(model=rule, data=dev, output=out / "wordorder.jsonl"),
        "perturbscore": TuplesRequest(model=str(w / "bow"), n=4, data=dev, steps=2, max_eps=0.1,
                                      output=out / "tuples.jsonl"),
    }


@pytest.fixture(scope="module")
def findings(world):
    """An attack's findings on the rule (the replay audit's input)."""
    from textaudit.attacks.request import AttackRequest

    AttackRequest(model=f"{world}/rule.py:clf", data=str(world / "dev.tsv"), method="so-beam", beam=2, k=1,
                  mlm=str(world / "mlm"), kappa=5, naturalness="off", ppl=False, pairs_file=world / "pairs.txt",
                  output=world / "findings.jsonl").run(progress=False)
    return world / "findings.jsonl"


#: every row of the table (a new row without a request in _requests fails here)
AUDIT_NAMES = [row.name for row in AUDITS]


@pytest.mark.parametrize("name", AUDIT_NAMES)
def test_every_audit_keeps_the_contract(name, world, findings, tmp_path):
    report = check_audit(_requests(world, tmp_path)[name])
    assert report.ok, str(report)
    assert [c.name for c in report.checks] == ["contract", "check", "run", "summary", "records", "files"]
    outcome = report.outcome
    assert isinstance(outcome, Outcome) and outcome.files, name
    assert all(tmp_path in Path(f).parents for f in outcome.files)
    for f in outcome.files:  # its results file: a kind of the table, checked by check_kind on it
        if Path(f).suffix == ".jsonl":
            kind = kind_of(read_header(f))
            assert kind.id in AUDIT_KINDS[name] and check_kind(kind, f).ok, (name, kind.id)


#: the kinds each audit's run above writes (the table's row says which it may)
AUDIT_KINDS = {"attack": {"attack"}, "compare": set(), "bias": {"bias"}, "certify": {"certify"}, "replay": {"replay"},
               "harden": set(), "evaluate": {"metrics"}, "learnability": {"learnability"}, "wordorder": {"wordorder"},
               "perturbscore": {"perturbscore build"}}


def test_the_table_says_which_kinds_each_audit_writes():
    from textaudit.audits import BY_NAME

    assert set(AUDIT_KINDS) == set(BY_NAME) and len(BY_NAME) == 10
    for name, kinds in AUDIT_KINDS.items():
        assert kinds <= set(BY_NAME[name].kinds), name


def test_check_kind_names_what_a_kind_gets_wrong(tmp_path):
    """A kind the table does not hold, and one whose headline rows are not the report's width, each fail the check
    that says so."""
    from textaudit.formats.jsonl import RecordSpec, write_results
    from textaudit.kinds import Kind, register_kind, unregister_kind

    path = tmp_path / "narrow.jsonl"
    write_results(path, [{"id": "a", "n": 1}], command="narrow", config={"model": "m"})
    narrow = Kind("narrow", "narrow", "audit narrow", "a narrow kind", lambda cfg, recs: {"n": len(recs)},
                  lambda cfg, recs, s: [["narrow", "m"]], records=RecordSpec(fields={"*": {"id": (str,)}}))
    assert [c.name for c in check_kind(narrow, path, strict=False).failed] == [
        "table", "header", "records", "summary", "headline", "resume and merge"]  # (the later ones not run)
    register_kind(narrow)
    try:
        report = check_kind(narrow, path, strict=False)
        assert [c.name for c in report.failed] == ["headline", "resume and merge"]  # (the last one not run)
        assert "2 cells, not 7" in report.failed[0].detail and report.failed[1].detail.startswith("not run")
        with pytest.raises(AuditCheckError, match="headline"):
            check_kind(narrow, path)
        wrong = tmp_path / "wrong.jsonl"  # a record its spec refuses: the records check names its line and field
        write_results(wrong, [{"id": "a"}, {"id": 2}], command="narrow", config={"model": "m"})
        report = check_kind(narrow, wrong, strict=False)
        assert report.failed[0].name == "records" and "wrong.jsonl:3: field 'id' must be str, got int" in \
            report.failed[0].detail
    finally:
        unregister_kind("narrow")


def test_the_attack_outcome_is_what_its_file_holds_and_finds_the_planted_flip(world, findings, tmp_path):
    """Not only shapes: the attack's records are its file's, and the planted film → movie flip is found."""
    outcome = check_audit(_requests(world, tmp_path)["attack"]).outcome
    found = [r for r in outcome.records if r["status"] == "success"]
    assert found and all(r["pair"] == ["film", "movie"] for r in found)
    assert outcome.summary["success"] == len(found)


def test_the_battery_names_the_check_a_broken_request_fails(world, findings, tmp_path):
    """A request whose run returns a bare dict, one whose check writes its output, one whose summary holds a value
    JSON cannot write, one that names a file it was not asked for: each fails exactly the check that says so."""
    from textaudit.evaluation import EvaluateRequest

    base = _requests(world, tmp_path)["evaluate"]

    @dataclasses.dataclass
    class BareDict(EvaluateRequest):
        def run(self, *, checked=None, progress=True, say=print):
            return super().run(say=lambda line: None).summary

    @dataclasses.dataclass
    class WritesOnCheck(EvaluateRequest):
        def check(self):
            Path(self.output).write_text("")

    @dataclasses.dataclass
    class SetInSummary(EvaluateRequest):
        def run(self, *, checked=None, progress=True, say=print):
            outcome = super().run(say=lambda line: None)
            outcome.summary["labels_seen"] = {0, 1}
            return outcome

    @dataclasses.dataclass
    class ForeignFile(EvaluateRequest):
        def run(self, *, checked=None, progress=True, say=print):
            outcome = super().run(say=lambda line: None)
            outcome.files.append(world / "dev.tsv")
            return outcome

    for i, (cls, failed) in enumerate(((BareDict, "run"), (WritesOnCheck, "check"), (SetInSummary, "summary"),
                                       (ForeignFile, "files"))):
        request = cls(**{**dataclasses.asdict(base), "output": tmp_path / f"{i}.jsonl"})
        report = check_audit(request, strict=False)
        assert [c.name for c in report.failed][0] == failed, str(report)
        with pytest.raises(AuditCheckError, match=failed):
            check_audit(cls(**{**dataclasses.asdict(base), "output": tmp_path / f"again{i}.jsonl"}))


TWO_LABELS = '''
labels = ["toxic", "insult"]
multilabel = True
def clf(texts):  # toxic flips under film -> movie; insult never moves
    return [[0.6 if "film" in t.split() else 0.3, 0.2] for t in texts]
clf.multilabel, clf.labels = multilabel, labels
'''


@pytest.mark.parametrize("name", ["attack", "bias", "certify"])
def test_label_all_is_the_requests_own_run_and_keeps_the_contract(name, world, tmp_path):
    """``target_label = "all"``: ``run()`` dispatches it itself (a notebook, a suite and the command get one
    outcome): every label's outcome with its own file, the summary's labels theirs."""
    from textaudit.request import EachLabel

    (tmp_path / "tox.py").write_text(TWO_LABELS)
    (tmp_path / "tox.tsv").write_text("toxic\tinsult\ttext\n" + "".join(f"1\t0\t{t}\n" for _, t in _rows(1, 6)))
    base = _requests(world, tmp_path / "out")[name]
    request = dataclasses.replace(base, model=f"{tmp_path}/tox.py:clf", data=str(tmp_path / "tox.tsv"),
                                  target_label="all", **({"label_column": None} if name == "attack" else {}))
    (tmp_path / "out").mkdir()
    outcome = check_audit(request).outcome
    assert isinstance(outcome, EachLabel) and list(outcome.labels) == ["toxic", "insult"]
    assert [Path(f).name for f in outcome.files] == [f"{name}.toxic.jsonl", f"{name}.insult.jsonl"]
    assert outcome.summary["labels"] == {n: o.summary for n, o in outcome.labels.items()}
    # the shared model's and masked LM's counts are every label's: once, beside the labels, never inside one label
    assert not [k for s in outcome.summary["labels"].values() for k in s if k.startswith(("store_", "score_", "http_"))]
    assert outcome.summary["forwards"] > 0
    if name == "attack":  # the planted flip is toxic's alone
        assert outcome.summary["labels"]["toxic"]["success"] > 0 == outcome.summary["labels"]["insult"]["success"]


def _suite(world: Path, folder: Path, thresholds: str) -> Path:
    """A suite of the four audits the table alone makes sections of, on the world."""
    folder.mkdir(exist_ok=True)
    return _suite_file(folder / "gate.toml", world / "dev.tsv", f'''
[evaluate]
model = "{world}/rule.py:clf"

[wordorder]
model = "{world}/rule.py:clf"
perturbation = "full_shuffle"

[learnability]
model = ["bow"]
perturbation = "butter_fingers_perturbation"
train_size = 40
probabilities = "1.0"
data = "{world / 'train.tsv'}"
eval_data = "{world / 'dev.tsv'}"

[perturbscore]
model = "{world / 'bow'}"
n = 4
steps = 2
max_eps = 0.1

[thresholds]
{thresholds}
''')


def _suite_file(path: Path, data: Path, sections: str) -> Path:
    """A suite file: ``[suite]`` on ``data`` into ``out`` beside it, then ``sections``."""
    path.write_text(f'[suite]\ndata = "{data}"\noutput_dir = "out"\n{sections}')
    return path


def test_every_audit_is_a_suite_section_with_gates_read_from_its_summary(world, tmp_path, cli):
    """#81 item 3: evaluate, wordorder, learnability and perturbscore are suite sections from the table alone (a CI
    gate on one class's recall); each gate's value is the summary the request's own run gives; the suite runs again
    (its evaluate and wordorder files replaced, the others resumed) with the same values; a file of the same name
    it did not write is refused before anything runs; a gate naming no metric of its audit is one line."""
    from textaudit.evaluation import EvaluateRequest
    from textaudit.robustness.wordorder import WordOrderRequest

    gates = ('evaluate.positive.recall_min = 0.99\nevaluate.macro.f1_min = 0.5\nevaluate.accuracy_min = 0.5\n'
             'wordorder.accuracy_min = 0.1\nwordorder.dnd_max = 1.0\n'
             'learnability.bow.butter_fingers_perturbation.robustness_min = 0.0\nperturbscore.tried_min = 5\n')
    suite = _suite(world, tmp_path, gates)
    runs = []
    for _ in range(2):
        r = cli("run", str(suite), "--json")
        assert r.exit_code == 1, r.output  # perturbscore.tried_min fails: 4 tried
        runs.append({c["name"]: (c["value"], c["passed"], Path(c["file"]).name) for c in
                     json.loads(r.stdout.strip().splitlines()[-1])["checks"]})
    assert runs[0] == runs[1]
    got = runs[0]
    assert set(got) == {line.split(" = ")[0] for line in gates.strip().splitlines()}
    alone = EvaluateRequest(model=f"{world}/rule.py:clf", data=str(world / "dev.tsv")).run(say=lambda line: None).summary
    positive = next(c for c in alone["per_class"] if c["class"] == "positive")
    assert got["evaluate.positive.recall_min"] == (positive["recall"], positive["recall"] >= 0.99, "evaluate.jsonl")
    assert got["evaluate.macro.f1_min"] == (alone["macro"]["f1"], True, "evaluate.jsonl")
    order = WordOrderRequest(model=f"{world}/rule.py:clf", data=str(world / "dev.tsv"),
                             perturbation="full_shuffle").run().summary
    assert got["wordorder.dnd_max"] == (order["dnd"], order["dnd"] <= 1.0, "wordorder.jsonl")
    assert got["perturbscore.tried_min"] == (4, False, "perturbscore.jsonl")
    out = tmp_path / "out"
    header = json.loads((out / "evaluate.jsonl").read_text().splitlines()[0])["header"]["config"]
    assert header["suite"] == str(suite.resolve())  # the suite's own: replaced on the next run, never another's

    (tmp_path / "other").mkdir()
    other = _suite(world, tmp_path / "other", "")
    (tmp_path / "other" / "out").mkdir()
    theirs = tmp_path / "other" / "out" / "wordorder.jsonl"
    theirs.write_bytes((out / "wordorder.jsonl").read_bytes())  # written by another suite
    r = cli("run", str(other))
    assert r.exit_code == 2 and "was not written by this suite" in r.output and "Traceback" not in r.output, r.output
    assert theirs.read_bytes() == (out / "wordorder.jsonl").read_bytes()
    bad = _suite(world, tmp_path / "bad", "evaluate.positive.speed_min = 1\n")
    r = cli("run", str(bad))
    assert r.exit_code == 2 and "write evaluate.[<class, label, model …>.]<accuracy|precision|recall" in r.output, r.output


def test_a_suite_attacks_every_label_and_gates_each(world, tmp_path, cli):
    """``[attack] target_label = "all"`` (it failed): the request's own run attacks every label, each label's file
    in the suite's folder, a gate per label (``attack.<label>.<metric>``); run again, every label's file resumes."""
    (tmp_path / "tox.py").write_text(TWO_LABELS)
    (tmp_path / "tox.tsv").write_text("toxic\tinsult\ttext\n" + "".join(f"1\t0\t{t}\n" for _, t in _rows(1, 6)))
    suite = _suite_file(tmp_path / "labels.toml", tmp_path / "tox.tsv", f'''
[attack]
model = "{tmp_path}/tox.py:clf"
target_label = "all"
method = "so-beam"
k = 1
beam = 2
mlm = "{world / 'mlm'}"
pairs_file = "{world / 'pairs.txt'}"
naturalness = "off"
ppl = false

[thresholds]
attack.toxic.found_share_max = 0.1
attack.insult.found_share_max = 0.1
''')
    runs = []
    for _ in range(2):
        r = cli("run", str(suite), "--json")
        assert r.exit_code == 1, r.output  # toxic's planted flip is found: its gate fails; insult's passes
        runs.append({c["name"]: (c["value"], c["passed"]) for c in json.loads(r.stdout.strip().splitlines()[-1])["checks"]})
    assert runs[0] == runs[1]
    assert runs[0]["attack.insult.found_share_max"] == (0.0, True)
    assert runs[0]["attack.toxic.found_share_max"][0] > 0.1 and not runs[0]["attack.toxic.found_share_max"][1]
    assert sorted(p.name for p in (tmp_path / "out").glob("attack*.jsonl")) == ["attack.insult.jsonl",
                                                                                  "attack.toxic.jsonl"]
    (tmp_path / "bad.toml").write_text(suite.read_text().replace("attack.toxic.found_share_max", "attack.found_share_max"))
    r = cli("run", str(tmp_path / "bad.toml"))
    assert r.exit_code == 2 and "write attack.<label>.<found_share" in r.output, r.output


def _share_summary(model: str, records: list[dict], labels: list[str], smoothing: float = 0.0) -> dict:
    counts = [sum(r["prediction"] == c for r in records) + smoothing for c in range(len(labels))]
    return {"model": model, "n": len(records),
            "classes": [{"class": name, "share": n / sum(counts)} for name, n in zip(labels, counts)]}


def test_a_new_audit_is_a_request_and_one_row_and_gets_a_command_and_a_suite_section(world, tmp_path, cli):
    """#81's acceptance: a toy audit — a request module (here, the test's), one row of the audits' table and one
    ``Kind`` row for its results — is an ``audit`` command (its fields the options, its summary printed or one JSON
    line), a suite section (its keys checked by the request's ranges, gated by a path into its summary), keeps the
    contract, and its results file is read by ``results.load`` and ``audit report`` (the kind's headline row, its
    summary as a section) and its shards joined by ``audit merge``, with nothing else written for it."""
    from textaudit import results
    from textaudit.audits import AuditRow, register, unregister
    from textaudit.data import load_dataset
    from textaudit.formats.jsonl import JsonlWriter, RecordSpec
    from textaudit.kinds import Kind, register_kind, unregister_kind
    from textaudit.models import load_classifier
    from textaudit.request import option, shared
    from textaudit.runner import check_sharded_output

    @dataclasses.dataclass
    class ShareRequest:
        """The share of texts the model calls each class."""

        model: str = shared("model", ...)
        data: str = shared("data", "sst2:dev")
        limit: int | None = shared("limit")
        smoothing: float = option(0.0, low=0.0, high=1.0, help="Added to each class's count (Laplace).")
        output: Path | None = shared("output")
        shard: str | None = shared("shard")

        def check(self):
            return check_sharded_output(self.output, None, self.shard)

        def run(self, *, checked=None, progress=True) -> Outcome:
            part = self.check()
            ds = load_dataset(self.data, default_split="dev", limit=self.limit)
            clf = load_classifier(self.model)
            records = [{"id": i, "prediction": int(p)} for n, (i, p) in
                       enumerate(zip(ds["id"], clf.predict(list(ds["text"])))) if part is None or n % part[1] == part[0]]
            if self.output is not None:
                writer = JsonlWriter(self.output, command="share", shard=self.shard,
                                     config={"model": clf.name, "labels": clf.labels, "smoothing": self.smoothing})
                writer.extend(records)
                writer.close()
            return Outcome(_share_summary(clf.name, records, clf.labels, self.smoothing), records,
                           [self.output] if self.output else [])

    register_kind(Kind("share", "share", "audit share", "shares of the classes",
                       lambda cfg, recs: _share_summary(cfg["model"], recs, cfg["labels"], cfg["smoothing"]),
                       lambda cfg, recs, s: [["share", cfg.get("model"), "predicted classes", "–", "–", "–",
                                              f"{len(recs)} texts"]],
                       records=RecordSpec(fields={"*": {"id": (str, int), "prediction": (int,)}}, unique=True)))
    register(AuditRow("share", ShareRequest, "share.jsonl", "output", ("share",), metrics=("share", "n")))
    try:
        rule, dev = f"{world}/rule.py:clf", str(world / "dev.tsv")
        assert check_audit(ShareRequest(model=rule, data=dev, output=tmp_path / "checked.jsonl")).ok
        r = cli("share", "--model", rule, "--data", dev, "--json", "--output", str(tmp_path / "share.jsonl"))
        assert r.exit_code == 0, r.output
        summary = json.loads(r.stdout.strip().splitlines()[-1])
        assert summary == ShareRequest(model=rule, data=dev).run().summary and summary["n"] == 8
        assert results.load(tmp_path / "share.jsonl").summary() == summary
        r = cli("report", str(tmp_path / "share.jsonl"), "-o", str(tmp_path / "share.md"))
        assert r.exit_code == 0, r.output
        page = (tmp_path / "share.md").read_text()
        assert "predicted classes" in page and "Shares of the classes: rule.py:clf" in page
        for i in (0, 1):  # its shards merge as every kind that merges: the records and the summary of one run
            r = cli("share", "--model", rule, "--data", dev, "--shard", f"{i}/2", "-o", str(tmp_path / f"part{i}.jsonl"))
            assert r.exit_code == 0, r.output
        r = cli("merge", str(tmp_path / "all.jsonl"), str(tmp_path / "part0.jsonl"), str(tmp_path / "part1.jsonl"),
                "--json")
        assert r.exit_code == 0 and json.loads(r.stdout.strip().splitlines()[-1]) == summary, r.output
        assert sorted(results.load(tmp_path / "all.jsonl").records, key=lambda x: x["id"]) == \
            sorted(results.load(tmp_path / "share.jsonl").records, key=lambda x: x["id"])
        edited = tmp_path / "edited.jsonl"  # its records are read back by its own spec: a field and a repeat
        lines = (tmp_path / "share.jsonl").read_text().splitlines()
        edited.write_text("\n".join([*lines, lines[1]]) + "\n")
        with pytest.raises(TextAuditError, match=r"edited.jsonl:10 repeats the record of line 2"):
            results.load(edited)
        edited.write_text("\n".join([lines[0], json.dumps({**json.loads(lines[1]), "prediction": "1"})]) + "\n")
        r = cli("report", str(edited), "-o", str(tmp_path / "edited.md"))
        assert r.exit_code == 2 and "edited.jsonl:2: field 'prediction' must be int, got str" in r.output, r.output
        r = cli("share", "--model", rule, "--data", dev, "--smoothing", "2")
        assert r.exit_code == 2 and "Invalid value for '--smoothing'" in r.output and "Traceback" not in r.output, r.output
        positive = next(c["share"] for c in summary["classes"] if c["class"] == "positive")
        suite = tmp_path / "share.toml"
        suite.write_text(f'[suite]\ndata = "{dev}"\n[share]\nmodel = "{rule}"\n[thresholds]\n'
                         f'share.positive.share_max = {positive}\nshare.n_min = 9\n')
        r = cli("run", str(suite), "--json")
        assert r.stdout.strip(), r.output
        checks = {c["name"]: (c["value"], c["passed"]) for c in json.loads(r.stdout.strip().splitlines()[-1])["checks"]}
        assert r.exit_code == 1 and checks == {"share.positive.share_max": (positive, True), "share.n_min": (8, False)}
        assert (tmp_path / "share" / "share.jsonl").is_file() and "predicted classes" in \
            (tmp_path / "share" / "report.html").read_text()
        suite.write_text(f'[share]\nmodel = "{rule}"\nsmoothing = -1\n')
        r = cli("run", str(suite))
        assert r.exit_code == 2 and "[share] smoothing must be a number >= 0 and <= 1 (got -1" in r.output, r.output
    finally:
        unregister("share")
        unregister_kind("share")
    r = cli("share", "--model", rule)  # taken out of the table: its command goes with it
    assert r.exit_code == 2 and "No such command 'share'" in r.output, r.output
