from __future__ import annotations

import json
import os
import subprocess
import sys


def test_help_lists_commands(cli):
    r = cli("--help")
    assert r.exit_code == 0
    for cmd in ("doctor", "predict"):
        assert cmd in r.output


def test_doctor_json(cli):
    r = cli("doctor", "--json", "--no-network")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout.strip().splitlines()[-1])
    rows = {x["name"]: x for x in d["resources"]}
    for name in ("sst2", "glove-50d", "minilm", "smollm2", "counterfitted-neighbors", "gender-pairs",
                 "checklist-lexicons"):
        assert rows[name]["found"], name
    assert rows["distilbert-base-uncased"]["note"].startswith("hub only (offline here)")


def test_predict_with_plugin_and_errors(cli, tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def clf(texts):\n    return [[0.25, 0.75] for _ in texts]\n")
    r = cli("predict", "--model", f"{f}:clf", "--json", "a fine film")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert d["predictions"][0]["probs"] == [0.25, 0.75] and d["predictions"][0]["label"] == 1
    r = cli("predict", "--model", "no-such-model", "hello")
    assert r.exit_code == 2
    assert r.output.strip().startswith("error: unknown model 'no-such-model'")
    assert "Traceback" not in r.output
    r = cli("predict", "--model", f"{f}:clf", "  ")
    assert r.exit_code == 2 and "empty text" in r.output


def test_python_dash_m_real_process_one_line_error():
    env = dict(os.environ)
    p = subprocess.run([sys.executable, "-m", "textaudit", "predict", "--model", "nope", "hi"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == ["error: unknown model 'nope'; use one of "
                                             + p.stderr.split("use one of ")[1].strip()]
    assert "Traceback" not in p.stderr
