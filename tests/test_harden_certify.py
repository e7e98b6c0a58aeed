"""#83 item 1: ``audit harden --method masked|substitute`` trains for a smoothing certificate. A tiny real model whose
label is carried by a sprinkling of sentiment words among neutral ones: trained on clean text, RanMASK's 90 %
masks leave it a constant (every "certificate" a constant's); hardened on masked copies drawn by the certificate's
own sampler, its smoothed classifier is right and certified at radius 1 and 2. The hardened model records its
threat model; ``audit certify`` follows it by default and refuses another in one line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

POS = ["great", "wonderful", "charming", "funny", "brilliant", "delightful", "moving", "lovely"]
NEG = ["dull", "boring", "awful", "tedious", "weak", "lame", "poor", "bland"]
FILLER = ["the", "film", "was", "and", "a", "story", "with", "cast", "it", "is", "very", "plot", "acting", "its"]


def _rows(seed: int, n: int) -> list[tuple[int, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        y = i % 2
        words = [rng.choice(POS if y else NEG) if rng.random() < 0.4 else rng.choice(FILLER) for _ in range(12)]
        out.append((y, " ".join(words) + " ."))
    return out


@pytest.fixture(scope="module")
def sprinkled(tmp_path_factory):
    """train.tsv, dev.tsv (held out) and a zoo bow trained on train.tsv, clean."""
    from textaudit.models.zoo.build import train_model

    root = tmp_path_factory.mktemp("sprinkled")
    for name, rows in (("train.tsv", _rows(0, 600)), ("dev.tsv", _rows(1, 40))):
        (root / name).write_text("label\ttext\n" + "".join(f"{y}\t{t}\n" for y, t in rows))
    train_model("bow", data=str(root / "train.tsv"), out=root / "bow", epochs=8, progress=False,
                eval_data=str(root / "dev.tsv"))
    return root


def _harden(root: Path, method: str, out: Path, **extra):
    from textaudit.harden import HardenRequest, harden

    s = HardenRequest(model=str(root / "bow"), method=method, out=out, data=str(root / "train.tsv"),
                      eval_data=str(root / "dev.tsv"), epochs=3, copies=4, eval_attack="so-enum:1",
                      mlm="minilm-mlm", naturalness="off", cert_samples=200, cert_selection=50, **extra)
    return harden(s, out, progress=False)


def _certify(model: str, data: Path, **options):
    from textaudit.robustness.request import CertifyRequest

    r = CertifyRequest(model=model, data=str(data), samples=200, selection=50, **{"neighbors": 0, **options})
    return r.run(checked=r.check(), progress=False)


def test_a_masked_hardening_certifies_what_the_clean_model_cannot(sprinkled, tmp_path, cli):
    res = _harden(sprinkled, "masked", tmp_path / "h")
    assert res["threat"] == {"method": "ranmask", "mask_rate": 0.9, "mask_token": "[MASK]"}
    info = json.loads((tmp_path / "h" / "model" / "textaudit.json").read_text())["hardened"]
    assert info["threat"] == res["threat"] and info["cost"]["copies"] == 4 * res["held_out"]["train_examples"]
    dev = sprinkled / "dev.tsv"
    clean = _certify(str(sprinkled / "bow"), dev, method="ranmask")
    hardened = _certify(str(tmp_path / "h" / "model"), dev, output=tmp_path / "c.jsonl")  # no options: its training's
    header = json.loads((tmp_path / "c.jsonl").read_text().splitlines()[0])["header"]["config"]
    assert hardened.method == "ranmask" and (header["mask_rate"], header["mask_token"]) == (0.9, "[MASK]")
    said = {r["prediction"] for r in clean.records if r.get("prediction") is not None}
    assert len(said) == 1  # under 90 % masks the clean model answers one class: a constant's certificates
    at = {c["radius"]: c["certified_accuracy"] for c in hardened.summary["curve"]}
    was = {c["radius"]: c["certified_accuracy"] for c in clean.summary["curve"]}
    assert hardened.summary["accuracy"] >= 0.8 > clean.summary["accuracy"] + 0.2
    assert at[1] >= was[1] + 0.1 and at[2] > 0.3
    # harden's before/after certificate is audit certify's, run by hand on both models (same draws, same records)
    cert = res["certificate"]
    assert cert["method"] == "ranmask" and cert["files"] == ["before.certify.jsonl", "after.certify.jsonl"]
    for side, by_hand in (("before", clean), ("after", hardened)):
        assert cert[side]["curve"] == by_hand.summary["curve"] and cert[side]["accuracy"] == by_hand.summary["accuracy"]
    # the second-order view (harden's --cert-neighbors 1) is audit certify --neighbors 1's, by hand
    view = _certify(str(tmp_path / "h" / "model"), dev, neighbors=1, mlm="minilm-mlm").summary["second_order"]
    assert cert["after"]["second_order"] == view and view["certified_inputs"] > 0
    from textaudit.formats.harden import summary_rows

    rows = {r[0]: r for r in summary_rows(res)}
    assert rows["ranmask: certified accuracy at radius 1"][3] == round(at[1], 3)
    assert rows["ranmask: smoothed accuracy"][1] == round(clean.summary["accuracy"], 3)
    assert rows["ranmask: certified inputs with an uncertified neighbour"][3] == round(view["with_uncertified_neighbor_share"], 3)
    html = cli("report", str(tmp_path / "h"), "--out", str(tmp_path / "r.html"))
    assert html.exit_code == 0, html.output
    page = (tmp_path / "r.html").read_text()
    assert "Certified accuracy before and after" in page and "ranmask: certified accuracy at radius 1" in page
    assert "mask_rate 0.9" in page


def test_a_hardened_model_is_certified_under_its_own_threat_model_or_refused_in_one_line(sprinkled, tmp_path, cli):
    from textaudit.errors import TextAuditError
    from textaudit.robustness.request import CertifyRequest

    _harden(sprinkled, "substitute", tmp_path / "s", hops=1)
    model = str(tmp_path / "s" / "model")
    r = CertifyRequest(model=model, data=str(sprinkled / "dev.tsv"), neighbors=0)
    assert (r.chosen_method, r.synonym_hops) == ("safer", 1) and r.threat == {"method": "safer", "hops": 1}
    for wrong, says in (({"hops": 2}, "hops 2"), ({"method": "ranmask"}, "method ranmask")):
        with pytest.raises(TextAuditError, match=f"was hardened for method safer, hops 1; certifying it under {says}"):
            CertifyRequest(model=model, data=str(sprinkled / "dev.tsv"), **wrong).check()
    out = cli("certify", "--model", model, "--data", str(sprinkled / "dev.tsv"), "--mask-rate", "0.5",
              "--method", "ranmask", "--samples", "20", "--selection", "10", "--neighbors", "0")
    assert out.exit_code == 2 and out.output.count("\n") == 1 and "was hardened for method safer" in out.output
    ok = cli("certify", "--model", model, "--data", str(sprinkled / "dev.tsv"), "--samples", "20", "--selection", "10",
             "--neighbors", "0", "--output", str(tmp_path / "c.jsonl"))
    assert ok.exit_code == 0, ok.output
    header = json.loads((tmp_path / "c.jsonl").read_text().splitlines()[0])["header"]["config"]
    assert header["method"] == "safer" and header["hops"] == 1
    plain = CertifyRequest(model=str(sprinkled / "bow"), data=str(sprinkled / "dev.tsv"))
    assert plain.threat is None and (plain.chosen_method, plain.rate, plain.token, plain.synonym_hops) == \
        ("safer", 0.9, "[MASK]", 2)


@pytest.mark.parametrize("args, message", [
    (["--method", "masked", "--mask-rate", "1.0"], "--mask-rate must be a number >= 0 and < 1"),
    (["--method", "masked", "--copies", "0"], "--copies"),
    (["--method", "masked", "--mask-token", " "], "--mask-token must not be empty"),
])
def test_what_a_certified_hardening_cannot_do_is_one_line(cli, tmp_path, args, message):
    r = cli("harden", "--model", "bow", "--out", str(tmp_path / "h"), *args)
    assert r.exit_code == 2 and message in r.output and not (tmp_path / "h").exists()


def test_a_suite_gates_the_hardened_certificate(sprinkled, tmp_path, cli):
    """[harden] with method = "masked": harden.after.certified_at_<R> and smoothed_accuracy gate the certificate the
    run computed; on a hardening that trains for no certificate they are one line."""
    (tmp_path / "s.toml").write_text(
        f'[suite]\ndata = "{sprinkled / "dev.tsv"}"\noutput_dir = "out"\n'
        f'[harden]\nmodel = "{sprinkled / "bow"}"\ndata = "{sprinkled / "train.tsv"}"\nmlm = "minilm-mlm"\n'
        'method = "masked"\nepochs = 3\ncopies = 4\neval_attack = "so-enum:1"\nnaturalness = "off"\n'
        'cert_samples = 200\ncert_selection = 50\n'
        '[thresholds]\nharden.after.certified_at_1_min = 0.5\nharden.before.certified_at_1_min = 0.9\n'
        'harden.after.smoothed_accuracy_min = 0.8\nharden.after.certified_at_40_max = 0.0\n')
    s = cli("run", str(tmp_path / "s.toml"), "--json")
    assert s.exit_code == 1, s.output  # the clean model is a constant under the masks: its gate fails
    checks = {c["name"]: c for c in json.loads(s.stdout.strip().splitlines()[-1])["checks"]}
    summary = json.loads((tmp_path / "out" / "harden" / "harden.json").read_text())
    at1 = {c["radius"]: c["certified_accuracy"] for c in summary["certificate"]["after"]["curve"]}[1]
    assert checks["harden.after.certified_at_1_min"]["passed"] and checks["harden.after.certified_at_1_min"]["value"] == at1
    assert not checks["harden.before.certified_at_1_min"]["passed"]
    assert checks["harden.after.smoothed_accuracy_min"]["passed"] and checks["harden.after.certified_at_40_max"]["value"] == 0
    (tmp_path / "bad.toml").write_text(
        f'[harden]\nmodel = "{sprinkled / "bow"}"\nmethod = "augment"\n[thresholds]\nharden.after.certified_at_2_min = 0.5\n')
    bad = cli("run", str(tmp_path / "bad.toml"))
    assert bad.exit_code == 2 and "[harden] method 'augment' trains for no certificate; masked or substitute do" in bad.output


def test_the_certificate_is_costed_before_it_is_spent(sprinkled, tmp_path, cli):
    r = cli("harden", "--model", str(sprinkled / "bow"), "--method", "substitute", "--data", str(sprinkled / "train.tsv"),
            "--eval-data", str(sprinkled / "dev.tsv"), "--mlm", "minilm-mlm", "--epochs", "1", "--copies", "1",
            "--cert-samples", "20", "--cert-selection", "10", "--naturalness", "off", "--out", str(tmp_path / "h"))
    assert r.exit_code == 0, r.output
    (time_line,) = [line for line in r.stderr.splitlines() if line.startswith("time: about")]
    assert "1 random copies of each of the 600 training examples (no mining)" in time_line
    assert f"the before/after certificate, up to {2 * 40 * 30:,} texts" in time_line
    assert "certifying both models by safer on 40 held-out examples" in r.stderr


@pytest.mark.parametrize("threat", [{"method": "ranmask", "mask_rate": "0.9", "mask_token": "[MASK]"},
                                    {"method": "ranmask", "mask_rate": 1.5, "mask_token": "[MASK]"},
                                    {"method": "safer", "hops": 7}, {"method": "safer", "hops": 2, "extra": 1}])
def test_a_damaged_threat_record_is_one_line_not_a_certificates_settings(tmp_path, cli, threat):
    """The hardened model's record is a file anyone may have edited: its threat model is checked before it sets a
    certificate's options (before, a malformed record passed into the certificate unchecked)."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "textaudit-harden.json").write_text(json.dumps({"name": "x", "threat": threat}))
    r = cli("certify", "--model", str(tmp_path / "m"), "--data", str(tmp_path / "none.tsv"))
    assert r.exit_code == 2 and "threat model the model was hardened for is damaged" in r.output
    assert r.output.count("\n") == 1 and "Traceback" not in r.output
