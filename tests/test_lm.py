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


@pytest.mark.slow
@pytest.mark.parametrize("side", ["left", "right"])
def test_a_texts_score_is_its_own_whatever_shares_its_batch_and_whichever_side_the_tokenizer_pads(side):
    """Some tokenizers pad on the left (SmolLM2's GGUF tokenizer under transformers 4.x does): a short text batched
    with a long one must still be scored from its own first token — not shifted by the padding, and its document
    prefix never scored as a token — so Genetic's LM rule and Table 3's perplexities do not depend on what else
    is asked at once (they were 11.6 nats off for the short text below before the positions were the row's own)."""
    from textaudit.lm import load_causal_lm

    lm = load_causal_lm(device="cpu")
    lm.tokenizer.padding_side = side
    texts = ["the film is good .", "an utterly long and winding sentence about nothing much at all here .", "ok ."]
    together = lm.log_likelihood(texts)
    lm.clear_cache()
    alone = [lm.log_likelihood([t])[0] for t in texts]
    assert together == pytest.approx(alone, abs=1e-3)
    lm.clear_cache()
    assert lm.perplexity(texts) == pytest.approx([lm.perplexity([t])[0] for t in texts], rel=1e-4)


@pytest.mark.parametrize("arch", ["llama", "bloom"])
def test_a_hub_causal_lm_scores_each_text_alone_with_or_without_position_ids(arch):
    """A tiny Llama (takes position_ids) and a tiny BLOOM (ALiBi: its forward takes none) behind a tokenizer that pads on
    the left: each text's log-likelihood is the same in a batch as alone — the first through positions counted from
    each row's own first token, the second by right-padded batches."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BloomConfig, BloomForCausalLM, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from textaudit.lm import CausalLM

    words = "the a film movie is was good bad very not at all .".split()
    vocab = {w: i for i, w in enumerate(["<pad>", "<|endoftext|>", "<unk>", *words])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<|endoftext|>", unk_token="<unk>",
                                  padding_side="left")
    torch.manual_seed(0)
    model = (LlamaForCausalLM(LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                          pad_token_id=0)) if arch == "llama" else
             BloomForCausalLM(BloomConfig(vocab_size=len(vocab), hidden_size=32, n_layer=2, n_head=4, pad_token_id=0)))
    lm = CausalLM(model.eval(), tok, arch, device="cpu")
    texts = ["the film is good .", "the movie was not very good at all , not at all .", "bad ."]
    together = lm.log_likelihood(texts)
    lm.clear_cache()
    assert together == pytest.approx([lm.log_likelihood([t])[0] for t in texts], abs=1e-4)
    assert tok.padding_side == ("left" if arch == "llama" else "right")
