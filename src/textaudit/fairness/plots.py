"""Plots of counterfactual token bias: F_soft histograms per k (paper Fig. 6), B vs k with 95% CI
bars, and a multi-pair bar chart of two models (paper Fig. 5 style).

Histograms of a sampled level show the uniform draws as they are (each source's draws equally),
while B weights each source by its neighbourhood's estimated size."""

from __future__ import annotations

from pathlib import Path

from textaudit.fairness.estimates import BiasEstimate
from textaudit.plotting import pyplot, save_figure

__all__ = ["plot_bias"]

Results = dict[str, dict[tuple[str, str], dict[int, BiasEstimate]]]


#: bins of each F_soft histogram (kept with an estimate read back without its values: ``BiasEstimate.histogram``)
HIST_BINS = 40


def plot_bias(results: Results, out_dir: str | Path) -> list[Path]:
    """Write the bias plots for ``results`` (see :func:`textaudit.fairness.bias.run_bias`) into
    ``out_dir`` and return their paths."""
    names = list(results)
    if not names:  # nothing scored yet: nothing to draw
        return []
    plt = pyplot()

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    base = results[names[0]]
    for pair, by_k in base.items():
        ks = sorted(by_k)
        if not ks:
            continue  # empty X_filter for this pair
        fig, axes = plt.subplots(1, len(ks), figsize=(3.2 * len(ks), 2.8), squeeze=False)
        for ax, kk in zip(axes[0], ks):
            e = by_k[kk]
            if len(e.values) or e.histogram is None:
                ax.hist(e.values, bins=HIST_BINS, color="tab:blue", alpha=0.8)
            else:  # read back without its values: the same bars from the kept bins
                edges, counts = e.histogram
                ax.hist(edges[:-1], bins=edges, weights=counts, color="tab:blue", alpha=0.8)
            ax.axvline(0, color="black", lw=0.8)
            ax.axvline(e.B, color="tab:red", lw=1.2, label=f"B={e.B:+.4f}")
            ax.set_title(f"k={kk} (n={int(e.n)})", fontsize=9)
            ax.set_xlabel("F_soft(x; p)")
            ax.legend(fontsize=7)
        fig.suptitle(f"{names[0]}: {pair[0]} → {pair[1]}")
        fig.tight_layout()
        path = out / f"hist_{pair[0]}_{pair[1]}.png"
        save_figure(fig, path, dpi=120)
        written.append(path)

    fig, ax = plt.subplots(figsize=(6, 4))
    for name in names:
        for pair, by_k in results[name].items():
            ks = sorted(by_k)
            B = [by_k[kk].B for kk in ks]
            err = [[by_k[kk].B - by_k[kk].ci95[0] for kk in ks], [by_k[kk].ci95[1] - by_k[kk].B for kk in ks]]
            ax.errorbar(ks, B, yerr=err, marker="o", capsize=3,
                        ls="-" if name == names[0] else "--", label=f"{name}: {pair[0]}/{pair[1]}")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("k (words changed)")
    ax.set_ylabel("B_{p,k} (95% CI)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = out / "bias_vs_k.png"
    save_figure(fig, path, dpi=120)
    written.append(path)

    pairs = [p for p in base if any(results[n][p] for n in names)]
    if not pairs:
        return written
    kmax = max(max(b) for r in results.values() for b in r.values() if b)
    fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(pairs)), 3.8))
    bars = [(name, kk) for name in names for kk in sorted({0, kmax})]
    width = 0.8 / len(bars)
    for j, (name, kk) in enumerate(bars):
        vals = [results[name][p][kk].B if kk in results[name][p] else 0.0 for p in pairs]
        lo = [results[name][p][kk].B - results[name][p][kk].ci95[0] if kk in results[name][p] else 0.0 for p in pairs]
        ax.bar([i + (j - (len(bars) - 1) / 2) * width for i in range(len(pairs))], vals, width, yerr=lo, capsize=2,
               label=f"{name}, k={kk}")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(range(len(pairs)), [f"{a}/{b}" for a, b in pairs], rotation=20)
    ax.set_ylabel("B_{p,k}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / "pairs_bar.png"
    save_figure(fig, path, dpi=120)
    written.append(path)
    return written
