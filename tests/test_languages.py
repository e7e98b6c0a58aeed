"""Other languages: the Unicode word splitter, and neighbourhoods from SentencePiece (XLM-R,
CamemBERT) and byte-level BPE (RoBERTa) masked LMs — tiny random models built here, saved as
HuggingFace directories and loaded the way ``--mlm <dir-or-id>`` loads them."""

from __future__ import annotations

import json

import pytest

from textaudit.errors import TextAuditError
from textaudit.neighborhoods import NeighborhoodBuilder
from textaudit.neighborhoods.masked_lm import HFMaskedLM, word_table
from textaudit.sentence import Sentence, check_language, guess_language

FRENCH = "L'homme élégant arrive aujourd'hui à Paris, n'est-ce pas ?"
GERMAN = "Die Straße ist heute schön und ruhig, oder?"
WORDS = ("l le la un une homme femme chat film livre maison ville rue élégant heureuse beau belle grand petit "
         "rouge arrive mange dort lit aujourd'hui demain à Paris Lyon est ce pas très bien die der das ein eine "
         "Straße Stadt Haus Mann Frau Hund ist heute morgen schön groß klein ruhig laut und oder nicht sehr gut "
         "Mädchen Größe").split()


def _sentencepiece_dir(tmp, model_cls, config_cls, tokenizer_cls, name):
    """A tiny SentencePiece (Unigram + Metaspace) tokenizer whose vocabulary holds every word of
    WORDS as one ▁-piece (plus single characters for the rest), and a random masked LM over it."""
    import torch
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    chars = sorted({c for w in WORDS for c in w} | set(".,?!'-"))
    pieces = [(s, 0.0) for s in specials] + [("\u2581" + w, -2.0) for w in WORDS] + [("\u2581", -3.0)]
    pieces += [(c, -5.0) for c in chars]
    tok = Tokenizer(models.Unigram(pieces, unk_id=3, byte_fallback=False))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    fast = tokenizer_cls(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                         pad_token="<pad>", mask_token="<mask>", cls_token="<s>", sep_token="</s>")
    cfg = config_cls(vocab_size=len(fast), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=130, pad_token_id=fast.pad_token_id,
                     bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id)
    torch.manual_seed(0)
    out = tmp / name
    model_cls(cfg).save_pretrained(out)
    fast.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def xlmr_dir(tmp_path_factory):
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM, XLMRobertaTokenizerFast

    return _sentencepiece_dir(tmp_path_factory.mktemp("mlm"), XLMRobertaForMaskedLM, XLMRobertaConfig,
                              XLMRobertaTokenizerFast, "tiny-xlm-roberta")


@pytest.fixture(scope="module")
def camembert_dir(tmp_path_factory):
    from transformers import CamembertConfig, CamembertForMaskedLM, CamembertTokenizerFast

    return _sentencepiece_dir(tmp_path_factory.mktemp("mlm"), CamembertForMaskedLM, CamembertConfig,
                              CamembertTokenizerFast, "tiny-camembert")


# -- the splitter ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,language,tokens", [
    (FRENCH, "fr", ["L'", "homme", "élégant", "arrive", "aujourd'hui", "à", "Paris", ",", "n'", "est-ce", "pas", "?"]),
    ("Qu’il est beau, l’été !", "fr", ["Qu’", "il", "est", "beau", ",", "l’", "été", "!"]),
    (GERMAN, "de", ["Die", "Straße", "ist", "heute", "schön", "und", "ruhig", ",", "oder", "?"]),
    ("«Ceci» est ¿raro? ¡sí!", "es", ["«", "Ceci", "»", "est", "¿", "raro", "?", "¡", "sí", "!"]),
    ("dell'anno, un'altra volta", "it", ["dell'", "anno", ",", "un'", "altra", "volta"]),
    ("„Ja“, sagte sie – gut.", "de", ["„", "Ja", "“", ",", "sagte", "sie", "–", "gut", "."]),
    ("l'homme", "en", ["l'homme"]),  # English has no elision rule: the chunk stays whole
])
def test_unicode_splitter_round_trips(text, language, tokens):
    s = Sentence.parse(text, language)
    assert list(s.tokens) == tokens
    assert s.text() == text
    words = [t for t in s.tokens if t.isalpha()]
    assert all(w in tokens for w in words)


def test_english_tokenisation_is_unchanged_on_sst2_dev():
    """The Unicode rule peels what the old ASCII list peeled: SST-2 splits exactly as before (checked on
    all 70,042 sentences when it was written; dev here)."""
    import re

    from textaudit.data import load_dataset

    ascii_punct = "\"()[]{}<>.,!?;:…“”«»/\\*|`~"  # the splitter's peel list before it was Unicode-aware

    def old_rule(text: str) -> list[str]:
        toks = []
        for chunk in re.findall(r"\S+", text):
            lead, trail = len(chunk) - len(chunk.lstrip(ascii_punct)), len(chunk) - len(chunk.rstrip(ascii_punct))
            if lead == len(chunk):
                toks.append(chunk)
                continue
            toks += list(chunk[:lead]) + [chunk[lead:len(chunk) - trail]] + list(chunk[len(chunk) - trail:])
        return toks

    for t in load_dataset("sst2:dev")["text"]:
        s = Sentence.parse(t)
        assert s.text() == t and list(s.tokens) == old_rule(t)


def test_language_codes():
    assert check_language("FR") == "fr" and check_language(None) == "en"
    with pytest.raises(TextAuditError, match="not separated by spaces"):
        check_language("zh")
    with pytest.raises(TextAuditError, match="ISO 639-1"):
        check_language("french!")
    assert guess_language("camembert-base") == "fr"
    assert guess_language("deepset/gbert-base") == "de"
    assert guess_language("xlm-roberta-base") == "en"  # multilingual: --language says which
    assert guess_language(None) == "en"


# -- SentencePiece and byte-level BPE masked LMs ---------------------------------------------------------
@pytest.mark.parametrize("which", ["xlmr_dir", "camembert_dir"])
def test_sentencepiece_mlm_proposes_whole_words(request, which):
    path = request.getfixturevalue(which)
    mlm = HFMaskedLM.from_pretrained(str(path), device="cpu")
    assert mlm.scheme == "sentencepiece"
    allowed = {mlm.id_to_word[i] for i in range(len(mlm._allowed)) if mlm._allowed[i]}
    assert allowed == set(WORDS)  # every ▁-word, without its ▁; no bare characters, no specials
    cands = mlm.candidates([(["Die", "Straße", "ist", "schön"], 1)], top=10)[0]
    assert len(cands) == 10 and all(w in allowed and "\u2581" not in w for w, _ in cands)


@pytest.mark.parametrize("which,text,language", [("camembert_dir", FRENCH, "fr"), ("xlmr_dir", GERMAN, "de"),
                                                  ("xlmr_dir", FRENCH, "fr")])
def test_french_and_german_sentences_round_trip_through_the_builder(request, which, text, language):
    mlm = HFMaskedLM.from_pretrained(str(request.getfixturevalue(which)), device="cpu")
    b = NeighborhoodBuilder(mlm, language=language, kappa=5)
    x = b.parse(text)
    assert x.text() == text
    nbrs = b.neighbors(text, 1)
    positions = b.positions(x)
    assert len(nbrs) > 0 and len(nbrs) <= 5 * len(positions)
    for nb in nbrs:
        changed = x.diff(nb.sentence)
        assert len(changed) == 1 and changed[0] in positions
        i = changed[0]
        assert nb.sentence.tokens[i].lower() in {w.lower() for w in WORDS}  # a whole vocabulary word
        assert nb.sentence.tokens[i].isalpha()
        # the rest of the sentence, accents, elisions and spacing included, is the original's
        assert nb.sentence.replace(i, x.tokens[i]).text() == text
        assert nb.sentence.seps == x.seps
    if language == "fr":
        assert "L'" in x.tokens and all(nb.sentence.tokens[0] == "L'" for nb in nbrs)  # the elision never changes
        assert "aujourd'hui" not in [x.tokens[i] for i in positions]  # not alphabetic: never replaced


def test_byte_level_bpe_words_are_decoded(tmp_path):
    """RoBERTa-style byte-level BPE: word starts carry Ġ and bytes are mapped to symbols; candidates
    come back as Unicode words ("café", not "cafÃ©")."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    corpus = ["un café très chaud et une crème brûlée", "le thé est froid mais le café est bon"] * 50
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = RobertaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                pad_token="<pad>", mask_token="<mask>", cls_token="<s>", sep_token="</s>")
    torch.manual_seed(0)
    cfg = RobertaConfig(vocab_size=len(fast), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=130, pad_token_id=fast.pad_token_id)
    model = RobertaForMaskedLM(cfg)
    words, allowed, scheme = word_table(fast, len(fast))
    assert scheme == "bytelevel"
    kept = {words[i] for i in range(len(allowed)) if allowed[i]}
    assert "café" in kept and "brûlée" in kept and not any("Ã" in w for w in kept)
    mlm = HFMaskedLM(model, fast, name="tiny-roberta", device="cpu")
    nbrs = NeighborhoodBuilder(mlm, language="fr", kappa=4).neighbors("le thé est froid", 1)
    assert nbrs and all(nb.sentence.tokens[i] in kept for nb in nbrs for i in Sentence.parse("le thé est froid").diff(nb.sentence))


# -- the CLI --------------------------------------------------------------------------------------------
def test_neighbors_cli_with_a_camembert_directory(cli, camembert_dir):
    r = cli("neighbors", FRENCH, "--mlm", str(camembert_dir), "--k", "1", "--limit", "5", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["n"] == 5
    for nb in out["neighbors"]:
        (i, old, new), = nb["changed"]
        assert old != "L'" and new in WORDS
    # --language auto reads "camembert" in the name: French elisions split
    assert out["neighbors"][0]["text"].startswith("L'")


def test_attack_in_another_language_needs_pairs_file(cli, camembert_dir, tmp_path):
    data = tmp_path / "fr.csv"
    data.write_text("text,label\nle film est très beau,1\nla rue est petite,0\n")
    r = cli("attack", "--model", "bow", "--data", str(data), "--mlm", str(camembert_dir), "--k", "2")
    assert r.exit_code == 2 and "--pairs-file" in r.output and "English" in r.output
    r = cli("attack", "--model", "bow", "--data", str(data), "--language", "ja")
    assert r.exit_code == 2 and "not separated by spaces" in r.output


def test_french_attack_with_a_pairs_file(cli, camembert_dir, tmp_path):
    """A French audit end to end: CamemBERT-style neighbourhood, French elisions, French patch words."""
    plugin = tmp_path / "fr_model.py"
    plugin.write_text(
        "import numpy as np\n"
        "def classify(texts):\n"
        "    # positive unless the sentence says 'petit' or 'petite'; 'belle' adds doubt\n"
        "    return np.array([[0.8, 0.2] if ('petit' in t.split() or 'petite' in t.split()) else\n"
        "                     ([0.45, 0.55] if 'belle' in t.split() else [0.1, 0.9]) for t in texts])\n")
    data = tmp_path / "fr.csv"
    data.write_text("text,label\nLa maison est grande et rouge aujourd'hui.,1\nL'homme élégant arrive à Paris.,1\n")
    pairs = tmp_path / "synonymes.txt"
    pairs.write_text("# synonymes\ngrande,belle\nélégant,beau\n")
    out = tmp_path / "fr.jsonl"
    r = cli("attack", "--model", f"{plugin}:classify", "--data", str(data), "--mlm", str(camembert_dir),
            "--pairs-file", str(pairs), "--k", "2", "--no-ppl", "--output", str(out), "--json")
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["header"]["config"]["language"] == "fr"
    recs = lines[1:]
    recs.sort(key=lambda r: r["id"])  # written as they finish
    assert [r["pair"] for r in recs] == [["grande", "belle"], ["élégant", "beau"]]
    for r in recs:
        assert r["status"] in ("success", "failed")
        if r["status"] == "success":
            assert r["vulnerable_prediction"] != r["vulnerable_patched_prediction"]
            assert r["vulnerable"].startswith(("La ", "L'"))
