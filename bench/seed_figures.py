"""Figure 1 and Figure 2 of ``bench/seed_experiments.py`` (PNG, matplotlib), from the runs and
Table 2 of :mod:`seed_tables`."""

from __future__ import annotations

from typing import Any

from seed_tables import DESIGN_TABLE2, LABELS, TOTALS, Run

SEED_SHIFT = 0.08
"""Figure 1 draws seed k's curve this many outer batches beside the next (equal curves overlap)."""


def figure1(runs: list[Run], path: str) -> None:
    """Held-out reward against outer batches, one curve per run: the batching arms (left), the
    history-mode arms (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"tree-fixed-rows": "tab:red", "tree-fixed-steps": "tab:blue", "linear-fixed-steps": "tab:green"}
    styles = ["-", "--", ":", "-."]
    markers = ["o", "s", "^", "D", "v"]
    seeds = sorted({r.seed for r in runs})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, arms, title in (
        (axes[0], ("tree-fixed-rows", "tree-fixed-steps"), "batching (tree capture)"),
        (axes[1], ("tree-fixed-steps", "linear-fixed-steps"), "history mode (fixed-step batching)"),
    ):
        for run in sorted(runs, key=lambda r: (r.arm, r.seed)):
            if run.arm in arms and run.evals:
                k = seeds.index(run.seed)
                shift = SEED_SHIFT * (k - (len(seeds) - 1) / 2)  # equal curves of two seeds stay visible
                ax.plot([e[0] + shift for e in run.evals], [e[1] for e in run.evals], color=colors[run.arm],
                        linestyle=styles[k % len(styles)], marker=markers[k % len(markers)], alpha=0.8,
                        label=f"{run.arm} seed {run.seed}")  # fmt: skip
        ax.set(xlabel="outer batches trained", title=title, ylim=(-0.05, 1.05))
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    axes[0].set_ylabel("held-out reward")
    fig.suptitle(
        "Figure 1. Held-out reward per run (strands-art train, bench/seed_experiments.py); "
        f"seeds drawn {SEED_SHIFT:g} outer batch apart"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure2(t2: dict[str, Any], path: str) -> None:
    """Linear totals as a percentage of tree's: ours (bars: pooled; dots: per seed) beside the design's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    xs = range(len(TOTALS))
    ours = [100.0 - t2["reduction"][k] for k in TOTALS]
    design = [100.0 - DESIGN_TABLE2[k][2] for k in TOTALS]
    ax.bar([x - 0.2 for x in xs], ours, width=0.4, label="this stack (pooled over seeds)", color="tab:green")
    ax.bar([x + 0.2 for x in xs], design, width=0.4, label="design (30B-A3B, verl)", color="tab:gray")
    for x, k in zip(xs, TOTALS, strict=True):
        ax.plot([x - 0.2] * len(t2["per_seed"][k]), [100.0 - v for v in t2["per_seed"][k]], "k.", ms=6)
    ax.axhline(100, color="k", lw=0.8)
    ax.set_xticks(list(xs), [LABELS[k].split(" (")[0] for k in TOTALS], fontsize=8)
    ax.set_ylabel("linear as % of tree")
    ax.set_title("Figure 2. Linear history: totals as a percentage of tree capture")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
