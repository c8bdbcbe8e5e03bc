"""What a model family is: everything family-specific the gateway and history code must not know.

A :class:`ModelFamily` says, for one family of chat templates (Llama 3.x, Mistral, DeepSeek, Qwen,
...):

- how an assistant turn ends: :attr:`ModelFamily.end_tokens` (every end token, e.g. Llama 3.1's
  ``<|eot_id|>`` *and* ``<|eom_id|>``); the renderer adds their IDs to the stop IDs, the parser
  strips them, and the linear closer logic treats a sampled end token as the template's own
  closer token (so ``<|eom_id|>`` is not followed by a second ``<|eot_id|>``);
- how tool calls and reasoning are written and parsed: :meth:`ModelFamily.parser`;
- how the template must be fed: :meth:`ModelFamily.prepare_messages` (e.g. tool-call arguments as
  a dict for templates that ``tojson`` them, as a string for templates that concatenate them),
  :meth:`ModelFamily.template_vars` (variables fixed when the renderer is built, e.g. the
  "Today Date" of Llama 3.1/3.2, so a rollout never sees the date change between renders),
  :meth:`ModelFamily.tools_instruction` (for templates that render tool calls but not the tool
  list, e.g. DeepSeek-R1);
- what ids tool calls get: :meth:`ModelFamily.call_id` (Mistral wants nine alphanumerics).

The family is chosen in one place, :func:`strands_art.families.select.family_for`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from strands_art.message_errors import parsed_arguments
from strands_art.toolcalls.base import (
    ParsedOutput,
    ToolCall,
    ToolCallParser,
    flag_unknown,
    resolve_tool_names,
    strip_end_markers,
)


class ModelFamily:
    """Base family: ChatML-like behaviour (the gateway's defaults before families existed).

    Subclasses override the class attributes and methods they need.

    Attributes:
        name: registry name (``"llama3"``, ``"mistral"``, ...).
        end_tokens: token strings that end an assistant turn (each that the tokenizer knows
            becomes a stop ID). Empty: only the probed closer token and EOS.
        closer_end_tokens: the subset a sampled turn may end with *in place of* the template's
            closer token (linear mode then appends only the rest of the closer).
        tools_in_template: the template renders the tool list itself (``tools=``).
        stop_tokens: when not None, exactly these tokens are the stop IDs (instead of the probed
            closer token + :attr:`end_tokens` + EOS): Harmony's ``<|end|>`` ends a message, not
            the turn, so only ``<|return|>`` and ``<|call|>`` stop sampling.
        other_turn_closers: texts besides the probed closer that may end an assistant turn in
            rendered history (Harmony: ``<|call|>``).
        end_only_texts: texts the template writes after the conversation's last message only and
            drops from that place once further messages follow (DeepSeek-R1 closes the tool
            results with ``<｜tool▁outputs▁end｜>`` only at the end). Linear mode accepts exactly
            this change to earlier text, at the end of the previous request's messages; any other
            change is ``template_prefix_unstable`` (docs/linear-history.md).
        inline_reasoning: the template writes reasoning inline as ``<think>R</think>`` before the
            content (Qwen3, DeepSeek-R1), so an answer echoed that way is the same message as one
            with a reasoning field (:func:`~strands_art.history.normalize.split_inline_reasoning`).
        call_list_closers: texts that close a list of calls once its last complete call is
            written (DeepSeek's ``<｜tool▁calls▁end｜>``, Mistral's ``]``): a turn cut at the token
            limit ends at its last complete call with this added (strands_art/toolcalls/cut.py).
        turn_start_tokens: tokens that open another author's turn (ChatML's ``<|im_start|>``,
            Llama 3's ``<|start_header_id|>``, DeepSeek's ``<｜User｜>``, Mistral's ``[INST]``).
            A sampled one ends the answer: the turn is cut before it and the tail recorded
            (:func:`strands_art.turn_cut.turn_start_cut`).
        turn_start_authors: texts that may follow a turn-start token inside one assistant turn
            (Harmony writes ``<|start|>assistant`` between its messages); any other text after
            it is another author's turn. Empty: every turn-start token is another author's.
    """

    name = "generic"
    inline_reasoning = False
    end_tokens: tuple[str, ...] = ()
    closer_end_tokens: tuple[str, ...] = ()
    tools_in_template = True
    stop_tokens: tuple[str, ...] | None = None
    other_turn_closers: tuple[str, ...] = ()
    end_only_texts: tuple[str, ...] = ()
    call_list_closers: tuple[str, ...] = ()
    turn_start_tokens: tuple[str, ...] = ("<|im_start|>",)
    turn_start_authors: tuple[str, ...] = ()

    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, add_generation_prompt: bool
    ) -> str | None:
        """The prompt text rendered by the family's own renderer, or None to use the Jinja template
        (the default). Raises ValueError/TypeError on messages it cannot render."""
        return None

    def detect(self, chat_template: str, tokenizer: Any) -> bool:
        """True when ``chat_template`` (and the tokenizer's vocabulary) belong to this family."""
        return False

    def bind(self, chat_template: str, tokenizer: Any) -> None:
        """Read template variants this family distinguishes (called once, after the choice)."""

    def configure(self, chat_template_kwargs: dict[str, Any]) -> None:
        """Take settings from the user's ``chat_template_kwargs`` (for families that do not render
        with the Jinja template, e.g. Harmony's ``reasoning_effort``); default: nothing."""

    def parser(self, chat_template: str, end_markers: Sequence[str]) -> ToolCallParser | None:
        """The output parser for this family's tool-call format, or None (no tool calls)."""
        from strands_art.toolcalls.select import parser_for_template

        return parser_for_template(chat_template, end_markers)

    def template_vars(self) -> dict[str, Any]:
        """Template variables fixed when the renderer is built (before the user's kwargs)."""
        return {}

    def prepare_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Messages as this family's template expects them (default: unchanged, not copied)."""
        return messages

    def tools_instruction(self, tools: Sequence[dict]) -> str | None:
        """System-prompt text offering ``tools`` when :attr:`tools_in_template` is False."""
        return None

    def call_id(self, rollout_id: str, turn: int, k: int, sampled: str = "") -> str:
        """The id of call ``k`` of turn ``turn``: ``call_<10 hex of SHA-256(rollout id)>_<turn>_<k>``,
        unique within the rollout, different between rollouts (ids that share a prefix, such as
        ``rollout-1`` and ``rollout-2``, included) and the same on every replay.

        ``sampled`` is the id the model wrote, when its format has one.
        """
        digest = hashlib.sha256(rollout_id.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        return f"call_{digest}_{turn}_{k}"

    def __repr__(self) -> str:
        return f"<ModelFamily {self.name}>"


def alnum_id(rollout_id: str, turn: int, k: int, length: int = 9) -> str:
    """A deterministic ``length``-character alphanumeric id for call ``k`` of ``turn``.

    Derived from a SHA-256 of (rollout, turn, k), so it is stable across replays and unique
    within a rollout with overwhelming probability (62**9 values).
    """
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    n = int.from_bytes(hashlib.sha256(f"{rollout_id}/{turn}/{k}".encode()).digest()[:12], "big")
    out = []
    for _ in range(length):
        n, r = divmod(n, len(alphabet))
        out.append(alphabet[r])
    return "".join(out)


def arguments_dict(args: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict (a JSON string is decoded; normalization validated it)."""
    return parsed_arguments(args)


def with_arguments(messages: list[dict[str, Any]], convert: Any) -> list[dict[str, Any]]:
    """Copies of ``messages`` whose assistant tool-call arguments went through ``convert``;
    messages without tool calls are shared, not copied."""
    out = []
    for m in messages:
        calls = m.get("tool_calls")
        if not calls:
            out.append(m)
            continue
        new_calls = []
        for tc in calls:
            fn = tc["function"]
            new_calls.append({**tc, "function": {**fn, "arguments": convert(fn.get("arguments"))}})
        out.append({**m, "tool_calls": new_calls})
    return out


class FamilyParser:
    """What every family's :class:`~strands_art.toolcalls.base.ToolCallParser` does before its own
    format: resolve the offered tool names (``tool_names``, else the names in ``tools``, else None:
    no check) and cut the end markers off the sampled text (the caller's ``end_markers`` plus the
    family's :attr:`end_tokens`, each once, in that order); :meth:`parse_content` does the rest.
    A family whose parser reads something other than text (Harmony's token parser) keeps
    :attr:`end_tokens` empty: nothing is cut.
    """

    name: str = ""
    #: the family's own end tokens, always cut (besides the caller's ``end_markers``)
    end_tokens: tuple[str, ...] = ()

    def __init__(self, end_markers: Sequence[str] = ()) -> None:
        self.end_markers = tuple(dict.fromkeys((*end_markers, *self.end_tokens)))

    def parse(
        self,
        text: str,
        tool_names: set[str] | None = None,
        *,
        tools: Sequence[dict] | None = None,
        think_open: bool = False,
    ) -> ParsedOutput:
        """See :class:`~strands_art.toolcalls.base.ToolCallParser`. Never raises on model output."""
        names = resolve_tool_names(tool_names, tools)
        return self.parse_content(strip_end_markers(text, self.end_markers), names, think_open)

    def parse_content(self, content: str, names: set[str] | None, think_open: bool) -> ParsedOutput:
        """Parse ``content`` (the sampled text, end markers cut) offering ``names`` (None: any)."""
        raise NotImplementedError


def finish(
    text: str,
    reasoning: str | None,
    calls: list[ToolCall],
    tool_names: set[str] | None,
    problems: list[str] | None = None,
) -> ParsedOutput:
    """A well-formed :class:`ParsedOutput` with unknown tools flagged."""
    out = ParsedOutput(text=text, reasoning=reasoning, tool_calls=calls, problems=list(problems or []))
    return flag_unknown(out, tool_names)


def ill_formed(content: str, reasoning: str | None, problem: str, problems: list[str] | None = None):
    """An ill-formed :class:`ParsedOutput`: the whole content stays text, no calls."""
    return ParsedOutput(
        text=content, reasoning=reasoning, ill_formed=True, problems=[*(problems or []), problem]
    )
