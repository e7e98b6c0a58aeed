"""Building PerturbScore tuples (x, x′, edit distance, d, ε) and training/evaluating the
PerturbScorer (MiniLM-L6 + regression head over the inline-marked text); see
:mod:`textaudit.robustness.perturbscore` for the definitions."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from textaudit.errors import TextAuditError
from textaudit.results import JsonlWriter
from textaudit.robustness.perturbscore import (PERTURBATIONS, differentiable, edit_distance, find_epsilon, mark,
                                               model_shift, random_swap, spearman_kendall, synonym_swap)

__all__ = ["build_tuples", "PerturbScorer", "evaluate_scorer", "split_tuples"]


def build_tuples(classifier, texts: Sequence[str], *, perturbation: str = "random-swap", n: int = 1000,
                 seed: int = 0, output=None, resume: bool = False, space: str = "hidden", steps: int = 5,
                 step: float = 0.01, max_eps: float = 1.0, tolerance: float = 0.005, progress: bool = True,
                 ids: Sequence[str] | None = None) -> list[dict]:
    """Make ``n`` attempts (x from ``texts`` in a seeded order, x′ = ``perturbation``(x)); each is
    written to ``output`` as it finishes: ``{"id", "x", "x_prime", "edit_distance", "d", "eps",
    "kept", "shift_at_eps", "seconds"}`` (``eps`` None and ``kept`` false when dropped)."""
    from tqdm.auto import tqdm

    if perturbation not in PERTURBATIONS:
        raise TextAuditError(f"unknown perturbation '{perturbation}'; use one of {', '.join(PERTURBATIONS)}")
    if not texts:
        raise TextAuditError("no sentences to perturb (empty dataset)")
    sm = differentiable(classifier)
    rng = np.random.default_rng(seed)
    if perturbation == "random-swap":
        from textaudit.lexicons import counterfitted_neighbors

        vocab = sorted(w for w in counterfitted_neighbors() if w.isalpha())
        perturb: Callable[[str, np.random.Generator], str] = lambda x, r: random_swap(x, r, vocab)  # noqa: E731
    else:
        from textaudit.lexicons import counterfitted_neighbors

        nb = counterfitted_neighbors()
        perturb = lambda x, r: synonym_swap(x, r, nb)  # noqa: E731
    ids = list(ids) if ids is not None else [str(i) for i in range(len(texts))]
    order = rng.permutation(len(texts))
    writer = JsonlWriter(output, resume=resume)
    done = writer.done
    bar = tqdm(range(n), desc=f"perturbscore {perturbation}", unit="tuple", disable=None if progress else True)
    kept = sum(1 for r in writer.records if r.get("kept"))
    for a in bar:
        j = int(order[a % len(texts)])
        uid = f"{ids[j]}#{a}"
        if uid in done:
            continue
        r = np.random.default_rng(int(hashlib.md5(f"{seed}|{uid}".encode()).hexdigest()[:8], 16))
        x = texts[j]
        x2 = perturb(x, r)
        t0 = time.perf_counter()
        d = model_shift(sm, x, x2, space) if x2 != x else 0.0
        eps, at = find_epsilon(sm, x, d, step=step, max_eps=max_eps, steps=steps, tolerance=tolerance, space=space)
        ok = eps is not None and x2 != x
        kept += ok
        writer.append({"id": uid, "x": x, "x_prime": x2, "edit_distance": edit_distance(x, x2), "d": round(d, 6),
                       "eps": eps if ok else None, "kept": bool(ok), "shift_at_eps": round(at, 6),
                       "seconds": round(time.perf_counter() - t0, 3)})
        bar.set_postfix(kept=kept)
    return writer.records


def split_tuples(records: Sequence[dict], seed: int = 0, test_share: float = 0.2) -> tuple[list[dict], list[dict]]:
    """The kept tuples split 80/20 (seeded) into train and held-out test, *by original sentence*:
    every perturbation of one x lands on the same side, so the test sentences are unseen."""
    kept = [r for r in records if r.get("kept")]
    if len(kept) < 10:
        raise TextAuditError(f"only {len(kept)} usable tuples; build more (perturbscore build --n ...)")
    xs = sorted({r["x"] for r in kept})
    order = np.random.default_rng(seed).permutation(len(xs))
    test_x, n_test = set(), 0
    for i in order:
        if n_test >= test_share * len(kept):
            break
        test_x.add(xs[i])
        n_test += sum(1 for r in kept if r["x"] == xs[i])
    return [r for r in kept if r["x"] not in test_x], [r for r in kept if r["x"] in test_x]


class PerturbScorer:
    """MiniLM-L6 encoder + linear regression head on the mean-pooled marked text; predicts ε."""

    def __init__(self, path: str | Path | None = None, *, device: str | None = None):
        import torch
        from transformers import AutoModel, AutoTokenizer

        from textaudit.device import pick_device
        from textaudit.resources import resolve

        self.device = pick_device(device)
        root = Path(path) if path else resolve("minilm")
        if path and not (Path(path) / "head.json").is_file():
            raise TextAuditError(f"{path} is not a PerturbScorer directory (no head.json); train one with "
                                 "'audit perturbscore train'")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(root))
            # fp32 whatever dtype the weights were saved in: the head is fp32 and the encoder is fine-tuned
            self.encoder = AutoModel.from_pretrained(str(root)).float().to(self.device)
        except (OSError, ValueError) as e:
            raise TextAuditError(f"cannot load the PerturbScorer from {root}: {str(e).splitlines()[0][:120]}") from None
        self.head = torch.nn.Linear(self.encoder.config.hidden_size, 1).to(self.device)
        self.scale = 1.0
        if path:
            meta = json.loads((Path(path) / "head.json").read_text())
            self.head.load_state_dict({k: torch.tensor(v) for k, v in meta["head"].items()})
            self.scale = float(meta["scale"])

    def _forward(self, marked: Sequence[str]):
        import torch

        enc = self.tokenizer(list(marked), padding=True, truncation=True, max_length=128, return_tensors="pt").to(self.device)
        h = self.encoder(**enc).last_hidden_state
        m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
        return self.head((h * m).sum(1) / m.sum(1).clamp(min=1.0)).squeeze(-1) * torch.tensor(self.scale)

    def fit(self, train: Sequence[dict], *, epochs: int = 3, lr: float = 5e-5, batch_size: int = 16, seed: int = 0,
            progress: bool = True) -> "PerturbScorer":
        import torch
        from tqdm.auto import tqdm

        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        X = [mark(r["x"], r["x_prime"]) for r in train]
        y = np.array([r["eps"] for r in train], dtype=np.float32)
        self.scale = float(max(y.std(), 1e-3))
        params = list(self.encoder.parameters()) + list(self.head.parameters())
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
        self.encoder.train()
        steps = epochs * ((len(X) + batch_size - 1) // batch_size)
        bar = tqdm(total=steps, desc="train PerturbScorer", unit="batch", disable=None if progress else True)
        for _ in range(epochs):
            order = rng.permutation(len(X))
            for s in range(0, len(X), batch_size):
                b = order[s:s + batch_size]
                pred = self._forward([X[i] for i in b])
                target = torch.from_numpy(y[b]).to(self.device)
                loss = torch.nn.functional.mse_loss(pred / self.scale, target / self.scale)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                bar.update(1)
        bar.close()
        self.encoder.eval()
        return self

    def predict(self, marked: Sequence[str], batch_size: int = 64) -> np.ndarray:
        import torch

        out = []
        with torch.inference_mode():
            for s in range(0, len(marked), batch_size):
                out.append(self._forward(marked[s:s + batch_size]).float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)

    def score(self, x: str, x_prime: str) -> float:
        """Predicted ε of the perturbation x → x′."""
        return float(self.predict([mark(x, x_prime)])[0])

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.encoder.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        head = {k: v.detach().cpu().tolist() for k, v in self.head.state_dict().items()}
        (path / "head.json").write_text(json.dumps({"head": head, "scale": self.scale}))
        return path


def evaluate_scorer(scorer: PerturbScorer, test: Sequence[dict], encoder=None) -> dict:
    """Kendall τ / Spearman ρ with ε on ``test`` for the scorer, the edit distance and the sentence
    embedding distance 1 − cos (MiniLM mean pooled) — the paper's Table 3 layout."""
    eps = [r["eps"] for r in test]
    if encoder is None:
        from textaudit.models.encoders import SentenceEncoder

        encoder = SentenceEncoder()
    a = encoder.encode([r["x"] for r in test])
    b = encoder.encode([r["x_prime"] for r in test])
    rows = {"perturbscorer": scorer.predict([mark(r["x"], r["x_prime"]) for r in test]).tolist(),
            "edit_distance": [r["edit_distance"] for r in test],
            "embedding_distance": (1.0 - (a * b).sum(1)).tolist()}
    return {"n_test": len(test), "methods": {k: spearman_kendall(v, eps) for k, v in rows.items()}}
