"""Per-family test cases: how each family's model writes a sampled turn, and a tool-loop driver.

A :class:`Writer` produces the exact text a model of the family samples (special tokens written
out, so :class:`ScriptedBackend` turns it into the real token IDs): a turn with tool calls, a
plain answer, optional reasoning, and each of the family's end tokens. The driver
(:func:`tool_loop`) plays a conversation through the gateway the way a harness does: it sends back
the assistant message with its tool-call arguments re-serialized (cosmetic drift) and answers
every call with a tool result carrying the call's id.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from strands_art.backends.base import SamplingParams
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.registry import family_of, load_tokenizer

READ_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file of the repository.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
RUN_TOOL = {
    "type": "function",
    "function": {
        "name": "run",
        "description": "Run a shell command.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
            "required": ["command"],
        },
    },
}
TOOLS = [READ_TOOL, RUN_TOOL]
SYSTEM = {"role": "system", "content": "You migrate Java 8 projects to Java 17."}
USER = {"role": "user", "content": "Please migrate the repository in ./repo."}

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Writer:
    """How one family's model writes a turn.

    Attributes:
        alias: tokenizer alias (strands_art.families.sources).
        family: the family the gateway must pick.
        ends: every end token of the family a turn may be sampled to.
        max_calls: calls per turn the template can render back (Llama 3.1: one).
        think: the generation prompt opens reasoning (the output holds ``R</think>``).
        write_calls: (calls, turn index) -> text of a tool-call turn, without the end token.
        write_turn: (calls, text, reasoning) -> the whole turn, for formats where the end token
            depends on the turn (Harmony); overrides the rest.
    """

    alias: str
    family: str
    ends: tuple[str, ...]
    max_calls: int
    think: bool
    write_calls: Callable[[list[Call], int], str]
    write_turn: Callable[[list[Call], str, str | None], str] | None = None

    def turn(
        self, calls: list[Call], text: str, index: int, reasoning: str | None = None, end: str = ""
    ) -> str:
        """The sampled text of one turn: reasoning (if the family thinks), then calls or text."""
        if self.write_turn is not None:
            return self.write_turn(calls, text, reasoning)
        pre = f"{reasoning or ''}\n</think>\n\n" if self.think else ""
        body = self.write_calls(calls, index) if calls else text
        return pre + body + (end or self.ends[0])


def _llama(calls: list[Call], index: int) -> str:
    (name, args), *_ = calls
    return json.dumps({"name": name, "parameters": args})


def mistral_id(index: int, k: int) -> str:
    return f"t{index:04d}c{k:03d}"


def _mistral(calls: list[Call], index: int) -> str:
    items = [{"name": n, "arguments": a, "id": mistral_id(index, k)} for k, (n, a) in enumerate(calls)]
    return "[TOOL_CALLS] " + json.dumps(items)


def _deepseek(calls: list[Call], index: int) -> str:
    blocks = [
        f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{json.dumps(a)}\n```<｜tool▁call▁end｜>"
        for n, a in calls
    ]
    return "<｜tool▁calls▁begin｜>" + "\n".join(blocks) + "<｜tool▁calls▁end｜>"


def _deepseek31(calls: list[Call], index: int) -> str:
    blocks = [f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{json.dumps(a)}<｜tool▁call▁end｜>" for n, a in calls]
    return "<｜tool▁calls▁begin｜>" + "".join(blocks) + "<｜tool▁calls▁end｜>"


def _qwen_xml(calls: list[Call], index: int) -> str:
    blocks = []
    for n, a in calls:
        params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in a.items())
        blocks.append(f"<tool_call>\n<function={n}>\n{params}</function>\n</tool_call>")
    return "\n".join(blocks)


def _harmony(calls: list[Call], text: str, reasoning: str | None) -> str:
    """A GPT-OSS turn: analysis, then one call to ``functions.NAME`` (ends ``<|call|>``) or the
    final answer (ends ``<|return|>``)."""
    pre = f"<|channel|>analysis<|message|>{reasoning}<|end|><|start|>assistant" if reasoning else ""
    if calls:
        (name, args), *_ = calls
        return f"{pre}<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{json.dumps(args)}<|call|>"
    return f"{pre}<|channel|>final<|message|>{text}<|return|>"


WRITERS: dict[str, Writer] = {
    w.alias: w
    for w in (
        Writer("llama3.1", "llama3", ("<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"), 1, False, _llama),
        Writer("llama3.2", "llama3", ("<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"), 1, False, _llama),
        Writer("mistral-v3", "mistral", ("</s>",), 2, False, _mistral),
        Writer("deepseek-r1", "deepseek", ("<｜end▁of▁sentence｜>",), 2, True, _deepseek),
        Writer("deepseek-r1-0528", "deepseek", ("<｜end▁of▁sentence｜>",), 2, False, _deepseek),
        Writer("deepseek-v3.1", "deepseek", ("<｜end▁of▁sentence｜>",), 2, False, _deepseek31),
        Writer("qwen3.5", "qwen", ("<|im_end|>",), 2, True, _qwen_xml),
        Writer("qwen3.6", "qwen", ("<|im_end|>",), 2, True, _qwen_xml),
        Writer("gpt-oss", "harmony", ("<|call|>", "<|return|>"), 1, False, _llama, _harmony),
    )
}


def one_turn(alias: str, item: dict[str, Any]) -> tuple[RolloutGateway, Any]:
    """One turn of ``alias``'s model sampled as ``item`` (a :class:`ScriptedBackend` item), with
    :data:`TOOLS` offered and room for any output: ``(gateway, GenerateResult)``; session "s"."""
    tok = load_tokenizer(alias)
    gw = RolloutGateway(
        tok,
        ScriptedBackend(tok, [item]),
        family=family_of(alias),
        sampling=SamplingParams(max_new_tokens=4096),
    )
    gw.open_session("s")
    return gw, asyncio.run(gw.generate("s", [{"role": "user", "content": "go"}], TOOLS))


def harness_id(turn: int, k: int) -> str:
    """A call id as a harness assigns its own (OpenAI-style), replacing the model's."""
    return f"call_{turn}x{k}abc123"


def reserialize(assistant: dict[str, Any], drift: str, turn: int | None = None) -> dict[str, Any]:
    """The assistant message as a harness sends it back: arguments re-serialized, empty content
    as None (reasoning is kept, as the Strands provider keeps it); with ``turn`` given, the call
    ids replaced by the harness's own (:func:`harness_id`)."""
    msg: dict[str, Any] = {"role": "assistant", "content": assistant.get("content") or None}
    if assistant.get("reasoning_content"):
        msg["reasoning_content"] = assistant["reasoning_content"]
    calls = []
    for call in assistant.get("tool_calls", []):
        fn = call["function"]
        args = fn["arguments"] if isinstance(fn["arguments"], dict) else json.loads(fn["arguments"])
        text = {
            "none": json.dumps(args),
            "compact": json.dumps(args, sort_keys=True, separators=(",", ":")),
            "reversed": json.dumps(dict(reversed(list(args.items())))),
            "indent": json.dumps(args, indent=2),
            "dict": args,
        }[drift]
        call_id = call["id"] if turn is None else harness_id(turn, len(calls))
        calls.append({"id": call_id, "type": "function", "function": {"name": fn["name"], "arguments": text}})
    if calls:
        msg["tool_calls"] = calls
    return msg


@dataclass
class Loop:
    """What :func:`tool_loop` observed."""

    gateway: RolloutGateway
    backend: ScriptedBackend
    results: list[Any]
    trajectory: Any
    first_messages: list[dict[str, Any]]


async def tool_loop(
    alias: str,
    turns: list[tuple[list[Call], str, str | None, str]],
    mode: str,
    drifts: list[str] | None = None,
    tokenizer: Any = None,
    harness_ids: bool = False,
    **config: Any,
) -> Loop:
    """Play ``turns`` (calls, text, reasoning, end token) through a gateway on ``alias``.

    The harness answers each call with ``result {turn}.{k}`` and re-serializes arguments with
    ``drifts[turn]`` (default "compact"); the loop stops after the first turn without calls.
    With ``harness_ids`` the harness replaces every call id with its own (:func:`harness_id`)
    in the echoed message and the tool results.
    ``config`` goes to the gateway (e.g. ``chat_template``).
    """
    from strands_art.registry import load_tokenizer

    writer = WRITERS[alias]
    tok = tokenizer or load_tokenizer(alias)
    outputs = [{"text": writer.turn(c, t, i, r, e)} for i, (c, t, r, e) in enumerate(turns)]
    backend = ScriptedBackend(tok, outputs)
    gw = RolloutGateway(alias, backend, history_mode=mode, **config)
    sid = gw.open_session("loop")
    msgs = [SYSTEM, USER]
    first = list(msgs)
    results = []
    for i in range(len(turns)):
        r = await gw.generate(sid, msgs, TOOLS)
        results.append(r)
        if not r.tool_calls:
            break
        drift = (drifts or [])[i] if drifts else "compact"
        msgs = msgs + [reserialize(r.assistant_message, drift, i if harness_ids else None)]
        for k, call in enumerate(r.tool_calls):
            call_id = harness_id(i, k) if harness_ids else call.id
            msgs.append({"role": "tool", "tool_call_id": call_id, "content": f"result {i}.{k}"})
    return Loop(gw, backend, results, gw.close_session(sid), first)
