"""One contract battery for every attack method in the registry (scikit-learn's estimator checks,
for attacks): statuses, budgets, bad input, the record schema, and order-free determinism."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from textaudit.attacks import METHODS, PatchWords, make_attack
from textaudit.attacks.base import AttackResult, Status
from textaudit.models import as_classifier
from textaudit.models.encoders import SentenceEncoder

X1 = "a deep and meaningful film ."
X2 = "the film is a deep and moving story ."
PAIRS = [("film", "movie")]
NEIGHBORS = {"film": ["movie", "picture"], "deep": ["profound", "thick"], "meaningful": ["significant"],
             "moving": ["touching", "stirring"], "story": ["tale", "narrative"]}
STATUSES = set(Status.__args__)
#: the JSONL schema of one attacked example (a change here is a change for every user's results file)
KEYS = {"text", "label", "prediction", "status", "method", "k", "pair", "patch_position", "vulnerable",
        "vulnerable_patched", "vulnerable_prediction", "vulnerable_patched_prediction", "f_soft", "l0", "queries",
        "mlm_queries", "sentences_scored", "seconds", "mlm", "reason"}
#: fields that measure the machine, not the answer (queries count the distinct texts an example asked
#: for, whatever the cache held: they are part of the answer)
MEASURES = ("seconds",)


def hashed(name: str = "hashed"):
    """P(positive) is a fixed pseudo-random function of the text: every method has work to do."""

    def f(texts):
        p = [0.05 + 0.9 * int(hashlib.md5(t.encode()).hexdigest()[:6], 16) / 0xFFFFFF for t in texts]
        return np.array([[1 - q, q] for q in p])

    return as_classifier(f, name=name)


def constant():
    return as_classifier(lambda texts: np.tile([0.2, 0.8], (len(texts), 1)), name="constant")


@pytest.fixture(scope="module")
def encoder():
    return SentenceEncoder(device="cpu")


@pytest.fixture
def build(tiny_mlm, encoder):
    """build(method, classifier, **options): the method on small real components."""

    def make(method, clf, **options):
        spec = METHODS[method]
        # naturalness off: the paper's search (a tiny random masked LM knows nothing of natural English)
        extra = {"mlm": tiny_mlm, "kappa": 5, "delta": 1e9, "patch_words": PatchWords(clf, PAIRS),
                 "k": 2, "beam": 3, "neighbors": NEIGHBORS, "encoder": encoder, "threshold": 0.0, "naturalness": False}
        opts = {key: v for key, v in extra.items() if key in spec.options}
        return make_attack(method, clf, **{**opts, **options})

    return make


@pytest.mark.parametrize("method", sorted(METHODS))
def test_statuses_and_schema(build, method):
    atk = build(method, hashed())
    for text in (X1, X2):
        r = atk.attack(text, label=None)
        assert isinstance(r, AttackResult)
        assert r.status in STATUSES
        assert set(r.to_dict()) == KEYS
        assert r.method == method
        if r.status == "success":
            assert r.vulnerable is not None and r.l0 is not None and r.l0 >= 0
        else:
            assert r.vulnerable is None and r.reason


@pytest.mark.parametrize("method", sorted(METHODS))
def test_one_word_input_is_an_error(build, method):
    r = build(method, hashed()).attack("wonderful", label=1)
    assert r.status == "error" and "two words" in r.reason


@pytest.mark.parametrize("method", sorted(METHODS))
def test_query_budget_is_honoured(build, method):
    """A classifier nothing fools: without a budget the search runs to its end; with one it stops
    as soon as the budget is spent, says so, and uses fewer queries."""
    free = build(method, constant()).attack(X2, label=1)
    assert free.status == "failed" and free.reason != "query budget exhausted"
    budget = 3
    assert free.queries > budget
    capped = build(method, constant(), max_queries=budget).attack(X2, label=1)
    assert capped.status == "failed" and capped.reason == "query budget exhausted"
    assert budget <= capped.queries < free.queries


@pytest.mark.parametrize("method", sorted(METHODS))
def test_records_do_not_depend_on_order(build, method):
    """A fixed seed gives every example the same record whatever ran before it."""
    a = build(method, hashed(), seed=7)
    first = [a.attack(x, label=None).to_dict() for x in (X1, X2)]
    b = build(method, hashed(), seed=7)
    second = [b.attack(x, label=None).to_dict() for x in (X2, X1)][::-1]
    for r in first + second:
        for m in MEASURES:
            r.pop(m)
    assert first == second


def test_a_success_the_classifier_does_not_confirm_is_refused(build):
    """The post-condition at the edge: a classifier that answers differently when asked again
    (here: its first answer for a text is flipped) never yields a "success"."""
    asked: set[str] = set()

    def fickle(texts):
        out = []
        for t in texts:
            flip = t not in asked and "movie" in t
            asked.add(t)
            out.append([0.9, 0.1] if flip else [0.1, 0.9])
        return np.array(out)

    clf = as_classifier(fickle, name="fickle", cache_size=0)
    r = build("so-beam", clf).attack(X1, label=None)
    assert r.status == "error" and r.reason.startswith("post-condition failed")


@pytest.mark.parametrize("args, message", [
    (["--method", "genetic", "--beam", "5"], "--beam applies to --method so-beam only, not to genetic"),
    (["--method", "bae", "--kappa", "5"], "--kappa applies to --method so-beam, so-enum, random only"),
    (["--method", "so-beam", "--threshold", "0.9"], "--threshold applies to --method bae only"),
    (["--method", "so-beam", "--lm-constraint"], "--lm-constraint applies to --method genetic only"),
    (["--method", "so-enum", "--k", "3"], "supports k <= 2"),
    (["--k", "0"], "k must be at least 1"),
    (["--beam", "0"], "beam width β must be at least 1"),
    (["--max-queries", "0"], "--max-queries must be at least 1"),
    (["--time-budget", "-1"], "--time-budget must be a positive number"),
    (["--method", "nope"], "unknown attack method 'nope'"),
])
def test_the_method_table_rejects_options_before_any_model_loads(cli, args, message):
    """The model named does not exist: the option error must come first (nothing is loaded or trained)."""
    r = cli("attack", "--model", "no-such-model", *args)
    assert r.exit_code == 2, r.output
    assert message in r.output and "unknown model" not in r.output and "Traceback" not in r.output


@pytest.fixture(scope="module")
def tiny_cnn():
    """A real zoo cnn (id encoder and all) trained for one epoch on 300 SST-2 train sentences."""
    from textaudit.data import load_dataset
    from textaudit.models.zoo import TrainConfig, fit_classifier

    texts = [t for t in load_dataset("sst2:train", limit=2000)["text"] if len(t.split()) >= 4][:300]
    labels = [int(any(w in t.split() for w in ("good", "best", "fun", "great"))) for t in texts]
    return fit_classifier("cnn", texts, labels, config=TrainConfig(arch="cnn", epochs=1, batch_size=32, holdout=0.0),
                          progress=False, device="cpu")


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.slow
def test_token_ids_and_texts_give_the_same_records(build, method, tiny_cnn, tiny_mlm):
    """The engine's id path (sentences spliced as token ids, batches packed to a token budget) and
    the old text path answer every method with the same records."""
    from textaudit.data import load_dataset

    texts = [X1, X2] + [t for t in load_dataset("sst2:dev", limit=60)["text"] if " film " in t][:4]
    records = {}
    try:
        for use_ids in (True, False):
            tiny_cnn.use_ids = tiny_mlm.use_ids = use_ids
            tiny_cnn.clear_cache()
            tiny_mlm.clear_cache()
            atk = build(method, tiny_cnn)
            records[use_ids] = [atk.attack(t, label=None).to_dict() for t in texts]
            if use_ids:
                assert tiny_cnn.stats.device_seconds > 0
    finally:
        tiny_cnn.use_ids = tiny_mlm.use_ids = True
    for a, b in zip(records[True], records[False]):
        fa, fb = a.pop("f_soft"), b.pop("f_soft")
        assert (fa is None) == (fb is None) and (fa is None or abs(fa - fb) <= 1e-5)
        assert {k: v for k, v in a.items() if k not in MEASURES} == {k: v for k, v in b.items() if k not in MEASURES}
    assert {r["status"] for r in records[True]} - {"error"}, records[True]


def _by_id(records: list[dict]) -> dict[str, dict]:
    """Records keyed by id, without the one field that measures the machine (seconds)."""
    return {r["id"]: {k: v for k, v in r.items() if k != "seconds"} for r in records}


@pytest.mark.parametrize("method", sorted(METHODS))
def test_records_do_not_depend_on_how_many_examples_are_in_flight(build, method, tiny_cnn, tmp_path):
    """The engine (many examples in flight, their asks merged into one forward per step) gives every
    example the record it gets alone — queries included — with 1, 4 and 64 in flight, and after a run
    stopped part-way is resumed with another number in flight."""
    from textaudit.attacks.run import run_attack
    from textaudit.data import load_dataset

    ds = load_dataset("sst2:dev", limit=12)
    texts, labels = [X1, X2, *ds["text"]], [None, None, *ds["label"]]
    labels = None if method in ("so-enum", "so-beam", "random") else [1, 1, *ds["label"]]
    runs, forwards = {}, {}
    for n in (1, 4, 64):
        tiny_cnn.clear_cache()  # what the cache holds must not matter either
        before = (tiny_cnn.stats.unique_forwards, tiny_cnn.stats.batches)
        _, records = run_attack(build(method, tiny_cnn, seed=3), texts, labels, progress=False, in_flight=n,
                                output=tmp_path / f"{n}.jsonl")
        forwards[n] = (tiny_cnn.stats.unique_forwards - before[0], tiny_cnn.stats.batches - before[1])
        runs[n] = _by_id(records)
        assert len(runs[n]) == len(texts)
    assert runs[1] == runs[4] == runs[64]
    # the model's forwards are fuller with many in flight (the same texts, give or take the two or three
    # a first run asks once per process: the model's class count, the patch-word cache's fingerprint)
    per_forward = {n: texts_ / max(batches, 1) for n, (texts_, batches) in forwards.items()}
    assert per_forward[64] > per_forward[1] and forwards[64][1] < forwards[1][1], forwards
    assert {r["status"] for r in runs[1].values()} - {"error", "skipped"}, runs[1]
    # stopped after 5 examples (as a kill would leave it), then resumed with 64 in flight
    out = tmp_path / "resumed.jsonl"

    def stop_after_five(rec: dict, seen: list = []) -> None:  # noqa: B006 - a counter across calls
        seen.append(rec)
        if len(seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_attack(build(method, tiny_cnn, seed=3), texts, labels, progress=False, in_flight=4, output=out,
                   on_result=stop_after_five)
    assert len(out.read_text().splitlines()) == 1 + 5  # the header and five records
    _, resumed = run_attack(build(method, tiny_cnn, seed=3), texts, labels, progress=False, in_flight=64,
                            output=out, resume=True)
    assert _by_id(resumed) == runs[1]
