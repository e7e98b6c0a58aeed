"""How close textaudit's time estimates come to the wall time, said vs measured side by side (issue #84, item 3).

    TEXTAUDIT_DATA=../shared/data python benchmarks/estimate_time.py --limit 20

Runs each case as a user would — ``audit attack`` with both searches (SO-Beam k = 6, SO-Enum k = 2), ``audit replay
--fresh`` (a fresh SO-Beam attack of the first case's file), ``audit bias`` and ``audit certify`` (SAFER) — on a
model whose checkpoint is already here (``--model``, default the zoo's cnn of README command 1), each from an empty
store (a temporary ``TEXTAUDIT_CACHE``: the masked LM's answers are computed, as on a first run), with a progress
line every ``--interval`` seconds. Every stderr line is stamped as it arrives, so for each case it prints:

* **said**: the estimate said before the work (a range's two ends), and its width (high / low: at most 3×);
* **wall**: the seconds from that line to the end of the work (the last progress line);
* **wall / said**: against the estimate (a range's geometric middle) — within 2× is the goal;
* **ETA after ¼**: every progress line's ETA once a quarter of the wall has passed, against the time that was in
  fact left: the worst ratio (an ETA within 10 s of the truth counts as right, whatever the ratio); and the same once
  a quarter of the examples have finished too (the issue's "a quarter of the work": a run whose first quarter of
  the wall finishes one example in twelve has not done a quarter of its work);
* **revisions**: the ``time: revised …`` lines.

Nothing is timed in a test: a busy machine moves these figures (the estimate measures the pace on the machine as it
is, so a load that changes during the run is what moves them most).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

#: each case: the audit command's arguments ({model}, {n} and {attack_file}: the so-beam case's results)
CASES: dict[str, list[str]] = {
    "attack so-beam k=6": ["attack", "--model", "{model}", "--limit", "{n}", "--no-ppl", "--output", "{attack_file}"],
    "attack so-enum k=2": ["attack", "--model", "{model}", "--method", "so-enum", "--k", "2", "--limit", "{n}",
                           "--no-ppl"],
    "attack genetic paper": ["attack", "--model", "{model}", "--method", "genetic", "--recipe", "paper", "--limit", "{n}",
                             "--no-ppl"],
    "attack bae paper": ["attack", "--model", "{model}", "--method", "bae", "--recipe", "paper", "--limit", "{n}",
                         "--no-ppl"],
    "replay --fresh": ["replay", "{attack_file}", "--model", "{model}", "--fresh", "{n}"],
    "bias k=2": ["bias", "--model", "{model}", "--pair", "he,she", "--k", "2", "--max-sources", "{sources}"],
    "certify safer": ["certify", "--model", "{model}", "--method", "safer", "--limit", "{n}"],
}

#: slack under which an ETA is right whatever its ratio (a 3 s ETA for 9 s left is no planning error)
ETA_SLACK_SECONDS = 10.0

_DURATION = r"(?:\d+h\d+m|\d+m\d+s|\d+s)"
_SAID = [re.compile(rf"^time: about (?P<lo>{_DURATION})(?: to (?P<hi>{_DURATION}))? "),  # attack, certify
         re.compile(rf"^cost: about .* — about (?P<lo>{_DURATION}) more")]  # bias, after its first unit
_REVISED = re.compile(rf"^time: revised to about (?P<total>{_DURATION}) in all \((?P<left>{_DURATION}) more")
_PROGRESS = re.compile(rf"^[^:]+: (?P<n>\d+)/(?P<total>\d+) .*elapsed (?P<elapsed>{_DURATION})(?:, ETA (?P<eta>{_DURATION}))?")


def seconds(text: str) -> float:
    """``1h02m`` / ``4m05s`` / ``12s`` (:func:`textaudit.progress.duration`) in seconds."""
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text or "")
    if not text or not m:
        return float("nan")
    h, mi, s = (int(x) if x else 0 for x in m.groups())
    return 3600 * h + 60 * mi + s


@dataclass
class Case:
    name: str
    lines: list[tuple[float, str]] = field(default_factory=list)  # (seconds since start, stderr line)
    returncode: int = 0
    wall: float = 0.0

    def said(self) -> tuple[float, float, float] | None:
        """(when, low, high) of the first estimate."""
        for t, ln in self.lines:
            for rx in _SAID:
                m = rx.match(ln)
                if m:
                    lo, hi = seconds(m.group("lo")), m.groupdict().get("hi")
                    return t, lo, seconds(hi) if hi else lo
        return None

    def end(self) -> float:
        """When the work ended: the last progress line (its closing one), else the process's exit."""
        ends = [t for t, ln in self.lines if _PROGRESS.match(ln)]
        return ends[-1] if ends else self.wall

    def etas(self, since: float, share: float = 0.0) -> list[tuple[float, float]]:
        """(ETA said, seconds that were in fact left) of each progress line after ``since`` that counts at least
        ``share`` of the examples finished."""
        end, out = self.end(), []
        for t, ln in self.lines:
            m = _PROGRESS.match(ln)
            if (m and m.group("eta") and t >= since and t < end
                    and int(m.group("n")) >= share * int(m.group("total"))):
                out.append((seconds(m.group("eta")), end - t))
        return out

    def revisions(self) -> list[str]:
        return [ln for _, ln in self.lines if _REVISED.match(ln)]


def run_case(name: str, argv: list[str], env: dict[str, str], echo: bool) -> Case:
    case = Case(name)
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "textaudit", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    for ln in proc.stderr:  # type: ignore[union-attr]
        case.lines.append((time.monotonic() - t0, ln.rstrip("\n")))
        if echo:
            print(f"[{name} {time.monotonic() - t0:6.0f}s] {ln.rstrip()}", flush=True)
    case.returncode = proc.wait()
    case.wall = time.monotonic() - t0
    reader.join()
    if case.returncode:
        print(f"[{name}] exit {case.returncode}\n" + "\n".join(ln for _, ln in case.lines[-20:]), flush=True)
    return case


def ratio_text(r: float) -> str:
    return "–" if not math.isfinite(r) else f"{r:.2f}"


def row(case: Case) -> str:
    said = case.said()
    if said is None:
        return f"| {case.name} | – (none said) | | {case.end():.0f} | | | {len(case.revisions())} |"
    t, lo, hi = said
    actual = case.end() - t
    middle = math.sqrt(max(lo, 1.0) * max(hi, 1.0))
    width = max(hi, 1.0) / max(lo, 1.0)
    quarter = t + (case.end() - t) / 4
    said_text = f"{lo:.0f}" if hi == lo else f"{lo:.0f} to {hi:.0f}"
    goal = "yes" if 0.5 <= actual / middle <= 2.0 and width <= 3.0 else "no"
    return (f"| {case.name} | {said_text} | {width:.1f} | {actual:.0f} | {ratio_text(actual / middle)} ({goal}) | "
            f"{_worst(case.etas(quarter))} | {_worst(case.etas(quarter, 0.25))} | {len(case.revisions())} |")


def _worst(etas: list[tuple[float, float]]) -> str:
    """The worst ratio of time left to ETA among ``etas``, how many, and whether each is within 2× or 10 s."""
    worst, ok = float("nan"), True
    for eta, left in etas:
        r = left / max(eta, 1.0)
        ok &= abs(left - eta) <= ETA_SLACK_SECONDS or 0.5 <= r <= 2.0
        if not math.isfinite(worst) or abs(math.log(max(r, 1e-9))) > abs(math.log(max(worst, 1e-9))):
            worst = r
    return f"{ratio_text(worst)} over {len(etas)} ({'yes' if ok else 'no'})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=20, help="examples (bias: source sentences) per case")
    ap.add_argument("--model", default="cnn", help="a zoo model trained already (its checkpoint is linked into each "
                                                   "case's empty cache), or file.py:obj")
    ap.add_argument("--sources", type=int, default=None, help="bias: source sentences (default: --limit; 20 at k = 2 "
                                                               "take about 20 minutes here)")
    ap.add_argument("--cases", default=",".join(CASES), help="which of: " + ", ".join(CASES))
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between progress lines")
    ap.add_argument("--quiet", action="store_true", help="do not echo each case's stderr")
    args = ap.parse_args()
    from textaudit.resources import cache_dir

    chosen = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in CASES]
    if unknown:
        sys.exit(f"error: unknown case(s) {unknown}; choose from {', '.join(CASES)}")
    results: list[Case] = []
    with tempfile.TemporaryDirectory() as keep:
        attack_file = Path(keep) / "so-beam.jsonl"
        for name in chosen:
            with tempfile.TemporaryDirectory() as tmp:
                models = Path(tmp) / "cache" / "models"
                models.mkdir(parents=True)
                if ":" not in args.model and (cache_dir() / "models" / args.model).exists():
                    (models / args.model).symlink_to(cache_dir() / "models" / args.model)
                env = {**os.environ, "TEXTAUDIT_CACHE": str(Path(tmp) / "cache"),
                       "TEXTAUDIT_PROGRESS_SECONDS": str(args.interval)}
                if name == "replay --fresh" and not attack_file.exists():
                    print(f"[{name}] skipped: it replays the 'attack so-beam k=6' case's file", flush=True)
                    continue
                argv = [a.format(model=args.model, n=args.limit, attack_file=attack_file,
                                 sources=args.sources or args.limit) for a in CASES[name]]
                results.append(run_case(name, argv, env, echo=not args.quiet))
    print(f"\n{args.limit} examples ({args.sources or args.limit} bias source sentences) on {args.model}, each case from "
          "an empty store; "
          f"seconds from the estimate to the end of the work")
    print("| case | said s | range width | wall s | wall / said (within 2×) | ETA after ¼ of the wall: worst left / ETA "
          "(all within 2× or 10 s) | ... and ¼ of the examples finished | revisions |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for case in results:
        print(row(case))


if __name__ == "__main__":
    main()
