"""#81 items 1 and 7: every audit's request keeps one contract — ``check()``, then ``run(checked=..., progress=...)``
giving an :class:`~textaudit.request.Outcome` (summary, records, files) — checked by the public battery
:func:`textaudit.testing.check_audit` on each of the ten audits, on small real settings (a planted rule as a plug-in
model, a tiny zoo bow, a tiny masked LM); and the battery fails a request that breaks the contract, naming the
check."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from textaudit.request import Outcome
from textaudit.testing import AuditCheckError, check_audit

POS = ["great", "wonderful", "charming", "funny", "brilliant", "delightful", "moving", "lovely"]
NEG = ["dull", "boring", "awful", "tedious", "weak", "lame", "poor", "bland"]
FILLER = ["the", "film", "was", "and", "a", "story", "with", "cast", "it", "is", "very", "plot", "acting", "its"]
RULE = f'''
import math
POS, NEG = set({POS!r}), set({NEG!r})
labels = ["negative", "positive"]
def clf(texts):  # the share of sentiment words decides; "film" leans positive (a flip under film -> movie)
    out = []
    for t in texts:
        w = t.lower().split()
        s = sum(x in POS for x in w) - sum(x in NEG for x in w) + 0.5 * ("film" in w) - 0.25
        p = 1 / (1 + math.exp(-2 * s))
        out.append([1 - p, p])
    return out
clf.labels = labels
'''


def _rows(seed: int, n: int) -> list[tuple[int, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        y = i % 2
        words = [rng.choice(POS if y else NEG) if rng.random() < 0.3 else rng.choice(FILLER) for _ in range(8)]
        out.append((y, " ".join(words) + " ."))
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_mlm):
    """train.tsv and dev.tsv, the rule as a plug-in, a zoo bow trained on train.tsv, a tiny masked LM, a synonym
    table and a pairs file."""
    from textaudit.models.zoo.build import train_model

    root = tmp_path_factory.mktemp("contract")
    for name, rows in (("train.tsv", _rows(0, 300)), ("dev.tsv", _rows(1, 8))):
        (root / name).write_text("label\ttext\n" + "".join(f"{y}\t{t}\n" for y, t in rows))
    (root / "rule.py").write_text(RULE)
    train_model("bow", data=str(root / "train.tsv"), out=root / "bow", epochs=2, progress=False,
                eval_data=str(root / "dev.tsv"))
    tiny_mlm.model.save_pretrained(root / "mlm")
    tiny_mlm.tokenizer.save_pretrained(root / "mlm")
    (root / "syn.json").write_text(json.dumps({"film": ["movie"], "great": ["fine"], "dull": ["flat"]}))
    (root / "pairs.txt").write_text("film,movie\n")
    return root


def _requests(w: Path, out: Path) -> dict:
    """Each of the ten audits' requests on the world, into ``out``."""
    from textaudit.attacks.request import AttackRequest, CompareRequest
    from textaudit.evaluation import EvaluateRequest
    from textaudit.fairness.request import BiasRequest
    from textaudit.findings import ReplayRequest
    from textaudit.harden.request import HardenRequest
    from textaudit.robustness.learnability import LearnabilityRequest
    from textaudit.robustness.perturbscore.request import TuplesRequest
    from textaudit.robustness.request import CertifyRequest
    from textaudit.robustness.wordorder import WordOrderRequest

    rule, dev, mlm = f"{w}/rule.py:clf", str(w / "dev.tsv"), str(w / "mlm")
    search = dict(k=1, mlm=mlm, kappa=5, naturalness="off", ppl=False)
    return {
        "attack": AttackRequest(model=rule, data=dev, method="so-beam", beam=2, pairs_file=w / "pairs.txt",
                                output=out / "attack.jsonl", **search),
        "compare": CompareRequest(models=[rule], methods=["so-enum"], data=dev, limit=3, k=1, mlm=mlm,
                                  naturalness="off", output_dir=out / "compare"),
        "bias": BiasRequest(model=rule, pair=["film,movie"], data=dev, k=0, output=out / "bias.jsonl"),
        "certify": CertifyRequest(model=rule, method="safer", data=dev, synonyms=w / "syn.json", hops=1, samples=40,
                                  selection=10, neighbors=0, output=out / "certify.jsonl"),
        "replay": ReplayRequest(findings=[w / "findings.jsonl"], model=rule, output=out / "replay.jsonl"),
        "harden": HardenRequest(model=str(w / "bow"), method="masked", data=str(w / "train.tsv"), eval_data=dev,
                                epochs=1, copies=1, eval_attack="so-enum:1", mlm=mlm, naturalness="off",
                                cert_samples=20, cert_selection=10, cert_neighbors=0, out=out / "harden"),
        "evaluate": EvaluateRequest(model=rule, data=dev, output=out / "evaluate.jsonl"),
        "learnability": LearnabilityRequest(model=["bow"], perturbation="butter_fingers_perturbation",
                                            train_size=40, probabilities="1.0", data=str(w / "train.tsv"),
                                            eval_data=dev, output=out / "learnability.jsonl"),
        "wordorder": WordOrderRequest(model=rule, data=dev, output=out / "wordorder.jsonl"),
        "perturbscore": TuplesRequest(model=str(w / "bow"), n=4, data=dev, steps=2, max_eps=0.1,
                                      output=out / "tuples.jsonl"),
    }


@pytest.fixture(scope="module")
def findings(world):
    """An attack's findings on the rule (the replay audit's input)."""
    from textaudit.attacks.request import AttackRequest

    AttackRequest(model=f"{world}/rule.py:clf", data=str(world / "dev.tsv"), method="so-beam", beam=2, k=1,
                  mlm=str(world / "mlm"), kappa=5, naturalness="off", ppl=False, pairs_file=world / "pairs.txt",
                  output=world / "findings.jsonl").run(progress=False)
    return world / "findings.jsonl"


AUDIT_NAMES = ["attack", "compare", "bias", "certify", "replay", "harden", "evaluate", "learnability", "wordorder",
               "perturbscore"]


@pytest.mark.parametrize("name", AUDIT_NAMES)
def test_every_audit_keeps_the_contract(name, world, findings, tmp_path):
    report = check_audit(_requests(world, tmp_path)[name])
    assert report.ok, str(report)
    assert [c.name for c in report.checks] == ["contract", "check", "run", "summary", "records", "files"]
    outcome = report.outcome
    assert isinstance(outcome, Outcome) and outcome.files, name
    assert all(tmp_path in Path(f).parents for f in outcome.files)


def test_the_attack_outcome_is_what_its_file_holds_and_finds_the_planted_flip(world, findings, tmp_path):
    """Not only shapes: the attack's records are its file's, and the planted film → movie flip is found."""
    outcome = check_audit(_requests(world, tmp_path)["attack"]).outcome
    found = [r for r in outcome.records if r["status"] == "success"]
    assert found and all(r["pair"] == ["film", "movie"] for r in found)
    assert outcome.summary["success"] == len(found)


def test_the_battery_names_the_check_a_broken_request_fails(world, findings, tmp_path):
    """A request whose run returns a bare dict, one whose check writes its output, one whose summary holds a value
    JSON cannot write, one that names a file it was not asked for: each fails exactly the check that says so."""
    from textaudit.evaluation import EvaluateRequest

    base = _requests(world, tmp_path)["evaluate"]

    @dataclasses.dataclass
    class BareDict(EvaluateRequest):
        def run(self, *, checked=None, progress=True, say=print):
            return super().run(say=lambda line: None).summary

    @dataclasses.dataclass
    class WritesOnCheck(EvaluateRequest):
        def check(self):
            Path(self.output).write_text("")

    @dataclasses.dataclass
    class SetInSummary(EvaluateRequest):
        def run(self, *, checked=None, progress=True, say=print):
            outcome = super().run(say=lambda line: None)
            outcome.summary["labels_seen"] = {0, 1}
            return outcome

    @dataclasses.dataclass
    class ForeignFile(EvaluateRequest):
        def run(self, *, checked=None, progress=True, say=print):
            outcome = super().run(say=lambda line: None)
            outcome.files.append(world / "dev.tsv")
            return outcome

    for i, (cls, failed) in enumerate(((BareDict, "run"), (WritesOnCheck, "check"), (SetInSummary, "summary"),
                                       (ForeignFile, "files"))):
        request = cls(**{**dataclasses.asdict(base), "output": tmp_path / f"{i}.jsonl"})
        report = check_audit(request, strict=False)
        assert [c.name for c in report.failed][0] == failed, str(report)
        with pytest.raises(AuditCheckError, match=failed):
            check_audit(cls(**{**dataclasses.asdict(base), "output": tmp_path / f"again{i}.jsonl"}))
