"""The Anthropic Messages wire format (``POST /v1/messages``) on the front.

Request (https://docs.anthropic.com/en/api/messages): ``system`` and ``messages`` go through
the conversion path (:mod:`strands_art.conversion.anthropic`, then the same steps as a Chat
Completions request); every other field is placed in :data:`FIELDS` (honoured, a sampling
setting for the trainer's override policy, ignored with a ``request_field_ignored`` event, or
refused with a 400 naming it); tests/test_serve_anthropic.py enumerates the ``anthropic``
SDK's request type against it.

Response: a ``message`` object with ``thinking`` (the turn's reasoning; an empty
``signature``), ``text`` and ``tool_use`` blocks (``input`` parsed from the sampled arguments),
``stop_reason`` ``end_turn`` / ``tool_use`` / ``max_tokens`` and ``usage``
``{input_tokens, output_tokens}`` of the recorded turn. Streaming sends Anthropic's events:
``message_start``, then per block ``content_block_start`` / ``content_block_delta``
(``text_delta``, ``thinking_delta``, ``input_json_delta``) / ``content_block_stop``, then
``message_delta`` (stop reason and usage) and ``message_stop``. Anthropic's API has no
logprobs; the recorded ones are in the trajectory.

Errors use Anthropic's shape ``{"type": "error", "error": {"type", "message"}}`` with the
status of the mapped error (:func:`error_body`); a context overflow reads as Anthropic's
``prompt is too long: N tokens > M maximum``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from strands_art.conversion.anthropic import anthropic_tools
from strands_art.gateway import ContextBudgetExceeded, GenerateResult
from strands_art.message_errors import MessageError, parse_arguments
from strands_art.serve.errors import RequestError, typed_field
from strands_art.serve.fields import SAMPLING, table_plan
from strands_art.serve.wire import check_unicode

#: field -> what the front does (``anthropic.types.message_create_params``)
FIELDS: dict[str, str] = {
    "messages": "honoured: converted block by block (strands_art/conversion/anthropic.py)",
    "system": "honoured: a string or text blocks, the system message",
    "model": "honoured: echoed back (the front serves one policy)",
    "max_tokens": SAMPLING,  # required; at or above max_new_tokens no override (gateway.OUTPUT_CAPS)
    "stream": "honoured: Anthropic's Server-Sent Events",
    "tools": "honoured: client tools rendered by the chat template; server tools refused",
    "tool_choice": "honoured for `auto`; `any`, `tool`, `none` and `disable_parallel_tool_use` "
    "ignored (event)",
    "stop_sequences": "sampling",
    "thinking": "ignored (event): the prompt is the trainer's; the model reasons as its template says",
    "metadata": "ignored (event)",
    "service_tier": "ignored (event)",
    "container": "ignored (event)",
    "inference_geo": "ignored (event)",
    "speed": "ignored (event)",
    "diagnostics": "ignored (event)",
    "user_profile_id": "ignored (event)",
    "workspace_id": "ignored (event)",
    "cache_control": "ignored (event): a cache hint",
    "output_config": "ignored (event): sampling is unconstrained",
}

#: fields outside this SDK's request type that the front knows
EXTRA_FIELDS: dict[str, str] = {
    "temperature": SAMPLING,
    "top_p": SAMPLING,
    "top_k": SAMPLING,
    "mcp_servers": "refused: no MCP connector",
    "context_management": "ignored (event)",
}

STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


@dataclass
class MessagesRequest:
    """The parts of a Messages request the front uses (``messages``/``system`` are converted
    by the handler).

    Attributes:
        body: the decoded request.
        tools: the client tools as Chat Completions function tools, or None.
        tool_choice: the ``tool_choice`` when it asks more than ``auto`` (recorded as ignored).
        stream: SSE streaming.
        model: the ``model`` field, echoed back.
        overrides: sampling fields set, for the gateway's override policy.
        ignored: ``(field, reason)`` recorded once the turn is recorded.
    """

    body: dict[str, Any]
    tools: list[dict[str, Any]] | None
    tool_choice: Any
    stream: bool
    model: str
    overrides: dict[str, Any]
    ignored: list[tuple[str, str]] = field(default_factory=list)


def parse_messages_request(body: Any) -> MessagesRequest:
    """Validate a decoded Messages request.

    Raises:
        RequestError: 400 naming the field: not an object, no ``model`` or ``max_tokens`` (a
            positive integer), a field of the wrong type, a refused field, malformed tools or
            a lone surrogate anywhere.
        FieldError: from the tool conversion (a server tool, two tools with one name).
    """
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    for key, value in body.items():
        check_unicode(key, value)
    model = typed_field(body, "model", str, "a string")
    if not model:
        raise RequestError(400, "model: Field required", param="model")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise RequestError(400, "max_tokens: a positive integer is required", param="max_tokens")
    stream = typed_field(body, "stream", bool, "true or false")
    plan = table_plan(body, FIELDS, EXTRA_FIELDS)
    tools = anthropic_tools(body.get("tools"))
    choice = typed_field(body, "tool_choice", dict, "an object")
    if choice is not None and choice.get("type") not in ("auto", "any", "tool", "none"):
        raise RequestError(400, "tool_choice.type must be auto, any, tool or none", param="tool_choice")
    forcing = choice if choice is not None and choice.get("type") != "auto" else None
    if choice is not None and choice.get("disable_parallel_tool_use") and forcing is None:
        plan.ignored.append(
            (
                "tool_choice",
                "disable_parallel_tool_use is not enforced: every call the model sampled is returned "
                "and recorded",
            )
        )
    return MessagesRequest(body, tools, forcing, bool(stream), model, plan.overrides, plan.ignored)


def _input(arguments: Any) -> dict[str, Any]:
    try:
        return parse_arguments(0, "", arguments)
    except MessageError:  # never expected: the gateway's calls carry an object
        return {}


def content_blocks(result: GenerateResult) -> list[dict[str, Any]]:
    """The ``content`` of the response message: thinking, text, tool_use blocks, in that order."""
    produced = result.assistant_message
    blocks: list[dict[str, Any]] = []
    if result.reasoning is not None:
        blocks.append({"type": "thinking", "thinking": result.reasoning, "signature": ""})
    if produced["content"]:
        blocks.append({"type": "text", "text": produced["content"]})
    for call in produced.get("tool_calls") or []:
        fn = call["function"]
        blocks.append(
            {"type": "tool_use", "id": call["id"], "name": fn["name"], "input": _input(fn["arguments"])}
        )
    return blocks


def usage(result: GenerateResult) -> dict[str, int]:
    """``{input_tokens, output_tokens}`` of the recorded turn."""
    return {"input_tokens": len(result.turn.prompt_ids), "output_tokens": len(result.turn.output_ids)}


def error_body(err: RequestError, exc: BaseException | None = None) -> dict[str, Any]:
    """Anthropic's error object for ``err`` (``exc``: the exception it was mapped from)."""
    message = str(err)
    if isinstance(exc, ContextBudgetExceeded):
        message = f"prompt is too long: {exc.prompt_tokens} tokens > {exc.max_context_tokens} maximum"
    kind = ERROR_TYPES.get(err.status, "api_error" if err.status >= 500 else "invalid_request_error")
    if err.param and err.param not in message:
        message = f"{err.param}: {message}"
    return {"type": "error", "error": {"type": kind, "message": message}}


def event(kind: str, data: dict[str, Any]) -> bytes:
    """One named Server-Sent Event, as Anthropic's API sends them."""
    text = json.dumps({"type": kind, **data}, ensure_ascii=False, separators=(",", ":"))
    return f"event: {kind}\ndata: {text}\n\n".encode()


class MessagesWriter:
    """The Anthropic :class:`~strands_art.serve.turn.Writer` (see the module docstring)."""

    conversation = "messages"

    def __init__(self, model: str) -> None:
        self.model = model
        self.id = f"msg_{uuid.uuid4().hex}"
        self.blocks = 0  # content blocks started
        self.text_open = False

    def _message(
        self, content: list[dict[str, Any]], stop: str | None, use: dict[str, int]
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": use,
        }

    def start(self) -> list[bytes]:
        return [
            event(
                "message_start", {"message": self._message([], None, {"input_tokens": 0, "output_tokens": 0})}
            )
        ]

    def text(self, delta: str) -> list[bytes]:
        out = []
        if not self.text_open:
            out.append(
                event(
                    "content_block_start",
                    {"index": self.blocks, "content_block": {"type": "text", "text": ""}},
                )
            )
            self.text_open = True
            self.blocks += 1
        out.append(
            event(
                "content_block_delta",
                {"index": self.blocks - 1, "delta": {"type": "text_delta", "text": delta}},
            )
        )
        return out

    def finish(self, result: GenerateResult, streamed: str, logprobs: Any = None) -> list[bytes]:
        out: list[bytes] = []
        blocks = content_blocks(result)
        if self.text_open:  # the rest of the streamed text block, then the other blocks
            text = next((b["text"] for b in blocks if b["type"] == "text"), "")
            rest = text[len(streamed) :] if text.startswith(streamed) else ""
            if rest:
                out += self.text(rest)
            out.append(event("content_block_stop", {"index": self.blocks - 1}))
            blocks = [b for b in blocks if b["type"] != "text"]
        for block in blocks:
            index = self.blocks
            self.blocks += 1
            if block["type"] == "thinking":
                start, delta = (
                    {**block, "thinking": ""},
                    {"type": "thinking_delta", "thinking": block["thinking"]},
                )
            elif block["type"] == "text":
                start, delta = {**block, "text": ""}, {"type": "text_delta", "text": block["text"]}
            else:
                start = {**block, "input": {}}
                delta = {
                    "type": "input_json_delta",
                    "partial_json": json.dumps(block["input"], ensure_ascii=False),
                }
            out.append(event("content_block_start", {"index": index, "content_block": start}))
            out.append(event("content_block_delta", {"index": index, "delta": delta}))
            out.append(event("content_block_stop", {"index": index}))
        stop = STOP_REASONS.get(result.finish_reason, "end_turn")
        out.append(
            event(
                "message_delta",
                {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage(result)},
            )
        )
        out.append(event("message_stop", {}))
        return out

    def failed(self, err: RequestError, exc: BaseException) -> list[bytes]:
        return [event("error", {"error": error_body(err, exc)["error"]})]

    def body(self, result: GenerateResult, logprobs: Any = None) -> dict[str, Any]:
        return self._message(
            content_blocks(result), STOP_REASONS.get(result.finish_reason, "end_turn"), usage(result)
        )
