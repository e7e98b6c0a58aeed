"""Statistics that decide ([5/7]): non-inferiority and equivalence of paired rates, checked by hand and
by simulation, and through ``audit replay``, ``audit compare`` and a suite's gates on planted models."""

from __future__ import annotations

import json
import math
from html import escape as html_escape
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest, norm

from textaudit.stats import non_inferiority, paired_difference


def _table(n11: int, n10: int, n01: int, n00: int) -> tuple[list[bool], list[bool]]:
    a = [True] * n11 + [True] * n10 + [False] * n01 + [False] * n00
    b = [True] * n11 + [False] * n10 + [True] * n01 + [False] * n00
    return a, b


def test_newcombes_paired_interval_by_hand():
    """Newcombe (1998) method 10 written out from the paper's recipe, with scipy's Wilson intervals."""
    n11, n10, n01, n00 = 30, 12, 4, 54
    n = n11 + n10 + n01 + n00
    a, b = _table(n11, n10, n01, n00)
    got = paired_difference(a, b)
    w1 = binomtest(n11 + n10, n).proportion_ci(0.95, method="wilson")
    w2 = binomtest(n11 + n01, n).proportion_ci(0.95, method="wilson")
    p1, p2 = (n11 + n10) / n, (n11 + n01) / n
    A = n11 * n00 - n10 * n01  # 1572 > n/2: φ's numerator is A − n/2
    phi = (A - n / 2) / math.sqrt((n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00))
    lo = (p2 - p1) - math.sqrt((p2 - w2.low) ** 2 - 2 * phi * (p2 - w2.low) * (w1.high - p1) + (w1.high - p1) ** 2)
    hi = (p2 - p1) + math.sqrt((w2.high - p2) ** 2 - 2 * phi * (w2.high - p2) * (p1 - w1.low) + (p1 - w1.low) ** 2)
    assert got["difference"] == pytest.approx(-0.08)
    assert got["ci"] == pytest.approx([lo, hi], abs=1e-6)
    assert (got["only_a"], got["only_b"]) == (12, 4)
    assert got["ci"][0] < -0.08 < got["ci"][1] < 0  # 12 vs 4 discordant: worse, and the interval says so


def test_the_interval_meets_the_wald_interval_at_large_n_and_covers_at_its_level():
    """For many pairs Newcombe's interval approaches the Wald interval of a paired difference; on simulated
    correlated pairs its 95% interval covers the true difference about 95% of the time."""
    a, b = _table(4000, 300, 200, 5500)
    n, d = 10000, (200 - 300) / 10000
    se = math.sqrt((300 + 200) / n - d * d) / math.sqrt(n)
    got = paired_difference(a, b)["ci"]
    assert got == pytest.approx([d - 1.96 * se, d + 1.96 * se], abs=5e-4)
    rng = np.random.default_rng(0)
    probs = [0.40, 0.06, 0.02, 0.52]  # n11, n10, n01, n00: Δ = 0.02 − 0.06 = −0.04
    hits = 0
    for _ in range(1500):
        counts = rng.multinomial(150, probs)
        lo, hi = paired_difference(*_table(*counts))["ci"]
        hits += lo <= -0.04 <= hi
    assert 0.93 <= hits / 1500 <= 0.975


def test_a_model_identical_to_its_baseline_on_99_percent_is_non_inferior_at_2_points_not_at_half_a_point():
    before, after = _table(840, 10, 0, 150)  # accuracy: 10 right → wrong flips out of 1000 (harm = 1 point)
    at2 = non_inferiority(before, after, 0.02, higher_is_worse=False)
    at05 = non_inferiority(before, after, 0.005, higher_is_worse=False)
    assert at2["harm"] == pytest.approx(0.01) and (at2["harmful"], at2["beneficial"]) == (10, 0)
    assert at2["non_inferior"] and at2["equivalent"] and at2["harm_ci"][1] < 0.02
    assert not at05["non_inferior"] and not at05["equivalent"] and at05["harm_ci"][1] > 0.005
    assert at2["verdict"] == "non-inferior at m = 2 points; equivalent"
    # the one-sided bound is the 90% interval's end: the level is 1 − 2α
    assert at2["harm_ci"] == pytest.approx(sorted(-x for x in paired_difference(before, after, 0.90)["ci"]))
    # the same model with the flips the other way is better: non-inferior at any margin, not equivalent at 0.5
    better = non_inferiority(after, before, 0.005, higher_is_worse=False)
    assert better["non_inferior"] and not better["equivalent"] and better["beneficial"] == 10
    assert norm.ppf(0.95) == pytest.approx(1.6449, abs=1e-4)


# -- through the commands, on planted models ---------------------------------------------------------------------
N = 1000
REGRESSED = set(range(1, 20, 2))  # ten odd findings: fixed on the baseline, holding again on the new model
PLANTED = '''
REGRESSED = {regressed}
def clf(texts):  # "item i a" / "item i b": the finding holds (a → 0, b → 1) for even i (and for REGRESSED)
    out = []
    for t in texts:
        words = t.split()
        if len(words) != 3 or not words[1].isdigit():  # a text of the loader's own probe
            out.append([0.5, 0.5])
            continue
        _, i, side = words
        holds = int(i) % 2 == 0 or int(i) in REGRESSED
        out.append([0.2, 0.8] if side == "b" and holds else [0.8, 0.2])
    return out
'''


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """1,000 second-order findings (x̃ = "item i a", x̃ ⊕ p = "item i b") and two models identical but on 1%."""
    from textaudit.formats.jsonl import write_results

    d = tmp_path_factory.mktemp("margin")
    (d / "base.py").write_text(PLANTED.format(regressed="set()"))
    (d / "new.py").write_text(PLANTED.format(regressed=sorted(REGRESSED)))
    records = [{"id": str(i), "status": "success", "method": "so-enum", "text": f"item {i} a", "label": 0,
                "vulnerable": f"item {i} a", "vulnerable_patched": f"item {i} b", "pair": ["a", "b"], "l0": 0,
                "seconds": 0.0, "queries": 2} for i in range(N)]
    write_results(d / "found.jsonl", records, command="attack", config={"method": "so-enum", "model": "base.py:clf"})
    return d


def test_replay_with_a_margin_says_non_inferior_at_2_points_not_at_half(planted, cli, tmp_path):
    d = planted
    args = ["replay", str(d / "found.jsonl"), "--model", f"{d}/new.py:clf", "--baseline", f"{d}/base.py:clf"]
    r = cli(*args, "--margin", "0.02", "--json", "--output", str(tmp_path / "r.jsonl"))
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    t = out["non_inferiority"]
    assert (out["regressed"], out["fixed_by_model"], out["paired"]) == (10, 0, N)
    assert (t["harm"], t["harmful"], t["beneficial"], t["non_inferior"]) == (0.01, 10, 0, True)
    # the file read back gives the same verdict (the margin is in its header)
    from textaudit.results import load

    assert load(tmp_path / "r.jsonl").summary()["non_inferiority"] == t
    r = cli(*args, "--margin", "0.005", "--output", str(tmp_path / "half.jsonl"))
    assert r.exit_code == 0 and "not shown non-inferior at m = 0.5 points" in r.output, r.output
    assert "harmful" in r.output and "beneficial" in r.output
    # #84: a 12-column table in a log breaks no word (it broke 'base.py:cl / f', 'beneficia / l') ...
    rows = [line for line in r.stdout.splitlines() if line.startswith("│")]
    assert any("│ new.py:clf │ base.py:clf │ 1000 │" in line and "[+0.0046, +0.0154]" in line for line in rows), r.stdout
    assert "beneficial ┃ non-inferior ┃ equivalent" in r.stdout
    # ... and the report shows the verdict the command printed (it was dropped)
    verdict = next(line for line in r.stdout.splitlines() if "not shown non-inferior" in line)
    for name, form in (("r.md", "md"), ("r.html", "html")):
        rep = cli("report", str(tmp_path / "half.jsonl"), "--out", str(tmp_path / name))
        assert rep.exit_code == 0, rep.output
        text = (tmp_path / name).read_text()
        assert (verdict if form == "md" else html_escape(verdict)) in text and "non-inferiority of the still-rate" in text


def test_a_tiny_mcnemar_p_is_kept_and_printed_as_such_never_0():
    """#84: "McNemar p = 0" where p ≈ 2e-13 — the summary rounded p to six decimals."""
    from textaudit.kinds import summarize_replay
    from textaudit.stats import format_p

    records = [{"id": str(i), "method": "so-enum", "pair": None, "status": "fixed", "baseline_status": "still"}
               for i in range(45)]
    s = summarize_replay(records, "m", "base")
    assert s["fixed_by_model"] == 45 and s["mcnemar_p"] == pytest.approx(2 * 0.5 ** 45, rel=1e-3) and s["mcnemar_p"] > 0
    assert format_p(s["mcnemar_p"]) == "5.68e-14"


@pytest.mark.parametrize("extra, message", [
    (["--margin", "0.02"], "--margin needs --baseline"),
    (["--margin", "2", "--baseline", "x.py:clf"], "--margin must be a number > 0 and < 1"),
    (["--margin", "0", "--baseline", "x.py:clf"], "--margin must be a number > 0 and < 1"),
])
def test_a_bad_margin_is_one_line_before_anything_loads(planted, cli, extra, message):
    r = cli("replay", str(planted / "found.jsonl"), "--model", f"{planted}/new.py:clf", *extra)
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output


def test_compare_margin_needs_two_models(cli, tmp_path):
    r = cli("compare", "--models", "cnn", "--methods", "so-beam", "--output-dir", str(tmp_path / "c"), "--margin", "0.02")
    assert r.exit_code == 2 and "--margin needs two models or more" in r.output, r.output
    assert not (tmp_path / "c").exists()


def test_compare_cells_test_each_later_model_against_the_first(planted):
    from textaudit.attacks.compare import compare_cells

    def cell(successes: set[int]) -> list[dict]:
        return [{"id": str(i), "status": "success" if i in successes else "failed", "k": 2, "l0": 1, "seconds": 0.0,
                 "queries": 1}
                for i in range(N)]

    base = set(range(0, N, 2))
    cells = {("a", "so-enum"): cell(base), ("b", "so-enum"): cell(base | REGRESSED)}
    out = compare_cells(cells, margin=0.02)
    (p,) = out["paired"]
    assert (p["a"], p["b"], p["only_b"]) == ("a/so-enum", "b/so-enum", 10)
    assert p["non_inferiority"]["non_inferior"] and p["non_inferiority"]["harmful"] == 10
    assert not compare_cells(cells, margin=0.005)["paired"][0]["non_inferiority"]["non_inferior"]
    assert "non_inferiority" not in compare_cells(cells)["paired"][0]


def _suite(d: Path, tmp: Path, name: str, extra: str) -> Path:
    path = tmp / f"{name}.toml"
    path.write_text(f'[suite]\noutput_dir = "{name}"\n[replay]\nfindings = ["{d / "found.jsonl"}"]\n'
                    f'model = "{d}/new.py:clf"\nbaseline = "{d}/base.py:clf"\n{extra}')
    return path


def test_a_suite_gate_with_a_margin_passes_at_2_points_and_fails_at_half(planted, cli, tmp_path):
    r = cli("run", str(_suite(planted, tmp_path, "ok", "margin = 0.02\n")), "--json")
    assert r.exit_code == 0, r.output
    checks = json.loads(r.stdout.strip().splitlines()[-1])["checks"]
    assert [(c["name"], c["op"], c["limit"], c["passed"]) for c in checks] == [
        ("replay.non_inferiority.harm_ci_high", "<", 0.02, True)]
    r = cli("run", str(_suite(planted, tmp_path, "bad", "margin = 0.005\n")))
    assert r.exit_code == 1 and "replay.non_inferiority.harm_ci_high" in r.output, r.output
    noted = _suite(planted, tmp_path, "noted", "margin = 0.005\n")  # a gate that says what its exit 1 demonstrates
    noted.write_text(noted.read_text().replace("[suite]\n", '[suite]\nnote = "meant to fail: 10 planted regressions"\n'))
    r = cli("run", str(noted))
    assert r.exit_code == 1 and "note: meant to fail: 10 planted regressions" in r.output, r.output
    r = cli("run", str(_suite(planted, tmp_path, "eq", "margin = 0.02\nequivalence = true\n")), "--json")
    assert r.exit_code == 0, r.output
    names = [c["name"] for c in json.loads(r.stdout.strip().splitlines()[-1])["checks"]]
    assert names == ["replay.non_inferiority.harm_ci_high", "replay.non_inferiority.harm_ci_low"]
    (tmp_path / "nobase.toml").write_text(f'[replay]\nfindings = ["{planted / "found.jsonl"}"]\nmodel = "cnn"\n'
                                          "margin = 0.02\n")
    r = cli("run", str(tmp_path / "nobase.toml"))
    assert r.exit_code == 2 and "margin needs baseline" in r.output, r.output
    r = cli("run", str(_suite(planted, tmp_path, "badm", "margin = 1.5\n")))
    assert r.exit_code == 2 and "margin must be a number > 0 and < 1" in r.output, r.output
    r = cli("run", str(_suite(planted, tmp_path, "eqonly", "equivalence = true\n")))
    assert r.exit_code == 2 and "equivalence needs margin" in r.output, r.output


# -- a control pair for B_{p,k} -------------------------------------------------------------------------------
NOISY = '''
import math, zlib
BONUS = {bonus}
def clf(texts):  # P(positive) = sigmoid(noise(text) + BONUS·[she ∈ x]): no word but "she" moves it on average
    out = []
    for t in texts:
        words = t.lower().split()
        z = (zlib.crc32(t.lower().encode()) % 1000) / 1000 - 0.5 + BONUS * ("she" in words)
        p = 1 / (1 + math.exp(-z))
        out.append([1 - p, p])
    return out
'''
SUBJECTS = ["the film", "the story", "the cast", "the plot", "this movie", "the ending", "the score", "the script"]
VERBS = ["was", "felt", "seemed", "looked"]
ADJ = ["deep", "slow", "warm", "funny", "dull", "moving", "long", "bright", "clever", "flat"]


@pytest.fixture(scope="module")
def bias_data(tmp_path_factory, tiny_mlm):
    d = tmp_path_factory.mktemp("control")
    for name, bonus in (("she", 0.4), ("none", 0.0)):
        (d / f"{name}.py").write_text(NOISY.format(bonus=bonus))
    rows = [f"{w} said {s} {v} {a} ." for i, (s, v, a) in enumerate(
        (s, v, a) for s in SUBJECTS for v in VERBS for a in ADJ) for w in ("he" if i % 2 else "she",)]
    (d / "data.tsv").write_text("text\n" + "".join(f"{r}\n" for r in rows[:120]))
    tiny_mlm.model.save_pretrained(d / "mlm")
    tiny_mlm.tokenizer.save_pretrained(d / "mlm")
    return d


def _bias(cli, d: Path, model: str, *extra: str) -> dict:
    r = cli("bias", "--pair", "he,she", "--model", f"{d}/{model}.py:clf", "--data", str(d / "data.tsv"), "--k", "0",
            "--control", "auto", "--json", *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_control_pair_covers_0_where_the_planted_pair_does_not(bias_data, cli):
    """he→she moves the model (BONUS); this→that (the built-in control of a pronoun pair) does not beyond the
    text-level noise: B_control's interval covers 0, B_p's and B_p − B_control's exclude it."""
    out = _bias(cli, bias_data, "she")
    bp = out["pairs"][0]["by_k"]["0"]
    (c,) = out["control"]["pairs"]
    bc, diff = c["by_k"]["0"], out["control_difference"]["pairs"][0]["by_k"]["0"]
    assert c["pair"] == ["he", "she"] and bp["sources"] == bc["sources"] == 120
    assert bp["ci95"][0] > 0.05  # sigmoid slope ~0.24 × 0.4, plus noise
    assert bc["ci95"][0] < 0 < bc["ci95"][1]
    assert diff["ci95"][0] > 0
    assert diff["B"] == pytest.approx(bp["B"] - bc["B"], abs=2e-6)  # each rounded to 6 places
    none = _bias(cli, bias_data, "none")  # no protected-word effect: neither interval excludes 0
    for part in (none["pairs"], none["control"]["pairs"], none["control_difference"]["pairs"]):
        lo, hi = part[0]["by_k"]["0"]["ci95"]
        assert lo < 0 < hi


def test_the_control_difference_is_the_clustered_interval_of_the_paired_shifts(bias_data, cli, tmp_path):
    """k = 1 with the tiny masked LM: the file holds the control's shifts beside the model's, B_p − B_c read back
    (results.load, the report) equals the run's, and its interval is the clustered one of F_p − F_c."""
    from textaudit.fairness.bias import CONTROL, DIFFERENCE, estimates_from_records
    from textaudit.fairness.estimates import clustered_mean
    from textaudit.formats.jsonl import read_header, read_jsonl
    from textaudit.results import load

    out_file = tmp_path / "b.jsonl"
    r = cli("bias", "--pair", "he,she", "--model", f"{bias_data}/she.py:clf", "--data", str(bias_data / "data.tsv"),
            "--k", "1", "--mlm", str(bias_data / "mlm"), "--kappa", "3", "--delta", "1e9", "--max-sources", "12",
            "--control", "this,that", "--json", "--output", str(out_file))
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert read_header(out_file)["config"]["controls"] == {"he,she": "this,that"}
    records = read_jsonl(out_file)
    assert {x["model"] for x in records} == {"she.py:clf", CONTROL}
    rows = {(x["unit"], x["i"], x["model"]): x for x in records if "unit" in x}
    # a control line is the same sentence as the model's line, with this/that swapped where he/she stands
    assert {(u, i) for u, i, m in rows if m == CONTROL} == {(u, i) for u, i, m in rows if m != CONTROL}
    back = estimates_from_records(records, 1, 2)
    for kk in ("0", "1"):
        assert back[DIFFERENCE][("he", "she")][int(kk)].to_dict() == out["control_difference"]["pairs"][0]["by_k"][kk]
    sums: dict[str, float] = {}
    sizes: dict[str, int] = {}
    for (u, i, m), x in rows.items():
        if m == CONTROL:
            continue
        d = x["F"] - rows[(u, i, CONTROL)]["F"]
        sums[x["source"]] = sums.get(x["source"], 0.0) + d
        sizes[x["source"]] = sizes.get(x["source"], 0) + 1
    B, half, _ = clustered_mean(list(sums.values()), list(sizes.values()))
    got = out["control_difference"]["pairs"][0]["by_k"]["1"]
    assert got["B"] == pytest.approx(float(B), abs=2e-6)
    assert got["ci95"] == pytest.approx([float(B - half), float(B + half)], abs=2e-6)
    assert load(out_file).summary()["control_difference"] == out["control_difference"]
    r = cli("report", str(out_file), "--out", str(tmp_path / "r.md"))
    assert r.exit_code == 0, r.output
    md = (tmp_path / "r.md").read_text()
    assert "this→that (control of he→she)" in md and DIFFERENCE in md
    r = cli("bias", "--pair", "he,she", "--model", f"{bias_data}/she.py:clf", "--data", str(bias_data / "data.tsv"),
            "--k", "1", "--mlm", str(bias_data / "mlm"), "--kappa", "3", "--delta", "1e9", "--max-sources", "12",
            "--control", "these,those", "--output", str(out_file), "--resume")
    assert r.exit_code == 2 and "controls" in r.output, r.output


@pytest.mark.parametrize("control, message", [
    ("he,it", "shares a word with the pair"),
    ("this,him", "is itself protected"),
    ("this", "is not a word pair"),
])
def test_a_bad_control_is_one_line(bias_data, cli, control, message):
    r = cli("bias", "--pair", "he,she", "--model", f"{bias_data}/she.py:clf", "--data", str(bias_data / "data.tsv"),
            "--k", "0", "--control", control)
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output


def test_auto_controls_are_matched_neutral_words_of_the_same_kind():
    from wordfreq import zipf_frequency

    from textaudit.fairness.controls import control_for, word_class

    assert control_for(("he", "she")) == ("this", "that") and word_class("their") == "plural pronoun"
    assert control_for(("men", "women")) == ("people", "folks")
    assert word_class("actress") == "person" and word_class("muslim") == "adjective" and word_class("film") is None
    for pair in (("man", "woman"), ("gay", "straight"), ("john", "mary")):
        c = control_for(pair)
        assert abs(sum(zipf_frequency(w, "en") for w in c) - sum(zipf_frequency(w, "en") for w in pair)) / 2 < 1.5
    from textaudit.errors import TextAuditError

    with pytest.raises(TextAuditError, match="no built-in control for film/movie"):
        control_for(("film", "movie"))


def test_a_suite_bias_section_takes_the_control(bias_data, cli, tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(f'[suite]\ndata = "{bias_data / "data.tsv"}"\noutput_dir = "out"\n[bias]\n'
                    f'model = "{bias_data}/she.py:clf"\npairs = ["he,she"]\nk = 0\ncontrol = "auto"\n')
    r = cli("run", str(path), "--json")
    assert r.exit_code == 0, r.output
    from textaudit.formats.jsonl import read_header

    assert read_header(tmp_path / "out" / "bias.jsonl")["config"]["controls"] == {"he,she": "this,that"}
    path.write_text(path.read_text().replace('control = "auto"', 'control = "he,it"'))
    r = cli("run", str(path))
    assert r.exit_code == 2 and "shares a word with the pair" in r.output, r.output


# -- hit@k on an endpoint that samples its answers ---------------------------------------------------------------
SAMPLING_PROMPT = ('template = "Review: {text}\\nSentiment:"\n[labels]\nnegative = ["negative"]\npositive = ["positive"]\n'
                   '[endpoint]\nmodel = "sampler"\n')


def completions_server(answer):
    """An OpenAI-compatible completions server on 127.0.0.1 without log-probabilities: each prompt's completion is
    ``answer(text, body)`` (the review text the prompt holds, the request's JSON body)."""
    import re
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Completions(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
            choices = [{"index": i, "text": answer(re.search(r"Review: (.*)\nSentiment:$", p, re.S).group(1), body)}
                       for i, p in enumerate(prompts)]
            blob = json.dumps({"choices": choices}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(blob)))
            self.end_headers()
            self.wfile.write(blob)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Completions)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def _sampling_server():
    """A completions server that samples its answer: "positive" with probability 0.3 for a text ending in " b", 0.7
    for a text holding "movie", else "negative"; each draw seeded by the request's seed and the text, as a server
    honouring ``seed`` is."""
    import random

    def answer(text: str, body: dict) -> str:
        q = 0.3 if text.endswith(" b") else 0.7 if "movie" in text.split() else 0.0
        return " positive" if random.Random(f"{body.get('seed')}|{text}").random() < q else " negative"

    return completions_server(answer)


@pytest.fixture(scope="module")
def sampler(tmp_path_factory):
    srv = _sampling_server()
    d = tmp_path_factory.mktemp("sampler")
    (d / "prompt.toml").write_text(SAMPLING_PROMPT)
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1/completions", d / "prompt.toml"
    srv.shutdown()
    srv.server_close()


def test_replayed_findings_on_a_sampling_endpoint_give_hit_at_k(planted, sampler, cli, tmp_path):
    """Each x̃ ⊕ p answers class 1 with probability 0.3: hit@5 = 1 − 0.7⁵ ≈ 0.832 lies in its interval, and each
    finding's flips are its draws naming class 1."""
    from textaudit.findings import read_findings
    from textaudit.formats.jsonl import write_results
    from textaudit.stats import hit_at_k

    url, prompt = sampler
    found = [f for f in read_findings([planted / "found.jsonl"])][:150]
    write_results(tmp_path / "f.jsonl", [{"id": f.id, "status": "success", "method": "so-enum", "text": f.text,
                                          "label": 0, "vulnerable": f.vulnerable, "vulnerable_patched": f.vulnerable_patched,
                                          "pair": ["a", "b"], "l0": 0, "seconds": 0.0, "queries": 2} for f in found],
                  command="attack", config={"method": "so-enum", "model": "x"})
    r = cli("replay", str(tmp_path / "f.jsonl"), "--model", url, "--prompt-file", str(prompt), "--scores", "labels",
            "--samples", "20", "--json", "--output", str(tmp_path / "r.jsonl"))
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    s = out["sampled"]
    assert s["findings"] == 150 and s["draws"] == 20
    lo, hi = s["hit_at_k_ci95"]["5"]
    assert lo <= 1 - 0.7 ** 5 <= hi and hi - lo < 0.1
    lo, hi = s["flip_rate_ci95"]
    assert lo <= 0.3 <= hi
    recs = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()[1:]]
    for x in recs[:20]:  # the flips are the draws of x̃ ⊕ p that name class 1
        assert x["flips"] == round(x["probs"][1][1] * 20) and x["draws"] == 20
    assert s["hit_at_k"]["5"] == pytest.approx(np.mean([hit_at_k(20, x["flips"], 5) for x in recs]), abs=1e-4)
    assert s["hit_at_k"]["20"] > s["hit_at_k"]["5"] > s["hit_at_k"]["1"] == pytest.approx(s["flip_rate"], abs=1e-4)
    r = cli("replay", str(tmp_path / "f.jsonl"), "--model", url, "--prompt-file", str(prompt), "--scores", "labels",
            "--samples", "20")
    assert r.exit_code == 0 and "hit@5" in r.output and f"{s['hit_at_k']['5']}" in r.output, r.output


def test_an_attack_on_a_sampling_endpoint_states_hit_at_k_of_its_findings(bias_data, sampler, cli, tmp_path):
    url, prompt = sampler
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(f"0\tthe film was {a} .\n" for a in ADJ[:4]))
    (tmp_path / "pairs.txt").write_text("film,movie\n")
    r = cli("attack", "--model", url, "--prompt-file", str(prompt), "--scores", "labels", "--samples", "10",
            "--data", str(tmp_path / "d.tsv"), "--method", "so-enum", "--k", "1", "--mlm", str(bias_data / "mlm"),
            "--pairs-file", str(tmp_path / "pairs.txt"), "--no-ppl", "--json", "--output", str(tmp_path / "a.jsonl"),
            "--naturalness", "off")  # the paper's search: bias_data's masked LM is a tiny random one
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    recs = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()[1:]]
    wins = [x for x in recs if x["status"] == "success"]
    assert len(wins) == out["success"] > 0 and all(x["draws"] == 10 and 5 < x["flips"] <= 10 for x in wins)
    from textaudit.stats import hit_rates

    assert out["sampled"] == hit_rates([x["flips"] for x in wins], 10)


# -- calibration under perturbation -----------------------------------------------------------------------------
def test_ece_and_brier_by_hand_and_against_scikit_learn():
    from sklearn.metrics import brier_score_loss

    from textaudit.stats import calibration

    probs = [[0.9, 0.1], [0.22, 0.78], [0.62, 0.38], [0.3, 0.7]]
    labels = [0, 1, 1, 1]
    c = calibration(probs, labels, bins=5)
    # bin (0.6, 0.8]: 0.78 right, 0.62 wrong, 0.7 right: |2/3 − 0.7| · 3/4; bin (0.8, 1]: 0.9 right: |1 − 0.9| · 1/4
    assert c["ece"] == pytest.approx(abs(2 / 3 - 0.7) * 3 / 4 + 0.1 / 4, abs=1e-6)
    assert c["brier"] == pytest.approx((0.02 + 0.0968 + 0.7688 + 0.18) / 4, abs=1e-6)
    # for two classes the multi-class Brier score is twice scikit-learn's binary one
    assert c["brier"] == pytest.approx(2 * brier_score_loss(labels, [p[1] for p in probs]), abs=1e-6)
    assert (c["accuracy"], c["confidence"]) == (0.75, pytest.approx(0.75, abs=1e-6))
    assert [r["n"] for r in c["reliability"]] == [0, 0, 0, 3, 1]


CALIBRATED = '''
import zlib
def clf(texts):  # P(positive) = a fixed function of the exact text: the data's labels are drawn from it
    out = []
    for t in texts:
        p = 0.05 + 0.9 * (zlib.crc32(t.encode()) % 1000) / 1000
        out.append([1 - p, p])
    return out
'''


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """3,000 texts whose labels are drawn from the planted model's own P(positive): it is calibrated."""
    import zlib

    d = tmp_path_factory.mktemp("calibrated")
    (d / "model.py").write_text(CALIBRATED)
    rng = np.random.default_rng(0)
    texts = [f"sample number {i} of the planted set" for i in range(3000)]
    p = np.array([0.05 + 0.9 * (zlib.crc32(t.encode()) % 1000) / 1000 for t in texts])
    labels = (rng.random(len(texts)) < p).astype(int)
    (d / "data.tsv").write_text("label\ttext\n" + "".join(f"{y}\t{t}\n" for y, t in zip(labels, texts)))
    return d


def test_a_calibrated_model_has_ece_near_0_and_loses_it_where_the_perturbation_breaks_it(calibrated, cli, tmp_path):
    """ECE of the calibrated planted model is within its binning error; butter-fingers typos change every text's
    score (the model reads the exact text) while the label stays: its calibration is lost, and the paired
    difference's interval says so."""
    r = cli("evaluate", "--model", f"{calibrated}/model.py:clf", "--data", str(calibrated / "data.tsv"),
            "--perturbed", "butter_fingers_perturbation", "--bins", "10", "--plot", str(tmp_path / "plots"), "--json")
    assert r.exit_code == 0, r.output
    c = json.loads(r.stdout.strip().splitlines()[-1])["calibration"]
    o = c["original"]
    # the sampling error of a calibrated model's ECE: Σ_b (n_b / n) · sd(acc_b) with sd = √(conf_b (1 − conf_b) / n_b)
    binning = sum(b["n"] / o["n"] * math.sqrt(b["confidence"] * (1 - b["confidence"]) / b["n"])
                  for b in o["reliability"] if b["n"])
    assert o["ece"] <= 2 * binning and binning < 0.03
    assert c["changed"] > 2000 and c["perturbed"]["ece"] > 0.15  # typos reach about 3 texts in 4
    assert c["difference"]["ece_ci95"][0] > 0.1 and c["difference"]["brier_ci95"][0] > 0
    assert (tmp_path / "plots" / "reliability.png").stat().st_size > 10_000
    r = cli("evaluate", "--model", f"{calibrated}/model.py:clf", "--data", str(calibrated / "data.tsv"),
            "--perturbed", "butter_fingers_perturbation", "--limit", "300")
    assert r.exit_code == 0 and "ECE" in r.output and "Brier score" in r.output, r.output


def test_calibration_on_an_attacks_findings_and_on_masked_lm_neighbours(planted, bias_data, cli):
    r = cli("evaluate", "--model", f"{planted}/base.py:clf", "--data", str(bias_data / "data.tsv"),
            "--perturbed", str(planted / "found.jsonl"), "--json")
    assert r.exit_code == 2 and "label" in r.output  # data without labels: evaluate needs them
    (planted / "labels.tsv").write_text("label\ttext\n0\titem 0 a\n")
    r = cli("evaluate", "--model", f"{planted}/base.py:clf", "--data", str(planted / "labels.tsv"),
            "--perturbed", str(planted / "found.jsonl"), "--json")
    assert r.exit_code == 0, r.output
    c = json.loads(r.stdout.strip().splitlines()[-1])["calibration"]
    # 1,000 findings of label 0: every x̃ is answered 0 at 0.8; x̃ ⊕ p is answered 1 at 0.8 for the 500 even ones
    assert c["n"] == N and c["original"]["accuracy"] == 1.0 and c["perturbed"]["accuracy"] == 0.5
    assert c["original"]["ece"] == pytest.approx(0.2, abs=1e-6) and c["perturbed"]["ece"] == pytest.approx(0.3, abs=1e-6)
    from textaudit.robustness.calibration import perturb

    texts = ["he said the film was deep .", "the story was slow ."]
    a = perturb(texts, "neighbors", seed=3, mlm=str(bias_data / "mlm"))
    assert a == perturb(list(reversed(texts)), "neighbors", seed=3, mlm=str(bias_data / "mlm"))[::-1]  # per text
    assert all(len(x.split()) == len(t.split()) and sum(u != v for u, v in zip(x.split(), t.split())) <= 1
               for x, t in zip(a, texts))


@pytest.mark.parametrize("extra, message", [
    (["--perturbed", "nonsense"], "is neither a results file nor a method"),
    (["--perturbed", "shuffle_word", "--bins", "0"], "--bins"),
])
def test_bad_calibration_options_are_one_line(calibrated, cli, extra, message):
    r = cli("evaluate", "--model", f"{calibrated}/model.py:clf", "--data", str(calibrated / "data.tsv"), *extra)
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output


def test_calibration_records_read_back_and_drawn_in_the_report(calibrated, cli, tmp_path):
    out_file = tmp_path / "cal.jsonl"
    args = ["evaluate", "--model", f"{calibrated}/model.py:clf", "--data", str(calibrated / "data.tsv"),
            "--perturbed", "random_upper_transformation", "--limit", "400"]
    r = cli(*args, "--output", str(out_file), "--json")
    assert r.exit_code == 0, r.output
    c = json.loads(r.stdout.strip().splitlines()[-1])["calibration"]
    from textaudit.results import load

    back = load(out_file).summary()
    assert {k: back[k] for k in ("original", "perturbed", "difference", "n", "changed")} == \
        {k: c[k] for k in ("original", "perturbed", "difference", "n", "changed")}
    r = cli("report", str(out_file), "--out", str(tmp_path / "r.html"))
    assert r.exit_code == 0, r.output
    page = (tmp_path / "r.html").read_text()
    assert "Calibration of model.py:clf under perturbation" in page and "Reliability diagram" in page
    assert page.count("data:image/png;base64") >= 1 and f"{c['perturbed']['ece']:.4f}" in page
    r = cli(*args, "--output", str(out_file))
    assert r.exit_code == 2 and "Traceback" not in r.output  # never over a results file
    # without --perturbed, --output keeps the predictions (#65): another kind, read back as such
    r = cli("evaluate", "--model", f"{calibrated}/model.py:clf", "--data", str(calibrated / "data.tsv"),
            "--output", str(tmp_path / "x.jsonl"))
    assert r.exit_code == 0, r.output
    from textaudit.kinds import kind_of

    kinds = [kind_of({"command": x.command, "config": x.config}).id for x in (load(tmp_path / "x.jsonl"), load(out_file))]
    assert kinds == ["metrics", "evaluate"]


def test_a_suite_compare_gate_on_planted_cells(tmp_path):
    """[compare] margin: each later model's success rate and accuracy against the first model's, at the margin."""
    from textaudit.attacks.compare import compare_cells
    from textaudit.suite import check_thresholds, load_suite

    def cell(successes: set[int], wrong: set[int]) -> list[dict]:
        return [{"id": str(i), "status": "success" if i in successes else "failed", "k": 2, "l0": 1, "seconds": 0.0,
                 "queries": 1, "label": 1, "prediction": 0 if i in wrong else 1} for i in range(N)]

    base = set(range(0, N, 2))
    cells = {("a", "so-beam"): cell(base, set()), ("b", "so-beam"): cell(base | REGRESSED, set(range(10)))}
    for margin, passed in ((0.02, True), (0.005, False)):
        path = tmp_path / f"s{margin}.toml"
        path.write_text(f'[compare]\nmodels = ["a", "b"]\nmethods = ["so-beam"]\nmargin = {margin}\n')
        suite = load_suite(path)
        results = {"compare": compare_cells(cells, margin=margin)}
        checks = check_thresholds(suite, results)
        assert [c.name for c in checks] == ["compare.so-beam.b.vs_a.harm_ci_high", "compare.accuracy.b.vs_a.harm_ci_high"]
        assert [c.passed for c in checks] == [passed, passed]
        acc = results["compare"]["accuracy"][0]["non_inferiority"]
        assert (acc["harm"], acc["harmful"], acc["higher_is_worse"]) == (0.01, 10, False)
    (tmp_path / "one.toml").write_text('[compare]\nmodels = ["a"]\nmethods = ["so-beam"]\nmargin = 0.02\n')
    from textaudit.errors import TextAuditError

    with pytest.raises(TextAuditError, match="margin needs two models or more"):
        load_suite(tmp_path / "one.toml")


def test_audit_compare_with_a_margin_prints_both_tests(cli, tmp_path):
    """A real compare run (Genetic, two plug-in models, four sentences): the success rate and the accuracy of the
    second model tested against the first's, in --json and in the tables."""
    from test_report import ROBUST, WEAK

    for name, code in (("weak", WEAK), ("robust", ROBUST)):
        (tmp_path / f"{name}.py").write_text(code)
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(
        f"1\t{t}\n" for t in ("a deep and meaningful film .", "the film is long but good .", "one more film that is deep .",
                              "a warm and funny film here .")))
    args = ["compare", "--models", f"{tmp_path}/weak.py:clf,{tmp_path}/robust.py:clf", "--methods", "genetic",
            "--data", str(tmp_path / "d.tsv"), "--output-dir", str(tmp_path / "cmp"), "--margin", "0.3"]
    r = cli(*args, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    (p,) = out["paired"]
    t = p["non_inferiority"]
    assert p["a"].startswith(f"{tmp_path}/weak.py") and t["rate_before"] == p["rate_a"] and t["rate_after"] == p["rate_b"]
    assert t["harm"] == pytest.approx(p["rate_b"] - p["rate_a"], abs=1e-6) and out["accuracy"][0]["non_inferiority"]["n"] == 4
    r = cli(*args)  # the cells are reused: the tables only
    assert r.exit_code == 0 and "non-inferiority of the success rate at m = 0.3" in r.output, r.output
    assert "non-inferiority of the error rate (1 − accuracy)" in r.output


def test_calibration_on_findings_of_another_task_is_one_line(planted, cli, tmp_path):
    """Findings whose label the model has no class for (another task's): one line, not an IndexError."""
    from textaudit.formats.jsonl import write_results

    write_results(tmp_path / "other.jsonl", [{"id": "0", "status": "success", "method": "genetic", "text": "item 0 a",
                                              "label": 4, "vulnerable": "item 0 b", "l0": 1, "seconds": 0.0,
                                              "queries": 2}], command="attack", config={"method": "genetic", "model": "x"})
    (tmp_path / "d.tsv").write_text("label\ttext\n0\titem 0 a\n")
    r = cli("evaluate", "--model", f"{planted}/base.py:clf", "--data", str(tmp_path / "d.tsv"),
            "--perturbed", str(tmp_path / "other.jsonl"))
    assert r.exit_code == 2 and "has label 4, but model base.py:clf has 2 classes" in r.output, r.output
    assert "Traceback" not in r.output
