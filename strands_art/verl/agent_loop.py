"""A verl agent loop that runs a Strands agent through our gateway on verl's rollout servers.

Registered as ``strands_agent`` (verl's ``@register``, ``verl/experimental/agent_loop/
agent_loop.py``); select it per dataset row with the ``agent_name`` column, or configure a
named variant (its rollout function and options) in the YAML file that
``actor_rollout_ref.rollout.agent.agent_loop_config_path`` points to (see docs/setup-verl.md).

One :meth:`StrandsAgentLoop.run` = one rollout: a :class:`~strands_art.gateway.RolloutGateway`
over :class:`~strands_art.verl.backend.VerlServerBackend` (verl's ``server_manager``,
sticky per rollout), an *episode function* that drives the agent and returns the finished
:class:`~strands_art.trajectory.Trajectory` with its reward, then :func:`trajectory_outputs`.

Several rows per rollout: verl 0.9.1's V1 trainer (``trainer.use_v1=True``, the default) accepts
a ``list[AgentLoopOutput]`` from ``run`` (``AgentLoopWorkerTQ._agent_loop_postprocess`` in
``verl/trainer/ppo/v1/agent_loop_tq.py``) and stores each under the key
``{uid}_{session_id}_{index}``; the reward of the last one is copied to the others and GRPO
computes the group advantage from the last output of each session and broadcasts it to all of
them (``compute_advantage_for_multi_trajectories``, ``verl/trainer/ppo/v1/utils.py``). So we
return **one AgentLoopOutput per row**, in capture order. The legacy trainer
(``trainer.use_v1=False``, ``AgentLoopWorker._postprocess``) takes one output per sample and
fails on a list; it is not supported.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

try:
    from hydra.utils import get_object
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopBase,
        AgentLoopMetrics,
        AgentLoopOutput,
        register,
    )
except ImportError as exc:  # pragma: no cover - exercised only without verl
    raise ImportError(
        "strands_art.verl.agent_loop needs verl==0.9.1: pip install 'strands-art[verl]'"
    ) from exc

from strands_art.backends.base import SamplingParams
from strands_art.gateway import RolloutGateway
from strands_art.training.batching import BatchRow
from strands_art.training.grpo import GRPOConfig, reward_problem, rows_as_trained
from strands_art.trajectory import Row, Trajectory
from strands_art.verl.adapter import split_point
from strands_art.verl.backend import VerlServerBackend, from_verl_sampling_params

logger = logging.getLogger(__name__)

MIGRATIONBENCH_EPISODE = "strands_art.envs.migrationbench.run.episodes.migrationbench_episode"
"""The default :data:`Episode` (a dotted path: the verl front does not import ``envs``)."""

Episode = Callable[[RolloutGateway, SamplingParams, Mapping[str, Any]], Awaitable[Trajectory]]
"""``(gateway, sampling, sample) -> finished trajectory``: opens a session on ``gateway`` with
``sampling``, runs the agent, closes the session with the reward. ``sample`` holds the dataset
row's fields plus verl's ``uid`` (the prompt group) and ``session_id`` (0..n-1)."""


def row_output(
    row: Row, index: int, num_rows: int, reward: float, extra: Mapping[str, Any], split: int | None = None
) -> AgentLoopOutput:
    """One captured row as verl's ``AgentLoopOutput``.

    The row is split at ``split``, by default its first sampled token (as in :mod:`.adapter`):
    ``prompt_ids`` = the tokens before it, ``response_ids`` / ``response_mask`` /
    ``response_logprobs`` = the rest (tool results inside have mask 0 and logprob 0.0).
    ``reward_score`` = the rollout's reward (verl puts it on the last response token, whatever the
    mask). ``extra_fields``: ``extra`` plus ``strands_row`` (index), ``strands_num_rows``,
    ``strands_rollout_id``, ``strands_group_id``, ``strands_untrained`` (False unless ``extra``
    says so: :func:`trajectory_outputs`' stand-in for a rollout with nothing to train),
    ``strands_loss_excluded`` (the row's
    ``metadata["loss_excluded"]``: the spans given mask 0 and why, [] when none),
    ``reward_extra_info`` ({}), ``turn_scores`` / ``tool_rewards`` ([]).

    Raises:
        ValueError: the row starts with a sampled token or its aligned lists disagree.
    """
    row.check()
    s = split_point(BatchRow(row)) if split is None else split
    if not 0 < s < len(row.input_ids):
        raise ValueError(f"row of rollout {row.rollout_id!r}: split {s} leaves no prompt or no response")
    fields = {
        "strands_untrained": False,
        **extra,
        "strands_row": index,
        "strands_num_rows": num_rows,
        "strands_rollout_id": row.rollout_id,
        "strands_group_id": row.group_id,
        "strands_loss_excluded": list(row.metadata.get("loss_excluded") or []),
        "reward_extra_info": {},
        "turn_scores": [],
        "tool_rewards": [],
    }
    return AgentLoopOutput(
        prompt_ids=list(row.input_ids[:s]),
        response_ids=list(row.input_ids[s:]),
        response_mask=list(row.loss_mask[s:]),
        response_logprobs=list(row.logprobs[s:]),
        reward_score=reward,
        num_turns=len(row.turns),
        metrics=AgentLoopMetrics(),
        extra_fields=fields,
    )


def trajectory_outputs(
    traj: Trajectory, extra: Mapping[str, Any] | None = None, grpo: GRPOConfig | None = None
) -> list[AgentLoopOutput]:
    """A finished trajectory as one ``AgentLoopOutput`` per row with a token to train, in capture
    order; a rollout with none gets one output whose response mask is all 0.

    Args:
        traj: a closed trajectory with a reward.
        extra: added to every output's ``extra_fields`` (e.g. ``min_global_steps``).
        grpo: which tokens are trained (:func:`~strands_art.training.grpo.rows_as_trained`);
            default ``GRPOConfig()``, the embedded trainer's default: turns tagged ``discarded``
            or ``truncated`` and the cut tails of turns get loss mask 0.

    A row left with no token to train is dropped: verl's GRPO reads each session's advantage at
    the first masked-in token of its last output and broadcasts it to the session's other
    outputs (``compute_advantage_for_multi_trajectories``), so the last output must hold trained
    tokens when any row does. A rollout with none left (its only answer truncated) still counts
    in its group: it gets one output, its last row split at the row's first sampled token, with
    ``response_mask`` all 0 and its ``reward_score``. verl sums that reward into the group's mean
    and standard deviation (``compute_grpo_outcome_advantage`` reads the token-level scores, not
    the mask) and trains none of its tokens, as its own padding rows (``padding_utils``: a
    response of mask 0); an empty list would drop the session from its group
    (``_agent_loop_postprocess``) and shift every other member's advantage.

    Raises:
        ValueError: no reward (None, NaN, ±inf, not a number), or no rows (a failed rollout:
            raise in the episode instead; verl then marks the prompt group failed and evicts it).
    """
    problem = reward_problem(traj.reward)
    if problem is not None:
        raise ValueError(f"rollout {traj.rollout_id!r} has no reward ({problem})")
    if not traj.rows:
        raise ValueError(f"rollout {traj.rollout_id!r} has no rows")
    masked = rows_as_trained(traj.rows, grpo)
    rows = [r for r in masked if any(r.loss_mask)]
    if not rows:
        last, recorded = masked[-1], traj.rows[-1]
        split = recorded.loss_mask.index(1) if 1 in recorded.loss_mask else len(recorded.loss_mask) - 1
        untrained = {**(extra or {}), "strands_untrained": True}
        return [row_output(last, 0, 1, float(traj.reward), untrained, split=split)]
    n = len(rows)
    return [row_output(r, i, n, traj.reward, extra or {}) for i, r in enumerate(rows)]


@register("strands_agent")
class StrandsAgentLoop(AgentLoopBase):
    """verl agent loop: one Strands rollout through our gateway, one output per row.

    Keyword args (from the agent-loop YAML entry, besides verl's own):
        episode: dotted path of an :data:`Episode` (default: :data:`MIGRATIONBENCH_EPISODE`).
        episode_kwargs: keyword arguments for it.
        history_mode: ``"tree"`` or ``"linear"`` (gateway capture mode; default ``"linear"``).
        train_truncated: train turns sampled to the token limit with no complete call (default
            False: loss mask 0, as ``train --train-truncated`` / ``GRPOConfig.train_truncated``).

    The per-turn budget is ``rollout.response_length`` tokens and the context budget
    ``rollout.max_model_len`` (or ``prompt_length + response_length``).
    """

    def __init__(
        self,
        *args: Any,
        episode: str = MIGRATIONBENCH_EPISODE,
        episode_kwargs: Mapping[str, Any] | None = None,
        history_mode: str = "linear",
        train_truncated: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(train_truncated, bool):
            raise ValueError(f"train_truncated must be true or false, got {train_truncated!r}")
        self.grpo = GRPOConfig(train_truncated=train_truncated)
        self.episode: Episode = get_object(episode)
        self.episode_kwargs = dict(episode_kwargs or {})
        self.history_mode = history_mode
        rc = self.rollout_config
        self.max_new_tokens = int(rc.response_length)
        self.max_context_tokens = int(rc.get("max_model_len") or rc.prompt_length + rc.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> list[AgentLoopOutput]:
        """Run one rollout; ``kwargs`` are the dataset row plus ``uid`` and ``session_id``."""
        request_id = f"{kwargs.get('uid', 'sample')}-{kwargs.get('session_id', 0)}"
        backend = VerlServerBackend(self.server_manager, request_id)
        gateway = RolloutGateway(
            self.tokenizer,
            backend,
            history_mode=self.history_mode,
            max_context_tokens=self.max_context_tokens,
        )
        sampling = from_verl_sampling_params(sampling_params, self.max_new_tokens)
        traj = await self.episode(gateway, sampling, {**kwargs, **self.episode_kwargs})
        steps = [s for s in backend.global_steps if s is not None]
        extra = {"min_global_steps": min(steps), "max_global_steps": max(steps)} if steps else {}
        outputs = trajectory_outputs(traj, extra, self.grpo)
        logger.info(
            "rollout %s: %d turns, %d rows, reward %s", request_id, len(traj.turns), len(outputs), traj.reward
        )
        return outputs
