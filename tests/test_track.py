"""``--track mlflow`` and ``audit track``: audits logged to a real MLflow server on 127.0.0.1 (a SQLite backend and
an artifact folder in a temporary directory), read back through ``mlflow.MlflowClient``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_harden import _args as harden_args
from test_harden import planted  # noqa: F401  (the fixture: a tiny bow with a planted weakness)
from test_replay import ROWS, write_world

mlflow = pytest.importorskip("mlflow", reason="the track extra (pip install 'textaudit[track]')")
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(root: Path) -> tuple[subprocess.Popen, str]:
    """``mlflow server`` on a free port of 127.0.0.1, its store and artifacts under ``root``; up when /health answers."""
    import urllib.request

    root.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{root / 'db.sqlite'}",
                             "--artifacts-destination", str(root / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "1"], cwd=root, stdout=subprocess.DEVNULL, stderr=open(root / "server.log", "w"),
                            start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    for _ in range(240):
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited: {(root / 'server.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(uri + "/health", timeout=2) as r:
                if r.status == 200:
                    return proc, uri
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("mlflow server did not answer /health in 120 s")


def stop_server(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # the server and its uvicorn/gunicorn workers
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc, uri = start_server(tmp_path_factory.mktemp("mlflow"))
    yield uri
    stop_server(proc)


@pytest.fixture(scope="module")
def work(tiny_mlm, tmp_path_factory):
    """A plug-in model that flips on synonyms of "film", one with a planted he/she bias, their data, a tiny masked LM."""
    return write_world(tmp_path_factory.mktemp("track"), tiny_mlm)


def _audit(uri: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``audit ...`` in its own process (as a user runs it), logging to ``uri``."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "TEXTAUDIT_DATA": os.environ.get("TEXTAUDIT_DATA", "../shared/data")}
    return subprocess.run([sys.executable, "-m", "textaudit", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600)


def _runs(uri: str, experiment: str) -> list:
    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment}"
    return client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])


def _numbers(summary, prefix=""):
    """Every number of a --json summary, as the flattening names it (the expected metrics, computed here on their own)."""
    out = {}
    if isinstance(summary, dict):
        for k, v in summary.items():
            name = f"{prefix}.{k}" if prefix else k
            if "ci" in k and isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
                out[name + "_low"], out[name + "_high"] = v
            else:
                out.update(_numbers(v, name))
    elif isinstance(summary, (int, float)) and not isinstance(summary, bool):
        out[prefix] = summary
    return out


def test_an_attack_is_one_run_with_the_json_summarys_numbers_its_settings_and_report(server, work, tmp_path):
    out = tmp_path / "so-enum.jsonl"
    r = _audit(server, "attack", "--model", f"{work}/weak.py:clf", "--method", "so-enum", "--k", "1", "--data",
               str(work / "data.tsv"), "--mlm", str(work / "mlm"), "--no-ppl", "--seed", "3", "--output", str(out),
               "--json", "--track", "mlflow", "--track-experiment", "attacks")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])  # the --json object is still the last line of stdout
    (run,) = _runs(server, "attacks")
    m, p = run.data.metrics, run.data.params
    assert summary["success_rate"] == 1.0 and m["success_rate"] == 1.0
    assert (m["success_rate_ci95_low"], m["success_rate_ci95_high"]) == tuple(summary["success_rate_ci95"])
    expected = _numbers(summary)
    assert {k: m[k] for k in expected} == pytest.approx(expected) and m["mean_l0"] == summary["mean_l0"]
    assert (p["model"], p["method"], p["k"], p["seed"], p["kappa"], p["delta"]) == ("weak.py:clf", "so-enum", "1", "3", "20",
                                                                                   "3.0")
    assert p["model_fingerprint"] and p["textaudit_version"] and p["data"] == "data.tsv"
    assert run.data.tags["textaudit.command"] == "attack" and run.info.run_name == "attack weak.py:clf"
    # the run's time is the audit's: it began before the results were last written, and ended after (not the
    # logging's few hundred milliseconds after the audit)
    written = int(out.stat().st_mtime * 1000)
    assert run.info.start_time <= written <= run.info.end_time
    client = mlflow.MlflowClient(server)
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"report.html", "results", "summary.json"}
    assert [a.path for a in client.list_artifacts(run.info.run_id, "results")] == ["results/so-enum.jsonl"]
    html = Path(client.download_artifacts(run.info.run_id, "report.html", str(tmp_path))).read_text()
    assert "so-enum" in html and "weak.py:clf" in html


def test_a_bias_run_nested_in_a_training_run_logs_b_per_pair_and_k_with_its_bounds(server, work, tmp_path):
    client = mlflow.MlflowClient(server)
    exp = client.create_experiment("training")
    parent = client.create_run(exp, run_name="train she1").info.run_id  # the (user's) run that made the model
    r = _audit(server, "bias", "--pair", "he,she", "--model", f"{work}/she1.py:clf", "--data", str(work / "bias.tsv"),
               "--k", "1", "--mlm", str(work / "mlm"), "--kappa", "5", "--delta", "1e9", "--json", "--track", "mlflow",
               "--track-run-id", parent)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    runs = [x for x in _runs(server, "training") if x.info.run_id != parent]
    assert len(runs) == 1 and runs[0].data.tags["mlflow.parentRunId"] == parent  # nested, in the parent's experiment
    m = runs[0].data.metrics
    for k, e in out["pairs"][0]["by_k"].items():
        assert m[f"pairs.he-she.by_k.{k}.B"] == e["B"]
        assert (m[f"pairs.he-she.by_k.{k}.ci95_low"], m[f"pairs.he-she.by_k.{k}.ci95_high"]) == tuple(e["ci95"])
        assert m[f"pairs.he-she.by_k.{k}.n"] == e["n"]
    # no --output: the options (--pair repeats, so its value is the list of pairs, as JSON like every list)
    assert runs[0].data.params["pair"] == '["he,she"]' and runs[0].data.params["k"] == "1"


def test_a_tiny_harden_is_a_run_with_before_after_and_mcnemar(server, planted, tmp_path):  # noqa: F811
    args = harden_args(planted, tmp_path / "h", "--method", "augment", "--train-sample", "4", "--epochs", "1",
                       "--eval-limit", "6", "--max-queries", "1", "--json", "--track", "mlflow", "--track-experiment",
                       "harden")
    r = _audit(server, *args)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    (run,) = _runs(server, "harden")
    m = run.data.metrics
    assert m["before.accuracy"] == out["before"]["accuracy"] and m["after.success_rate"] == out["after"]["success_rate"]
    assert (m["after.accuracy_ci95_low"], m["after.accuracy_ci95_high"]) == tuple(out["after"]["accuracy_ci95"])
    assert m["mcnemar_p"] == out["mcnemar_p"]
    assert run.data.params["method"] == "augment"
    arts = {a.path for a in mlflow.MlflowClient(server).list_artifacts(run.info.run_id)}
    assert {"report.html", "h", "summary.json"} <= arts  # the harden folder itself, and its report


def test_a_suite_is_a_parent_run_with_one_nested_run_per_audit(server, work, tmp_path):
    r = _audit(server, "attack", "--model", f"{work}/weak.py:clf", "--method", "genetic", "--data", str(work / "data.tsv"),
               "--output", str(tmp_path / "found.jsonl"))  # last month's findings (not tracked)
    assert r.returncode == 0, r.stderr
    (tmp_path / "gate.toml").write_text(
        f'[suite]\nname = "gate"\ndata = "{work / "data.tsv"}"\noutput_dir = "out"\ntrack = "mlflow"\n'
        f'[compare]\nmodels = ["{work}/weak.py:clf"]\nmethods = ["genetic"]\n'
        f'[replay]\nfindings = ["found.jsonl"]\nmodel = "{work}/weak.py:clf"\nmax_still = 0.5\n')
    r = _audit(server, "run", str(tmp_path / "gate.toml"), "--json", "--track-experiment", "suites")
    assert r.returncode == 1, r.stderr  # every finding still holds on the same model: max_still is crossed
    out = json.loads(r.stdout.strip().splitlines()[-1])
    runs = _runs(server, "suites")
    parents = [x for x in runs if "mlflow.parentRunId" not in x.data.tags]
    assert len(parents) == 1 and parents[0].info.run_name == "suite gate"
    kids = [x for x in runs if x.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert sorted(k.data.tags["textaudit.command"] for k in kids) == ["compare", "replay"]
    pm = parents[0].data.metrics
    (check,) = out["checks"]
    assert pm["check.replay.still_share_max"] == check["value"] == 1.0 and pm["check.replay.still_share_max.passed"] == 0
    assert pm["checks_failed"] == 1
    replay = next(k for k in kids if k.data.tags["textaudit.command"] == "replay")
    assert replay.data.metrics["still_share"] == 1.0 and replay.data.metrics["findings"] > 0
    client = mlflow.MlflowClient(server)
    assert {a.path for a in client.list_artifacts(parents[0].info.run_id)} == {"report.html", "summary.json"}


def test_a_tracker_that_stops_mid_run_loses_nothing_and_audit_track_logs_it_later(server, work, tmp_path):
    """The run's own server is killed while the audit runs: the audit finishes, its results file complete, with one
    warning; audit track then logs the same content (metrics equal to the --json summary) to a server that is up."""
    proc, down = start_server(tmp_path / "down")
    out = tmp_path / "g.jsonl"
    env = {**os.environ, "MLFLOW_TRACKING_URI": down}
    audit = subprocess.Popen([sys.executable, "-m", "textaudit", "attack", "--model", f"{work}/weak.py:clf", "--method",
                              "genetic", "--data", str(work / "data.tsv"), "--output", str(out), "--json", "--track",
                              "mlflow", "--track-experiment", "late"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    stop_server(proc)  # down before the audit ends (it is still loading, or attacking)
    stdout, stderr = audit.communicate(timeout=600)
    assert audit.returncode == 0, stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    warnings = [x for x in stderr.splitlines() if x.startswith("warning: not logged to MLflow")]
    assert len(warnings) == 1 and f"audit track {out}" in warnings[0], stderr
    from textaudit.results import load

    assert load(out).summary()["success"] == summary["success"] == len(ROWS)  # the results file is complete
    assert (tmp_path / "g.jsonl.track.json").is_file()
    r = _audit(server, "track", str(out), "--track-experiment", "late", "--json")
    assert r.returncode == 0, r.stderr
    (run,) = _runs(server, "late")
    expected = _numbers(summary)
    assert {k: run.data.metrics[k] for k in expected} == pytest.approx(expected)  # the live run's metrics, wall seconds too
    assert not (tmp_path / "g.jsonl.track.json").exists()  # logged: no longer pending
    r = _audit(server, "track", str(out), "--track-experiment", "late")  # from the records alone now: the same rates
    assert r.returncode == 0, r.stderr
    again = _runs(server, "late")[-1]
    assert again.data.metrics["success_rate"] == summary["success_rate"] and again.data.params["method"] == "genetic"


@pytest.mark.parametrize("uri", ["ftp://tracker.invalid/runs", "::not a uri::"])
def test_a_tracking_uri_mlflow_refuses_costs_a_warning_never_the_audit(work, tmp_path, uri):
    """#63 (traceback): MLflow refuses some tracking URIs when its client is built (an unsupported scheme; a path it
    reads as its retired file store): that was a traceback after the audit; now it is the one "not logged" warning,
    the results complete and kept for audit track."""
    out = tmp_path / "g.jsonl"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
    r = subprocess.run([sys.executable, "-m", "textaudit", "attack", "--model", f"{work}/weak.py:clf", "--method",
                        "genetic", "--data", str(work / "data.tsv"), "--output", str(out), "--json", "--track", "mlflow"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    warnings = [x for x in r.stderr.splitlines() if x.startswith("warning: not logged to MLflow")]
    assert len(warnings) == 1 and f"audit track {out}" in warnings[0], r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["success"] == len(ROWS)
    assert (tmp_path / "g.jsonl.track.json").is_file()


def test_without_mlflow_or_with_another_tracker_it_is_one_line_before_anything_runs(work, tmp_path):
    code = ("import sys; sys.modules['mlflow'] = None\nfrom textaudit.cli.main import main\n"
            f"main(['attack', '--model', '{work}/weak.py:clf', '--method', 'genetic', '--data', '{work}/data.tsv', "
            f"'--output', '{tmp_path}/x.jsonl', '--track', 'mlflow'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        'error: --track mlflow needs MLflow, which is not installed: pip install "textaudit[track]" (or pip install mlflow)']
    assert not (tmp_path / "x.jsonl").exists()  # nothing ran
    r = _audit("http://127.0.0.1:9", "attack", "--model", f"{work}/weak.py:clf", "--track", "wandb")
    assert r.returncode == 2 and "give --track mlflow" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_no_secret_reaches_the_tracker(monkeypatch, work, tmp_path):
    """Endpoint credentials in URLs and the API keys' values (in any form) never become params, names or tags."""
    from textaudit.track import run_of_summary

    monkeypatch.setenv("OPENAI_API_KEY", "sk-live/abc+123")
    monkeypatch.setenv("MY_KEY", "hunter2-secret")
    url = "https://user:pa55@api.example.test/v1/completions?api_key=q123"
    run = run_of_summary("attack", {"model": url, "success_rate": 0.5},
                         {"model": url, "note": "sent sk-live%2Fabc%2B123 and hunter2-secret", "api_key_env": "MY_KEY"},
                         [], ["MY_KEY"])
    text = json.dumps(run.to_json())
    for secret in ("pa55", "user:", "q123", "sk-live", "hunter2"):
        assert secret not in text, (secret, text)
    assert run.params["model"] == "https://api.example.test/v1/completions" and run.name == "attack " + run.params["model"]
    assert run.metrics == {"success_rate": 0.5}


def test_a_kept_track_file_is_untrusted_input(server, work, tmp_path):
    """#63 (SECURITY, kept files): ``audit track`` honours ``<file>.track.json`` only when textaudit kept it for the
    results beside it — every artifact it names inside the results' folder, its digest matching its content and
    those files' bytes. A planted file naming a private folder, one whose params were edited, one kept for results
    that changed since, and one of another shape are each one line, exit 2, and nothing reaches the tracker."""
    from textaudit.track import TrackRun, keep_pending

    results = tmp_path / "res" / "g.jsonl"
    r = _audit("http://127.0.0.1:9", "attack", "--model", f"{work}/weak.py:clf", "--method", "genetic", "--data",
               str(work / "data.tsv"), "--output", str(results), "--track", "mlflow", "--track-experiment", "kept")
    assert r.returncode == 0 and "warning: not logged to MLflow" in r.stderr, r.stderr
    kept = tmp_path / "res" / "g.jsonl.track.json"
    genuine = kept.read_text()
    doc = json.loads(genuine)
    assert doc["run"]["artifacts"] == ["g.jsonl"] and len(doc["sha256"]) == 64  # named relative to its folder

    private = tmp_path / "private"
    private.mkdir()
    (private / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    run = TrackRun("attack", "attack", {"method": "genetic"}, {"success_rate": 1.0}, {}, [str(results), str(private)])
    keep_pending(run, results)
    assert json.loads(kept.read_text())["run"]["artifacts"] == ["g.jsonl"]  # a writer never names what lies outside

    def edited(**change):
        d = json.loads(genuine)
        d["run"].update(change)
        return json.dumps(d)

    cases = {
        "the private folder by absolute path": edited(artifacts=["g.jsonl", str(private)]),
        "the private folder by ..": edited(artifacts=["g.jsonl", "../private"]),
        "edited params": edited(params={**doc["run"]["params"], "method": "so-beam"}),
        "the old shape (no mark, no digest)": json.dumps(doc["run"]),
        "not JSON": "{",
    }
    (tmp_path / "res" / "link").symlink_to(private)
    cases["a link out of the folder"] = edited(artifacts=["g.jsonl", "link"])
    for what, text in cases.items():
        kept.write_text(text)
        r = _audit(server, "track", str(results), "--track-experiment", "planted")
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "does not describe the results beside it" in lines[0], (what, r.stderr)
        assert "Traceback" not in r.stderr and kept.read_text() == text, what  # refused, and left as it was
    kept.write_text(genuine)
    with results.open("a") as f:  # the results changed after the run was kept
        f.write("\n")
    r = _audit(server, "track", str(results), "--track-experiment", "planted")
    assert r.returncode == 2 and "digest does not match" in r.stderr, r.stderr
    assert mlflow.MlflowClient(server).get_experiment_by_name("planted") is None  # nothing was ever logged


def _artifact_paths(uri: str, run_id: str, path: str | None = None) -> set[str]:
    """Every file under the run's artifacts (folders walked)."""
    client = mlflow.MlflowClient(uri)
    out = set()
    for a in client.list_artifacts(run_id, path):
        out |= _artifact_paths(uri, run_id, a.path) if a.is_dir else {a.path}
    return out


def test_a_kept_run_with_a_recomputed_digest_never_decides_what_is_uploaded(server, work, tmp_path):
    """#82 (SECURITY): a planted ``<results>.track.json`` naming a ``secret.env`` beside the results, its digest
    recomputed as anyone can (a SHA-256 is a checksum, not a signature), made ``audit track`` upload the secret. What
    leaves the machine now follows from the results path by textaudit's own naming rules alone: the results file,
    the summary and the report — whatever the kept file names, at any level of it."""
    from textaudit.track import _digest

    results = tmp_path / "res" / "g.jsonl"
    r = _audit("http://127.0.0.1:9", "attack", "--model", f"{work}/weak.py:clf", "--method", "genetic", "--data",
               str(work / "data.tsv"), "--output", str(results), "--track", "mlflow", "--track-experiment", "kept")
    assert r.returncode == 0 and "warning: not logged to MLflow" in r.stderr, r.stderr
    (tmp_path / "res" / "secret.env").write_text("API_KEY=sk-planted-0123456789\n")
    kept = tmp_path / "res" / "g.jsonl.track.json"
    doc = json.loads(kept.read_text())
    run = doc["run"]
    secret = str(tmp_path / "res" / "secret.env")
    run.update(name=secret, command="secret.env", tags={"mlflow.source.name": secret, "file": "secret.env"},
               metrics={"secret.env": 1.0}, start_ms=0, end_ms=1)  # every field a planter controls …
    run["artifacts"] = ["g.jsonl", "secret.env"]
    run["children"] = [{**run, "name": "child", "artifacts": ["secret.env", "./secret.env"], "children": []}]
    run["params"] = {**run["params"], "planted": "secret.env", "artifacts": secret}
    doc["sha256"] = _digest(run, tmp_path / "res")  # recomputed: it matches
    kept.write_text(json.dumps(doc))
    r = _audit(server, "track", str(results), "--track-experiment", "planted-digest", "--json")
    assert r.returncode == 0, r.stderr
    parent, child = sorted(_runs(server, "planted-digest"), key=lambda x: x.info.run_name == "child")
    assert parent.info.run_name == secret  # (its text is logged as text: the name, params, tags)
    uploaded = _artifact_paths(server, parent.info.run_id) | _artifact_paths(server, child.info.run_id)
    assert "results/g.jsonl" in uploaded and not any("secret" in p for p in uploaded), uploaded
    assert uploaded <= {"results/g.jsonl", "summary.json", "report.html"}, uploaded


def test_a_results_folder_uploads_its_own_results_files_and_nothing_else(tmp_path):
    """``uploads``: a results file is itself; a folder gives its summary and its own ``*.jsonl`` results files (with a
    textaudit header, not links); a planted ``secret.env``, a header-less ``.jsonl`` and a link to a file outside
    are never among them."""
    from textaudit.formats.jsonl import write_results
    from textaudit.track import uploads

    folder = tmp_path / "cmp"
    folder.mkdir()
    (folder / "compare.json").write_text("{}")
    write_results(folder / "cnn.so-enum.jsonl", [{"id": "0", "status": "failed"}], command="attack",
                  config={"method": "so-enum"})
    (folder / "secret.env").write_text("API_KEY=1\n")
    (folder / "notes.jsonl").write_text('{"not": "ours"}\n')
    outside = tmp_path / "private.jsonl"
    write_results(outside, [], command="attack", config={"method": "so-enum"})
    (folder / "link.jsonl").symlink_to(outside)
    assert uploads(folder) == [folder / "compare.json", folder / "cnn.so-enum.jsonl"]
    assert uploads(folder / "cnn.so-enum.jsonl") == [folder / "cnn.so-enum.jsonl"]
    assert uploads(folder / "link.jsonl") == [] and uploads(tmp_path / "missing") == []
