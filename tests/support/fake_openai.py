"""A test double for an OpenAI-compatible chat server (a hosted model here is out of reach).

Speaks ``POST /v1/chat/completions`` (also ``/chat/completions``) as the OpenAI API and
OpenAI-compatible servers (vLLM, LiteLLM proxy) do, which is what ``litellm`` (and so Strands'
``LiteLLMModel``) sends through the ``openai`` client:

- non-streaming: one ``chat.completion`` object, ``message.tool_calls`` with JSON-string
  ``function.arguments``, ``finish_reason`` "tool_calls" or "stop", ``usage``;
- streaming (``"stream": true``): Server-Sent Events, one ``chat.completion.chunk`` per ``data:``
  line: a role delta, content deltas or ``tool_calls`` deltas (index, id, name first, then the
  arguments in pieces), a chunk with ``finish_reason``, a usage chunk with empty ``choices`` when
  ``stream_options.include_usage`` is set, then ``data: [DONE]``.

Answers come from ``script(request_body, call_index) -> Reply``. Every request body is kept in
``requests``. ``GET /v1/models`` lists the model.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .fakes import LocalServer


@dataclass
class Reply:
    """One assistant answer: ``content`` text and/or ``tool_calls`` as ``(name, arguments dict)``."""

    content: str | None = None
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    prompt = len(json.dumps(body.get("messages", []))) // 4
    completion = len(json.dumps([reply.content, reply.tool_calls])) // 4
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


@dataclass
class FakeOpenAI(LocalServer):
    script: Callable[[dict[str, Any], int], Reply]
    model: str = "fake-model"
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    url_suffix = "/v1"

    def routes(self, app: web.Application) -> None:
        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": {"message": "body is not JSON", "code": 400}}, status=400)
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return web.json_response({"error": {"message": "messages required", "code": 400}}, status=400)
        index = len(self.requests)
        self.requests.append(body)
        reply = self.script(body, index)
        rid, created = f"chatcmpl-{index}", int(time.time())
        calls = [
            {
                "id": f"call_{index}_{k}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for k, (name, args) in enumerate(reply.tool_calls)
        ]
        finish = "tool_calls" if calls else "stop"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.content}
            if calls:
                message["tool_calls"] = calls
            return web.json_response(
                {
                    "id": rid,
                    "object": "chat.completion",
                    "created": created,
                    "model": body.get("model", self.model),
                    "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                    "usage": _usage(body, reply),
                }
            )

        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)

        async def chunk(delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any) -> None:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
            data = {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": body.get("model", self.model),
                "choices": choices,
                **extra,
            }
            await resp.write(f"data: {json.dumps(data)}\n\n".encode())

        await chunk({"role": "assistant", "content": ""})
        if reply.content:
            for i in range(0, len(reply.content), 8):
                await chunk({"content": reply.content[i : i + 8]})
        for k, call in enumerate(calls):
            head = {"index": k, "id": call["id"], "type": "function"}
            await chunk(
                {"tool_calls": [{**head, "function": {"name": call["function"]["name"], "arguments": ""}}]}
            )
            args = call["function"]["arguments"]
            for i in range(0, len(args), 5):
                await chunk({"tool_calls": [{"index": k, "function": {"arguments": args[i : i + 5]}}]})
        await chunk({}, finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            await chunk(None, usage=_usage(body, reply))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp
