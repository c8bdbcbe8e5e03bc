"""TrajectoryStore: append-only JSONL + Parquet, crash-safe reads."""

from __future__ import annotations

from strands_art.store import TrajectoryStore
from strands_art.trajectory import Row, Trajectory, Turn


def traj(rid: str, reward: float) -> Trajectory:
    t = Trajectory(rollout_id=rid, group_id="g")
    t.turns.append(Turn(index=0, prompt_ids=[1, 2], output_ids=[3], logprobs=[-0.5], finish_reason="stop"))
    row = Row(input_ids=[], loss_mask=[], logprobs=[], rollout_id=rid, group_id="g")
    row.append_context([1, 2])
    row.append_output(0, [3], [-0.5])
    t.rows.append(row)
    t.set_reward(reward)
    return t


def test_round_trip_jsonl_and_parquet(tmp_path):
    store = TrajectoryStore(tmp_path)
    store.append(traj("a", 1.0))
    store.append(traj("b", 0.5))
    back = list(store)
    assert [t.rollout_id for t in back] == ["a", "b"]
    assert back[1].rows[0].input_ids == [1, 2, 3] and back[1].rows[0].loss_mask == [0, 0, 1]
    assert back[1].reward == 0.5 and back[1].turns[0].logprobs == [-0.5]
    table = store.read_rows_table()
    assert table.num_rows == 2
    assert table.column("input_ids").to_pylist() == [[1, 2, 3], [1, 2, 3]]
    assert sorted(table.column("reward").to_pylist()) == [0.5, 1.0]
    assert store.rollout_ids() == {"a", "b"}


def test_a_torn_last_line_loses_only_that_rollout(tmp_path):
    store = TrajectoryStore(tmp_path)
    store.append(traj("a", 1.0))
    with open(store.jsonl, "a") as f:  # a crash in the middle of writing rollout b
        f.write('{"rollout_id": "b", "rows": [')
    assert [t.rollout_id for t in store] == ["a"]
    store2 = TrajectoryStore(tmp_path)
    assert store2.rollout_ids() == {"a"}
    # no half-written parquet part is ever visible
    assert [p.name for p in (tmp_path / "rows").iterdir()] == ["part-a.parquet"]


def test_appending_after_a_torn_line_keeps_the_new_rollout(tmp_path):
    store = TrajectoryStore(tmp_path)
    store.append(traj("a", 1.0))
    with open(store.jsonl, "a") as f:
        f.write('{"rollout_id": "b", "ro')
    store.append(traj("c", 0.0))
    assert [t.rollout_id for t in store] == ["a", "c"]


def test_a_non_utf8_file_name_in_metadata_is_stored_as_replacement(tmp_path):
    """Issue 22: a file name read with ``surrogateescape`` (bytes ``\\xff``) in the evaluation's
    details raised UnicodeEncodeError after the Parquet part was written (an orphan part)."""
    import json

    import pytest

    store = TrajectoryStore(tmp_path)
    t = traj("a", 0.0)
    name = "src/" + b"\xff.java".decode("utf-8", errors="surrogateescape")
    t.metadata["evaluation"] = {"details": {"left_out_of_build": [name]}}
    t.rows[0].metadata["file"] = name
    store.append(t)
    [back] = list(store)
    assert back.metadata["evaluation"]["details"]["left_out_of_build"] == ["src/\ufffd.java"]
    table = store.read_rows_table()
    assert json.loads(table.column("metadata")[0].as_py())["file"] == "src/\ufffd.java"
    assert store.complete_ids() == {"a"}

    # a failed JSONL append leaves no part behind (here: the JSONL path is a directory)
    other = TrajectoryStore(tmp_path / "broken")
    other.jsonl.mkdir()
    with pytest.raises(IsADirectoryError):
        other.append(traj("b", 1.0))
    assert list((other.root / "rows").iterdir()) == []


def test_a_trajectory_without_a_group_round_trips(tmp_path):
    """A rollout outside any GRPO group (``group_id=None``: a replay, an HTTP-front session without
    one) is stored with a null group, not refused by the UTF-8 clean-up of the text columns."""
    store = TrajectoryStore(tmp_path)
    t = traj("solo", 1.0)
    t.group_id = None
    t.rows[0].group_id = None
    store.append(t)
    [back] = list(store)
    assert back.group_id is None and back.rows[0].input_ids == [1, 2, 3]
    assert store.read_rows_table().column("group_id").to_pylist() == [None]


def test_ids_that_clean_to_one_name_keep_parts_of_their_own(tmp_path):
    """``a/b`` and ``a_b`` once shared ``part-a_b.parquet`` (the second overwrote the first's
    rows); an id of 500 characters made a file name too long to create."""
    store = TrajectoryStore(tmp_path)
    ids = ["a_b", "a/b", "a:b", "x" * 500]
    for i, rid in enumerate(ids):
        store.append(traj(rid, float(i)))
    assert len({store.part_path(rid) for rid in ids}) == 4
    assert store.part_path("a_b").name == "part-a_b.parquet"  # plain ids keep their name
    table = store.read_rows_table()
    assert sorted(
        zip(table.column("rollout_id").to_pylist(), table.column("reward").to_pylist(), strict=True)
    ) == sorted((rid, float(i)) for i, rid in enumerate(ids))


def test_a_fifo_in_place_of_the_jsonl_is_refused_at_once(tmp_path):
    """Reading a store whose trajectories.jsonl is a FIFO (a hostile run directory) raises at
    once: ``train --resume`` blocked forever waiting for a writer."""
    import errno
    import os

    import pytest

    store = TrajectoryStore(tmp_path)
    os.mkfifo(store.jsonl)
    for read in (store.rollout_ids, store.complete_ids, store.scan, lambda: store.retain(set())):
        with pytest.raises(OSError) as exc:
            read()
        assert exc.value.errno == errno.EINVAL and "not a regular file" in str(exc.value)


def test_retain_never_writes_through_planted_symlinks(tmp_path):
    """``trajectories.jsonl.tmp`` and ``.torn`` planted as symlinks to files outside the store:
    retain() rewrote the first one's target with the kept lines (and left trajectories.jsonl a
    symlink to it) and appended the torn line to the second one's. Now the .tmp is replaced by a
    file of the store's own and a .torn symlink is refused; the outside files are untouched."""
    import errno

    import pytest

    store = TrajectoryStore(tmp_path / "store")
    for rid in ("a", "b"):
        store.append(traj(rid, 1.0))
    with open(store.jsonl, "a") as f:
        f.write('{"rollout_id": "torn')  # a torn tail: retain writes the .torn file and the .tmp
    victims = {name: tmp_path / f"victim{name}" for name in (".tmp", ".torn")}
    for victim in victims.values():
        victim.write_text("PRECIOUS\n")
    (tmp_path / "store" / "trajectories.jsonl.tmp").symlink_to(victims[".tmp"])
    (tmp_path / "store" / "trajectories.jsonl.torn").symlink_to(victims[".torn"])
    with pytest.raises(OSError) as exc:
        store.retain({"a"})
    assert exc.value.errno == errno.ELOOP
    (tmp_path / "store" / "trajectories.jsonl.torn").unlink()
    store.retain({"a"})
    assert [v.read_text() for v in victims.values()] == ["PRECIOUS\n", "PRECIOUS\n"]
    assert not store.jsonl.is_symlink() and [t.rollout_id for t in store] == ["a"]
    assert (tmp_path / "store" / "trajectories.jsonl.torn").read_text() == '{"rollout_id": "torn\n'
