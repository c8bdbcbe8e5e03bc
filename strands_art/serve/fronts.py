"""The Anthropic Messages and Responses API handlers: each converts its request into chat
messages (:mod:`strands_art.conversion.anthropic`, :mod:`strands_art.conversion.responses`),
then takes the chat front's path from :func:`~strands_art.conversion.openai.openai_request` on
(:func:`~strands_art.serve.handling.converse`): same sessions, canonical history, rows and
events whichever protocol carried the conversation.

A request is checked in full before a session is opened (under auto-open) or anything is
recorded; a malformed one is a 400 in the protocol's own shape naming the field.
"""

from __future__ import annotations

import uuid
from typing import Any

from aiohttp import web

from strands_art.conversion.anthropic import anthropic_messages
from strands_art.conversion.incoming import FieldError, Incoming
from strands_art.conversion.openai import RequestKnown, openai_request
from strands_art.conversion.responses import responses_messages
from strands_art.message_errors import MessageError
from strands_art.serve.anthropic_wire import MessagesWriter, parse_messages_request
from strands_art.serve.errors import RequestError
from strands_art.serve.handling import CONFIG, REGISTRY, converse, known_of, read_body
from strands_art.serve.responses_wire import ResponsesWriter, parse_responses_request
from strands_art.serve.sessions import SESSION_HEADER


def converted(
    chat: list[dict[str, Any]],
    found: list[list[str]],
    origin: list[str],
    known: RequestKnown | None,
    id_field: str,
) -> list[Incoming]:
    """A protocol's chat messages through :func:`openai_request` (validated, normalized, tool
    results paired), with the protocol's non-text placeholders; a bad message is a FieldError
    naming the request field it came from, in the protocol's words (``id_field``: its name
    for the call id a tool result answers; messages named by ``origin``)."""
    try:
        incoming = openai_request(chat, known, id_field=id_field, names=origin)
    except MessageError as exc:
        where = origin[exc.index] if 0 <= exc.index < len(origin) else "messages"
        raise FieldError(where, f"{where}: {exc.problem}") from None
    return [
        Incoming(item.index, item.message, tuple(found[k]), item.known)
        if found[k] and item.known is None
        else item
        for k, item in enumerate(incoming)
    ]


async def messages(request: web.Request) -> web.StreamResponse:
    """``POST /v1/messages`` (Anthropic Messages): one turn, JSON or SSE."""
    registry, config = request.app[REGISTRY], request.app[CONFIG]
    req = parse_messages_request(await read_body(request))
    path_id, header_id = request.match_info.get("rollout_id"), request.headers.get(SESSION_HEADER)
    chat, found, origin = anthropic_messages(req.body.get("system"), req.body.get("messages"))
    incoming = converted(chat, found, origin, known_of(registry, path_id or header_id), "tool_use_id")
    rollout_id = registry.resolve(path_id, header_id, None)
    writer = MessagesWriter(req.model or config["model_name"])
    response, _ = await converse(
        request,
        rollout_id,
        incoming,
        req.tools,
        req.overrides,
        writer,
        stream=req.stream,
        logprobs=False,
        tool_choice=req.tool_choice,
        ignored=req.ignored,
    )
    return response


async def responses(request: web.Request) -> web.StreamResponse:
    """``POST /v1/responses`` (the Responses API): one turn, JSON or SSE; ``previous_response_id``
    names a response of the same rollout."""
    registry, config = request.app[REGISTRY], request.app[CONFIG]
    effort = getattr(registry.gateway.renderer.family, "reasoning_effort", None)
    req = parse_responses_request(await read_body(request), effort)
    path_id, header_id = request.match_info.get("rollout_id"), request.headers.get(SESSION_HEADER)
    named = path_id or header_id or req.user
    session = registry.peek(named)
    previous = None
    if req.previous_response_id is not None:
        previous = session.responses.get(req.previous_response_id) if session is not None else None
        if previous is None:
            raise RequestError(
                400,
                f"Previous response with id '{req.previous_response_id}' not found in rollout {named!r}.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
    chat, found, origin = responses_messages(req.body.get("instructions"), req.body.get("input"), previous)
    incoming = converted(chat, found, origin, known_of(registry, named), "call_id")
    rollout_id = registry.resolve(path_id, header_id, req.user)
    response_id = f"resp_{uuid.uuid4().hex}"
    writer = ResponsesWriter(req.model or config["model_name"], req, response_id)
    response, result = await converse(
        request,
        rollout_id,
        incoming,
        req.tools,
        req.overrides,
        writer,
        stream=req.stream,
        logprobs=req.logprobs,
        tool_choice=req.tool_choice,
        ignored=req.ignored,
    )
    if result is not None and req.store:
        kept = [item.message for item, where in zip(incoming, origin, strict=True) if where != "instructions"]
        registry.conversion(rollout_id).keep_response(response_id, kept + [result.assistant_message])
    return response
