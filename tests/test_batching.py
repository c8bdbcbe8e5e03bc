"""Step-stable batching: exact counts, padding, session-aware partitioning (properties)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strands_art.training.batching import (
    BatchingConfig,
    BatchRow,
    build_batch,
    micro_batches,
    plan,
)
from strands_art.trajectory import Row


def make_row(rollout: str, group: str | None, context: int, sampled: int) -> BatchRow:
    ids = list(range(1, context + sampled + 1))
    mask = [0] * context + [1] * sampled
    lps = [0.0] * context + [-0.5] * sampled
    return BatchRow(Row(ids, mask, lps, rollout_id=rollout, group_id=group), advantage=1.0)


def rollouts(rows_per_rollout: list[int], group_size: int = 1, tokens: int = 10) -> list[BatchRow]:
    out = []
    for i, n in enumerate(rows_per_rollout):
        for j in range(n):
            out.append(make_row(f"r{i}", f"g{i // group_size}", tokens, 2 + j))
    return out


# ---------------------------------------------------------------- plan (exact values)


@pytest.mark.parametrize(
    ("rows", "p", "m", "e", "dp", "expected"),
    [
        (512, 32, 32, 1, 1, (1, 1, 512, 0)),
        (1536, 32, 32, 1, 1, (1, 1, 1536, 0)),
        (300, 3, 1, 1, 1, (3, 3, 300, 0)),
        (900, 3, 1, 1, 1, (3, 3, 900, 0)),
        (513, 32, 32, 1, 2, (1, 1, 514, 1)),
        (513, 32, 8, 2, 2, (4, 8, 520, 7)),
        (7, 4, 1, 3, 1, (4, 12, 8, 1)),
    ],
)
def test_plan_fixed_steps(rows, p, m, e, dp, expected):
    cfg = BatchingConfig(prompt_batch_size=p, ppo_mini_batch_size=m, ppo_epochs=e, dp_size=dp)
    got = plan(rows, cfg)
    assert (got.num_mini_batches, got.optimizer_steps, got.rows_after_padding, got.padding_rows) == expected


@pytest.mark.parametrize(
    ("rows", "dp", "expected"),
    [
        (512, 1, (1, 1, 512, 0)),
        (1536, 1, (3, 3, 1536, 0)),
        (513, 2, (2, 2, 514, 1)),
        (1025, 1, (3, 3, 1025, 0)),
    ],
)
def test_plan_fixed_rows(rows, dp, expected):
    cfg = BatchingConfig(32, 32, dp_size=dp, mode="fixed_rows", rows_per_mini_batch=512)
    got = plan(rows, cfg)
    assert (got.num_mini_batches, got.optimizer_steps, got.rows_after_padding, got.padding_rows) == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prompt_batch_size": 32, "ppo_mini_batch_size": 12}, "not divisible by ppo_mini_batch_size=12"),
        ({"prompt_batch_size": 8, "ppo_mini_batch_size": 16}, "exceeds prompt_batch_size=8"),
        ({"prompt_batch_size": 8, "ppo_mini_batch_size": 0}, "ppo_mini_batch_size must be a positive"),
        ({"prompt_batch_size": 8, "ppo_mini_batch_size": 8, "mode": "bogus"}, "mode must be one of"),
        (
            {"prompt_batch_size": 8, "ppo_mini_batch_size": 8, "mode": "fixed_rows"},
            "needs rows_per_mini_batch",
        ),
        (
            {
                "prompt_batch_size": 8,
                "ppo_mini_batch_size": 8,
                "mode": "fixed_rows",
                "rows_per_mini_batch": 5,
                "dp_size": 2,
            },
            "rows_per_mini_batch=5 is not divisible by dp_size=2",
        ),
    ],
)
def test_config_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BatchingConfig(**kwargs)


def test_plan_rejects_zero_rows():
    with pytest.raises(ValueError, match="num_rows must be a positive integer"):
        plan(0, BatchingConfig(4, 2))


def test_build_batch_rejects_empty_and_padding():
    cfg = BatchingConfig(4, 2)
    with pytest.raises(ValueError, match="no rows"):
        build_batch([], cfg)
    batch = build_batch(rollouts([1]), cfg)
    pad = [r for r in batch.mini_batches[1].rows if r.padding]
    with pytest.raises(ValueError, match="real rows only"):
        build_batch(pad, cfg)


# ---------------------------------------------------------------- build_batch


def test_513_rows_two_ranks_pads_one_row():
    rows = rollouts([1] * 513)
    batch = build_batch(rows, BatchingConfig(32, 32, dp_size=2))
    assert batch.plan.rows_after_padding == 514
    assert batch.plan.padding_rows == 1
    (mb,) = batch.mini_batches
    assert [len(s) for s in mb.shards] == [257, 257]
    pads = [r for r in mb.rows if r.padding]
    assert len(pads) == 1
    assert pads[0].row.loss_mask == [0] and pads[0].advantage == 0.0
    # padding is excluded from metrics
    assert batch.metrics["rows"] == 513
    assert batch.metrics["rollouts"] == 513
    assert batch.metrics["sampled_tokens"] == 513 * 2


def test_rows_per_rollout_do_not_change_steps():
    cfg = BatchingConfig(prompt_batch_size=4, ppo_mini_batch_size=2, ppo_epochs=2)
    one = build_batch(rollouts([1] * 8, group_size=2), cfg)
    three = build_batch(rollouts([3] * 8, group_size=2), cfg)
    assert one.plan.optimizer_steps == three.plan.optimizer_steps == 4
    assert len(one.steps()) == len(three.steps()) == 4
    assert one.plan.padding_rows == three.plan.padding_rows == 0
    # every mini-batch holds 2 whole groups (4 rollouts) in both cases
    for batch in (one, three):
        for mb in batch.mini_batches:
            assert mb.num_rollouts == 4
            groups = {r.row.group_id for r in mb.rows}
            assert len(groups) == 2


def test_fixed_rows_mode_more_rows_more_steps():
    cfg = BatchingConfig(32, 32, mode="fixed_rows", rows_per_mini_batch=512)
    assert build_batch(rollouts([1] * 512), cfg).plan.optimizer_steps == 1
    batch = build_batch(rollouts([3] * 512), cfg)
    assert batch.plan.optimizer_steps == 3
    assert [len(mb.rows) for mb in batch.mini_batches] == [512, 512, 512]


def test_uneven_rollouts_grow_capacity_and_report_it():
    # 4 rollouts of 3 rows into 3 mini-batches: 12 rows, 4 per mini-batch cannot hold two rollouts
    batch = build_batch(rollouts([3, 3, 3, 3]), BatchingConfig(3, 1))
    assert batch.plan.optimizer_steps == 3
    assert batch.plan.rows_after_padding == 18
    assert batch.plan.padding_rows == 6
    sizes = sorted(mb.num_rollouts for mb in batch.mini_batches)
    assert sizes == [1, 1, 2]


def test_balanced_by_tokens_not_rows():
    # one long rollout (1 row of 100 tokens) and four short ones (1 row of 25 tokens each)
    rows = [make_row("long", "a", 98, 2)] + [make_row(f"s{i}", f"b{i}", 23, 2) for i in range(4)]
    batch = build_batch(rows, BatchingConfig(2, 1))
    # capacity 3 rows per mini-batch -> the long rollout stays alone with 1 short
    tokens = sorted(mb.num_tokens for mb in batch.mini_batches)
    assert tokens == [75, 125]


def test_micro_batches_token_budget():
    rows = [make_row(f"r{i}", None, n - 1, 1) for i, n in enumerate([10, 40, 20, 30, 100])]
    micro = micro_batches(rows, max_tokens=60)
    assert [[r.num_tokens for r in m] for m in micro] == [[100], [40], [30, 20], [10]]
    assert sorted(id(r) for m in micro for r in m) == sorted(id(r) for r in rows)


def test_padded_token_fraction():
    rows = [make_row("a", None, 8, 2), make_row("b", None, 3, 2)]
    batch = build_batch(rows, BatchingConfig(1, 1, micro_batch_max_tokens=100))
    # one micro-batch of 2 rows padded to 10 tokens: 15 real of 20 fed
    assert batch.metrics["padded_token_fraction"] == pytest.approx(0.25)


# ---------------------------------------------------------------- properties

rollout_shapes = st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(
    shape=rollout_shapes,
    nmb=st.sampled_from([1, 2, 3, 4]),
    dp=st.sampled_from([1, 2, 4]),
    epochs=st.integers(1, 3),
    group_size=st.integers(1, 4),
)
def test_partition_properties(shape, nmb, dp, epochs, group_size):
    rows = rollouts(shape, group_size=group_size)
    cfg = BatchingConfig(prompt_batch_size=nmb * 2, ppo_mini_batch_size=2, ppo_epochs=epochs, dp_size=dp)
    batch = build_batch(rows, cfg)
    # steps come from the configuration alone
    assert batch.plan.optimizer_steps == nmb * epochs
    assert len(batch.steps()) == nmb * epochs
    # every real row in exactly one mini-batch
    placed = [id(r) for mb in batch.mini_batches for r in mb.rows if not r.padding]
    assert sorted(placed) == sorted(id(r) for r in rows)
    # rollouts never split across mini-batches
    owner: dict[str, int] = {}
    for i, mb in enumerate(batch.mini_batches):
        for r in mb.rows:
            if not r.padding:
                assert owner.setdefault(r.row.rollout_id, i) == i
    # equal shards; padding only to divisibility when rollouts fit evenly
    sizes = {len(s) for mb in batch.mini_batches for s in mb.shards}
    assert len(sizes) == 1
    assert batch.plan.rows_after_padding == len(batch.rows_in_order())
    assert batch.plan.rows_after_padding % (nmb * dp) == 0
    assert batch.plan.padding_rows >= plan(len(rows), cfg).padding_rows
    if set(shape) == {1} or nmb == 1:
        assert batch.plan == plan(len(rows), cfg)
    for r in batch.rows_in_order():
        if r.padding:
            assert r.advantage == 0.0 and set(r.row.loss_mask) == {0}


@settings(max_examples=30, deadline=None)
@given(shape=rollout_shapes, expansion=st.integers(1, 3))
def test_steps_independent_of_row_expansion(shape, expansion):
    cfg = BatchingConfig(prompt_batch_size=8, ppo_mini_batch_size=2, ppo_epochs=2)
    base = build_batch(rollouts(shape), cfg)
    expanded = build_batch(rollouts([n * expansion for n in shape]), cfg)
    assert base.plan.optimizer_steps == expanded.plan.optimizer_steps == 8
