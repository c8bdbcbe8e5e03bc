"""Property: whatever sequence of kills hits the commit protocol, reconcile leaves each finished
rollout exactly once in results.jsonl, trajectories.jsonl and the Parquet parts, and never loses
a rollout whose results line was complete."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from strands_art.envs.migrationbench.run.rundir import reconcile
from strands_art.store import TrajectoryStore
from strands_art.trajectory import Row, Trajectory

# how far a rollout's commit got before the kill (the runner's order: Parquet, JSONL, results)
STEPS = ("nothing", "parquet_tmp", "parquet", "jsonl_torn", "jsonl", "results_torn", "results")


def _commit(run: Path, rid: str, step: int, attempt: int) -> None:
    store = TrajectoryStore(run / "trajectories")
    t = Trajectory(rid, "g", rows=[Row([1, 2, attempt], [0, 1, 1], [0.0, -0.5, -0.25], rid)])
    t.set_reward(float(attempt % 2))
    if step >= 1:
        store.part_path(rid).with_suffix(".parquet.tmp").write_bytes(b"PAR1 half")
    if step >= 2:
        store._write_parquet(t)
    line = json.dumps(t.to_dict())
    if step >= 3:
        with open(store.jsonl, "a") as f:
            f.write(line if step >= 4 else line[: len(line) // 2])
            if step >= 4:
                f.write("\n")
    record = json.dumps({"rollout_id": rid, "reward": t.reward, "token_capture": True, "attempt": attempt})
    if step >= 5:
        with open(run / "results.jsonl", "a") as f:
            f.write(record + "\n" if step >= 6 else record[:10])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, len(STEPS) - 1)), min_size=1, max_size=12))
def test_any_kill_sequence_leaves_each_rollout_once(runs: list[tuple[int, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        committed: dict[str, int] = {}
        for attempt, (k, step) in enumerate(runs):
            rid = f"task-r{k}"
            done = reconcile(run).done  # what a resume sees: finished rollouts are not run again
            if rid in done:
                continue
            _commit(run, rid, step, attempt)
            if step == len(STEPS) - 1:
                committed[rid] = attempt
        report = reconcile(run)
        store = TrajectoryStore(run / "trajectories")
        ids = [t.rollout_id for t in store]
        assert sorted(report.done) == sorted(ids) == sorted(committed)  # each once, none lost
        assert sorted(p.name for p in (store.root / "rows").iterdir()) == sorted(
            store.part_path(r).name for r in committed
        )
        rows = store.read_rows_table().to_pylist()
        assert sorted((r["rollout_id"], r["input_ids"][2]) for r in rows) == sorted(committed.items())
        records = (
            [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()] if committed else []
        )
        assert sorted((r["rollout_id"], r["attempt"]) for r in records) == sorted(committed.items())
        for t in store:  # the trajectory kept is the one the results line describes
            assert t.rows[0].input_ids[2] == committed[t.rollout_id]
