"""What the HTTP front does with every field of a chat-completions request.

The rule is total: each field the ``openai`` package's request type lists
(``openai.types.chat.completion_create_params.CompletionCreateParams``; tests/test_serve_fields.py
enumerates them, so a field added to the SDK fails that test until it is placed here) is

- ``honoured``: the front does what OpenAI's API does with it;
- ``sampling``: a sampling setting; the trainer owns sampling, so it goes to the gateway's
  override policy (``--on-sampling-override``: ignored with a ``sampling_override_ignored``
  event naming it, or a 400 ``sampling_override_rejected``; an output cap at or above the
  session's ``max_new_tokens`` is no override, :data:`strands_art.gateway.OUTPUT_CAPS`);
- ``ignored``: not applied, and recorded on the trajectory (a ``request_field_ignored`` event
  naming the field and its value, ``tool_choice_ignored`` for ``tool_choice``) once the turn
  is recorded;
- ``refused``: a 400 whose ``param`` names the field, before anything is opened or recorded.

Several fields are honoured for some values and ignored or refused for others (``n``,
``tool_choice``, ``parallel_tool_calls``, ``top_logprobs``, ``response_format``,
``modalities``, ``reasoning_effort``): :func:`classify` decides per request. A field the SDK
does not list (a vendor extension such as vLLM's ``top_k``) follows :data:`EXTRA_FIELDS`, or is
recorded as ignored. docs/http-front.md carries the same table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from strands_art.serve.errors import RequestError, typed_field

HONOURED, SAMPLING, IGNORED, REFUSED = "honoured", "sampling", "ignored", "refused"

#: field -> (what the front does, in words); the policy per value is :func:`classify`'s
FIELDS: dict[str, str] = {
    "messages": "honoured: rendered with the model's chat template (`developer` is the system message)",
    "model": "honoured: echoed back (the front serves one policy)",
    "stream": "honoured: Server-Sent Events",
    "stream_options": "honoured: `include_usage` adds the usage chunk",
    "tools": "honoured: rendered by the chat template, calls parsed",
    "tool_choice": "honoured for `auto`; any other value ignored (`tool_choice_ignored` event)",
    "parallel_tool_calls": "honoured for `true`; `false` ignored (`request_field_ignored` event)",
    "user": "honoured: routes to a rollout when neither path nor header names one",
    "n": "honoured for 1; any other value refused (one sample per turn: one session per sample)",
    "logprobs": "honoured: the recorded logprob of every sampled token, streaming and not",
    "top_logprobs": "honoured for 0; more refused (the backends record the sampled token's only)",
    "temperature": "sampling",
    "top_p": "sampling",
    "max_tokens": "sampling",
    "max_completion_tokens": "sampling",
    "stop": "sampling",
    "seed": "sampling",
    "frequency_penalty": "sampling",
    "presence_penalty": "sampling",
    "logit_bias": "sampling",
    "reasoning_effort": "honoured when it equals the gateway's (GPT-OSS: its `chat_template_kwargs`); "
    "else ignored (event): the prompt is the trainer's",
    "verbosity": "ignored (event)",
    "response_format": "honoured for `text`; a JSON format ignored (event): sampling is unconstrained",
    "modalities": 'honoured for `["text"]`; audio refused',
    "audio": "refused: text output only",
    "functions": "refused: the deprecated form of `tools`",
    "function_call": "refused: the deprecated form of `tool_choice`",
    "web_search_options": "refused: no web search",
    "metadata": "ignored (event)",
    "store": "ignored (event): the front records every turn anyway",
    "service_tier": "ignored (event)",
    "prediction": "ignored (event): a latency hint",
    "prompt_cache_key": "ignored (event): a cache hint",
    "prompt_cache_options": "ignored (event): a cache hint",
    "prompt_cache_retention": "ignored (event): a cache hint",
    "safety_identifier": "ignored (event)",
    "moderation": "ignored (event)",
}

#: fields outside the SDK's request type that the front knows (vLLM's extensions)
EXTRA_FIELDS: dict[str, str] = {"top_k": "sampling"}

SAMPLING_FIELDS = tuple(k for k, v in {**FIELDS, **EXTRA_FIELDS}.items() if v == SAMPLING)


@dataclass
class FieldPlan:
    """The front's decision on one request's fields.

    Attributes:
        overrides: the sampling fields set (non-null), for the gateway's override policy.
        ignored: ``(field, reason)`` for each field recorded as ignored once the turn is recorded.
        logprobs: return the recorded logprobs.
    """

    overrides: dict[str, Any] = field(default_factory=dict)
    ignored: list[tuple[str, str]] = field(default_factory=list)
    logprobs: bool = False


def refuse(name: str, why: str) -> RequestError:
    return RequestError(400, f"'{name}' is not supported: {why}", param=name, code="unsupported_field")


def shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True)[:200]


def classify(body: dict[str, Any], reasoning_effort: str | None = None) -> FieldPlan:
    """Decide every field of a request ``body`` (a JSON object) as :data:`FIELDS` says.

    Args:
        body: the decoded request.
        reasoning_effort: the effort the gateway renders (GPT-OSS), or None for a family without one.

    Raises:
        RequestError: 400 naming the first refused field or a field of the wrong type.
    """
    plan = table_plan(body, FIELDS, EXTRA_FIELDS)
    _conditional(body, plan, reasoning_effort)
    return plan


def table_plan(body: dict[str, Any], table: dict[str, str], extra: dict[str, str]) -> FieldPlan:
    """The plan of a request ``body`` under a protocol's field ``table`` (field -> policy text
    starting with ``honoured``, ``sampling``, ``ignored`` or ``refused``; ``extra``: fields
    outside the SDK's request type that the front knows): sampling fields become overrides,
    ignored and unknown fields are listed, the first refused one raises. Values that are
    honoured for some values only are left to the protocol's own checks.

    Raises:
        RequestError: 400 (``unsupported_field``) naming the first refused field.
    """
    plan = FieldPlan()
    for name, value in body.items():
        if value is None:
            continue
        policy = table.get(name) or extra.get(name)
        if policy == SAMPLING:
            plan.overrides[name] = value
        elif policy is None:
            plan.ignored.append((name, f"{name}={shown(value)} is not a field this front knows; not applied"))
        elif policy.startswith("refused"):
            if name == "function_call" and value in ("auto",):
                continue  # the default: nothing to refuse
            raise refuse(name, policy.split(": ", 1)[1])
        elif policy.startswith("ignored"):
            plan.ignored.append((name, f"{name}={shown(value)} is not applied"))
    return plan


def _conditional(body: dict[str, Any], plan: FieldPlan, reasoning_effort: str | None) -> None:
    plan.logprobs = bool(typed_field(body, "logprobs", bool, "true or false"))
    top = typed_field(body, "top_logprobs", int, "an integer")
    if top:
        raise refuse(
            "top_logprobs",
            f"top_logprobs={top}: the backends record only the sampled token's logprob (send 0 or omit it)",
        )
    if typed_field(body, "parallel_tool_calls", bool, "true or false") is False:
        plan.ignored.append(
            (
                "parallel_tool_calls",
                "parallel_tool_calls=false is not enforced: every call the model sampled is returned "
                "and recorded",
            )
        )
    fmt = body.get("response_format")
    if fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        plan.ignored.append(
            ("response_format", f"response_format={shown(fmt)} is not enforced: sampling is unconstrained")
        )
    modalities = body.get("modalities")
    if modalities is not None and (not isinstance(modalities, list) or any(m != "text" for m in modalities)):
        raise refuse("modalities", f"modalities={shown(modalities)}: text output only")
    effort = typed_field(body, "reasoning_effort", str, "a string")
    if effort is not None and effort != reasoning_effort:
        rendered = (
            f"the prompt says reasoning effort {reasoning_effort!r}, the trainer's setting"
            if reasoning_effort
            else "this model's chat template has no reasoning effort"
        )
        plan.ignored.append(("reasoning_effort", f"reasoning_effort={effort!r} is not applied: {rendered}"))
