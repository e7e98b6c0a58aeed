"""#63 (SILENT — settings that change records, missing from headers): everything that changes a record is in the
results header by content, so ``--resume`` under a changed one is refused in one line instead of mixing two runs.
Here the masked LM: another masked LM under the same name (a retrained checkpoint in the same folder) — the header
had its name only, and a resume mixed two neighbourhoods."""

from __future__ import annotations

import json

import pytest
from test_replay import write_world


@pytest.fixture
def work(tiny_mlm, tmp_path):
    return write_world(tmp_path, tiny_mlm)


def _retrain(tiny_mlm, where):
    """Another masked LM saved over the first, in the same folder (so under the same name)."""
    import torch
    from transformers import DistilBertConfig, DistilBertForMaskedLM

    torch.manual_seed(1)
    other = DistilBertForMaskedLM(DistilBertConfig(vocab_size=tiny_mlm.tokenizer.vocab_size, dim=32, hidden_dim=64,
                                                   n_layers=1, n_heads=2)).eval()
    other.save_pretrained(where)


COMMANDS = {
    "attack": lambda d: ["attack", "--model", f"{d}/weak.py:clf", "--method", "so-enum", "--k", "1", "--data",
                         str(d / "data.tsv"), "--mlm", str(d / "mlm"), "--no-ppl", "--store", "off"],
    "bias": lambda d: ["bias", "--pair", "he,she", "--model", f"{d}/she1.py:clf", "--data", str(d / "bias.tsv"), "--k",
                       "1", "--mlm", str(d / "mlm"), "--kappa", "5", "--delta", "1e9", "--store", "off"],
    "certify": lambda d: ["certify", "--model", f"{d}/weak.py:clf", "--method", "safer", "--data", str(d / "data.tsv"),
                          "--mlm", str(d / "mlm"), "--samples", "20", "--store", "off"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_resume_under_another_masked_lm_of_the_same_name_is_refused(command, work, tiny_mlm, cli):
    out = work / f"{command}.jsonl"
    args = COMMANDS[command](work)
    r = cli(*args, "--output", str(out))
    assert r.exit_code == 0, r.output
    config = json.loads(out.read_text().splitlines()[0])["header"]["config"]
    fingerprint = config["mlm_fingerprint"]
    assert isinstance(fingerprint, str) and len(fingerprint) >= 16 and config["mlm"]
    before = out.read_bytes()
    r = cli(*args, "--output", str(out), "--resume")  # the same masked LM: continued (nothing left to do)
    assert r.exit_code == 0, r.output
    _retrain(tiny_mlm, work / "mlm")
    r = cli(*args, "--output", str(out), "--resume")
    assert r.exit_code == 2 and "mlm_fingerprint" in r.output and "Traceback" not in r.output, r.output
    assert [x for x in r.output.splitlines() if x.startswith("error:")] == [r.output.strip().splitlines()[-1]]
    assert out.read_bytes()[:len(before)] == before  # nothing appended under the other masked LM


def test_a_file_written_before_the_fingerprint_was_recorded_still_resumes(work, cli):
    out = work / "old.jsonl"
    args = COMMANDS["attack"](work)
    assert cli(*args, "--output", str(out)).exit_code == 0
    lines = out.read_text().splitlines()
    header = json.loads(lines[0])
    del header["header"]["config"]["mlm_fingerprint"]
    out.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    r = cli(*args, "--output", str(out), "--resume")
    assert r.exit_code == 0, r.output


def test_a_resume_after_the_pairs_file_changed_is_refused(work, cli):
    """The patch words of ``--pairs-file`` are the threat model: the header holds their digest (the pairs, normalised
    as they are read), so a resume after the file changed is refused; the same pairs written otherwise resume."""
    pairs = work / "pairs.txt"
    pairs.write_text("film,movie\n")
    args = [*COMMANDS["attack"](work), "--pairs-file", str(pairs), "--output", str(work / "p.jsonl")]
    assert cli(*args).exit_code == 0
    assert json.loads((work / "p.jsonl").read_text().splitlines()[0])["header"]["config"]["pairs_digest"]
    pairs.write_text("# the same pair, written otherwise\nFilm\tMovie\n")
    r = cli(*args, "--resume")
    assert r.exit_code == 0, r.output
    pairs.write_text("film,movie\nfilm,picture\n")
    r = cli(*args, "--resume")
    assert r.exit_code == 2 and "pairs_digest" in r.output, r.output
