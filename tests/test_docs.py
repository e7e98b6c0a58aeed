"""The documentation site builds with warnings as errors, and what its guides import is in its API reference."""

from __future__ import annotations

import html
import importlib
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs" / "guides").glob("*.md"))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocstrings", reason="the docs extra is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                       capture_output=True, text=True, env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, r.stderr[-4000:]
    return out


def _inventory(site: Path) -> set[str]:
    """The names mkdocstrings documented (objects.inv: four header lines, then zlib-compressed lines)."""
    raw = (site / "objects.inv").read_bytes()
    body = raw.split(b"\n", 4)[4]
    return {line.split(" ", 1)[0] for line in zlib.decompress(body).decode().splitlines() if line}


def test_the_site_builds_strict_with_every_page_in_its_nav(site):
    for page in ("index.html", "getting-started/index.html", "guides/attacks/index.html", "guides/bias/index.html",
                 "reference/attacks/index.html", "cite/index.html", "glossary/index.html"):
        assert (site / page).is_file(), page
    # the getting-started page carries the README's own two commands (included, not copied)
    readme = (ROOT / "README.md").read_text()
    commands = [ln for ln in readme.splitlines() if ln.startswith("python3 -m venv")]
    text = html.unescape(re.sub(r"<[^>]+>", "", (site / "getting-started" / "index.html").read_text()))
    assert len(commands) == 2 and all(c in text for c in commands)


def test_what_the_guides_import_is_in_the_api_reference(site):
    documented = _inventory(site)
    assert "textaudit.attacks.second_order.SOBeam" in documented
    imports = []
    for page in GUIDES:
        for module, names in re.findall(r"^from (textaudit[\w.]*) import ([\w, ]+)$", page.read_text(), re.M):
            imports += [(page.name, module, n.strip()) for n in names.split(",")]
    assert len(imports) >= 6
    for page, module, name in imports:
        obj = getattr(importlib.import_module(module), name)
        path = f"{obj.__module__}.{obj.__qualname__}"
        assert path in documented, f"{page}: {module}.{name} ({path}) is not in the API reference"


def test_the_modules_the_guides_name_are_in_the_api_reference(site):
    """A dotted ``textaudit.…`` name in a guide's prose (not only in an import line) is documented."""
    documented = _inventory(site)
    named = {(page.name, m) for page in GUIDES + [ROOT / "README.md"]
             for m in re.findall(r"`(textaudit(?:\.\w+)+)", page.read_text())}
    assert len(named) >= 3
    for page, name in named:
        assert name in documented, f"{page}: {name} is not in the API reference"


def _glossary_code(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_glossary_names_code_that_exists():
    """Every module, file and name in the glossary's module column exists: a renamed function makes
    this fail instead of leaving the glossary pointing at nothing. Files are relative to
    ``src/textaudit``; a bare name belongs to the nearest module named before it; ``.name`` is an
    attribute of the name before it."""
    rows = [line for line in (ROOT / "docs" / "glossary.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith(("| symbol", "| ---"))]
    assert len(rows) >= 20
    modules, owner = [], None
    for line in rows:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        assert len(cells) == 4, line
        for token in _glossary_code(cells[2]):
            if token.endswith(".py") or token.startswith("textaudit."):
                name = "textaudit." + token[:-3].replace("/", ".") if token.endswith(".py") else token
                assert (ROOT / "src" / (name.replace(".", "/") + ".py")).is_file() or \
                    (ROOT / "src" / name.replace(".", "/") / "__init__.py").is_file(), (line, token)
                modules.append(importlib.import_module(name))
            elif token.startswith("."):
                assert owner is not None and hasattr(owner, token[1:]), (line, token)
            else:
                head, *rest = token.split(".")
                module = next((m for m in reversed(modules) if hasattr(m, head)), None)
                assert module is not None, (line, token)
                obj = owner = getattr(module, head)
                for part in rest:
                    owner, obj = obj, getattr(obj, part, None)
                    assert obj is not None, (line, token)


def test_a_broken_reference_fails_the_build(tmp_path):
    pytest.importorskip("mkdocstrings", reason="the docs extra is not installed (pip install -e '.[docs]')")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\nSee [`Nothing`][textaudit.attacks.Nothing].\n")
    config = (ROOT / "mkdocs.yml").read_text().split("\nnav:")[0].replace("paths: [src]", f"paths: [{ROOT / 'src'}]")
    (tmp_path / "mkdocs.yml").write_text(config)
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode != 0 and "textaudit.attacks.Nothing" in r.stderr


def test_the_suites_guide_example_is_a_suite_the_grammar_takes(tmp_path):
    """The suite file the guide shows (every section, a threshold of each grammar) is read by the suite's own
    checks: every section and [suite] key known, every threshold name one an audit's row takes."""
    import tomllib

    from textaudit.suite import Suite, _check_keys, _thresholds

    page = (Path(__file__).parent.parent / "docs" / "guides" / "suites.md").read_text(encoding="utf-8")
    block = re.search(r"```toml\n(.*?)```", page, re.S).group(1)
    spec = tomllib.loads(block)
    assert {"suite", "attack", "compare", "bias", "certify", "replay", "harden", "evaluate", "thresholds"} <= set(spec)
    _check_keys(tmp_path / "suite.toml", spec)
    names = [name for name, *_ in _thresholds(Suite(tmp_path / "suite.toml", spec))]
    assert {"so_beam.cnn.success_rate", "genetic.cnn.success_rate", "evaluate.positive.recall"} <= \
        {n.rsplit("_", 1)[0] for n in names}, names
