"""System messages in the middle of a conversation: kept at their position, or given as user text.

Harnesses inject instructions between turns as a ``system`` (or ``developer``, the same role after
normalization) message: Claude Code's reminders, plan-mode notices, Codex's collaboration mode.
Such a message belongs *at its position*: after the earlier turns, before the next user message.
Hoisting it into the leading system block rewrites the start of the prompt (linear mode then
resets: a second row repeating the whole context) and shows the model an instruction before turns
that came earlier; refusing it loses the rollout.

- Formats that render a system message where it stands (Qwen3's and Llama 3.x's templates,
  Harmony's developer messages) keep it there.
- Formats whose template refuses it (Qwen3.5: "System message must be at the beginning"),
  hoists it (DeepSeek-R1 joins every system message into the prompt's start) or moves it
  (Mistral writes the system prompt into the *last* user message) get one treatment, the same
  for every family: the message is rendered as a ``user`` message with the same content, at its
  position. The gateway records a ``system_as_user`` event for each such message the turn it
  arrives (:func:`system_as_user_events`); the recorded request messages keep the system role.

Which case applies is found once per renderer by rendering a probe conversation with the
template (:func:`probe_mid_system`), not by a list of model names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: what a renderer does with a system message after the first non-system message
KEEP, AS_USER = "keep", "user"

_SYS, _A1, _U2, _MID = "PROBE_SYSTEM_1c9e", "PROBE_ANSWER_1c9e", "PROBE_USER_2_1c9e", "PROBE_NOTE_1c9e"


def mid_system_indices(messages: list[dict[str, Any]]) -> list[int]:
    """Indices of the system messages that come after a non-system message."""
    out: list[int] = []
    leading = True
    for i, m in enumerate(messages):
        if m.get("role") != "system":
            leading = False
        elif not leading:
            out.append(i)
    return out


def system_as_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each mid-conversation system message (:func:`mid_system_indices`) as a
    user message with the same content (the list and the other messages shared when none)."""
    mid = mid_system_indices(messages)
    if not mid:
        return messages
    out = list(messages)
    for i in mid:
        out[i] = {"role": "user", "content": messages[i].get("content") or ""}
    return out


def probe_mid_system(render: Callable[[list[dict[str, Any]]], str]) -> str:
    """:data:`KEEP` when ``render`` (messages -> prompt text, with a generation prompt) writes a
    system message after an answer and before the next user message, in a conversation that goes
    on after it (so it does not move when the next user message arrives); else :data:`AS_USER`
    (the template raised, hoisted or moved it)."""
    messages = [
        {"role": "system", "content": _SYS},
        {"role": "user", "content": "PROBE_USER_1_1c9e"},
        {"role": "assistant", "content": _A1},
        {"role": "system", "content": _MID},
        {"role": "user", "content": _U2},
        {"role": "assistant", "content": "PROBE_ANSWER_2_1c9e"},
        {"role": "user", "content": "PROBE_USER_3_1c9e"},
    ]
    try:
        text = render(messages)
    except Exception:  # noqa: BLE001 - any template failure means the format cannot hold it
        return AS_USER
    a, mid, u2 = text.find(_A1), text.find(_MID), text.find(_U2)
    return KEEP if 0 <= a < mid < u2 else AS_USER


def system_as_user_events(messages: list[dict[str, Any]], seen: int) -> list[dict[str, Any]]:
    """A ``system_as_user`` event for each mid-conversation system message at index >= ``seen``
    (the messages the previous turn did not have)."""
    return [
        {
            "kind": "system_as_user",
            "reason": "the chat template cannot hold a system message in the middle of the "
            "conversation; rendered as a user message at its position",
            "message": i,
        }
        for i in mid_system_indices(messages)
        if i >= seen
    ]
