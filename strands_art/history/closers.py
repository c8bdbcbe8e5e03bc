"""What a chat template writes around an assistant turn, found by rendering probe messages.

Linear history mode (:mod:`strands_art.history.linear`) splices token histories at message
boundaries, so it needs two facts about the template, read from the template itself rather than
hard-coded:

- the **closer**: the text the template writes after an assistant message's body (``<|im_end|>\\n``
  for ChatML and Qwen). Found as the common suffix of two renders that differ only in the
  assistant body (the bodies differ in their last character, so the common suffix is the
  template's own text).
- the **generation prompt**: what ``add_generation_prompt=True`` appends (``<|im_start|>assistant\\n``,
  or ``...<think>\\n\\n</think>\\n\\n`` for Qwen3 with ``enable_thinking=False``).

:func:`missing_closer` decides which part of the closer a sampled output still lacks: a retained
stop token (``<|im_end|>``) is not appended twice; a length-truncated turn gets the whole closer;
an output that ended on a different end token (EOS ``<|endoftext|>``) or a stop string gets the
whole closer after what was sampled.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass

from strands_art.render import ChatRenderer, TemplateError

logger = logging.getLogger(__name__)

PROBE_USER = "\u2603probe-user-5b1e"
PROBE_A = "\u2603probe body alpha 00000"
PROBE_B = "\u2603probe body omega 99999"


@dataclass(frozen=True)
class TemplateShape:
    """Template facts used to splice token histories.

    Attributes:
        closer: text after an assistant body ("" when unresolved).
        generation_prompt: text appended by ``add_generation_prompt=True`` ("" when the
            generation-prompt render does not extend the plain render).
        closer_ids: ``closer`` tokenized on its own (list of token IDs).
        generation_prompt_ids: ``generation_prompt`` tokenized on its own.
        closer_is_marked: the closer holds a special token (so finding it in rendered text is
            unambiguous unless a message's own text holds that token's string).
        other_closers: further texts that may end an assistant turn in rendered history, from the
            model family (Harmony: ``<|call|>`` after a tool call, while ``<|end|>`` also ends the
            analysis message *inside* a turn). Non-empty makes the boundary search use the probe.
        end_only: texts the template writes after the conversation's last message only and drops
            once further messages follow, from the model family (DeepSeek-R1:
            ``<｜tool▁outputs▁end｜>``); the only change to earlier text a linear heal accepts
            (:func:`strands_art.history.boundary.relocate_segments`).
    """

    closer: str
    generation_prompt: str
    closer_ids: tuple[int, ...]
    generation_prompt_ids: tuple[int, ...]
    closer_is_marked: bool
    other_closers: tuple[str, ...] = ()
    end_only: tuple[str, ...] = ()

    @property
    def resolved(self) -> bool:
        return bool(self.closer)

    @property
    def closers(self) -> tuple[str, ...]:
        """Every text that may end an assistant turn: the probed closer first."""
        return (self.closer, *self.other_closers) if self.closer else ()


_CACHE: weakref.WeakKeyDictionary[ChatRenderer, TemplateShape] = weakref.WeakKeyDictionary()


def common_suffix_len(a: str, b: str) -> int:
    """Length of the longest common suffix of two strings."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[-1 - i] == b[-1 - i]:
        i += 1
    return i


def template_shape(renderer: ChatRenderer) -> TemplateShape:
    """The :class:`TemplateShape` of ``renderer``'s template (probed once, then cached)."""
    shape = _CACHE.get(renderer)
    if shape is None:
        shape = _probe(renderer)
        _CACHE[renderer] = shape
    return shape


def _probe(renderer: ChatRenderer) -> TemplateShape:
    user = {"role": "user", "content": PROBE_USER}
    closer = ""
    try:
        ra = renderer.render([user, {"role": "assistant", "content": PROBE_A}], add_generation_prompt=False)
        rb = renderer.render([user, {"role": "assistant", "content": PROBE_B}], add_generation_prompt=False)
        n = common_suffix_len(ra, rb)
        closer = ra[len(ra) - n :] if n else ""
    except TemplateError as exc:
        logger.warning("closer probe failed: %s", exc)
    gen = ""
    try:
        plain = renderer.render([user], add_generation_prompt=False)
        with_gen = renderer.render([user], add_generation_prompt=True)
        if with_gen.startswith(plain):
            gen = with_gen[len(plain) :]
    except TemplateError as exc:
        logger.warning("generation-prompt probe failed: %s", exc)
    specials = {renderer.backend.id_to_token(i) for i in renderer._special_ids()}
    marked = any(s and s in closer for s in specials)
    if not closer:
        logger.warning(
            "could not find the assistant closer from the chat template; linear healing will reset"
        )
    return TemplateShape(
        closer=closer,
        generation_prompt=gen,
        closer_ids=tuple(renderer.encode_sync(closer)) if closer else (),
        generation_prompt_ids=tuple(renderer.encode_sync(gen)) if gen else (),
        closer_is_marked=marked,
        other_closers=tuple(c for c in renderer.family.other_turn_closers if c != closer),
        end_only=tuple(renderer.family.end_only_texts),
    )


@dataclass(frozen=True)
class Closing:
    """The closer tokens an output still needs, and why.

    Attributes:
        ids: token IDs to append after the sampled output (list[int]).
        text: their text.
        code: "retained_stop" (the output already ends with part or all of the closer),
            "length" (truncated: the whole closer), "foreign_stop" (ended on another special token,
            e.g. EOS ``<|endoftext|>``: the whole closer after it), "family_end" (ended on another end
            token of the model family that stands in for the closer's own, e.g. Llama's
            ``<|eom_id|>`` for ``<|eot_id|>``: only the rest of the closer), "no_stop" (ended on a
            stop string or nothing).
    """

    ids: list[int]
    text: str
    code: str


def missing_closer(
    renderer: ChatRenderer, shape: TemplateShape, output_ids: list[int], finish_reason: str
) -> Closing:
    """The part of ``shape.closer`` that ``output_ids`` does not already end with.

    Overlap is judged on text (the last few output tokens decoded with special tokens kept), so a
    retained ``<|im_end|>`` is not doubled and an output ending in "\\n" before a "\\n\\n" closer
    gets one more "\\n". A length-truncated output always gets the whole closer.
    """
    closer = shape.closer
    if finish_reason == "length" or not output_ids:
        return Closing(list(shape.closer_ids), closer, "length" if finish_reason == "length" else "no_stop")
    tail = renderer.decode(output_ids[-min(len(output_ids), len(shape.closer_ids) + 4) :])
    for n in range(len(closer), 0, -1):
        if tail.endswith(closer[:n]):
            rest = closer[n:]
            return Closing(renderer.encode_sync(rest) if rest else [], rest, "retained_stop")
    family_end = renderer.closer_end_ids.get(output_ids[-1])
    if family_end is not None:  # a family end token standing in for the closer's (Llama <|eom_id|>)
        for token in renderer.family.end_tokens:
            if closer.startswith(token):
                rest = closer[len(token) :]
                return Closing(renderer.encode_sync(rest) if rest else [], rest, "family_end")
    special = output_ids[-1] in renderer.end_of_turn_ids or output_ids[-1] in renderer._special_ids()
    code = "foreign_stop" if special else "no_stop"
    return Closing(list(shape.closer_ids), closer, code)
