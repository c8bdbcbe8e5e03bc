"""Split Qwen3-style ``<think>...</think>`` reasoning from the assistant content, exactly.

Behaviour follows the format the Qwen3 / DeepSeek-R1 chat templates define (they re-render
reasoning as ``<think>\n{reasoning.strip('\n')}\n</think>\n\n{content}`` at the start of the
turn) and accepts nothing else:

- output ``<think>R</think>C`` with the opening tag at the start (only whitespace before it):
  reasoning ``R.strip("\n")``, content ``C.lstrip("\n")``;
- output ``R</think>C`` when the *prompt* opened ``<think>`` (``think_open``, e.g. Qwen3.5's or
  DeepSeek-R1's generation prompt): reasoning ``R``, content ``C`` (same stripping);
- output ``<think>R`` with no ``</think>`` (cut off by the length limit), or ``think_open`` and no
  ``</think>``: all of it is reasoning, content is empty, a problem is noted;
- anything else has no reasoning (``None``) and the text is the content unchanged. In particular
  a ``</think>`` that no ``<think>`` opened is text (a model answering with thinking disabled may
  write the literal tag, e.g. inside a ``write_file`` argument), and a ``<think>`` after other
  text is text too.
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
    lead = len(text) - len(text.lstrip())
    if text.startswith(THINK_OPEN, lead):
        rest = text[lead + len(THINK_OPEN) :]
        close = rest.find(THINK_CLOSE)
        if close == -1:
            return ReasoningSplit(
                rest.strip("\n"), "", ["unclosed <think> block: the output ended inside reasoning"]
            )
        reasoning = rest[:close].strip("\n")
        return ReasoningSplit(reasoning, rest[close + len(THINK_CLOSE) :].lstrip("\n"))
    if think_open:
        end = text.find(THINK_CLOSE)
        if end != -1:
            return ReasoningSplit(text[:end].strip("\n"), text[end + len(THINK_CLOSE) :].lstrip("\n"))
        return ReasoningSplit(
            text.strip("\n"), "", ["reasoning opened by the prompt was never closed (no </think>)"]
        )
    return ReasoningSplit(None, text)
