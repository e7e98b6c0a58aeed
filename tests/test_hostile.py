"""The hostile-user battery: bad or edge inputs across every command.

Each case must end with exit code 2 and exactly one line on stderr, ``error: ...`` (no traceback,
nothing on stdout), change no file in the working directory (lock files aside), and train or
cache nothing (the cache directory stays empty). Cases run in-process (typer's runner) except the
few marked ``subprocess``, which need a real interpreter (``sys.exit`` in a plug-in, ``--trust``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = "def clf(texts):\n    return [[0.3, 0.7] if 'good' in t else [0.7, 0.3] for t in texts]\n"
PLUGINS = {
    "good.py": GOOD,
    "labelled.py": GOOD + "\nclf.labels = ['neg', 'pos']\n",
    "syntax.py": "def clf(texts)\n    return []\n",
    "at_import.py": "raise RuntimeError('no GPU quota left')\n",
    "missing_dep.py": "import a_module_nobody_installed\n",
    "ctor.py": "class Model:\n    def __init__(self):\n        raise KeyError('weights')\n    def __call__(self, t):\n        return []\n",
    "needs_args.py": "class Model:\n    def __init__(self, path):\n        pass\n",
    "call.py": "def clf(texts):\n    raise ValueError('tokenizer exploded')\n",
    "exits.py": "import sys\ndef clf(texts):\n    sys.exit(3)\n",
    "shape.py": "def clf(texts):\n    return [[1.0]] * (len(texts) + 1)\n",
    "nan.py": "def clf(texts):\n    return [[float('nan'), 1.0] for t in texts]\n",
    "logits.py": "def clf(texts):\n    return [[3.0, -1.0] for t in texts]\n",
    "strings.py": "def clf(texts):\n    return 'positive'\n",
    "notcallable.py": "clf = 42\n",
}
DATA = {
    "d.tsv": "label\ttext\n1\ta good film .\n0\ta dull film .\n1\tgood acting and a good story .\n",
    "labels5.tsv": "label\ttext\n5\ta good film .\n0\ta dull film .\n",
    "single.tsv": "label\ttext\n1\ta good film .\n1\tgood acting .\n",
    "empty.tsv": "",
    "header_only.tsv": "label\ttext\n",
    "nolabel.tsv": "text\na good film .\n",
    "neg.tsv": "label\ttext\n-1\ta good film .\n",
    "half.tsv": "label\ttext\n0.5\ta good film .\n",
    "mixed.tsv": "label\ttext\npositive\ta good film .\n0\ta dull film .\n",
    "named.tsv": "label\ttext\npositive\ta good film .\nnegative\ta dull film .\n",
    "pairs.tsv": "label\tpremise\thypothesis\n1\ta good film .\tit is good .\n0\ta dull film .\t\n",
    "bad.parquet": "not a parquet file",
    "blank_text.tsv": "label\ttext\n1\t   \n",
    "list.jsonl": "[1, \"a good film\"]\n",
    "broken.jsonl": "{\"text\": \"a good film\", \"label\": 1\n{\"text\": \"ok\", \"label\": 0}\n",
    "d.xlsx": "not a spreadsheet",
    "not_object.jsonl": "[1, 2, 3]\n",
    "headerless.jsonl": json.dumps({"id": "d.tsv:0", "status": "failed"}) + "\n",
    "other.jsonl": json.dumps({"header": {"command": "attack", "textaudit": "0.1.0", "config": {
        "method": "so-beam", "k": 6, "beam": 20, "kappa": 20, "delta": 3.0, "seed": 0, "data": "d.tsv", "ppl": False}}})
    + "\n" + json.dumps({"id": "d.tsv:0", "status": "failed"}) + "\n",
    "sampled.jsonl": json.dumps({"header": {"command": "attack", "textaudit": "0.1.0", "config": {
        "method": "genetic", "seed": 0, "data": "d.tsv", "ppl": False, "data_sample": 2}}})
    + "\n" + json.dumps({"id": "d.tsv:0", "status": "failed"}) + "\n",
    "pairs.txt": "good,fine\n",
    "noconfig.jsonl": json.dumps({"header": {"command": "attack", "textaudit": "0.1.0"}}) + "\n"
    + json.dumps({"id": "d.tsv:0", "status": "failed", "seconds": 1.0, "queries": 3}) + "\n",
    "nol0.jsonl": json.dumps({"header": {"command": "attack", "textaudit": "0.1.0", "config": {"method": "so-enum", "k": 1}}})
    + "\n" + json.dumps({"id": "d.tsv:0", "status": "success", "seconds": 1.0, "queries": 3}) + "\n",
    "badstatus.jsonl": json.dumps({"header": {"command": "attack", "textaudit": "0.1.0", "config": {"method": "so-enum"}}})
    + "\n" + json.dumps({"id": "d.tsv:0", "status": "won"}) + "\n",
    "listtext.jsonl": json.dumps({"text": ["a", "fine", "film"], "label": 1}) + "\n",
    "numtext.jsonl": json.dumps({"text": "a good film", "label": 1}) + "\n" + json.dumps({"text": 42, "label": 0}) + "\n",
    **{f"shard{i}{n}.jsonl": json.dumps({"header": {"command": "attack", "textaudit": "0.1.0", "shard": f"{i}/{n}", "config": {
        "method": "genetic", "seed": 0, "data": "d.tsv", "ppl": False}}}) + "\n"
       + json.dumps({"id": f"d.tsv:{i}", "status": "failed", "seconds": 1.0, "queries": 3}) + "\n"
       for i, n in ((0, 2), (1, 3))},
    "existing.jsonl": json.dumps({"id": "x"}) + "\n",
    "suite.toml": "[compare]\nmodels = ['cnn']\nmethods = ['so-beam']\n[thresholds]\nso_beam.speed_max = 1\n",
    "afile": "a plain file\n",
    "mine.html": "<html><body>the user's own page</body></html>\n",
    "replaces.toml": "[suite]\noutput_dir = '.'\nreport = 'mine.html'\n[certify]\nmodels = ['cnn-ibp']\n",
    "limit_text.toml": "[suite]\nlimit = 'ten'\n[certify]\nmodels = ['cnn-ibp']\n",
    "track_wandb.toml": "[suite]\ntrack = 'wandb'\n[certify]\nmodels = ['cnn-ibp']\n",
    "pending.jsonl": json.dumps({"header": {"command": "attack", "config": {}}}) + "\n",
    "pending.jsonl.track.json": "{not a tracked run",
    "report_path.toml": "[suite]\nreport = '../elsewhere.html'\n[certify]\nmodels = ['cnn-ibp']\n",
    "report_pdf.toml": "[suite]\nreport = 'r.pdf'\n[certify]\nmodels = ['cnn-ibp']\n",
    "prompt.toml": "template = '{text} :'\n[labels]\nnegative = ['bad']\npositive = ['good']\n",
    "notext.toml": "template = 'Review:'\n[labels]\nnegative = ['bad']\npositive = ['good']\n",
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A working directory full of plug-ins, data and results files, plus an empty cache."""
    root = tmp_path_factory.mktemp("world")
    for name, text in {**PLUGINS, **DATA}.items():
        (root / name).write_text(text)
    (root / "binary.bin").write_bytes(bytes(range(256)) * 8)
    (root / "notutf8.tsv").write_bytes(b"label\ttext\n1\t\xff\xfe bad bytes\n")
    (root / "adir").mkdir()
    ckpt = root / "ckpt"
    ckpt.mkdir()
    (ckpt / "textaudit.json").write_text("{not json")
    (root / "notmodel").mkdir()
    (root / "notmodel" / "weights.bin").write_bytes(b"\0" * 16)
    import datasets

    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["a good film ."], "label": [1]})}).save_to_disk(
        root / "hfdata")
    cache = tmp_path_factory.mktemp("cache")
    return root, cache


def w(name: str) -> str:
    """A placeholder for ``world / name`` in the case table."""
    return "{W}/" + name


G = w("good.py") + ":clf"
CASES: list[tuple[str, list[str], dict[str, str], str]] = [
    # typer usage errors: one line, not a box
    ("unknown command", ["atack"], {}, "No such command 'atack'. Did you mean 'attack'"),
    ("not an integer", ["attack", "--model", G, "--k", "abc"], {}, "Invalid value for '--k'"),
    ("missing --model", ["attack"], {}, "Missing option '--model'"),
    ("unknown option", ["attack", "--model", G, "--bogus"], {}, "No such option: --bogus"),
    ("global option type", ["--threads", "abc", "attack"], {}, "Invalid value for '--threads'"),
    ("global option value", ["--threads", "0", "predict", "-m", G, "x"], {}, "--threads must be at least 1"),
    ("unknown subcommand", ["perturbscore", "buld"], {}, "No such command 'buld'"),
    ("option without value", ["bias", "--pair"], {}, "Option '--pair' requires an argument"),
    ("missing argument", ["predict", "-m", G], {}, "Missing argument 'texts'"),
    # attack options, checked before any model loads
    ("k 0", ["attack", "--model", "cnn", "--k", "0"], {}, "k"),
    ("beam 0", ["attack", "--model", "cnn", "--beam", "0"], {}, "beam"),
    ("kappa 0", ["attack", "--model", "cnn", "--kappa", "0"], {}, "--kappa (κ) must be at least 1"),
    ("delta negative", ["attack", "--model", "cnn", "--delta", "-1"], {}, "--delta (δ) must be >= 0"),
    ("max-queries 0", ["attack", "--model", "cnn", "--max-queries", "0"], {}, "--max-queries must be at least 1"),
    ("time-budget negative", ["attack", "--model", "cnn", "--time-budget", "-1"], {}, "--time-budget must be a positive"),
    ("unknown method", ["attack", "--model", "cnn", "--method", "nope"], {}, "nope"),
    ("so-enum k 3", ["attack", "--model", "cnn", "--method", "so-enum", "--k", "3"], {}, "k"),
    ("option of another method", ["attack", "--model", "cnn", "--method", "genetic", "--beam", "5"], {},
     "--beam applies to --method so-beam only, not to genetic"),
    ("limit 0", ["attack", "--model", "cnn", "--limit", "0"], {}, "Invalid value for '--limit'"),
    ("negative seed", ["attack", "--model", "cnn", "--seed", "-1"], {}, "Invalid value for '--seed'"),
    # bias
    ("bad pair", ["bias", "--pair", "he"], {}, "he"),
    ("pair and group", ["bias", "--pair", "he,she", "--group", "gender"], {}, "give exactly one of"),
    ("unknown group", ["bias", "--group", "nope"], {}, "unknown group 'nope'"),
    ("bias k negative", ["bias", "--pair", "he,she", "--k", "-1"], {}, "Invalid value for '--k'"),
    ("bias sample 1", ["bias", "--pair", "he,she", "--sample", "1"], {}, "Invalid value for '--sample'"),
    ("max-sources negative", ["bias", "--pair", "he,she", "--max-sources", "-1"], {}, "Invalid value for '--max-sources'"),
    ("bias kappa 0", ["bias", "--pair", "he,she", "--kappa", "0"], {}, "Invalid value for '--kappa'"),
    ("missing pairs file", ["bias", "--pairs-file", w("nope.txt")], {}, "nope.txt"),
    # neighbors
    ("neighbors sample 0", ["neighbors", "a good film", "--sample", "0"], {}, "Invalid value for '--sample'"),
    ("neighbors k negative", ["neighbors", "a good film", "--k", "-1"], {}, "Invalid value for '--k'"),
    # the neighbourhood store (#54)
    ("store info without a store", ["store", "info"], {}, "there is no neighbourhood store at"),
    ("store prune negative", ["store", "prune", "--max-gb", "-1"], {}, "--max-gb must be a size in GB"),
    ("store prune inf", ["store", "prune", "--max-gb", "inf"], {}, "--max-gb must be a size in GB"),
    ("store import missing", ["store", "import", "{W}/nothing.sqlite"], {}, "does not exist; give a file written by"),
    ("store import not a store", ["store", "import", "{W}/good.py"], {}, "is not a neighbourhood store"),
    ("store is a folder", ["neighbors", "a good film", "--store", "{W}"], {}, "is a directory; give a file"),
    ("TEXTAUDIT_STORE a folder", ["neighbors", "a good film"], {"TEXTAUDIT_STORE": "{W}"}, "TEXTAUDIT_STORE="),
    ("mlm from an empty store", ["neighbors", "a good film", "--mlm", "store:minilm-mlm"], {},
     "reads the neighbourhood store, but there is none"),
    # perturbscore
    ("max-eps negative", ["perturbscore", "build", "--max-eps", "-1"], {}, "Invalid value for '--max-eps'"),
    ("n 0", ["perturbscore", "build", "--n", "0"], {}, "Invalid value for '--n'"),
    ("unknown space", ["perturbscore", "build", "--space", "nope"], {}, "--space must be hidden or probs"),
    ("unknown tuple perturbation", ["perturbscore", "build", "--perturbation", "nope"], {},
     "--perturbation must be random-swap or synonym-swap (got 'nope')"),
    ("binary tuples", ["perturbscore", "train", "--tuples", w("binary.bin")], {}, "is not UTF-8 text"),
    ("tuples not objects", ["perturbscore", "train", "--tuples", w("not_object.jsonl")], {}, "is a JSON list, not an object"),
    ("missing tuples", ["perturbscore", "train", "--tuples", w("nope.jsonl")], {}, "run 'audit perturbscore build"),
    ("missing scorer", ["perturbscore", "score", "a good film", "a fine film", "--scorer", w("nope")], {}, "nope"),
    # certify, learnability, train, train-mlm
    ("certify limit 0", ["certify", "--model", "cnn-ibp", "--limit", "0"], {}, "Invalid value for '--limit'"),
    ("certify a transformer by IBP", ["certify", "--model", "transformer", "--method", "ibp"], {},
     "certify --method ibp supports the zoo's bow/cnn/lstm word models"),
    ("certify by an unknown method", ["certify", "--model", G, "--method", "cohen"], {}, "unknown --method 'cohen'"),
    ("certify with a mask rate of 1", ["certify", "--model", G, "--method", "ranmask", "--mask-rate", "1"], {},
     "--mask-rate must be a number >= 0 and < 1"),
    ("certify with an empty mask token", ["certify", "--model", G, "--method", "ranmask", "--mask-token", " "], {},
     "--mask-token must not be empty"),
    ("certify with alpha 0.7", ["certify", "--model", G, "--method", "safer", "--alpha", "0.7"], {},
     "--alpha must be above 0 and below 0.5"),
    ("certify with a synonyms file that is a list", ["certify", "--model", G, "--synonyms", w("pending.jsonl.track.json")],
     {}, "not a readable JSON file"),
    ("train-size 0", ["learnability", "--train-size", "0"], {}, "Invalid value for '--train-size'"),
    ("seeds 0", ["learnability", "--seeds", "0"], {}, "Invalid value for '--seeds'"),
    ("learnability unknown model", ["learnability", "--model", "gpt", "--perturbation", "leet_letters"], {}, "gpt"),
    ("probabilities not numbers", ["learnability", "--probabilities", "a,b"], {}, "--probabilities must be comma-separated"),
    ("unknown noise", ["learnability", "--perturbation", "nope"], {}, "nope"),
    ("train unknown arch", ["train", "--model", "nope"], {},
     "audit train trains zoo models (bow, cnn, lstm, transformer, minilm); got 'nope'"),
    ("train epochs 0", ["train", "--model", "bow", "--epochs", "0"], {}, "Invalid value for '--epochs'"),
    ("train unknown augmentation", ["train", "--model", "bow", "--augment", "nope"], {}, "unknown augmentation 'nope'"),
    ("ibp transformer", ["train", "--model", "transformer", "--robust", "ibp"], {},
     "certified (IBP) training supports bow, cnn, lstm, not transformer"),
    ("single class", ["train", "--model", "bow", "--data", w("single.tsv"), "--out", w("adir/m")], {},
     "has a single class"),
    ("train out is a file", ["train", "--model", "bow", "--out", w("afile")], {}, "is a file; give a directory"),
    ("train-mlm steps 0", ["train-mlm", "--steps", "0"], {}, "--steps must be at least 1"),
    ("train-mlm share", ["train-mlm", "--sst-share", "1.5"], {}, "--sst-share must lie strictly between 0 and 1"),
    ("train-mlm corpus alone", ["train-mlm", "--corpus", "."], {}, "--corpus and --corpus-share go together"),
    ("mlm-corpus nothing", ["mlm-corpus", "--out", "corpus-x", "--no-debian"], {},
     "nothing to write: keep --debian or give --synthetic-batches N"),
    ("mlm-corpus batches", ["mlm-corpus", "--out", "corpus-x", "--synthetic-batches", "-1"], {},
     "Invalid value for '--synthetic-batches'"),
    # wordorder
    ("unknown reordering", ["wordorder", "--model", G, "--perturbation", "nope"], {},
     "--perturbation must be full_shuffle or phrase_shuffle or neighbor_flip (got 'nope')"),
    ("unknown level", ["wordorder", "--model", G, "--level", "phoneme"], {}, "--level must be word or subword or char (got 'phoneme')"),
    ("rho 2", ["wordorder", "--model", G, "--rho", "2"], {}, "Invalid value for '--rho'"),
    ("plot is a file", ["wordorder", "--model", G, "--sweep", "--plot", w("afile")], {}, "--plot must be a directory"),
    # labels the model has no class for
    ("evaluate label 5", ["evaluate", "--model", G, "--data", w("labels5.tsv")], {}, "has label 5, but model"),
    ("attack label 5", ["attack", "--model", G, "--method", "genetic", "--data", w("labels5.tsv"), "--no-ppl"], {},
     "has label 5, but model"),
    ("wordorder label 5", ["wordorder", "--model", G, "--data", w("labels5.tsv")], {}, "has label 5, but model"),
    # data files
    ("missing data", ["evaluate", "--model", G, "--data", w("nope.tsv")], {}, "does not exist"),
    ("empty data", ["evaluate", "--model", G, "--data", w("empty.tsv")], {}, "has no rows"),
    ("header only", ["evaluate", "--model", G, "--data", w("header_only.tsv")], {}, "has no rows"),
    ("not utf-8 data", ["evaluate", "--model", G, "--data", w("notutf8.tsv")], {}, "is not UTF-8 text"),
    ("no label column", ["evaluate", "--model", G, "--data", w("nolabel.tsv")], {}, "has no label column"),
    ("negative label", ["evaluate", "--model", G, "--data", w("neg.tsv")], {}, "is negative"),
    ("fractional label", ["evaluate", "--model", G, "--data", w("half.tsv")], {}, "is neither a class id 0..C-1 nor a class name"),
    ("blank text", ["evaluate", "--model", G, "--data", w("blank_text.tsv")], {}, "empty text"),
    ("missing text column", ["evaluate", "--model", G, "--data", w("d.tsv"), "--text-column", "nope"], {},
     "has no text column 'nope'"),
    ("jsonl lines not objects", ["evaluate", "--model", G, "--data", w("list.jsonl")], {}, "is not a JSON object"),
    ("broken jsonl", ["evaluate", "--model", G, "--data", w("broken.jsonl")], {}, "is not valid JSON"),
    ("unknown split", ["evaluate", "--model", G, "--data", "sst2:nope"], {}, "unknown split 'nope'"),
    ("unknown dataset", ["evaluate", "--model", G, "--data", "imdb"], {}, "unknown dataset 'imdb'"),
    ("unsupported file type", ["evaluate", "--model", G, "--data", w("d.xlsx")], {}, "unsupported data file"),
    ("mixed labels", ["evaluate", "--model", G, "--data", w("mixed.tsv")], {}, "mixes class names"),
    ("class names the model lacks", ["evaluate", "--model", w("labelled.py") + ":clf", "--data", w("named.tsv")], {},
     "the data's class 'negative' is not a class of model"),
    ("broken parquet", ["evaluate", "--model", G, "--data", w("bad.parquet")], {}, "is not a readable parquet file"),
    ("hf dataset offline", ["evaluate", "--model", G, "--data", "hf:someone/nothing-here"], {}, "cannot load"),
    ("hf dataset missing split", ["evaluate", "--model", G, "--data", "hf:" + w("hfdata") + ":test"], {},
     "has no split 'test'"),
    ("limit and sample", ["evaluate", "--model", G, "--data", w("d.tsv"), "--limit", "2", "--sample", "2"], {}, "not both"),
    ("compare's limit and sample", ["compare", "--models", G, "--data", w("d.tsv"), "--output-dir", w("cmp"), "--limit", "2",
                                    "--sample", "2"], {}, "not both"),
    ("missing pair column", ["evaluate", "--model", G, "--data", w("pairs.tsv"), "--text-column", "premise",
                             "--pair-column", "claim"], {}, "has no pair column 'claim'"),
    ("empty pair text", ["evaluate", "--model", G, "--data", w("pairs.tsv"), "--text-column", "premise",
                         "--pair-column", "hypothesis"], {}, "empty second text in --pair-column 'hypothesis'"),
    ("perturb side", ["attack", "--model", G, "--data", w("d.tsv"), "--pair-column", "text", "--perturb-side", "left"],
     {}, "--perturb-side must be second or first (got 'left')"),
    ("unsegmented language", ["attack", "--model", G, "--data", w("d.tsv"), "--language", "zh"], {},
     "not separated by spaces"),
    ("a code that is no language", ["attack", "--model", G, "--data", w("d.tsv"), "--language", "xx"], {},
     "(got 'xx', which is not a language"),
    ("bias in no language", ["bias", "--model", G, "--pair", "he,she", "--language", "qq"], {}, "which is not a language"),
    ("other language without pairs", ["attack", "--model", G, "--data", w("d.tsv"), "--language", "de"], {},
     "give --pairs-file"),
    # models and plug-ins
    ("missing plug-in file", ["predict", "--model", w("nope.py") + ":clf", "x"], {}, "does not exist"),
    ("plug-in syntax error", ["predict", "--model", w("syntax.py") + ":clf", "x"], {}, "has a syntax error at line 1"),
    ("plug-in raises at import", ["predict", "--model", w("at_import.py") + ":clf", "x"], {},
     "your plug-in at_import.py (at import) raised RuntimeError: no GPU quota left"),
    ("plug-in missing dependency", ["predict", "--model", w("missing_dep.py") + ":clf", "x"], {}, "failed to import"),
    ("plug-in constructor raises", ["predict", "--model", w("ctor.py") + ":Model", "x"], {},
     "your model ctor.py:Model (in its constructor) raised KeyError: 'weights'"),
    ("plug-in needs arguments", ["predict", "--model", w("needs_args.py") + ":Model", "x"], {},
     "must be constructible with no arguments"),
    ("plug-in raises when called", ["predict", "--model", w("call.py") + ":clf", "x"], {},
     "your model call.py:clf raised ValueError: tokenizer exploded"),
    ("plug-in wrong shape", ["predict", "--model", w("shape.py") + ":clf", "x"], {}, "returned shape"),
    ("plug-in NaN", ["predict", "--model", w("nan.py") + ":clf", "x"], {}, "returned NaN"),
    ("plug-in logits as probs", ["predict", "--model", w("logits.py") + ":clf", "x"], {}, "outside [0, 1]"),
    ("plug-in returns a string", ["predict", "--model", w("strings.py") + ":clf", "x"], {}, "not an array of numbers"),
    ("plug-in not callable", ["predict", "--model", w("notcallable.py") + ":clf", "x"], {}, "it must be a function"),
    ("plug-in object missing", ["predict", "--model", w("good.py") + ":nope", "x"], {}, "has no 'nope'"),
    ("unknown model", ["predict", "--model", "gpt5", "x"], {}, "unknown model 'gpt5'"),
    ("hf dir missing", ["predict", "--model", "hf:" + w("nope"), "x"], {}, "nope: no such directory (give a folder with config.json"),
    ("hf dir without config", ["predict", "--model", "hf:" + w("notmodel"), "x"], {}, "is not a HuggingFace model directory"),
    ("corrupt checkpoint", ["predict", "--model", w("ckpt"), "x"], {}, "is corrupt"),
    ("empty text", ["predict", "--model", G, " "], {}, "empty text"),
    # environment
    ("device garbage", ["predict", "--model", G, "x"], {"TEXTAUDIT_DEVICE": "garbage"}, "TEXTAUDIT_DEVICE=garbage is not a device"),
    ("device cuda:7", ["predict", "--model", G, "x"], {"TEXTAUDIT_DEVICE": "cuda:7"}, "TEXTAUDIT_DEVICE=cuda:7"),
    ("cache is a file", ["predict", "--model", "cnn", "x"], {"TEXTAUDIT_CACHE": w("afile")}, "is a file, not a directory"),
    ("threads negative", ["predict", "--model", G, "x"], {"TEXTAUDIT_THREADS": "-2"}, "TEXTAUDIT_THREADS must be a whole number"),
    ("data dir missing", ["predict", "--model", G, "x"], {"TEXTAUDIT_DATA": w("nope")}, "TEXTAUDIT_DATA="),
    ("progress seconds", ["predict", "--model", G, "x"], {"TEXTAUDIT_PROGRESS_SECONDS": "soon"}, "TEXTAUDIT_PROGRESS_SECONDS"),
    ("offline switch", ["predict", "--model", G, "x"], {"TEXTAUDIT_OFFLINE": "maybe"}, "TEXTAUDIT_OFFLINE must be 1 or 0"),
    # results files
    ("output exists", ["attack", "--model", G, "--output", w("existing.jsonl")], {}, "already exists; pass --resume"),
    ("resume without output", ["attack", "--model", G, "--resume"], {}, "--resume needs --output"),
    ("output is a directory", ["attack", "--model", G, "--output", w("adir"), "--resume"], {}, "is a directory"),
    ("resume a non-object line", ["attack", "--model", G, "--output", w("not_object.jsonl"), "--resume"], {},
     "is a JSON list, not an object"),
    ("resume a binary file", ["attack", "--model", G, "--output", w("binary.bin"), "--resume"], {}, "is not UTF-8 text"),
    ("resume a headerless file", ["attack", "--model", G, "--output", w("headerless.jsonl"), "--resume"], {},
     "has no header record"),
    ("resume with another k", ["attack", "--model", G, "--data", w("d.tsv"), "--output", w("other.jsonl"), "--resume",
                               "--k", "4", "--no-ppl"], {}, "was written with other settings (k: 6 → 4)"),
    ("resume with another seed", ["attack", "--model", G, "--data", w("d.tsv"), "--output", w("other.jsonl"),
                                  "--resume", "--seed", "1", "--no-ppl"], {}, "seed: 0 → 1"),
    ("resume with another sample", ["attack", "--model", G, "--method", "genetic", "--data", w("d.tsv"), "--output",
                                    w("sampled.jsonl"), "--resume", "--sample", "3", "--no-ppl"], {}, "data_sample: 2 → 3"),
    ("attack missing pairs file", ["attack", "--model", G, "--data", w("d.tsv"), "--pairs-file", w("nope.txt")], {},
     "pairs file"),
    ("pairs file for genetic", ["attack", "--model", G, "--method", "genetic", "--data", w("d.tsv"), "--pairs-file",
                                w("pairs.txt")], {}, "--pairs-file applies to --method so-beam"),
    ("resume other data", ["attack", "--model", G, "--output", w("other.jsonl"), "--resume", "--no-ppl"], {},
     "data: d.tsv → sst2:dev"),
    ("output under a file", ["attack", "--model", G, "--data", w("d.tsv"), "--output", w("afile/r.jsonl")], {},
     "afile is a file, not a directory"),
    ("output in a read-only place", ["attack", "--model", G, "--data", w("d.tsv"), "--output", "/proc/r.jsonl"], {},
     "--output /proc/r.jsonl cannot be written"),
    ("output dir cannot be made", ["attack", "--model", G, "--data", w("d.tsv"), "--output", "/proc/x/r.jsonl"], {},
     "--output /proc/x/r.jsonl cannot be written"),
    ("unknown backend", ["attack", "--model", "cnn", "--backend", "spark"], {}, "unknown --backend 'spark'"),
    ("address without ray", ["learnability", "--address", "auto"], {}, "--address applies to --backend ray only"),
    ("workers 0", ["bias", "--pair", "he,she", "--backend", "ray", "--workers", "0"], {}, "Invalid value for '--workers'"),
    ("gpus negative", ["perturbscore", "build", "--backend", "ray", "--gpus-per-worker", "-1"], {},
     "Invalid value for '--gpus-per-worker'"),
    ("bad data before ray starts", ["attack", "--model", G, "--backend", "ray", "--data", w("nope.tsv")], {},
     "does not exist"),
    ("shard out of range", ["attack", "--model", "cnn", "--shard", "2/2", "--output", w("adir/r.jsonl")], {},
     "--shard must be i/N with 0 <= i < N"),
    ("shard without output", ["bias", "--pair", "he,she", "--shard", "0/2"], {}, "--shard needs --output"),
    ("merge a missing file", ["merge", w("adir/m.jsonl"), w("nope.jsonl")], {}, "nope.jsonl does not exist"),
    ("merge a headerless file", ["merge", w("adir/m.jsonl"), w("headerless.jsonl")], {}, "has no header record"),
    ("merge into an existing file", ["merge", w("existing.jsonl"), w("other.jsonl")], {}, "already exists"),
    ("merge says no --resume", ["merge", w("existing.jsonl"), w("other.jsonl")], {}, "audit merge writes a new file"),
    ("merge shards of two splits", ["merge", w("adir/m.jsonl"), w("shard02.jsonl"), w("shard13.jsonl")], {},
     "shards of different splits (0/2, 1/3)"),
    ("shard with a superscript", ["attack", "--model", "cnn", "--shard", "\u00b2/3", "--output", w("adir/r.jsonl")], {},
     "--shard must be i/N with 0 <= i < N"),
    ("bias output is a directory", ["bias", "--pair", "he,she", "--output", w("adir")], {}, "is a directory"),
    ("learnability output exists", ["learnability", "--output", w("existing.jsonl")], {}, "already exists"),
    ("perturbscore output exists", ["perturbscore", "build", "--output", w("existing.jsonl")], {}, "already exists"),
    ("compare unknown method", ["compare", "--models", G, "--methods", "so-beam,nope", "--output-dir", w("cmp")], {},
     "nope"),
    ("compare a model twice", ["compare", "--models", f"cnn,{G},cnn", "--output-dir", w("cmp")], {}, "names one twice"),
    ("compare into a file", ["compare", "--models", G, "--output-dir", w("existing.jsonl")], {}, "is a file"),
    ("compare k for so-enum", ["compare", "--models", G, "--methods", "so-enum", "--k", "3", "--output-dir", w("cmp")],
     {}, "k"),
    ("track a missing file", ["track", w("nope.jsonl")], {}, "nope.jsonl does not exist"),
    ("track to another tracker", ["track", w("other.jsonl"), "--to", "wandb"], {}, "give --track mlflow"),
    ("track a headerless file", ["track", w("headerless.jsonl")], {}, "has no textaudit header line"),
    ("track a damaged pending run", ["track", w("pending.jsonl")], {},
     "pending.jsonl.track.json does not describe the results beside it (not JSON"),
    ("attack tracked by another tracker", ["attack", "--model", G, "--track", "wandb"], {}, "give --track mlflow"),
    ("run a suite tracked by another tracker", ["run", w("track_wandb.toml")], {}, "[suite] track must be mlflow"),
    ("replay a missing file", ["replay", w("nope.jsonl"), "--model", G], {}, "nope.jsonl does not exist"),
    ("replay a headerless file", ["replay", w("headerless.jsonl"), "--model", G], {}, "has no textaudit header line"),
    ("replay without --model", ["replay", w("other.jsonl")], {}, "Missing option '--model'"),
    ("report a missing file", ["report", w("nope.jsonl")], {}, "nope.jsonl does not exist"),
    ("report a headerless file", ["report", w("headerless.jsonl"), "--out", w("adir/r.html")], {}, "has no header record"),
    ("report an unknown format", ["report", w("existing.jsonl"), "--format", "pdf"], {}, "unknown --format 'pdf'"),
    ("report into a directory", ["report", w("existing.jsonl"), "--out", w("adir")], {}, "is a directory"),
    ("report over its own input", ["report", w("other.jsonl"), "--out", w("other.jsonl")], {},
     "other.jsonl exists and is not a textaudit report"),
    ("report over a plain file", ["report", w("other.jsonl"), "--out", w("afile")], {}, "is not a textaudit report"),
    ("report over the user's page", ["report", w("other.jsonl"), "--out", w("mine.html")], {}, "give another --out"),
    ("run a suite whose report replaces a page", ["run", w("replaces.toml")], {}, "which is not a textaudit report"),
    ("run a suite with a text limit", ["run", w("limit_text.toml")], {}, "[suite] limit must be a whole number >= 1"),
    ("run a suite with a report path", ["run", w("report_path.toml")], {}, "[suite] report must be a file name"),
    ("run a suite with a pdf report", ["run", w("report_pdf.toml")], {}, "ending in .html or .md"),
    ("hf data directory missing", ["evaluate", "--model", G, "--data", "hf:./no_such_dir"], {},
     "hf:./no_such_dir: no such directory"),
    ("hf model directory missing", ["predict", "--model", "hf:./no_such_model", "a film"], {},
     "hf:./no_such_model: no such directory"),
    ("text column holds lists", ["evaluate", "--model", G, "--data", w("listtext.jsonl")], {},
     "listtext.jsonl row 1: the text in column 'text' is list"),
    ("text column holds a number", ["evaluate", "--model", G, "--data", w("numtext.jsonl")], {},
     "numtext.jsonl row 2: the text in column 'text' is int '42', not a string"),
    ("http timeout inf", ["predict", "--model", "http://127.0.0.1:9/p", "--timeout", "inf", "a film"], {},
     "Invalid value for '--timeout'"),
    ("run a missing suite", ["run", w("nope.toml")], {}, "nope.toml does not exist"),
    ("report a header without config", ["report", w("noconfig.jsonl"), "--out", w("adir/r.html")], {},
     "noconfig.jsonl:1: the header has no config"),
    ("report a success without l0", ["report", w("nol0.jsonl"), "--out", w("adir/r.html")], {},
     "nol0.jsonl:2: field 'l0' must be a whole number >= 0, got nothing"),
    ("merge a record with an unknown status", ["merge", w("adir/m.jsonl"), w("badstatus.jsonl")], {},
     "badstatus.jsonl:2: status 'won' is not one of success, failed, skipped, error"),
    ("cite an unknown command", ["cite", "atack"], {}, "audit cite knows no command 'atack'"),
    ("run a suite that is not TOML", ["run", w("good.py")], {}, "is not valid TOML"),
    ("run an unknown threshold", ["run", w("suite.toml")], {}, "attack metrics are"),
    # llm: and http(s):// models (#24)
    ("prompt file missing", ["evaluate", "--model", "llm:smollm2", "--prompt-file", w("nope.toml"), "--data", w("d.tsv")],
     {}, "prompt file"),
    ("prompt without {text}", ["evaluate", "--model", "llm:smollm2", "--prompt-file", w("notext.toml"),
                               "--data", w("d.tsv")], {}, "the template needs {text}"),
    ("prompt file on a plug-in", ["attack", "--model", G, "--prompt-file", w("prompt.toml")], {},
     "--prompt-file applies to llm: models"),
    ("http option on a local model", ["bias", "--model", G, "--pair", "he,she", "--concurrency", "8"], {},
     "--concurrency apply to http(s):// models"),
    ("api key variable unset", ["predict", "--model", "http://127.0.0.1:9/v1/completions", "--api-key-env",
                                "TEXTAUDIT_NO_SUCH_KEY", "a film"], {}, "that environment variable is not set"),
    ("endpoint unreachable", ["evaluate", "--model", "http://127.0.0.1:9/predict", "--retries", "0", "--data", w("d.tsv")],
     {}, "connection failed"),
    ("prompt for a plain JSON endpoint", ["evaluate", "--model", "http://127.0.0.1:9/predict", "--prompt-file",
                                          w("prompt.toml"), "--data", w("d.tsv")], {}, "a plain JSON endpoint"),
    ("llm without a model", ["wordorder", "--model", "llm:", "--data", w("d.tsv")], {}, "llm: needs a causal LM"),
    ("cost budget without a price", ["evaluate", "--model", "http://127.0.0.1:9/predict", "--cost-budget", "1",
                                     "--data", w("d.tsv")], {}, "go together"),
    ("ftp model", ["predict", "--model", "ftp://127.0.0.1/m", "a film"], {}, "unknown model 'ftp://127.0.0.1/m'"),
    ("serve a missing plug-in", ["serve", "--model", w("nope.py") + ":clf"], {}, "does not exist"),
    ("serve on a bad port", ["serve", "--model", G, "--port", "70000"], {}, "Invalid value for '--port'"),
    ("serve with no batch", ["serve", "--model", G, "--max-batch", "0"], {}, "Invalid value for '--max-batch'"),
    ("serve with no body", ["serve", "--model", G, "--max-body-bytes", "0"], {}, "Invalid value for '--max-body-bytes'"),
    ("unknown --group-pairs", ["bias", "--model", G, "--group", "religion", "--group-pairs", "some"], {},
     "--group-pairs must be reference or all (got 'some')"),
    ("harden a plug-in", ["harden", "--model", G, "--method", "augment", "--out", w("h")], {},
     "whose weights textaudit cannot train"),
    ("harden into a results file", ["harden", "--model", "cnn", "--method", "augment", "--out", w("existing.jsonl")],
     {}, "is a file"),
    ("harden held out on train", ["harden", "--model", "cnn", "--method", "consistency", "--eval-data", "sst2:train",
                                  "--out", w("h")], {}, "is the training split"),
]


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
            if p.is_file() and not p.name.endswith(".lock")}


def _fill(args: list[str], root: Path) -> list[str]:
    return [a.replace("{W}", str(root)) for a in args]


def test_the_battery_has_at_least_60_cases_across_every_command():
    from typer.main import get_command

    from textaudit.cli.main import app

    assert len(CASES) >= 60 and len({c[0] for c in CASES}) == len(CASES)
    commands = set(get_command(app).commands) - {"doctor"}  # doctor takes no input to get wrong
    assert commands <= {c[1][0] if not c[1][0].startswith("-") else c[1][2] for c in CASES}


@pytest.mark.parametrize("name,args,env,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_changes_nothing(world, name, args, env, expected, monkeypatch):
    from typer.testing import CliRunner

    from textaudit.cli.main import app

    root, cache = world
    monkeypatch.chdir(root)
    monkeypatch.setenv("TEXTAUDIT_CACHE", str(cache))
    for var in ("TEXTAUDIT_THREADS", "TEXTAUDIT_DEVICE", "TEXTAUDIT_TRUST_REMOTE_CODE"):
        monkeypatch.delenv(var, raising=False)
    before = _snapshot(root)
    r = CliRunner().invoke(app, _fill(args, root), env={k: v.replace("{W}", str(root)) for k, v in env.items()})
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == 2, (r.exit_code, r.stderr[-1500:])
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-1500:]
    assert expected in lines[0], lines[0]
    assert r.stdout == ""
    assert _snapshot(root) == before  # no file changed
    assert list(cache.rglob("*")) == []  # no model trained, nothing cached


def _audit(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "textaudit", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, timeout=1200)


def test_a_plugin_calling_sys_exit_is_an_error_line_not_a_silent_exit(world):
    root, cache = world
    r = _audit("predict", "--model", f"{root}/exits.py:clf", "a good film", cwd=root, env={"TEXTAUDIT_CACHE": str(cache)})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == ["error: your model exits.py:clf called sys.exit(3); a model must return "
                                     "predictions, not exit"]


SLOW = "import time\ndef clf(texts):\n    time.sleep(0.3)\n    return [[0.3, 0.7] if 'good' in t else [0.7, 0.3] for t in texts]\n"


@pytest.mark.slow
def test_two_runs_on_one_output_the_second_is_refused_and_nothing_is_duplicated(world, tmp_path):
    """A real second process while the first is writing: one-line error, exit 2; the first finishes
    with one record per example, and a later --resume adds nothing."""
    import time

    from textaudit.results import read_jsonl

    root, cache = world
    (tmp_path / "slow.py").write_text(SLOW)
    rows = [f"a good film number {i} ." if i % 2 else f"a dull film number {i} ." for i in range(8)]
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(f"{i % 2}\t{r}\n" for i, r in enumerate(rows)))
    out = tmp_path / "r.jsonl"
    args = ["attack", "--model", f"{tmp_path}/slow.py:clf", "--method", "genetic", "--data", str(tmp_path / "d.tsv"),
            "--no-ppl", "--output", str(out)]
    env = {**os.environ, "TEXTAUDIT_CACHE": str(cache)}
    first = subprocess.Popen([sys.executable, "-m", "textaudit", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and not (out.exists() and out.read_text().count("\n") >= 1):
        time.sleep(0.1)  # the header is written: the first run holds the lock
    second = _audit(*args, "--resume", cwd=tmp_path, env={"TEXTAUDIT_CACHE": str(cache)})
    assert second.returncode == 2 and second.stdout == ""
    assert second.stderr.splitlines() == [f"error: {out} is being written by another process (lock "
                                          f"{tmp_path}/.r.jsonl.lock); wait for it to finish or choose another --output"]
    assert first.wait(timeout=1200) == 0, first.stderr[-1500:]
    ids = [r["id"] for r in read_jsonl(out)]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == len(rows)
    again = _audit(*args, "--resume", "--json", cwd=tmp_path, env={"TEXTAUDIT_CACHE": str(cache)})
    assert again.returncode == 0, again.stderr[-1500:]
    assert [r["id"] for r in read_jsonl(out)] == ids and json.loads(again.stdout.splitlines()[-1])["n"] == len(rows)


def test_two_trainings_into_one_directory_the_second_is_refused(world, tmp_path):
    from textaudit.files import file_lock

    root, cache = world
    (tmp_path / "d.tsv").write_text("label\ttext\n" + "".join(f"{i % 2}\tfilm {i} was {'good' if i % 2 else 'bad'}\n"
                                                               for i in range(40)))
    out = tmp_path / "m"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom textaudit.files import file_lock\n"
                               f"with file_lock({str(out)!r}):\n    print('held', flush=True)\n    time.sleep(60)\n"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"  # another process is training into m
        r = _audit("train", "--model", "bow", "--data", str(tmp_path / "d.tsv"), "--out", str(out), cwd=tmp_path,
                   env={"TEXTAUDIT_CACHE": str(cache)})
        assert r.returncode == 2 and r.stderr.splitlines() == [
            f"error: another process is training into {out} (lock .m.lock next to it); wait for it to finish or "
            "choose another --out"]
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
    assert file_lock(out, timeout=0).acquire() is not None  # the lock died with its process


def test_a_zoo_model_trained_by_another_process_is_waited_for_and_used(tmp_path, capsys):
    """Two processes using one zoo model for the first time: the second waits for the first's
    training instead of training the same model into the same place."""
    from textaudit.models.zoo import train_model

    out = tmp_path / "bow"
    script = ("import json, sys, time\nfrom pathlib import Path\nfrom textaudit.files import file_lock\n"
              f"out = Path({str(out)!r})\nwith file_lock(out):\n    print('held', flush=True)\n    time.sleep(1.5)\n"
              "    out.mkdir()\n    (out / 'textaudit.json').write_text('{}')\n")
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    r = train_model("bow", out=out, if_missing=True)
    holder.wait()
    assert r == {"model": "bow", "path": str(out), "trained_by_another_process": True}
    assert f"notice: another process is training 'bow' into {out}; waiting for it" in capsys.readouterr().err


def test_one_dataset_spelled_two_ways_has_one_set_of_ids(world, tmp_path, cli):
    """``sst2`` means ``sst2:dev`` in ids and headers too: a resume spelled the other way redoes nothing."""
    from textaudit.data import dataset_id
    from textaudit.results import read_header, read_jsonl

    assert dataset_id("sst2", "dev") == dataset_id("SST2:validation", "dev") == "sst2:dev"
    assert dataset_id("sst2", "train") == "sst2:train" and dataset_id(f"{tmp_path}/x.tsv") == "x.tsv"
    root, _ = world
    out = tmp_path / "r.jsonl"
    args = ["attack", "--model", f"{root}/good.py:clf", "--method", "genetic", "--limit", "3", "--no-ppl",
            "--output", str(out)]
    assert cli(*args, "--data", "sst2").exit_code == 0
    first = read_jsonl(out)
    assert [r["id"] for r in first] == ["sst2:dev:0", "sst2:dev:1", "sst2:dev:2"]
    assert read_header(out)["config"]["data"] == "sst2:dev"
    r = cli(*args, "--data", "sst2:dev", "--resume", "--json")
    assert r.exit_code == 0, r.output
    assert read_jsonl(out) == first and json.loads(r.stdout.splitlines()[-1])["n"] == 3


def test_a_resume_with_another_budget_is_refused_even_when_one_side_is_none(world, tmp_path):
    """The full configuration is compared on resume: no budget and a budget of 500 are two runs."""
    from textaudit.attacks import make_attack, run_attack
    from textaudit.errors import TextAuditError
    from textaudit.models.registry import load_plugin

    root, _ = world
    clf = load_plugin(f"{root}/good.py:clf")
    out = tmp_path / "r.jsonl"
    run_attack(make_attack("genetic", clf), ["a good film ."], [1], output=out, progress=False)
    with pytest.raises(TextAuditError, match=r"max_queries: None → 500"):
        run_attack(make_attack("genetic", clf, max_queries=500), ["a good film ."], [1], output=out, resume=True,
                   progress=False)


def test_a_resume_with_another_model_is_refused(tmp_path, cli):
    """The header records the model's fingerprint (here: the plug-in's source): a changed model is another run."""
    (tmp_path / "p.py").write_text(GOOD)
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta good film .\n0\ta dull film .\n")
    args = ["attack", "--model", f"{tmp_path}/p.py:clf", "--method", "genetic", "--data", str(tmp_path / "d.tsv"),
            "--no-ppl", "--output", str(tmp_path / "r.jsonl")]
    assert cli(*args).exit_code == 0
    assert cli(*args, "--resume").exit_code == 0  # the same model continues
    (tmp_path / "p.py").write_text(GOOD.replace("0.3, 0.7", "0.2, 0.8"))
    r = cli(*args, "--resume")
    assert r.exit_code == 2 and "model_fingerprint:" in r.stderr and r.stderr.count("\n") == 1


def test_a_masked_lm_with_nan_weights_stops_the_run_instead_of_giving_empty_neighbourhoods(tiny_mlm, tmp_path, cli):
    """Class 5: NaN scores used to leave every neighbourhood empty — an audit that looks robust. Now
    they stop the run in one line, in Python and on the command line (exit 2, no file changed)."""
    import copy

    import torch

    from textaudit.errors import StopRun
    from textaudit.neighborhoods import NeighborhoodBuilder

    broken = copy.deepcopy(tiny_mlm)
    broken.clear_cache()
    with torch.no_grad():
        next(broken.model.parameters()).fill_(float("nan"))
    with pytest.raises(StopRun, match="gave NaN scores"):
        NeighborhoodBuilder(broken, kappa=3).neighbors("a deep and meaningful film .", 1)
    assert NeighborhoodBuilder(tiny_mlm, kappa=3, delta=1e9).neighbors("a deep and meaningful film .", 1)
    broken.model.save_pretrained(tmp_path / "mlm")
    broken.tokenizer.save_pretrained(tmp_path / "mlm")
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ta deep and meaningful film .\n")
    (tmp_path / "p.py").write_text("def clf(texts):\n    return [[0.4, 0.6] for t in texts]\n")
    (tmp_path / "pairs.txt").write_text("film,movie\n")
    out = tmp_path / "o.jsonl"
    r = cli("attack", "--model", f"{tmp_path}/p.py:clf", "--mlm", str(tmp_path / "mlm"), "--data", str(tmp_path / "d.tsv"),
            "--k", "1", "--method", "so-enum", "--pairs-file", str(tmp_path / "pairs.txt"), "--no-ppl", "--output", str(out))
    assert r.exit_code == 2 and "gave NaN scores" in r.output and "Traceback" not in r.output, r.output
    assert not [line for line in out.read_text().splitlines()[1:] if line.strip()]  # no record, only the header


def test_a_one_word_example_is_an_error_record_not_a_crash_of_the_whole_run(tmp_path, cli):
    """Class 1: ranking the patch words parsed every example as a neighbourhood sentence, so one
    one-word example (SST-2 train has thousands: "tiresomely") stopped the run before any record."""
    (tmp_path / "d.tsv").write_text("label\ttext\n1\ttiresomely\n1\ta deep and meaningful film .\n")
    (tmp_path / "p.py").write_text("def clf(texts):\n    return [[0.9, 0.1] if 'movie' in t.split() else [0.1, 0.9] "
                                   "for t in texts]\n")
    (tmp_path / "pairs.txt").write_text("film,movie\n")
    out = tmp_path / "o.jsonl"
    r = cli("attack", "--model", f"{tmp_path}/p.py:clf", "--mlm", "minilm-mlm", "--data", str(tmp_path / "d.tsv"),
            "--k", "1", "--method", "so-enum", "--pairs-file", str(tmp_path / "pairs.txt"), "--no-ppl",
            "--output", str(out))
    assert r.exit_code == 0, r.output
    from textaudit.results import read_jsonl

    recs = {x["text"]: x for x in read_jsonl(out)}
    assert recs["tiresomely"]["status"] == "error" and "fewer than two words" in recs["tiresomely"]["reason"]
    assert recs["a deep and meaningful film ."]["status"] == "success"


# -- masked-LM corpora, their sources.json and artifact metadata (class 3: trusted fields) ----------
@pytest.mark.parametrize("name, content, message", [
    ("a.txt", b"caf\xe9 au lait is good\n", "is not UTF-8 text"),
    ("a.jsonl", b'{"text": "a fine sentence here"}\n{"text": \n', "line 2: not a JSON object"),
    ("a.jsonl", b'{"sentence": "no text field here"}\n', "line 1: 'text' must be a string (got NoneType)"),
    ("a.jsonl", b'{"text": 42}\n', "line 1: 'text' must be a string (got int)"),
    ("a.jsonl", b'["text", "a list"]\n', "line 1: 'text' must be a string"),
])
def test_a_damaged_corpus_file_is_one_line_naming_the_file_and_line(tmp_path, name, content, message):
    from textaudit.errors import TextAuditError
    from textaudit.neighborhoods.corpus import read_corpus

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / name).write_bytes(content)
    with pytest.raises(TextAuditError, match=None) as e:
        read_corpus(tmp_path / "c")
    assert message in str(e.value) and name in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not readable JSON"),
    ('["a.txt"]', "holds a list, not an object"),
    ('{"a.txt": "wikipedia"}', "the entry of 'a.txt' must be an object of strings"),
    ('{"a.txt": {"source": "x", "licence": 3}}', "the entry of 'a.txt' must be an object of strings"),
])
def test_a_damaged_sources_json_is_refused_before_training_not_after(tmp_path, content, message):
    """It was read only when the first checkpoint was saved — after the training it describes."""
    from textaudit.errors import TextAuditError
    from textaudit.neighborhoods.train_mlm import corpus_sources

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.txt").write_text("one fine sentence of text\n")
    (tmp_path / "c" / "sources.json").write_text(content)
    with pytest.raises(TextAuditError) as e:
        corpus_sources([tmp_path / "c"])
    assert message in str(e.value) and "sources.json" in str(e.value) and "\n" not in str(e.value)
    (tmp_path / "c" / "sources.json").write_text('{"a.txt": {"source": "my notes", "licence": "CC0"}}')
    assert corpus_sources([tmp_path / "c"]) == ["my notes (CC0)"]


@pytest.mark.parametrize("meta, message", [
    ({"scale": "abc"}, "metadata 'scale' is 'abc', not a finite number"),
    ({"scale": "nan"}, "metadata 'scale' is 'nan', not a finite number"),
    ({"scale": "2.0", "info": "{"}, "metadata 'info' is not a JSON object"),
    ({"scale": "2.0", "info": "[1, 2]"}, "metadata 'info' is not a JSON object"),
])
def test_a_minilm_mlm_artifact_with_bad_metadata_is_one_line(tmp_path, cli, meta, message):
    import torch
    from safetensors.torch import save_file

    art = tmp_path / "mine.safetensors"
    save_file({"lora.layer.A": torch.zeros(2, 2)}, str(art), metadata=meta)
    r = cli("neighbors", "--mlm", str(art), "--k", "1", "a deep and meaningful film .")
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
    assert r.output.count("error:") == 1


@pytest.mark.parametrize("first, then", [(["--precision", "bf16"], []), ([], ["--precision", "bf16"])])
def test_a_results_file_is_never_resumed_at_another_precision(tmp_path, cli, first, then):
    """#53: scores differ in the last digits between fp32 and bf16, so the header says a reduced precision
    and a --resume at the other one is refused in one line (before, bf16 and fp32 records were mixed)."""
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "d.tsv").write_text(DATA["d.tsv"])
    args = ["attack", "--model", f"{tmp_path}/good.py:clf", "--method", "so-enum", "--k", "1", "--data",
            str(tmp_path / "d.tsv"), "--no-ppl", "--store", "off", "--output", str(tmp_path / "r.jsonl")]
    r = cli(*args, "--limit", "1", *first)
    assert r.exit_code == 0, r.output
    from textaudit.results import read_header

    header = read_header(tmp_path / "r.jsonl")
    assert header["config"].get("precision") == ({"mlm": "bf16"} if first else None)
    r = cli(*args, "--resume", *then)
    assert r.exit_code == 2 and "precision" in r.output and "written with other settings" in r.output, r.output
    assert "Traceback" not in r.output
    r = cli(*args, "--resume", *first)  # at its own precision it continues
    assert r.exit_code == 0, r.output


# -- every number of every command -------------------------------------------------------------------

def _commands():
    """Every command of ``audit`` (subcommands of groups included): ``(words, click command)``."""
    from typer.main import get_command

    from textaudit.cli.main import app

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in sorted(cmd.commands.items()):
                yield from walk(sub, [*path, name])
        else:
            yield path, cmd

    return list(walk(get_command(app), []))


def _numeric(cmd):
    return [p for p in cmd.params if not getattr(p, "is_flag", False) and getattr(p, "opts", None)
            and p.opts[0].startswith("--") and str(p.bare_type()) in ("int", "float")]


#: (option, value) a command takes by design: δ = inf keeps the top κ whatever their logits
MEANINGFUL = {("--delta", "inf")}
#: what a command needs besides the number for its own checks of it to be reached (harden checks its method
#: before its ranges: a nonsense method would be the refusal)
BASE = {"harden": ["--method", "augment", "--out", "h"]}


@pytest.mark.parametrize("words", [" ".join(w) for w, c in _commands() if _numeric(c)])
def test_every_number_of_every_command_is_checked_before_anything_runs(words, cli, tmp_path, monkeypatch):
    """NaN, ±inf, a negative number, 0 where the option's least value is above it, and absurd sizes (1e30,
    10**30) given to each numeric option of each command: one line, exit 2, no traceback, naming the
    option — and before anything loads (the model, data and folders given are nonsense: a refusal that
    came from them would not name the option)."""
    import re

    monkeypatch.chdir(tmp_path)
    path, cmd = next((w, c) for w, c in _commands() if " ".join(w) == words)
    required = list(BASE.get(words, []))
    for q in cmd.params:
        if q.required and not (q.param_type_name == "option" and q.opts[0] in required):
            required += ([q.opts[0]] if q.param_type_name == "option" else []) + ["nope"]
    failures = []
    for p in _numeric(cmd):
        is_float = str(p.bare_type()) == "float"
        values = ["nan", "inf", "-inf", "-1", "1e30", str(10**30)] if is_float else ["-1", str(10**30), "nan", "inf"]
        if p.min is not None and p.min > 0:
            values.append("0")
        for v in values:
            if (p.opts[0], v) in MEANINGFUL:
                continue
            args = [a for a in required if a != p.opts[0]]
            if p.opts[0] in required:  # a required number (store prune --max-gb): given only once
                i = required.index(p.opts[0])
                args = required[:i] + required[i + 2:]
            r = cli(*path, *args, p.opts[0], v)
            name = p.opts[0].lstrip("-")
            said = r.output.strip()
            ok = (r.exit_code == 2 and "Traceback" not in r.output and len(said.splitlines()) == 1
                  and said.startswith("error:")
                  and (p.opts[0] in said or re.search(rf"(?<![\w-]){re.escape(name.replace('-', ' '))}(?![\w-])", said)
                       or re.search(rf"(?<![\w-]){re.escape(name.split('-')[0])}\b", said)))
            if not ok:
                failures.append(f"{words} {p.opts[0]} {v}: exit {r.exit_code}: {said[:200]}")
    assert not failures, "\n".join(failures)
