"""GRPO advantages: exact values, failed rollouts, all-equal groups, rows carry advantages."""

from __future__ import annotations

import logging
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strands_art.training.grpo import GRPOConfig, compute_advantages, group_advantages
from strands_art.trajectory import Row, Trajectory


def traj(rid: str, group: str | None, reward: float | None, n_rows: int = 1, **meta) -> Trajectory:
    rows = [
        Row([1, 2, 3], [0, 1, 1], [0.0, -0.1, -0.2], rollout_id=rid, group_id=group) for _ in range(n_rows)
    ]
    return Trajectory(rollout_id=rid, group_id=group, rows=rows, reward=reward, metadata=meta)


def test_group_advantages_exact():
    # mean 0.5, unbiased std = sqrt(1/3)
    std = math.sqrt(1 / 3)
    got = group_advantages([1.0, 0.0, 1.0, 0.0], GRPOConfig(std_eps=0.0))
    assert got == pytest.approx([0.5 / std, -0.5 / std, 0.5 / std, -0.5 / std])
    assert group_advantages([1.0, 0.0, 0.5], GRPOConfig(scale_by_std=False)) == pytest.approx(
        [0.5, -0.5, 0.0]
    )
    assert group_advantages([0.7, 0.7], GRPOConfig()) == [0.0, 0.0]
    assert group_advantages([0.7], GRPOConfig()) == [0.0]


def test_eps_is_added_to_std():
    got = group_advantages([2.0, 0.0], GRPOConfig(std_eps=0.5))
    std = math.sqrt(2.0)
    assert got == pytest.approx([1.0 / (std + 0.5), -1.0 / (std + 0.5)])


def test_failed_rollouts_excluded_with_reason(caplog):
    trajs = [
        traj("a", "g", 1.0),
        traj("b", "g", 0.0),
        traj("c", "g", None),
        traj("d", "g", 1.0, failed=True, error="TimeoutError: 1800 s"),
        traj("e", "g", float("nan")),
    ]
    with caplog.at_level(logging.WARNING, logger="strands_art.training.grpo"):
        res = compute_advantages(trajs, GRPOConfig(scale_by_std=False))
    assert res.advantages == {"a": 0.5, "b": -0.5}
    assert res.excluded == {
        "c": "no reward",
        "d": "rollout failed: TimeoutError: 1800 s",
        "e": "reward is NaN",
    }
    assert {r.row.rollout_id for r in res.rows} == {"a", "b"}
    assert "TimeoutError" in caplog.text
    assert res.metrics["failed_rollouts"] == 3
    assert res.metrics["reward_mean"] == 0.5


def test_all_equal_group_counted_and_every_row_gets_advantage():
    trajs = [
        traj("a1", "A", 1.0, n_rows=3),
        traj("a2", "A", 0.0, n_rows=1),
        traj("b1", "B", 0.5, n_rows=2),
        traj("b2", "B", 0.5, n_rows=2),
    ]
    res = compute_advantages(trajs, GRPOConfig(scale_by_std=False))
    assert [(r.row.rollout_id, r.advantage) for r in res.rows] == [
        ("a1", 0.5),
        ("a1", 0.5),
        ("a1", 0.5),
        ("a2", -0.5),
        ("b1", 0.0),
        ("b1", 0.0),
        ("b2", 0.0),
        ("b2", 0.0),
    ]
    assert res.metrics["groups"] == 2
    assert res.metrics["zero_advantage_groups"] == 1
    assert res.metrics["rows_per_rollout"] == 2.0


def test_missing_group_id_is_own_group_and_row_group_filled():
    t = traj("x", None, 1.0)
    res = compute_advantages([t, traj("y", "G", 1.0)])
    assert res.advantages == {"x": 0.0, "y": 0.0}
    assert res.metrics["groups"] == 2
    # a row without group id inherits its trajectory's
    t2 = traj("z", "H", 1.0)
    t2.rows[0].group_id = None
    res = compute_advantages([t2])
    assert res.rows[0].row.group_id == "H"


def test_bad_rows_raise():
    t = traj("a", "g", 1.0)
    t.rows[0].rollout_id = "other"
    with pytest.raises(ValueError, match="found in trajectory 'a'"):
        compute_advantages([t])
    t = traj("a", "g", 1.0)
    t.rows[0].loss_mask.append(1)
    with pytest.raises(ValueError, match="row lengths differ"):
        compute_advantages([t])
    with pytest.raises(ValueError, match="duplicate rollout_id"):
        compute_advantages([traj("a", "g", 1.0), traj("a", "g", 0.0)])


@pytest.mark.parametrize("bad", [math.inf, -math.inf])
def test_non_finite_reward_excluded_grpo(bad, caplog):
    # issue 14 item 5: rewards 1, 0, ±inf → the two finite ones get ±1/sqrt(2) (GRPO, group of 3)
    trajs = [traj("a", "g", 1.0), traj("b", "g", 0.0), traj("c", "g", bad)]
    with caplog.at_level(logging.WARNING, logger="strands_art.training.grpo"):
        res = compute_advantages(trajs, GRPOConfig(std_eps=0.0))
    assert res.advantages == pytest.approx({"a": 0.7071067811865475, "b": -0.7071067811865475})
    sign = "+" if bad > 0 else "-"
    assert res.excluded == {"c": f"reward is {sign}inf"}
    assert f"reward is {sign}inf" in caplog.text
    assert {r.row.rollout_id for r in res.rows} == {"a", "b"}
    assert res.metrics["failed_rollouts"] == 1
    assert res.metrics["reward_std"] == 0.5  # pstdev of the kept rewards, not of inf


def test_non_finite_reward_excluded_dr_grpo():
    trajs = [traj("a", "g", 1.0), traj("b", "g", 0.0), traj("c", "g", math.inf), traj("d", "g", -math.inf)]
    res = compute_advantages(trajs, GRPOConfig(scale_by_std=False))
    assert res.advantages == {"a": 0.5, "b": -0.5}
    assert res.metrics["reward_mean"] == 0.5
    assert res.metrics["advantage_abs_mean"] == 0.5
    assert sorted(res.excluded) == ["c", "d"]


@pytest.mark.parametrize(
    ("reward", "reason"),
    [
        ("1.0", "reward is not a number: '1.0'"),
        (True, "reward is not a number: True"),
        ([1], "reward is not a number: [1]"),
    ],
)
def test_reward_that_is_not_a_number_excluded(reward, reason):
    res = compute_advantages([traj("a", "g", 1.0), traj("b", "g", 0.0), traj("c", "g", reward)])
    assert res.excluded == {"c": reason}
    assert set(res.advantages) == {"a", "b"}


def test_whole_group_non_finite_leaves_no_group():
    res = compute_advantages([traj("a", "g", math.inf), traj("b", "g", math.nan)])
    assert res.advantages == {} and res.rows == []
    assert res.metrics["groups"] == 0 and res.metrics["reward_mean"] == 0.0


def test_evaluation_scores_non_finite_reward_as_failed():
    import asyncio
    from types import SimpleNamespace

    from strands_art.backends.base import SamplingParams
    from strands_art.training.loop import evaluate

    rewards = {"t0": 1.0, "t1": math.inf, "t2": -math.inf, "t3": math.nan}

    async def rollout(gateway, task, rid, gid, sampling):
        return Trajectory(rollout_id=rid, group_id=gid, reward=rewards[task.name])

    tasks = [SimpleNamespace(name=n) for n in rewards]
    got = asyncio.run(evaluate(None, tasks, rollout, SamplingParams(), progress=False))
    assert got["val_reward"] == 0.25
    assert got["val_failed"] == 3
    assert got["val_reward_std"] == pytest.approx(math.sqrt(3) / 4)
    assert "val_success" not in got  # these rollouts report no success


def test_evaluation_success_counts_failed_rollouts_as_failures():
    import asyncio
    from types import SimpleNamespace

    from strands_art.backends.base import SamplingParams
    from strands_art.training.loop import evaluate

    # t0, t1 succeed; t2 does not; t3's reward is not finite (a failed rollout, success unread)
    outcome = {"t0": (1.0, True), "t1": (1.0, True), "t2": (0.5, False), "t3": (math.nan, True)}

    async def rollout(gateway, task, rid, gid, sampling):
        reward, ok = outcome[task.name]
        return Trajectory(rollout_id=rid, group_id=gid, reward=reward, metadata={"success": ok})

    tasks = [SimpleNamespace(name=n) for n in outcome]
    got = asyncio.run(evaluate(None, tasks, rollout, SamplingParams(), samples=2, progress=False))
    assert got["val_rollouts"] == 8 and got["val_failed"] == 2
    assert got["val_success"] == 0.5  # 4 of 8; the two failed ones count as failures
    assert got["val_reward"] == pytest.approx(5 / 8)

    async def partly(gateway, task, rid, gid, sampling):  # one rollout without the key: no success
        meta = {} if task.name == "t2" else {"success": True}
        return Trajectory(rollout_id=rid, group_id=gid, reward=1.0, metadata=meta)

    assert "val_success" not in asyncio.run(evaluate(None, tasks, partly, SamplingParams(), progress=False))

    async def all_failed(gateway, task, rid, gid, sampling):  # nothing to read success from
        return Trajectory(rollout_id=rid, group_id=gid, reward=math.nan, metadata={"success": True})

    got = asyncio.run(evaluate(None, tasks, all_failed, SamplingParams(), progress=False))
    assert got["val_failed"] == 4 and "val_success" not in got


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.floats(min_value=-10, max_value=10, allow_nan=False),
            st.sampled_from([math.inf, -math.inf, math.nan, None]),
        ),
        min_size=1,
        max_size=8,
    ),
    st.booleans(),
)
def test_bad_rewards_leave_the_others_as_if_they_were_absent(rewards, scale):
    """Property: adding rollouts whose reward is None/NaN/±inf changes no other advantage."""
    config = GRPOConfig(scale_by_std=scale)
    trajs = [traj(f"r{i}", "g", r) for i, r in enumerate(rewards)]
    good = [t for t in trajs if t.reward is not None and math.isfinite(t.reward)]
    res = compute_advantages(trajs, config)
    alone = compute_advantages(good, config)
    assert res.advantages == alone.advantages
    assert set(res.excluded) == {t.rollout_id for t in trajs} - {t.rollout_id for t in good}
    assert all(math.isfinite(a) for a in res.advantages.values())
    assert res.metrics["reward_mean"] == alone.metrics["reward_mean"]
