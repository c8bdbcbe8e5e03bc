"""The OpenAI Responses API wire format (``POST /v1/responses``) on the front.

Request (https://platform.openai.com/docs/api-reference/responses/create): ``instructions``,
``input`` and the conversation of ``previous_response_id`` go through the conversion path
(:mod:`strands_art.conversion.responses`, then the same steps as a Chat Completions request);
every other field is placed in :data:`FIELDS` (tests/test_serve_responses.py enumerates the
``openai`` SDK's request type against it).

Response: a ``response`` object whose ``output`` holds a ``reasoning`` item (the turn's
reasoning as ``reasoning_text`` content), a ``message`` item (``output_text``, with the
recorded ``logprobs`` when ``include`` asks for ``message.output_text.logprobs``) and one
``function_call`` item per call (``call_id`` the gateway's id, ``arguments`` the JSON string);
``status`` ``completed``, or ``incomplete`` with ``max_output_tokens`` when the turn hit the
token limit; ``usage`` of the recorded turn. Streaming sends the API's events (each with a
``sequence_number``): ``response.created``, ``response.in_progress``, per item
``response.output_item.added`` ... ``response.output_item.done`` (with
``response.output_text.delta``/``.done``, ``response.reasoning_text.delta``/``.done``,
``response.function_call_arguments.delta``/``.done``), then ``response.completed`` (or
``response.incomplete``). Errors use OpenAI's shape, as the chat front's; after the headers,
an ``error`` event.

Over 450 lines as one wire format: the Responses API request parser and its event writer, one
event kind after another as the spec lists them.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from strands_art.conversion.responses import responses_tools
from strands_art.gateway import GenerateResult
from strands_art.serve.errors import RequestError, typed_field
from strands_art.serve.fields import SAMPLING, refuse, shown, table_plan
from strands_art.serve.wire import arguments_text, check_unicode

LOGPROBS_INCLUDE = "message.output_text.logprobs"

#: field -> what the front does (``openai.types.responses.response_create_params``)
FIELDS: dict[str, str] = {
    "input": "honoured: converted item by item (strands_art/conversion/responses.py)",
    "instructions": "honoured: the system message (not carried over by previous_response_id)",
    "previous_response_id": "honoured: a response of the same rollout (400 otherwise)",
    "model": "honoured: echoed back (the front serves one policy)",
    "stream": "honoured: the API's Server-Sent Events",
    "stream_options": "honoured (nothing is obfuscated)",
    "store": "honoured: `false` keeps the response from later `previous_response_id` (the turn is "
    "recorded for training either way)",
    "tools": "honoured: function tools rendered by the chat template; built-in tools refused",
    "tool_choice": "honoured for `auto`; any other value ignored (`tool_choice_ignored` event)",
    "parallel_tool_calls": "honoured for `true`; `false` ignored (event)",
    "include": f"honoured for `{LOGPROBS_INCLUDE}`; other values ignored (event)",
    "top_logprobs": "honoured for 0; more refused (the backends record the sampled token's only)",
    "reasoning": "honoured when `effort` equals the gateway's; else ignored (event): the prompt is the trainer's",
    "text": "honoured for the `text` format; a JSON format or `verbosity` ignored (event)",
    "truncation": "honoured for `disabled`; `auto` ignored (event): an overflow is an error",
    "user": "honoured: routes to a rollout when neither path nor header names one",
    "background": "honoured for `false`; `true` refused (no background mode)",
    "temperature": SAMPLING,
    "top_p": SAMPLING,
    "max_output_tokens": SAMPLING,
    "conversation": "refused: no stored conversations (use previous_response_id within a rollout)",
    "prompt": "refused: no stored prompt templates",
    "metadata": "ignored (event)",
    "max_tool_calls": "ignored (event)",
    "safety_identifier": "ignored (event)",
    "service_tier": "ignored (event)",
    "prompt_cache_key": "ignored (event): a cache hint",
    "prompt_cache_options": "ignored (event): a cache hint",
    "prompt_cache_retention": "ignored (event): a cache hint",
    "moderation": "ignored (event)",
    "context_management": "ignored (event)",
    "access_programs": "ignored (event)",
    "image": "ignored (event)",
    "background_options": "ignored (event)",
}

EXTRA_FIELDS: dict[str, str] = {"top_k": SAMPLING}


@dataclass
class ResponsesRequest:
    """The parts of a Responses request the front uses (``input``/``instructions`` are
    converted by the handler).

    Attributes:
        body: the decoded request.
        tools: function tools as Chat Completions tools, or None.
        tool_choice: as sent (``auto`` or None is not forcing).
        stream / store / logprobs: as above.
        model / user / previous_response_id: as sent (or None).
        overrides: sampling fields set; ignored: ``(field, reason)`` recorded with the turn.
    """

    body: dict[str, Any]
    tools: list[dict[str, Any]] | None
    tool_choice: Any
    stream: bool
    store: bool
    logprobs: bool
    model: str | None
    user: str | None
    previous_response_id: str | None
    overrides: dict[str, Any]
    ignored: list[tuple[str, str]] = field(default_factory=list)


def parse_responses_request(body: Any, reasoning_effort: str | None = None) -> ResponsesRequest:
    """Validate a decoded Responses request (``reasoning_effort``: the gateway's, or None).

    Raises:
        RequestError: 400 naming the field: not an object, no ``input``, a field of the wrong
            type, a refused field or value, a lone surrogate anywhere.
        FieldError: from the tool conversion (a built-in tool, two tools with one name).
    """
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    for key, value in body.items():
        check_unicode(key, value)
    if body.get("input") is None:
        raise RequestError(
            400, "Missing required parameter: 'input'.", param="input", code="missing_required_parameter"
        )
    stream = typed_field(body, "stream", bool, "true or false")
    store = typed_field(body, "store", bool, "true or false")
    model = typed_field(body, "model", str, "a string")
    user = typed_field(body, "user", str, "a string")
    previous = typed_field(body, "previous_response_id", str, "a string")
    if typed_field(body, "background", bool, "true or false"):
        raise refuse("background", "background=true: no background mode (send the request and wait)")
    plan = table_plan(body, FIELDS, EXTRA_FIELDS)
    include = typed_field(body, "include", list, "a list") or []
    for value in include:
        if value != LOGPROBS_INCLUDE:
            plan.ignored.append(("include", f"include {shown(value)} is not applied"))
    if typed_field(body, "top_logprobs", int, "an integer"):
        raise refuse(
            "top_logprobs", "the backends record only the sampled token's logprob (send 0 or omit it)"
        )
    if typed_field(body, "parallel_tool_calls", bool, "true or false") is False:
        plan.ignored.append(
            (
                "parallel_tool_calls",
                "parallel_tool_calls=false is not enforced: every sampled call is returned",
            )
        )
    reasoning = typed_field(body, "reasoning", dict, "an object") or {}
    effort = reasoning.get("effort")
    if effort is not None and effort != reasoning_effort:
        plan.ignored.append(
            ("reasoning", f"reasoning.effort={effort!r} is not applied: the prompt is the trainer's")
        )
    if reasoning.get("summary") or reasoning.get("generate_summary"):
        plan.ignored.append(
            ("reasoning", "reasoning summaries are not written: the reasoning text is returned")
        )
    text = typed_field(body, "text", dict, "an object") or {}
    fmt = text.get("format")
    if fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        plan.ignored.append(("text", f"text.format={shown(fmt)} is not enforced: sampling is unconstrained"))
    if text.get("verbosity") is not None:
        plan.ignored.append(("text", f"text.verbosity={shown(text['verbosity'])} is not applied"))
    truncation = body.get("truncation")
    if truncation not in (None, "disabled"):
        plan.ignored.append(
            ("truncation", f"truncation={shown(truncation)} is not applied: an overflow is an error")
        )
    choice = body.get("tool_choice")
    return ResponsesRequest(
        body=body,
        tools=responses_tools(body.get("tools")),
        tool_choice=None if choice == "auto" else choice,
        stream=bool(stream),
        store=store is not False,
        logprobs=LOGPROBS_INCLUDE in include,
        model=model,
        user=user or None,
        previous_response_id=previous,
        overrides=plan.overrides,
        ignored=plan.ignored,
    )


def _usage(result: GenerateResult) -> dict[str, Any]:
    n_in, n_out = len(result.turn.prompt_ids), len(result.turn.output_ids)
    return {
        "input_tokens": n_in,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": n_out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": n_in + n_out,
    }


def _hex() -> str:
    return uuid.uuid4().hex


class ResponsesWriter:
    """The Responses API :class:`~strands_art.serve.turn.Writer` (see the module docstring).

    Args:
        model: echoed in the response.
        request: the parsed request (echoed fields: instructions, tools, previous id...).
        response_id: the id this response gets (the handler keeps the conversation under it).
    """

    conversation = "input"

    def __init__(self, model: str, request: ResponsesRequest, response_id: str) -> None:
        self.model, self.request, self.id = model, request, response_id
        self.created = int(time.time())
        self.sequence = 0
        self.items: list[dict[str, Any]] = []  # output items, in the order they were sent
        self.text_item: dict[str, Any] | None = None

    # ---------------------------------------------------------------- the response object
    def _response(
        self, status: str, output: list[dict[str, Any]], result: GenerateResult | None
    ) -> dict[str, Any]:
        body = self.request.body
        incomplete = status == "incomplete"
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": self.model,
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": self.request.previous_response_id,
            "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
            "store": self.request.store,
            "temperature": body.get("temperature"),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "top_p": body.get("top_p"),
            "truncation": body.get("truncation") or "disabled",
            "usage": _usage(result) if result is not None else None,
            "metadata": body.get("metadata") or {},
        }

    def output_items(
        self, result: GenerateResult, logprobs: list[dict[str, Any]] | None
    ) -> list[dict[str, Any]]:
        """The ``output`` of a turn: reasoning, message, function calls (in that order)."""
        produced, items = result.assistant_message, []
        if result.reasoning is not None:
            items.append(
                {
                    "type": "reasoning",
                    "id": f"rs_{_hex()}",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": result.reasoning}],
                }
            )
        calls = produced.get("tool_calls") or []
        if produced["content"] or not calls:
            part: dict[str, Any] = {
                "type": "output_text",
                "text": produced["content"] or "",
                "annotations": [],
            }
            part["logprobs"] = logprobs or []
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{_hex()}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [part],
                }
            )
        for call in calls:
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{_hex()}",
                    "call_id": call["id"],
                    "name": call["function"]["name"],
                    "arguments": arguments_text(call["function"]["arguments"]),
                    "status": "completed",
                }
            )
        return items

    @staticmethod
    def status(result: GenerateResult) -> str:
        return "incomplete" if result.finish_reason == "length" else "completed"

    def body(self, result: GenerateResult, logprobs: list[dict[str, Any]] | None) -> dict[str, Any]:
        return self._response(self.status(result), self.output_items(result, logprobs), result)

    # ---------------------------------------------------------------- the stream
    def _event(self, kind: str, **data: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **data}
        self.sequence += 1
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        return f"event: {kind}\ndata: {text}\n\n".encode()

    def start(self) -> list[bytes]:
        shell = self._response("in_progress", [], None)
        return [
            self._event("response.created", response=shell),
            self._event("response.in_progress", response=shell),
        ]

    def _text_events(self, delta: str) -> list[bytes]:
        item = self.text_item
        assert item is not None
        index = self.items.index(item)
        return [
            self._event(
                "response.output_text.delta",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                delta=delta,
                logprobs=[],
            )
        ]

    def text(self, delta: str) -> list[bytes]:
        out = []
        if self.text_item is None:
            self.text_item = {
                "type": "message",
                "id": f"msg_{_hex()}",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            self.items.append(self.text_item)
            index = len(self.items) - 1
            out.append(self._event("response.output_item.added", output_index=index, item=self.text_item))
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            out.append(
                self._event(
                    "response.content_part.added",
                    item_id=self.text_item["id"],
                    output_index=index,
                    content_index=0,
                    part=part,
                )
            )
        return out + self._text_events(delta)

    def finish(
        self, result: GenerateResult, streamed: str, logprobs: list[dict[str, Any]] | None
    ) -> list[bytes]:
        out: list[bytes] = []
        final = self.output_items(result, logprobs)
        message = next((i for i in final if i["type"] == "message"), None)
        if message is not None and (self.text_item is not None or message["content"][0]["text"]):
            text = message["content"][0]["text"]
            if self.text_item is None:
                out += self.text(text)
            elif text.startswith(streamed) and text[len(streamed) :]:
                out += self._text_events(text[len(streamed) :])
            item = self.text_item
            assert item is not None
            index = self.items.index(item)
            part = message["content"][0]
            out.append(
                self._event(
                    "response.output_text.done",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    text=text,
                    logprobs=part["logprobs"],
                )
            )
            out.append(
                self._event(
                    "response.content_part.done",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    part=part,
                )
            )
            item.update(status="completed", content=[part])
            out.append(self._event("response.output_item.done", output_index=index, item=item))
        for item in final:
            if item["type"] == "message":
                if self.text_item is None:  # an empty answer beside no call: sent whole
                    self.items.append(item)
                    out.append(
                        self._event("response.output_item.added", output_index=len(self.items) - 1, item=item)
                    )
                    out.append(
                        self._event("response.output_item.done", output_index=len(self.items) - 1, item=item)
                    )
                continue
            self.items.append(item)
            index = len(self.items) - 1
            out.append(self._event("response.output_item.added", output_index=index, item=self._shell(item)))
            if item["type"] == "reasoning":
                text = item["content"][0]["text"]
                out.append(
                    self._event(
                        "response.reasoning_text.delta",
                        item_id=item["id"],
                        output_index=index,
                        content_index=0,
                        delta=text,
                    )
                )
                out.append(
                    self._event(
                        "response.reasoning_text.done",
                        item_id=item["id"],
                        output_index=index,
                        content_index=0,
                        text=text,
                    )
                )
            else:
                args = item["arguments"]
                out.append(
                    self._event(
                        "response.function_call_arguments.delta",
                        item_id=item["id"],
                        output_index=index,
                        delta=args,
                    )
                )
                out.append(
                    self._event(
                        "response.function_call_arguments.done",
                        item_id=item["id"],
                        output_index=index,
                        name=item["name"],
                        arguments=args,
                    )
                )
            out.append(self._event("response.output_item.done", output_index=index, item=item))
        status = self.status(result)
        kind = "response.completed" if status == "completed" else "response.incomplete"
        out.append(self._event(kind, response=self._response(status, list(self.items), result)))
        return out

    @staticmethod
    def _shell(item: dict[str, Any]) -> dict[str, Any]:
        if item["type"] == "reasoning":
            return {**item, "content": []}
        return {**item, "arguments": "", "status": "in_progress"}

    def failed(self, err: RequestError, exc: BaseException) -> list[bytes]:
        return [self._event("error", code=err.code, message=str(err), param=err.param)]
