"""#83: RanMASK's certificate beside its authors' rule, one factor at a time (benchmarks/certify_rule.py) — the
rigorous rule recomputed from a run's records gives the run's own radii, and each factor of the authors' rule moves a
radius by the amount the theorem's arithmetic says."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import certify_rule  # noqa: E402

from textaudit.errors import TextAuditError  # noqa: E402
from textaudit.robustness.smoothing import ranmask_radius  # noqa: E402

# SST-2 dev's first sentence as the hardened MiniLM's run recorded it (n = 1,000 votes): 5 words, 6 tokens
CLICHES = {"id": "sst2:dev:0", "text": "one long string of cliches .", "label": 0, "prediction": 0, "abstain": False,
           "radius": 0, "p_a_lower": 0.884075, "n_a": 901, "votes": [901, 99], "words": 5, "kept": 2,
           "correct": True}


def test_beta_scales_the_bound_and_one_is_the_rigorous_radius():
    # h = 5, k = 2: Δ_1 = 1 − C(4, 2)/C(5, 2) = 0.4, Δ_2 = 0.7
    assert ranmask_radius(0.884075, 5, 2) == 0  # 0.884 − 0.4 < ½
    assert ranmask_radius(0.884075, 5, 2, beta=0.901) == 1  # 0.884 − 0.3604 > ½, 0.884 − 0.6307 < ½
    assert ranmask_radius(0.884075, 5, 2, beta=1.0) == ranmask_radius(0.884075, 5, 2)
    assert ranmask_radius(0.5, 5, 2, beta=0.1) is None  # no majority: abstain whatever β


@pytest.mark.parametrize("rule, radius", [
    ("ours", 0),
    ("+beta", 1),    # β = 0.901 (above)
    ("+h", 1),       # h = 6 tokens, k = 2: Δ_1 = 1 − 10/15 = 0.333 → 0.551; Δ_2 = 0.6 → no
    ("+k", 1),       # h = 5, k = 5 − round(4.5) = 1 (Python's round, as their code): Δ_1 = 0.2 → 0.684; Δ_2 = 0.4 → no
    ("+first", 1),   # the first uncertified d: 0 + 1
    ("bound", 2),    # h = 6, k = 1, β = 0.901: Δ_d = d/6 → 0.734, 0.584, 0.434
    ("authors", 3),  # and the first uncertified d
])
def test_each_factor_of_the_authors_rule_moves_the_radius_by_the_theorem(rule, radius):
    assert certify_rule.rule_radius(CLICHES, certify_rule.RULES[rule], 0.9) == radius


def test_a_wrong_or_abstaining_input_is_certified_under_no_rule():
    wrong = {**CLICHES, "prediction": 1, "correct": False}
    abstained = {**CLICHES, "abstain": True, "correct": False}
    for rule in certify_rule.RULES.values():
        assert certify_rule.rule_radius(wrong, rule, 0.9) is None
        assert certify_rule.rule_radius(abstained, rule, 0.9) is None


def test_on_a_real_run_the_rigorous_rule_gives_the_runs_radii_and_no_factor_lowers_one(cli, tmp_path):
    (tmp_path / "m.py").write_text(
        "def sees_dull(texts):\n    return [[0.8, 0.2] if 'dull' in t.split() else [0.2, 0.8] for t in texts]\n")
    rows = [(1, "a good film and a movie ."), (0, "a dull plot , dull acting and a dull , dull , dull ending ."),
            (0, "dull dull dull dull dull dull dull dull dull dull dull dull dull dull dull dull dull dull dull ."),
            (1, "one of the most moving and beautifully made films of the year , a joy to watch .")]
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(f"{y}\t{t}\n" for y, t in rows))
    run = tmp_path / "r.jsonl"
    r = cli("certify", "--model", f"{tmp_path}/m.py:sees_dull", "--method", "ranmask", "--data", str(tmp_path / "d.tsv"),
            "--samples", "300", "--selection", "30", "--neighbors", "0", "--output", str(run), "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    config, records = certify_rule.load(run)
    assert len(records) == 4
    for rec in records:  # the recomputation is the run's own certificate
        assert certify_rule.rule_radius(rec, certify_rule.RULES["ours"], 0.9) == (rec["radius"] if rec["correct"]
                                                                                  and not rec["abstain"] else None)
    rows_out = certify_rule.table(records, 0.9, [1, 2])
    ours = next(row for row in rows_out if row["rule"] == "ours")
    curve = {c["radius"]: c["certified_accuracy"] for c in summary["curve"]}
    assert ours["radius_1"][1] == pytest.approx(curve.get(1, 0.0), abs=1e-4)
    for rec in records:  # every factor is a looser rule: it never certifies less
        base = certify_rule.rule_radius(rec, certify_rule.RULES["ours"], 0.9)
        for rule in certify_rule.RULES.values():
            got = certify_rule.rule_radius(rec, rule, 0.9)
            assert (got is None) == (base is None) and (base is None or got >= base)
    # the file is read as every reader reads a certify file: a damaged record is refused, naming the line
    lines = run.read_text().splitlines()
    lines[2] = json.dumps({**json.loads(lines[2]), "id": 7})
    (tmp_path / "damaged.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(TextAuditError, match="damaged.jsonl:3: field 'id'"):
        certify_rule.load(tmp_path / "damaged.jsonl")
    # the all-"dull" sentence: 19 words, 20 tokens, p_A = 1 at every draw — the authors' rule certifies it further
    dull = next(rec for rec in records if rec["text"].startswith("dull dull"))
    assert certify_rule.rule_radius(dull, certify_rule.RULES["authors"], 0.9) > dull["radius"]


def test_the_script_refuses_a_run_of_another_method(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"header": {"command": "certify", "config": {"method": "safer"}}}) + "\n")
    with pytest.raises(SystemExit, match="safer run"):
        certify_rule.main([str(path)])
