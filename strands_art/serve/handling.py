"""What every protocol's handler shares: the app's keys, the request body, and one turn on an
open session (:func:`converse`)."""

from __future__ import annotations

import json
import logging
from typing import Any

from aiohttp import web

from strands_art.conversion.incoming import Incoming
from strands_art.conversion.openai import forces_tool_choice
from strands_art.conversion.session import SessionConversion
from strands_art.gateway import GenerateResult
from strands_art.serve.errors import RequestError
from strands_art.serve.sessions import SessionRegistry
from strands_art.serve.turn import Writer, run_turn

logger = logging.getLogger(__name__)

REGISTRY: web.AppKey[SessionRegistry] = web.AppKey("sessions", SessionRegistry)
CONFIG: web.AppKey[dict] = web.AppKey("config", dict)


async def read_body(request: web.Request) -> Any:
    raw = await request.read()  # 413 above client_max_size
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RequestError(400, f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise RequestError(400, "the request body is nested too deeply to be read as JSON") from None


def _record_ignored(conversion: SessionConversion, tool_choice: Any, ignored: list, turn: int) -> None:
    """Events for the request fields the front did not apply (:mod:`strands_art.serve.fields`)."""
    if forces_tool_choice(tool_choice):
        conversion.tool_choice_ignored(tool_choice, turn=turn)
    for name, reason in ignored:
        conversion.field_ignored(name, reason, turn=turn)


async def converse(
    request: web.Request,
    rollout_id: str,
    incoming: list[Incoming],
    tools: list[dict[str, Any]] | None,
    overrides: dict[str, Any],
    writer: Writer,
    *,
    stream: bool,
    logprobs: bool,
    tool_choice: Any = None,
    ignored: list[tuple[str, str]] | tuple = (),
) -> tuple[web.StreamResponse, GenerateResult | None]:
    """One turn of any protocol on an open session, after its request was converted
    (``incoming``: :func:`~strands_art.conversion.openai.openai_request`): the canonical
    messages (:meth:`SessionConversion.canonical`), the turn (:func:`~strands_art.serve.turn.run_turn`),
    then what the conversion keeps for the next request and the ignored fields' events.
    Returns the response and the recorded result (None when nothing was recorded)."""
    registry = request.app[REGISTRY]
    gateway = registry.gateway
    conversion = registry.conversion(rollout_id)
    messages = conversion.canonical(incoming)
    try:
        response, result = await run_turn(
            request, gateway, rollout_id, messages, tools, overrides, writer, stream=stream, logprobs=logprobs
        )
    except ConnectionResetError:  # the client left while the response was written: nothing recorded
        logger.info("client of rollout %s disconnected; the turn was not recorded", rollout_id)
        raise
    if result is None or not gateway.is_open(rollout_id):  # an error streamed, or closed meanwhile
        return response, None
    conversion.remember(result.assistant_message, incoming, messages)
    _record_ignored(conversion, tool_choice, list(ignored), result.turn.index)
    return response, result


def known_of(registry: SessionRegistry, rollout_id: Any) -> Any:
    """The last recorded request of the session a request names, when it is open (else None)."""
    conversion = registry.peek(rollout_id)
    return conversion.known if conversion is not None else None
