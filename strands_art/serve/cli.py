"""``strands-art serve``: the HTTP front on a rollout gateway (Chat Completions, Anthropic Messages, Responses API).

Builds the sampling backend (the embedded transformers model, llama.cpp in-process, a vLLM
server, or a scripted backend for trying a harness without a model), a :class:`~strands_art.gateway.RolloutGateway`
on it, and serves :func:`strands_art.serve.app.create_app` until interrupted (Ctrl-C / SIGTERM).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from strands_art.serve.defaults import DEFAULT_HOST, DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT
from strands_art.validation import (
    UsageError,
    add_sampling_args,
    check_backend_url,
    check_float,
    check_int,
    check_sampling_args,
)

logger = logging.getLogger(__name__)

DESCRIPTION = """\
An HTTP front on the rollout gateway, for harnesses that are not Strands (LangGraph, the OpenAI
Agents SDK, Claude-Code- and Codex-style agents, anything on LiteLLM, Strands' own OpenAIModel).
Three protocols, one conversion path: the same conversation gives the same rows in each.

  POST /v1/chat/completions              one turn, OpenAI Chat Completions (stream or not; tools)
  POST /rollouts/ID/v1/chat/completions  the same, rollout id in the path (put it in base_url)
  POST /rollouts/ID/v1/messages          one turn, Anthropic Messages (stream or not; tool_use)
  POST /rollouts/ID/v1/responses         one turn, the Responses API (stream or not; function_call)
  GET  /v1/models                        the served model name
  POST /sessions                         open: {"rollout_id"?, "group_id"?, "sampling"?}
  PUT  /sessions/ID/sampling             the trainer's sampling settings for a rollout
  GET  /sessions/ID/trajectory           turns, rows (input_ids, loss_mask, logprobs), events; loss_mask
                                         is 0 on truncated answers and cut tails (see --train-truncated)
  POST /sessions/ID/close                {"reward"?} -> the final trajectory
  GET  /health

A chat request's rollout id comes from the path prefix, else the X-Rollout-Id header, else the
"user" field. It binds 127.0.0.1 unless --host says otherwise; set the environment variable
named by --api-key-env (default STRANDS_ART_API_KEY) to require "Authorization: Bearer KEY".
See docs/http-front.md.
"""


def add_serve_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``serve`` on a subparsers object; the handler is set as ``func``."""
    p = subparsers.add_parser(
        "serve",
        help="an HTTP front on the rollout gateway: Chat Completions, Anthropic Messages, Responses API",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g = p.add_argument_group("server")
    g.add_argument(
        "--host", default=DEFAULT_HOST, help=f"bind address (default {DEFAULT_HOST}: loopback only)"
    )
    g.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks one)"
    )
    g.add_argument(
        "--api-key-env",
        default="STRANDS_ART_API_KEY",
        help="environment variable holding the bearer token (default STRANDS_ART_API_KEY; unset: no token)",
    )
    g.add_argument(
        "--auto-open",
        action="store_true",
        help="open a session on the first request naming an unknown rollout id (default: 404)",
    )
    g.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help=f"request body limit, 413 above it (default {DEFAULT_MAX_BODY_BYTES})",
    )
    g.add_argument(
        "--max-open-sessions",
        type=int,
        default=10_000,
        help="sessions open at once; opening one more is a 429 (default 10000)",
    )
    g.add_argument(
        "--header-timeout",
        type=float,
        default=30.0,
        help="seconds a connection may take to send a request's headers (from connect or its "
        "previous response); slower or idle connections are closed (default 30)",
    )
    g.add_argument(
        "--served-model-name",
        default=None,
        help="name listed by /v1/models (default: --model; scripted: scripted:TOKENIZER)",
    )
    g.add_argument("--store", default=None, help="append closed rollouts to this trajectory store directory")

    g = p.add_argument_group("model")
    g.add_argument(
        "--backend",
        choices=["llamacpp", "transformers", "vllm", "scripted"],
        default=None,
        help="llamacpp: llama.cpp in-process (the GGUF aliases' default); transformers: the embedded "
        "model (the default for other models); vllm: a vLLM server (--base-url); scripted: replies "
        "from --script (try a harness without a model)",
    )
    g.add_argument("--parallel", type=int, default=2, help="llamacpp: slots decoded together (default 2)")
    g.add_argument("--model", default="smollm2", help="model alias/dir (transformers) or served name (vllm)")
    g.add_argument(
        "--tokenizer", default=None, help="tokenizer alias/dir for vllm and scripted (default: --model)"
    )
    g.add_argument("--base-url", default=None, help="vllm: the server, e.g. http://127.0.0.1:8001")
    g.add_argument(
        "--script",
        default=None,
        help="scripted: a JSON list of script items ({'text': ...}), played in order across all sessions",
    )

    g = p.add_argument_group("gateway")
    g.add_argument(
        "--history-mode", choices=["tree", "linear"], default="tree", help="row capture (default tree)"
    )
    g.add_argument(
        "--on-nonlinear",
        choices=["reset", "error", "disable"],
        default="reset",
        help="linear mode, a history that does not continue the saved tokens: reset (default), "
        "error (409), disable (see docs/linear-history.md)",
    )
    g.add_argument(
        "--reasoning-omitted",
        choices=["heal", "reset"],
        default="heal",
        help="linear mode, an assistant echo without the reasoning the model sampled: heal (default: "
        "continue the saved tokens) or reset (a divergence; see docs/linear-history.md)",
    )
    g.add_argument(
        "--on-sampling-override",
        choices=["ignore", "reject"],
        default="ignore",
        help="a request's own temperature/top_p/max_tokens...: ignore with an event (default) or 400",
    )
    g.add_argument(
        "--train-truncated",
        action="store_true",
        help="serve answers sampled to the token limit with no complete tool call with loss mask 1 (default: "
        "0 in the rows /trajectory and /close return, as the trainer leaves them out, DAPO's overlong "
        "filtering; the store keeps the recording)",
    )
    add_sampling_args(
        g, temperature=1.0, top_p=1.0, max_new_tokens=512, context_default="the model's", per_request=True
    )
    p.set_defaults(func=run_serve)
    return p


def _backend(args: argparse.Namespace) -> tuple[Any, Any]:
    """(sampling backend, tokenizer) for ``--backend``; UsageError with a message on bad options."""
    if args.backend == "vllm":
        from strands_art.backends.vllm import VLLMBackend

        return VLLMBackend(args.base_url, args.model), args.tokenizer or args.model
    if args.backend == "scripted":
        from strands_art.backends.scripted import ScriptedBackend
        from strands_art.registry import load_tokenizer

        if not args.script:
            raise UsageError("--backend scripted needs --script FILE.json")
        try:  # ValueError: invalid UTF-8 or JSON; RecursionError: nested too deeply
            script = json.loads(Path(args.script).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            raise UsageError(f"cannot read {args.script}: {exc}") from None
        if not isinstance(script, list):
            raise UsageError("the script must be a JSON list of items")
        tok = load_tokenizer(args.tokenizer or args.model)
        return ScriptedBackend(tok, script), tok
    from strands_art.backends import local_backend

    return local_backend(
        args.model,
        args.backend,
        context_tokens=args.max_context_tokens or 8192,
        parallel=args.parallel,
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, bound before anything else starts (the model, the
    ``--store`` directory), so a busy port or a bad host costs nothing.

    Raises:
        UsageError: the host does not resolve or the address cannot be bound.
    """
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family, backlog=128)
    except (OSError, UnicodeError) as exc:  # gaierror, EADDRINUSE, EADDRNOTAVAIL, a bad IDNA name
        raise UsageError(f"cannot listen on {host}:{port}: {exc}") from None


def check_store(path: str | None) -> None:
    """UsageError when ``--store`` names something that is not a directory (or cannot become one)."""
    if path is None:
        return
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise UsageError(f"--store {path}: exists and is not a directory")
    parent = next((p for p in target.absolute().parents if p.exists()), None)
    if not target.exists() and (parent is None or not parent.is_dir() or not os.access(parent, os.W_OK)):
        raise UsageError(f"--store {path}: cannot be created ({parent} is not a writable directory)")


async def _serve(args: argparse.Namespace, api_key: str | None, sock: socket.socket) -> None:
    from strands_art.backends.base import BackendError, SamplingParams
    from strands_art.gateway import RolloutGateway
    from strands_art.registry import ModelNotFound
    from strands_art.serve.app import create_app, start

    config: dict[str, Any] = {
        "history_mode": args.history_mode,
        "on_nonlinear": args.on_nonlinear,
        "reasoning_omitted": args.reasoning_omitted,
        "on_sampling_override": args.on_sampling_override,
        "sampling": SamplingParams(
            temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens
        ),
    }
    if args.max_context_tokens:
        config["max_context_tokens"] = args.max_context_tokens
    try:  # a tokenizer alias/directory that does not exist (vllm loads it here)
        backend, tokenizer = _backend(args)
        gateway = RolloutGateway(tokenizer, backend, **config)
    except (ModelNotFound, BackendError) as exc:
        raise UsageError(str(exc)) from None
    store = None
    if args.store:
        from strands_art.store import TrajectoryStore

        store = TrajectoryStore(args.store)
    app = create_app(
        gateway,
        model_name=served_name(args),
        api_key=api_key,
        auto_open=args.auto_open,
        max_body_bytes=args.max_body_bytes,
        max_open_sessions=args.max_open_sessions,
        header_timeout=args.header_timeout,
        store=store,
        train_truncated=args.train_truncated,
    )
    runner = await start(app, sock=sock)
    host, port = runner.addresses[0][:2]
    print(f"strands-art serve: http://{host}:{port}/v1 (Ctrl-C stops)", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        await backend.aclose()


def served_name(args: argparse.Namespace) -> str:
    """The name ``GET /v1/models`` lists: ``--served-model-name``, else the model actually
    served: ``--model`` (an alias, a directory, a vLLM model), or for the scripted backend
    ``scripted:<tokenizer>`` (replies from ``--script``, no model; ``--model`` is only its
    tokenizer's fallback)."""
    if args.served_model_name:
        return args.served_model_name
    if args.backend == "scripted":
        return f"scripted:{args.tokenizer or args.model}"
    return args.model


def validate_serve_args(args: argparse.Namespace) -> None:
    """Check every ``serve`` number before anything starts; UsageError names the flag. Fills
    ``--backend`` left out with the model's preferred one (llama.cpp for the GGUF aliases)."""
    from strands_art.registry import preferred_backend

    if args.backend is None:
        args.backend = preferred_backend(args.model)
    check_int("--port", args.port, 0, 65535)
    check_int("--parallel", args.parallel, 1, 64)
    check_float("--header-timeout", args.header_timeout, 0, 3600, lo_open=True)
    check_backend_url(args.backend, args.base_url)
    check_int("--max-body-bytes", args.max_body_bytes, 1, 1 << 30)
    check_int("--max-open-sessions", args.max_open_sessions, 1, 10_000_000)
    check_sampling_args(args)


def run_serve(args: argparse.Namespace) -> int:
    """Handle ``serve``: exit 2 with one line on bad options, else serve until stopped (0)."""
    try:
        validate_serve_args(args)
        return _run_serve(args)
    except UsageError as exc:
        print(f"strands-art serve: {exc}", file=sys.stderr)
        return 2


def _run_serve(args: argparse.Namespace) -> int:
    api_key = os.environ.get(args.api_key_env) or None
    if args.host not in ("127.0.0.1", "::1", "localhost") and not api_key:
        logger.warning(
            "serving on %s without a bearer token: anyone who can reach it can sample and read rollouts "
            "(set %s)",
            args.host,
            args.api_key_env,
        )
    check_store(args.store)
    sock = bind(args.host, args.port)  # before the model and the store: a busy port costs nothing
    try:
        asyncio.run(_serve(args, api_key, sock))
    finally:
        sock.close()
    return 0
