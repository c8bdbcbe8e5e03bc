"""The end-of-run summary of ``strands-art migrate``: a rich table and a matplotlib figure."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from statistics import mean
from typing import Any

from rich.console import Console
from rich.table import Table


def print_summary(results: list[dict[str, Any]], console: Console) -> None:
    """Print one row per rollout and the mean reward per task (results.jsonl records)."""
    table = Table(title="MigrationBench results")
    for col, just in (
        ("rollout", "left"),
        ("reward", "right"),
        ("build", "center"),
        ("tests", "right"),
        ("turns", "right"),
        ("rows", "right"),
        ("tokens", "right"),
        ("stop", "left"),
        ("wall s", "right"),
    ):
        # fold, not ellipsize: rollout ids and stop reasons stay readable in an 80-column terminal
        table.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
    for r in results:
        table.add_row(
            r["rollout_id"],
            f"{r['reward']:.1f}",
            "✔" if r["build_success"] else "✘",
            f"{r['tests_run']}/{r['tests_required']}",
            str(r.get("turns", "")),
            str(r.get("rows", "-")),
            str(r.get("tokens", "-")),
            _stop(r),
            f"{r.get('times', {}).get('wall_s', 0):.0f}",
        )
    console.print(table)
    by_task: dict[str, list[float]] = defaultdict(list)
    for r in results:
        by_task[r["task"]].append(r["reward"])
    if results:
        rewards = [r["reward"] for r in results]
        solved = sum(1 for x in rewards if x >= 1.0)
        console.print(
            f"mean reward {mean(rewards):.3f} over {len(rewards)} rollouts; "
            f"{solved} fully migrated; {len(by_task)} tasks"
        )
        if not any(r.get("token_capture", True) for r in results):
            console.print("(hosted baseline: no token capture, rows not recorded)")


def plot_run(results: list[dict[str, Any]], path: Path) -> Path:
    """Bar charts of reward and rows per rollout; returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    names = [r["rollout_id"] for r in results]
    fig, axes = plt.subplots(2, 1, figsize=(max(6, 0.5 * len(names) + 2), 6), sharex=True)
    bars = axes[0].bar(names, [r["reward"] for r in results], color="tab:green")
    axes[0].bar_label(bars, labels=[f"{r['reward']:.1f}" for r in results], padding=2)
    axes[0].set_ylim(0, 1.15)
    axes[0].set_ylabel("reward (0.5 build + 0.5 tests)")
    axes[0].set_title("MigrationBench rollouts")
    bars = axes[1].bar(names, [r.get("rows", 0) or 0 for r in results], color="tab:blue")
    axes[1].bar_label(bars, labels=[f"{r.get('turns', 0)} turns" for r in results], padding=2, fontsize=8)
    axes[1].set_ylabel("rows (training sequences)")
    axes[1].yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[1].margins(y=0.2)
    axes[1].tick_params(axis="x", rotation=60)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _stop(r: dict) -> str:
    """The "stop" column: how the rollout ended, and why its evaluation failed if it did."""
    error = r.get("evaluation_error") or r.get("rollout_error")
    if r.get("failed"):
        return f"failed ({error['reason']})" if error else "backend failed"
    stop = str(r.get("stop_reason", ""))
    return f"{stop}, eval error: {error['reason']}" if error else stop
