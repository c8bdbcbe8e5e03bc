"""A multi-turn tool task with a verifiable reward: look a code up with ONE tool call, then report it.

The agent (a real ``strands.Agent`` on :class:`~strands_art.model.ARTModel`, every model call
through the :class:`~strands_art.gateway.RolloutGateway`) gets one tool, ``lookup(key)``, which
returns the 4-digit code stored under a key (made-up values: :func:`code_of`, so the model
cannot know them without the tool). The user turn is :data:`PROMPT`. A rollout is therefore at
least two turns: the call, then (after the tool result, masked 0 in the row) the answer.

**Reward** (in [0, 1]; ``calls`` counts every tool call the model made, whatever the tool or
key; the *answer* is the text of the final assistant message, which has no tool call)::

    1.0   exactly one call, then an answer that contains the code as a whole number
    0.5   at least one call, but no such answer: the call was repeated, the rollout kept
          calling until the turn limit or was cut at the token limit, or the answer lacks
          the code
    0.0   no call at all (a guess)

The 0.5 tier credits the first call. Without it (0.5 only for the code after repeated calls,
0 for every other failure) GRPO punished the repeated call's tokens, which are the first
call's tokens too, and after a single update the 0.5B stopped calling the tool altogether
(every rollout a guess, reward 0, all advantages 0: a dead end; measured at learning rates
1e-3 and 3e-4, docs/training-tasks.md).

A rollout is a **success** when its reward is 1.0. Qwen2.5-Coder-0.5B-Instruct emits a
well-formed first call but often calls the tool again instead of answering, even though the
tool result ends with :data:`ANSWER_HINT` (without that hint it almost never answers: 2 of 32
rollouts), so its groups mix 1.0, 0.5 and 0.0: the signal GRPO needs, and the behaviour (answer
after one call) RL should learn.

Keys are split into a training set and a held-out set (:func:`lookup_tasks`), so held-out
success measures the learned behaviour on keys never trained on.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Any, Literal

from strands import Agent, tool
from strands.agent.conversation_manager import NullConversationManager
from strands.types.exceptions import MaxTokensReachedException

from strands_art.backends.base import SamplingParams
from strands_art.envs.migrationbench.agent.agent import RolloutLimits
from strands_art.model import ARTModel
from strands_art.trajectory import Trajectory

SYSTEM_PROMPT = (
    "You answer questions about stored codes. Call the lookup tool once with the key. When the "
    "tool result arrives, reply with the code in one short sentence; do not call the tool again."
)
PROMPT = "What is the code stored under the key '{key}'? Look it up, then tell me the code."

TRAIN_KEYS: tuple[str, ...] = (
    "falcon", "otter", "maple", "cobalt", "harbor", "lantern", "quartz", "meadow",
    "tundra", "saffron", "glacier", "ember", "willow", "canyon", "orchid", "pebble",
    "thistle", "breeze", "juniper", "comet", "basalt", "heron", "cedar", "marble",
)  # fmt: skip
HELD_OUT_KEYS: tuple[str, ...] = (
    "walrus", "amber", "summit", "violet", "granite", "plover", "sierra", "nectar",
)  # fmt: skip

#: Appended to every found code: measured on Qwen2.5-Coder-0.5B at temperature 1 (32 rollouts, 4 keys),
#: one call then the answer went from 2/32 without it to 12/32 with it; the model still calls again
#: in ~40% of rollouts, which is what training removes (docs/training.md, "The multi-turn tool task").
ANSWER_HINT = "Now tell the user this code in plain text; do not call lookup again."

_NUMBER = re.compile(r"\d+")


def code_of(key: str) -> str:
    """The 4-digit code stored under ``key`` (1000-9999, from the CRC-32 of the key)."""
    return str(1000 + zlib.crc32(key.encode("utf-8")) % 9000)


@tool
def lookup(key: str) -> str:
    """Look up the code stored under a key.

    Args:
        key: the key, e.g. "falcon"
    """
    k = str(key).strip().strip("'\"").lower()
    if k in TRAIN_KEYS or k in HELD_OUT_KEYS:
        return f"The code stored under '{k}' is {code_of(k)}. {ANSWER_HINT}"
    return f"No code is stored under {str(key)[:64]!r}."


def lookup_reward(calls: int, answer: str | None, code: str) -> float:
    """The task's reward (see the module docstring): 1.0, 0.5 or 0.0.

    Args:
        calls: tool calls the model made in the rollout (>= 0).
        answer: text of the final assistant message (no tool call), None if the rollout ended
            without one.
        code: the expected code.

    Raises:
        ValueError: ``calls`` is negative.
    """
    if calls < 0:
        raise ValueError(f"calls must be >= 0, got {calls}")
    if calls == 0:
        return 0.0
    if calls == 1 and answer is not None and code in _NUMBER.findall(answer):
        return 1.0
    return 0.5


@dataclass(frozen=True)
class LookupTask:
    """One prompt of the task.

    Attributes:
        key: the key asked about.
    """

    key: str

    @property
    def name(self) -> str:
        """The task id (GRPO group id)."""
        return f"lookup-{self.key}"

    @property
    def code(self) -> str:
        """The expected answer."""
        return code_of(self.key)

    def prompt(self) -> str:
        """The user turn."""
        return PROMPT.format(key=self.key)

    def reward(self, calls: int, answer: str | None) -> float:
        """:func:`lookup_reward` for this task's code."""
        return lookup_reward(calls, answer, self.code)


def lookup_tasks(split: Literal["train", "heldout"] = "train") -> list[LookupTask]:
    """The task's prompts: ``train`` (24 keys) or ``heldout`` (8 other keys).

    Raises:
        ValueError: on an unknown split.
    """
    if split == "train":
        return [LookupTask(k) for k in TRAIN_KEYS]
    if split == "heldout":
        return [LookupTask(k) for k in HELD_OUT_KEYS]
    raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")


def outcome(messages: list[dict[str, Any]]) -> tuple[int, str | None]:
    """``(tool calls, final answer)`` of a finished Strands conversation.

    ``calls`` counts ``toolUse`` blocks in assistant messages; the answer is the joined text of
    the last message when it is an assistant message without a ``toolUse`` block, else None.
    """
    calls = sum(
        1 for m in messages if m.get("role") == "assistant" for b in m.get("content", []) if "toolUse" in b
    )
    last = messages[-1] if messages else None
    if last is None or last.get("role") != "assistant" or any("toolUse" in b for b in last["content"]):
        return calls, None
    return calls, "".join(b.get("text", "") for b in last["content"])


def lookup_rollout(max_turns: int = 3, time_limit_s: float = 600.0) -> Any:
    """A :data:`~strands_art.training.rollouts.RolloutFn` running the lookup agent on a :class:`LookupTask`.

    The returned coroutine function opens the session with the loop's sampling parameters,
    runs a Strands ``Agent`` (tool ``lookup``, :data:`SYSTEM_PROMPT`, no conversation manager,
    at most ``max_turns`` model calls and ``time_limit_s`` seconds: :class:`RolloutLimits`),
    scores it and closes the session with the reward. The trajectory's metadata gets ``text``
    (the answer, "" if none), ``calls``, ``success`` and ``stop_reason``.

    Raises:
        ValueError: ``max_turns`` < 2 (the task needs a call and an answer).
    """
    if max_turns < 2:
        raise ValueError(f"max_turns must be >= 2 (one call, one answer), got {max_turns}")

    async def rollout(
        gateway: Any, task: LookupTask, rollout_id: str, group_id: str, sampling: SamplingParams
    ) -> Trajectory:
        gateway.open_session(rollout_id, group_id, sampling)
        limits = RolloutLimits(max_turns=max_turns, time_limit_s=time_limit_s)
        agent = Agent(
            model=ARTModel(gateway=gateway, session_id=rollout_id, group_id=group_id),
            tools=[lookup],
            system_prompt=SYSTEM_PROMPT,
            callback_handler=None,
            conversation_manager=NullConversationManager(),
            hooks=[limits],
        )
        try:
            await agent.invoke_async(task.prompt())
            cut = False
        except MaxTokensReachedException:  # the last reply hit max_new_tokens: no answer
            cut = True
        calls, answer = outcome(agent.messages)
        if cut:
            answer = None
        reward = task.reward(calls, answer)
        traj = gateway.close_session(rollout_id, reward)
        traj.metadata.update(
            text=answer or "",
            calls=calls,
            success=reward == 1.0,
            stop_reason="max_tokens" if cut else (limits.stop_reason or "completed"),
        )
        return traj

    return rollout


TRAIN_DEFAULTS: dict[str, Any] = {
    "model": "qwen2.5-coder-0.5b",
    "outer_batches": 5,
    "prompt_batch": 2,
    "rollouts_per_prompt": 8,
    "ppo_mini_batch": 1,
    "lr": 3e-4,
    "warmup_steps": 4,
    "kl_coef": 0.05,
    "micro_batch_tokens": 512,
    "temperature": 1.0,
    "max_new_tokens": 64,
    "max_turns": 2,
    "eval_samples": 4,
    "eval_temperature": 1.0,
    "concurrency": 32,
}
"""The recorded settings of bench/learning_tool.py (held-out success rose on 3 of 3 seeds)."""


def train_environment(options: Any) -> Any:
    """``strands-art train --env lookup``: 24 training keys, 8 held-out keys, linear history
    (one row per rollout), :func:`lookup_rollout` with ``--max-turns`` (default 2).

    Raises:
        ValueError: ``--train-tasks``/``--eval-tasks``/``--prompt`` given (the keys and prompt are
            fixed), ``max_turns`` < 2.
    """
    from strands_art.gateway import RolloutGateway
    from strands_art.training.environment import TrainEnvironment

    if options.train_tasks or options.eval_tasks or options.prompt:
        raise ValueError("--env lookup has its own keys and prompt: no --train-tasks/--eval-tasks/--prompt")
    return TrainEnvironment(
        name="lookup",
        train_tasks=lookup_tasks("train"),
        eval_tasks=lookup_tasks("heldout"),
        rollout=lookup_rollout(max_turns=options.max_turns or TRAIN_DEFAULTS["max_turns"]),
        gateway=lambda tokenizer, backend: RolloutGateway(
            tokenizer, backend, history_mode=options.history_mode or "linear"
        ),
        defaults=TRAIN_DEFAULTS,
    )
