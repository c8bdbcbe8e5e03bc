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
other rewrite as a reason-coded event on the trajectory (the conversion path,
:mod:`strands_art.conversion`, shared with the HTTP front). Calls the agent throws away (a hook's
retry, a cancelled turn) and summarization calls are tagged on their turns
(:mod:`strands_art.turn_tags`). The provider knows nothing of tokens.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import warnings
from collections.abc import AsyncGenerator, AsyncIterable
from functools import partial
from typing import Any, Literal, TypedDict, TypeVar

from pydantic import BaseModel
from strands.models.model import Model
from strands.types.exceptions import ContextWindowOverflowException, ModelThrottledException

from strands_art.backends.base import BackendTimeout, BackendUnavailable
from strands_art.conversion.canonical import CanonicalHistory
from strands_art.conversion.session import SessionConversion, describe_tool_choice
from strands_art.conversion.strands import forces_tool_choice, strands_request, tool_specs_to_openai
from strands_art.formats import stream_events
from strands_art.gateway import ContextBudgetExceeded, RolloutGateway, within_output_limit
from strands_art.streaming import Finished, TextStream, streamed_turn
from strands_art.turn_tags import DISCARDED, SUMMARIZER, TurnTagger, is_summarizer_call
from strands_art.validation import is_int

logger = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)

SAMPLING_KEYS = ("temperature", "top_p", "top_k", "max_tokens", "max_new_tokens", "stop", "seed")


class ARTModelConfig(TypedDict, total=False):
    """ARTModel configuration (``ARTModel(**config)``, ``update_config(**config)``).

    Conventions follow strands' own providers (strands/models/openai.py, litellm.py,
    llamacpp.py): unknown keys warn (``UserWarning``) and are dropped; invalid values raise
    ``ValueError`` when set, not at call time.

    Attributes:
        model_id: a label for the policy being trained (reported, not used for routing).
        session_id: the rollout id this provider's calls belong to. Changing it switches the
            provider to that session (opened on the gateway if needed, with ``group_id``);
            each session keeps its own canonical history.
        group_id: the source prompt (task) id, for GRPO grouping. Fixed once its session is
            open: change it together with a new ``session_id``.
        params: sampling parameters the agent asks for (keys in ``SAMPLING_KEYS``). The trainer
            owns sampling, so they never take effect: with the gateway's
            ``on_sampling_override="reject"`` setting them raises ``ValueError``; with
            ``"ignore"`` (default) a ``UserWarning`` is emitted when they are set and each call
            records a ``sampling_override_ignored`` event. An output cap (``max_tokens``,
            ``max_new_tokens``) at or above the gateway's ``max_new_tokens`` is no override
            (:func:`~strands_art.gateway.within_output_limit`). Set sampling on the gateway
            (``RolloutGateway(sampling=...)``, ``set_sampling``).
        context_window_limit: the context budget in tokens (prompt + generated), reported to
            Strands (its conversation managers read it) and enforced on every call
            (``ContextWindowOverflowException``); at most the gateway's ``max_context_tokens``,
            which is the default.
        on_tool_choice: what a forcing Strands ``tool_choice`` (``{"any": {}}``,
            ``{"tool": {"name": ...}}``) does, since token-level sampling cannot force a call:
            "ignore" (default; ``UserWarning`` once and a ``tool_choice_ignored`` event per
            call, as strands' llamacpp provider warns) or "reject" (``ValueError``).
        history_mode: read-only mirror of the gateway's ``history_mode`` (a gateway setting:
            ``RolloutGateway(..., history_mode="linear")``); a different value raises.
    """

    model_id: str
    session_id: str
    group_id: str | None
    params: dict[str, Any]
    context_window_limit: int | None
    on_tool_choice: Literal["ignore", "reject"]
    history_mode: Literal["tree", "linear"]


class ARTModel(Model):
    """Strands provider backed by an in-process :class:`~strands_art.gateway.RolloutGateway`.

    Args:
        gateway: the rollout gateway.
        session_id: the rollout id; a session is opened on the gateway if needed.
        **config: :class:`ARTModelConfig` keys.

    Raises:
        ValueError: an invalid config value (see :class:`ARTModelConfig`).
    """

    def __init__(self, gateway: RolloutGateway, session_id: str | None = None, **config: Any) -> None:
        self.gateway = gateway
        self.config: ARTModelConfig = {"model_id": "strands-art", "params": {}, "on_tool_choice": "ignore"}
        self._conversions: dict[str, SessionConversion] = {}
        self.tagger = TurnTagger(gateway)
        self._warned_tool_choice = False
        if session_id is not None:
            config["session_id"] = session_id
        self.update_config(**config)
        if "session_id" not in self.config:
            self._open(None)

    @property
    def session_id(self) -> str:
        return self.config["session_id"]

    @property
    def conversion(self) -> SessionConversion:
        """The conversion path's state of the current session (:mod:`strands_art.conversion`)."""
        return self._conversions[self.session_id]

    @property
    def canonical(self) -> CanonicalHistory:
        """The canonical history of the current session."""
        return self.conversion.history

    def _open(self, session_id: str | None) -> None:
        sid = self.gateway.open_session(session_id, self.config.get("group_id"))
        self.config["session_id"] = sid
        self._conversions.setdefault(sid, SessionConversion(self.gateway, sid))

    # ------------------------------------------------------------------ config
    def update_config(self, **model_config: Any) -> None:  # type: ignore[override]
        """Validate and apply config keys (see :class:`ARTModelConfig`).

        Raises:
            ValueError: an invalid value; nothing is changed.
        """
        valid = set(ARTModelConfig.__annotations__)
        unknown = set(model_config) - valid
        if unknown:
            warnings.warn(
                f"ARTModel ignores unknown config keys {sorted(unknown)}; valid keys are {sorted(valid)}",
                UserWarning,
                stacklevel=2,
            )
            model_config = {k: v for k, v in model_config.items() if k not in unknown}
        self._validate(model_config)
        new_session = "session_id" in model_config and model_config["session_id"] != self.config.get(
            "session_id"
        )
        session_id = model_config.pop("session_id", None)
        self.config.update(model_config)  # type: ignore[typeddict-item]
        if new_session:
            self._open(session_id)

    def _validate(self, cfg: dict[str, Any]) -> None:
        mode = self.gateway.config["history_mode"]
        if "history_mode" in cfg and cfg["history_mode"] != mode:
            raise ValueError(
                f"history_mode is a gateway setting (this gateway is {mode!r}): create the gateway with "
                f"RolloutGateway(..., history_mode={cfg['history_mode']!r}) (docs/linear-history.md)"
            )
        if "params" in cfg:
            self._validate_params(cfg["params"])
        limit = cfg.get("context_window_limit")
        if limit is not None and (not is_int(limit) or not 0 < limit <= self.gateway.max_context_tokens):
            raise ValueError(
                f"context_window_limit must be a whole number of tokens in 1..{self.gateway.max_context_tokens} "
                f"(the gateway's max_context_tokens), got {limit!r}"
            )
        if cfg.get("on_tool_choice", "ignore") not in ("ignore", "reject"):
            raise ValueError(f"on_tool_choice must be 'ignore' or 'reject', got {cfg['on_tool_choice']!r}")
        if "group_id" in cfg and "session_id" in self.config and "session_id" not in cfg:
            if cfg["group_id"] != self.config.get("group_id"):
                raise ValueError(
                    "group_id is fixed once the session is open: pass a new session_id with it "
                    "(update_config(session_id=..., group_id=...))"
                )
        if "session_id" in cfg and cfg["session_id"] is not None and not isinstance(cfg["session_id"], str):
            raise ValueError(f"session_id must be a string, got {type(cfg['session_id']).__name__}")

    def _validate_params(self, params: Any) -> None:
        if not isinstance(params, dict):
            raise ValueError(f"params must be a dict of sampling parameters, got {type(params).__name__}")
        unknown = set(params) - set(SAMPLING_KEYS)
        if unknown:
            raise ValueError(
                f"params {sorted(unknown)} are not sampling parameters (known: {list(SAMPLING_KEYS)})"
            )
        limit = self.gateway.config["sampling"].max_new_tokens  # the sessions' (open_session)
        asked = sorted(k for k, v in params.items() if v is not None and not within_output_limit(k, v, limit))
        if not asked:
            return
        if self.gateway.config["on_sampling_override"] == "reject":
            raise ValueError(
                f"params {asked} are rejected: the trainer owns sampling (gateway on_sampling_override='reject'); "
                "set them on the gateway (RolloutGateway(sampling=SamplingParams(...)))"
            )
        warnings.warn(
            f"params {asked} will not take effect: the trainer owns sampling; each call records a "
            "sampling_override_ignored event (set sampling on the gateway instead)",
            UserWarning,
            stacklevel=4,
        )

    def get_config(self) -> ARTModelConfig:
        cfg = dict(self.config)
        if cfg.get("context_window_limit") is None:
            cfg["context_window_limit"] = self.gateway.max_context_tokens
        cfg["history_mode"] = self.gateway.config["history_mode"]
        return cfg  # type: ignore[return-value]

    def _check_tool_choice(self, tool_choice: Any) -> bool:
        """Whether a forcing ``tool_choice`` is to be recorded as ignored (token-level sampling
        cannot enforce it); raises under ``on_tool_choice="reject"``. Records nothing."""
        if not forces_tool_choice(tool_choice):
            return False
        text = describe_tool_choice(tool_choice)
        if self.config.get("on_tool_choice") == "reject":
            raise ValueError(f"{text} cannot be enforced on token-level sampling (on_tool_choice='reject')")
        if not self._warned_tool_choice:
            self._warned_tool_choice = True
            warnings.warn(
                f"{text} is not enforced: sampling is unconstrained (recorded as tool_choice_ignored)",
                UserWarning,
                stacklevel=3,
            )
        return True

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

        Streams: on a backend with ``streams_tokens`` the answer's plain text arrives as text
        deltas while it is sampled (:mod:`strands_art.streaming`); reasoning and tool calls come
        whole at the end of the turn. ``cancel_signal`` (Strands' ``agent.cancel()``) is read
        every 20 ms: sampling stops, nothing is recorded for a turn still being sampled, and the
        stream ends without ``messageStop`` (Strands: ``stop_reason == "cancelled"``). Other
        extra keyword arguments (``model_state``, ``invocation_state``, ...) are accepted and
        ignored. A forcing ``tool_choice`` is handled as config ``on_tool_choice`` says.

        Raises:
            StrandsFormatError: a malformed message or tool spec (unknown role, content that is
                not a list of blocks, a tool spec without a name, an unknown block); nothing
                recorded. Image, document and video blocks are not errors: the model sees a
                placeholder text and the trajectory a ``non_text_content`` event.
            ContextWindowOverflowException: the prompt leaves no room to generate within
                ``context_window_limit`` or the backend's own context (vLLM's HTTP 400 "maximum
                context length", llama.cpp's ``exceed_context_size_error``); raised after one
                request, Strands' conversation manager then trims.
            ValueError: a forcing ``tool_choice`` with ``on_tool_choice="reject"``.
            ModelThrottledException: the backend is overloaded or unreachable
                (``BackendUnavailable``: HTTP 429/502/503/504, refused connection) or timed out
                (``BackendTimeout``); Strands retries these with backoff.
            BackendError: any other backend failure (a 4xx rejection, a malformed or impossible
                answer, ``InvalidSample``), raised as is: retrying would fail the same way.
        """
        self.tagger.watch(kwargs.get("invocation_state"))
        self.tagger.settle()
        conversion = self.conversion
        # validated, nothing recorded yet; the messages of the last recorded call are reused
        incoming = strands_request(messages, system_prompt, conversion.strands_known)
        tools = tool_specs_to_openai(tool_specs)
        ignore_tool_choice = self._check_tool_choice(tool_choice)
        chat = conversion.canonical(incoming)
        if ignore_tool_choice:
            conversion.tool_choice_ignored(tool_choice)
        overrides = dict(self.config.get("params") or {})
        cancel = kwargs.get("cancel_signal")
        session = self.session_id
        t0 = time.perf_counter()
        text_stream = TextStream(self.gateway, tools)
        result = None
        async for item in streamed_turn(
            partial(self._generate, session, chat, tools, overrides),
            text_stream,
            cancel,
            partial(self._abandon, session),
        ):
            if isinstance(item, Finished):
                result = item.result
            else:
                yield item
        if result is None:
            return  # cancelled while sampling: no messageStop, Strands reports the turn cancelled
        conversion.remember(result.assistant_message)
        conversion.strands_known.remember(messages, incoming, chat)
        turn = result.turn.index
        if is_summarizer_call(messages, tool_specs):
            self.tagger.tag(session, turn, SUMMARIZER, "a conversation manager's summarization call")
        latency = int((time.perf_counter() - t0) * 1000)
        self.tagger.produced(session, turn)
        if cancel is not None and cancel.is_set():  # the agent drops this response at its checkpoint
            self.tagger.tag(session, turn, DISCARDED, "cancelled: the cancel signal was set during the turn")
        streamed = text_stream.streamed
        if streamed and not text_stream.consistent(result.text):  # never expected: see streaming.py
            logger.error("streamed text %r is not a prefix of the turn's text", streamed[:80])
            self.gateway.record_event(
                session,
                "stream_mismatch",
                "streamed text is not a prefix of the turn's text",
                streamed=streamed,
            )
            yield {"contentBlockStop": {}}
            streamed = ""
        delivered = False
        try:
            for event in stream_events(
                result.text,
                result.reasoning,
                result.tool_calls,
                result.finish_reason,
                result.usage,
                latency,
                streamed=streamed,
            ):
                yield event
            delivered = True
        finally:
            if not delivered:
                self.tagger.tag(
                    session, turn, DISCARDED, "not_delivered: the agent stopped reading the response"
                )

    async def _generate(self, session: str, chat: list, tools: list | None, overrides: dict, on_tokens: Any):
        """One gateway turn, with gateway/backend errors mapped to Strands' exception types."""
        try:
            return await self.gateway.generate(
                session,
                chat,
                tools,
                overrides or None,
                max_context_tokens=self.config.get("context_window_limit"),
                on_tokens=on_tokens,
            )
        except ContextBudgetExceeded as exc:
            raise ContextWindowOverflowException(str(exc)) from exc
        except (BackendTimeout, BackendUnavailable) as exc:  # retryable: Strands backs off and retries
            raise ModelThrottledException(f"sampling backend failed: {exc}") from exc

    async def _abandon(self, session: str, task: asyncio.Future) -> None:
        """The agent was cancelled mid-turn: stop sampling. A sample still in flight is dropped
        (nothing recorded); one that already came back was recorded and is tagged discarded."""
        task.cancel()
        try:
            result = await task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - the turn is abandoned either way
            return
        self.tagger.produced(session, result.turn.index)
        self.tagger.tag(
            session, result.turn.index, DISCARDED, "cancelled: the cancel signal was set during the turn"
        )

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
