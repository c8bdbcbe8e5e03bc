"""The viewer's JSON API and the readers under it (no browser: tests/test_view_browser.py drives
the pages). Served by the real aiohttp app over a copy of the recorded run (tests/data/view-run)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given, settings
from hypothesis import strategies as st

from strands_art.envs.migrationbench.run.rundir import scan_results
from strands_art.store import TrajectoryStore
from strands_art.trajectory import Row, Trajectory, Turn
from strands_art.view.reader import FIELD_LIMIT, RunView
from strands_art.view.server import make_app

DATA = Path(__file__).parent / "data" / "view-run"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    shutil.copytree(DATA, d)
    return d


@pytest.fixture
async def client(run_dir: Path):
    view = RunView(run_dir)
    async with TestClient(TestServer(make_app(view))) as c:
        yield c


async def get(client: TestClient, path: str, status: int = 200):
    r = await client.get(path)
    assert r.status == status, await r.text()
    assert r.headers["Content-Security-Policy"].startswith("default-src 'none'")
    return await r.json()


async def test_rollouts_sorted_filtered_paged_with_advantages(client: TestClient) -> None:
    d = await get(client, "/api/rollouts?sort=reward&desc=1")
    ids = [r["rollout_id"] for r in d["items"]]
    assert ids[0] == "compiler-props-r0" and d["total"] == d["all"] == 4
    by = {r["rollout_id"]: r for r in d["items"]}
    assert by["compiler-props-r0"]["advantage"] == pytest.approx(0.7071, abs=1e-4)
    assert by["compiler-props-r1"]["advantage"] == pytest.approx(-0.7071, abs=1e-4)
    assert by["alpha-r0"]["zero_variance"] and not by["compiler-props-r0"]["zero_variance"]
    forks = await get(client, "/api/rollouts?event=fork")
    assert sorted(r["rollout_id"] for r in forks["items"]) == ["alpha-r0", "compiler-props-r1"]
    page = await get(client, "/api/rollouts?offset=1&limit=2")
    assert [r["rollout_id"] for r in page["items"]] == ids_in_file(DATA)[1:3]
    groups = await get(client, "/api/groups")
    assert groups["total"] == 2 and groups["zero_variance"] == 1
    await get(client, "/api/rollouts?sort=bogus", 400)
    await get(client, "/api/rollouts?limit=0", 400)
    await get(client, "/api/rollouts?offset=x", 400)


def ids_in_file(run_dir: Path) -> list[str]:
    return [json.loads(line)["rollout_id"] for line in (run_dir / "results.jsonl").read_text().splitlines()]


async def test_row_is_read_from_the_parquet_part(client: TestClient, run_dir: Path) -> None:
    store = TrajectoryStore(run_dir / "trajectories")
    want = [r for r in store.read_part("compiler-props-r1").to_pylist() if r["row_index"] == 1][0]
    d = await get(client, "/api/rollout/compiler-props-r1/row/1")
    assert d["ids"] == want["input_ids"] and d["mask"] == want["loss_mask"]
    assert d["sampled"] == sum(want["loss_mask"]) and not d["part_missing"]
    assert d["texts"] is None  # no tokenizer given to this view
    [fork] = [m for m in d["markers"] if m["kind"] == "fork"]
    [ev] = [
        e for e in next(t for t in store if t.rollout_id == "compiler-props-r1").events if e["kind"] == "fork"
    ]
    assert fork["pos"] == ev["position"]
    await get(client, "/api/rollout/compiler-props-r1/row/2", 404)
    await get(client, "/api/rollout/compiler-props-r1/row/x", 400)
    assert "no stored trajectory" in (await get(client, "/api/rollout/nope", 404))["error"]


async def test_huge_fields_are_cut_with_their_size(client: TestClient, run_dir: Path) -> None:
    store = TrajectoryStore(run_dir / "trajectories")
    t = next(t for t in store if t.rollout_id == "alpha-r1")
    t.rollout_id = "alpha-big"
    t.turns[1].messages[-1]["content"] = "A" * 100_000 + "<script>"
    store.append(t)  # the real writer
    d = await get(client, "/api/rollout/alpha-big")
    content = d["turns"][1]["messages"][-1]["content"]
    assert content["truncated"] is True and content["size"] == 100_008
    assert content["head"] == "A" * FIELD_LIMIT


async def test_paths_outside_the_run_directory_are_refused(client: TestClient, run_dir: Path) -> None:
    ok = await get(client, "/api/file?path=logs/alpha-r0.eval.json")
    assert json.loads(ok["text"])["reward"] == 0.0
    (run_dir / "logs" / "escape.json").symlink_to("/etc/passwd")
    for bad in ("../../etc/passwd", "/etc/passwd", "logs/escape.json", "logs/../../x"):
        assert "outside the run directory" in (await get(client, f"/api/file?path={bad}", 403))["error"]
    assert "not a usable path" in (await get(client, "/api/file?path=logs/a%00b", 400))["error"]
    r = await client.get("/static/..%2Fserver.py")
    assert r.status == 404
    r = await client.get("/static/run.js")
    assert r.status == 200 and "renderTable" in await r.text()


async def test_hard_links_are_refused_like_symlinks(
    client: TestClient, run_dir: Path, tmp_path: Path
) -> None:
    """A hard link in the run directory may be the same file as one outside it (a secret the
    run's writer linked in): refused with the symlinks' 403 and error shape, nothing of it sent
    (before: served, the secret's text in the answer)."""
    secret = tmp_path / "outside-secret.txt"
    secret.write_text("SECRET-TOKEN\n")
    os.link(secret, run_dir / "logs" / "linked.json")
    d = await get(client, "/api/file?path=logs/linked.json", 403)
    assert list(d) == ["error"] and "outside the run directory" in d["error"] and "2 hard links" in d["error"]
    assert "SECRET" not in json.dumps(d)
    (run_dir / "logs" / "escape.json").symlink_to(secret)
    sym = await get(client, "/api/file?path=logs/escape.json", 403)
    assert list(sym) == list(d)  # the same shape as a symlink that points out
    secret.unlink()  # one link left: an ordinary file of the run again
    ok = await get(client, "/api/file?path=logs/linked.json")
    assert ok["text"] == "SECRET-TOKEN\n" and ok["size"] == 13


async def test_torn_and_missing_are_reported(client: TestClient, run_dir: Path) -> None:
    with open(run_dir / "results.jsonl", "a") as f:
        f.write('{"rollout_id": "x", "rew')
    with open(run_dir / "trajectories" / "trajectories.jsonl", "a") as f:
        f.write('{"rollout_id": "y", "gro')
    (run_dir / "trajectories" / "rows" / "part-alpha-r0.parquet").unlink()
    d = await get(client, "/api/run")
    assert d["problems"]["torn_results_bytes"] == len('{"rollout_id": "x", "rew')
    assert d["problems"]["torn_trajectory_bytes"] == len('{"rollout_id": "y", "gro')
    assert d["missing_parts"] == ["alpha-r0"] and d["rollouts"] == 4
    row = await get(client, "/api/rollout/alpha-r0/row/0")
    assert row["part_missing"] is True and sum(row["mask"]) == row["sampled"] > 0


def test_scan_results_follows_a_growing_file(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    assert scan_results(path) == ([], 0, 0, 0)
    path.write_text('{"rollout_id": "a"}\nnot json\n{"rollout_id": "b", "re')
    recs, pos, bad, torn = scan_results(path)
    assert [r["rollout_id"] for r in recs] == ["a"] and bad == 1 and torn == len('{"rollout_id": "b", "re')
    with open(path, "a") as f:
        f.write('ward": 1}\n')
    recs, pos2, bad, torn = scan_results(path, pos)
    assert recs == [{"rollout_id": "b", "reward": 1}] and torn == 0 and pos2 == path.stat().st_size


IDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None)
@given(ids=st.lists(IDS, min_size=1, max_size=6), cut=st.integers(0, 5), torn=st.binary(max_size=40))
def test_scan_indexes_every_line_incrementally(
    tmp_path_factory, ids: list[str], cut: int, torn: bytes
) -> None:
    """Scanning in two steps (as a live view does) finds exactly the lines a full read finds,
    each line's id from its head, and read_at gives back the stored trajectory."""
    store = TrajectoryStore(tmp_path_factory.mktemp("s"))
    cut = min(cut, len(ids))
    trajs = [
        Trajectory(
            rid, "g", [Turn(0, [1, 2], [3], [-0.5], "stop")], [Row([1, 2, 3], [0, 0, 1], [0, 0, -0.5], rid)]
        )
        for rid in ids
    ]
    for t in trajs[:cut]:
        store.append(t)
    first, pos, _ = store.scan()
    for t in trajs[cut:]:
        store.append(t)
    torn = torn.replace(b"\n", b"")
    with open(store.jsonl, "ab") as f:
        f.write(torn)
    rest, end, tail = store.scan(pos)
    lines = first + rest
    assert [ln.rollout_id for ln in lines] == ids
    assert [store.read_at(ln).rows[0].input_ids for ln in lines] == [[1, 2, 3]] * len(ids)
    assert tail == len(torn) and end == os.path.getsize(store.jsonl) - len(torn)
    assert store.scan() == (lines, end, tail)


def test_decoder_decodes_as_the_tokenizer_without_torch(qwen3) -> None:
    """The server's decoder (the tokenizer's Rust backend, loaded in a child process) gives the
    same text as the transformers tokenizer, token by token and for a whole row, and the same
    special tokens; the server process never imports torch for it."""
    import subprocess
    import sys

    from strands_art.view.decoder import Decoder, load_decoder

    dec = load_decoder("qwen3")
    assert isinstance(dec, Decoder)
    row = next(iter(TrajectoryStore(DATA / "trajectories"))).rows[0].input_ids
    assert dec.decode(row) == qwen3.decode(row, skip_special_tokens=False)
    assert [dec.decode([i]) for i in row[:300]] == [qwen3.decode([i]) for i in row[:300]]
    assert {151644, 151645, 151657} <= set(dec.all_special_ids)  # <|im_start|>, <|im_end|>, <tool_call>
    code = "import sys; from strands_art.view.decoder import load_decoder; load_decoder('qwen3'); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_a_bare_store_of_the_http_front(run_dir: Path) -> None:
    """``strands-art serve --store DIR`` leaves only a trajectory store: rollouts, rewards and
    advantages come from the trajectories themselves."""
    view = RunView(run_dir / "trajectories")
    async with TestClient(TestServer(make_app(view))) as c:
        d = await get(c, "/api/rollouts?sort=rollout_id")
        by = {r["rollout_id"]: r for r in d["items"]}
        assert sorted(by) == ["alpha-r0", "alpha-r1", "compiler-props-r0", "compiler-props-r1"]
        assert by["compiler-props-r0"]["reward"] == 1.0 and by["compiler-props-r0"]["advantage"] > 0
        assert by["alpha-r0"]["events"] == {"fork": 1} and by["alpha-r0"]["rows"] == 2
        row = await get(c, "/api/rollout/alpha-r0/row/1")
        assert row["sampled"] == sum(row["mask"]) > 0


def test_view_command_refuses_a_missing_directory(tmp_path: Path, capsys) -> None:
    from strands_art.cli import main

    assert main(["view", str(tmp_path / "nope")]) == 2
    assert f"strands-art view: no run directory at {tmp_path / 'nope'}" in capsys.readouterr().err


def test_view_command_warns_about_a_directory_that_holds_no_run(tmp_path: Path, capsys) -> None:
    """A tasks directory or an empty one is served (a run may start there), with a warning first."""
    import socket

    from strands_art.cli import main

    (tmp_path / "jaxb-0000009").mkdir()  # e.g. make-tasks' output, not a run
    with socket.socket() as busy:  # the port is taken: the command stops after its checks
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        assert main(["view", str(tmp_path), "--port", str(busy.getsockname()[1])]) == 2
    err = capsys.readouterr().err
    assert f"warning: {tmp_path} holds no run (none of config.json, train.json, results.jsonl" in err
    (tmp_path / "results.jsonl").write_text("")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        assert main(["view", str(tmp_path), "--port", str(busy.getsockname()[1])]) == 2
    assert "holds no run" not in capsys.readouterr().err


async def test_the_code_that_trained_a_run_is_sent_with_the_run(
    client: TestClient, run_dir: Path, tmp_path: Path
) -> None:
    """``code.jsonl`` (strands_art/training/provenance.py) reaches the page line by line; a line
    cut short is skipped, a symlinked file is named under problems and read as no lines."""
    assert (await get(client, "/api/run"))["code"] == []  # a run of an older strands-art
    lines = [
        {"at": "2026-12-05T07:13:16Z", "resume": False, "from_batch": 0, "commit": "a" * 40, "dirty": False},
        {"at": "2026-12-05T09:13:16Z", "resume": True, "from_batch": 2, "commit": "b" * 40, "dirty": True,
         "python": "3.11.7", "torch": "x" * 500},
    ]  # fmt: skip
    (run_dir / "code.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"at": "2026-')
    d = await get(client, "/api/run")
    assert [c["commit"] for c in d["code"]] == ["a" * 40, "b" * 40]
    assert [c["from_batch"] for c in d["code"]] == [0, 2] and d["code"][1]["dirty"] is True
    assert d["code"][1]["torch"] == {"truncated": True, "head": "x" * 200, "size": 500}  # clipped
    assert "code.jsonl" not in d["problems"].get("unreadable_files", {})
    (run_dir / "code.jsonl").unlink()
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text(json.dumps(lines[0]) + "\n")
    (run_dir / "code.jsonl").symlink_to(outside)
    d = await get(client, "/api/run")
    assert d["code"] == [] and "code.jsonl" in d["problems"]["unreadable_files"]
