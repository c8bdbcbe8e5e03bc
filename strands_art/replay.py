"""Replay a logged conversation through the gateway with the scripted backend.

Used by ``strands-art replay FILE.json`` (docs/architecture.md, "replay contract", describes the JSON) to debug row
splits: every turn's messages are sent exactly as the harness sent them, and the recorded
output (text or token IDs) is played back by :class:`~strands_art.backends.scripted.ScriptedBackend`.
"""

from __future__ import annotations

from typing import Any

from strands_art.backends.base import BackendError, SamplingParams
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.history.normalize import MessageError
from strands_art.registry import family_of, load_tokenizer
from strands_art.render import TemplateError


class ReplayInputError(ValueError):
    """The replay file does not follow the contract (missing ``turns``, bad ``output``, ...)."""


async def replay(
    spec: dict[str, Any], mode: str | None = None, tokenizer: str | None = None
) -> dict[str, Any]:
    """Replay ``spec`` and return ``{"rows": [...], "turns": [...], "events": [...], "summary": {...}}``.

    ``rows[i]`` has ``input_ids``, ``loss_mask``, ``logprobs`` (all of len(input_ids)) and
    ``turns``; ``turns[k]`` has ``prompt_ids`` and ``output_ids``. Raises ReplayInputError.
    """
    if not isinstance(spec, dict) or not isinstance(spec.get("turns"), list) or not spec["turns"]:
        raise ReplayInputError("the replay file needs a non-empty 'turns' list")
    outputs = []
    for k, t in enumerate(spec["turns"]):
        out = t.get("output") if isinstance(t, dict) else None
        if not isinstance(out, dict) or not ({"text", "token_ids"} & set(out)):
            raise ReplayInputError(f"turn {k}: 'output' must be {{'text': ...}} or {{'token_ids': [...]}}")
        item = dict(out)
        for key in ("logprobs", "finish_reason"):
            if key in t:
                item[key] = t[key]
        outputs.append(item)
    _check_shape(spec)
    name = tokenizer or spec.get("tokenizer") or "qwen3"
    tok = load_tokenizer(name)
    backend = ScriptedBackend(tok, outputs)
    gateway = RolloutGateway(
        tok,
        backend,
        history_mode=mode or spec.get("mode") or "tree",
        chat_template_kwargs=spec.get("chat_template_kwargs") or {},
        family=family_of(name),
        sampling=SamplingParams(max_new_tokens=1 << 20),
        max_context_tokens=1 << 30,
    )
    sid = gateway.open_session("replay")
    for k, t in enumerate(spec["turns"]):
        tools = t.get("tools", spec.get("tools"))
        try:
            await gateway.generate(sid, t.get("messages"), tools)
        except (MessageError, TemplateError, BackendError) as exc:
            raise ReplayInputError(f"turn {k}: {exc}") from exc
    traj = gateway.close_session(sid)
    return {
        "rows": [
            {
                "input_ids": r.input_ids,
                "loss_mask": r.loss_mask,
                "logprobs": r.logprobs,
                "turns": r.turns,
                "metadata": r.metadata,
            }
            for r in traj.rows
        ],
        "turns": [
            {
                "prompt_ids": t.prompt_ids,
                "output_ids": t.output_ids,
                "row": t.row,
                "finish_reason": t.finish_reason,
            }
            for t in traj.turns
        ],
        "events": traj.events,
        "summary": summarize(traj),
    }


def _check_shape(spec: dict[str, Any]) -> None:
    """Refuse wrong JSON types before anything uses them (each message names the key)."""
    for key in ("tokenizer", "mode"):
        if spec.get(key) is not None and not isinstance(spec[key], str):
            raise ReplayInputError(f"'{key}' must be a string, got {type(spec[key]).__name__}")
    if spec.get("chat_template_kwargs") is not None and not isinstance(spec["chat_template_kwargs"], dict):
        raise ReplayInputError("'chat_template_kwargs' must be an object")
    _check_list_of_objects("'tools'", spec.get("tools"))
    for k, t in enumerate(spec["turns"]):
        _check_list_of_objects(f"turn {k}: 'tools'", t.get("tools"))
        if not isinstance(t.get("messages"), list):
            raise ReplayInputError(f"turn {k}: 'messages' must be a list, got {_kind(t.get('messages'))}")
        _check_list_of_objects(f"turn {k}: 'messages'", t["messages"])


def _check_list_of_objects(what: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(x, dict) for x in value):
        raise ReplayInputError(f"{what} must be a list of objects, got {_kind(value)}")


def _kind(value: Any) -> str:
    if isinstance(value, list):
        bad = next(x for x in value if not isinstance(x, dict))
        return f"a list holding a {type(bad).__name__}"
    return f"a {type(value).__name__}"


def summarize(traj) -> dict[str, Any]:
    """Counts users read first: rows, tokens, sampled tokens, events by kind, and the history
    policy's counters (linear mode: heals, resets, drift tokens)."""
    kinds: dict[str, int] = {}
    for ev in traj.events:
        kinds[ev["kind"]] = kinds.get(ev["kind"], 0) + 1
    history = traj.rows[0].metadata.get("history", {}) if traj.rows else {}
    return {
        "history": history,
        "turns": len(traj.turns),
        "rows": len(traj.rows),
        "tokens": sum(len(r) for r in traj.rows),
        "sampled_tokens": sum(r.num_sampled for r in traj.rows),
        "events": kinds,
    }
