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


#: One token :func:`javac_view` rewrites: a comment or a literal (a number only where no
#: identifier character precedes it, so that ``a1`` holds none); the rest is kept as it is.
_TOKEN = re.compile(
    r"""
    (?P<line>//[^\r\n]*)
  | (?P<block>/\*.*?(?:\*/|\Z))
  | (?P<text>\"\"\"(?:\\.|[^\\])*?(?:\"\"\"|\Z))
  | (?P<str>"(?:\\.|[^"\\\r\n])*"?)
  | (?P<chr>'(?:\\.|[^'\\\r\n])*'?)
  | (?<![\w$])(?P<num>(?:0[xX][0-9a-fA-F_.]*(?:[pP][+-]?[0-9_]*)?|0[bB][01_]*
          |(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)(?:[eE][+-]?[0-9_]*)?)\w*)
    """,
    re.S | re.X,
)
_REPLACEMENT = {"line": " ", "block": " ", "text": '""', "str": '""', "chr": "'c'", "num": "0"}


def javac_view(source: bytes | str) -> str:
    """The compilation unit ``source`` (UTF-8 bytes or text) as described in the module doc."""
    text = source.decode("utf-8", errors="replace") if isinstance(source, bytes) else source
    text = decode_unicode_escapes(text)
    return _TOKEN.sub(lambda m: _REPLACEMENT[m.lastgroup], text)
