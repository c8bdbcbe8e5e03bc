"""Replay a logged conversation through the gateway with the scripted backend.

Used by ``strands-art replay FILE.json`` and ``strands-art replay --from-run RUN_DIR --rollout ID``
(:func:`spec_from_run` builds the replay file from a stored rollout; docs/replay.md describes the
JSON) to debug row splits: every turn's messages are sent exactly as the harness sent them, and the recorded
output (text or token IDs) is played back by :class:`~strands_art.backends.scripted.ScriptedBackend`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from strands_art.backends.base import BackendError, SamplingParams
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.history.normalize import MessageError
from strands_art.registry import family_of, load_tokenizer
from strands_art.render import TemplateError
from strands_art.render_inputs import RenderInputsMismatch, check_render_inputs
from strands_art.trajectory import Trajectory
from strands_art.validation import is_real

FINISH_REASONS = ("stop", "length", "tool_calls")
#: the most characters of text (message contents, arguments, tool specs) one turn's request may
#: hold: about 1M tokens, above any model's context window. Tokenizing is the cost of a replay
#: (~1-5 MB/s on one core); a larger turn is refused before anything is loaded or tokenized.
MAX_TURN_CHARS = 4_000_000


class ReplayInputError(ValueError):
    """The replay file does not follow the contract (missing ``turns``, bad ``output``, ...)."""


async def replay(
    spec: dict[str, Any], mode: str | None = None, tokenizer: str | None = None
) -> dict[str, Any]:
    """Replay ``spec`` and return ``{"rows": [...], "turns": [...], "events": [...], "summary": {...}}``.

    ``rows[i]`` has ``input_ids``, ``loss_mask``, ``logprobs`` (all of len(input_ids)) and
    ``turns``; ``turns[k]`` has ``prompt_ids``, ``output_ids``, ``row``, ``finish_reason`` and
    the parsed ``text``, ``reasoning``, ``tool_calls`` (``{id, name, arguments}``),
    ``ill_formed``, ``problems``; ``summary`` adds :func:`human_view`. A turn's
    ``finish_reason`` may be "stop", "length" or "tool_calls" (what stored trajectories hold).
    Raises ReplayInputError.
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
        _check_output(k, item)
        finish = item.get("finish_reason")
        if finish is not None and finish not in FINISH_REASONS:
            raise ReplayInputError(f"turn {k}: finish_reason must be one of {FINISH_REASONS}, got {finish!r}")
        if finish == "tool_calls":  # what the gateway reports for a stop with calls; it sampled a stop
            item["finish_reason"] = "stop"
        outputs.append(item)
    _check_shape(spec)
    _check_size(spec)
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
    try:
        check_render_inputs(spec.get("render"), gateway.renderer)
    except RenderInputsMismatch as exc:
        raise ReplayInputError(str(exc)) from exc
    sid = gateway.open_session("replay")
    parsed = []
    for k, t in enumerate(spec["turns"]):
        tools = t.get("tools", spec.get("tools"))
        try:
            result = await gateway.generate(sid, t.get("messages"), tools)
        except (MessageError, TemplateError, BackendError) as exc:
            raise ReplayInputError(f"turn {k}: {exc}") from exc
        parsed.append(
            {
                "text": result.text,
                "reasoning": result.reasoning,
                "tool_calls": [
                    {"id": c.id, "name": c.name, "arguments": c.arguments} for c in result.tool_calls
                ],
                "ill_formed": result.ill_formed,
                "problems": result.problems,
            }
        )
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
                **p,
            }
            for t, p in zip(traj.turns, parsed, strict=True)
        ],
        "events": traj.events,
        "summary": {**summarize(traj), **human_view(traj, parsed, tok)},
    }


def human_view(traj, parsed: list[dict[str, Any]], tokenizer: Any, window: int = 24) -> dict[str, Any]:
    """What a person reads first, as decoded text (never byte-level BPE symbols such as ``Ġ``):
    ``conversation`` (each turn's row, finish reason, reasoning, text and tool calls) and
    ``forks`` (for each fork event, the decoded text of the row and of the new prompt around the
    first differing token, ``window`` tokens either side)."""
    conversation = [
        {
            "turn": t.index,
            "row": t.row,
            "finish_reason": t.finish_reason,
            "reasoning": p["reasoning"],
            "text": p["text"],
            "tool_calls": [
                f"{c['name']}({json.dumps(c['arguments'], ensure_ascii=False)})" for c in p["tool_calls"]
            ],
        }
        for t, p in zip(traj.turns, parsed, strict=True)
    ]
    forks = fork_texts(traj, tokenizer, window)
    return {"conversation": conversation, "forks": forks}


def fork_texts(traj, tokenizer: Any, window: int = 24) -> list[dict[str, Any]]:
    """For each fork event with a position: ``turn``, ``position``, and the decoded text around
    the first differing token (``window`` tokens either side) of the previous turn's row
    (``row_text``: prompt + sampled output) and of the new prompt (``prompt_text``)."""
    forks = []
    for ev in traj.events:
        if ev.get("kind") != "fork" or "position" not in ev or not 0 < ev["turn"] < len(traj.turns):
            continue
        before = traj.turns[ev["turn"] - 1]
        row_ids = before.prompt_ids + before.output_ids
        prompt = traj.turns[ev["turn"]].prompt_ids
        lo, hi = max(0, ev["position"] - window), ev["position"] + window
        forks.append(
            {
                "turn": ev["turn"],
                "position": ev["position"],
                "row_text": tokenizer.decode(row_ids[lo:hi], skip_special_tokens=False),
                "prompt_text": tokenizer.decode(prompt[lo:hi], skip_special_tokens=False),
            }
        )
    return forks


def _is_number(x: Any) -> bool:
    return is_real(x, finite=False)


def _check_output(k: int, item: dict[str, Any]) -> None:
    """A turn's output as the scripted backend would play it: ``text`` a string, ``token_ids`` a
    list of integers (not floats or booleans, which would be truncated to other tokens),
    ``logprobs`` a list of numbers."""
    if item.get("token_ids") is not None:
        ids = item["token_ids"]
        if not isinstance(ids, list) or not all(type(x) is int for x in ids):
            bad = ids if not isinstance(ids, list) else next(x for x in ids if type(x) is not int)
            raise ReplayInputError(f"turn {k}: output 'token_ids' must be a list of integers, got {bad!r}")
    elif not isinstance(item.get("text"), str):
        raise ReplayInputError(f"turn {k}: output 'text' must be a string, got {_kind(item.get('text'))}")
    lps = item.get("logprobs")
    if lps is not None and (not isinstance(lps, list) or not all(_is_number(x) for x in lps)):
        raise ReplayInputError(f"turn {k}: 'logprobs' must be a list of numbers, got {_kind(lps)}")


def _check_tools(what: str, tools: Any) -> None:
    from strands_art.serve.wire import RequestError, check_tools

    if tools is None:
        return
    try:
        check_tools(tools)
    except RequestError as exc:
        raise ReplayInputError(f"{what}: {exc}") from None


def _check_shape(spec: dict[str, Any]) -> None:
    """Refuse wrong JSON types before anything uses them (each message names the key)."""
    for key in ("tokenizer", "mode"):
        if spec.get(key) is not None and not isinstance(spec[key], str):
            raise ReplayInputError(f"'{key}' must be a string, got {type(spec[key]).__name__}")
    for key in ("chat_template_kwargs", "render"):
        if spec.get(key) is not None and not isinstance(spec[key], dict):
            raise ReplayInputError(f"'{key}' must be an object")
    _check_list_of_objects("'tools'", spec.get("tools"))
    _check_tools("'tools'", spec.get("tools"))
    for k, t in enumerate(spec["turns"]):
        _check_list_of_objects(f"turn {k}: 'tools'", t.get("tools"))
        _check_tools(f"turn {k}: 'tools'", t.get("tools"))
        if not isinstance(t.get("messages"), list):
            raise ReplayInputError(f"turn {k}: 'messages' must be a list, got {_kind(t.get('messages'))}")
        _check_list_of_objects(f"turn {k}: 'messages'", t["messages"])


def _check_size(spec: dict[str, Any], limit: int = MAX_TURN_CHARS) -> None:
    """Refuse a turn whose request holds more than ``limit`` characters of text (see
    :data:`MAX_TURN_CHARS`), naming the turn and its size."""
    for k, t in enumerate(spec["turns"]):
        size = _chars(t.get("messages")) + _chars(t.get("tools", spec.get("tools")))
        if size > limit:
            raise ReplayInputError(
                f"turn {k}: its messages and tools hold {size:,} characters of text, more than the "
                f"{limit:,} a replay takes (about 1M tokens, above any model's context window)"
            )


def _chars(value: Any) -> int:
    """Characters of every string in ``value`` (keys included), JSON-shaped, without recursion."""
    total, stack = 0, [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            total += len(v)
        elif isinstance(v, dict):
            total += sum(len(k) for k in v if isinstance(k, str))
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return total


def _check_list_of_objects(what: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(x, dict) for x in value):
        raise ReplayInputError(f"{what} must be a list of objects, got {_kind(value)}")


def _kind(value: Any) -> str:
    if isinstance(value, list) and any(not isinstance(x, dict) for x in value):
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


def spec_from_run(run_dir: str | Path, rollout_id: str, tokenizer: str | None = None) -> dict[str, Any]:
    """A replay file (the ``strands-art replay`` contract) for one stored rollout of a run.

    ``run_dir`` is a ``strands-art migrate`` / training run directory (its trajectory store is
    ``trajectories/trajectories.jsonl``) or a store directory itself. Each turn replays the
    stored chat messages and tools with the sampled token IDs, logprobs and finish reason; the
    tokenizer and history mode come from the run's ``config.json`` (``tokenizer`` or
    ``model``, ``history_mode``), a training run's ``train.json`` (``model``) and the rollout's
    ``metadata["history_mode"]``, unless ``tokenizer`` is given. The render inputs recorded with
    the rollout (``metadata["render"]``: template variables such as the pinned date, template
    and tokenizer hashes; :mod:`strands_art.render_inputs`) become the spec's
    ``chat_template_kwargs`` (over the config's) and ``render``, which :func:`replay` checks.

    Raises:
        ReplayInputError: no store there, no such rollout (the stored ids are named), a rollout
            stored without its messages, or no tokenizer known.
    """
    run_dir = Path(run_dir)
    store = run_dir / "trajectories" / "trajectories.jsonl"
    if not store.is_file():
        store = run_dir / "trajectories.jsonl"
    if not store.is_file():
        raise ReplayInputError(
            f"{run_dir}: no trajectories/trajectories.jsonl (not a strands-art run directory)"
        )
    found, ids = None, []
    for n, line in enumerate(store.read_text(encoding="utf-8").splitlines(), 1):
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn line from an interrupted write
        ids.append(d.get("rollout_id"))
        if d.get("rollout_id") == rollout_id:
            try:
                found = Trajectory.from_dict(d)  # the last stored copy wins (a resumed run)
            except (KeyError, TypeError, ValueError) as exc:
                raise ReplayInputError(f"{store}:{n}: unreadable trajectory {rollout_id!r}: {exc}") from exc
    if found is None:
        listed = ", ".join(map(str, ids[:20])) + (" ..." if len(ids) > 20 else "")
        raise ReplayInputError(f"no rollout {rollout_id!r} in {store} (stored: {listed or 'none'})")
    if not found.turns:
        raise ReplayInputError(f"rollout {rollout_id!r} has no turns")
    if any(not t.messages for t in found.turns):
        raise ReplayInputError(f"rollout {rollout_id!r} was stored without its chat messages (an older run)")
    config: dict[str, Any] = {}
    for file in ("config.json", "train.json"):  # a migrate run's, else a training run's settings
        if (run_dir / file).is_file():
            try:
                config = json.loads((run_dir / file).read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise ReplayInputError(f"{run_dir / file}: {exc}") from exc
            break
    name = tokenizer or config.get("tokenizer") or config.get("model")
    if not name:
        raise ReplayInputError(f"{run_dir}: no tokenizer in config.json or train.json; pass --tokenizer")
    render = found.metadata.get("render") if isinstance(found.metadata.get("render"), dict) else None
    kwargs = dict(config.get("chat_template_kwargs") or {})
    if render is not None:  # the variables the rollout was rendered with (its pinned date)
        kwargs.update(render.get("template_vars") or {})
    spec_extra: dict[str, Any] = {"chat_template_kwargs": kwargs} if kwargs else {}
    if render is not None:
        spec_extra["render"] = render
    return {
        "tokenizer": name,
        "mode": config.get("history_mode") or found.metadata.get("history_mode") or "tree",
        **spec_extra,
        "rollout_id": rollout_id,
        "reward": found.reward,
        "turns": [
            {
                "messages": t.messages,
                "tools": t.tools,
                "output": {"token_ids": t.output_ids},
                "logprobs": t.logprobs,
                "finish_reason": t.finish_reason,
            }
            for t in found.turns
        ],
    }
