"""ARTModel: a Strands model provider that sends every call through the rollout gateway.

Swap it into any ``strands.Agent``::

    gateway = RolloutGateway("smollm2", TransformersBackend("smollm2"))
    agent = Agent(model=ARTModel(gateway=gateway, session_id="rollout-1"), tools=[...])

Implements the Strands ``Model`` interface (strands/models/model.py of strands-agents >= 1.0):
``stream``, ``structured_output``, ``update_config``, ``get_config``. The provider keeps the
*canonical history*: the assistant messages the gateway produced, keyed by the ``toolUseId``s it
assigned. Strands rewrites history before a provider sees it again (blank text becomes
"[blank text]", unparseable tool input becomes ``{}``, reasoning is kept only as a block); the
provider maps each replayed assistant message back to what the gateway produced and reports any
other rewrite as a reason-coded event on the trajectory. The provider knows nothing of tokens.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterable
from typing import Any, TypedDict, TypeVar

from pydantic import BaseModel
from strands.models.model import Model
from strands.types.exceptions import ContextWindowOverflowException, ModelThrottledException

from strands_art.backends.base import BackendError
from strands_art.canonical import CanonicalHistory
from strands_art.formats import (
    content_blocks,
    strands_assistant_to_openai,
    strands_user_to_openai,
    stream_events,
    tool_specs_to_openai,
)
from strands_art.gateway import ContextBudgetExceeded, RolloutGateway

logger = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)

SAMPLING_KEYS = ("temperature", "top_p", "top_k", "max_tokens", "max_new_tokens", "stop", "seed")


class ARTModelConfig(TypedDict, total=False):
    """ARTModel configuration.

    Attributes:
        model_id: a label for the policy being trained (reported, not used for routing).
        session_id: the rollout id this provider's calls belong to.
        group_id: the source prompt (task) id, for GRPO grouping.
        params: sampling parameters the agent asks for; the gateway ignores them (with a
            warning) or rejects them, because the trainer owns sampling.
        context_window_limit: reported to Strands (defaults to the gateway's budget).
    """

    model_id: str
    session_id: str
    group_id: str | None
    params: dict[str, Any]
    context_window_limit: int | None


class ARTModel(Model):
    """Strands provider backed by an in-process :class:`~strands_art.gateway.RolloutGateway`.

    Args:
        gateway: the rollout gateway.
        session_id: the rollout id; a session is opened on the gateway if needed.
        **config: :class:`ARTModelConfig` keys.
    """

    def __init__(self, gateway: RolloutGateway, session_id: str | None = None, **config: Any) -> None:
        self.gateway = gateway
        self.config: ARTModelConfig = {"model_id": "strands-art", "params": {}}
        self.update_config(**config)
        self.config["session_id"] = gateway.open_session(session_id, self.config.get("group_id"))
        self.canonical = CanonicalHistory(gateway, self.session_id)

    @property
    def session_id(self) -> str:
        return self.config["session_id"]

    # ------------------------------------------------------------------ config
    def update_config(self, **model_config: Any) -> None:  # type: ignore[override]
        unknown = set(model_config) - set(ARTModelConfig.__annotations__)
        if unknown:
            raise ValueError(f"unknown ARTModel config keys: {sorted(unknown)}")
        self.config.update(model_config)  # type: ignore[typeddict-item]

    def get_config(self) -> ARTModelConfig:
        cfg = dict(self.config)
        cfg.setdefault("context_window_limit", self.gateway.max_context_tokens)
        return cfg  # type: ignore[return-value]

    # ---------------------------------------------------------- canonical history
    def to_chat_messages(
        self, messages: list[dict[str, Any]], system_prompt: str | None
    ) -> list[dict[str, Any]]:
        """Strands messages → OpenAI chat messages, replaying what the gateway produced."""
        out: list[dict[str, Any]] = []
        if system_prompt:
            out.append({"role": "system", "content": system_prompt})
        for index, message in enumerate(messages):
            content_blocks(message)  # validates role and content shape (StrandsFormatError)
            if message.get("role") == "assistant":
                out.append(self.canonical.assistant(index, strands_assistant_to_openai(message)))
            else:
                for m in strands_user_to_openai(message):
                    if m["role"] == "tool":
                        self.canonical.check_tool_result(index, m)
                    out.append(m)
        return out

    # ------------------------------------------------------------------ stream
    async def stream(  # type: ignore[override]
        self,
        messages: list[dict[str, Any]],
        tool_specs: list[dict[str, Any]] | None = None,
        system_prompt: str | None = None,
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> AsyncIterable[dict[str, Any]]:
        """One model call through the gateway, yielded as Strands stream events.

        Accepts and ignores Strands' extra keyword arguments (``model_state``,
        ``invocation_state``, ``cancel_signal``, ...).

        Raises:
            StrandsFormatError: a malformed message or tool spec (unknown role, content that is
                not a list of blocks, a tool spec without a name, an image block); nothing recorded.
            ContextWindowOverflowException: the prompt leaves no room to generate.
            ModelThrottledException: the sampling backend failed or timed out (retryable).
        """
        chat = self.to_chat_messages(messages, system_prompt)
        tools = tool_specs_to_openai(tool_specs)
        overrides = {k: v for k, v in (self.config.get("params") or {}).items() if k in SAMPLING_KEYS}
        t0 = time.perf_counter()
        try:
            result = await self.gateway.generate(self.session_id, chat, tools, overrides or None)
        except ContextBudgetExceeded as exc:
            raise ContextWindowOverflowException(str(exc)) from exc
        except BackendError as exc:
            raise ModelThrottledException(f"sampling backend failed: {exc}") from exc
        self.canonical.remember(result.assistant_message)
        latency = int((time.perf_counter() - t0) * 1000)
        for event in stream_events(
            result.text, result.reasoning, result.tool_calls, result.finish_reason, result.usage, latency
        ):
            yield event

    async def structured_output(  # type: ignore[override]
        self,
        output_model: type[T],
        prompt: list[dict[str, Any]],
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        """Ask for JSON matching ``output_model``'s schema and validate it.

        Raises ValueError when the model's answer is not valid JSON for the schema.
        """
        schema = json.dumps(output_model.model_json_schema())
        instruction = f"Answer with one JSON object matching this JSON schema, and nothing else:\n{schema}"
        system = f"{system_prompt}\n\n{instruction}" if system_prompt else instruction
        text = ""
        async for event in self.stream(prompt, None, system):
            delta = event.get("contentBlockDelta", {}).get("delta", {})
            text += delta.get("text", "")
            yield event
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end < start:
            raise ValueError(f"structured output: no JSON object in the model's answer: {text[:200]!r}")
        yield {"output": output_model.model_validate_json(text[start : end + 1])}
