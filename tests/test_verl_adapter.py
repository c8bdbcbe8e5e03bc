"""verl adapter: rows -> verl's tensors, and verl's own mini-batch splitting counts the steps.

Runs verl 0.9.1's real ``TrainingWorker.train_mini_batch`` (its ``num_mini_batch`` path and
``tensordict_utils.make_iterator``) and the worker group's dispatch split
(``_split_args_kwargs_data_proto`` -> ``chunk_tensordict``) on CPU, with a stand-in engine whose
``train_batch`` records each mini-batch (one optimizer step each) instead of running a model.
"""

from __future__ import annotations

import pickle
from contextlib import contextmanager

import pytest

pytest.importorskip(
    "verl.workers.engine_workers",
    reason="verl==0.9.1 is not installed (pip install 'strands-art[verl]'; it also needs uvicorn and fastapi)",
)

import torch  # noqa: E402
from verl.single_controller.base.decorator import _split_args_kwargs_data_proto  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.workers.engine_workers import TrainingWorker  # noqa: E402

from strands_art.training.batching import BatchingConfig, BatchRow, build_batch  # noqa: E402
from strands_art.trajectory import Row  # noqa: E402
from strands_art.verl.adapter import (  # noqa: E402
    actor_update_meta,
    rows_to_dataproto,
    to_actor_tensordict,
)


@pytest.fixture(scope="module", autouse=True)
def process_group(tmp_path_factory):
    """train_mini_batch all-gathers token counts: a one-process gloo group on CPU."""
    if not torch.distributed.is_initialized():
        path = tmp_path_factory.mktemp("pg") / "store"
        torch.distributed.init_process_group("gloo", init_method=f"file://{path}", rank=0, world_size=1)
    yield
    torch.distributed.destroy_process_group()


class _Engine:
    def __init__(self, rank: int, size: int):
        self.rank, self.size = rank, size

    def get_data_parallel_size(self) -> int:
        return self.size

    def get_data_parallel_rank(self) -> int:
        return self.rank

    def get_data_parallel_group(self):
        return None

    def is_mp_src_rank_with_outputs(self) -> bool:
        return True

    @contextmanager
    def train_mode(self, **_):
        yield


class _Profiler:
    def step(self) -> None:
        pass


class _Worker:
    """What train_mini_batch touches on ``self``; train_batch records one optimizer step."""

    def __init__(self, rank: int, size: int):
        self.engine = _Engine(rank, size)
        self.profiler = _Profiler()
        self.steps: list[list[str]] = []

    def train_batch(self, td):
        self.steps.append(list(tu.get(td, "rollout_id")))
        return tu.get_tensordict(tensor_dict={}, non_tensor_dict={"metrics": {"rows": [[len(td)]]}})


def run_verl(td, dp: int) -> list[_Worker]:
    """Dispatch to ``dp`` ranks as the worker group does, then run each rank's train_mini_batch."""
    (chunks,), _ = _split_args_kwargs_data_proto(dp, td)
    workers = []
    for rank, chunk in enumerate(chunks):
        chunk = pickle.loads(pickle.dumps(chunk))  # what Ray's transport does
        if chunk.is_locked:
            chunk.unlock_()
        w = _Worker(rank, dp)
        TrainingWorker.train_mini_batch(w, chunk)
        workers.append(w)
    return workers


def make_rows(prompts: int, rollouts_per_prompt: int, rows_per_rollout: int) -> list[BatchRow]:
    out = []
    for p in range(prompts):
        for k in range(rollouts_per_prompt):
            rid = f"p{p}-r{k}"
            for j in range(rows_per_rollout):
                ctx = 3 + j
                ids = list(range(10, 10 + ctx + 2))
                row = Row(
                    ids, [0] * ctx + [1, 1], [0.0] * ctx + [-0.1, -0.2], rollout_id=rid, group_id=f"p{p}"
                )
                out.append(BatchRow(row, advantage=0.25 * (k % 3 - 1)))
    return out


def steps_for(rows, cfg, rollouts_per_mini_batch):
    batch = build_batch(rows, cfg)
    td = to_actor_tensordict(batch, rollouts_per_mini_batch)
    assert len(td) == batch.plan.rows_after_padding
    workers = run_verl(td, cfg.dp_size)
    counts = {len(w.steps) for w in workers}
    assert len(counts) == 1, "every rank must take the same number of optimizer steps"
    return batch, td, workers, counts.pop()


@pytest.mark.parametrize("rows_per_rollout", [1, 3])
def test_512_or_1536_rows_one_step(rows_per_rollout):
    cfg = BatchingConfig(prompt_batch_size=32, ppo_mini_batch_size=32, ppo_epochs=1)
    rows = make_rows(32, 16, rows_per_rollout)
    assert len(rows) == 512 * rows_per_rollout
    batch, td, workers, steps = steps_for(rows, cfg, 32 * 16)
    assert steps == 1 == batch.plan.optimizer_steps
    assert workers[0].steps[0].__len__() == 512 * rows_per_rollout


@pytest.mark.parametrize("rows_per_rollout", [1, 3])
def test_300_or_900_rows_three_mini_batches_three_steps(rows_per_rollout):
    cfg = BatchingConfig(prompt_batch_size=3, ppo_mini_batch_size=1, ppo_epochs=1)
    rows = make_rows(3, 100, rows_per_rollout)
    batch, td, workers, steps = steps_for(rows, cfg, 100)
    assert steps == 3
    assert batch.plan.padding_rows == 0
    # verl's own split keeps every rollout (and here every task group) inside one mini-batch
    seen: dict[str, int] = {}
    for i, ids in enumerate(workers[0].steps):
        assert len(ids) == 100 * rows_per_rollout
        for rid in ids:
            assert seen.setdefault(rid, i) == i
        assert len({rid.split("-")[0] for rid in ids}) == 1


def test_513_rows_two_ranks_pad_to_514():
    cfg = BatchingConfig(prompt_batch_size=32, ppo_mini_batch_size=32, dp_size=2)
    rows = make_rows(1, 513, 1)
    batch, td, workers, steps = steps_for(rows, cfg, 513)
    assert len(td) == 514 and steps == 1
    assert [len(w.steps[0]) for w in workers] == [257, 257]
    pads = [i for i, p in enumerate(tu.get(td, "is_padding")) if p]
    assert len(pads) == 1
    assert td["response_mask"][pads[0]].sum().item() == 0
    assert td["advantages"][pads[0]].abs().sum().item() == 0.0


def test_two_epochs_two_ranks_two_mini_batches():
    cfg = BatchingConfig(prompt_batch_size=4, ppo_mini_batch_size=2, ppo_epochs=2, dp_size=2)
    rows = make_rows(4, 4, 2)
    batch, td, workers, steps = steps_for(rows, cfg, 8)
    assert steps == 4 == batch.plan.optimizer_steps
    # step k on both ranks is the same mini-batch: rank shards of it hold its rollouts only
    for k in range(2):
        ranks = [set(w.steps[k]) for w in workers]
        expected = {r.row.rollout_id for r in batch.mini_batches[k].rows if not r.padding}
        assert (ranks[0] | ranks[1]) - {
            x for x in ranks[0] | ranks[1] if x.startswith("__padding__")
        } == expected


@pytest.mark.parametrize(("rows_per_rollout", "expected"), [(1, 1), (3, 3)])
def test_fixed_rows_mode_more_rows_more_steps(rows_per_rollout, expected):
    cfg = BatchingConfig(32, 32, mode="fixed_rows", rows_per_mini_batch=512)
    rows = make_rows(32, 16, rows_per_rollout)
    batch, td, workers, steps = steps_for(rows, cfg, 512)
    assert steps == expected == batch.plan.optimizer_steps
    assert tu.get(td, "mini_batch_size") == 512


def test_row_layout_exact():
    row = Row(
        [1, 2, 3, 4, 5, 6],
        [0, 0, 1, 0, 1, 1],
        [0.0, 0.0, -0.5, 0.0, -0.25, -0.125],
        rollout_id="r",
        group_id="g",
    )
    short = Row([7, 8], [0, 1], [0.0, -1.0], rollout_id="s", group_id="g")
    proto = rows_to_dataproto([BatchRow(row, 2.0), BatchRow(short, -1.0)], pad_token_id=0)
    b = proto.batch
    assert b["prompts"].tolist() == [[1, 2], [0, 7]]
    assert b["responses"].tolist() == [[3, 4, 5, 6], [8, 0, 0, 0]]
    assert b["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 1], [0, 1, 1, 0, 0, 0]]
    assert b["position_ids"].tolist() == [[0, 1, 2, 3, 4, 5], [0, 0, 1, 1, 1, 1]]
    assert b["response_mask"].tolist() == [[1, 0, 1, 1], [1, 0, 0, 0]]
    assert b["old_log_probs"].tolist() == [[-0.5, 0.0, -0.25, -0.125], [-1.0, 0.0, 0.0, 0.0]]
    assert b["advantages"].tolist() == [[2.0, 0.0, 2.0, 2.0], [-1.0, 0.0, 0.0, 0.0]]
    assert list(proto.non_tensor_batch["uid"]) == ["g", "g"]


def test_meta_passes_count_not_size():
    batch = build_batch(make_rows(4, 2, 1), BatchingConfig(4, 2, ppo_epochs=3))
    meta = actor_update_meta(batch, rollouts_per_mini_batch=4)
    assert meta["num_mini_batch"] == 2 and "mini_batch_size" not in meta
    assert meta["epochs"] == 3 and meta["dataloader_kwargs"] == {"shuffle": False}
    assert meta["global_batch_size"] == 4


def test_row_starting_with_sampled_token_rejected():
    row = Row([1, 2], [1, 1], [-0.1, -0.1], rollout_id="r")
    with pytest.raises(ValueError, match="starts with a sampled token"):
        rows_to_dataproto([BatchRow(row, 1.0)])
