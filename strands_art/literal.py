"""Message text that spells a control token is tokenized as text, not as the control token.

A tool result holding ``<|im_end|>\\n<|im_start|>system\\n...`` (or ``</think>``, ``<tool_call>``)
would otherwise become those special-token IDs: the tokenizer matches its added tokens anywhere
in the rendered text, so a hostile repository could forge a system turn in the sampled context
and in the trained row. Here the special-token IDs appear only where the template itself writes
them:

1. before rendering, every string that comes from the request (message content, reasoning,
   tool-call arguments, the tool specs) has each occurrence of an added token's text replaced by
   a private-use sentinel (:meth:`LiteralText.escape`); a literal sentinel character is escaped
   too, so the mapping is lossless;
2. the rendered text is split at the added tokens that remain (the template's own); each piece
   between them is un-escaped and tokenized with the same tokenizer *without* its added tokens
   (:meth:`LiteralText.encode`), so the escaped spans become ordinary text tokens (``<``, ``|``,
   ``im``, ...). Pieces with no sentinel tokenize exactly as before (the tokenizer itself splits
   at added tokens first, then tokenizes each piece).

``ChatRenderer(..., special_tokens_in_content="special")`` keeps the old behaviour (text from
messages may produce special-token IDs), for users who rely on it.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

ESC = "\U000f0000"  # Supplementary Private Use Area-A: never a token of any template
_ESC_SELF = "\U000f0001"
_FIRST = 0xF0002  # escaped added token i is ESC + chr(_FIRST + i)


class LiteralText:
    """Escape request text before rendering; tokenize escaped renders with control tokens as text.

    Args:
        backend: the ``tokenizers.Tokenizer`` of the model.

    Attributes:
        tokens: the added tokens' texts (longest first), list[str].
    """

    def __init__(self, backend: Any) -> None:
        added = backend.get_added_tokens_decoder()
        self.tokens = sorted({t.content for t in added.values() if t.content}, key=len, reverse=True)
        self._ids = {t.content: int(i) for i, t in added.items()}
        self._index = {tok: i for i, tok in enumerate(self.tokens)}
        self._find = re.compile("|".join([re.escape(ESC), *(re.escape(t) for t in self.tokens)]))
        self._template_tokens = (
            re.compile("|".join(re.escape(t) for t in self.tokens)) if self.tokens else None
        )
        self._sentinel = re.compile(re.escape(ESC) + "(.)", re.DOTALL)
        self._backend = backend
        self._plain_tokenizer: Any = None  # built on first use (only renders holding escaped text)
        self.escape_text = functools.lru_cache(maxsize=4096)(self._escape_text)

    @property
    def _plain(self) -> Any:
        if self._plain_tokenizer is None:
            self._plain_tokenizer = _without_added_tokens(self._backend)
        return self._plain_tokenizer

    # ------------------------------------------------------------------ escaping
    def _escape_text(self, text: str) -> str:
        if not self._find.search(text):
            return text
        return self._find.sub(self._sentinel_for, text)

    def _sentinel_for(self, m: re.Match[str]) -> str:
        s = m.group(0)
        return ESC + (_ESC_SELF if s == ESC else chr(_FIRST + self._index[s]))

    def escape(self, value: Any) -> Any:
        """``value`` (a message, list, dict or str) with request text escaped; other values as is."""
        if isinstance(value, str):
            return self.escape_text(value)
        if isinstance(value, dict):
            return {k: (v if k in ("role", "type") else self.escape(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.escape(v) for v in value]
        return value

    def unescape(self, text: str) -> str:
        """The original text of an escaped string (sentinels back to what they stood for)."""
        if ESC not in text:
            return text
        return self._sentinel.sub(
            lambda m: ESC if m.group(1) == _ESC_SELF else self.tokens[ord(m.group(1)) - _FIRST], text
        )

    # ---------------------------------------------------------------- tokenizing
    def encode(self, text: str) -> list[int]:
        """Token IDs of an escaped render: the template's added tokens as their IDs, everything
        between them (with escaped spans restored) as plain text."""
        ids: list[int] = []
        pos = 0
        for m in self._template_tokens.finditer(text) if self._template_tokens else ():
            ids.extend(self._text_ids(text[pos : m.start()]))
            ids.append(self._ids[m.group(0)])
            pos = m.end()
        ids.extend(self._text_ids(text[pos:]))
        return ids

    def _text_ids(self, piece: str) -> list[int]:
        return list(self._plain.encode(self.unescape(piece), add_special_tokens=False).ids) if piece else []


_PLAIN: dict[int, tuple[Any, Any]] = {}


def _without_added_tokens(backend: Any) -> Any:
    """The same tokenizer (model, normalizer, pre-tokenizer) with no added tokens; built once per
    tokenizer object (parsing a 150k-entry vocabulary takes about a second)."""
    cached = _PLAIN.get(id(backend))
    if cached is not None and cached[0] is backend:
        return cached[1]
    from tokenizers import Tokenizer

    spec = json.loads(backend.to_str())
    spec["added_tokens"] = []
    plain = Tokenizer.from_str(json.dumps(spec))
    _PLAIN[id(backend)] = (backend, plain)
    return plain
