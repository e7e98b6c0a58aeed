"""No secret in any output ([2/7]): one redaction (:mod:`textaudit.secrets`) at the boundary of every channel —
a command's stdout and stderr, results files and their names, compare summaries, reports, tracker fields and
the kept tracking file — checked end to end on real local servers (a JSON endpoint, a tracker that refuses and
echoes the credential), for every secret kind (a URL's password, its user:password as basic authentication
sends it, a query token, an API key variable, a tracker token) in every encoding a server may echo it; and a
contract over the source: a writer or a stream added without the boundary fails here."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

import pytest

from textaudit import secrets

ROOT = Path(__file__).resolve().parents[1]
PASSWORD = "PaSSw0rd-7x/q"
TOKEN = "tok-ABCDEF0123456789"
USER = "alice"
API_KEY = "sk-test-KEY-55aa/bb+cc"
TRACK_TOKEN = "mlflow-TOKEN-9911zz"


def forms(secret: str) -> list[str]:
    """The forms a test looks for: as typed, URL-encoded, base64 (a server's echo of basic authentication too)."""
    return [secret, quote(secret, safe=""), base64.b64encode(secret.encode()).decode().rstrip("=")]


def leaks(text: str, *secrets_: str) -> list[str]:
    return [f for s in secrets_ for f in forms(s) if f in text]


# -- the redaction itself ---------------------------------------------------------------------------------------
def test_a_url_is_parsed_once_into_its_public_name_and_its_secrets():
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:8000/v1/score?token={TOKEN}&lang=en"
    assert secrets.register_url(url) == "http://127.0.0.1:8000/v1/score"
    text = (f"spec {url}; echoed {quote(PASSWORD, safe='')} and "
            f"Basic {base64.b64encode(f'{USER}:{PASSWORD}'.encode()).decode()} and {json.dumps(TOKEN)}")
    out = secrets.redact(text)
    assert not leaks(out, PASSWORD, TOKEN, f"{USER}:{PASSWORD}") and "***" in out and "lang=en" in out
    assert secrets.safe_name(url) == "http_127.0.0.1_8000_v1_score"
    # an ordinary query value and a short user name stay: only credentials are secrets
    assert secrets.redact("http://127.0.0.1/x?lang=en&page=2") == "http://127.0.0.1/x?lang=en&page=2"
    # a URL never registered still loses its password and credential query values wherever it is printed
    fresh = secrets.redact("see https://bob:hunter2-xyz@example.invalid/p?api_key=zz99zz99")
    assert "hunter2-xyz" not in fresh and "zz99zz99" not in fresh and "example.invalid/p" in fresh
    assert secrets.redact_obj({"m": [url], url: 1}) == {"m": [secrets.redact(url)], secrets.redact(url): 1}


def test_environment_secrets_in_every_form(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TRACK_TOKEN)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://bob:{PASSWORD}x@127.0.0.1:5000")
    secrets.register_env()
    for s in (API_KEY, TRACK_TOKEN, f"{PASSWORD}x", f"bob:{PASSWORD}x"):
        for form in secrets.secret_forms(s):
            assert "***" in secrets.redact(f"<{form}>"), form


# -- end to end: a compare on an endpoint whose URL holds credentials ------------------------------------------
class Endpoint(BaseHTTPRequestHandler):
    """A plain JSON endpoint: positive while "film" is in the text (any synonym of "film" flips it)."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._send({"labels": ["negative", "positive"]})

    def do_POST(self) -> None:  # noqa: N802
        texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["texts"]
        self._send({"probs": [[0.1, 0.9] if "film" in str(t).split() else [0.8, 0.2] for t in texts]})

    def _send(self, obj: dict) -> None:
        blob = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(blob)))
        self.end_headers()
        self.wfile.write(blob)


@pytest.fixture(scope="module")
def endpoint():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def _audit(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "textaudit", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})}, cwd=cwd)


def _everything(folder: Path) -> str:
    """Every file name and every file's text under ``folder``."""
    parts = []
    for p in sorted(folder.rglob("*")):
        parts.append(str(p.relative_to(folder)))
        if p.is_file():
            parts.append(p.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def test_compare_on_a_credentialed_url_leaks_nothing_anywhere(endpoint, tmp_path):
    """The hostile battery's case: the password and the token were in the cells' file names, compare.json, the
    printed matrix. Now in no stdout, stderr, file name, file, or report, in any form."""
    url = f"http://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{endpoint}/score?token={TOKEN}"  # as a URL carries it
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta deep and meaningful film .\n1\tthe film is long but good .\n")
    out = tmp_path / "cmp"
    r = _audit("compare", "--models", url, "--methods", "genetic", "--data", str(tmp_path / "d.tsv"),
               "--output-dir", str(out), env={"OPENAI_API_KEY": API_KEY})
    assert r.returncode == 0, r.stderr
    assert "127.0.0.1" in r.stdout and "***" in r.stdout  # the matrix names the endpoint, credentials masked
    r2 = _audit("compare", "--models", url, "--methods", "genetic", "--data", str(tmp_path / "d.tsv"),
                "--output-dir", str(out), "--json")  # a rerun reuses the cells: the same names, found again
    assert r2.returncode == 0, r2.stderr
    r3 = _audit("report", str(out), "--out", str(tmp_path / "report.html"))
    assert r3.returncode == 0, r3.stderr
    files = _everything(tmp_path)
    assert "cmp/http_127.0.0.1_" in files  # the cell is named by the endpoint's public name
    for what, text in (("stdout", r.stdout + r2.stdout + r3.stdout), ("stderr", r.stderr + r2.stderr + r3.stderr),
                       ("files", files)):
        assert not leaks(text, PASSWORD, TOKEN, f"{USER}:{PASSWORD}", API_KEY), (what, leaks(text, PASSWORD, TOKEN))


def test_an_error_naming_a_credentialed_endpoint_is_redacted(tmp_path):
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta film .\n")
    for url in (f"http://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:9/score?access_token={TOKEN}",  # nothing on port 9
                f"http://{USER}:{PASSWORD}@127.0.0.1:9/score?access_token={TOKEN}"):  # a / left unencoded
        r = _audit("evaluate", "--model", url, "--data", str(tmp_path / "d.tsv"))
        assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr, r.stderr
        assert not leaks(r.stdout + r.stderr, PASSWORD, TOKEN, quote(PASSWORD, safe=""))
    assert "percent-encode it" in r.stderr


def test_a_tracker_that_refuses_and_echoes_the_credential(tmp_path):
    """The tracking server answers 401 with the Authorization header echoed back (as some proxies do): the
    "not logged" warning, and the kept track file, hold neither the token nor the URI's user:password (base64)."""
    pytest.importorskip("mlflow", reason="the track extra (pip install 'textaudit[track]')")

    class Refuse(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _refuse(self) -> None:
            blob = json.dumps({"error_code": "UNAUTHENTICATED",
                               "message": f"bad credentials: {self.headers.get('Authorization')}"}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(blob)))
            self.end_headers()
            self.wfile.write(blob)

        do_GET = do_POST = _refuse  # noqa: N815

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    plugin = tmp_path / "weak.py"
    plugin.write_text("def clf(texts):\n    return [[0.1, 0.9] if 'film' in t.split() else [0.8, 0.2] for t in texts]\n")
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta deep and meaningful film .\n")
    try:
        for i, env in enumerate(({"MLFLOW_TRACKING_URI": f"http://127.0.0.1:{port}", "MLFLOW_TRACKING_TOKEN": TRACK_TOKEN},
                                 {"MLFLOW_TRACKING_URI": f"http://{USER}:{PASSWORD}@127.0.0.1:{port}"})):
            out = tmp_path / f"g{i}.jsonl"
            r = _audit("attack", "--model", f"{plugin}:clf", "--method", "genetic", "--data", str(tmp_path / "d.tsv"),
                       "--output", str(out), "--track", "mlflow", env={**env, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"})
            assert r.returncode == 0, r.stderr
            assert "warning: not logged to MLflow" in r.stderr, r.stderr
            kept = out.with_name(out.name + ".track.json")
            text = r.stdout + r.stderr + (kept.read_text() if kept.exists() else "") + _everything(tmp_path)
            assert not leaks(text, TRACK_TOKEN, PASSWORD, f"{USER}:{PASSWORD}"), leaks(text, TRACK_TOKEN, PASSWORD)
    finally:
        srv.shutdown()
        srv.server_close()


# -- the contract: every writer and every stream at the boundary ------------------------------------------------
#: a call that writes a file
WRITE = re.compile(r"\.write_text\(|json\.dump\(|\bopen\([^)]*[\"'][wax][bt+]?[\"']|\.open\([\"'][wax]|savefig\(|"
                   r"save_pretrained\(|torch\.save\(")
#: the line passes the redaction (or writes what already did: a record's line, a kept run's to_json)
REDACTED = re.compile(r"redact|safe_name|to_json\(")
#: writers that need no redaction, and why: nothing they write holds a model spec, a setting or a server's answer
NO_SECRET = {
    "resources.py": "downloads of fixed public URLs, and their copies",
    "train_state.py": "training state: weights and numbers",
    "robustness/plots.py": "figures: titles are public model names (an endpoint's name is its public URL)",
    "fairness/plots.py": "figures: titles are public model names",
    "harden/plots.py": "figures: titles are public model names",
    "plotting.py": "a figure the plot modules drew (their titles are public model names), with textaudit's mark",
    "robustness/calibration.py": "a figure: its title is a public model name",
    "robustness/perturbscore/scorer.py": "a trained scorer's weights and its head's numbers",
    "neighborhoods/corpus.py": "the masked LM's training corpus (public text) and its settings",
    "neighborhoods/fingerprints.py": "the masked LM fingerprints' memo (digests of weights, keyed by artifact)",
    "models/zoo/vocab.py": "a zoo model's vocabulary (words of SST-2 train)",
    "models/zoo/checkpoint.py": "a zoo model's weights and architecture",
    "lm.py": "a causal LM's config and tokenizer",
    "attacks/textattack_interop.py": "a stopword list",
    "harden/model.py:save_pretrained": "a hardened model's weights (its info file is redacted)",
    "harden/run.py:torch.save": "a hardened model's weights",
    "cli/models.py": "audit train-mlm's corpus files and their index (public text, licences)",
}


def test_every_writer_passes_the_redaction_or_says_why_it_need_not():
    """A new writer of a file that holds a spec or a setting must call the redaction (or be listed above with a
    reason): this is how a channel added later cannot forget it."""
    src = ROOT / "src" / "textaudit"
    bad = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel == "secrets.py":
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines, 1):
            m = WRITE.search(line)
            if not m or line.lstrip().startswith("#") or REDACTED.search("\n".join(lines[n - 1:n + 3])):
                continue  # the call, or the block it opens (``with open(...) as f: f.write(redact(...))``), redacts
            call = m.group(0).strip(".(")
            if rel in NO_SECRET or f"{rel}:{call}" in NO_SECRET:
                continue
            bad.append(f"{rel}:{n}: {line.strip()}")
    assert not bad, "writers without the redaction (call textaudit.secrets.redact/redact_obj, or list why not):\n" + \
        "\n".join(bad)
    assert set(NO_SECRET) <= {p.relative_to(src).as_posix() for p in src.rglob("*.py")} | {
        k for k in NO_SECRET if ":" in k}, "a listed writer's module no longer exists: drop it from NO_SECRET"


def test_no_module_keeps_its_own_handle_on_a_stream():
    """Every line reaches the user through sys.stdout/sys.stderr as they are when it is written (a command runs
    with them redacting): a module that kept the stream of import time, or wrote to the process's own
    descriptors, would pass around the boundary."""
    src = ROOT / "src" / "textaudit"
    around = re.compile(r"sys\.__std(out|err)__|os\.write\(\s*[12]\b|^\w+(\s*:[^=]+)?\s*=\s*sys\.std(out|err)\b|"
                        r"\bdef \w+\([^)]*\w+(\s*:[^=,]+)?\s*=\s*sys\.std(out|err)\b")  # kept at import, or a default
    bad = [f"{p.relative_to(src)}:{n}: {line.strip()}" for p in sorted(src.rglob("*.py"))
           for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if around.search(line)]
    assert not bad, "\n".join(bad)


def test_every_command_prints_through_the_redaction(cli, monkeypatch):
    """Each command of the app runs inside the group's redacted streams: a secret a command prints (here: a model
    name holding an API key's value, echoed in its one-line error) comes out masked."""
    from textaudit.cli.main import app

    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    r = cli("evaluate", "--model", f"no-such-model-{API_KEY}", "--data", "sst2:dev", "--limit", "1")
    assert r.exit_code == 2 and API_KEY not in r.output and "***" in r.output, r.output
    import typer.main

    group = typer.main.get_command(app)
    from textaudit.cli.app import AuditGroup

    assert isinstance(group, AuditGroup)  # every command is dispatched by its invoke, inside redacted_streams


# -- the matrix: every secret kind through every audit that writes ----------------------------------------------
SECRET_KINDS = {  # how the secret reaches textaudit: the model spec, or the environment
    "a URL's password": lambda port: (f"http://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{port}/score", {}, [PASSWORD]),
    "a URL's user:password": lambda port: (f"http://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{port}/score", {},
                                           [f"{USER}:{PASSWORD}"]),
    "a query token": lambda port: (f"http://127.0.0.1:{port}/score?access_token={TOKEN}", {}, [TOKEN]),
    "an API key variable": lambda port: (f"http://127.0.0.1:{port}/score", {"TEXTAUDIT_API_KEY": API_KEY}, [API_KEY]),
}
AUDITS = {  # each writes its own results file (and prints a table) from the same endpoint
    "attack": lambda m, d, o: ["attack", "--model", m, "--method", "genetic", "--data", str(d), "--output", str(o)],
    "evaluate": lambda m, d, o: ["evaluate", "--model", m, "--data", str(d), "--json"],
    "certify": lambda m, d, o: ["certify", "--model", m, "--method", "safer", "--data", str(d), "--samples", "20",
                                "--selection", "5", "--neighbors", "0", "--output", str(o)],
    "bias": lambda m, d, o: ["bias", "--model", m, "--pair", "film,movie", "--data", str(d), "--k", "0", "--output",
                             str(o)],
}


@pytest.mark.parametrize("audit", sorted(AUDITS))
@pytest.mark.parametrize("kind", sorted(SECRET_KINDS))
def test_every_secret_kind_through_every_audit_that_writes(endpoint, tmp_path, kind, audit, cli, monkeypatch):
    """4 secret kinds × 4 audits: stdout, stderr, every file name and every file's bytes under the run's folder, and
    the report made of its results, hold the secret in no form (as typed, URL-encoded, base64). In process (the
    command group's redacting streams, as a process has them; the subprocess cases above hold the process's own)."""
    model, env, secret = SECRET_KINDS[kind](endpoint)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta deep and meaningful film .\n0\tthe film is thin and dull .\n")
    out = tmp_path / f"{audit}.jsonl"
    key = ["--api-key-env", "TEXTAUDIT_API_KEY"] if env else []  # the key is sent in the Authorization header
    r = cli(*AUDITS[audit](model, tmp_path / "d.tsv", out), *key)
    assert r.exit_code == 0, r.output
    texts = [r.stdout, r.stderr]
    if out.exists():
        rep = cli("report", str(out), "--out", str(tmp_path / "report.html"))
        assert rep.exit_code == 0, rep.output
        texts += [rep.stdout, rep.stderr]
    texts.append(_everything(tmp_path))
    assert not leaks("\n".join(texts), *secret), (kind, audit, leaks("\n".join(texts), *secret))


@pytest.mark.parametrize("status", [400, 401, 500])
def test_an_endpoint_that_echoes_the_key_in_its_refusal_leaks_nothing(tmp_path, status):
    """An endpoint that refuses and echoes the request's Authorization header (as some gateways do), plain and
    JSON-escaped: the one-line error and everything written hold no form of the key."""

    class Echo(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            self.do_POST()

        def do_POST(self) -> None:  # noqa: N802
            auth = self.headers.get("Authorization", "")
            blob = json.dumps({"error": f"invalid credentials {auth}", "raw": auth}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(blob)))
            self.end_headers()
            self.wfile.write(blob)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta film .\n")
    try:
        r = _audit("evaluate", "--model", f"http://127.0.0.1:{srv.server_address[1]}/score", "--api-key-env",
                   "TEXTAUDIT_API_KEY", "--data", str(tmp_path / "d.tsv"), "--retries", "0",
                   env={"TEXTAUDIT_API_KEY": API_KEY}, cwd=tmp_path)
    finally:
        srv.shutdown()
        srv.server_close()
    assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr, r.stderr
    assert not leaks(r.stdout + r.stderr + _everything(tmp_path), API_KEY, json.dumps(API_KEY)[1:-1]), r.stderr
