"""Counterfactual token bias B_{p,k} on a tiny real masked LM and planted classifiers."""

from __future__ import annotations

import json
import sys
import zlib

import numpy as np
import pytest

from textaudit.errors import TextAuditError
from textaudit.fairness import CounterfactualBias, clustered_mean, find_sources, parse_pair, run_bias
from textaudit.fairness.estimates import claim_status
from textaudit.models import as_classifier
from textaudit.neighborhoods import NeighborhoodBuilder

TEXTS = ["he said the film was a deep and moving story .",
         "the story is slow but he makes it work .",
         "she gives a warm and funny performance here .",
         "a dull plot that nobody will remember .",
         "he and she are both good ."]  # both words: not in X_p


def _word_score(w: str) -> float:
    return (zlib.crc32(w.encode()) % 1000) / 1000 - 0.5


def planted(she_bonus: float):
    """P(positive) = sigmoid(Σ word scores + she_bonus·[she ∈ x]): a model that prefers 'she'."""

    def f(texts):
        out = []
        for t in texts:
            words = t.lower().split()
            z = sum(_word_score(w) for w in words if w not in ("he", "she")) + she_bonus * ("she" in words)
            p = 1 / (1 + np.exp(-z))
            out.append([1 - p, p])
        return np.array(out)

    return as_classifier(f, name=f"she{she_bonus}")


def test_sources_pair_direction_and_errors():
    src = find_sources(TEXTS, ("he", "she"))
    assert [(s.id, s.position, s.reversed) for s in src] == [("0", 0, False), ("1", 5, False), ("2", 0, True)]
    assert parse_pair("He/She") == ("he", "she")
    with pytest.raises(TextAuditError, match="not a word pair"):
        parse_pair("he")
    est = CounterfactualBias(planted(1.0), mlm=object(), blacklist=())
    with pytest.raises(TextAuditError, match="no sentence of the data contains exactly one 'actor'"):
        est.sources(TEXTS, ("actor", "actress"))


#: twelve sources of X_p (he/she once each; the last four hold 'she'): enough for a claim (MIN_CLAIM_SOURCES)
MANY = [f"{'she' if i >= 8 else 'he'} {adj} the {noun} ." for i, (adj, noun) in enumerate(
    zip(["liked", "hated", "saw", "found", "made", "wrote", "told", "read", "sold", "kept", "lost", "took"],
        ["film", "story", "plot", "song", "play", "book", "cast", "end", "show", "joke", "part", "scene"]))]


def test_planted_bias_has_the_right_sign_and_ci_excludes_zero(tiny_mlm):
    est = CounterfactualBias(planted(1.0), tiny_mlm, kappa=5, delta=1e9)
    by_k = est.estimate_all("he,she", 1, MANY)
    assert sorted(by_k) == [0, 1]
    for kk, e in by_k.items():
        assert e.B > 0.05 and e.excludes_zero and e.significant, (kk, e)
        assert e.sources == 12 and e.ci_method.startswith("clustered") and claim_status(e) == "yes"
    assert by_k[0].n == 12 and by_k[1].n > 12
    # the reversed sources (hold 'she') are measured in the same direction: F > 0 there too
    assert (by_k[0].values > 0).all()
    neg = CounterfactualBias(planted(-1.0), tiny_mlm, kappa=5, delta=1e9).estimate("he,she", 1, MANY)
    assert neg.B < -0.05 and neg.significant


def test_an_interval_on_few_sources_makes_no_claim_and_one_source_has_no_interval(tiny_mlm):
    """#84: three sources give an interval that excludes 0 but no claim ("CI excludes 0" reads why); one source gives
    no interval at all (the i.i.d. interval over one neighbourhood's sentences was zero-width at k = 1 and "significant")."""
    est = CounterfactualBias(planted(1.0), tiny_mlm, kappa=5, delta=1e9)
    by_k = est.estimate_all("he,she", 2, TEXTS)
    assert sorted(by_k) == [0, 1, 2]
    for kk, e in by_k.items():
        assert e.B > 0.05 and e.excludes_zero and not e.significant, (kk, e)
        assert e.sources == 3 and claim_status(e) == "no claim (3 sources < 10)"
        assert e.to_dict()["significant"] is False and e.to_dict()["claim"] == "no claim (3 sources < 10)"
    assert by_k[0].n == 3 and by_k[2].n > by_k[1].n > 3
    one = est.estimate_all("he,she", 1, TEXTS[:1])
    for e in one.values():
        assert e.sources == 1 and np.isnan(e.ci95).all() and e.ci_method.startswith("none: one source sentence")
        assert not e.excludes_zero and not e.significant and claim_status(e) == "no interval (1 source)"
        assert e.to_dict()["ci95"] == [None, None]
    assert one[1].n > 1  # many sentences, still one cluster


def test_model_that_ignores_the_pair_has_zero_bias(tiny_mlm):
    e = CounterfactualBias(planted(0.0), tiny_mlm, kappa=5, delta=1e9).estimate(("he", "she"), 2, TEXTS)
    assert abs(e.B) < 1e-9 and e.ci95[0] <= 0 <= e.ci95[1] and not e.significant


def test_blacklist_is_honoured_and_pair_position_kept(tiny_mlm):
    x = TEXTS[0]
    free = NeighborhoodBuilder(tiny_mlm, kappa=5, delta=1e9).neighbors(x, 1, protected=[0])
    introduced = sorted({w.lower() for nb in free for w in nb.sentence.tokens} - set(x.split()))
    assert len(introduced) >= 4
    banned = introduced[:4]
    est = CounterfactualBias(planted(1.0), tiny_mlm, kappa=5, delta=1e9, blacklist=banned)
    src = est.sources([x], ("he", "she"))[0]
    sents, dist, _ = est.neighborhood(src, ("he", "she"), 2)
    assert len(sents) > 20
    for s in sents:
        assert s.tokens[0] == "he"
        assert not set(w.lower() for w in s.tokens) & set(banned)


def test_sampled_level_is_weighted_by_the_estimated_size(tiny_mlm):
    x = "the story is slow but he makes it work ."
    b = NeighborhoodBuilder(tiny_mlm, kappa=3, delta=1e9)
    exact = sum(b.counts(x, 2, protected=[5]))
    b.sample(x, 2, 400, protected=[5], seed=3)
    est = b.last_sample_stats["size_estimate"]
    assert abs(est - exact) / exact < 0.2, (est, exact)
    bias = CounterfactualBias(planted(1.0), tiny_mlm, kappa=3, delta=1e9, enumerate_k=1, sample=50)
    by_k = bias.estimate_all("he,she", 2, TEXTS[:3])
    assert by_k[2].sampled and not by_k[1].sampled and by_k[2].n == 150 and by_k[2].B > 0.05
    assert by_k[1].size == by_k[1].n and by_k[2].size > 2 * by_k[1].size  # the estimated |Neighbor_2(X_p)|


def test_clustered_mean_matches_the_ratio_formula():
    sums, sizes = [np.array(3.0), np.array(1.0), np.array(-1.0)], [3, 2, 1]
    B, half, method = clustered_mean(sums, sizes)
    assert B == pytest.approx(0.5)
    resid = np.array([3 - 1.5, 1 - 1.0, -1 - 0.5])
    assert half == pytest.approx(1.96 * np.sqrt(3 / 2 * (resid ** 2).sum() / 36))
    B1, half1, m1 = clustered_mean([np.array(2.0)], [4])  # one cluster: no interval (no i.i.d. fallback)
    assert B1 == 0.5 and np.isnan(half1) and m1.startswith("none: one source sentence")


def test_multiclass_reports_per_class_vector(tiny_mlm):
    def f(texts):
        return np.array([[0.2, 0.5, 0.3] if "she" in t.split() else [0.4, 0.3, 0.3] for t in texts])

    e = CounterfactualBias(as_classifier(f, name="three"), tiny_mlm, kappa=3, delta=1e9).estimate("he,she", 1, TEXTS)
    assert e.per_class == pytest.approx([-0.2, 0.2, 0.0]) and e.B == pytest.approx(0.4)


def test_run_bias_resumes_from_output_without_recomputing(tiny_mlm, tmp_path):
    est = CounterfactualBias(planted(1.0), tiny_mlm, kappa=4, delta=1e9, enumerate_k=1, sample=20)
    other = CounterfactualBias(planted(0.0), tiny_mlm, kappa=4, delta=1e9, enumerate_k=1, sample=20)
    out = tmp_path / "b.jsonl"
    first = run_bias(est, [("he", "she")], 2, TEXTS, compare=other, output=out, progress=False)
    lines = out.read_text().splitlines()
    # cut the file inside the last unit, as a kill would
    out.write_text("\n".join(lines[:-5]) + "\n" + lines[-5][:10])
    calls = {"n": 0}
    real = est.ask_neighborhood

    def counting(*a, **kw):
        calls["n"] += 1
        return real(*a, **kw)

    est.ask_neighborhood = counting
    again = run_bias(est, [("he", "she")], 2, TEXTS, compare=other, output=out, resume=True, progress=False)
    assert calls["n"] == 1  # only the cut unit was recomputed
    for name in first:
        for kk, e in first[name][("he", "she")].items():
            assert again[name][("he", "she")][kk].B == pytest.approx(e.B, abs=1e-6)
    assert first["she0.0"][("he", "she")][2].B == pytest.approx(0.0, abs=1e-9)
    markers = [json.loads(l) for l in out.read_text().splitlines() if "unit_done" in l]
    # the first model's marker of the cut unit survived the cut; the unit was redone for both models
    assert len(markers) == len({(m["unit_done"], m["model"]) for m in markers}) + 1


def test_cli_bias_bad_inputs(cli, tmp_path):
    r = cli("bias", "--model", "nope", "--pair", "he,she", "--k", "0")
    assert r.exit_code == 2 and "unknown model 'nope'" in r.output
    r = cli("bias", "--model", "bow", "--k", "0")
    assert r.exit_code == 2 and "exactly one of --pair" in r.output
    r = cli("bias", "--pair", "he", "--k", "0")
    assert r.exit_code == 2 and "not a word pair" in r.output
    r = cli("bias", "--group", "astrology", "--k", "0")
    assert r.exit_code == 2 and "unknown group" in r.output


def test_cli_bias_json_plots_and_unknown_word(cli, tmp_path):
    from textaudit.models.zoo import train_model

    train_model("bow", max_train=300, epochs=1, progress=False)
    data = tmp_path / "d.tsv"
    data.write_text("label\ttext\n" + "".join(f"1\t{t}\n" for t in TEXTS))
    r = cli("bias", "--model", "bow", "--pair", "he,she", "--k", "0", "--data", str(data), "--json",
            "--plot", str(tmp_path / "plots"))
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["model"] == "bow" and out["pairs"][0]["pair"] == ["he", "she"]
    assert out["pairs"][0]["by_k"]["0"]["n"] == 3
    # three sources: a warning on stderr and in the JSON, pointing at more data or --ci bootstrap
    assert out["warnings"] == [w for w in r.stderr.splitlines() if w.startswith("warning:")]
    assert "rests on 3 source sentences: its interval is rough and no claim is made (a claim needs 10)" \
        in out["warnings"][0] and "--ci bootstrap" in out["warnings"][0]
    assert {p.name for p in (tmp_path / "plots").iterdir()} == {"hist_he_she.png", "bias_vs_k.png", "pairs_bar.png"}
    r = cli("bias", "--model", "bow", "--pair", "he,she", "--k", "0", "--data", str(data), "--ci", "bootstrap")
    assert r.exit_code == 0 and "k = 0: the source sentences themselves" in r.stdout  # the table's k = 0 row, explained
    assert "warning: B for he→she" in r.stderr and "--ci bootstrap" not in r.stderr  # already bootstrap: more data
    r = cli("bias", "--model", "bow", "--pair", "he,zzqxv", "--k", "0", "--data", str(data))
    assert r.exit_code == 2 and "'zzqxv' is not in the vocabulary of model 'bow'" in r.output


def test_filtered_set_reuses_full_run_units(tiny_mlm, tmp_path):
    # he-sentences with a tiny word-score sum give |F| < ε only if the model ignores the pair
    texts = TEXTS + ["he is here .", "he was there ."]
    biased, blind = planted(1.0), planted(0.0)
    est = CounterfactualBias(blind, tiny_mlm, kappa=3, delta=1e9, enumerate_k=1)
    assert len(est.filter_sources(est.sources(texts, ("he", "she")), ("he", "she"))) == 5
    assert CounterfactualBias(biased, tiny_mlm).filter_sources(est.sources(texts, ("he", "she")), ("he", "she")) == []
    out = tmp_path / "b.jsonl"
    run_bias(est, [("he", "she")], 1, texts, output=out, progress=False, max_sources=4)
    est.neighborhood = None  # a filtered run on the same output must not rebuild anything
    res = run_bias(est, [("he", "she")], 1, texts, output=out, resume=True, filtered=True, progress=False,
                   max_sources=4)
    assert res["she0.0"][("he", "she")][0].sources == 4
    with pytest.raises(TextAuditError, match=r"max_sources: 4 → 5"):  # other sources: not the same run
        run_bias(est, [("he", "she")], 1, texts, output=out, resume=True, progress=False, max_sources=5)
    with pytest.raises(TextAuditError, match="for any pair and model"):
        run_bias(CounterfactualBias(biased, tiny_mlm, kappa=3, delta=1e9), [("he", "she")], 0, texts,
                 filtered=True, progress=False)
    # with a second model, each model keeps its own X_filter: the biased one has none
    both = run_bias(CounterfactualBias(biased, tiny_mlm, kappa=3, delta=1e9), [("he", "she")], 0, texts,
                    compare=CounterfactualBias(blind, tiny_mlm, kappa=3, delta=1e9), filtered=True, progress=False)
    assert both["she1.0"][("he", "she")] == {} and both["she0.0"][("he", "she")][0].sources == 5


def test_scored_sentences_do_not_depend_on_how_many_units_are_in_flight(tiny_mlm, tmp_path):
    """Units (enumerated blocks and sampled levels) built and scored many at once by the engine give the
    rows and B they give one at a time — and after a run stopped part-way is resumed with another number."""
    from textaudit.results import read_jsonl

    def rows(path):
        return sorted((r["unit"], r["model"], r["i"], r["text"], r["distance"], json.dumps(r["F"]))
                      for r in read_jsonl(path) if "unit" in r)

    def estimator():
        return CounterfactualBias(planted(1.0), tiny_mlm, kappa=4, delta=1e9, enumerate_k=1, sample=20, seed=5)

    runs = {}
    for n in (1, None, 64):
        out = tmp_path / f"{n}.jsonl"
        res = run_bias(estimator(), [("he", "she")], 2, TEXTS, output=out, progress=False, in_flight=n)
        runs[n] = (rows(out), {kk: e.B for kk, e in res["she1.0"][("he", "she")].items()})
    assert runs[1] == runs[None] == runs[64]
    assert {r[0].rsplit("|", 1)[1] for r in runs[1][0]} == {"enum", "k=2"}  # enumerated and sampled units
    out = tmp_path / "resumed.jsonl"
    seen = []

    class Stop(Exception):
        pass

    def stop_after_two(*a, **kw):
        seen.append(a)
        if len(seen) == 3:
            raise Stop
        return real(*a, **kw)

    est = estimator()
    real = est.ask_score_unit
    est.ask_score_unit = stop_after_two  # the third unit never starts: two (at most) are written
    with pytest.raises(Stop):
        run_bias(est, [("he", "she")], 2, TEXTS, output=out, progress=False, in_flight=1)
    res = run_bias(estimator(), [("he", "she")], 2, TEXTS, output=out, resume=True, progress=False, in_flight=64)
    assert rows(out) == runs[1][0]
    # units read back from the file carry F rounded to 6 decimals: B agrees to 1e-6
    assert {kk: e.B for kk, e in res["she1.0"][("he", "she")].items()} == pytest.approx(runs[1][1], abs=1e-6)


def test_a_limit_that_cuts_every_source_away_says_so_before_any_model_loads(cli, tmp_path):
    """#52: `--limit 5` gave "no sentence contains he/she" with no word that --limit had cut the data (the user
    meant --max-sources), and only after loading the masked LM. Now: one line, naming --limit and --max-sources,
    before the masked LM or the model loads (the model named does not even exist)."""
    data = tmp_path / "d.tsv"
    data.write_text("label\ttext\n" + "".join(f"1\ta plain film number {i} .\n" for i in range(5))
                    + "1\tshe said the film was fine .\n")
    r = cli("bias", "--model", "no-such-model", "--pair", "he,she", "--data", str(data), "--limit", "5")
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "--limit 5 cuts the data" in r.output and "--max-sources" in r.output and "masked LM" not in r.output
    r = cli("bias", "--model", "no-such-model", "--pair", "he,she", "--data", str(data), "--sample-examples", "2",
            "--seed", "3")
    assert r.exit_code == 2 and "--sample-examples 2 cuts the data" in r.output, r.output  # seed 3 draws no "she"
    r = cli("bias", "--model", "no-such-model", "--pair", "he,she", "--data", str(data))  # the data has X_p: on to the model
    assert r.exit_code == 2 and "cuts the data" not in r.output and "no-such-model" in r.output, r.output


def test_a_bias_run_says_its_cost_per_k_and_time_before_spending_it(tiny_mlm, tmp_path, capsys, monkeypatch):
    """The plan (units, sources) before any work; after the first unit, which runs alone and is timed,
    the sentences per k (k = 0 exact, the others estimated from it) and a time estimate — all before
    the second unit starts; the estimate is near the count the run then scores."""
    monkeypatch.setenv("TEXTAUDIT_PROGRESS_SECONDS", "0")
    texts = ["he said the film was a deep and moving story .", "he thinks the plot is slow but the acting works .",
             "he found a warm and funny performance in it .", "he calls it a dull plot that nobody will remember ."]
    est = CounterfactualBias(planted(1.0), tiny_mlm, kappa=4, delta=1e9, enumerate_k=2, sample=20)
    real = est.ask_score_unit

    def marked(*a, **kw):  # a unit starting says so on stderr, in order with the cost lines
        print("<a unit starts>", file=sys.stderr, flush=True)
        return (yield from real(*a, **kw))

    est.ask_score_unit = marked
    out = tmp_path / "b.jsonl"
    run_bias(est, [("he", "she")], 1, texts, output=out, progress=True)
    err = capsys.readouterr().err
    lines = err.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln == "<a unit starts>"]
    assert len(starts) == 4
    plan = [ln for ln in err.splitlines() if ln.startswith("cost: 4 units to score")]
    assert plan and "4 source sentences of X_p for he/she, k ≤ 1" in plan[0], err
    assert lines.index(plan[0]) < starts[0]
    line = next(ln for ln in lines if ln.startswith("cost: about "))
    assert starts[0] < lines.index(line) < starts[1]  # measured on the first unit, said before the second
    scored = [json.loads(x) for x in out.read_text().splitlines() if '"distance"' in x]
    assert "k=0: 4," in line  # exact
    k1 = int(line.split("k=1: ~")[1].split(";")[0].replace(",", ""))
    real_k1 = sum(r["distance"] == 1 for r in scored)
    assert 0.5 * real_k1 <= k1 <= 2 * real_k1, (k1, real_k1)
    assert "s more at that pace" in line and "--max-sources" in line
    # progress lines: one when the work starts, an ETA once a unit is done
    progress_lines = [ln for ln in err.splitlines() if ln.startswith("bias k<=1: ")]
    assert progress_lines[0].startswith("bias k<=1: 0/4 unit")
    assert any("ETA" in ln for ln in progress_lines if "/4 unit" in ln and not ln.startswith("bias k<=1: 4/4"))


def test_a_default_model_is_named_and_is_the_one_a_first_user_already_has(cli, tmp_path):
    """#84: `audit bias --pair he,she` defaulted to lstm at k = 3 and trained it for twenty minutes, the notice saying
    "about a minute" and nothing saying lstm was a default nobody chose. The default is now cnn (README command 1 trains
    it) and is named before anything runs; a given --model is not."""
    from textaudit.fairness.request import DEFAULT_MODEL, BiasRequest

    assert DEFAULT_MODEL == "cnn" and BiasRequest(pair=["he,she"]).model == "cnn"
    assert BiasRequest(pair=["he,she"]).model_defaulted and not BiasRequest(pair=["he,she"], model="bow").model_defaulted
    data = tmp_path / "none.tsv"
    data.write_text("text\na film with no pair word .\n")
    r = cli("bias", "--pair", "he,she", "--data", str(data), "--k", "0")  # refused before any model loads (or trains)
    assert r.exit_code == 2 and "no --model given: auditing cnn, the default" in r.stderr, r.output
    r = cli("bias", "--pair", "he,she", "--data", str(data), "--k", "0", "--model", "cnn")
    assert r.exit_code == 2 and "no --model given" not in r.output, r.output


def test_the_eta_of_units_in_flight_follows_the_texts_and_contexts_asked(monkeypatch):
    """Many units in flight and none finishing: the ETA comes from the work asked inside them (the old one, elapsed ×
    cost left / cost of the units finished, grew with the elapsed time: 10m27s → 6h57m in a run of 20 minutes). The
    first unit asked 2 texts per estimated sentence and 2 contexts per estimated context (one per changeable position
    at k = 1: n): the run's are projected at those ratios; at the pace measured (0.1 s a text, 1 s a context) what is
    not asked yet is the time left."""
    import textaudit.progress as progress_module
    from textaudit.fairness.cost import BiasClock, BiasCost
    from textaudit.fairness.pairs import Source
    from textaudit.sentence import Sentence

    now = [100.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now[0])
    asked = [0.0, 0.0, 0.0, 0.0]  # texts, contexts, classifier seconds, masked-LM seconds
    cost = BiasCost(1, 1, 200)
    texts = ["he said so", "he said so today", "he said so today , twice", "he left"]
    jobs = [(("he", "she"), Source(str(i), Sentence.parse(t), 0, False), None) for i, t in enumerate(texts)]
    cost.rate = [1.0, 1.0]  # one candidate per position: a unit of n changeable words is 1 + n sentences
    sizes = [cost.sentences(j) for j in jobs]
    ctx = [cost.contexts(j) for j in jobs]
    assert ctx == [len(t.split()) - 1 for t in texts] and sizes == [1 + c for c in ctx]
    clock = BiasClock(cost, lambda: tuple(asked))
    assert clock.remaining() is None  # before the first unit: the count's ETA has nothing either

    def unit(i: int) -> None:  # unit i asks 2 texts a sentence (0.1 s each) and 2 contexts a context (1 s each)
        asked[:] = [a + b for a, b in zip(asked, [2.0 * sizes[i], 2.0 * ctx[i], 0.2 * sizes[i], 2.0 * ctx[i]])]
        now[0] += 0.2 * sizes[i] + 2.0 * ctx[i]

    unit(0)
    clock.first_done(jobs, [jobs[0]])
    assert clock.expected == pytest.approx((2.0 * sum(sizes), 2.0 * sum(ctx)))

    def left(*done: int) -> float:
        return sum(2.0 * sizes[i] * 0.1 + 2.0 * ctx[i] * 1.0 for i in range(4) if i not in done)

    assert clock.remaining() == pytest.approx(left(0))
    # the others in flight, none finished: the ETA falls as they ask, whatever the count of units finished
    unit(1)
    assert clock.remaining() == pytest.approx(left(0, 1))
    # a host that takes as long again as the forwards: twice the time left
    now[0] += sum(0.2 * sizes[i] + 2.0 * ctx[i] for i in (0, 1))
    assert clock.remaining() == pytest.approx(2 * left(0, 1))
    # more asked than projected (the first unit was small for its estimate): the time left is unknown — no ETA, where
    # the count's "elapsed × left / done" grew with the elapsed time and "ETA 0s" would be wrong
    asked[0] += 10 * sum(sizes)
    asked[1] += 10 * sum(ctx)
    assert clock.remaining() is None


def test_a_unit_of_long_sentences_asks_more_contexts_per_sentence():
    """At k = 2 a unit asks one context per changeable position of itself and of each neighbour at distance 1:
    n + n · r_1 · (n − 1), against 1 + n · r_1 + C(n, 2) · r_2 sentences — so the contexts are projected on their own."""
    from textaudit.fairness.cost import BiasCost
    from textaudit.fairness.pairs import Source
    from textaudit.sentence import Sentence

    cost = BiasCost(2, 2, 200)
    cost.rate = [1.0, 3.0, 4.0]
    job = (("he", "she"), Source("0", Sentence.parse("he said so today , twice"), 0, False), None)  # n = 5
    assert cost.contexts(job) == pytest.approx(5 + 5 * 3.0 * 4)
    assert cost.sentences(job) == pytest.approx(1 + 5 * 3.0 + 10 * 4.0)
    assert cost.contexts((("he", "she"), job[1], 3)) == 200 * 3  # a sampled unit: one per step of each draw


def test_the_first_units_are_a_fifth_of_the_run_and_their_rates_are_pooled():
    """One source's neighbourhood says little of the others' (20 sources at k = 2: the first unit's rates projected
    half of what the run asked): a fifth of the units (1 to 16) run first, and r_j is pooled over them —
    Σ sentences at j / Σ C(n, j), not the last unit's."""
    from textaudit.fairness.cost import BiasCost, first_units
    from textaudit.fairness.pairs import Source
    from textaudit.sentence import Sentence

    assert [first_units(n) for n in (1, 4, 5, 6, 20, 80, 200)] == [1, 1, 1, 2, 4, 16, 16]
    cost = BiasCost(1, 1, 200)
    short = (("he", "she"), Source("0", Sentence.parse("he left"), 0, False), None)  # n = 1
    long = (("he", "she"), Source("1", Sentence.parse("he said so today , twice"), 0, False), None)  # n = 5
    cost.measure_units([(short, np.array([0, 1, 1, 1])), (long, np.array([0] + [1] * 5))])
    assert cost.rate[1] == pytest.approx((3 + 5) / (1 + 5)) and cost.measured


def test_the_levels_in_flight_count_when_the_projection_falls_short():
    """The first units projected fewer contexts than the units in flight have begun (their levels' positions are known
    when each level begins): the ETA counts those, not 'no ETA' — and every pair's builder counts into the one
    estimator's list."""
    from textaudit.fairness.cost import BiasClock, BiasCost

    asked = [100.0, 1_000.0, 10.0, 10.0]  # 0.1 s a text, 0.01 s a context
    levels = [1_500.0, 0.0]
    clock = BiasClock(BiasCost(1, 1, 200), lambda: tuple(asked), lambda: list(levels))
    levels[0] += 3_000.0  # levels begun since the clock started: 3,000 contexts
    asked[:] = [200.0, 2_500.0, 20.0, 25.0]
    clock.expected = (100.0, 2_000.0)  # the projection: its texts all asked (100 since the start), contexts exceeded
    assert clock.remaining() == pytest.approx((3_000 - 1_500) * 0.01, rel=0.05)
    est = CounterfactualBias(planted(1.0), None, kappa=4, delta=1e9)
    assert est.builder(("he", "she")).level_contexts is est.builder(("man", "woman")).level_contexts is est.level_contexts
