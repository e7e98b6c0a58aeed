"""Shards (``--shard i/N``) and ``audit merge``: shards never overlap, cover everything, and merged
they give the serial run's records and summary."""

from __future__ import annotations

import json

import pytest
from test_bias import TEXTS, planted

from textaudit.errors import TextAuditError
from textaudit.fairness import CounterfactualBias, run_bias
from textaudit.fairness.bias import estimates_from_records
from textaudit.merge import merge_results, summarize_records
from textaudit.results import read_header, read_jsonl
from textaudit.shards import in_shard, parse_shard

VOLATILE = ("seconds", "queries", "ppl_seconds")


def _stable(records):
    return sorted((json.dumps({k: v for k, v in r.items() if k not in VOLATILE}, sort_keys=True) for r in records))


def test_shards_partition_the_ids_whatever_their_order():
    ids = [f"sst2:dev:{i}" for i in range(500)]
    parts = [[j for j in ids if in_shard(j, (i, 3))] for i in range(3)]
    assert sorted(sum(parts, [])) == sorted(ids) and all(60 < len(p) < 280 for p in parts)
    assert [j for j in reversed(ids) if in_shard(j, (1, 3))] == list(reversed(parts[1]))
    assert parse_shard("1/3") == (1, 3) and parse_shard(None) is None
    for bad in ("3/3", "1", "-1/2", "a/b", "0/0"):
        with pytest.raises(TextAuditError, match="--shard must be i/N"):
            parse_shard(bad)


GOOD = "def clf(texts):\n    return [[0.9, 0.1] if 'movie' in t.split() else [0.1, 0.9] for t in texts]\n"


def test_cli_shards_merged_equal_the_serial_run(cli, tmp_path):
    (tmp_path / "p.py").write_text(GOOD)
    rows = ["a deep and meaningful film .", "the film is good .", "good film and good actors .",
            "a film about a family .", "one more film that works .", "the plot of the film is thin ."]
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(f"1\t{r}\n" for r in rows))
    base = ["attack", "--model", f"{tmp_path}/p.py:clf", "--method", "genetic", "--data", str(tmp_path / "d.tsv"),
            "--no-ppl", "--json"]
    r = cli(*base, "--output", str(tmp_path / "serial.jsonl"))
    assert r.exit_code == 0, r.output
    serial = json.loads(r.stdout.splitlines()[-1])
    for i in (0, 1):
        r = cli(*base, "--shard", f"{i}/2", "--output", str(tmp_path / f"part{i}.jsonl"))
        assert r.exit_code == 0, r.output
        assert read_header(tmp_path / f"part{i}.jsonl")["shard"] == f"{i}/2"
    sizes = [len(read_jsonl(tmp_path / f"part{i}.jsonl")) for i in (0, 1)]
    assert sum(sizes) == len(rows) and min(sizes) >= 1
    # a shard resumed as another shard is refused
    r = cli(*base, "--shard", "1/2", "--output", str(tmp_path / "part0.jsonl"), "--resume")
    assert r.exit_code == 2 and "shard: 0/2 → 1/2" in r.stderr
    r = cli("merge", str(tmp_path / "all.jsonl"), str(tmp_path / "part0.jsonl"), str(tmp_path / "part1.jsonl"),
            str(tmp_path / "part0.jsonl"), "--json")  # a shard given twice adds nothing
    assert r.exit_code == 0, r.output
    merged = json.loads(r.stdout.splitlines()[-1])
    assert _stable(read_jsonl(tmp_path / "all.jsonl")) == _stable(read_jsonl(tmp_path / "serial.jsonl"))
    for key in ("n", "attacked", "success", "failed", "skipped", "success_rate", "mean_l0", "method", "k"):
        assert merged[key] == serial[key], key
    header = read_header(tmp_path / "all.jsonl")
    assert "shard" not in header and header["shards"] == ["0/2", "1/2"]
    # the merged file resumes as the whole run: nothing left to do
    r = cli(*base, "--output", str(tmp_path / "all.jsonl"), "--resume")
    assert r.exit_code == 0 and json.loads(r.stdout.splitlines()[-1])["n"] == len(rows)
    # one shard alone: a warning says what is missing
    r = cli("merge", str(tmp_path / "half.jsonl"), str(tmp_path / "part1.jsonl"))
    assert r.exit_code == 0 and "warning: shard 0/2 missing" in r.stderr


def test_merge_refuses_shards_of_different_runs(cli, tmp_path):
    (tmp_path / "p.py").write_text(GOOD)
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta deep and meaningful film .\n1\tgood film .\n")
    base = ["attack", "--model", f"{tmp_path}/p.py:clf", "--method", "genetic", "--data", str(tmp_path / "d.tsv"), "--no-ppl"]
    assert cli(*base, "--shard", "0/2", "--output", str(tmp_path / "a.jsonl")).exit_code == 0
    assert cli(*base, "--shard", "1/2", "--seed", "3", "--output", str(tmp_path / "b.jsonl")).exit_code == 0
    r = cli("merge", str(tmp_path / "m.jsonl"), str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"))
    assert r.exit_code == 2 and "was written with other settings" in r.stderr and "seed: 0 → 3" in r.stderr
    assert not (tmp_path / "m.jsonl").exists()
    r = cli("merge", str(tmp_path / "m.jsonl"), str(tmp_path / "nope.jsonl"))
    assert r.exit_code == 2 and r.stderr.strip().endswith("nope.jsonl does not exist")


def test_bias_shards_merged_give_the_serial_estimates(tiny_mlm, tmp_path):
    mk = lambda: CounterfactualBias(planted(1.0), tiny_mlm, kappa=4, delta=1e9, enumerate_k=1, sample=20)  # noqa: E731
    serial = run_bias(mk(), [("he", "she")], 2, TEXTS, output=tmp_path / "s.jsonl", progress=False)
    for i in (0, 1):
        run_bias(mk(), [("he", "she")], 2, TEXTS, output=tmp_path / f"b{i}.jsonl", progress=False, shard=(i, 2))
    header, records = merge_results(tmp_path / "m.jsonl", [tmp_path / "b0.jsonl", tmp_path / "b1.jsonl"])
    assert _stable(records) == _stable(read_jsonl(tmp_path / "s.jsonl"))
    merged = estimates_from_records(records, 2, 1)["she1.0"][("he", "she")]
    for kk, e in serial["she1.0"][("he", "she")].items():
        # F is written with 6 decimals, so B read back agrees to 1e-6 (as a resumed run does)
        assert merged[kk].B == pytest.approx(e.B, abs=1e-6) and merged[kk].n == e.n and merged[kk].sources == e.sources
    assert summarize_records(header, records)["pairs"][0]["by_k"]["2"]["B"] == pytest.approx(
        serial["she1.0"][("he", "she")][2].B, abs=1e-6)
