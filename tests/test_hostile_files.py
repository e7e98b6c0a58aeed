"""#63: every file textaudit reads from a user or a shared folder × {not ours, damaged, hostile but valid}: one line
that says what to do, exit 2, no traceback, and the file as it was (nothing set aside, rewritten or deleted)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from test_replay import ROWS, WEAK

HEADER = {"header": {"command": "attack", "config": {"method": "so-enum", "model": "weak.py:clf"}, "textaudit": "0.1.0"}}
FINDING = {"id": "d:0", "status": "success", "method": "so-enum", "text": ROWS[0], "label": 1, "prediction": 1,
           "vulnerable": ROWS[0], "vulnerable_patched": ROWS[0].replace("film", "movie"), "pair": ["film", "movie"],
           "l0": 0, "seconds": 0.0, "queries": 2}


#: valid JSON nested deeper than Python's parser goes
DEEP = "[" * 100_000 + "]" * 100_000


def _jsonl(*rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


CASES = {
    # audit replay FILE
    "replay: not ours (a text file)": ("replay", "notes.txt", "my notes\nmore notes\n"),
    "replay: damaged (a cut line)": ("replay", "r.jsonl", _jsonl(HEADER, json.dumps(FINDING)[:40])),
    "replay: hostile (pair a number)": ("replay", "r.jsonl", _jsonl(HEADER, {**FINDING, "pair": 5})),
    "replay: hostile (texts as lists)": ("replay", "r.jsonl", _jsonl(HEADER, {**FINDING, "vulnerable": ["a", "b"]})),
    "replay: hostile (label out of range)": ("replay", "r.jsonl", _jsonl(HEADER, {**FINDING, "label": 7})),
    "replay: hostile (header of a list)": ("replay", "r.jsonl", _jsonl({"header": []}, FINDING)),
    # audit certify --synonyms FILE
    "synonyms: not ours (a text file)": ("synonyms", "syn.json", "good: great, fine\n"),
    "synonyms: damaged (cut JSON)": ("synonyms", "syn.json", '{"good": ["great", "fi'),
    "synonyms: hostile (a number for a list)": ("synonyms", "syn.json", '{"good": 5}'),
    "synonyms: hostile (numbers in a list)": ("synonyms", "syn.json", '{"good": [1, 2]}'),
    "synonyms: hostile (a list at the top)": ("synonyms", "syn.json", '[["good", "great"]]'),
    # audit attack --resume FILE
    "resume: not ours (JSON lines without a header)": ("resume", "a.jsonl", _jsonl({"id": 1, "mine": True})),
    "resume: damaged (a cut header)": ("resume", "a.jsonl", json.dumps(HEADER)[:30] + "\n"),
    "resume: hostile (another command's header)": ("resume", "a.jsonl", _jsonl(
        {"header": {"command": "bias", "config": {"k": 1}, "textaudit": "0.1.0"}})),
    # audit store import FILE
    "store import: not ours (a text file)": ("import", "s.sqlite", "not a database\n"),
    "store import: damaged (an SQLite header, garbage behind)": ("import", "s.sqlite", None),
    # --pairs-file FILE
    "pairs: not ours (binary)": ("pairs", "pairs.txt", b"\x00\xff\xfe binary"),
    "pairs: hostile (one word a line)": ("pairs", "pairs.txt", "film\nmovie\n"),
    # the other files a user names: binary where text is expected
    "data: not ours (binary)": ("data", "data.tsv", b"\x00\xff\xfe\x00 binary\n"),
    "synonyms: not ours (binary)": ("synonyms", "syn.json", b"\xff\xfe{\x00"),
    "prompt: not ours (binary)": ("prompt", "prompt.toml", b"\xff\xfe\x00 binary"),
    "suite: not ours (binary)": ("suite", "suite.toml", b"\xff\xfe\x00 binary"),
    "suite: damaged (cut TOML)": ("suite", "suite.toml", "[suite]\nname = \"x"),
    "suite: hostile (a section of the wrong type)": ("suite", "suite.toml", "suite = 5\n"),
    # #82: hostile but valid, nested 100,000 deep (a RecursionError traceback in Python's parsers)
    "replay: hostile (a line nested 100,000 deep)": ("replay", "r.jsonl", _jsonl(HEADER, DEEP)),
    "replay: hostile (a header nested 100,000 deep)": ("replay", "r.jsonl", '{"header": ' + DEEP + "}\n"),
    "resume: hostile (a line nested 100,000 deep)": ("resume", "a.jsonl", _jsonl(HEADER, DEEP)),
    "synonyms: hostile (nested 100,000 deep)": ("synonyms", "syn.json", '{"good": ' + DEEP + "}"),
    "data: hostile (a JSON line nested 100,000 deep)": ("data", "data.jsonl", '{"text": ' + DEEP + ', "label": 1}\n'),
    "prompt: hostile (a table nested 100,000 deep)": ("prompt", "prompt.toml", "x = " + "[" * 100_000 + "]" * 100_000),
    "suite: hostile (an array nested 100,000 deep)": ("suite", "suite.toml", "x = " + "[" * 100_000 + "]" * 100_000),
    "report: hostile (a line nested 100,000 deep)": ("report", "r.jsonl", _jsonl(HEADER, DEEP)),
    "merge: hostile (a line nested 100,000 deep)": ("merge", "r.jsonl", _jsonl(HEADER, DEEP)),
    "track: hostile (a kept run nested 100,000 deep)": ("track", "g.jsonl.track.json", '{"run": ' + DEEP + "}"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_file_is_one_line_and_left_as_it_was(case, tmp_path, cli, tiny_mlm):
    what, name, content = CASES[case]
    (tmp_path / "weak.py").write_text(WEAK)
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(f"1\t{r}\n" for r in ROWS))
    f = tmp_path / name
    if content is None:
        f.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 64)
    elif isinstance(content, bytes):
        f.write_bytes(content)
    else:
        f.write_text(content)
    before = hashlib.sha256(f.read_bytes()).hexdigest()
    model = f"{tmp_path}/weak.py:clf"
    args = {
        "replay": ["replay", str(f), "--model", model],
        "synonyms": ["certify", "--model", model, "--method", "safer", "--data", str(tmp_path / "d.tsv"), "--synonyms",
                     str(f), "--neighbors", "0", "--samples", "10", "--selection", "5"],
        "resume": ["attack", "--model", model, "--method", "genetic", "--data", str(tmp_path / "d.tsv"), "--output", str(f),
                   "--resume"],
        "import": ["store", "import", str(f), "--store", str(tmp_path / "mine.sqlite")],
        "pairs": ["attack", "--model", model, "--method", "so-enum", "--k", "1", "--data", str(tmp_path / "d.tsv"),
                  "--pairs-file", str(f), "--no-ppl"],
        "data": ["evaluate", "--model", model, "--data", str(f)],
        "prompt": ["evaluate", "--model", "http://127.0.0.1:9/v1/completions", "--prompt-file", str(f), "--data",
                   str(tmp_path / "d.tsv")],
        "suite": ["run", str(f)],
        "report": ["report", str(f), "--output", str(tmp_path / "out.html")],
        "merge": ["merge", str(f), str(f), "--output", str(tmp_path / "merged.jsonl")],
        "track": ["track", str(tmp_path / "g.jsonl")],
    }[what]
    if what == "track":  # the results beside the kept run: a finished file of ours
        (tmp_path / "g.jsonl").write_text(_jsonl({**HEADER}, FINDING))
    r = cli(*args)
    errors = [x for x in r.output.splitlines() if x.startswith("error:")]
    assert r.exit_code == 2 and len(errors) == 1 and "Traceback" not in r.output, (case, r.output)
    assert hashlib.sha256(f.read_bytes()).hexdigest() == before, case  # read, never rewritten
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(Path(name).stem)) == [name], case


LEXICONS = {"counterfitted-neighbors": "modified_counterfitted_neighbors.json", "gender-pairs": "wino_male_female.json",
            "checklist-lexicons": "checklist_lexicons.json"}


@pytest.mark.parametrize("content", ["not json at all", DEEP, "9" * 5000, '["a list"]', '{"good": 5}', "[[1, 2]]"])
def test_a_lexicon_under_textaudit_data_that_is_not_its_shape_is_one_line(content, tmp_path, monkeypatch):
    """#82: the lexicons under ``TEXTAUDIT_DATA`` carry no hash (a user may ship their own); one that is not JSON, is
    nested too deep, holds a 5,000-digit number or has another shape was a traceback (KeyError, TypeError,
    RecursionError) where it was first used. Now one line naming the file and what to do."""
    import shutil

    from textaudit.errors import TextAuditError
    from textaudit.fairness import groups
    from textaudit.lexicons import counterfitted_neighbors
    from textaudit.perturbations.gender import gender_swap_map

    real = Path(__import__("os").environ["TEXTAUDIT_DATA"])
    data = tmp_path / "data"
    shutil.copytree(real / "lexicons", data / "lexicons")
    monkeypatch.setenv("TEXTAUDIT_DATA", str(data))
    readers = {"counterfitted-neighbors": counterfitted_neighbors, "gender-pairs": gender_swap_map,
               "checklist-lexicons": groups._checklist}
    try:
        for name, file in LEXICONS.items():
            (data / "lexicons" / file).write_text(content)
            for r in readers.values():
                r.cache_clear()
            with pytest.raises(TextAuditError) as e:
                readers[name]()
            assert name in str(e.value) and "TEXTAUDIT_DATA" in str(e.value) and "\n" not in str(e.value)
            shutil.copy(real / "lexicons" / file, data / "lexicons" / file)
    finally:
        for r in readers.values():
            r.cache_clear()
