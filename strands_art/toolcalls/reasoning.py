"""Split Qwen3-style ``<think>...</think>`` reasoning from the assistant content.

Behaviour follows vLLM's ``qwen3`` / ``deepseek_r1`` reasoning parsers and the Qwen3 chat
templates (which re-render reasoning as ``<think>\\n{reasoning.strip('\\n')}\\n</think>\\n\\n{content}``):

- output ``[prefix]<think>R</think>C``: reasoning ``R.strip("\\n")``, content ``prefix + C.lstrip("\\n")``;
- output ``R</think>C`` (the template opened ``<think>`` in the prompt, e.g. Qwen3.5's
  generation prompt): reasoning ``R``, content ``C`` (same stripping);
- output ``<think>R`` with no ``</think>`` (cut off by the length limit): all of it is reasoning,
  content is empty, a problem is noted;
- ``think_open=True`` and no ``</think>``: likewise, all of it is reasoning;
- otherwise no reasoning (``None``) and the text is the content unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


@dataclass
class ReasoningSplit:
    """Result of :func:`split_reasoning`: reasoning (None if absent), content, problems."""

    reasoning: str | None
    content: str
    problems: list[str] = field(default_factory=list)


def prompt_opens_think(prompt_text: str) -> bool:
    """True when a rendered prompt ends inside an opened ``<think>`` block.

    Qwen3.5-style templates end the generation prompt with ``<think>\\n``, so the sampled output
    holds only the closing tag; Qwen3 with ``enable_thinking=False`` ends with an empty, closed
    block (``<think>\\n\\n</think>\\n\\n``), which is not open.
    """
    return prompt_text.rstrip().endswith(THINK_OPEN)


def split_reasoning(text: str, *, think_open: bool = False) -> ReasoningSplit:
    """Split ``text`` (end markers already stripped) into reasoning and content.

    Args:
        text: the sampled output.
        think_open: the prompt already opened ``<think>``.
    """
    start = text.find(THINK_OPEN)
    end = text.find(THINK_CLOSE)
    if start != -1 and (end == -1 or start < end):
        prefix = text[:start]
        rest = text[start + len(THINK_OPEN) :]
        close = rest.find(THINK_CLOSE)
        if close == -1:
            return ReasoningSplit(
                rest.strip("\n"), prefix, ["unclosed <think> block: the output ended inside reasoning"]
            )
        reasoning = rest[:close].strip("\n")
        content = prefix + rest[close + len(THINK_CLOSE) :].lstrip("\n")
        return ReasoningSplit(reasoning, content)
    if end != -1:
        reasoning = text[:end].strip("\n")
        return ReasoningSplit(reasoning, text[end + len(THINK_CLOSE) :].lstrip("\n"))
    if think_open:
        return ReasoningSplit(
            text.strip("\n"), "", ["reasoning opened by the prompt was never closed (no </think>)"]
        )
    return ReasoningSplit(None, text)
