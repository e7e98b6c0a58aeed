"""#85: the headline counts every input. An attack's skipped inputs (no synonym fits, already misclassified …) and
failed searches count as *not found*: the summary, the table, ``--json``, the report, the compare matrix, the suite
gates and ``results.load`` give the share of every input with a finding, its interval and the skips by reason, and
any rate over a subset (the success rate, over the attacked) says its subset where it is shown."""

from __future__ import annotations

import json

import pytest

from textaudit.stats import wilson

KEYWORDS = '''
import numpy as np
POS = {"good", "great", "fine", "nice", "fun"}

def clf(texts):  # positive exactly when a word of POS is in the text
    return np.array([[0.1, 0.9] if POS & set(t.lower().split()) else [0.9, 0.1] for t in texts])
clf.labels = ["negative", "positive"]
'''
#: two found (a synonym of "good"/"great" flips them), one skipped for want of any substitutable word, one skipped
#: because the model already misclassifies it: found for 2 of 4, though the success rate over the attacked is 1.0
ROWS = [("this is a good film", 1), ("a great movie", 1), ("xyzzy plugh", 0), ("this is a bad film", 1)]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("headline")
    (d / "m.py").write_text(KEYWORDS)
    (d / "d.tsv").write_text("text\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in ROWS))
    return d


def _attack(cli, world, out):
    r = cli("attack", "--model", f"{world}/m.py:clf", "--method", "genetic", "--data", str(world / "d.tsv"), "--no-ppl",
            "--output", str(out), "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_skipped_inputs_count_against_the_headline_in_the_summary_and_results_load(world, cli, tmp_path):
    s = _attack(cli, world, tmp_path / "a.jsonl")
    assert (s["n"], s["attacked"], s["success"], s["skipped"]) == (4, 2, 2, 2)
    assert s["success_rate"] == 1.0  # over the attacked: what the headline used to be
    assert s["found_share"] == 0.5 and s["found_share_ci95"] == list(wilson(2, 4))
    assert s["skip_reasons"] == {"already misclassified": 1, "no substitutable word": 1}
    assert s["headline"] == ("found for 2 of 4 inputs (50.0%) [15.0, 85.0]; 2 skipped: already misclassified (1), "
                             "no substitutable word (1)")
    from textaudit.results import load

    again = load(tmp_path / "a.jsonl").summary()
    assert {k: again[k] for k in ("found_share", "found_share_ci95", "skip_reasons", "headline")} == \
        {k: s[k] for k in ("found_share", "found_share_ci95", "skip_reasons", "headline")}


def test_the_table_says_every_rate_over_what(world, cli, tmp_path):
    r = cli("attack", "--model", f"{world}/m.py:clf", "--method", "genetic", "--data", str(world / "d.tsv"), "--no-ppl")
    assert r.exit_code == 0, r.output
    out = " ".join(r.stdout.split())
    assert "found for 2 of 4 inputs (50.0%) [15.0, 85.0]; 2 skipped" in out
    assert "0.5 (of all 4 inputs)" in out and "1.0 (of the 2 attacked only)" in out  # each rate beside its subset


def test_the_report_leads_with_every_input(world, cli, tmp_path):
    from textaudit.report import render_report

    _attack(cli, world, tmp_path / "a.jsonl")
    md = render_report([tmp_path / "a.jsonl"], "md").replace("\\[", "[").replace("\\]", "]")  # Markdown's escapes
    assert "found for 2 of 4 inputs (50.0%) [15.0, 85.0]" in md
    assert "| success rate (of the 2 attacked only) | 1.0 |" in md
    assert "already misclassified (1); no substitutable word (1)" in md
    # the summary table's headline row, too
    assert "found for 2 of 4 inputs (50.0%) [15.0, 85.0]; 2 skipped: already misclassified (1), no substitutable word " \
           "(1); success rate 1" in md


def test_the_compare_matrix_and_the_suite_gates_count_every_input(world, cli, tmp_path):
    r = cli("compare", "--models", f"{world}/m.py:clf", "--methods", "genetic", "--data", str(world / "d.tsv"),
            "--output-dir", str(tmp_path / "cmp"), "--no-ppl", "--json")
    assert r.exit_code == 0, r.output
    (cell,) = json.loads(r.stdout.strip().splitlines()[-1])["cells"]
    assert cell["found_share"] == 0.5 and cell["success_rate"] == 1.0 and cell["skipped"] == 2
    table = cli("compare", "--models", f"{world}/m.py:clf", "--methods", "genetic", "--data", str(world / "d.tsv"),
                "--output-dir", str(tmp_path / "cmp"), "--no-ppl")
    assert table.exit_code == 0 and "found for [95% CI], of every input" in table.stdout
    assert "0.50 [0.15, 0.85]" in table.stdout
    from textaudit.report import render_report

    md = render_report([tmp_path / "cmp"], "md").replace("\\[", "[").replace("\\]", "]")
    assert "Found for [95% CI], of every input" in md and "0.50 [0.15, 0.85]" in md

    def suite(gate: str) -> int:
        (tmp_path / "s.toml").write_text(
            f'[suite]\nname = "h"\ndata = "{world / "d.tsv"}"\noutput_dir = "{tmp_path / "out"}"\n'
            f'[attack]\nmodel = "{world}/m.py:clf"\nmethod = "genetic"\nppl = false\n[thresholds]\n{gate}\n')
        return cli("run", str(tmp_path / "s.toml")).exit_code

    assert suite("attack.success_rate_max = 0.9") == 1  # 1.0 over the attacked: fails
    assert suite("attack.found_share_max = 0.6") == 0  # 0.5 of every input: passes
    assert suite("attack.found_share_ci_high_max = 0.8") == 1  # its interval's upper end 0.85: fails
