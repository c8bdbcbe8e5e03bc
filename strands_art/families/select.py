"""Choose a model family: by name, or from the chat template and tokenizer (one place).

Detection order (first match wins): Harmony (``<|start|>`` and ``<|channel|>``), Mistral (``[INST]``), DeepSeek (full-width
``<｜tool▁calls▁begin｜>`` / ``<｜Assistant｜>``), Llama 3.x (``<|start_header_id|>`` and
``<|eot_id|>``), Qwen/ChatML (``<|im_start|>``); anything else gets the base
:class:`~strands_art.families.base.ModelFamily` (probed end token + EOS, parser from
:func:`strands_art.toolcalls.select.parser_for_template`).

Other modules add families with :func:`register` (a family class with a ``detect`` method);
a model alias names its family with ``family=`` (:data:`strands_art.families.sources.SOURCES`).
"""

from __future__ import annotations

from typing import Any

from strands_art.families.base import ModelFamily
from strands_art.families.deepseek import DeepSeekFamily
from strands_art.families.harmony import HarmonyFamily
from strands_art.families.llama3 import Llama3Family
from strands_art.families.mistral import MistralFamily
from strands_art.families.qwen import QwenFamily

#: name -> family class, in detection order
FAMILIES: dict[str, type[ModelFamily]] = {}


class UnknownFamily(ValueError):
    """A family name that is not registered."""


def register(family: type[ModelFamily], *, before: str | None = None) -> None:
    """Add (or replace) a family class under ``family.name``; ``before`` puts it ahead of that
    family in detection order (default: last)."""
    items = [(k, v) for k, v in FAMILIES.items() if k != family.name]
    at = next((i for i, (k, _) in enumerate(items) if k == before), len(items))
    items.insert(at, (family.name, family))
    FAMILIES.clear()
    FAMILIES.update(items)


for _cls in (HarmonyFamily, MistralFamily, DeepSeekFamily, Llama3Family, QwenFamily, ModelFamily):
    register(_cls)


def family_for(chat_template: str | None, tokenizer: Any = None, name: str | None = None) -> ModelFamily:
    """A new :class:`ModelFamily` instance for ``name``, or detected from the template.

    Raises:
        UnknownFamily: ``name`` is given and not registered (the message lists the names).
    """
    template = chat_template or ""
    if name is not None:
        try:
            family = FAMILIES[name]()
        except KeyError:
            raise UnknownFamily(f"unknown model family {name!r}: use one of {', '.join(FAMILIES)}") from None
    else:
        family = next(
            (f for f in (cls() for cls in FAMILIES.values()) if f.detect(template, tokenizer)), None
        )
        family = family or ModelFamily()
    family.bind(template, tokenizer)
    return family
