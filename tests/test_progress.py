"""Long work is visible in logs: with stderr not a terminal, plain progress lines, no third-party bars."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from textaudit.progress import LogProgress

PLUGIN = '''
import numpy as np

def classify(texts):
    return np.array([[0.9, 0.1] if "dull" in t.split() else [0.1, 0.9] for t in texts])
'''


def test_log_progress_lines_have_count_rate_and_eta(capsys):
    bar = LogProgress(total=4, desc="so-beam k=6", unit="ex", interval=0)
    bar.update(1)
    bar.set_postfix(success="1/1")
    bar.update(1)
    bar.close()
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("so-beam k=6: 1/4 ex (25%), ") and "ex/s" in lines[0] and "ETA" in lines[0]
    assert lines[-1].startswith("so-beam k=6: 2/4 ex (50%), ") and lines[-1].endswith("success=1/1")


def test_a_piped_attack_prints_progress_lines_and_no_library_bars(tmp_path):
    (tmp_path / "p.py").write_text(PLUGIN)
    data = tmp_path / "d.csv"
    data.write_text("text,label\na moving and wonderful film,1\nan honest and moving story,1\na sharp and funny script,1\n")
    env = {**os.environ, "TEXTAUDIT_PROGRESS_SECONDS": "0"}
    r = subprocess.run([sys.executable, "-m", "textaudit", "attack", "--model", f"{tmp_path / 'p.py'}:classify",
                        "--method", "bae", "--data", str(data), "--no-ppl", "--output", str(tmp_path / "r.jsonl")],
                       capture_output=True, text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("bae: ")]
    assert len(lines) >= 3, r.stderr  # one per example (interval 0)
    assert re.match(r"bae: 3/3 ex \(100%\), [\d.]+ ex/s, elapsed \d+s", lines[-1]), lines[-1]


def _stderr_of(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stderr


def test_other_libraries_bars_are_silenced():
    """A bare tqdm loop in a library (transformers' GGUF de-quantising is one) and transformers' own
    bars are off once the CLI has called quiet_third_party_bars; without it they print."""
    loop = "from tqdm.auto import tqdm; list(tqdm(range(3), desc='library-bar'))"
    quiet = "from textaudit.progress import quiet_third_party_bars; quiet_third_party_bars(); "
    assert "library-bar" in _stderr_of(loop)
    assert "library-bar" not in _stderr_of(quiet + loop)
    hf = "import sys; from transformers.utils import logging; print(logging.is_progress_bar_enabled(), file=sys.stderr)"
    assert _stderr_of(hf).strip().endswith("True")
    assert _stderr_of(quiet + hf).strip().endswith("False")
    # textaudit's own reporter still shows on a terminal: it passes disable=False explicitly
    own = quiet + "from textaudit.progress import progress; import sys; sys.stderr.isatty = lambda: True; " \
        "b = progress(total=2, desc='own-bar', unit='x'); b.update(2); b.close()"
    assert "own-bar" in _stderr_of(own)
