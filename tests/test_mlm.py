"""Masked-LM interface: the real HuggingFace path on a tiny model, and the shipped minilm-mlm."""

from __future__ import annotations

import shutil

import pytest

from textaudit.errors import TextAuditError
from textaudit.neighborhoods.mlm import MaskedLM, load_mlm

SENT = "a deep and meaningful film .".split()


def _clean(cands):
    for per in cands:
        for w, logit in per:
            assert not w.startswith("##") and not (w.startswith("[") and w.endswith("]")), w
            assert isinstance(logit, float)


def test_tiny_hf_mlm_candidates_are_whole_words_best_first(tiny_mlm):
    assert isinstance(tiny_mlm, MaskedLM)
    out = tiny_mlm.candidates([(SENT, 3), (SENT, 0), (["unbelievably", "good"], 0)], top=20)
    assert [len(c) for c in out] == [20, 20, 20]
    _clean(out)
    for per in out:
        logits = [v for _, v in per]
        assert logits == sorted(logits, reverse=True)


def test_mask_matches_full_forward_and_caches(tiny_mlm):
    """The masked-positions-only head gives the same top-k as a full forward over every token."""
    import torch

    tok, model = tiny_mlm.tokenizer, tiny_mlm.model
    words = list(SENT)
    words[3] = tok.mask_token
    enc = tok(words, is_split_into_words=True, return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        logits = model(**enc).logits[0, (enc["input_ids"][0] == tok.mask_token_id)][0]
    logits[~torch.from_numpy(tiny_mlm._allowed)] = float("-inf")
    ref = [tok.convert_ids_to_tokens(int(i)) for i in logits.topk(10).indices]
    before = tiny_mlm.forwards
    got = [w for w, _ in tiny_mlm.candidates([(SENT, 3)], top=10)[0]]
    assert got == ref
    tiny_mlm.candidates([(SENT, 3)], top=10)
    assert tiny_mlm.forwards - before <= 1 and tiny_mlm.cache_hits >= 1


def test_batch_is_sorted_by_length_inside_but_answers_in_input_order(tiny_mlm):
    """Queries are grouped by length for less padding; each answer still belongs to its own query."""
    long = "an unusually long and winding sentence about a film that goes on and on and on".split()
    batch = [(long, 5), (SENT, 3), (["good"], 0), (long, 0), (SENT, 1)]
    tiny_mlm._cache.clear()
    together = tiny_mlm.candidates(batch, top=8)
    for q, got in zip(batch, together):
        tiny_mlm._cache.clear()
        alone = tiny_mlm.candidates([q], top=8)[0]
        assert [w for w, _ in got] == [w for w, _ in alone]
        assert [v for _, v in got] == pytest.approx([v for _, v in alone], abs=1e-4)


def test_position_out_of_range(tiny_mlm):
    with pytest.raises(TextAuditError, match="position 9 is outside"):
        tiny_mlm.candidates([(SENT, 9)])


def test_hf_masked_lm_from_local_dir(tiny_mlm, tmp_path):
    tiny_mlm.model.save_pretrained(tmp_path / "m")
    tiny_mlm.tokenizer.save_pretrained(tmp_path / "m")
    mlm = load_mlm(str(tmp_path / "m"), quiet=True)
    assert mlm.name == str(tmp_path / "m")
    assert [w for w, _ in mlm.candidates([(SENT, 3)], top=5)[0]] == \
        [w for w, _ in tiny_mlm.candidates([(SENT, 3)], top=5)[0]]
    with pytest.raises(TextAuditError, match="cannot load masked LM"):
        load_mlm(str(tmp_path / "nowhere-model"), quiet=True)


@pytest.fixture(scope="module")
def minilm_mlm():
    return load_mlm("minilm-mlm", quiet=True)


def test_default_mlm_is_minilm_offline_with_notice(capsys):
    mlm = load_mlm()
    assert mlm.name == "minilm-mlm"
    assert "masked LM in use: minilm-mlm" in capsys.readouterr().err


def test_minilm_mlm_predicts_sensible_words(minilm_mlm):
    probes = [("the movie was really [MASK] .", {"good", "bad", "great", "funny", "boring", "interesting"}),
              ("she opened the [MASK] and walked in .", {"door", "gate", "window"})]
    for text, expected in probes:
        words = text.split()
        top = [w for w, _ in minilm_mlm.candidates([(words, words.index("[MASK]"))], top=10)[0]]
        assert expected & set(top), (text, top)
    _clean(minilm_mlm.candidates([(SENT, i) for i in range(len(SENT))], top=20))


def test_corrupt_minilm_mlm_weights(tmp_path):
    from textaudit.neighborhoods.minilm_mlm import load_minilm_mlm
    from textaudit.resources import resolve

    bad = tmp_path / "minilm-mlm.safetensors"
    good = resolve("minilm-mlm").read_bytes()
    bad.write_bytes(good[:1000])
    with pytest.raises(TextAuditError, match="minilm-mlm weights .* are corrupt") as e:
        load_minilm_mlm(bad)
    assert "\n" not in str(e.value)
    shutil.copy(resolve("sst2") / "dev.tsv", bad)
    with pytest.raises(TextAuditError, match="corrupt"):
        load_minilm_mlm(bad)
