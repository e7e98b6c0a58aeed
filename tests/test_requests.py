"""Each audit stated once (textaudit.request): the command's options are the request's fields, a suite section
takes the same fields with the same defaults and ranges, and a suite audit writes the records the command writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer

from textaudit.attacks.request import AttackRequest, CompareRequest
from textaudit.cli.main import app
from textaudit.cli.options import _TRACK_OPTIONS, BACKEND_OPTIONS, MODEL_OPTIONS
from textaudit.errors import TextAuditError
from textaudit.evaluation import EvaluateRequest
from textaudit.fairness.request import BiasRequest
from textaudit.findings import ReplayRequest
from textaudit.harden.request import HardenRequest
from textaudit.request import flags_of, from_mapping, specs, suite_fields
from textaudit.robustness.learnability import LearnabilityRequest
from textaudit.robustness.perturbscore.request import TuplesRequest
from textaudit.robustness.request import CertifyRequest
from textaudit.robustness.wordorder import WordOrderRequest

#: options a command takes from the groups declared once in textaudit.cli.app, and how it prints
GROUPS = {*MODEL_OPTIONS, *BACKEND_OPTIONS, *_TRACK_OPTIONS, "store", "score_cache", "json_out"}
#: each request and its command
REQUESTS = {"bias": BiasRequest, "attack": AttackRequest, "certify": CertifyRequest, "compare": CompareRequest,
            "replay": ReplayRequest, "harden": HardenRequest, "learnability": LearnabilityRequest,
            "wordorder": WordOrderRequest, "evaluate": EvaluateRequest, "perturbscore build": TuplesRequest}


def _command(name: str):
    """The command of ``name``; ``group sub``: a sub-command of a group (``perturbscore build``)."""
    command = typer.main.get_command(app)
    for part in name.split():
        command = dict(command.commands)[part]
    return command


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_every_option_of_the_command_is_a_field_of_its_request(name):
    """The command line is the request: every option outside the shared groups is a field, with the field's
    flags, default, range and help — so an option added to the command alone cannot exist."""
    cls = REQUESTS[name]
    fields = specs(cls)
    params = {p.name: p for p in _command(name).params if p.name in fields or p.name not in GROUPS}
    assert set(params) == set(fields)
    for field, (_, default, spec) in fields.items():
        p = params[field]
        declared = tuple(part for flag in flags_of(field, spec) for part in flag.split("/"))  # --ppl/--no-ppl
        if spec.argument:
            assert p.param_type_name == "argument", field
        else:
            assert tuple(p.opts) + tuple(p.secondary_opts) == declared, field
        if default is ...:
            assert p.required, field
        elif spec.sep:  # a list the command line writes as one string
            assert p.default == (spec.sep.join(default) if default else None), field
        else:
            assert p.default == default or (p.default in ((), None) and default in (None, [])), field
        assert p.help == spec.help, field
        low, high = getattr(p, "min", None), getattr(p, "max", None)
        # click's bounds are inclusive: an open range (a margin, a label threshold) is the request's own check, one
        # line in the range table's words (test_a_margin_has_one_range_wherever_it_is_given)
        assert (low, high) == ((None, None) if spec.open else (spec.low, spec.high)), field


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_a_suite_section_takes_every_field_of_the_request_with_its_range(name, tmp_path):
    """Every field a suite may set is accepted at its default, and refused out of range in one line that names the
    section and the key; the fields only the command line sets (output, resume, shard, plot) are refused."""
    cls = REQUESTS[name]
    where = ("s.toml", name)
    need = {f: ["cnn"] if spec.sep or spec.argument else spec.choices[0] if spec.choices else "cnn"
            for f, (_, default, spec) in suite_fields(cls).items() if default is ...}
    for field, (_, default, spec) in suite_fields(cls).items():
        if default is ...:  # required: a section without it is one line
            with pytest.raises(TextAuditError, match=f"needs {field} ="):
                from_mapping(cls, {k: v for k, v in need.items() if k != field}, *where)
            continue
        if default is not None:
            request = from_mapping(cls, {**need, field: default}, *where)
            assert getattr(request, field) == default
        if spec.low is not None:
            open_low = spec.open is True or spec.open == "low"
            bad = spec.low if open_low else spec.low - 1  # an open range refuses its bound itself
            op = ">" if open_low else ">="
            with pytest.raises(TextAuditError, match=rf"^s\.toml: \[{name}\] {field} must be .* {op} {spec.low:g}\b"):
                from_mapping(cls, {**need, field: bad}, *where)
        if spec.choices:
            with pytest.raises(TextAuditError, match=rf"\[{name}\] {field} must be {' or '.join(spec.choices)}"):
                from_mapping(cls, {**need, field: "neither"}, *where)
    for field in set(specs(cls)) - set(suite_fields(cls)):
        with pytest.raises(TextAuditError, match=f"unknown key '{field}'"):
            from_mapping(cls, {**need, field: "x"}, *where)


def test_a_bad_bias_request_is_one_line_before_anything_loads():
    with pytest.raises(TextAuditError, match="give exactly one of --pair"):
        BiasRequest(pair=["he,she"], group="gender").check()
    with pytest.raises(TextAuditError, match="unknown --ci 'wald'"):
        BiasRequest(pair=["he,she"], ci="wald").check()
    with pytest.raises(TextAuditError, match="--shard needs --output"):
        BiasRequest(pair=["he,she"], shard="0/2").check()
    with pytest.raises(TextAuditError, match="--pair needs a pair"):  # a suite's pair = []
        BiasRequest(pair=[]).check()
    checked = BiasRequest(pair=["he,she", "man,woman"]).check()
    assert checked.pairs == [("he", "she"), ("man", "woman")]


NOISY = '''
import math, zlib
def clf(texts):  # P(positive) = sigmoid(noise(text) + 0.4·[she ∈ x])
    out = []
    for t in texts:
        z = (zlib.crc32(t.lower().encode()) % 1000) / 1000 - 0.5 + 0.4 * ("she" in t.lower().split())
        p = 1 / (1 + math.exp(-z))
        out.append([1 - p, p])
    return out
'''


def _records(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted((r for r in rows if "header" not in r), key=lambda r: json.dumps(r, sort_keys=True))


def test_a_suite_bias_section_writes_the_records_the_command_writes(cli, tmp_path, tiny_mlm):
    """The same request from the command line and from [bias]: the same scored sentences, record for record."""
    (tmp_path / "m.py").write_text(NOISY)
    rows = [f"{'he' if i % 2 else 'she'} said the film was {a} ." for i, a in
            enumerate(["deep", "slow", "warm", "funny", "dull", "moving", "long", "bright", "clever", "flat"])]
    (tmp_path / "data.tsv").write_text("text\n" + "".join(f"{r}\n" for r in rows))
    tiny_mlm.model.save_pretrained(tmp_path / "mlm")
    tiny_mlm.tokenizer.save_pretrained(tmp_path / "mlm")
    settings = {"model": f"{tmp_path}/m.py:clf", "pair": "he,she", "k": 1, "mlm": str(tmp_path / "mlm"), "kappa": 3,
                "max_sources": 4, "sample": 5, "control": "auto"}
    args = [a for key, value in settings.items() for a in (f"--{key.replace('_', '-')}", str(value))]
    r = cli("bias", *args, "--data", str(tmp_path / "data.tsv"), "--output", str(tmp_path / "cli.jsonl"), "--json")
    assert r.exit_code == 0, r.output
    toml = "\n".join(f"{k} = {json.dumps(v)}" for k, v in settings.items())
    (tmp_path / "s.toml").write_text(f'[suite]\ndata = "{tmp_path / "data.tsv"}"\noutput_dir = "out"\n[bias]\n{toml}\n')
    r = cli("run", str(tmp_path / "s.toml"), "--json")
    assert r.exit_code == 0, r.output
    command, suite = _records(tmp_path / "cli.jsonl"), _records(tmp_path / "out" / "bias.jsonl")
    strip = [{k: v for k, v in rec.items() if "seconds" not in k} for rec in command]
    assert len(strip) > 10 and strip == [{k: v for k, v in rec.items() if "seconds" not in k} for rec in suite]
    # and the suite's older key for the pairs still reads the same
    (tmp_path / "s.toml").write_text((tmp_path / "s.toml").read_text().replace('pair = "he,she"', 'pairs = ["he,she"]'))
    r = cli("run", str(tmp_path / "s.toml"), "--json")
    assert r.exit_code == 0, r.output


SMOOTH = '''
def clf(texts):  # positive when the text holds "good", a little less sure when it also holds "not"
    return [[0.1, 0.9] if "good" in t.split() and "not" not in t.split() else
            [0.4, 0.6] if "good" in t.split() else [0.8, 0.2] for t in texts]
'''


def test_a_suite_certify_section_smooths_as_the_command_does(cli, tmp_path):
    """[certify] took IBP's zoo models only: now every option of audit certify, for any model. SAFER on a plug-in:
    the suite's file holds the command's records and its threshold reads the curve (certified_accuracy_r1)."""
    (tmp_path / "m.py").write_text(SMOOTH)
    rows = [(f"a {w} film , {a} good" if i % 2 else f"a {w} film , {a} dull", i % 2)
            for i, (w, a) in enumerate((w, a) for w in ("fine", "great", "nice") for a in ("really", "not", "so"))]
    (tmp_path / "data.tsv").write_text("text\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    model = f"{tmp_path}/m.py:clf"
    opts = {"method": "safer", "samples": 40, "selection": 10, "neighbors": 0, "seed": 3}
    args = [a for k, v in opts.items() for a in (f"--{k}", str(v))]
    r = cli("certify", "--model", model, "--data", str(tmp_path / "data.tsv"), *args,
            "--output", str(tmp_path / "cli.jsonl"), "--json")
    assert r.exit_code == 0, r.output
    command = json.loads(r.stdout.strip().splitlines()[-1])
    toml = "\n".join(f"{k} = {json.dumps(v)}" for k, v in opts.items() if k != "seed")
    (tmp_path / "s.toml").write_text(
        f'[suite]\ndata = "{tmp_path / "data.tsv"}"\noutput_dir = "out"\nseed = 3\n[certify]\nmodels = ["{model}"]\n'
        f'{toml}\n[thresholds]\ncertify."{model}".certified_accuracy_r1_min = 0.0\n'
        f'certify."{model}".accuracy_min = 0.0\n')
    r = cli("run", str(tmp_path / "s.toml"), "--json")
    assert r.exit_code == 0, r.output
    (written,) = (tmp_path / "out").glob("certify.*.jsonl")
    strip = lambda recs: [{k: v for k, v in x.items() if "seconds" not in k} for x in recs]  # noqa: E731
    assert len(_records(written)) == len(rows)
    assert strip(_records(written)) == strip(_records(tmp_path / "cli.jsonl"))
    suite = json.loads(r.stdout.strip().splitlines()[-1])
    checks = {c["name"]: c for c in suite["checks"]}
    # nothing certified at radius 1 here: the curve stops at 0, and the gate reads 0 (not a missing value)
    assert command["curve"][-1]["radius"] == 0 and "certified_accuracy_r1" not in command
    assert checks[f"certify.{model}.certified_accuracy_r1_min"]["value"] == 0.0
    assert checks[f"certify.{model}.accuracy_min"]["value"] == command["accuracy"]


def _smooth_world(tmp_path: Path, tiny_mlm) -> tuple[str, list[tuple[str, int]]]:
    """The SMOOTH plug-in, twelve labelled sentences (data.tsv) and the tiny masked LM saved (mlm/): the model
    spec and the rows."""
    (tmp_path / "m.py").write_text(SMOOTH)
    rows = [(f"a {w} film , {a} good" if i % 2 else f"a {w} film , {a} dull", i % 2)
            for i, (w, a) in enumerate((w, a) for w in ("fine", "great") for a in ("really", "not", "so"))]
    (tmp_path / "data.tsv").write_text("text\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    tiny_mlm.model.save_pretrained(tmp_path / "mlm")
    tiny_mlm.tokenizer.save_pretrained(tmp_path / "mlm")
    return f"{tmp_path}/m.py:clf", rows


def test_a_suite_compare_section_writes_the_cells_the_command_writes(cli, tmp_path, tiny_mlm):
    """[compare] took six keys (k at least 1, where the command takes 0): now every option of audit compare, with
    the command's ranges; the suite's cells hold the command's records."""
    model, rows = _smooth_world(tmp_path, tiny_mlm)
    r = cli("compare", "--models", model, "--methods", "so-enum,bae", "--k", "1", "--mlm", str(tmp_path / "mlm"),
            "--data", str(tmp_path / "data.tsv"), "--output-dir", str(tmp_path / "cmd"), "--json")
    assert r.exit_code == 0, r.output
    (tmp_path / "s.toml").write_text(
        f'[suite]\ndata = "{tmp_path / "data.tsv"}"\noutput_dir = "out"\n[compare]\nmodels = ["{model}"]\n'
        f'methods = ["so-enum", "bae"]\nk = 1\nmlm = "{tmp_path / "mlm"}"\n')
    r = cli("run", str(tmp_path / "s.toml"), "--json")
    assert r.exit_code == 0, r.output
    cells = sorted(p.name for p in (tmp_path / "cmd").glob("*.jsonl"))
    assert len(cells) == 2 and cells == sorted(p.name for p in (tmp_path / "out" / "compare").glob("*.jsonl"))
    strip = lambda recs: [{k: v for k, v in x.items() if "seconds" not in k} for x in recs]  # noqa: E731
    for name in cells:
        mine, suite = _records(tmp_path / "cmd" / name), _records(tmp_path / "out" / "compare" / name)
        assert len(mine) == len(rows) and strip(mine) == strip(suite)


def test_a_suite_replay_section_writes_the_records_the_command_writes(cli, tmp_path):
    """[replay] is audit replay's request (and the suite's gates): the same findings, the same statuses."""
    from textaudit.formats.jsonl import write_results

    (tmp_path / "m.py").write_text(SMOOTH)
    records = [{"id": str(i), "status": "success", "method": "so-enum", "text": f"item {i} good", "label": 1,
                "vulnerable": f"item {i} good", "vulnerable_patched": f"item {i} {'dull' if i % 3 else 'not good'}",
                "pair": ["good", "dull"], "l0": 0, "seconds": 0.0, "queries": 2} for i in range(12)]
    write_results(tmp_path / "found.jsonl", records, command="attack", config={"method": "so-enum", "model": "old"})
    model = f"{tmp_path}/m.py:clf"
    r = cli("replay", str(tmp_path / "found.jsonl"), "--model", model, "--output", str(tmp_path / "cmd.jsonl"), "--json")
    assert r.exit_code == 0, r.output
    (tmp_path / "s.toml").write_text(f'[suite]\noutput_dir = "out"\n[replay]\nfindings = ["found.jsonl"]\n'
                                     f'model = "{model}"\nmax_still = 1.0\n')
    r = cli("run", str(tmp_path / "s.toml"), "--json")
    assert r.exit_code == 0, r.output
    norm = lambda recs: [{k: v for k, v in x.items() if k != "file"} for x in recs]  # noqa: E731 (the path as given)
    command, suite = _records(tmp_path / "cmd.jsonl"), _records(tmp_path / "out" / "replay.jsonl")
    assert len(command) == 12 and {x["status"] for x in command} == {"still", "fixed"}
    assert norm(command) == norm(suite)


def test_a_suite_attack_section_writes_the_records_the_command_writes(cli, tmp_path, tiny_mlm):
    """[attack] is audit attack's request: every option of the command (here κ, δ and the query budget, which
    [compare] does not take) with its ranges, the command's records, and its thresholds read the summary."""
    model, rows = _smooth_world(tmp_path, tiny_mlm)
    options = {"method": "so-enum", "k": 1, "kappa": 12, "delta": 2.5, "max_queries": 400, "naturalness": "off"}
    flags = [part for key, value in options.items() for part in (f"--{key.replace('_', '-')}", str(value))]
    r = cli("attack", "--model", model, *flags, "--mlm", str(tmp_path / "mlm"), "--data", str(tmp_path / "data.tsv"),
            "--no-ppl", "--output", str(tmp_path / "cmd.jsonl"), "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    section = "".join(f"{key} = {json.dumps(value)}\n" for key, value in options.items())
    (tmp_path / "s.toml").write_text(
        f'[suite]\ndata = "{tmp_path / "data.tsv"}"\noutput_dir = "out"\n[attack]\nmodel = "{model}"\n{section}'
        f'mlm = "{tmp_path / "mlm"}"\nppl = false\n[thresholds]\nattack.success_rate_max = {summary["success_rate"]}\n'
        f'attack.success_rate_ci_high_min = 1.01\n')
    r = cli("run", str(tmp_path / "s.toml"), "--json")
    assert r.exit_code == 1, r.output  # the interval's end cannot reach 1.01; the success rate is the command's
    checks = {c["name"]: c for c in json.loads(r.stdout.strip().splitlines()[-1])["checks"]}
    assert checks["attack.success_rate_max"]["passed"] and not checks["attack.success_rate_ci_high_min"]["passed"]
    strip = lambda recs: [{k: v for k, v in x.items() if "seconds" not in k} for x in recs]  # noqa: E731
    command, suite = _records(tmp_path / "cmd.jsonl"), _records(tmp_path / "out" / "attack.jsonl")
    assert len(command) == len(rows) and strip(command) == strip(suite)
    assert {x["status"] for x in command} >= {"success"}
    (tmp_path / "bad.toml").write_text(f'[attack]\nmodel = "{model}"\nkappa = 0\n')
    bad = cli("run", str(tmp_path / "bad.toml"))
    assert bad.exit_code == 2 and "bad.toml: [attack] --kappa (κ) must be at least 1" in bad.output


def test_two_models_that_would_share_a_results_file_are_refused_before_anything_runs(cli, tmp_path):
    """#63 (misleading): two models whose names make one file name (a/b and a:b) were found out only after the
    first ran; now a compare and a suite's [certify] refuse them in one line before anything loads."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.py").write_text(SMOOTH)
    (tmp_path / "a_m.py").write_text(SMOOTH)
    one, two = f"{tmp_path}/a/m.py:clf", f"{tmp_path}/a_m.py:clf"  # both a_m.py_clf as a file name
    r = cli("compare", "--models", f"{one},{two}", "--methods", "bae", "--output-dir", str(tmp_path / "cmp"))
    assert r.exit_code == 2 and "would write one results file" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "cmp").exists()
    (tmp_path / "s.toml").write_text(f'[certify]\nmodels = ["{one}", "{two}"]\nmethod = "safer"\n')
    r = cli("run", str(tmp_path / "s.toml"))
    assert r.exit_code == 2 and "[certify] models" in r.stderr and "would write one results file" in r.stderr
    with pytest.raises(TextAuditError, match="would write one results file"):
        CompareRequest(models=[one, two], methods=["bae"]).check()


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_every_commands_choices_are_the_fields_own(name, tmp_path):
    """#82: a field's choices were checked per command (``--naturalness maybe`` was accepted with ``--method
    genetic``, which reads no naturalness): now by the field spec for every command, whatever the other options,
    in one line before any model loads — the same as a suite section."""
    from typer.testing import CliRunner

    cls = REQUESTS[name]
    chosen = [(f, spec) for f, (_, _, spec) in specs(cls).items() if spec.choices and not spec.argument]
    value = {f: spec.choices[0] if spec.choices else "cnn" for f, (_, _, spec) in specs(cls).items()}
    need = [part for f, (_, default, spec) in specs(cls).items() if default is ...
            for part in (([value[f]] if spec.argument else [flags_of(f, spec)[0], value[f]]))]
    extra = ["--method", "genetic"] if name == "attack" else []
    for field, spec in chosen:
        r = CliRunner().invoke(app, [*name.split(), *need, *extra, flags_of(field, spec)[0], "maybe"])
        assert r.exit_code == 2 and "Traceback" not in r.output, (field, r.output)
        assert f"must be {' or '.join(spec.choices)} (got 'maybe')" in r.output, (field, r.output)


@pytest.mark.parametrize("margin, ok", [(0, False), (1, False), (1.5, False), (0.02, True), (0.999, True)])
def test_a_margin_has_one_range_wherever_it_is_given(cli, tmp_path, margin, ok):
    """#81: a non-inferiority margin was checked in four places with two bounds (the compare option took 0 and 1,
    the checks refused them). Now each reads RANGES["margin"]: the two requests' fields, the library's check, the
    suite's [replay] key and the command line refuse and accept the same values, in the same words."""
    from textaudit.request import RANGES, range_words, within
    from textaudit.stats import check_margin

    words = range_words("margin")
    assert words == "a number > 0 and < 1" and within("margin", margin) is ok
    for cls in (CompareRequest, ReplayRequest):
        spec = specs(cls)["margin"][2]
        assert (spec.low, spec.high, spec.open) == tuple(RANGES["margin"][k] for k in ("low", "high", "open"))
    replay = {"findings": ["f.jsonl"], "model": "cnn", "baseline": "bow", "margin": margin}  # (the suite's [replay])
    if ok:
        check_margin(margin, True)
        assert from_mapping(CompareRequest, {"models": ["a", "b"], "margin": margin}, "s.toml", "compare").margin == margin
        assert from_mapping(ReplayRequest, replay, "s.toml", "replay").margin == margin
        return
    with pytest.raises(TextAuditError, match=f"--margin must be {words}"):
        check_margin(margin, True)
    for cls, section, values in ((CompareRequest, "compare", {"models": ["a", "b"], "margin": margin}),
                                 (ReplayRequest, "replay", replay)):
        with pytest.raises(TextAuditError, match=rf"\[{section}\] margin must be {words}"):
            from_mapping(cls, values, "s.toml", section)
    r = cli("compare", "--models", "cnn,lstm", "--methods", "so-beam", "--output-dir", str(tmp_path / "c"),
            "--margin", str(margin))
    assert r.exit_code == 2 and f"--margin must be {words}" in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("rate, ok", [(-0.1, False), (1, False), (1.5, False), (0, True), (0.9, True)])
def test_a_mask_rate_has_one_range_wherever_it_is_given(cli, tmp_path, rate, ok):
    """#81: RanMASK's ρ was checked in four places (certify's request, harden's, the smoother, the hardened model's
    threat record), each with its own comparison. Now each reads RANGES["mask_rate"], a range closed below and open
    above ([0, 1)): the same values refused and accepted, in the same words, by the two requests' fields, the smoother,
    the threat record's reader and the command line."""
    from textaudit.formats.harden import _sound_threat
    from textaudit.harden.request import HardenRequest
    from textaudit.models import as_classifier
    from textaudit.request import RANGES, range_words, within
    from textaudit.robustness.request import CertifyRequest
    from textaudit.robustness.smoothing import RanMASK

    words = range_words("mask_rate")
    assert words == "a number >= 0 and < 1" and within("mask_rate", rate) is ok
    for cls in (CertifyRequest, HardenRequest):
        spec = specs(cls)["mask_rate"][2]
        assert (spec.low, spec.high, spec.open) == tuple(RANGES["mask_rate"][k] for k in ("low", "high", "open"))
    assert _sound_threat({"method": "ranmask", "mask_rate": rate, "mask_token": "[MASK]"}) is ok
    if ok:
        assert RanMASK(as_classifier(lambda texts: [[0.5, 0.5]] * len(texts)), rate=rate).rate == rate
        assert from_mapping(CertifyRequest, {"model": "cnn", "mask_rate": rate}, "s.toml", "certify").mask_rate == rate
        return
    with pytest.raises(TextAuditError, match=f"--mask-rate must be {words}"):
        RanMASK(as_classifier(lambda texts: [[0.5, 0.5]] * len(texts)), rate=rate)
    with pytest.raises(TextAuditError, match=rf"\[certify\] mask_rate must be {words}"):
        from_mapping(CertifyRequest, {"model": "cnn", "mask_rate": rate}, "s.toml", "certify")
    for command in (["certify", "--model", "cnn", "--method", "ranmask"],
                    ["harden", "--model", "cnn", "--method", "masked", "--out", str(tmp_path / "h")]):
        r = cli(*command, "--mask-rate", str(rate))
        assert r.exit_code == 2 and f"--mask-rate must be {words}" in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "h").exists()
