"""The aiohttp application: Chat Completions, Anthropic Messages and the Responses API on a
:class:`RolloutGateway`.

Routes (``{rid}`` is a rollout id; see :mod:`strands_art.serve.sessions` for routing):

- ``POST /v1/chat/completions``, ``POST /rollouts/{rid}/v1/chat/completions``: one turn
  (non-streaming or SSE, :mod:`strands_art.serve.wire`);
- ``POST [/rollouts/{rid}]/v1/messages`` (Anthropic Messages, :mod:`.anthropic_wire`) and
  ``POST [/rollouts/{rid}]/v1/responses`` (the Responses API, :mod:`.responses_wire`), handled
  in :mod:`.fronts`: the same sessions, conversion path and turn runner (:mod:`.turn`);
- ``GET /v1/models``, ``GET /rollouts/{rid}/v1/models``: the served model name;
- ``POST /sessions`` ``{"rollout_id"?, "group_id"?, "sampling"?}`` → ``{"rollout_id"}`` (201);
- ``PUT /sessions/{rid}/sampling`` (a SamplingParams object) → the settings;
- ``GET /sessions/{rid}/trajectory`` → the trajectory so far (turns, rows, events);
- ``POST /sessions/{rid}/close`` ``{"reward"?}`` → the final trajectory (404 never opened,
  409 already closed);
- ``GET /health`` → ``{"status": "ok", "sessions": N}`` (no token needed).

A turn is recorded only once its whole response has been written to the connection (the
gateway's ``deliver`` hook): a client that goes away while the prompt is rendered or the backend
samples cancels the sampling (aiohttp ``handler_cancellation``), and one that is gone when the
response is written leaves nothing recorded; either way the next request extends the same row.
A client that closes after the last byte was handed to the kernel has the turn recorded: the
server cannot tell that case from a client that read it.

Errors are mapped once (:func:`~strands_art.serve.failures.error_for`) and come back in
OpenAI's shape (:class:`~strands_art.serve.errors.RequestError`), or Anthropic's on
``/v1/messages`` (:func:`~strands_art.serve.anthropic_wire.error_body`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from typing import Any, TypedDict

from aiohttp import web

from strands_art.conversion.openai import openai_request
from strands_art.gateway import RolloutGateway
from strands_art.serve import anthropic_wire
from strands_art.serve.defaults import DEFAULT_HOST, DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT
from strands_art.serve.errors import RequestError
from strands_art.serve.failures import error_for
from strands_art.serve.fronts import messages, responses
from strands_art.serve.handling import CONFIG, REGISTRY, converse, known_of, read_body
from strands_art.serve.sessions import SESSION_HEADER, SessionRegistry, check_id, sampling_from_json
from strands_art.serve.wire import ChatWriter, check_unicode, models_list, parse_chat_request
from strands_art.training.grpo import GRPOConfig, rows_as_trained
from strands_art.validation import is_real

__all__ = ["CONFIG", "REGISTRY", "ServeConfig", "converse", "create_app", "error_for", "start"]

logger = logging.getLogger(__name__)


class ServeConfig(TypedDict, total=False):
    """HTTP front configuration.

    Attributes:
        model_name: the name ``GET /v1/models`` lists and responses echo when a request names
            none (any requested name is accepted: the gateway serves one policy).
        api_key: when set, every route but ``/health`` needs ``Authorization: Bearer <api_key>``.
        auto_open: open a session on the first chat request naming an unknown rollout id.
        max_body_bytes: request body limit (413 above it; default 8 MiB).
        store: a :class:`~strands_art.store.TrajectoryStore`; each closed rollout is appended.
        max_open_sessions: sessions open through the front at once (default 10,000; one more is
            a 429 ``too_many_sessions``).
        header_timeout: seconds a connection may take to send a request's headers, from when it
            opens or its previous response ends (default 30): a client that drips its headers
            (or sits idle) is disconnected then, so slow-header connections cannot pile up.
        train_truncated: serve the rows of answers sampled to the token limit with no complete
            call with loss mask 1 (default False: 0, as the embedded trainer trains them;
            :func:`served_trajectory`).
    """

    model_name: str
    api_key: str | None
    auto_open: bool
    max_body_bytes: int
    store: Any
    max_open_sessions: int
    header_timeout: float
    train_truncated: bool


def served_trajectory(traj: Any, config: Any) -> dict[str, Any]:
    """The JSON of a trajectory as ``GET /sessions/{rid}/trajectory`` and ``close`` answer it: its
    rows carry the loss mask GRPO trains them with (:func:`~strands_art.training.grpo.rows_as_trained`
    under ``GRPOConfig(train_truncated=config["train_truncated"])``: 0 on truncated answers,
    unless ``train_truncated``, and on the tails of cut turns), each masked span and why on the
    row's ``metadata["loss_excluded"]``, so a client that trains on ``loss_mask`` trains what the
    embedded trainer would. The store (``--store``) keeps the recording: mask 1 on every sampled
    token."""
    data = traj.to_dict()
    grpo = GRPOConfig(train_truncated=bool(config.get("train_truncated")))
    data["rows"] = [row.to_dict() for row in rows_as_trained(traj.rows, grpo)]
    return data


DEFAULT_HEADER_TIMEOUT = 30.0


def _dumps(data: Any) -> str:
    """JSON text; escaped to ASCII when it holds a lone surrogate (not encodable as UTF-8)."""
    text = json.dumps(data, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data)
    return text


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=_dumps)


def _error_body(request: web.Request, err: RequestError, exc: BaseException) -> dict[str, Any]:
    """The error in the shape of the request's protocol: Anthropic's on ``/v1/messages``,
    OpenAI's elsewhere (Chat Completions and the Responses API share it)."""
    if request.path.endswith("/v1/messages"):
        return anthropic_wire.error_body(err, exc)
    return err.body()


@web.middleware
async def _errors(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:  # routing, 405, 413 from aiohttp itself
        if exc.status < 400:
            raise
        kind = "invalid_request_error" if exc.status < 500 else "server_error"
        code = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}.get(exc.status)
        err = RequestError(exc.status, exc.text or exc.reason, type=kind, code=code)
        return _json(_error_body(request, err, exc), exc.status)
    except ConnectionResetError:
        raise  # the client is gone: there is no one to answer
    except Exception as exc:
        err = error_for(exc, "input" if request.path.endswith("/v1/responses") else "messages")
        if err is None:
            logger.exception("unexpected error serving %s %s", request.method, request.path)
            err = RequestError(500, f"internal error: {type(exc).__name__}: {exc}", type="server_error")
        headers = {"Retry-After": "1"} if err.status in (429, 503) else None
        resp = _json(_error_body(request, err, exc), err.status)
        if headers:
            resp.headers.update(headers)
        return resp


@web.middleware
async def _auth(request: web.Request, handler: Any) -> web.StreamResponse:
    key = request.app[CONFIG].get("api_key")
    if key and request.path != "/health":
        # a bearer token (OpenAI's SDK, Anthropic's with auth_token) or x-api-key (Anthropic's SDK)
        given = request.headers.get("Authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer":
            token = request.headers.get("x-api-key", "")
        if not hmac.compare_digest(token.strip().encode("utf-8", "surrogateescape"), key.encode()):
            raise RequestError(
                401, "missing or wrong bearer token", type="authentication_error", code="invalid_api_key"
            )
    return await handler(request)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    registry, config = request.app[REGISTRY], request.app[CONFIG]
    gateway = registry.gateway
    req = parse_chat_request(
        await read_body(request), getattr(gateway.renderer.family, "reasoning_effort", None)
    )
    path_id, header_id = request.match_info.get("rollout_id"), request.headers.get(SESSION_HEADER)
    # the conversion path (strands_art.conversion): checked before anything is opened or
    # recorded, reusing what the session's last recorded request already converted
    incoming = openai_request(req.messages, known_of(registry, path_id or header_id or req.user))
    rollout_id = registry.resolve(path_id, header_id, req.user)
    writer = ChatWriter(req.model or config["model_name"], req.include_usage)
    response, _ = await converse(
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
    return response


async def models(request: web.Request) -> web.Response:
    return _json(models_list(request.app[CONFIG]["model_name"]))


async def open_session(request: web.Request) -> web.Response:
    body = await read_body(request)
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    unknown = sorted(set(body) - {"rollout_id", "group_id", "sampling"})
    if unknown:
        raise RequestError(400, f"unknown fields {unknown} (rollout_id, group_id, sampling)")
    group_id = body.get("group_id")
    if group_id is not None and (not isinstance(group_id, str) or not 0 < len(group_id) <= 200):
        raise RequestError(400, "'group_id' must be a string of 1-200 characters", param="group_id")
    check_unicode("group_id", group_id)  # stored with every row: refused before anything opens
    defaults = request.app[REGISTRY].gateway.config["sampling"]
    sampling = sampling_from_json(body["sampling"], defaults) if body.get("sampling") is not None else None
    rollout_id = request.app[REGISTRY].open(body.get("rollout_id"), group_id, sampling)
    return _json({"rollout_id": rollout_id, "group_id": group_id}, 201)


async def set_sampling(request: web.Request) -> web.Response:
    sampling = sampling_from_json(await read_body(request), request.app[REGISTRY].gateway.config["sampling"])
    request.app[REGISTRY].set_sampling(request.match_info["rollout_id"], sampling)
    return _json(sampling.to_dict())


async def trajectory(request: web.Request) -> web.Response:
    traj = request.app[REGISTRY].trajectory(request.match_info["rollout_id"])
    return _json(served_trajectory(traj, request.app[CONFIG]))


async def close_session(request: web.Request) -> web.Response:
    body = await read_body(request)
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    unknown = sorted(set(body) - {"reward"})
    if unknown:  # a misspelt reward must not close the rollout without one
        raise RequestError(400, f"unknown fields {unknown} (reward)")
    reward = body.get("reward")
    if reward is not None and not is_real(reward):  # a finite number, never a boolean
        raise RequestError(400, "'reward' must be a finite number", param="reward")
    rollout_id = request.match_info["rollout_id"]
    check_id(rollout_id)
    registry, store = request.app[REGISTRY], request.app[CONFIG].get("store")
    trajectory = registry.trajectory(rollout_id)  # 404 never opened, 409 already closed
    if store is not None:  # a trajectory the store cannot write is refused while the session is open
        try:
            store.encode(trajectory)
        except ValueError as exc:
            raise RequestError(
                500, f"the rollout stays open: the store cannot write it: {exc}", type="server_error"
            ) from None
    traj = registry.close(rollout_id, reward)
    if store is not None:
        await asyncio.to_thread(store.append, traj)
    return _json(served_trajectory(traj, request.app[CONFIG]))


async def health(request: web.Request) -> web.Response:
    return _json({"status": "ok", "sessions": len(request.app[REGISTRY])})


def create_app(gateway: RolloutGateway, **config: Any) -> web.Application:
    """The aiohttp application serving ``gateway`` (:class:`ServeConfig` keys).

    Raises:
        TypeError: unknown config keys.
    """
    unknown = set(config) - set(ServeConfig.__annotations__)
    if unknown:
        raise TypeError(f"unknown serve config keys: {sorted(unknown)}")
    cfg: ServeConfig = {"model_name": "strands-art", "api_key": None, "auto_open": False}
    cfg.update(config)  # type: ignore[typeddict-item]
    app = web.Application(
        middlewares=[_errors, _auth], client_max_size=int(cfg.get("max_body_bytes") or DEFAULT_MAX_BODY_BYTES)
    )
    app[CONFIG] = dict(cfg)
    app[REGISTRY] = SessionRegistry(
        gateway, auto_open=bool(cfg["auto_open"]), max_open=int(cfg.get("max_open_sessions") or 10_000)
    )
    for prefix in ("", "/rollouts/{rollout_id}"):
        app.router.add_post(prefix + "/v1/chat/completions", chat_completions)
        app.router.add_post(prefix + "/v1/messages", messages)
        app.router.add_post(prefix + "/v1/responses", responses)
        app.router.add_get(prefix + "/v1/models", models)
    app.router.add_post("/sessions", open_session)
    app.router.add_put("/sessions/{rollout_id}/sampling", set_sampling)
    app.router.add_get("/sessions/{rollout_id}/trajectory", trajectory)
    app.router.add_post("/sessions/{rollout_id}/close", close_session)
    app.router.add_get("/health", health)
    return app


async def start(
    app: web.Application, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, sock: Any = None
) -> web.AppRunner:
    """Serve ``app`` on ``host:port`` (port 0 picks a free one), or on an already bound listening
    ``sock``, until the runner is cleaned up.

    Handlers are cancelled when their client disconnects (``handler_cancellation``), which
    cancels the turn's sampling; a connection that has not sent a whole request's headers
    within ``header_timeout`` (:class:`ServeConfig`) is closed. Returns the runner; ``runner.addresses`` holds the bound address.
    """
    # aiohttp closes a connection still waiting for a whole request when its keep-alive timer
    # fires, which starts at connect and after each response: that is the header-read timeout
    timeout = float(app[CONFIG].get("header_timeout") or DEFAULT_HEADER_TIMEOUT)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, keepalive_timeout=timeout)
    await runner.setup()
    site = web.SockSite(runner, sock) if sock is not None else web.TCPSite(runner, host, port)
    await site.start()
    return runner
