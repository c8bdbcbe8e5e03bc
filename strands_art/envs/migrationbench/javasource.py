"""Java source as javac sees it: Unicode escapes decoded first, literals and comments made plain.

javac translates Unicode escapes (``\\u000a``, ``\\uuu0041``) *before* it lexes (JLS §3.3), so
``// \\u000a @Test public void a() {}`` declares a method and ``// \\u000a /*`` opens a comment.
tree-sitter's Java grammar does not, and it also refuses some literal forms javac accepts
(``0999f``, ``0_7``, ``1__2``). :func:`javac_view` gives tree-sitter what javac reads: escapes
decoded (a backslash preceded by an odd number of backslashes starts no escape), then every
comment replaced by a space (a line comment by a line end), every numeric literal by ``0``, every
string literal and text block by ``""`` and every character literal by ``'c'``. Identifiers,
keywords, annotations and structure are left as they are; only the text of literals and comments
is lost, which no test-method rule reads.

Source: JLS 17 §3.3 (Unicode escapes), §3.4 (line terminators), §3.7 (comments), §3.10
(literals: integer, floating-point, character, string, text blocks).
"""

from __future__ import annotations

import re

_ESCAPE = re.compile(r"\\+u+[0-9a-fA-F]{4}")


def decode_unicode_escapes(text: str) -> str:
    """``text`` with every Unicode escape replaced by its UTF-16 code unit (JLS §3.3).

    ``\\u`` (any number of ``u``) and four hex digits is an escape when the backslash is preceded
    by an even number of backslashes; an escape that decodes to ``\\`` does not start another.
    Surrogate pairs written as two escapes become one character; a lone surrogate is kept as
    the escape's text (javac rejects it where it matters). A ``\\u`` without four hex digits is
    left as it is (javac rejects it too).
    """
    if "\\" not in text or "u" not in text:
        return text
    out: list[str] = []
    pos = 0
    for match in _ESCAPE.finditer(text):
        slashes = len(match.group()) - len(match.group().lstrip("\\"))
        if slashes % 2 == 0:  # an even run: every backslash escapes the next (no escape here)
            continue
        start = match.start() + slashes - 1  # the last backslash starts the escape
        out.append(text[pos:start])
        out.append(chr(int(match.group()[-4:], 16)))
        pos = match.end()
    out.append(text[pos:])
    return _join_surrogates("".join(out))


def _join_surrogates(text: str) -> str:
    if not any("\ud800" <= c <= "\udfff" for c in text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _is_ident_start(c: str) -> bool:
    return c.isalpha() or c in "_$" or (ord(c) > 127 and c.isidentifier())


def _is_ident_part(c: str) -> bool:
    return c.isalnum() or c in "_$" or (ord(c) > 127 and ("a" + c).isidentifier())


def _skip_quoted(text: str, i: int, quote: str) -> int:
    """Index after the string/char literal starting at ``text[i] == quote`` (or at the line end
    for an unterminated one)."""
    n = len(text)
    i += 1
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == quote:
            return i + 1
        if c in "\r\n":
            return i
        i += 1
    return n


def _skip_text_block(text: str, i: int) -> int:
    """Index after the text block opening at ``text[i:i+3] == '\"\"\"'``."""
    n = len(text)
    i += 3
    while i < n:
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith('"""', i):
            return i + 3
        i += 1
    return n


def _skip_number(text: str, i: int) -> int:
    """Index after the numeric literal starting at ``i`` (a digit, or ``.`` then a digit):
    digits, letters, underscores, dots, and a sign right after an exponent letter (``e``/``p``
    in decimal/hex form)."""
    n = len(text)
    hexa = text.startswith(("0x", "0X"), i)
    j = i
    while j < n:
        c = text[j]
        if c.isalnum() or c in "_.":
            j += 1
            if c in ("pP" if hexa else "eE") and j < n and text[j] in "+-":
                j += 1
            continue
        break
    return j


def javac_view(source: bytes | str) -> str:
    """The compilation unit ``source`` (UTF-8 bytes or text) as described in the module doc."""
    text = source.decode("utf-8", errors="replace") if isinstance(source, bytes) else source
    text = decode_unicode_escapes(text)
    out: list[str] = []
    n, i, last = len(text), 0, 0
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] in "/*":
            out.append(text[last:i])
            if text[i + 1] == "/":
                end = i + 2
                while end < n and text[end] not in "\r\n":
                    end += 1
                out.append(" ")
            else:
                close = text.find("*/", i + 2)
                end = n if close < 0 else close + 2
                out.append(" ")
            i = last = end
        elif c == '"':
            out.append(text[last:i])
            end = _skip_text_block(text, i) if text.startswith('"""', i) else _skip_quoted(text, i, '"')
            out.append('""')
            i = last = end
        elif c == "'":
            out.append(text[last:i])
            i = last = _skip_quoted(text, i, "'")
            out.append("'c'")
        elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            out.append(text[last:i])
            i = last = _skip_number(text, i)
            out.append("0")
        elif _is_ident_start(c):
            i += 1
            while i < n and _is_ident_part(text[i]):
                i += 1
        else:
            i += 1
    out.append(text[last:])
    return "".join(out)
