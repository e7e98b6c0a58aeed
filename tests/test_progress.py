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
    assert lines[0] == "so-beam k=6: 0/4 ex (0%), 0 ex/s, elapsed 0s"  # said when the work starts
    assert lines[1].startswith("so-beam k=6: 1/4 ex (25%), ") and "ex/s" in lines[1] and "ETA" in lines[1]
    assert lines[-1].startswith("so-beam k=6: 2/4 ex (50%), ") and lines[-1].endswith("success=1/1")


def test_a_long_first_unit_is_not_silent(capsys, monkeypatch):
    """Nothing finished yet: a line when the work starts and another within FIRST_LINE_SECONDS (here
    shortened), from the timer, without waiting for the first unit."""
    import time

    import textaudit.progress as progress_module

    monkeypatch.setattr(progress_module, "FIRST_LINE_SECONDS", 0.3)
    bar = LogProgress(total=3, desc="bias k<=2", unit="unit", interval=60)
    time.sleep(1.5)
    err = capsys.readouterr().err
    bar.close()
    lines = err.splitlines()
    # the start line, then the timer's (long before the 60 s interval), and no third
    assert len(lines) == 2 and all(ln.startswith("bias k<=2: 0/3 unit (0%), 0 unit/s, elapsed ") for ln in lines), err
    assert lines[0].endswith("elapsed 0s")


def test_the_eta_is_weighted_by_cost_so_it_does_not_jump():
    """One cheap unit of two done in 10 s, the other 99 times its cost: the ETA says 16m30s, not the
    count's 10 s (a bias unit's neighbourhood grows with its sentence's length)."""
    import time

    bar = LogProgress(total=2, desc="bias k<=2", unit="unit", interval=1e9)
    bar.t0 -= 10
    bar.update(1)
    assert "ETA 10s" in bar.line()
    bar.weigh(1, 99)
    assert "ETA 16m30s" in bar.line()
    bar.close()
    assert time.monotonic() - bar.t0 >= 10


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


BAR = ("import os; os.environ['TEXTAUDIT_PROGRESS_SECONDS'] = '0'\n"
       "from textaudit.progress import progress\n"
       "bar = progress(total=3, desc='work', unit='step')\n"
       "for _ in range(3):\n    bar.update(1)\n"
       "bar.close()\n")


def _on_a_terminal(columns: int, code: str = BAR) -> str:
    """What the bar writes when stderr is a real terminal (a pty) that reports ``columns``."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TQDM_DISABLE")}
    p = subprocess.Popen([sys.executable, "-c", code], stderr=follower, stdout=subprocess.DEVNULL, env=env)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the follower side closed: the child is done
            break
        if not chunk:
            break
        out += chunk
    p.wait(timeout=120)
    os.close(leader)
    return out.decode(errors="replace")


def test_a_terminal_that_reports_no_width_gets_plain_lines_not_an_empty_bar():
    """#52: on a terminal reporting 0 columns a tqdm bar draws nothing: no progress at all. There the plain
    lines are used; a terminal with a width keeps the bar."""
    narrow = _on_a_terminal(0)
    assert "work: 3/3 step (100%)" in narrow, narrow
    wide = _on_a_terminal(100)
    assert "work: 3/3 step (100%)" not in wide and "3/3" in wide, wide  # tqdm's own bar


def test_a_training_bar_shows_no_best_score_before_the_first_evaluation(capsys, monkeypatch):
    """#52: training bars showed best=-1.000 (the "nothing yet" sentinel) until the first evaluation."""
    from textaudit.data import load_dataset
    from textaudit.models.zoo import TrainConfig, fit

    monkeypatch.setenv("TEXTAUDIT_PROGRESS_SECONDS", "0")
    ds = load_dataset("sst2:train", limit=400)
    fit("bow", ds["text"], ds["label"], config=TrainConfig(arch="bow", epochs=1, batch_size=8), progress=True)
    err = capsys.readouterr().err
    assert "loss=" in err and "best=-1" not in err, err[-2000:]


COUNTED = ("import time\n"
           "from textaudit.runner import ResumableRun\n"
           "with ResumableRun(None, progress=True, command='x', config={}) as run:\n"
           "    k = 0\n"
           "    for job_id, _ in run.results([(str(i), i) for i in range(6)], lambda: (lambda j: j), desc='work',"
           " unit='job'):\n"
           "        k += 1\n"
           "        run.show(done=f'{k}/{k}')\n"
           "        time.sleep(0.15)\n")


def test_the_bar_and_its_counts_agree_in_every_frame():
    """#52: the bar showed 46/50 beside success=47/47: the counts were drawn before the bar counted the job.
    Every frame a real tqdm draws on a terminal shows counts no ahead of its total."""
    frames = re.findall(r"(\d+)/6 \[[^\r\n]*?done=(\d+)/", _on_a_terminal(100, COUNTED))
    assert frames and frames[-1] == ("6", "6"), frames
    assert all(int(done) <= int(n) for n, done in frames), frames


def test_an_attack_says_its_time_before_it_spends_it(tmp_path):
    """After the cost line (queries), once the model is loaded: its pace measured here and what the
    queries make in time — before the first progress line; the patch-word ranking says when it is done."""
    (tmp_path / "p.py").write_text(PLUGIN)
    data = tmp_path / "d.csv"
    data.write_text("text,label\na moving and wonderful film,1\nan honest and moving story,1\n")
    env = {**os.environ, "TEXTAUDIT_PROGRESS_SECONDS": "0"}
    r = subprocess.run([sys.executable, "-m", "textaudit", "attack", "--model", f"{tmp_path / 'p.py'}:classify",
                        "--method", "so-enum", "--k", "1", "--kappa", "5", "--data", str(data), "--no-ppl"],
                       capture_output=True, text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    cost = next(i for i, ln in enumerate(lines) if ln.startswith("cost: up to "))
    queries = int(lines[cost].split("up to ")[1].split(" ")[0].replace(",", ""))
    time_line = next(i for i, ln in enumerate(lines) if ln.startswith("time: p.py:classify answers about "))
    m = re.search(r"answers about ([\d,]+) texts/s here: up to (\S+) per example on the classifier alone "
                  r"\(up to (\S+) for 2\)", lines[time_line])
    assert m, lines[time_line]
    assert queries > 0 and int(m.group(1).replace(",", "")) > 0
    ranking = next(i for i, ln in enumerate(lines) if ln.startswith("ranking patch words for p.py:classify"))
    ranked = next(i for i, ln in enumerate(lines) if re.match(r"ranked patch words for p\.py:classify in [\d.]+ s; attacking", ln))
    first_progress = next(i for i, ln in enumerate(lines) if ln.startswith("so-enum k=1: "))
    assert cost < time_line < ranking < ranked < first_progress, r.stderr
