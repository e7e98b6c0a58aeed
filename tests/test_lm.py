"""SmolLM2 perplexity: loaded only when there is work, its de-quantized weights cached, its time reported."""

from __future__ import annotations

import pytest
from test_attacks import PAIRS, X, _words_proposed, planted

from textaudit.attacks import PatchWords, SOBeam, run_attack
from textaudit.lm import LazyCausalLM, _dequantized_copy
from textaudit.resources import resolve


@pytest.mark.slow
def test_smollm2_loads_on_first_use_only_and_its_dequantized_copy_gives_the_same_perplexities(tiny_mlm, tmp_path):
    t = _words_proposed(tiny_mlm, X, 1)[0]
    clf = planted([t])

    def attack():
        return SOBeam(clf, k=2, mlm=tiny_mlm, kappa=5, delta=1e9, patch_words=PatchWords(clf, PAIRS),
                      naturalness=False)  # the paper's search: the tiny random masked LM knows no English

    out = tmp_path / "r.jsonl"
    first = LazyCausalLM()
    assert not first.loaded
    summary, records = run_attack(attack(), [X], [1], output=out, progress=False, ppl=first)
    assert records[0]["status"] == "success" and first.loaded
    assert records[0]["ppl_seconds"] >= first.load_seconds > 0
    assert summary["ppl_sec_per_example"] >= first.load_seconds
    assert (_dequantized_copy(resolve("smollm2")) / "model.safetensors").is_file()

    # a --resume with nothing left to do never loads the LM
    idle = LazyCausalLM()
    summary2, _ = run_attack(attack(), [X], [1], output=out, resume=True, progress=False, ppl=idle)
    assert not idle.loaded and summary2["success"] == 1

    # the next load reads the de-quantized copy: much faster, the same numbers
    again = LazyCausalLM()
    po, pp = again.perplexity([records[0]["text"], records[0]["vulnerable"]])
    assert (round(po, 3), round(pp, 3)) == (records[0]["ppl_original"], records[0]["ppl_perturbed"])
    assert again.load_seconds < first.load_seconds / 3
