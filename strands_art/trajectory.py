"""Turn, Row and Trajectory: what a rollout leaves for the trainer.

A *turn* is one generation: the prompt token IDs the backend received, the sampled IDs and
their logprobs. A *row* is one training sequence: a prompt followed by appended turns, with a
loss mask that is 1 exactly on sampled tokens. A *trajectory* is one rollout: its turns, rows,
reward and metadata. See docs/architecture.md ("Rows, events and metadata", "Invariants").
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import Any

_NUMBER_LISTS = frozenset({"prompt_ids", "output_ids", "logprobs", "input_ids", "loss_mask", "turns"})


def _plain(obj: Any, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """``dataclasses.asdict`` for Turn and Row without recursing into every token: their
    number lists are copied with ``list()``, every other field is deep-copied (the same result,
    ~100x faster on long rows)."""
    return {
        f.name: list(v) if f.name in _NUMBER_LISTS else copy.deepcopy(v)
        for f in fields(obj)
        if f.name not in exclude
        for v in (getattr(obj, f.name),)
    }


@dataclass
class Turn:
    """One generation recorded by the gateway.

    Attributes:
        index: 0-based turn number within the rollout.
        prompt_ids: list[int], exactly the token IDs sent to the backend.
        output_ids: list[int], the sampled token IDs (including a sampled stop token).
        logprobs: list[float] of length len(output_ids); natural-log sampling probabilities.
        finish_reason: "stop", "length" or "tool_calls".
        row: index of the row (in the trajectory's ``rows``) that holds this turn.
        lineage: linear-mode lineage id (0 in tree mode).
        ill_formed: the output contained a tool call that could not be parsed.
        timings: seconds spent per phase ("render", "tokenize", "sample", "parse", "total").
        messages / tools: the normalized chat messages and tool specs that produced the prompt.
        tags: what the harness did with the turn, set after it was recorded
            (:meth:`~strands_art.gateway.RolloutGateway.tag_turn`): ``"discarded"`` (the agent
            threw the response away: a retry, a cancelled turn), ``"summarizer"`` (a
            conversation manager's summarization call). The same tags are on the row holding
            the turn, ``row.metadata["turn_tags"][str(index)]``.
        policy_version: which policy sampled the turn: the optimizer steps behind the weights
            the backend sampled from (0: the initial weights), as the backend reported it in
            ``SampleResult.info["policy_version"]``; None when the backend does not say. The
            row holding the turn has it too, ``row.metadata["policy_versions"][str(index)]``.
        cached_prompt_tokens: how many of the prompt's tokens the backend took from its prompt
            cache instead of evaluating them (``SampleResult.info["cached_prompt_tokens"]``;
            llama.cpp reports it); 0: evaluated cold; None when the backend does not say.
    """

    index: int
    prompt_ids: list[int]
    output_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    row: int = 0
    lineage: int = 0
    ill_formed: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    messages: list[dict] = field(default_factory=list)
    tools: list[dict] | None = None
    tags: list[str] = field(default_factory=list)
    policy_version: int | None = None
    cached_prompt_tokens: int | None = None

    def to_dict(self, full: bool = False) -> dict[str, Any]:
        return _plain(self, () if full else ("messages", "tools"))


@dataclass
class Row:
    """One training sequence.

    Attributes:
        input_ids: list[int], the prompt followed by every appended turn's context and output.
        loss_mask: list[int] of length len(input_ids); 1 exactly on sampled tokens, else 0.
        logprobs: list[float] of length len(input_ids); the sampling logprob on sampled tokens,
            0.0 elsewhere (natural log).
        turns: list[int], indices of the turns whose outputs this row holds, in order.
        turn_spans: list of [start, end) offsets into input_ids of each turn's sampled output.
        rollout_id / group_id: the rollout and the source prompt (task) it came from.
        reward: set when the rollout ends (None before).
        metadata: forks with reasons, heal counters, ill-formed turns, truncation, turn tags,
            ``policy_versions`` (``{str(turn): version}`` of the turns whose version is known,
            see :attr:`Turn.policy_version`).
    """

    input_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    rollout_id: str
    group_id: str | None = None
    turns: list[int] = field(default_factory=list)
    turn_spans: list[list[int]] = field(default_factory=list)
    reward: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def num_sampled(self) -> int:
        return sum(self.loss_mask)

    def append_context(self, ids: list[int]) -> None:
        """Append context tokens (masked 0, logprob 0.0)."""
        self.input_ids.extend(ids)
        self.loss_mask.extend([0] * len(ids))
        self.logprobs.extend([0.0] * len(ids))

    def append_output(self, turn: int, ids: list[int], logprobs: list[float]) -> None:
        """Append a turn's sampled tokens (masked 1, with their logprobs)."""
        if len(ids) != len(logprobs):
            raise ValueError(f"{len(ids)} output IDs but {len(logprobs)} logprobs")
        start = len(self.input_ids)
        self.input_ids.extend(ids)
        self.loss_mask.extend([1] * len(ids))
        self.logprobs.extend(logprobs)
        self.turns.append(turn)
        self.turn_spans.append([start, len(self.input_ids)])

    def tagged_spans(self, tags: set[str] | frozenset[str]) -> list[tuple[int, list[int]]]:
        """``(turn, [start, end))`` of each sampled span whose turn carries one of ``tags``
        (``metadata["turn_tags"]``, keys are turn indices as strings)."""
        turn_tags = self.metadata.get("turn_tags") or {}
        return [
            (turn, span)
            for turn, span in zip(self.turns, self.turn_spans, strict=False)
            if tags & set(turn_tags.get(str(turn), ()))
        ]

    def check(self) -> None:
        """Raise ValueError if the aligned lists disagree in length or the mask is not 0/1."""
        n = len(self.input_ids)
        if len(self.loss_mask) != n or len(self.logprobs) != n:
            raise ValueError(
                f"row lengths differ: input_ids={n} loss_mask={len(self.loss_mask)} logprobs={len(self.logprobs)}"
            )
        if any(m not in (0, 1) for m in self.loss_mask):
            raise ValueError("loss_mask must be 0/1")

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Row:
        return cls(**d)


@dataclass
class Trajectory:
    """One rollout: its turns, rows, events, reward and metadata.

    ``turns`` holds one :class:`Turn` per generation, in order; ``rows`` one :class:`Row` per
    training sequence (one in linear mode, one per fork in tree mode), each row's ``turns`` indexing
    into ``turns``. ``events`` holds fork / heal / reset / rewrite events, each a dict with at least
    ``turn``, ``kind`` and ``reason``. ``reward`` is a float set by :meth:`set_reward` (None until
    then); ``metadata`` is JSON-serializable.
    """

    rollout_id: str
    group_id: str | None = None
    turns: list[Turn] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    reward: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def set_reward(self, reward: float) -> None:
        """Attach the rollout's reward to the trajectory and each of its rows."""
        self.reward = float(reward)
        for row in self.rows:
            row.reward = self.reward

    @property
    def num_tokens(self) -> int:
        return sum(len(r) for r in self.rows)

    def to_dict(self, messages: bool = False) -> dict[str, Any]:
        """A JSON-ready dict. With ``messages``, each turn also keeps the chat messages and tool
        specs that produced its prompt (what ``strands-art replay --from-run`` needs), stored
        compactly: a turn whose messages extend the previous turn's holds only the new ones and
        ``messages_prefix`` (how many it shares); :meth:`from_dict` restores the full lists."""
        return {
            "rollout_id": self.rollout_id,
            "group_id": self.group_id,
            "reward": self.reward,
            "turns": _turn_dicts(self.turns) if messages else [t.to_dict() for t in self.turns],
            "rows": [r.to_dict() for r in self.rows],
            "events": self.events,
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        return cls(
            rollout_id=d["rollout_id"],
            group_id=d.get("group_id"),
            reward=d.get("reward"),
            turns=_turns_from_dicts(d.get("turns", [])),
            rows=[Row.from_dict(r) for r in d.get("rows", [])],
            events=list(d.get("events", [])),
            metadata=dict(d.get("metadata", {})),
        )


def _turn_dicts(turns: list[Turn]) -> list[dict[str, Any]]:
    out, previous = [], []
    for turn in turns:
        d = turn.to_dict(full=True)
        shared = 0
        while shared < min(len(previous), len(turn.messages)) and previous[shared] == turn.messages[shared]:
            shared += 1
        if shared == len(previous) and shared:
            d["messages"], d["messages_prefix"] = d["messages"][shared:], shared
        previous = turn.messages
        out.append(d)
    return out


def _turns_from_dicts(items: list[dict[str, Any]]) -> list[Turn]:
    turns: list[Turn] = []
    for item in items:
        item = dict(item)
        shared = item.pop("messages_prefix", 0)
        if shared:
            if not turns or len(turns[-1].messages) < shared:
                raise ValueError(f"turn {len(turns)}: messages_prefix {shared} has no previous messages")
            item["messages"] = copy.deepcopy(turns[-1].messages[:shared]) + list(item.get("messages", []))
        turns.append(Turn(**item))
    return turns
