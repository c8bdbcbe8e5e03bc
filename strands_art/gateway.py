"""The in-process rollout gateway: messages in, token-exact training rows out.

One :meth:`RolloutGateway.generate` per turn: (1) the session's history policy turns the chat
messages into prompt token IDs (tree or linear, :mod:`strands_art.history`); (2) the sampling
backend samples from those IDs; (3) the output is parsed into text, reasoning and tool calls
(:mod:`strands_art.turn_parse`; a turn cut at the token limit ends at its last complete call,
:mod:`strands_art.turn_cut`); (4) the capture extends or forks a row
(:mod:`strands_art.capture`). The gateway knows nothing of Strands or HTTP: the fronts hand it
OpenAI-format messages (:mod:`strands_art.conversion`).

Over 450 lines as one job: the session table and the one ``generate()`` path every front calls
(its steps live in the modules named above), beside the public errors and ``GatewayConfig``'s
documented keys.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal, TypedDict

from strands_art.backends.base import (
    BackendContextOverflow,
    SampleResult,
    SamplingBackend,
    SamplingParams,
    check_sample,
    turn_seed,
)
from strands_art.capture import RowCapture
from strands_art.context_length import default_context_tokens
from strands_art.history.base import HistoryPolicy
from strands_art.history.known import KnownMessages
from strands_art.history.normalize import MessageError, normalize_message, tools_key
from strands_art.history.pairing import order_tool_results
from strands_art.history.tree import TreeHistory, explain_fork
from strands_art.render import ChatRenderer
from strands_art.render_inputs import render_inputs
from strands_art.render_system import AS_USER, system_as_user_events
from strands_art.toolcalls.base import ParsedOutput
from strands_art.trajectory import Trajectory
from strands_art.turn_cut import (
    TRUNCATED,
    mark_tail,
    record_cut,
    tag_row_turn,
    truncation_limit,
    turn_start_cut,
)
from strands_art.turn_parse import GenerateResult, parse_output, policy_version, read_turn

logger = logging.getLogger(__name__)

#: the request fields that cap a turn's sampled tokens (Chat Completions' two, Anthropic's
#: required one, the Responses API's, ARTModel's ``params``)
OUTPUT_CAPS = frozenset({"max_tokens", "max_completion_tokens", "max_output_tokens", "max_new_tokens"})


def within_output_limit(name: str, value: Any, limit: int) -> bool:
    """True for an output cap at or above the trainer's ``limit`` (``max_new_tokens``): a turn
    never samples more than the trainer's limit, so the client's cap already holds and is no
    sampling override. A lower cap would cut turns short: an override like any other."""
    return name in OUTPUT_CAPS and type(value) is int and value >= limit


class GatewayError(RuntimeError):
    """Base class of the gateway's own errors."""


class UnknownSession(GatewayError, KeyError):
    """No open session has this rollout id."""


class SessionClosed(GatewayError):
    """The session was closed while one of its turns was in flight (rendering or sampling).

    Nothing is recorded: the trajectory :meth:`RolloutGateway.close_session` returned stays as
    it was handed out. The HTTP front maps it to 409 ``session_closed``.
    """


class ContextBudgetExceeded(GatewayError):
    """The prompt leaves no room to generate (``prompt_tokens >= max_context_tokens``).

    Nothing is recorded. The Strands provider maps it to ``ContextWindowOverflowException``.
    """

    def __init__(self, prompt_tokens: int, max_context_tokens: int) -> None:
        super().__init__(
            f"prompt of {prompt_tokens} tokens leaves no room to generate within the context "
            f"budget of {max_context_tokens} tokens"
        )
        self.prompt_tokens = prompt_tokens
        self.max_context_tokens = max_context_tokens


class SamplingOverrideRejected(GatewayError):
    """The agent asked for sampling parameters the trainer owns and the gateway rejects overrides."""


class GatewayConfig(TypedDict, total=False):
    """Gateway configuration.

    Attributes:
        history_mode: "tree" (default) or "linear" (see docs/linear-history.md).
        on_nonlinear: linear mode's divergence policy: "reset" (default), "error", "disable".
        sampling: default SamplingParams for new sessions (the trainer's).
        on_sampling_override: "ignore" (default: logged warning + event) or "reject"
            (raise SamplingOverrideRejected) when a request carries its own sampling parameters.
        max_context_tokens: context budget (prompt + generated tokens); default: the model's
            own context length (:func:`strands_art.context_length.default_context_tokens`: the
            backend's ``max_context_tokens`` (llama.cpp's slot, vLLM's ``max_model_len``, the
            transformers model's positions), else the model's ``config.json``, else the
            tokenizer's declared ``model_max_length``). ``gateway.context_source`` says which.
        chat_template / chat_template_kwargs: override the tokenizer's template / pass variables.
        family: model family name (strands_art/families: "llama3", "mistral", "deepseek",
            "qwen", "generic"); default: detected from the chat template.
        reasoning_omitted: linear mode, an echoed assistant message without the reasoning the
            model sampled: "heal" (default; continue the saved history) or "reset" (a divergence
            with reason ``reasoning_omitted``). See docs/linear-history.md.
        special_tokens_in_content: "text" (default: request text that spells a control token
            is tokenized as text) or "special" (the old behaviour); see :class:`ChatRenderer`.
        measure_drift: linear mode also reports each healed prompt's token edit distance from a
            plain re-render (one extra render + tokenization per turn; off by default).
    """

    history_mode: Literal["tree", "linear"]
    on_nonlinear: Literal["reset", "error", "disable"]
    sampling: SamplingParams
    on_sampling_override: Literal["ignore", "reject"]
    max_context_tokens: int
    chat_template: str
    chat_template_kwargs: dict[str, Any]
    family: str
    measure_drift: bool
    reasoning_omitted: Literal["heal", "reset"]
    special_tokens_in_content: Literal["text", "special"]


@dataclass
class _Session:
    trajectory: Trajectory
    sampling: SamplingParams
    history: HistoryPolicy
    capture: RowCapture
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    tools_key: str | None = None
    #: the last recorded request's messages and answer, normalized: re-sent ones are not redone
    known: KnownMessages = field(default_factory=KnownMessages)


def reorder_events(reordered: list[int], seen: int) -> list[dict[str, Any]]:
    """A ``tool_results_reordered`` event for each assistant message (index) whose tool results
    :func:`~strands_art.history.pairing.order_tool_results` put in call order, when it is new in
    this request (index >= ``seen``: not one of the previous turn's messages, reported then)."""
    return [
        {
            "kind": "tool_results_reordered",
            "reason": "tool results were sent in another order than the calls; rendered in call order "
            "(templates pair results with calls by position)",
            "message": i,
        }
        for i in reordered
        if i >= seen
    ]


def refuse_prefill(messages: list[dict[str, Any]]) -> None:
    """Refuse a conversation that ends in an assistant message (a *prefill*: the harness starts
    the answer and wants it continued).

    Rendering it with a generation prompt would close the prefill as a finished turn and open a
    second, empty assistant turn: a shape the model never saw, silently recorded as a row. The
    gateway does not continue partial assistant messages, so it says so before anything is
    rendered, sampled or recorded (the HTTP front answers 400, the Strands provider raises).

    Raises:
        MessageError: naming the last message.
    """
    if messages and messages[-1].get("role") == "assistant":
        raise MessageError(
            len(messages) - 1,
            "the conversation ends in an assistant message (a prefill); continuing a partial "
            "assistant message is not supported: end the request with a user or tool message "
            "(e.g. put the answer's required start in the instructions)",
        )


class RolloutGateway:
    """Sessions keyed by rollout id; one :meth:`generate` per turn; token-exact capture.

    Args:
        tokenizer: a tokenizer alias ("qwen3", "smollm2"), a local directory, or a
            ``transformers`` tokenizer object.
        backend: a :class:`~strands_art.backends.base.SamplingBackend`.
        config: :class:`GatewayConfig` keys (``history_mode`` ``"tree"`` or ``"linear"``, default
            ``"tree"``; ``max_context_tokens`` in tokens, default the model's context window).

    Raises:
        TypeError: an unknown config key.
        ValueError: an invalid ``history_mode``; an unknown tokenizer alias (from the registry).
    """

    def __init__(self, tokenizer: Any, backend: SamplingBackend, **config: Any) -> None:
        unknown = set(config) - set(GatewayConfig.__annotations__)
        if unknown:
            raise TypeError(f"unknown gateway config keys: {sorted(unknown)}")
        tokenizer_name = tokenizer if isinstance(tokenizer, str) else None
        if isinstance(tokenizer, str):
            from strands_art.registry import family_of, load_tokenizer

            config.setdefault("family", family_of(tokenizer))
            tokenizer = load_tokenizer(tokenizer)
        self.config: GatewayConfig = {
            "history_mode": "tree",
            "on_nonlinear": "reset",
            "sampling": SamplingParams(),
            "on_sampling_override": "ignore",
        }
        self.config.update(config)  # type: ignore[typeddict-item]
        if self.config["history_mode"] not in ("tree", "linear"):
            raise ValueError(f"history_mode must be 'tree' or 'linear', got {self.config['history_mode']!r}")
        self.renderer = ChatRenderer(
            tokenizer,
            self.config.get("chat_template"),
            self.config.get("chat_template_kwargs"),
            family=self.config.get("family"),
            special_tokens_in_content=self.config.get("special_tokens_in_content", "text"),
        )
        self.backend = backend
        if self.config.get("max_context_tokens"):
            self.max_context_tokens, self.context_source = int(self.config["max_context_tokens"]), "config"
        else:
            self.max_context_tokens, self.context_source = default_context_tokens(
                backend, tokenizer, tokenizer_name
            )
        self._sessions: dict[str, _Session] = {}
        self._render_inputs: dict[str, Any] | None = None

    # ------------------------------------------------------------------ sessions
    def open_session(
        self,
        rollout_id: str | None = None,
        group_id: str | None = None,
        sampling: SamplingParams | None = None,
    ) -> str:
        """Start a rollout; returns its id (a new uuid4 hex if none given). Idempotent per id."""
        rollout_id = rollout_id or uuid.uuid4().hex
        if rollout_id not in self._sessions:
            if self._render_inputs is None:  # once per gateway: the renderer does not change
                self._render_inputs = render_inputs(self.renderer)
            self._sessions[rollout_id] = _Session(
                trajectory=Trajectory(
                    rollout_id=rollout_id,
                    group_id=group_id,
                    # every input of a render, so replay --from-run rebuilds the rows on another day
                    metadata={"render": copy.deepcopy(self._render_inputs)},
                ),
                sampling=sampling or self.config["sampling"],
                history=self._make_history(),
                capture=RowCapture(rollout_id, group_id),
            )
        return rollout_id

    def _make_history(self) -> HistoryPolicy:
        if self.config["history_mode"] == "linear":
            from strands_art.history.linear import LinearHistory

            return LinearHistory(
                self.renderer,
                on_nonlinear=self.config["on_nonlinear"],
                measure_drift=bool(self.config.get("measure_drift", False)),
                reasoning_omitted=self.config.get("reasoning_omitted", "heal"),
            )
        return TreeHistory(self.renderer)

    def is_open(self, rollout_id: str) -> bool:
        """Whether a session with this rollout id is open."""
        return rollout_id in self._sessions

    def set_sampling(self, rollout_id: str, sampling: SamplingParams) -> None:
        """Set a session's sampling parameters (the trainer's call)."""
        self._session(rollout_id).sampling = sampling

    def trajectory(self, rollout_id: str) -> Trajectory:
        """The session's trajectory so far (rows carry the policy counters in metadata)."""
        s = self._session(rollout_id)
        counters = s.history.counters()
        mode = s.trajectory.metadata.get("logprobs_mode")
        for row in s.capture.rows:
            row.metadata["history"] = dict(counters)
            if mode is not None:  # how the backend's logprobs were taken (the trainer reads it)
                row.metadata["logprobs_mode"] = mode
        s.trajectory.rows = s.capture.rows
        return s.trajectory

    def close_session(self, rollout_id: str, reward: float | None = None) -> Trajectory:
        """End a rollout and return its trajectory (reward attached if given)."""
        traj = self.trajectory(rollout_id)
        if reward is not None:
            traj.set_reward(reward)
        del self._sessions[rollout_id]
        return traj

    def record_event(self, rollout_id: str, kind: str, reason: str, **data: Any) -> None:
        """Record an event (e.g. a harness rewrite detected by the provider) on the trajectory."""
        s = self._session(rollout_id)
        s.trajectory.events.append({"turn": len(s.trajectory.turns), "kind": kind, "reason": reason, **data})

    def tag_turn(self, rollout_id: str, turn: int, tag: str, reason: str) -> None:
        """Tag a recorded turn (e.g. ``"discarded"``: the harness threw its response away).

        The tag goes on ``Turn.tags``, on the row holding the turn
        (``row.metadata["turn_tags"][str(turn)]``) and into the events as ``turn_tagged``.
        Idempotent per (turn, tag). The trainer reads the row tags (GRPOConfig.exclude_turn_tags).

        Raises:
            UnknownSession: no open session; IndexError: no such turn.
        """
        s = self._session(rollout_id)
        if not 0 <= turn < len(s.trajectory.turns):
            raise IndexError(f"rollout {rollout_id!r} has no turn {turn}")
        recorded = s.trajectory.turns[turn]
        if tag in recorded.tags:
            return
        tag_row_turn(s.capture.rows[recorded.row], recorded, tag)
        s.trajectory.events.append({"turn": turn, "kind": "turn_tagged", "tag": tag, "reason": reason})

    def _session(self, rollout_id: str) -> _Session:
        try:
            return self._sessions[rollout_id]
        except KeyError:
            raise UnknownSession(f"no open session {rollout_id!r}; call open_session() first") from None

    # ------------------------------------------------------------------ one turn
    async def generate(
        self,
        rollout_id: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        sampling_overrides: dict[str, Any] | None = None,
        *,
        deliver: Callable[[GenerateResult], Awaitable[None]] | None = None,
        max_context_tokens: int | None = None,
        on_tokens: Callable[[list[int], list[int]], None] | None = None,
    ) -> GenerateResult:
        """Run one turn: render → tokenize → sample → capture → parse.

        Args:
            messages: OpenAI-format chat messages as the harness sent them.
            tools: OpenAI-format tool specs (``{"type": "function", "function": {...}}``).
            sampling_overrides: what the agent asked for; ignored with a warning or rejected
                (config ``on_sampling_override``): sampling belongs to the trainer.
            deliver: optional; awaited with the parsed result *before* the turn is recorded
                (the HTTP front writes its response here). If it raises or is cancelled (the
                client went away), nothing is recorded and the session is left as it was.
                Without it, a sample that came back is recorded even if the caller is
                cancelled meanwhile.
            max_context_tokens: a tighter context budget for this call (the caller's, e.g. a
                Strands ``context_window_limit``); the gateway's own budget still caps it.
            on_tokens: optional streaming callback ``(prompt_ids, new_output_ids)``, called as
                the backend produces tokens (backends with ``streams_tokens``; possibly from a
                backend thread). What is recorded is still the backend's final result; a turn
                cancelled while sampling records nothing. See :meth:`preview`.

        Raises:
            MessageError / TemplateError: bad input; nothing recorded. A conversation that ends
                in an assistant message (a prefill) is refused (:func:`refuse_prefill`).
            ContextBudgetExceeded: no room to generate; nothing recorded.
            BackendError / BackendTimeout: the backend failed; nothing recorded.
            InvalidSample (a BackendError): the backend's answer had a token ID outside the
                vocabulary, a logprob that is not finite and <= 0, or more tokens than asked
                for; nothing recorded (the provider reports it like any backend failure).
            HistoryDivergence: linear mode with ``on_nonlinear="error"``.
            SessionClosed: the session was closed while this turn ran; nothing recorded.
        """
        s = self._session(rollout_id)
        async with s.lock:
            t0 = time.perf_counter()
            norm = s.known.normalize(messages)
            refuse_prefill(norm)
            self._check_overrides(s, sampling_overrides)
            norm, reordered = order_tool_results(norm)
            plan = await s.history.plan(norm, tools)
            seen = len(s.trajectory.turns[-1].messages) if s.trajectory.turns else 0
            plan.events.extend(reorder_events(reordered, seen))
            if self.renderer.mid_system == AS_USER:
                plan.events.extend(system_as_user_events(norm, seen))
            budget = min(self.max_context_tokens, max_context_tokens or self.max_context_tokens)
            room = budget - len(plan)
            if room <= 0:
                raise ContextBudgetExceeded(len(plan), budget)
            prompt_ids = plan.prompt_ids
            t_prompt = time.perf_counter()
            params = replace(
                s.sampling,
                max_new_tokens=min(s.sampling.max_new_tokens, room),
                stop_token_ids=tuple(
                    dict.fromkeys(s.sampling.stop_token_ids + self.renderer.end_of_turn_ids)
                ),
                # per-turn, per-rollout seed: the random stream does not restart at every turn,
                # and the rollouts of a group opened with one seed do not sample alike
                seed=None
                if s.sampling.seed is None
                else turn_seed(s.sampling.seed, len(s.trajectory.turns), rollout_id),
            )
            plan.max_new_tokens = params.max_new_tokens
            try:
                if on_tokens is not None and getattr(self.backend, "streams_tokens", False):
                    sample: SampleResult = await self.backend.sample(
                        prompt_ids, params, on_tokens=partial(on_tokens, prompt_ids)
                    )
                else:
                    sample = await self.backend.sample(prompt_ids, params)
            except BackendContextOverflow as exc:  # the backend's window is smaller than the budget
                raise ContextBudgetExceeded(exc.prompt_tokens, exc.context_tokens) from exc
            check_sample(sample, self.renderer.vocab_size, params.max_new_tokens)  # before recording
            policy_version(sample)  # a bad version is refused before anything is recorded
            t_sample = time.perf_counter()
            self._check_still_open(rollout_id, s)
            if deliver is not None:
                await plan.finish(self.renderer.encode)
                self._check_still_open(rollout_id, s)
                result = self._result(s, norm, tools, plan, sample)
                await deliver(result)
                if self._sessions.get(rollout_id) is not s:  # closed while the response was written
                    logger.warning(
                        "rollout %s was closed while a turn was delivered; not recorded", rollout_id
                    )
                    return result
                self._commit(s, plan, sample, result, t0, t_prompt, t_sample)
                return result
            recorded = False
            try:
                await plan.finish(self.renderer.encode)  # metrics that did not need to delay the prompt
            finally:  # a sample that came back is recorded even if we are cancelled meanwhile
                if self._sessions.get(rollout_id) is s:
                    result = self._record(s, norm, tools, plan, sample, t0, t_prompt, t_sample)
                    recorded = True
            if not recorded:
                self._check_still_open(rollout_id, s)
            return result

    def _check_still_open(self, rollout_id: str, s: _Session) -> None:
        """Raise SessionClosed when ``s`` is no longer the open session of ``rollout_id``."""
        if self._sessions.get(rollout_id) is not s:
            raise SessionClosed(
                f"rollout {rollout_id!r} was closed while this turn was sampled; the turn was not recorded"
            )

    def _check_overrides(self, s: _Session, overrides: dict[str, Any] | None) -> None:
        limit = s.sampling.max_new_tokens
        overrides = {
            k: v
            for k, v in (overrides or {}).items()
            if v is not None and not within_output_limit(k, v, limit)
        }
        if not overrides:
            return
        if self.config["on_sampling_override"] == "reject":
            raise SamplingOverrideRejected(
                f"sampling parameters {sorted(overrides)} are set by the trainer, not the agent"
            )
        logger.warning("ignoring agent sampling overrides %s (the trainer owns sampling)", sorted(overrides))
        s.trajectory.events.append(
            {
                "turn": len(s.trajectory.turns),
                "kind": "sampling_override_ignored",
                "reason": str(sorted(overrides)),
            }
        )

    def _record(self, s, norm, tools, plan, sample: SampleResult, t0, t_prompt, t_sample) -> GenerateResult:
        result = self._result(s, norm, tools, plan, sample)
        self._commit(s, plan, sample, result, t0, t_prompt, t_sample)
        return result

    def _result(self, s, norm, tools, plan, sample: SampleResult) -> GenerateResult:
        """The parsed turn; changes nothing in the session (see :meth:`_commit`)."""
        plan.finish_now(self.renderer.encode_sync)  # metrics finish() did not get to (cancelled)
        traj = s.trajectory
        return read_turn(self.renderer, traj.rollout_id, len(traj.turns), norm, tools, plan, sample)

    def _commit(self, s, plan, sample: SampleResult, result: GenerateResult, t0, t_prompt, t_sample) -> None:
        """Record the turn of :meth:`_result`: row, events, metadata, history, timings."""
        traj, turn = s.trajectory, result.turn
        index = turn.index
        parent = s.capture.find_parent(turn.prompt_ids)
        previous = s.capture.last_row
        for ev in plan.events:
            traj.events.append({"turn": index, **ev})
        if parent is None and previous is not None and not plan.explains_fork:
            info = explain_fork(self.renderer, previous.input_ids, turn.prompt_ids, turn.messages, turn.tools)
            traj.events.append({"turn": index, "kind": "fork", **info})
        tk = tools_key(turn.tools)
        if s.tools_key is not None and tk != s.tools_key:
            traj.events.append({"turn": index, "kind": "tools_changed", "reason": "the tool specs changed"})
        s.tools_key = tk
        s.capture.add(turn, parent)
        if result.ill_formed or result.problems:
            traj.metadata.setdefault("ill_formed_turns", []).append(
                {"turn": index, "problems": list(result.problems)}
            )
        row = s.capture.rows[turn.row]
        if sample.finish_reason == "length":
            traj.metadata.setdefault("truncated_turns", []).append(index)
            if result.tail_start is None:  # no complete call to end at: the whole turn is cut off
                tag_row_turn(row, turn, TRUNCATED)
                limit = truncation_limit(len(turn.output_ids), s.sampling.max_new_tokens, plan.max_new_tokens)
                traj.events.append(
                    {
                        "turn": index,
                        "kind": "turn_tagged",
                        "tag": TRUNCATED,
                        "reason": "length",
                        "limit": limit,
                    }
                )
        if result.tail_start is not None:  # cut after complete calls (or a turn start): mark the tail
            n_out, n_calls = len(turn.output_ids), len(result.tool_calls)
            record_cut(
                traj, index, result.tail_start, n_out, n_calls, sample.finish_reason, result.tail_problems,
                **result.cut_kind,
            )  # fmt: skip
            mark_tail(row, index, [result.tail_start, n_out])
        if "logprobs_mode" in sample.info:  # how the backend took its logprobs (the trainer reads it)
            traj.metadata["logprobs_mode"] = sample.info["logprobs_mode"]
        if result.recovered:
            traj.metadata.setdefault("recovered_calls", []).append(
                {"turn": index, "how": list(result.recovered)}
            )
        s.history.commit(plan, turn.output_ids, sample.finish_reason, result.assistant_message)
        s.known.remember(turn.messages + [normalize_message(len(turn.messages), result.assistant_message)])
        traj.turns.append(turn)
        t_end = time.perf_counter()
        turn.timings = {
            "prompt": t_prompt - t0,
            "sample": t_sample - t_prompt,
            "record": t_end - t_sample,
            "total": t_end - t0,
        }

    def preview(
        self, prompt_ids: list[int], output_ids: list[int], tools: list[dict[str, Any]] | None
    ) -> ParsedOutput:
        """Parse a (partial) output as a turn's output would be (text, reasoning, tool calls);
        records nothing. For streaming: see :mod:`strands_art.streaming`. An output that opened
        another author's turn is read up to that token (:func:`~strands_art.turn_cut.turn_start_cut`),
        as the recorded turn will be."""
        start = turn_start_cut(self.renderer, output_ids)
        if start is not None:
            output_ids = output_ids[: start[0]]
        return parse_output(self.renderer, prompt_ids, output_ids, tools)
