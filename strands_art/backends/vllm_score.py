"""Score a fixed token sequence on a vLLM server: the logprob of each token given those before it.

Uses vLLM's ``prompt_logprobs`` on ``POST /v1/completions`` (a token-ID prompt, one token
generated and thrown away). ``choices[0].prompt_logprobs`` is a list with one entry per prompt
token: ``None`` for the first, then ``{"<token id>": {"logprob", "rank", "decoded_token"}, ...}``
holding at least the prompt token itself (``vllm/entrypoints/openai/completion/protocol.py``).
Prompt logprobs come from the model's unscaled distribution (temperature 1, no top-k/top-p), so
they are comparable to a recomputation under ``SamplingParams(temperature=1.0)``.

Used to check on-policy weight sync (``bench/onpolicy.py``): the same sequence scored under the
base model and under a freshly loaded LoRA adapter shows how far the served policy moved and
whether it equals the trainer's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import httpx

from strands_art.backends.base import BackendError
from strands_art.backends.http_limits import ACCEPT_ENCODING, MAX_RESPONSE_BYTES, read_body_sync
from strands_art.backends.vllm import completions_url, error_message


def score_tokens(
    base_url: str,
    model: str,
    ids: Sequence[int],
    start: int,
    *,
    api_key: str | None = None,
    timeout_s: float = 120.0,
) -> list[float]:
    """Natural-log probabilities of ``ids[start:]`` under ``model`` (a served name or a loaded
    LoRA adapter), each conditioned on all tokens before it.

    Args:
        base_url: the server, e.g. ``http://127.0.0.1:8000``.
        model: the ``model`` of the request.
        ids: the token sequence (prompt and continuation).
        start: index of the first scored token (>= 1: the first token has no logprob).

    Returns:
        ``len(ids) - start`` floats.

    Raises:
        ValueError: ``start`` out of ``[1, len(ids))``.
        BackendError: the server refused or answered without the logprobs asked for.
    """
    ids = [int(t) for t in ids]
    if not 1 <= start < len(ids):
        raise ValueError(f"start must be in [1, {len(ids)}), got {start}")
    body = {
        "model": model,
        "prompt": ids,
        "max_tokens": 1,
        "temperature": 1.0,
        "prompt_logprobs": 0,
        "return_token_ids": True,
    }
    headers = {"Accept-Encoding": ACCEPT_ENCODING}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    url = completions_url(base_url)
    try:  # the answer read within the size cap and timeout_s in all (http_limits)
        with httpx.stream("POST", url, json=body, headers=headers, timeout=timeout_s) as r:
            content = read_body_sync(r, MAX_RESPONSE_BYTES, url, timeout_s)
        resp = httpx.Response(r.status_code, content=content, request=r.request)
    except httpx.HTTPError as exc:
        raise BackendError(f"could not score on vLLM at {url}: {exc!r}") from exc
    if resp.status_code != 200:
        raise BackendError(f"vLLM at {url} refused to score (HTTP {resp.status_code}): {error_message(resp)}")
    try:
        entries = resp.json()["choices"][0]["prompt_logprobs"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise BackendError(f"vLLM at {url} answered without prompt_logprobs: {resp.text[:200]!r}") from exc
    if not isinstance(entries, list) or len(entries) != len(ids):
        raise BackendError(f"vLLM returned prompt_logprobs for {len(entries or [])} of {len(ids)} tokens")
    out = []
    for pos in range(start, len(ids)):
        entry = entries[pos] or {}
        item = entry.get(str(ids[pos]))
        value = item.get("logprob") if isinstance(item, dict) else None
        if not isinstance(value, (int, float)) or math.isnan(value):
            raise BackendError(f"vLLM's prompt_logprobs lack token {ids[pos]} at position {pos}")
        out.append(float(value))
    return out
