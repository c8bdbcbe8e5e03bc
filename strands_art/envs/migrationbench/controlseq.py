"""Remove terminal control sequences from command output before anyone reads it.

What a command prints reaches the model (tool results), the run's logs and the user's terminal;
the agent's code chooses it. Every ECMA-48 (5th ed., 1991) control sequence and control string
is removed, in its 7-bit (``ESC Fe``) and its 8-bit C1 form (U+0080..U+009F in decoded text):

* CSI (``ESC [`` / U+009B): parameter bytes 0x30-0x3F, intermediate bytes 0x20-0x2F, a final
  byte 0x40-0x7E (colour, cursor movement, screen clearing);
* control strings up to their STRING TERMINATOR (``ESC \\`` / U+009C): OSC (``ESC ]`` / U+009D;
  BEL also ends it, as xterm accepts), DCS (``ESC P`` / U+0090), SOS (``ESC X`` / U+0098),
  PM (``ESC ^`` / U+009E), APC (``ESC _`` / U+009F). An unterminated string runs to the end of
  the text (a terminal would swallow it all);
* every other escape sequence: ``ESC``, intermediate bytes 0x20-0x2F, a final byte 0x30-0x7E
  (``ESC c`` reset, ``ESC ( 0`` charset switch, a lone ``ESC \\``);
* then whatever control character is left: a lone ``ESC``, any C1 character, and the C0 controls
  other than TAB, LF and CR (BEL, BS, SO/SI that switch character sets, NUL, ...) and DEL.

TAB, LF and CR stay (line structure, Maven's progress lines). Source: ECMA-48 sections 5.3-5.6, 8.3.
"""

from __future__ import annotations

import re

_ST = r"(?:\x1b\\|\x9c)"
_CONTROL = re.compile(
    r"(?:\x1b\]|\x9d).*?(?:" + _ST + r"|\x07|\Z)"  # OSC: ST or BEL
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f]).*?(?:" + _ST + r"|\Z)"  # DCS, SOS, PM, APC: ST
    r"|(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"  # CSI
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]"  # other escape sequences (nF, Fp, Fe, Fs)
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]",  # what is left: C0 (not TAB/LF/CR), DEL, C1
    re.DOTALL,
)


def strip_control_sequences(text: str) -> str:
    """``text`` without any terminal control sequence or control character (see the module doc).

    The result holds no ESC, no C1 character and no C0 control but TAB, LF and CR. Linear time.
    """
    return _CONTROL.sub("", text)
