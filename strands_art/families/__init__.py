"""Model families: end tokens, tool-call/reasoning formats and history rewrites per family.

One module per family (:mod:`.llama3`, :mod:`.mistral`, :mod:`.deepseek`, :mod:`.qwen`), the
shared shape in :mod:`.base`, the choice in :func:`.select.family_for`, and where each family's
real tokenizer and template come from offline in :mod:`.sources`. See docs/model-families.md.
"""

from strands_art.families.base import ModelFamily
from strands_art.families.select import FAMILIES, UnknownFamily, family_for, register

__all__ = ["FAMILIES", "ModelFamily", "UnknownFamily", "family_for", "register"]
