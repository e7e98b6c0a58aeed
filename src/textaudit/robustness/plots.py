"""Plots of the robustness studies: learnability (paper Figs. 3-4) and word order (accuracy vs DND/IDC)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from textaudit.plotting import pyplot, save_figure

__all__ = ["plot_study", "plot_wordorder"]


def plot_study(study: dict, out_dir) -> list:
    """Write learnability curves (paper Fig. 3) and scatter + regression plots (Fig. 4); return the paths."""
    plt = pyplot()

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    res = study["results"]
    models = sorted({r["model"] for r in res})
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4), squeeze=False)
    for ax, m in zip(axes[0], models):
        for r in (r for r in res if r["model"] == m):
            ps = sorted(r["learnability_at"], key=float)
            ax.plot([float(p) for p in ps], [r["learnability_at"][p] for p in ps], marker="o", label=r["perturbation"])
        ax.set_xscale("log")
        ax.set_xlabel("injection probability p")
        ax.set_ylabel("learnability")
        ax.set_title(m)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    curves = out / "learnability_curves.png"
    save_figure(fig, curves, dpi=120)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    x = np.array([r["avg_learnability"] for r in res])
    for ax, key, title in ((axes[0], "robustness", "robustness"), (axes[1], "post_aug_delta", "post-augmentation Δ")):
        y = np.array([r[key] for r in res])
        ax.scatter(x, y)
        if len(x) >= 2 and np.ptp(x) > 0:
            a, b = np.polyfit(x, y, 1)
            xs = np.linspace(x.min(), x.max(), 10)
            ax.plot(xs, a * xs + b, color="C1")
        sp = study["spearman"].get("learnability_vs_" + ("robustness" if key == "robustness" else "post_aug"), {})
        ax.set_title(f"{title} (Spearman ρ = {sp.get('rho')})")
        ax.set_xlabel("average learnability")
    fig.tight_layout()
    scatter = out / "learnability_scatter.png"
    save_figure(fig, scatter, dpi=120)
    return [curves, scatter]


def plot_wordorder(rows: list[dict], corr: dict, out: Path, name: str) -> Path:
    """Write accuracy vs DND and IDC (one point per reordering, by level) into ``out``; return the path."""
    plt = pyplot()
    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    markers = {"word": "o", "subword": "s", "char": "^"}
    for ax, metric in zip(axes, ("dnd", "idc")):
        for lv, mk in markers.items():
            pts = [(r[metric], r["accuracy"]) for r in rows if r["level"] == lv]
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=mk, label=lv)
        c = corr[f"accuracy_vs_{metric}"]
        ax.set_xlabel(metric.upper())
        ax.set_title("Spearman ρ undefined" if c["rho"] is None else f"Spearman ρ = {c['rho']:.2f}")
        ax.axhline(corr["clean_accuracy"], color="grey", ls="--", lw=1)
    axes[0].set_ylabel("accuracy")
    axes[0].legend()
    fig.suptitle(f"{name}: accuracy under reorderings")
    fig.tight_layout()
    save_figure(fig, out / "accuracy_vs_dnd_idc.png", dpi=120)
    return out / "accuracy_vs_dnd_idc.png"


def plot_certified_curve(curves: dict[str, list[dict]], out_dir: str | Path, ibp: dict[str, dict] | None = None,
                         title: str = "certified accuracy vs radius") -> Path:
    """``certified_curve.png``: randomized smoothing's certified accuracy at radii 0, 1, … (Wilson 95% bands) per
    ``curves`` key (its label, e.g. ``cnn (SAFER)``), the curve of the smoothing papers; ``ibp``: {model: IBP's
    result} drawn as a level (IBP certifies every word at once)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.2, 3.8))
    for name, rows in curves.items():
        r = [x["radius"] for x in rows]
        acc = [x["certified_accuracy"] or 0.0 for x in rows]
        lo = [x["certified_accuracy_ci95"][0] for x in rows]
        hi = [x["certified_accuracy_ci95"][1] for x in rows]
        # a marker on every radius: a curve of one point (nothing certified beyond radius 0) is still drawn
        (line,) = ax.step(r, acc, where="post", label=name, marker="o", markersize=4)
        if len(r) == 1:  # and its interval, as a bar (a step band of one point has no width)
            ax.errorbar(r, acc, yerr=[[acc[0] - lo[0]], [hi[0] - acc[0]]], fmt="none", capsize=4, alpha=0.5,
                        color=line.get_color())
        ax.fill_between(r, lo, hi, step="post", alpha=0.15)
    dashes = [(4, 2), (1, 2), (6, 2, 1, 2), (2, 4)]
    for j, (name, res) in enumerate((ibp or {}).items()):  # levels in the legend: close ones stay readable
        ax.axhline(res["certified_accuracy"], dashes=dashes[j % len(dashes)], color="#444444", linewidth=1.2,
                   label=f"{name} (IBP, every word)")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # radii are whole words
    top = max((x["radius"] for rows in curves.values() for x in rows), default=0)
    ax.set_xlim(-0.5, max(top, 1) + 0.5)
    ax.set_xlabel("radius: words substituted (SAFER) or replaced (RanMASK)")
    ax.set_ylabel("certified accuracy (95% CI)")
    ax.set_ylim(0, 1.05)
    ax.set_title(title)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    path = Path(out_dir) / "certified_curve.png"
    save_figure(fig, path, dpi=110)
    return path
