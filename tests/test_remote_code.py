"""A HuggingFace model that ships its own Python code (``auto_map``) never runs it unless asked."""

import json
import os
import subprocess
import sys

import pytest

CONFIGURATION = '''
import os, pathlib
pathlib.Path(os.environ["PLANTED_MARKER"]).write_text("the model's own code ran")
from transformers import BertConfig

class PlantedConfig(BertConfig):
    model_type = "planted"
'''
MODELING = '''
from transformers import BertForSequenceClassification
from .configuration_planted import PlantedConfig

class PlantedModel(BertForSequenceClassification):
    config_class = PlantedConfig
'''


@pytest.fixture(scope="module")
def planted_dir(tmp_path_factory):
    """A tiny, real BERT classifier whose config.json points at code shipped in the directory."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    from textaudit.resources import resolve

    d = tmp_path_factory.mktemp("planted")
    tok = BertTokenizerFast.from_pretrained(resolve("minilm"))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, num_labels=2)
    BertForSequenceClassification(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    (d / "configuration_planted.py").write_text(CONFIGURATION)
    (d / "modeling_planted.py").write_text(MODELING)
    config = json.loads((d / "config.json").read_text())
    config.update(model_type="planted", auto_map={"AutoConfig": "configuration_planted.PlantedConfig",
                                                   "AutoModelForSequenceClassification": "modeling_planted.PlantedModel"})
    (d / "config.json").write_text(json.dumps(config))
    return d


def _audit(*args, env):
    return subprocess.run([sys.executable, "-m", "textaudit", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=1200)


def test_remote_code_is_refused_unless_asked(planted_dir, tmp_path):
    marker = tmp_path / "ran"
    env = {**os.environ, "PLANTED_MARKER": str(marker), "HF_MODULES_CACHE": str(tmp_path / "modules")}
    env.pop("TEXTAUDIT_TRUST_REMOTE_CODE", None)
    r = _audit("predict", "--model", f"hf:{planted_dir}", "a fine film", "--json", env=env)
    assert r.returncode == 2 and r.stdout == ""
    last = r.stderr.strip().splitlines()[-1]  # transformers may warn first; the error is one line, last
    assert "Traceback" not in r.stderr and r.stderr.count("error:") == 1
    assert last.startswith("error: HuggingFace classifier") and "audit --trust-remote-code" in last
    assert not marker.exists()  # transformers' "[y/N]" prompt was never reached, nothing ran
    # the user opts in: the model's code runs and the model predicts
    r = _audit("--trust-remote-code", "predict", "--model", f"hf:{planted_dir}", "a fine film", "--json", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert marker.read_text() == "the model's own code ran"
    probs = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(probs["predictions"][0]["probs"]) == 2


def test_a_masked_lm_with_its_own_code_is_refused(planted_dir, tmp_path):
    marker = tmp_path / "ran"
    env = {**os.environ, "PLANTED_MARKER": str(marker), "HF_MODULES_CACHE": str(tmp_path / "modules")}
    env.pop("TEXTAUDIT_TRUST_REMOTE_CODE", None)
    r = _audit("neighbors", "a fine film", "--mlm", str(planted_dir), env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: masked LM '{planted_dir}' ships its own Python code") and not marker.exists()
