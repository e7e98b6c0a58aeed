from __future__ import annotations

import json
from pathlib import Path

import pytest

from textaudit import resources
from textaudit.errors import TextAuditError
from textaudit.resources import ResourceSpec, locate, register, resolve


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A throwaway resource 'toy' found at lexicons/toy.json, downloadable from a file:// URL."""
    src = tmp_path / "published" / "toy.json"
    src.parent.mkdir()
    src.write_text(json.dumps({"good": ["fine"]}))
    spec = register(ResourceSpec(name="toy", description="toy lexicon", relpath="lexicons/toy.json",
                                 is_valid=lambda p: p.is_file(), url=src.as_uri(), fix="make a toy"))
    yield spec
    resources.RESOURCES.pop("toy")


def _put(root: Path, text: str = "{}") -> Path:
    p = root / "lexicons" / "toy.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_order_explicit_then_data_then_cache_then_download(toy, tmp_path, monkeypatch):
    data, cache = tmp_path / "data", Path(resources.cache_dir())
    monkeypatch.setenv("TEXTAUDIT_DATA", str(data))
    monkeypatch.delenv("TEXTAUDIT_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE")

    # nothing local: the public download lands in the cache
    r = locate("toy")
    assert r.source == "download" and r.path == cache / "lexicons" / "toy.json"
    assert json.loads(r.path.read_text()) == {"good": ["fine"]}
    # now the cache copy is used without downloading again
    assert locate("toy").source == "cache"
    # TEXTAUDIT_DATA beats the cache
    in_data = _put(data)
    assert locate("toy").source == "TEXTAUDIT_DATA" and locate("toy").path == in_data.resolve()
    # an explicit path beats everything
    explicit = tmp_path / "mine.json"
    explicit.write_text("{}")
    r = locate("toy", explicit)
    assert (r.source, r.path) == ("explicit", explicit)


def test_invalid_explicit_path_is_an_error_not_skipped(toy, tmp_path):
    with pytest.raises(TextAuditError, match="not a valid 'toy' resource"):
        resolve("toy", tmp_path / "nope.json")


def test_offline_error_names_every_place_tried(toy, tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTAUDIT_DATA", str(tmp_path / "empty"))
    with pytest.raises(TextAuditError) as e:
        resolve("toy")
    msg = str(e.value)
    assert "\n" not in msg
    assert "explicit path" in msg and "empty/lexicons/toy.json (missing)" in msg
    assert "skipped: offline mode" in msg and "Fix: make a toy" in msg


def test_failed_download_is_reported(toy, tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTAUDIT_DATA", str(tmp_path / "empty"))
    monkeypatch.delenv("TEXTAUDIT_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    register(ResourceSpec(name="toy", description="toy", relpath="lexicons/toy.json", is_valid=lambda p: p.is_file(),
                          url=(tmp_path / "gone.json").as_uri()))
    r = locate("toy")
    assert not r.found and any("failed" in t for t in r.tried)


def test_unknown_resource():
    with pytest.raises(TextAuditError, match="unknown resource 'nope'.*sst2"):
        resolve("nope")


def test_shipped_data_and_pypi_packages_resolve():
    assert locate("sst2").source == "TEXTAUDIT_DATA"
    assert (resolve("sst2") / "dev.tsv").is_file()
    for name in ("counterfitted-neighbors", "gender-pairs", "checklist-lexicons"):
        assert locate(name).source == "TEXTAUDIT_DATA"
    glove = locate("glove-50d")
    assert glove.source == "pypi" and (glove.path / "glove_6B_50d_emb.npy").is_file()
    minilm = locate("minilm")
    assert minilm.source == "pypi" and (minilm.path / "config.json").is_file()
    smol = locate("smollm2")
    assert smol.source == "pypi" and smol.path.suffix == ".gguf"


def test_missing_pypi_package_is_explained(monkeypatch):
    monkeypatch.setitem(resources.RESOURCES, "ghost", ResourceSpec(
        name="ghost", description="x", relpath="ghost", is_valid=lambda p: p.is_dir(),
        pypi=("no-such-dist-textaudit", "*", False), fix="pip install no-such-dist-textaudit"))
    r = locate("ghost")
    assert "PyPI package 'no-such-dist-textaudit' not installed" in r.tried


def test_distilbert_is_hub_only_and_offline_here():
    rows = {r["name"]: r for r in resources.report(check_network=True)}
    d = rows["distilbert-base-uncased"]
    assert not d["found"] and d["note"].startswith("hub only (offline here)")
    assert rows["glove-50d"]["found"] and rows["glove-50d"]["size_bytes"] > 50_000_000


def test_cache_dir_env(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTAUDIT_CACHE", str(tmp_path / "c"))
    assert resources.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("TEXTAUDIT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert resources.cache_dir() == tmp_path / "x" / "textaudit"


def test_a_download_is_checked_against_its_known_hash(toy, tmp_path, monkeypatch):
    import hashlib

    monkeypatch.setenv("TEXTAUDIT_DATA", str(tmp_path / "empty"))
    monkeypatch.delenv("TEXTAUDIT_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    published = Path(toy.url.removeprefix("file://"))
    good = hashlib.sha256(published.read_bytes()).hexdigest()
    cached = Path(resources.cache_dir()) / "lexicons" / "toy.json"
    register(ResourceSpec(name="toy", description="toy", relpath="lexicons/toy.json", is_valid=lambda p: p.is_file(),
                          url=toy.url, sha256="0" * 64))
    r = locate("toy")
    assert not r.found and any("SHA-256" in t and "refused" in t for t in r.tried)
    assert not cached.exists() and [p.name for p in cached.parent.iterdir() if not p.name.endswith(".lock")] == []
    register(ResourceSpec(name="toy", description="toy", relpath="lexicons/toy.json", is_valid=lambda p: p.is_file(),
                          url=toy.url, sha256=good))
    assert locate("toy").source == "download" and cached.read_bytes() == published.read_bytes()


def test_the_lexicon_downloads_have_the_hashes_of_the_files_in_the_data_directory():
    from textaudit.files import sha256_file

    for name in ("counterfitted-neighbors", "gender-pairs", "checklist-lexicons", "extra-swap-list",
                 "gender-neutralize-list"):
        spec = resources.RESOURCES[name]
        assert spec.sha256 == sha256_file(resolve(name)), name
