"""Check a recorded trajectory against the row invariants (docs/architecture.md, "Invariants"),
e.g. on real rollouts.

:func:`row_problems` returns what is wrong (empty when everything holds):

1. every sampled token of every turn sits in exactly one row, at its turn span, with loss mask 1
   and exactly the recorded logprob; the loss mask is 1 nowhere else;
2. the tokens a row holds before a turn's span are exactly the prompt IDs that turn sent to the
   backend (training context == inference context);
3. each row's lists are aligned (``Row.check``).

``python -m strands_art.rowcheck RUN_DIR/trajectories`` checks a whole store and prints one line
per rollout (rows, turns, forks/resets/heals by reason); exit code 1 if anything fails.
"""

from __future__ import annotations

import sys
from collections import Counter

from strands_art.trajectory import Trajectory


def row_problems(traj: Trajectory) -> list[str]:
    """Invariant violations of ``traj`` (see the module docstring); ``[]`` when all hold."""
    problems: list[str] = []
    holders: dict[int, list[int]] = {t.index: [] for t in traj.turns}
    for r, row in enumerate(traj.rows):
        try:
            row.check()
        except ValueError as exc:
            problems.append(f"row {r}: {exc}")
            continue
        if len(row.turns) != len(row.turn_spans):
            problems.append(f"row {r}: {len(row.turns)} turns but {len(row.turn_spans)} spans")
            continue
        for turn_index, (s, e) in zip(row.turns, row.turn_spans, strict=True):
            holders.setdefault(turn_index, []).append(r)
            if turn_index >= len(traj.turns):
                problems.append(f"row {r}: unknown turn {turn_index}")
                continue
            turn = traj.turns[turn_index]
            if row.input_ids[s:e] != turn.output_ids:
                problems.append(f"row {r}, turn {turn_index}: sampled tokens differ from the row")
            if row.loss_mask[s:e] != [1] * (e - s):
                problems.append(f"row {r}, turn {turn_index}: loss mask not 1 on every sampled token")
            if row.logprobs[s:e] != turn.logprobs:
                problems.append(f"row {r}, turn {turn_index}: logprobs differ from the recorded ones")
            if row.input_ids[:s] != turn.prompt_ids:
                problems.append(f"row {r}, turn {turn_index}: context differs from the prompt sent")
        spans = {i for s, e in row.turn_spans for i in range(s, e)}
        if any((m == 1) != (i in spans) for i, m in enumerate(row.loss_mask)):
            problems.append(f"row {r}: loss mask 1 outside the sampled spans")
    for turn_index, rows in holders.items():
        if len(rows) != 1:
            problems.append(f"turn {turn_index}: held by {len(rows)} rows (want exactly 1)")
    return problems


def summary(traj: Trajectory) -> str:
    """One line: rows, turns, sampled tokens, and the fork/reset/heal events by reason kind."""
    kinds = Counter(e["kind"] for e in traj.events)
    sampled = sum(len(t.output_ids) for t in traj.turns)
    events = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "no events"
    return f"{traj.rollout_id}: {len(traj.rows)} rows, {len(traj.turns)} turns, {sampled} sampled tokens; {events}"


def main(argv: list[str] | None = None) -> int:
    from strands_art.store import TrajectoryStore

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m strands_art.rowcheck TRAJECTORY_STORE_DIR", file=sys.stderr)
        return 2
    bad = 0
    for traj in TrajectoryStore(args[0]):
        problems = row_problems(traj)
        print(summary(traj) + ("; invariants hold" if not problems else f"; {len(problems)} PROBLEMS"))
        for p in problems:
            print(f"  {p}")
        bad += bool(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
