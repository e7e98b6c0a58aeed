"""A first release: the version in one place, the citation, and a built wheel that runs offline
without the source tree."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from textaudit import __version__
from textaudit.citations import COMMANDS, PAPERS, bibtex, keys_for

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_lives_in_one_place_and_the_release_files_name_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    cff = (ROOT / "CITATION.cff").read_text()
    assert re.search(r'^version: "([^"]+)"$', cff, re.M).group(1) == __version__
    assert re.search(r"^cff-version: 1\.2\.0$", cff, re.M)
    assert f"## {__version__} " in (ROOT / "CHANGELOG.md").read_text()


def _entries(text: str) -> list[tuple[str, str]]:
    """(key, body) of each BibTeX entry, checking that braces balance."""
    out = []
    for m in re.finditer(r"@(\w+)\{([\w-]+),\n", text):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out.append((m.group(2), text[m.end():i - 1]))
    return out


def test_every_paper_is_wellformed_bibtex_and_cited_by_a_command():
    for key, entry in PAPERS.items():
        ((k, body),) = _entries(entry + "\n")
        assert k == key
        for field in ("title", "author", "year"):
            assert re.search(rf"^  {field} = \{{.+\}},?$", body, re.M), (key, field)
    cited = {k for keys in COMMANDS.values() for k in keys}
    assert cited == set(PAPERS)
    everything = _entries(bibtex())
    assert [k for k, _ in everything] == ["textaudit", *PAPERS]
    assert f"version = {{{__version__}}}" in everything[0][1]


def test_audit_cite_names_a_commands_papers_and_refuses_an_unknown_command(cli):
    from textaudit.cli.main import app

    registered = {c.name or c.callback.__name__ for c in app.registered_commands} | {g.name for g in app.registered_groups}
    assert set(COMMANDS) <= registered
    r = cli("cite", "bias")
    assert r.exit_code == 0
    keys = [k for k, _ in _entries(r.stdout)]
    assert keys == ["textaudit", *keys_for("bias")] and "zhang2021double" in keys and "zhao2018gender" in keys
    assert "jia2019certified" not in keys
    keys = [k for k, _ in _entries(cli("cite", "harden").stdout)]  # what harden's methods come from
    assert {"zhang2021double", "morris2020textattack", "zheng2016stability", "garg2019counterfactual"} <= set(keys)
    r = cli("cite", "wordorder", "--json")
    assert r.exit_code == 0
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert list(out["papers"]) == ["clouatre2021demystifying", "socher2013recursive"]
    r = cli("cite", "attak")
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [r.output.strip()] and r.output.startswith("error: audit cite knows no command 'attak'")


@pytest.mark.slow
def test_the_built_wheel_runs_doctor_and_an_attack_offline_without_the_source_tree(tmp_path):
    """Build the wheel from a copy of what a release ships, install it (no deps) into a fresh venv that
    sees the test environment's dependencies but not its editable textaudit, and run the README's first
    look from an empty directory."""
    pytest.importorskip("build", reason="python -m build is in the test extra")
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(tree)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    (wheel,) = dist.glob(f"textaudit-{__version__}-py3-none-any.whl")
    r = subprocess.run([sys.executable, "-m", "twine", "check", str(wheel)], capture_output=True, text=True)
    assert r.returncode == 0 and "PASSED" in r.stdout, r.stdout + r.stderr

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # the dependencies from this environment (a .pth line: its editable textaudit's own .pth is not read)
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(TEXTAUDIT_CACHE=str(cache), TEXTAUDIT_PROGRESS_SECONDS="3600")
    empty = tmp_path / "empty"
    empty.mkdir()
    r = subprocess.run([str(py), "-c", "import textaudit, textaudit.citations as c; print(textaudit.__file__)"],
                       cwd=empty, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip().startswith(str(venv)), r.stdout + r.stderr

    audit = str(venv / "bin" / "audit")
    r = subprocess.run([audit, "doctor", "--no-network", "--json"], cwd=empty, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = {row["name"]: row for row in json.loads(r.stdout.strip().splitlines()[-1])["resources"]}
    assert rows["minilm-mlm"]["found"] and str(venv) in rows["minilm-mlm"]["path"]  # the artifact in the wheel
    # a small cnn in the cache (the full one trains for a minute and more; this test is about the wheel)
    r = subprocess.run([str(py), "-c", "from textaudit.models.zoo import train_model; "
                        "train_model('cnn', if_missing=True, progress=False, max_train=20000, epochs=1)"],
                       cwd=empty, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([audit, "attack", "--model", "cnn", "--k", "2", "--limit", "3", "--no-ppl", "--json"],
                       cwd=empty, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["n"] == 3 and summary["attacked"] + summary["skipped"] == 3 and summary["method"] == "so-enum"
    assert not any(empty.iterdir())  # nothing written where it ran: --output was not asked for
