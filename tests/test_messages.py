"""Messages a newcomer reads: interrupt hints, --help, doctor's sources, undefined correlations."""

from __future__ import annotations

import json
import warnings

from textaudit.cli.app import INTERRUPT_HINT, INTERRUPT_NO_OUTPUT, interrupt_hint
from textaudit.perturbations.noise import NOISE_PERTURBATIONS
from textaudit.stats import rank_correlation, round_p


def test_interrupt_hints_say_what_was_kept():
    assert interrupt_hint(["attack", "--model", "cnn", "--output", "r.jsonl"]) == INTERRUPT_HINT
    assert interrupt_hint(["bias", "--pair", "he,she", "-o", "b.jsonl"]) == INTERRUPT_HINT
    assert interrupt_hint(["attack", "--model", "cnn"]) == INTERRUPT_NO_OUTPUT
    assert "--resume" not in interrupt_hint(["train", "--model", "cnn"])  # train has no --resume: a rerun resumes
    assert "run the same command again" in interrupt_hint(["train-mlm", "--steps", "4"])
    assert interrupt_hint(["predict", "--model", "cnn", "a film"]) == "nothing to keep"


def test_help_shows_no_bool_type_on_flags_and_lists_the_perturbations(cli):
    for command in (["attack"], ["bias"], ["learnability"], ["perturbscore", "build"]):
        out = cli(*command, "--help").output
        assert "--json" in out and "<bool>" not in out
    out = cli("learnability", "--help").output.replace("│", " ")
    assert all(name in " ".join(out.split()) for name in NOISE_PERTURBATIONS)


def test_doctor_says_the_shipped_masked_lm_is_package_data(cli):
    r = cli("doctor", "--json", "--no-network")
    rows = {x["name"]: x for x in json.loads(r.stdout.strip().splitlines()[-1])["resources"]}
    assert rows["minilm-mlm"]["source"] == "package"


def test_undefined_correlations_say_why_without_a_raw_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning scipy raised would fail here
        flat = rank_correlation([0.0, 0.0, 0.0, 0.0], [0.1, 0.5, 0.2, 0.9])
        few = rank_correlation([1.0, 2.0], [2.0, 1.0])
    assert flat["rho"] is None and "constant" in flat["note"]
    assert few["rho"] is None and "2 points" in few["note"]
    ok = rank_correlation([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])
    assert ok["rho"] == 0.8 and ok["p"] == round_p(ok["p"]) and len(str(ok["p"])) <= 6
    assert round_p(0.10404082057734572) == 0.104


def test_a_model_that_answers_one_class_for_nearly_everything_is_said_by_evaluate(cli, tmp_path):
    """A model whose answers barely depend on the text (a chat endpoint ignoring the prompt, a broken plug-in) gets a
    warning from audit evaluate, in the summary too; a model that reads the text gets none."""
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(f"{i % 2}\t{'a fine' if i % 2 else 'a dull'} film {i} .\n"
                                                            for i in range(40)))
    (tmp_path / "m.py").write_text("def always(texts):\n    return [[0.9, 0.1] for t in texts]\n\n"
                                   "def reads(texts):\n    return [[0.2, 0.8] if 'fine' in t else [0.8, 0.2] for t in texts]\n")
    r = cli("evaluate", "--model", f"{tmp_path}/m.py:always", "--data", str(tmp_path / "d.tsv"), "--json")
    assert r.exit_code == 0, r.output
    said = [x for x in r.stderr.splitlines() if x.startswith("warning:")]
    assert said == ["warning: m.py:always answers '0' for 100% of the texts, which the data holds 50% of: its answers "
                    "barely depend on the text, and an audit of it says little"]
    assert json.loads(r.stdout.strip().splitlines()[-1])["warnings"] == said
    r = cli("evaluate", "--model", f"{tmp_path}/m.py:reads", "--data", str(tmp_path / "d.tsv"))
    assert r.exit_code == 0 and "warning" not in r.output and "1.0000" in r.stdout, r.output
