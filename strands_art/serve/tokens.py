"""The raw bytes of sampled tokens, for the ``bytes`` of OpenAI's logprobs.

OpenAI's ``logprobs.content[i].bytes`` is "the UTF-8 bytes representation of the token ...
useful in instances where characters are represented by multiple tokens and their byte
representations must be combined to generate the correct text representation"
(https://platform.openai.com/docs/api-reference/chat/object). A token that holds part of a
character (an emoji or a rare CJK character split by byte-level BPE) cannot be decoded alone:
decoding it gives U+FFFD, whose bytes rebuild nothing. So the bytes come from the vocabulary:

- byte-level BPE (GPT-2's mapping: Qwen, Llama 3, SmolLM2, DeepSeek, GPT-OSS): each character
  of the vocabulary entry stands for one byte (``bytes_to_unicode``, openai/gpt-2 encoder.py);
- SentencePiece with byte fallback (Mistral): ``<0xHH>`` is the byte HH, ``▁`` a space;
- added and special tokens: their text as UTF-8.

The bytes of a turn's tokens, joined, are the UTF-8 of the decoded text (SentencePiece: up to
the space its decoder strips at the start of a text).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable character → byte map, inverted (openai/gpt-2 ``bytes_to_unicode``)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def _byte_level(tokenizer: Any) -> bool:
    """Whether a fast tokenizer decodes with GPT-2's byte-level mapping."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    try:
        decoder = json.loads(backend.to_str()).get("decoder") or {}
    except (ValueError, AttributeError):
        return False
    kinds = [decoder.get("type")] + [d.get("type") for d in decoder.get("decoders") or []]
    return "ByteLevel" in kinds


class TokenBytes:
    """Per-tokenizer raw bytes of token IDs (what :func:`token_bytes` reads, kept per tokenizer).

    Args:
        tokenizer: a ``transformers`` tokenizer.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.byte_level = _byte_level(tokenizer)
        added = getattr(tokenizer, "added_tokens_decoder", None) or {}
        self.added = {int(i): str(getattr(t, "content", t)) for i, t in added.items()}

    def __call__(self, ids: list[int]) -> list[bytes]:
        """One ``bytes`` per ID, in order."""
        pieces = self.tokenizer.convert_ids_to_tokens(list(ids))
        return [self._one(i, p) for i, p in zip(ids, pieces, strict=True)]

    def _one(self, token_id: int, piece: str | None) -> bytes:
        if token_id in self.added or piece is None:
            text = self.added.get(token_id)
            return (text if text is not None else self.tokenizer.decode([token_id])).encode("utf-8")
        if self.byte_level:
            table = _byte_decoder()
            try:
                return bytes(table[c] for c in piece)
            except KeyError:  # not a byte-level piece: its decoded text
                return self.tokenizer.decode([token_id]).encode("utf-8", "replace")
        match = _BYTE_PIECE.fullmatch(piece)
        if match:
            return bytes([int(match.group(1), 16)])
        return piece.replace("\u2581", " ").encode("utf-8", "replace")


_CACHE: dict[int, TokenBytes] = {}


def token_bytes(tokenizer: Any, ids: list[int]) -> list[bytes]:
    """The raw bytes of each token ID in ``ids`` (see the module docstring); the tokenizer's
    kind is read once per tokenizer object."""
    reader = _CACHE.get(id(tokenizer))
    if reader is None or reader.tokenizer is not tokenizer:
        reader = _CACHE[id(tokenizer)] = TokenBytes(tokenizer)
    return reader(ids)
