"""The parse step of a turn: sampled token IDs read back as text, reasoning and tool calls.

The gateway (:meth:`~strands_art.gateway.RolloutGateway.generate`) calls :func:`read_turn`
once a sample came back (the turn to record and the :class:`GenerateResult`), the streaming
preview (:meth:`~strands_art.gateway.RolloutGateway.preview`) :func:`parse_output` on a partial
output. Pure: it records nothing. Decoding drops the end-of-turn tokens; whether the prompt
opened a ``<think>`` block is read from its last tokens; the family's tool parser
(:mod:`strands_art.toolcalls`) does the rest. The calls get the gateway's ids
(:meth:`~strands_art.families.base.ModelFamily.call_id`, unique within the session) and the
turn's assistant message is the one a harness replays (:mod:`strands_art.conversion`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from strands_art.backends.base import InvalidSample, SampleResult
from strands_art.render import ChatRenderer
from strands_art.toolcalls.base import ParsedOutput, ToolCall
from strands_art.toolcalls.reasoning import prompt_opens_think
from strands_art.trajectory import Turn
from strands_art.turn_cut import cut_at_calls, turn_start_cut
from strands_art.validation import is_int


@dataclass
class GenerateResult:
    """The parsed assistant output of one turn plus what was recorded.

    Attributes:
        text: assistant content without reasoning or tool-call markup.
        reasoning: the ``<think>`` content, or None.
        tool_calls: parsed calls with gateway-assigned ids (unique within the session).
        finish_reason: "stop", "length" or "tool_calls" (also for a turn cut inside a call
            after complete calls: see ``tail_start``).
        ill_formed: a tool call in the output could not be parsed (the raw text is in ``text``).
        problems: what was wrong (unparseable call, unknown tool name, ...).
        turn: the recorded Turn (token IDs, logprobs, timings).
        assistant_message: the OpenAI-format assistant message the gateway produced (canonical
            history: the provider replays it).
        recovered: how each recovered tool call was written (``"fenced_json"``, ...; see
            :attr:`strands_art.toolcalls.base.ParsedOutput.recovered`).
        tail_start: for a turn cut after complete calls (:mod:`strands_art.toolcalls.cut`: at
            the token limit, or ended inside an unclosed call), where the tail after its last
            complete call starts in ``turn.output_ids`` (``finish_reason`` is then "tool_calls";
            the turn's own stays "length" for a turn cut at the limit); for a turn whose model
            wrote another author's turn start (:func:`~strands_art.turn_cut.turn_start_cut`),
            where that token is (``finish_reason`` "stop", or "tool_calls" with calls before
            it); None otherwise.
        tail_problems: for a cut turn, what the parser found wrong with the whole output (e.g.
            "tool call 4: unclosed <tool_call> ..."); empty otherwise.
    """

    text: str
    reasoning: str | None
    tool_calls: list[ToolCall]
    finish_reason: str
    ill_formed: bool
    problems: list[str]
    turn: Turn
    assistant_message: dict[str, Any]
    recovered: list[str] = field(default_factory=list)
    tail_start: int | None = None
    tail_problems: list[str] = field(default_factory=list)
    #: how the tail was cut, for :func:`~strands_art.turn_cut.record_cut` (``kind``, ``how``);
    #: empty for a cut at the last complete call
    cut_kind: dict[str, str] = field(default_factory=dict)

    @property
    def usage(self) -> dict[str, int]:
        p, o = len(self.turn.prompt_ids), len(self.turn.output_ids)
        return {"prompt_tokens": p, "completion_tokens": o, "total_tokens": p + o}


def parse_output(
    renderer: ChatRenderer,
    prompt_ids: list[int],
    output_ids: list[int],
    tools: list[dict[str, Any]] | None,
    suffix: str = "",
) -> ParsedOutput:
    """Parse an output (token IDs after ``prompt_ids``, end-of-turn tokens at its end ignored).

    ``tools``: the turn's OpenAI-format tool specs (the parser checks call names against them).
    ``suffix``: text added after the decoded output (a call-list closer after a cut,
    :mod:`strands_art.turn_cut`), with a dangling ``,`` or newline before it removed.
    """
    eot = set(renderer.end_of_turn_ids)
    ids = list(output_ids)
    while ids and ids[-1] in eot:
        ids.pop()
    text = renderer.decode(ids)
    if suffix:  # a call-list closer after a cut (toolcalls/cut.py): no dangling separator before it
        text = text.rstrip(", \n") + suffix
    think_open = prompt_opens_think(renderer.decode(prompt_ids[-8:]))
    names = {(t.get("function", t)).get("name") for t in tools or []}
    return renderer.tool_parser.parse(text, names, tools=tools or [], think_open=think_open)


def session_calls(renderer: ChatRenderer, rollout_id: str, turn: int, parsed: ParsedOutput) -> list[ToolCall]:
    """The parsed calls with the gateway's ids (the family's :meth:`call_id`, unique in the session)."""
    family = renderer.family
    return [replace(c, id=family.call_id(rollout_id, turn, k, c.id)) for k, c in enumerate(parsed.tool_calls)]


def assistant_message(parsed: ParsedOutput, calls: list[ToolCall]) -> dict[str, Any]:
    """The OpenAI-format assistant message of a parsed turn (what a harness replays)."""
    assistant: dict[str, Any] = {"role": "assistant", "content": parsed.text}
    if parsed.reasoning is not None:
        assistant["reasoning_content"] = parsed.reasoning
    if calls:
        assistant["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": replay_arguments(c)},
            }
            for c in calls
        ]
    return assistant


def replay_arguments(call: ToolCall) -> str | dict[str, Any]:
    """Arguments for the canonical assistant message: the exact JSON text the model sampled when
    the parser kept it (a template renders a string verbatim, so the replay re-produces the
    sampled tokens), else the decoded dict."""
    return call.raw_arguments if call.raw_arguments is not None else call.arguments


def read_turn(
    renderer: ChatRenderer,
    rollout_id: str,
    index: int,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    plan: Any,
    sample: SampleResult,
) -> GenerateResult:
    """Turn ``index`` of ``rollout_id`` read back from its sample: parsed (ended at its last
    complete call when cut at the token limit or inside an unclosed call,
    :mod:`strands_art.turn_cut`), its calls with the
    gateway's ids, the :class:`~strands_art.trajectory.Turn` to record (``plan``: the history
    policy's prompt, its ``prompt_ids`` and ``lineage``; ``messages``: the normalized request).

    Raises:
        InvalidSample: the backend reported a policy version that is not an integer >= 0.
    """
    cut_kind: dict[str, str] = {}
    start = turn_start_cut(renderer, sample.output_ids)
    if start is not None:  # the model opened another author's turn: its answer ends before that
        at, token = start
        head = parse_output(renderer, plan.prompt_ids, sample.output_ids[:at], tools)
        whole = replace(head, problems=[*head.problems, f"the model wrote the turn start {token!r}"])
        cut = (at, head)
        cut_kind = {
            "kind": "turn_start_cut",
            "how": f"the model wrote the turn start {token!r} at output token {at}: its answer ends there",
        }
    else:
        whole = parse_output(renderer, plan.prompt_ids, sample.output_ids, tools)
        cut = cut_at_calls(
            renderer,
            lambda ids, suffix: parse_output(renderer, plan.prompt_ids, ids, tools, suffix),
            sample.output_ids,
            sample.finish_reason,
            tools,
            whole,
        )
    parsed = whole if cut is None else cut[1]
    calls = session_calls(renderer, rollout_id, index, parsed)
    finish = "tool_calls" if calls and sample.finish_reason == "stop" else sample.finish_reason
    turn = Turn(
        index=index,
        prompt_ids=plan.prompt_ids,
        output_ids=list(sample.output_ids),
        logprobs=[float(x) for x in sample.logprobs],
        finish_reason=finish,
        lineage=plan.lineage,
        ill_formed=parsed.ill_formed,
        messages=messages,
        tools=tools,
        policy_version=policy_version(sample),
        cached_prompt_tokens=cached_prompt_tokens(sample),
    )
    return GenerateResult(
        text=parsed.text,
        reasoning=parsed.reasoning,
        tool_calls=calls,
        finish_reason=finish if cut is None else "tool_calls" if calls or not cut_kind else "stop",
        ill_formed=parsed.ill_formed,
        problems=list(parsed.problems),
        turn=turn,
        assistant_message=assistant_message(parsed, calls),
        recovered=list(parsed.recovered),
        tail_start=None if cut is None else cut[0],
        tail_problems=[] if cut is None else list(whole.problems),
        cut_kind=cut_kind,
    )


def cached_prompt_tokens(sample: SampleResult) -> int | None:
    """``SampleResult.info["cached_prompt_tokens"]`` when the backend reported an int, else None."""
    n = sample.info.get("cached_prompt_tokens")
    return int(n) if is_int(n) and n >= 0 else None


def policy_version(sample: SampleResult) -> int | None:
    """The policy version a backend reported for a sample (``info["policy_version"]``), or None.

    Raises:
        InvalidSample: a version that is not an integer >= 0 (nothing is recorded).
    """
    version = sample.info.get("policy_version")
    if version is None:
        return None
    if not is_int(version) or version < 0:
        raise InvalidSample(f"backend reported policy version {version!r}; expected an integer >= 0")
    return int(version)
