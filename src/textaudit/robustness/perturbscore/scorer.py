"""The PerturbScorer (MiniLM-L6 + a regression head over the inline-marked text) and its evaluation
by Kendall τ / Spearman ρ against ε; see :mod:`textaudit.robustness.perturbscore`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from textaudit.device import pick_device
from textaudit.errors import TextAuditError
from textaudit.files import check_folder
from textaudit.models.encoders import SentenceEncoder
from textaudit.progress import progress as progress_bar
from textaudit.resources import resolve
from textaudit.robustness.perturbscore.tuples import mark
from textaudit.stats import rank_correlation

__all__ = ["PerturbScorer", "evaluate_scorer", "spearman_kendall"]

#: fewer held-out tuples than this and the correlations come with a note
MIN_TEST = 30


def spearman_kendall(pred: Sequence[float], target: Sequence[float]) -> dict:
    """Spearman ρ and Kendall τ (scipy) of ``pred`` with ``target`` (None when undefined)."""
    rho, tau = rank_correlation(pred, target), rank_correlation(pred, target, method="kendall")
    return {"spearman": rho["rho"], "spearman_p": rho["p"], "kendall": tau["rho"], "kendall_p": tau["p"]}


class PerturbScorer:
    """MiniLM-L6 encoder + linear regression head on the mean-pooled marked text; predicts ε."""

    def __init__(self, path: str | Path | None = None, *, device: str | None = None):
        import torch
        from transformers import AutoModel, AutoTokenizer


        self.device = pick_device(device)
        root = Path(path) if path else resolve("minilm")
        if path and not (Path(path) / "head.json").is_file():
            raise TextAuditError(f"{path} is not a PerturbScorer directory (no head.json); train one with "
                                 "'audit perturbscore train'")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(root), trust_remote_code=False)
            # fp32 whatever dtype the weights were saved in: the head is fp32 and the encoder is fine-tuned
            self.encoder = AutoModel.from_pretrained(str(root), trust_remote_code=False).float().to(self.device)
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

        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        X = [mark(r["x"], r["x_prime"]) for r in train]
        y = np.array([r["eps"] for r in train], dtype=np.float32)
        self.scale = float(max(y.std(), 1e-3))
        params = list(self.encoder.parameters()) + list(self.head.parameters())
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
        self.encoder.train()
        steps = epochs * ((len(X) + batch_size - 1) // batch_size)
        bar = progress_bar(total=steps, desc="train PerturbScorer", unit="batch", enabled=progress, training=True)
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
        check_folder(path, "head.json", "give the scorer a new folder")
        path.mkdir(parents=True, exist_ok=True)
        self.encoder.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        head = {k: v.detach().cpu().tolist() for k, v in self.head.state_dict().items()}
        (path / "head.json").write_text(json.dumps({"format": "textaudit-perturbscorer", "head": head, "scale": self.scale}))
        return path


def evaluate_scorer(scorer: PerturbScorer, test: Sequence[dict], encoder=None, *, keep_scores: bool = False) -> dict:
    """Kendall τ / Spearman ρ with ε on ``test`` for the scorer, the edit distance and the sentence
    embedding distance 1 − cos (MiniLM mean pooled) — the paper's Table 3 layout; ``keep_scores`` adds each
    method's score per tuple (``"scores"``) and the ε (``"eps"``), for intervals over the tuples."""
    eps = [r["eps"] for r in test]
    if encoder is None:
        encoder = SentenceEncoder()
    a = encoder.encode([r["x"] for r in test])
    b = encoder.encode([r["x_prime"] for r in test])
    rows = {"perturbscorer": scorer.predict([mark(r["x"], r["x_prime"]) for r in test]).tolist(),
            "edit_distance": [r["edit_distance"] for r in test],
            "embedding_distance": (1.0 - (a * b).sum(1)).tolist()}
    out = {"n_test": len(test), "methods": {k: spearman_kendall(v, eps) for k, v in rows.items()}}
    if keep_scores:
        out.update(scores={k: [round(float(x), 6) for x in v] for k, v in rows.items()}, eps=list(eps))
    if len(test) < MIN_TEST:
        out["note"] = (f"only {len(test)} held-out tuples: Kendall τ and Spearman ρ are too noisy to mean much "
                       f"(build at least {5 * MIN_TEST} tuples, so that {MIN_TEST} are held out)")
    return out
