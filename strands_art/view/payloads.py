"""What the rollout and row pages receive: one rollout's conversation and events, one row's tokens.

Both read one rollout from disk (:meth:`.reader.RunView.trajectory`, and the rollout's Parquet
part for a row's tokens); text fields are clipped (:func:`.reader.clip`).
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

from strands_art.backends.base import turn_seed
from strands_art.replay import fork_texts
from strands_art.trajectory import Trajectory
from strands_art.validation import is_int

from .reader import RunView, _events, clip


def rollout_payload(view: RunView, rid: str) -> dict[str, Any]:
    """``/api/rollout/<id>``: the rollout's results record, turns (the messages new at each turn,
    the sampled output decoded, stop reason, token counts, timings, seed, policy version,
    recovery notes), events (forks with the decoded text on both sides), rows, and its group
    (rollout id, reward, advantage of every member).

    Raises:
        KeyError: no stored trajectory ``rid``. ValueError: its line is unreadable.
    """
    t = view.trajectory(rid)
    meta = t.metadata
    seed = meta.get("seed")
    recovered = _by_turn(meta.get("recovered_calls"))
    ill = _by_turn(meta.get("ill_formed_turns"))
    turns, previous = [], []
    for tn in t.turns:
        shared = len(previous) if tn.messages[: len(previous)] == previous else 0
        turns.append(
            {
                "index": tn.index,
                "row": tn.row,
                "finish_reason": tn.finish_reason,
                "prompt_tokens": len(tn.prompt_ids),
                "sampled_tokens": len(tn.output_ids),
                "timings": {k: round(v, 4) for k, v in tn.timings.items() if isinstance(v, (int, float))},
                "seed": turn_seed(seed, tn.index, t.rollout_id) if isinstance(seed, int) else None,
                "policy_version": tn.policy_version,
                "ill_formed": tn.ill_formed,
                "problems": _listed(ill.get(tn.index, {}).get("problems")),
                "recovered": _listed(recovered.get(tn.index, {}).get("how")),
                "tags": tn.tags,
                "history_rewritten": bool(previous) and shared == 0,
                "messages_from": shared,
                "messages": clip(tn.messages[shared:]),
                "output_text": clip(view.text(tn.output_ids)),
                "mean_logprob": _mean(tn.logprobs),
            }
        )
        previous = tn.messages
    texts = (
        {(f["turn"], f["position"]): f for f in fork_texts(_forks_only(t), view.tokenizer)}
        if view.tokenizer
        else {}
    )
    events = []
    for ev in _events(t):
        item = clip(dict(ev), 2000)
        f = texts.get((ev.get("turn"), ev.get("position")))
        if f is not None:
            item["row_text"], item["prompt_text"] = clip(f["row_text"]), clip(f["prompt_text"])
        item["at"] = _event_at(t, ev)
        events.append(item)
    items = view.rollouts()
    mine = next((r["group"] for r in items if r["rollout_id"] == rid), t.group_id or meta.get("task") or rid)
    group = [
        {
            k: r.get(k)
            for k in ("rollout_id", "reward", "advantage", "stop_reason", "zero_variance", "excluded")
        }
        for r in items
        if r["group"] == mine
    ]
    return {
        "rollout_id": t.rollout_id,
        "group_id": t.group_id,
        "reward": t.reward,
        "result": clip(view.results.get(rid), 2000),
        "metadata": clip(meta, 4000),
        "tools": [clip((spec.get("function") or spec), 600) for spec in (t.turns[0].tools or [])]
        if t.turns
        else [],
        "turns": turns,
        "events": events,
        "rows": [
            {"index": i, "tokens": len(r), "sampled": r.num_sampled, "turns": r.turns, "spans": r.turn_spans}
            for i, r in enumerate(t.rows)
        ],
        "group": group,
        "group_name": mine,
        "split": meta.get("split"),
        "outer_batch": meta.get("outer_batch"),
        "advantage": next((r.get("advantage") for r in items if r["rollout_id"] == rid), None),
        "decoded": view.tokenizer is not None,
    }


def row_payload(view: RunView, rid: str, index: int) -> dict[str, Any]:
    """``/api/rollout/<id>/row/<k>``: every token of row ``k`` (``ids``, ``mask``, ``logprobs``
    rounded to 4 decimals, ``texts``: decoded text per distinct id), read from the rollout's
    Parquet part (the rows the trainer reads; ``part_missing`` and the JSONL copy when it is
    gone), with ``turns`` (turn, start, end of each sampled span, policy version) and ``markers``
    (turn starts, forks, heals and resets at their token index).

    Raises:
        KeyError: no such rollout or row. ValueError: an unreadable line or part.
    """
    t = view.trajectory(rid)
    if not 0 <= index < len(t.rows):
        raise KeyError(f"rollout {rid} has {len(t.rows)} row(s); no row {index}")
    jrow = t.rows[index]
    part_missing, part_error = False, None
    try:
        table = view.read_part(rid, ["row_index", "input_ids", "loss_mask", "logprobs", "turns", "metadata"])
        rows = table.to_pylist()
        prow = next((r for r in rows if r["row_index"] == index), None)
        if prow is None:
            raise ValueError(f"the Parquet part of {rid} has no row {index}")
        ids, mask, lps = prow["input_ids"], prow["loss_mask"], prow["logprobs"]
        metadata = json.loads(prow["metadata"] or "{}")
    except FileNotFoundError:
        part_missing = True
        ids, mask, lps, metadata = jrow.input_ids, jrow.loss_mask, jrow.logprobs, jrow.metadata
    except (ValueError, OSError) as exc:  # a corrupt part: say so, show the JSONL copy
        part_error = str(exc)[:500]
        ids, mask, lps, metadata = jrow.input_ids, jrow.loss_mask, jrow.logprobs, jrow.metadata
    versions = metadata.get("policy_versions") or {}
    spans = [
        {"turn": turn, "start": s, "end": e, "policy_version": versions.get(str(turn))}
        for turn, (s, e) in zip(jrow.turns, jrow.turn_spans, strict=False)
    ]
    return {
        "rollout_id": rid,
        "row": index,
        "rows": len(t.rows),
        "reward": t.reward,
        "ids": ids,
        "mask": mask,
        "logprobs": _rounded(lps),
        "texts": view.token_texts(ids),
        "special": sorted(view.special_ids() & set(ids)),
        "turns": spans,
        "markers": _markers(t, index, spans),
        "sampled": sum(mask),
        "part_missing": part_missing,
        "part_error": part_error,
        "metadata": clip(metadata, 2000),
        "trained": trained_payload(view, t, index, len(ids)),
    }


TOKEN_KEYS = (
    "loss_mask",
    "trainer_logprobs",
    "sampler_logprobs",
    "old_logprobs",
    "importance_weight",
    "clipped",
)
GAPS_SHOWN = 20


def trained_payload(view: RunView, t: Trajectory, index: int, n: int) -> dict[str, Any] | None:
    """Row ``index`` of ``t`` as the trainer trained it (``rows/ob-NNNNNN.trained.parquet``):
    ``advantage``, ``excluded``, ``forwarded``, ``step``, the per-token lists (rounded to 4
    decimals; NaN as a string), ``trained_tokens`` (the loss mask's sum) and ``gaps``: the
    :data:`GAPS_SHOWN` trained tokens with the largest ``|trainer - sampler|`` logprob, largest
    first. None for a rollout of no training batch, or one whose batch has no file yet;
    ``{"error": ...}`` when the file is unreadable or its lists do not match the row's length."""
    meta = t.metadata
    b = meta.get("outer_batch")
    if meta.get("split") != "train" or not is_int(b):
        return None
    try:
        rec = view.trained.row(b, t.rollout_id, index)
    except ValueError as exc:
        return {"error": str(exc)[:300]}
    if rec is None:
        return None
    out: dict[str, Any] = {k: rec.get(k) for k in ("advantage", "excluded", "forwarded", "step")}
    if not rec.get("forwarded"):
        return out
    lists = {k: rec.get(k) or [] for k in TOKEN_KEYS}
    if any(len(v) != n for v in lists.values()):
        return {**out, "error": f"the trained lists do not have the row's {n} tokens"}
    if any(not is_int(m) for k in ("loss_mask", "clipped") for m in lists[k]):
        return {**out, "error": "the trained loss mask or clip flags hold a null"}
    for k in ("trainer_logprobs", "sampler_logprobs", "old_logprobs", "importance_weight"):
        out[k] = _rounded(lists[k])
    out["loss_mask"], out["clipped"] = lists["loss_mask"], lists["clipped"]
    out["trained_tokens"] = sum(lists["loss_mask"])
    out["clipped_tokens"] = sum(lists["clipped"])
    gaps = [
        (abs(tr - sa), i)
        for i, (m, tr, sa) in enumerate(
            zip(lists["loss_mask"], lists["trainer_logprobs"], lists["sampler_logprobs"], strict=True)
        )
        if m and isinstance(tr, float) and math.isfinite(tr) and isinstance(sa, float) and math.isfinite(sa)
    ]
    gaps.sort(reverse=True)
    out["gaps"] = [
        {
            "pos": i,
            "trainer": round(lists["trainer_logprobs"][i], 4),
            "sampler": round(lists["sampler_logprobs"][i], 4),
            "gap": round(lists["trainer_logprobs"][i] - lists["sampler_logprobs"][i], 4),
        }
        for _, i in gaps[:GAPS_SHOWN]
    ]
    return out


def _markers(t: Trajectory, index: int, spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [{"pos": s["start"], "kind": "turn", "label": f"turn {s['turn']} sampled"} for s in spans]
    for ev in _events(t):
        at = _event_at(t, ev)
        if at is None:
            continue
        for row, pos, label in at:
            if row == index:
                out.append({"pos": pos, "kind": str(ev.get("kind")), "label": label, "turn": ev.get("turn")})
    return sorted(out, key=lambda m: m["pos"])


def _event_at(t: Trajectory, ev: dict[str, Any]) -> list[tuple[int, int, str]] | None:
    """``[(row, token index, label)]`` where an event shows in the row pages (None: nowhere)."""
    turn = ev.get("turn")
    if not isinstance(turn, int) or not 0 <= turn < len(t.turns):
        return None
    row = t.turns[turn].row
    kind = ev.get("kind")
    if kind == "fork" and isinstance(ev.get("position"), int) and turn > 0:
        before = t.turns[turn - 1].row
        pos = ev["position"]
        return [
            (before, pos, f"fork: turn {turn}'s prompt differs from this row here (continues in row {row})"),
            (row, pos, f"fork: this row leaves row {before} here (turn {turn})"),
        ]
    r = t.rows[row] if 0 <= row < len(t.rows) else None
    if r is None:
        return None
    k = r.turns.index(turn) if turn in r.turns else -1
    start = r.turn_spans[k - 1][1] if k > 0 else (r.turn_spans[0][0] if k == 0 and r.turn_spans else 0)
    if kind == "reset" and isinstance(ev.get("kept_tokens"), int):
        start = ev["kept_tokens"]
    return [(row, start, f"{kind} before turn {turn}: {ev.get('reason')}")]


def _rounded(xs: list[float]) -> list[Any]:
    """Logprobs to 4 decimals (NaN and infinities as strings: JSON has none)."""
    import numpy as np

    arr = np.round(np.asarray(xs, dtype=np.float64), 4)
    if np.isfinite(arr).all():
        return arr.tolist()
    return [x if math.isfinite(x) else str(x) for x in arr.tolist()]


def _forks_only(t: Trajectory) -> Trajectory:
    """A shallow copy of ``t`` whose events are only its well-formed forks (integer turn and
    position): what :func:`~strands_art.replay.fork_texts` can read, whatever the line holds."""
    out = copy.copy(t)
    out.events = [
        ev
        for ev in _events(t)
        if ev.get("kind") == "fork" and all(is_int(ev.get(k)) for k in ("turn", "position"))
    ]
    return out


def _listed(x: Any) -> list[Any]:
    """``x`` as a list (None: empty; one value: a list of it), clipped."""
    return clip(x if isinstance(x, list) else [] if x is None else [x], 2000)


def _by_turn(items: Any) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("turn"), int):
            out[item["turn"]] = item
    return out


def _mean(xs: list[float]) -> float | None:
    vals = [x for x in xs if isinstance(x, (int, float)) and math.isfinite(x)]
    return round(sum(vals) / len(vals), 4) if vals else None
