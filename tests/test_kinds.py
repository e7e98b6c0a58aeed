"""The table of results kinds (textaudit.kinds) holds the rest of the package to it: every kind has its report
section, every command that resumes is a resumable kind and the reverse, a kind that does not merge is refused
before anything is written, and each reader (results.load, audit merge, audit report) summarizes a file alike."""

from __future__ import annotations

import json

import pytest
import typer

from textaudit.cli.app import interrupt_hint
from textaudit.cli.main import app
from textaudit.errors import TextAuditError
from textaudit.formats.jsonl import write_results
from textaudit.kinds import BY_ID, KINDS, kind_of, resumable_commands, summarize_records
from textaudit.report.sections import BUILDERS


def _commands(group, prefix: str = ""):
    """Every command of the tree, by its command line (typer's groups are click's, vendored or not)."""
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


def test_every_kind_has_its_report_section_and_every_section_its_kind():
    assert set(BUILDERS) == set(BY_ID)
    assert len(BY_ID) == len(KINDS)


def test_the_commands_that_resume_are_the_resumable_kinds():
    """A command with --resume writes a kind that resumes, and a resumable kind's command has --resume: the
    interrupt hint and the readers follow the table, so the table must follow the commands."""
    tree = dict(_commands(typer.main.get_command(app)))
    with_resume = {name for name, command in tree.items() if any(p.name == "resume" for p in command.params)}
    assert with_resume == set(resumable_commands())
    for name in resumable_commands():
        assert interrupt_hint([*name.split(), "--output", "x.jsonl"]).endswith("rerun with --resume to continue")


@pytest.mark.parametrize("header, kind", [
    ({"command": "certify", "config": {"method": "safer"}}, "certify"),
    ({"command": "certify", "config": {"method": "ranmask"}}, "certify"),
    ({"command": "certify", "config": {"model": "cnn-ibp"}}, "certify-ibp"),  # IBP's header names no method
    ({"command": "perturbscore build", "config": {}}, "perturbscore build"),
    ({"command": "attack", "config": {}}, "attack"),
])
def test_a_header_names_its_kind(header, kind):
    assert kind_of(header).id == kind


def test_a_header_no_command_writes_is_one_line_naming_the_writers():
    with pytest.raises(TextAuditError, match="'train' results are not a kind textaudit writes; .*audit attack"):
        kind_of({"command": "train"})


def test_an_ibp_certification_is_refused_by_merge_before_anything_is_written(tmp_path, cli):
    """IBP's file holds one record per model: audit merge says so and writes no file (it used to write the
    merged file and fail on its summary after)."""
    ibp = tmp_path / "ibp.jsonl"
    write_results(ibp, [{"id": "cnn-ibp", "n": 10, "accuracy": 0.8, "certified_accuracy": 0.5}], command="certify",
                  config={"model": "cnn-ibp", "data": "sst2:dev"})
    out = tmp_path / "merged.jsonl"
    result = cli("merge", str(out), str(ibp))
    assert result.exit_code == 2
    assert "one record per model: there is nothing to merge" in result.output
    assert not out.exists()
    assert kind_of({"command": "certify", "config": {"model": "cnn-ibp"}}).per_model


def test_a_smoothing_file_is_summarized_alike_by_every_reader(tmp_path, cli):
    """A SAFER file: results.load's summary, audit merge's --json and the table's summarize agree."""
    from textaudit.results import load

    records = [{"id": str(i), "label": 1, "prediction": 1 if i % 3 else 0, "correct": bool(i % 3), "words": 5,
                "radius": 1 if i % 2 else 2, "abstain": False} for i in range(6)]
    header = {"command": "certify", "config": {"method": "safer", "model": "m", "data": "d"}}
    path = tmp_path / "safer.jsonl"
    write_results(path, records, command="certify", config=header["config"])
    direct = summarize_records(header, records)
    assert load(path).summary() == direct
    merged = cli("merge", str(tmp_path / "all.jsonl"), str(path), "--json")
    assert merged.exit_code == 0, merged.output
    assert json.loads(merged.stdout.strip().splitlines()[-1]) == json.loads(json.dumps(direct))


def test_a_certify_interrupt_by_ibp_keeps_nothing():
    assert interrupt_hint(["certify", "--model", "cnn-ibp", "--output", "x.jsonl"]) == "nothing to keep"
    assert interrupt_hint(["certify", "--method", "ibp", "--model", "m", "-o", "x"]) == "nothing to keep"
    assert "rerun with --resume" in interrupt_hint(["certify", "--method=ranmask", "--model", "m", "--output", "x"])


def test_a_kind_without_its_summary_table_rows_cannot_be_declared():
    """Each kind gives its own rows of a report's summary table (no if/elif over kinds elsewhere): the row is
    incomplete without them, and every declared kind has them."""
    from textaudit.kinds import Kind

    assert all(callable(kind.headline) for kind in KINDS)
    with pytest.raises(TypeError, match="headline"):
        Kind("toy", "toy", "audit toy", "a toy's results", None)  # type: ignore[call-arg]


def test_a_kind_without_its_records_cannot_be_declared():
    """A kind's records (what each holds, what identifies one) are part of its row: every declared kind has a
    RecordSpec whose key reads the records of its kind, and a row without one is incomplete."""
    from textaudit.formats.jsonl import RecordSpec
    from textaudit.kinds import Kind

    assert all(isinstance(kind.records, RecordSpec) and callable(kind.records.key) for kind in KINDS)
    assert BY_ID["attack"].records.unique and BY_ID["bias"].records.unique
    # a resumable kind appends a record per unit as it finishes: a repeat in its file (lines pasted from another copy)
    # would count a unit twice in the figures a resume or a merge reads back, so every one of them refuses it
    assert [kind.id for kind in KINDS if kind.resumable and not kind.records.unique] == []
    assert BY_ID["bias"].records.key({"unit": "u", "model": "m", "i": 3}) == ("u", "m", 3)
    with pytest.raises(TypeError, match="records"):
        Kind("toy", "toy", "audit toy", "a toy's results", None, lambda cfg, recs, s: [])  # type: ignore[call-arg]


def _attack_file(path, records):
    write_results(path, records, command="attack", config={"method": "so-enum", "k": 1, "model": "m"})


@pytest.mark.parametrize("reader", ["load", "report", "merge"])
def test_every_reader_checks_a_file_by_its_kinds_records(tmp_path, cli, reader):
    """results.load, audit report and audit merge read a file through its kind's records: a status the attack does
    not write, a field of the wrong type, a pasted repeat — each one line naming the file's line."""
    from textaudit import results

    ok = {"id": "a", "status": "failed", "label": 1, "prediction": 1, "seconds": 0.5, "queries": 3}
    cases = [([ok, {**ok, "id": "b", "status": "won"}], "x.jsonl:3: status 'won' is not one of success, failed"),
             ([{**ok, "queries": "many"}], "x.jsonl:2: field 'queries' must be a finite number >= 0, got str"),
             ([ok, {**ok, "id": "b"}, ok], "x.jsonl:4 repeats the record of line 2 ('a')")]
    for records, message in cases:
        path = tmp_path / "x.jsonl"
        path.unlink(missing_ok=True)
        _attack_file(path, records)
        if reader == "load":
            with pytest.raises(TextAuditError) as e:
                results.load(path)
            got = str(e.value)
        else:
            args = ["report", str(path), "-o", str(tmp_path / "r.md")] if reader == "report" else \
                ["merge", str(tmp_path / "m.jsonl"), str(path)]
            r = cli(*args)
            assert r.exit_code == 2 and "Traceback" not in r.output, r.output
            got = r.output
            assert not (tmp_path / "m.jsonl").exists()  # a refused merge writes nothing
        assert message in " ".join(got.split()), got


def test_merge_joins_records_by_their_kinds_key(tmp_path, cli):
    """A bias file's records are one per (unit, model, i), not per id: merging a shard with a resumed copy of itself
    keeps each once by that key, where an id-keyed merge would keep one record per unit."""
    from textaudit.merge import merge_results

    recs = [{"unit": "u1", "model": "m", "i": i, "score": i / 10} for i in range(3)] + \
        [{"unit_done": "u1", "model": "m"}]
    config = {"k": 1, "enumerate_k": 1, "model": "m"}
    for name in ("a.jsonl", "b.jsonl"):
        write_results(tmp_path / name, recs, command="bias", config=config)
    _, merged = merge_results(tmp_path / "all.jsonl", [tmp_path / "a.jsonl", tmp_path / "b.jsonl"])
    assert merged == recs
