"""Qwen and ChatML: ``<|im_start|>``/``<|im_end|>`` turns, Hermes JSON or Qwen3-Coder XML calls.

- Qwen2.5/Qwen3 (``<tool_call>{json}</tool_call>``): :class:`~strands_art.toolcalls.hermes.HermesParser`.
- Qwen3-Coder, Qwen3.5, Qwen3.6 (``<tool_call><function=NAME><parameter=P>``): the XML
  :class:`~strands_art.toolcalls.qwen3_coder.Qwen3CoderParser`. Qwen3.5/3.6 generation prompts
  open ``<think>\\n``; the parser is told so (``think_open``).
- End tokens: ``<|im_end|>`` (the closer) and ``<|endoftext|>``, the model's other end token
  (Qwen2.5/Qwen3 ``generation_config.json``: ``eos_token_id: [151645, 151643]``; the tokenizer
  names only ``<|im_end|>``); both are stop IDs, so a turn sampled to ``<|endoftext|>`` is a stop,
  not a truncation. An output ending on ``<|endoftext|>`` gets the whole closer after it (it is
  not the template's closer).
- History rewrites: Qwen3.5/3.6 templates iterate ``arguments | items``, so string arguments
  (as a harness sends them) are decoded to a dict first (vLLM does the same); Qwen2.5/3 templates
  insert a string verbatim, so it is kept (the sampled JSON text re-renders exactly).
- Plain ChatML templates without tool support (SmolLM2) get the Hermes convention from the
  renderer (:mod:`strands_art.toolcalls.select`).
"""

from __future__ import annotations

import re
from typing import Any

from strands_art.families.base import ModelFamily, arguments_dict, with_arguments

_ITEMS = re.compile(r"arguments\s*\|\s*items")


class QwenFamily(ModelFamily):
    """ChatML templates: Qwen2.5/3 (Hermes JSON), Qwen3-Coder/3.5/3.6 (XML), SmolLM2."""

    name = "qwen"
    inline_reasoning = True
    end_tokens = ("<|im_end|>", "<|endoftext|>")

    def detect(self, chat_template: str, tokenizer: Any) -> bool:
        return "<|im_start|>" in chat_template

    def bind(self, chat_template: str, tokenizer: Any) -> None:
        self._dict_arguments = _ITEMS.search(chat_template) is not None

    def prepare_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Tool-call arguments as dicts for templates that iterate them (Qwen3.5/3.6)."""
        return with_arguments(messages, arguments_dict) if self._dict_arguments else messages
