"""The before/after figure of ``audit harden``: clean accuracy and each evaluation attack's success
rate for the original and the hardened model, with their Wilson 95% intervals."""

from __future__ import annotations

from pathlib import Path

from textaudit.plotting import pyplot, save_figure

__all__ = ["plot_before_after"]


def plot_before_after(summary: dict, out_dir: str | Path) -> Path:
    """Draw ``before_after.png`` into ``out_dir`` and return its path."""
    import numpy as np

    plt = pyplot()
    acc = summary["accuracy"]
    bars = [("clean accuracy", acc["before"]["rate"], acc["before"]["ci95"], acc["after"]["rate"], acc["after"]["ci95"])]
    for a in summary["attacks"]:
        name = a["method"] + (f" k={a['k']}" if a["k"] is not None else "") + " success"
        bars.append((name, a["before"]["success_rate"], a["before"]["ci95"], a["after"]["success_rate"], a["after"]["ci95"]))
    x = np.arange(len(bars))
    fig, ax = plt.subplots(figsize=(1.9 * len(bars) + 2.5, 3.6))
    for off, col, label, vi, ci in ((-0.18, "#888888", "before", 1, 2), (0.18, "#2a6fdb", "after", 3, 4)):
        vals = [b[vi] or 0.0 for b in bars]
        err = [[max(0.0, v - (b[ci] or [v, v])[0]) for v, b in zip(vals, bars)],
               [max(0.0, (b[ci] or [v, v])[1] - v) for v, b in zip(vals, bars)]]
        ax.bar(x + off, vals, 0.36, yerr=err, capsize=3, color=col, label=label)
    ax.set_xticks(x, [b[0] for b in bars])
    ax.set_ylim(0, 1.18)  # room above a rate of 1 for the legend
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("rate (95% CI)")
    ax.set_title(f"{summary['from']} → {summary['method']}: {summary['held_out']['eval_examples']} held-out examples")
    ax.legend(loc="upper right", ncol=2, frameon=False)
    fig.tight_layout()
    path = Path(out_dir) / "before_after.png"
    save_figure(fig, path, dpi=110)
    return path
