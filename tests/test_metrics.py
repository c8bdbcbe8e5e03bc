"""Multi-seed summary and plot of training metrics (strands_art/training/metrics.py)."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strands_art.training.metrics import plot_seeds, seed_summary


def run(evals: list[float], train: list[float] | None = None) -> list[dict]:
    """Records of one run: eval records at outer batches 0, 5, 10, ... and train records."""
    recs = [{"kind": "train", "outer_batch": b, "reward_mean": r} for b, r in enumerate(train or [])]
    recs += [{"kind": "eval", "outer_batch": 5 * i, "val_reward": v} for i, v in enumerate(evals)]
    return recs


def test_seed_summary_values():
    runs = {2: run([0.1, 0.3, 0.5]), 0: run([0.2, 0.1]), 1: run([0.1, 0.4])}
    s = seed_summary(runs)
    assert [x["seed"] for x in s["seeds"]] == [0, 1, 2]
    assert [round(x["gain"], 9) for x in s["seeds"]] == [-0.1, 0.3, 0.4]
    assert s["improved"] == 2 and s["n"] == 3
    assert s["reward_start"] == pytest.approx(0.4 / 3)
    assert s["reward_end"] == pytest.approx(1.0 / 3)
    assert s["gain_mean"] == pytest.approx(0.2)
    assert s["gain_std"] == pytest.approx(statistics.stdev([-0.1, 0.3, 0.4]))  # n - 1
    assert s["gain_min"] == pytest.approx(-0.1)


def test_seed_summary_one_seed_and_errors():
    assert seed_summary({7: run([0.2, 0.2])})["gain_std"] == 0.0
    assert seed_summary({7: run([0.2, 0.2])})["improved"] == 0  # equal is not an improvement
    with pytest.raises(ValueError, match="no runs"):
        seed_summary({})
    with pytest.raises(ValueError, match="seed 3: need eval records"):
        seed_summary({3: run([0.5], train=[0.1, 0.2])})


rewards = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.integers(0, 50), st.lists(rewards, min_size=2, max_size=4), min_size=1, max_size=6))
def test_seed_summary_properties(evals_by_seed):
    s = seed_summary({seed: run(ev) for seed, ev in evals_by_seed.items()})
    gains = [ev[-1] - ev[0] for _, ev in sorted(evals_by_seed.items())]
    assert math.isclose(s["gain_mean"], s["reward_end"] - s["reward_start"], abs_tol=1e-12)
    assert s["improved"] == sum(g > 0 for g in gains)
    assert s["gain_min"] <= s["gain_mean"] + 1e-12
    assert s["gain_std"] >= 0
    # the order the runs finished in (dict order) does not matter
    rev = seed_summary({seed: run(ev) for seed, ev in reversed(list(evals_by_seed.items()))})
    assert rev == s


def test_plot_seeds_draws_one_line_per_seed_and_the_mean(tmp_path):
    runs = {0: run([0.1, 0.3, 0.6], train=[0.1] * 10), 1: run([0.2, 0.2, 0.4], train=[0.2] * 10)}
    fig = plot_seeds(runs, tmp_path / "seeds.png")
    left, right = fig.axes
    assert len(left.lines) == 3 and len(right.lines) == 3  # 2 seeds + mean
    mean = right.lines[-1]
    assert list(mean.get_xdata()) == [0, 5, 10]
    assert list(mean.get_ydata()) == pytest.approx([0.15, 0.25, 0.5])
    assert (tmp_path / "seeds.png").stat().st_size > 1000
