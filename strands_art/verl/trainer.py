"""Step-stable batching inside verl 0.9.1's V1 PPO trainer, selected by ``trainer.v1.trainer_mode``.

verl's V1 trainer (``verl/trainer/ppo/v1/trainer_base.py``, the default with
``trainer.use_v1=True``) keeps rows in TransferQueue and moves only ``KVBatchMeta`` (keys
``{uid}_{session_id}_{index}`` and per-row tags such as ``seq_len``) through ``_step_once``.
Two of its steps count rows where we count prompts:

- ``_balance_batch`` pads the rows to ``lcm(dp, ppo_mini_batch_size * rollout.n)`` (513 rows
  -> 1,024) and reorders them for token balance only;
- ``_update_actor`` tags the batch with ``mini_batch_size = ppo_mini_batch_size * rollout.n``
  rows, so 1,536 rows take 3 optimizer steps where 512 took 1.

:class:`StepStablePPOTrainer` (registered as ``strands_sync`` with verl's ``register_trainer``;
the stock ``sync`` trainer otherwise) overrides just those two methods:

- ``_balance_batch``: :func:`plan_layout` runs our :func:`~strands_art.training.batching.build_batch`
  on the keys and ``seq_len`` tags (rollouts whole, token-balanced mini-batches, equal rank
  shards), verl's own ``upsample_batch_to_divisible_size`` appends the padding rows (loss mask
  0, tagged ``is_padding``) and ``KVBatchMeta.reorder`` lays the rows out rank-major;
- ``_update_actor``: verl's method runs unchanged, but its call of the actor worker group is
  re-tagged on the way (:class:`_StepStableActor`): ``mini_batch_size`` is dropped and
  ``num_mini_batch`` (the count) set, with ``shuffle=False``, which
  ``TrainingWorker.train_mini_batch`` (``verl/workers/engine_workers.py``) supports.

Everything else (rewards, old/ref logprobs, GRPO advantages over the last row of each session,
metrics, checkpoints, weight sync) is verl's ``PPOTrainerSync``.

Mapping of the configuration (all verl's own keys): prompt batch = ``data.train_batch_size``;
prompts per mini-batch = ``actor_rollout_ref.actor.ppo_mini_batch_size``; epochs =
``actor_rollout_ref.actor.ppo_epochs``; dp = the actor's data-parallel size; micro-batch budget =
``actor_rollout_ref.actor.ppo_max_token_len_per_gpu``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

try:
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size
    from verl.trainer.ppo.v1 import PPOTrainerSync, register_trainer
except ImportError as exc:  # pragma: no cover - exercised only without verl
    raise ImportError(
        "strands_art.verl.trainer needs verl==0.9.1 with TransferQueue: "
        "pip install 'strands-art[verl]' 'TransferQueue>=0.1.10'"
    ) from exc

from strands_art.training.batching import BatchingConfig, BatchingPlan, BatchRow, OuterBatch, build_batch
from strands_art.trajectory import Row

logger = logging.getLogger(__name__)

TRAINER_NAME = "strands_sync"


@dataclass(frozen=True)
class Layout:
    """Where verl's rows go.

    Attributes:
        order: indices into the padded key list (real rows ``0..n-1``, then the padding rows
            ``n..rows_after_padding-1`` that verl appends), rank-major.
        plan: the batching plan (``num_mini_batches``, ``optimizer_steps``,
            ``rows_after_padding``, ``padding_rows``).
        batch: the :class:`OuterBatch` over length-only stand-in rows (``input_ids`` is a
            ``range`` of the row's ``seq_len``; use it for layout and token counts only).
    """

    order: list[int]
    plan: BatchingPlan
    batch: OuterBatch


def rollout_of(key: str) -> tuple[str, str]:
    """``(rollout, group)`` of a V1 key ``{uid}_{session_id}_{index}``: ``({uid}_{session_id}, uid)``.

    Raises:
        ValueError: the key is not in that form.
    """
    parts = key.rsplit("_", 2)
    if len(parts) != 3 or not parts[2].isdigit():
        raise ValueError(f"unexpected verl row key {key!r} (want uid_session_index)")
    return f"{parts[0]}_{parts[1]}", parts[0]


def plan_layout(keys: list[str], tags: list[dict[str, Any]], config: BatchingConfig) -> Layout:
    """Plan the rows of one step with our step-stable batching.

    Args:
        keys: the batch's TransferQueue keys (real rows only).
        tags: their tags; ``seq_len`` (prompt + response tokens) is read.
        config: the batching configuration (``dp_size`` = the actor's data-parallel size).

    Returns:
        A :class:`Layout`; the batch must be padded to ``plan.rows_after_padding`` rows (appended
        after the real ones) and then reordered by ``order``.

    Raises:
        ValueError: no rows, a padding row among them, a malformed key or a missing ``seq_len``.
    """
    if not keys:
        raise ValueError("no rows to train on")
    rows: list[BatchRow] = []
    for key, tag in zip(keys, tags, strict=True):
        if tag.get("is_padding"):
            raise ValueError(f"row {key!r} is already padding; plan_layout takes real rows only")
        if "seq_len" not in tag:
            raise ValueError(f"row {key!r} has no seq_len tag")
        rollout, group = rollout_of(key)
        stand_in = Row(range(int(tag["seq_len"])), [], [], rollout_id=rollout, group_id=group)  # type: ignore[arg-type]
        rows.append(BatchRow(stand_in))
    batch = build_batch(rows, config)
    index = {id(br.row): i for i, br in enumerate(rows)}
    order: list[int] = []
    next_pad = len(rows)
    for br in batch.rows_in_order():
        if br.padding:
            order.append(next_pad)
            next_pad += 1
        else:
            order.append(index[id(br.row)])
    return Layout(order=order, plan=batch.plan, batch=batch)


class _StepStableActor:
    """The actor worker group as ``_update_actor`` sees it: re-tags the batch, then delegates."""

    def __init__(self, worker_group: Any, num_mini_batch: int) -> None:
        self.worker_group = worker_group
        self.num_mini_batch = num_mini_batch

    def update_actor(self, batch: KVBatchMeta) -> Any:
        batch.extra_info.pop("mini_batch_size", None)
        batch.extra_info["num_mini_batch"] = self.num_mini_batch
        batch.extra_info["dataloader_kwargs"] = {"shuffle": False}
        return self.worker_group.update_actor(batch)


@register_trainer(TRAINER_NAME)
class StepStablePPOTrainer(PPOTrainerSync):
    """verl's synchronous V1 trainer with step-stable batching (see the module docstring)."""

    _layout: Layout | None = None

    def __init__(self, config: Any) -> None:
        """verl's ``PPOTrainer.__init__``, then the synchronous mode under verl's own name.

        verl 0.9.1 tests the literal ``trainer_mode == "sync"`` (``trainer_base.py``:
        ``_build_replay_buffer``, ``_init_dataloader``, ``_submit_batch_to_rollout``,
        ``_load_checkpoint``, ``_reissue_inflight_prompts``, ``_save_checkpoint``); under
        ``strands_sync`` it would take the asynchronous paths (``ReplayBufferAsync``, one prompt per
        dataloader fetch, prompts and TransferQueue state in checkpoints). ``trainer.v1.sync``
        holds the mode's options, as for the stock trainer.
        """
        super().__init__(config)
        self.trainer_mode = "sync"
        self.replay_buffer = self._build_replay_buffer()

    def batching_config(self, dp_size: int) -> BatchingConfig:
        """Our :class:`BatchingConfig` from verl's own configuration keys."""
        actor = self.config.actor_rollout_ref.actor
        return BatchingConfig(
            prompt_batch_size=int(self.config.data.train_batch_size),
            ppo_mini_batch_size=int(actor.ppo_mini_batch_size),
            ppo_epochs=int(actor.ppo_epochs),
            dp_size=dp_size,
            micro_batch_max_tokens=int(actor.ppo_max_token_len_per_gpu),
        )

    def _actor_dp_size(self) -> int:
        wg = self.actor_rollout_wg
        if "actor" not in wg._dispatch_info:
            wg._dispatch_info["actor"] = wg._query_dispatch_info("actor")
        return max(wg._dispatch_info["actor"]) + 1

    def _balance_batch(
        self,
        batch: KVBatchMeta,
        metrics: dict,
        logging_prefix: str = "global_seqlen",
        keep_minibatch: bool = False,
    ) -> KVBatchMeta:  # noqa: E501
        layout = plan_layout(batch.keys, batch.tags, self.batching_config(self._actor_dp_size()))
        if layout.plan.rows_after_padding > len(batch):
            # len < multiple -> verl appends exactly (multiple - len) no-op rows
            batch = upsample_batch_to_divisible_size(
                batch, layout.plan.rows_after_padding, self.tokenizer.eos_token_id
            )
        batch.reorder(layout.order)
        self._layout = layout
        m = layout.batch.metrics
        metrics.update(
            {
                "strands/num_mini_batches": layout.plan.num_mini_batches,
                "strands/padding_rows": layout.plan.padding_rows,
                "strands/rows": m["rows"],
                "strands/rows_per_rollout": m["rows_per_rollout"],
                "strands/max_mini_batch_tokens": m["max_mini_batch_tokens"],
                "strands/min_mini_batch_tokens": m["min_mini_batch_tokens"],
            }
        )
        return batch

    def _update_actor(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        if self._layout is None:
            raise RuntimeError("_update_actor before _balance_batch: no step-stable layout for this step")
        wg = self.actor_rollout_wg
        self.actor_rollout_wg = _StepStableActor(wg, self._layout.plan.num_mini_batches)
        try:
            return super()._update_actor(batch, metrics)
        finally:
            self.actor_rollout_wg = wg
            self._layout = None
