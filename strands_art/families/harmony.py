"""GPT-OSS through Harmony: rendered and parsed by ``openai-harmony``, OpenAI's own library.

Format (``HarmonyEncodingName.HARMONY_GPT_OSS``)::

    <|start|>system<|message|>... Current date: 2026-11-30 ...<|end|>
    <|start|>developer<|message|># Instructions\\n\\nSYSTEM PROMPT\\n\\n# Tools ...<|end|>
    <|start|>user<|message|>USER<|end|><|start|>assistant
    <|channel|>analysis<|message|>REASONING<|end|>
    <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
    <|start|>functions.NAME to=assistant<|channel|>commentary<|message|>RESULT<|end|>
    <|start|>assistant<|channel|>final<|message|>ANSWER<|return|>

- Rendering: the family converts OpenAI-format messages to a Harmony ``Conversation`` (leading
  system messages → developer instructions, a system message later in the conversation → a
  developer message at its position (strands_art/render_system.py), tool specs → the ``functions`` namespace, ``reasoning_content``
  → an ``analysis`` message, tool calls → ``commentary`` messages to ``functions.NAME`` with
  ``<|constrain|>json``, tool results → messages from ``functions.NAME``, content → ``final``)
  and renders it with ``render_conversation_for_completion``; the text is the decoded tokens.
  The system message's "Current date" is fixed when the renderer is built ("%Y-%m-%d");
  ``chat_template_kwargs`` may set ``current_date`` and ``reasoning_effort`` ("low", "medium"
  (default), "high").
- Stop tokens: ``<|return|>`` and ``<|call|>`` (``stop_tokens_for_assistant_actions``) and
  ``<|endoftext|>``, which GPT-OSS's ``generation_config.json`` lists as an end token too
  (``eos_token_id: [200002, 199999, 200012]``); ``<|end|>`` ends a message inside the turn (the
  analysis), not the turn. A turn sampled to ``<|endoftext|>`` gets the closer ``<|end|>`` after
  it in linear history.
- End tokens for parsing and closers: ``<|return|>``, ``<|call|>``, ``<|end|>``. Harmony renders
  history differently from what was sampled: a final answer's ``<|return|>`` becomes ``<|end|>``
  and analysis messages before a final answer are dropped. Linear mode keeps the sampled tokens
  (analysis, commentary and the real end token); a tool-call turn ends in history with
  ``<|call|>`` (:attr:`HarmonyFamily.other_turn_closers`), so the boundary search knows both.
- Parsing: ``parse_messages_from_completion_tokens`` on the sampled tokens: analysis →
  reasoning, final (and commentary without recipient) → text, commentary to ``functions.NAME`` →
  a tool call whose arguments are the JSON text the model wrote.

The vocabulary file harmony needs (``o200k_base.tiktoken``) is rebuilt offline by
:mod:`strands_art.families.sources`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from strands_art.families.base import FamilyParser, ModelFamily, finish, ill_formed
from strands_art.toolcalls import strictjson
from strands_art.toolcalls.base import ParsedOutput, ToolCall

RETURN, CALL, END = "<|return|>", "<|call|>", "<|end|>"
#: the model's other end token (GPT-OSS generation_config.json: eos_token_id [200002, 199999, 200012])
EOT = "<|endoftext|>"


def harmony_encoding() -> Any:
    """The GPT-OSS Harmony encoding (the vocabulary file prepared offline first)."""
    from openai_harmony import HarmonyEncodingName, load_harmony_encoding

    from strands_art.families.sources import ensure_harmony_vocab

    ensure_harmony_vocab()
    return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)


def to_harmony(
    messages: list[dict[str, Any]], tools: Sequence[dict] | None, date: str, reasoning_effort: str = "medium"
) -> Any:
    """A Harmony ``Conversation`` for OpenAI-format ``messages`` and ``tools`` (see the module docstring).

    Raises:
        ValueError: a tool result whose ``tool_call_id`` names no earlier call and that does not
            answer one of the latest assistant's calls by position (its sender would be unknown),
            or an unknown role.
    """
    from openai_harmony import (
        Author,
        Conversation,
        DeveloperContent,
        Message,
        ReasoningEffort,
        Role,
        SystemContent,
        ToolDescription,
    )

    system = SystemContent.new().with_conversation_start_date(date)
    system = system.with_reasoning_effort(ReasoningEffort(reasoning_effort.capitalize()))
    out = [Message.from_role_and_content(Role.SYSTEM, system)]
    lead = next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))
    instructions = "\n\n".join(m.get("content") or "" for m in messages[:lead])
    if instructions or tools:
        dev = DeveloperContent.new()
        if instructions:
            dev = dev.with_instructions(instructions)
        if tools:
            specs = [t.get("function", t) for t in tools]
            dev = dev.with_function_tools(
                [
                    ToolDescription.new(f["name"], f.get("description", ""), parameters=f.get("parameters"))
                    for f in specs
                ]
            )
        out.append(Message.from_role_and_content(Role.DEVELOPER, dev))
    names: dict[str, str] = {}
    last_calls: list[str] = []  # names of the latest assistant's calls, answered in order
    answered = 0
    for i, m in enumerate(messages):
        role = m["role"]
        if role == "system":  # the leading ones are the instructions; a later one stays where it is
            if i >= lead:
                out.append(Message.from_role_and_content(Role.DEVELOPER, m.get("content") or ""))
            continue
        if role == "user":
            out.append(Message.from_role_and_content(Role.USER, m.get("content") or ""))
        elif role == "assistant":
            if m.get("reasoning_content"):
                out.append(
                    Message.from_role_and_content(Role.ASSISTANT, m["reasoning_content"]).with_channel(
                        "analysis"
                    )
                )
            calls = m.get("tool_calls") or []
            last_calls, answered = [tc["function"]["name"] for tc in calls], 0
            if m.get("content"):
                channel = "commentary" if calls else "final"
                out.append(Message.from_role_and_content(Role.ASSISTANT, m["content"]).with_channel(channel))
            for tc in calls:
                fn = tc["function"]
                args = fn["arguments"] if isinstance(fn["arguments"], str) else json.dumps(fn["arguments"])
                names[tc.get("id", "")] = fn["name"]
                msg = Message.from_role_and_content(Role.ASSISTANT, args).with_channel("commentary")
                out.append(
                    msg.with_recipient(f"functions.{fn['name']}").with_content_type("<|constrain|>json")
                )
        elif role == "tool":
            name = m.get("name") or names.get(m.get("tool_call_id", ""))
            if not name and answered < len(last_calls):  # ids rewritten by the harness: by position
                name = last_calls[answered]
            if not name:
                raise ValueError(f"message {i}: tool result for unknown call id {m.get('tool_call_id')!r}")
            answered += 1
            author = Author.new(Role.TOOL, f"functions.{name}")
            msg = Message.from_author_and_content(author, m.get("content") or "")
            out.append(msg.with_channel("commentary").with_recipient("assistant"))
        else:
            raise ValueError(f"message {i}: role {role!r} is not supported by Harmony")
    return Conversation.from_messages(out)


class HarmonyParser(FamilyParser):
    """Parser for sampled Harmony messages (see the module docstring). Nothing is cut from the
    text: ``openai-harmony`` reads the end tokens itself."""

    name = "harmony"

    def __init__(self, encoding: Any) -> None:
        super().__init__()
        self.encoding = encoding

    def parse_content(self, text: str, names: set[str] | None, think_open: bool) -> ParsedOutput:
        from openai_harmony import HarmonyError, Role

        try:
            tokens = self.encoding.encode(text, allowed_special="all")
            messages = self.encoding.parse_messages_from_completion_tokens(tokens, Role.ASSISTANT)
        except HarmonyError as exc:
            return ill_formed(text, None, f"Harmony could not parse the output: {exc}")
        reasoning: list[str] = []
        content: list[str] = []
        calls: list[ToolCall] = []
        for m in messages:
            body = "".join(getattr(c, "text", "") for c in m.content)
            recipient = m.recipient or ""
            if m.channel == "analysis" and not recipient:
                reasoning.append(body)
            elif recipient.startswith("functions."):
                try:
                    args = strictjson.loads(body)
                except json.JSONDecodeError as exc:
                    return ill_formed(text, None, f"arguments of {recipient!r} are not JSON: {exc.msg}")
                if not isinstance(args, dict):
                    return ill_formed(text, None, f"arguments of {recipient!r} are not a JSON object")
                calls.append(
                    ToolCall(name=recipient[len("functions.") :], arguments=args, raw_arguments=body)
                )
            elif recipient:
                return ill_formed(text, None, f"message to unsupported recipient {recipient!r}")
            else:
                content.append(body)
        return finish("".join(content), "\n".join(reasoning) if reasoning else None, calls, names)


class HarmonyFamily(ModelFamily):
    """GPT-OSS (Harmony) rendered and parsed by ``openai-harmony`` (see the module docstring)."""

    name = "harmony"
    end_tokens = (RETURN, CALL, END, EOT)
    closer_end_tokens = (RETURN, CALL, END)
    stop_tokens = (RETURN, CALL, EOT)
    other_turn_closers = (CALL,)
    #: a user, system, developer or tool message sampled inside the turn ends it
    turn_start_tokens = ("<|start|>",)
    turn_start_authors = ("assistant",)

    def __init__(self) -> None:
        self._date = time.strftime("%Y-%m-%d")
        self._encoding: Any = None
        self.reasoning_effort = "medium"

    @property
    def encoding(self) -> Any:
        if self._encoding is None:
            self._encoding = harmony_encoding()
        return self._encoding

    def configure(self, chat_template_kwargs: dict[str, Any]) -> None:
        """``current_date`` and ``reasoning_effort`` from the user's template kwargs.

        Raises:
            ValueError: a reasoning effort other than low/medium/high.
        """
        self._date = str(chat_template_kwargs.get("current_date", self._date))
        effort = str(chat_template_kwargs.get("reasoning_effort", self.reasoning_effort)).lower()
        if effort not in ("low", "medium", "high"):
            raise ValueError(f"reasoning_effort must be low, medium or high, got {effort!r}")
        self.reasoning_effort = effort

    def detect(self, chat_template: str, tokenizer: Any) -> bool:
        return "<|channel|>" in chat_template and "<|start|>" in chat_template

    def parser(self, chat_template: str, end_markers: Sequence[str]) -> HarmonyParser:
        return HarmonyParser(self.encoding)

    def template_vars(self) -> dict[str, Any]:
        """The fixed conversation start date (also used by the Jinja template, if any)."""
        return {"current_date": self._date}

    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, add_generation_prompt: bool
    ) -> str:
        """Harmony's rendering of the conversation, as text (special tokens written out)."""
        from openai_harmony import Role

        conv = to_harmony(messages, tools, self._date, self.reasoning_effort)
        if add_generation_prompt:
            ids = self.encoding.render_conversation_for_completion(conv, Role.ASSISTANT)
        else:
            ids = self.encoding.render_conversation(conv)
        return self.encoding.decode_utf8(ids)
