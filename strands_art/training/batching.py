"""Step-stable batching: the optimizer-step count comes from the configuration, not the rows.

One rollout can leave several rows (tree forks, linear resets). Cutting rows into mini-batches
of a fixed row count (the ``fixed_rows`` mode, kept for comparison) makes more rows mean more
optimizer updates. In ``fixed_steps`` mode (the default):

- ``num_mini_batches = prompt_batch_size / ppo_mini_batch_size`` (both in source prompts; a
  configuration where it does not divide is rejected);
- ``optimizer_steps = num_mini_batches * ppo_epochs``, whatever the row count;
- every row is used; rows are padded only up to a multiple of ``num_mini_batches * dp_size``
  (513 rows, 1 mini-batch, 2 ranks -> 514), padding rows have loss mask 0 and advantage 0;
- all rows of one rollout go to the same mini-batch (a GRPO group too when the row counts allow
  it) and mini-batches are balanced by tokens (greedy, largest first);
- inside a mini-batch each data-parallel rank gets the same number of rows, and each rank's rows
  are cut into length-sorted micro-batches under a token budget for gradient accumulation.

See docs/variable-row-batching.md for the formulas and the verl wiring.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

from strands_art.trajectory import Row
from strands_art.validation import is_int

logger = logging.getLogger(__name__)

Mode = Literal["fixed_steps", "fixed_rows"]
MODES: tuple[str, ...] = ("fixed_steps", "fixed_rows")
PADDING_ROLLOUT_PREFIX = "__padding__"
MAX_COUNT = (1 << 31) - 1
"""Largest row / prompt / epoch count accepted (row indices are int32 in the store)."""
MAX_DP_SIZE = 1 << 20
"""Largest data-parallel size accepted (about a million ranks; more is a typo, not a cluster)."""


def _check_count(name: str, value: object, most: int) -> None:
    if not is_int(value) or not 1 <= value <= most:
        raise ValueError(f"{name} must be a positive integer of at most {most:,}, got {value!r}")


@dataclass(frozen=True)
class BatchingConfig:
    """How one outer batch of rollouts becomes optimizer steps.

    Attributes:
        prompt_batch_size: source prompts (tasks) per outer batch.
        ppo_mini_batch_size: source prompts per PPO mini-batch (one optimizer step each).
        ppo_epochs: passes over the outer batch.
        dp_size: data-parallel ranks; each mini-batch is split into this many equal row shards.
        mode: ``"fixed_steps"`` (step count from the configuration) or ``"fixed_rows"`` (the old
            behaviour: mini-batches of ``rows_per_mini_batch`` rows, so more rows = more steps).
        rows_per_mini_batch: rows per mini-batch in ``fixed_rows`` mode (verl's
            ``ppo_mini_batch_size * rollout.n``); must be a multiple of ``dp_size``.
        micro_batch_max_tokens: token budget of one micro-batch, counted padded
            (rows x longest row); a row longer than the budget gets a micro-batch of its own.

    Raises:
        ValueError: on a size that is not a positive integer (``dp_size`` at most
            :data:`MAX_DP_SIZE`, the others at most :data:`MAX_COUNT`), an unknown mode, a mini-batch larger than the prompt
            batch or not dividing it, or a ``fixed_rows`` configuration without a valid
            ``rows_per_mini_batch``.
    """

    prompt_batch_size: int
    ppo_mini_batch_size: int
    ppo_epochs: int = 1
    dp_size: int = 1
    mode: Mode = "fixed_steps"
    rows_per_mini_batch: int | None = None
    micro_batch_max_tokens: int = 16384

    def __post_init__(self) -> None:
        for name in (
            "prompt_batch_size",
            "ppo_mini_batch_size",
            "ppo_epochs",
            "dp_size",
            "micro_batch_max_tokens",
        ):
            _check_count(name, getattr(self, name), MAX_DP_SIZE if name == "dp_size" else MAX_COUNT)
            object.__setattr__(self, name, int(getattr(self, name)))  # numpy ints -> int (JSON)
        if self.rows_per_mini_batch is not None:
            _check_count("rows_per_mini_batch", self.rows_per_mini_batch, MAX_COUNT)
            object.__setattr__(self, "rows_per_mini_batch", int(self.rows_per_mini_batch))
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.ppo_mini_batch_size > self.prompt_batch_size:
            raise ValueError(
                f"ppo_mini_batch_size={self.ppo_mini_batch_size} exceeds "
                f"prompt_batch_size={self.prompt_batch_size} (both count source prompts)"
            )
        if self.prompt_batch_size % self.ppo_mini_batch_size:
            raise ValueError(
                f"prompt_batch_size={self.prompt_batch_size} is not divisible by "
                f"ppo_mini_batch_size={self.ppo_mini_batch_size}: num_mini_batches = "
                "prompt_batch_size / ppo_mini_batch_size must be a whole number"
            )
        if self.mode == "fixed_rows":
            r = self.rows_per_mini_batch
            if r is None or r < 1:
                raise ValueError("fixed_rows mode needs rows_per_mini_batch >= 1")
            if r % self.dp_size:
                raise ValueError(
                    f"rows_per_mini_batch={r} is not divisible by dp_size={self.dp_size} "
                    "(each rank takes an equal share of a mini-batch)"
                )

    @property
    def num_mini_batches(self) -> int:
        """Mini-batches per epoch in ``fixed_steps`` mode: prompt_batch_size / ppo_mini_batch_size."""
        return self.prompt_batch_size // self.ppo_mini_batch_size


@dataclass(frozen=True)
class BatchingPlan:
    """Counts for one outer batch (what ``strands-art batching-plan`` prints).

    Attributes:
        num_mini_batches: mini-batches per epoch.
        optimizer_steps: num_mini_batches * ppo_epochs.
        rows_after_padding: rows actually fed to the trainer.
        padding_rows: rows_after_padding - real rows (loss mask 0, advantage 0).
    """

    num_mini_batches: int
    optimizer_steps: int
    rows_after_padding: int
    padding_rows: int

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def _round_up(n: int, k: int) -> int:
    return -(-n // k) * k


def plan(num_rows: int, config: BatchingConfig) -> BatchingPlan:
    """Plan one outer batch of ``num_rows`` rows from counts alone.

    ``fixed_steps``: ``num_mini_batches = P / M``; rows padded up to a multiple of
    ``num_mini_batches * dp``. ``fixed_rows``: rows padded up to a multiple of ``dp``;
    ``num_mini_batches = ceil(rows_after_padding / rows_per_mini_batch)`` (the last one smaller).
    In both, ``optimizer_steps = num_mini_batches * ppo_epochs``.

    In ``fixed_steps`` mode this is also the padding :func:`build_batch` achieves whenever the
    rollouts' row counts can fill the mini-batches evenly (always with one mini-batch or one row
    per rollout); otherwise :func:`build_batch` pads further and reports it in its own plan.

    Raises:
        ValueError: if ``num_rows < 1``.
    """
    _check_count("num_rows", num_rows, MAX_COUNT)
    if config.mode == "fixed_rows":
        assert config.rows_per_mini_batch is not None
        rows = _round_up(num_rows, config.dp_size)
        nmb = math.ceil(rows / config.rows_per_mini_batch)
    else:
        nmb = config.num_mini_batches
        rows = _round_up(num_rows, nmb * config.dp_size)
    return BatchingPlan(nmb, nmb * config.ppo_epochs, rows, rows - num_rows)


@dataclass(frozen=True)
class BatchRow:
    """A row ready for the trainer: the captured row plus its rollout's advantage.

    Attributes:
        row: the captured :class:`~strands_art.trajectory.Row`.
        advantage: the rollout's advantage, applied to every sampled token of the row.
        padding: True for a padding row (loss mask all 0, advantage 0, no metrics).
    """

    row: Row
    advantage: float = 0.0
    padding: bool = False

    @property
    def num_tokens(self) -> int:
        return len(self.row.input_ids)


def padding_row(index: int, pad_token_id: int = 0) -> BatchRow:
    """A one-token padding row: loss mask 0, logprob 0, advantage 0, marked ``padding``."""
    row = Row(
        input_ids=[pad_token_id],
        loss_mask=[0],
        logprobs=[0.0],
        rollout_id=f"{PADDING_ROLLOUT_PREFIX}{index}",
        metadata={"padding": True},
    )
    return BatchRow(row=row, advantage=0.0, padding=True)


@dataclass
class MiniBatch:
    """One optimizer step's rows, as ``dp_size`` equal shards (one per data-parallel rank)."""

    shards: list[list[BatchRow]]

    @property
    def rows(self) -> list[BatchRow]:
        return [r for shard in self.shards for r in shard]

    @property
    def rollout_ids(self) -> set[str]:
        """Distinct rollouts in this mini-batch (padding excluded)."""
        return {r.row.rollout_id for r in self.rows if not r.padding}

    @property
    def num_rollouts(self) -> int:
        return len(self.rollout_ids)

    @property
    def num_sampled_tokens(self) -> int:
        """Loss-mask-1 tokens over all rows: the ``token-mean`` denominator."""
        return sum(r.row.num_sampled for r in self.rows)

    @property
    def num_tokens(self) -> int:
        return sum(r.num_tokens for r in self.rows if not r.padding)


@dataclass
class OuterBatch:
    """The rows of one outer batch laid out as mini-batches; iterate epochs x mini-batches."""

    config: BatchingConfig
    plan: BatchingPlan
    mini_batches: list[MiniBatch]
    metrics: dict[str, float] = field(default_factory=dict)

    def steps(self) -> list[MiniBatch]:
        """The mini-batches in optimizer-step order: ``ppo_epochs`` passes over ``mini_batches``."""
        return [mb for _ in range(self.config.ppo_epochs) for mb in self.mini_batches]

    def rows_in_order(self) -> list[BatchRow]:
        """Rows rank-major (rank 0's shards of every mini-batch, then rank 1's, ...).

        This is the order verl needs: it chunks the batch into ``dp`` contiguous parts, one per
        rank, and each rank cuts its part into ``num_mini_batches`` equal contiguous pieces.
        """
        dp = self.config.dp_size
        return [r for rank in range(dp) for mb in self.mini_batches for r in mb.shards[rank]]


def _units(rows: Sequence[BatchRow], key: str) -> list[list[BatchRow]]:
    """Group rows by rollout id (``key="rollout"``) or by group id (``key="group"``), in order."""
    units: dict[str, list[BatchRow]] = {}
    for r in rows:
        if key == "group" and r.row.group_id is not None:
            k = "g:" + r.row.group_id
        else:
            k = "r:" + r.row.rollout_id
        units.setdefault(k, []).append(r)
    return list(units.values())


def _tokens(unit: Sequence[BatchRow]) -> int:
    return sum(r.num_tokens for r in unit)


def _pack(units: list[list[BatchRow]], bins: int, capacity: int, order: str) -> list[list[BatchRow]] | None:
    """Greedy: place units (largest first) in the bin with fewest tokens that has row capacity."""
    if order == "tokens":
        ordered = sorted(units, key=lambda u: (-_tokens(u), -len(u)))
    else:
        ordered = sorted(units, key=lambda u: (-len(u), -_tokens(u)))
    out: list[list[BatchRow]] = [[] for _ in range(bins)]
    tok = [0] * bins
    for unit in ordered:
        fits = [b for b in range(bins) if len(out[b]) + len(unit) <= capacity]
        if not fits:
            return None
        b = min(fits, key=lambda i: (tok[i], len(out[i]), i))
        out[b].extend(unit)
        tok[b] += _tokens(unit)
    return out


def partition(rows: Sequence[BatchRow], bins: int, capacity: int) -> list[list[BatchRow]] | None:
    """Session-aware partition into ``bins`` mini-batches of at most ``capacity`` rows each.

    Rollouts are never split. Whole GRPO groups are placed first; if that cannot fit, rollouts
    are placed one by one. Among feasible greedy packings the one with the smallest largest
    token total wins. Returns None if no greedy packing fits.
    """
    best: list[list[BatchRow]] | None = None
    for key in ("group", "rollout"):
        units = _units(rows, key)
        for order in ("tokens", "rows"):
            packed = _pack(units, bins, capacity, order)
            if packed is not None and (best is None or max(map(_tokens, packed)) < max(map(_tokens, best))):
                best = packed
        if best is not None:
            return best
    return None


def _shard(rows: list[BatchRow], dp: int, per_rank: int, pad_start: int, pad_id: int) -> list[list[BatchRow]]:
    """Split one mini-batch's rows into ``dp`` shards of ``per_rank`` rows, balanced by tokens."""
    shards: list[list[BatchRow]] = [[] for _ in range(dp)]
    tok = [0] * dp
    for r in sorted(rows, key=lambda r: -r.num_tokens):
        b = min((i for i in range(dp) if len(shards[i]) < per_rank), key=lambda i: (tok[i], i))
        shards[b].append(r)
        tok[b] += r.num_tokens
    k = pad_start
    for shard in shards:
        while len(shard) < per_rank:
            shard.append(padding_row(k, pad_id))
            k += 1
    return shards


def build_batch(rows: Sequence[BatchRow], config: BatchingConfig, pad_token_id: int = 0) -> OuterBatch:
    """Lay out one outer batch of rows as mini-batches and data-parallel shards.

    The layout depends only on the rows, not on the order of the rollouts in ``rows``: they
    are taken in ``rollout_id`` order (a stable sort, so the rows of one rollout keep their
    order), so rollouts that finished in another order give the same mini-batches, shards and
    micro-batches, hence the same padding and summation order in the trainer.

    Args:
        rows: the real rows (no padding) with their advantages; rows of one rollout share a
            ``rollout_id``, rollouts of one task share a ``group_id``.
        config: the batching configuration.
        pad_token_id: token ID of padding rows.

    Returns:
        An :class:`OuterBatch` whose ``plan`` states the padding actually used. In
        ``fixed_steps`` mode it equals :func:`plan` unless the rollouts' row counts cannot fill
        ``num_mini_batches`` equal mini-batches, in which case each mini-batch grows by ``dp``
        rows until they fit (logged, and visible in ``padding_rows``); ``optimizer_steps``
        never changes.

    Raises:
        ValueError: if ``rows`` is empty or contains padding rows.
    """
    if not rows:
        raise ValueError("no rows to batch (every rollout failed or none was given)")
    if any(r.padding for r in rows):
        raise ValueError("build_batch takes real rows only; it adds padding itself")
    rows = sorted(rows, key=lambda r: r.row.rollout_id)
    dp = config.dp_size
    base = plan(len(rows), config)
    if config.mode == "fixed_rows":
        ordered = list(rows) + [padding_row(i, pad_token_id) for i in range(base.padding_rows)]
        size = config.rows_per_mini_batch
        assert size is not None
        chunks = [ordered[i : i + size] for i in range(0, len(ordered), size)]
        mbs = [MiniBatch([c[k * len(c) // dp : (k + 1) * len(c) // dp] for k in range(dp)]) for c in chunks]
        result_plan = base
    else:
        nmb = base.num_mini_batches
        capacity = base.rows_after_padding // nmb
        packed = partition(rows, nmb, capacity)
        while packed is None:
            capacity += dp
            packed = partition(rows, nmb, capacity)
        if capacity * nmb != base.rows_after_padding:
            logger.info(
                "rollout row counts do not fill %d mini-batches of %d rows; using %d rows each",
                nmb,
                base.rows_after_padding // nmb,
                capacity,
            )
        mbs = []
        pad_index = 0
        for mb_rows in packed:
            mbs.append(MiniBatch(_shard(mb_rows, dp, capacity // dp, pad_index, pad_token_id)))
            pad_index += capacity - len(mb_rows)
        total = capacity * nmb
        result_plan = BatchingPlan(nmb, base.optimizer_steps, total, total - len(rows))
    batch = OuterBatch(config=config, plan=result_plan, mini_batches=mbs)
    batch.metrics = batch_metrics(batch)
    return batch


def micro_batches(shard: Sequence[BatchRow], max_tokens: int, shared: int = 0) -> list[list[BatchRow]]:
    """Cut one rank's rows into length-sorted micro-batches under a padded-token budget.

    Rows are sorted longest first; a micro-batch grows while ``rows * longest_row <= max_tokens``.
    A row longer than ``max_tokens`` gets a micro-batch of its own (logged at WARNING).
    ``shared``: leading tokens every row has in common and that are run once elsewhere (a shared
    prompt prefix, :mod:`strands_art.training.shared_prefix`); they are not counted.

    Returns:
        Micro-batches covering every row of ``shard`` exactly once.
    """
    out: list[list[BatchRow]] = []
    current: list[BatchRow] = []
    for r in sorted(shard, key=lambda r: -r.num_tokens):
        if r.num_tokens - shared > max_tokens:
            logger.warning(
                "row of %d tokens exceeds micro_batch_max_tokens=%d", r.num_tokens - shared, max_tokens
            )
        longest = (current[0].num_tokens if current else r.num_tokens) - shared
        if current and (len(current) + 1) * longest > max_tokens:
            out.append(current)
            current = []
        current.append(r)
    if current:
        out.append(current)
    return out


def batch_metrics(batch: OuterBatch) -> dict[str, float]:
    """Counts for logging; padding rows are excluded from every count but ``padding_rows``.

    Keys: rows, padding_rows, rollouts, tokens, sampled_tokens, optimizer_steps, mini_batches,
    rows_per_rollout, max_mini_batch_tokens, min_mini_batch_tokens, micro_batches,
    padded_token_fraction (padding tokens / tokens fed, with length-sorted micro-batches).
    """
    real = [r for mb in batch.mini_batches for r in mb.rows if not r.padding]
    rollouts = {r.row.rollout_id for r in real}
    mb_tokens = [mb.num_tokens for mb in batch.mini_batches]
    fed = 0
    n_micro = 0
    for mb in batch.mini_batches:
        for shard in mb.shards:
            for micro in micro_batches(shard, batch.config.micro_batch_max_tokens):
                n_micro += 1
                fed += len(micro) * micro[0].num_tokens
    tokens = sum(r.num_tokens for r in real)
    return {
        "rows": len(real),
        "padding_rows": batch.plan.padding_rows,
        "rollouts": len(rollouts),
        "tokens": tokens,
        "sampled_tokens": sum(r.row.num_sampled for r in real),
        "optimizer_steps": batch.plan.optimizer_steps,
        "mini_batches": batch.plan.num_mini_batches,
        "rows_per_rollout": len(real) / len(rollouts) if rollouts else 0.0,
        "max_mini_batch_tokens": max(mb_tokens),
        "min_mini_batch_tokens": min(mb_tokens),
        "micro_batches": n_micro,
        "padded_token_fraction": 1.0 - tokens / fed if fed else 0.0,
    }
