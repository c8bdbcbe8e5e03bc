"""Pure conversions between the OpenAI Chat Completions wire format and the gateway.

Request (``POST /v1/chat/completions``, https://platform.openai.com/docs/api-reference/chat/create):
``messages``, ``tools`` (``[{"type": "function", "function": {name, description, parameters}}]``),
``stream``, ``stream_options.include_usage``, ``user``, ``logprobs``; every other field is
decided by :mod:`strands_art.serve.fields` (honoured, a sampling override, recorded as ignored,
or refused with a 400 naming it).

Response: one ``chat.completion`` object, or Server-Sent Events of ``chat.completion.chunk``
objects ending with ``data: [DONE]``, as the OpenAI API and vLLM send them: a role delta, a
``reasoning_content`` delta (vLLM's and DeepSeek's field), a content delta, one ``tool_calls``
delta per call (index, id, name and the whole JSON-string arguments), a chunk with
``finish_reason`` (carrying the logprobs when asked for), then a usage chunk with empty
``choices`` when asked for. Logprobs (``"logprobs": true``) are OpenAI's
``{"content": [{"token", "logprob", "bytes", "top_logprobs": []}]}``, one entry per sampled token
of the turn (reasoning, call markup and the end token included), with the recorded values.

Errors use OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``
(:class:`~strands_art.serve.errors.RequestError`, also importable from here).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from strands_art.gateway import GenerateResult
from strands_art.serve.errors import RequestError, typed_field
from strands_art.serve.fields import classify


@dataclass
class ChatRequest:
    """The parts of a chat-completions request the front uses.

    Attributes:
        messages: list[dict], OpenAI chat messages as sent (normalized later by the gateway).
        tools: OpenAI tool specs or None.
        tool_choice: as sent (``"auto"``, ``"none"``, ``"required"``, ``{"type": "function", ...}``) or None.
        stream / include_usage: SSE streaming; a usage chunk at the end.
        model: the ``model`` field, echoed back.
        user: the ``user`` field (a session id source), or None.
        overrides: sampling fields the client set (non-null), for the gateway's override policy.
        ignored: ``(field, reason)`` of the fields recorded as ignored (:mod:`.fields`).
        logprobs: the client asked for the recorded logprobs.
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    tool_choice: Any
    stream: bool
    include_usage: bool
    model: str
    user: str | None
    overrides: dict[str, Any]
    ignored: list[tuple[str, str]] = field(default_factory=list)
    logprobs: bool = False


def parse_chat_request(body: Any, reasoning_effort: str | None = None) -> ChatRequest:
    """Validate a decoded request body.

    Raises:
        RequestError: 400 for a body that is not an object, missing or empty ``messages``,
            malformed ``tools``, ``n`` other than 1 (one sample per turn: a group is made of
            sessions, not of choices), a ``stream`` that is not a boolean, or a ``user``,
            ``model`` or ``stream_options`` of the wrong type, and every field
            :func:`strands_art.serve.fields.classify` refuses (``reasoning_effort``: the
            effort the gateway renders, for its decision).
    """
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "'messages' must be a non-empty list", param="messages")
    for key, value in body.items():  # echoed or stored: refused before anything is opened
        if key not in ("messages", "tools"):  # messages: normalize_message names the message
            check_unicode(key, value)
    tools = body.get("tools") or None
    if tools is not None:
        check_tools(tools)
    n = body.get("n")
    if n is not None and (isinstance(n, bool) or n != 1):
        raise RequestError(
            400, f"n={n!r} is not supported: one sample per turn (open one session per sample)", param="n"
        )
    user = typed_field(body, "user", str, "a string")
    stream = typed_field(body, "stream", bool, "true or false")
    model = typed_field(body, "model", str, "a string")
    options = typed_field(body, "stream_options", dict, "an object") or {}
    plan = classify(body, reasoning_effort)
    return ChatRequest(
        messages=messages,
        tools=tools,
        tool_choice=body.get("tool_choice"),
        stream=bool(stream),
        include_usage=bool(options.get("include_usage")),
        model=model or "",
        user=user or None,
        overrides=plan.overrides,
        ignored=plan.ignored,
        logprobs=plan.logprobs,
    )


def check_unicode(name: str, value: Any) -> None:
    """A 400 naming ``name`` when ``value`` (JSON data) holds a lone surrogate (JSON ``"\\ud800"``
    decodes to one): it can be neither tokenized nor stored as UTF-8, so it is refused before
    anything is opened or recorded."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        raise RequestError(
            400, f"'{name}' holds a lone surrogate U+{ord(bad[0]):04X} (not valid Unicode)", param=name
        ) from None


def check_tools(tools: Any) -> None:
    """A 400 :class:`RequestError` (``param="tools"``) unless ``tools`` is a list of OpenAI
    function tools, each with a non-empty name of its own (a duplicate is
    ``duplicate_tool_name``) and a JSON-Schema object (or no) ``parameters``."""
    if not isinstance(tools, list):
        raise RequestError(400, "'tools' must be a list", param="tools")
    check_unicode("tools", tools)
    names: set[str] = set()
    for k, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or tool.get("type", "function") != "function"
            or not isinstance(fn, dict)
        ):
            raise RequestError(
                400, f"tools[{k}] must be {{'type': 'function', 'function': {{...}}}}", param="tools"
            )
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise RequestError(400, f"tools[{k}].function needs a name", param="tools")
        if fn["name"] in names:  # a call to it could not be attributed to one of them
            raise RequestError(
                400,
                f"tools[{k}]: two tools are named {fn['name']!r}: tool names must be unique",
                param="tools",
                code="duplicate_tool_name",
            )
        names.add(fn["name"])
        params = fn.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise RequestError(
                400,
                f"tools[{k}].function.parameters must be a JSON Schema object, got {type(params).__name__}",
                param="tools",
            )


def arguments_text(arguments: str | dict[str, Any]) -> str:
    """Tool-call arguments as the JSON string OpenAI sends (the sampled text when the gateway kept it)."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def response_message(result: GenerateResult) -> dict[str, Any]:
    """The assistant message of a response: ``content`` (None when empty and tools were called,
    as OpenAI does), ``reasoning_content`` when the model reasoned, ``tool_calls`` with
    JSON-string arguments and the ids the gateway assigned."""
    produced = result.assistant_message
    message: dict[str, Any] = {
        "role": "assistant",
        "content": produced["content"] if produced["content"] or not result.tool_calls else None,
    }
    if result.reasoning is not None:
        message["reasoning_content"] = result.reasoning
    if produced.get("tool_calls"):
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {
                    "name": c["function"]["name"],
                    "arguments": arguments_text(c["function"]["arguments"]),
                },
            }
            for c in produced["tool_calls"]
        ]
    return message


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def token_logprobs(entries: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """OpenAI's ``logprobs`` object for a turn's token entries
    (:func:`~strands_art.serve.turn.turn_logprobs`), or None."""
    return None if entries is None else {"content": entries, "refusal": None}


def completion(
    result: GenerateResult, model: str, cid: str, logprobs: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ``chat.completion`` object for one turn (``logprobs``: :func:`token_logprobs` or None)."""
    return {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": response_message(result),
                "finish_reason": result.finish_reason,
                "logprobs": logprobs,
            }
        ],
        "usage": result.usage,
    }


def completion_chunks(
    result: GenerateResult,
    model: str,
    cid: str,
    include_usage: bool,
    logprobs: dict[str, Any] | None = None,
    streamed: str = "",
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of one turn, in order (see the module docstring);
    ``logprobs`` (:func:`token_logprobs`) rides on the ``finish_reason`` chunk. ``streamed``:
    answer text already sent in content deltas while the turn was sampled (left out here)."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, lps: Any = None) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": lps}],
        }

    message = response_message(result)
    chunks = [chunk({"role": "assistant", "content": ""})]
    if message.get("reasoning_content"):
        chunks.append(chunk({"reasoning_content": message["reasoning_content"]}))
    content = message["content"] or ""
    rest = content[len(streamed) :] if streamed and content.startswith(streamed) else content
    if rest:
        chunks.append(chunk({"content": rest}))
    for k, call in enumerate(message.get("tool_calls", [])):
        chunks.append(chunk({"tool_calls": [{"index": k, **call}]}))
    chunks.append(chunk({}, result.finish_reason, logprobs))
    if include_usage:
        chunks.append({**chunk({}), "choices": [], "usage": result.usage})
    return chunks


def sse(data: dict[str, Any] | str) -> bytes:
    """One Server-Sent Event ``data:`` line (a JSON object, or a literal such as ``[DONE]``)."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


def models_list(model: str) -> dict[str, Any]:
    """``GET /v1/models``: the one policy this front serves."""
    return {
        "object": "list",
        "data": [{"id": model, "object": "model", "created": 0, "owned_by": "strands-art"}],
    }


class ChatWriter:
    """The Chat Completions :class:`~strands_art.serve.turn.Writer`: a ``chat.completion`` body,
    or ``chat.completion.chunk`` events ending with ``data: [DONE]``; an error after the
    headers is ``data: {"error": {...}}`` (what the OpenAI SDK raises as ``APIError``)."""

    conversation = "messages"

    def __init__(self, model: str, include_usage: bool) -> None:
        self.model, self.include_usage, self.cid = model, include_usage, completion_id()

    def start(self) -> list[bytes]:
        return [sse(self._chunk({"role": "assistant", "content": ""}))]

    def text(self, delta: str) -> list[bytes]:
        return [sse(self._chunk({"content": delta}))]

    def finish(
        self, result: GenerateResult, streamed: str, logprobs: list[dict[str, Any]] | None
    ) -> list[bytes]:
        chunks = completion_chunks(
            result, self.model, self.cid, self.include_usage, token_logprobs(logprobs), streamed
        )
        return [sse(c) for c in chunks[1:]] + [sse("[DONE]")]  # the role chunk went with start()

    def failed(self, err: RequestError, exc: BaseException) -> list[bytes]:
        return [sse(err.body()), sse("[DONE]")]

    def body(self, result: GenerateResult, logprobs: list[dict[str, Any]] | None) -> dict[str, Any]:
        return completion(result, self.model, self.cid, token_logprobs(logprobs))

    def _chunk(self, delta: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": self.cid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": None, "logprobs": None}],
        }
