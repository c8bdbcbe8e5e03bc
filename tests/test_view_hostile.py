# ruff: noqa: F811 - the run_dir fixture is imported from test_view_api
"""The viewer under attack (issue 25 item 7): odd and hostile run directories, paths and requests
must give a JSON answer (200 with the problem shown, or 400/403/404/405), never a 500, and never
write into the run directory. The browser side (payloads shown as text) is in test_view_browser."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import socket
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from strands_art.view.reader import RunView
from strands_art.view.server import SORT_KEYS, make_app
from tests.test_view_api import run_dir  # noqa: F401 - the fixture: a copy of the recorded run


async def answers(run_dir: Path, paths: list[str], status: int = 200, method: str = "GET") -> list:
    async with TestClient(TestServer(make_app(RunView(run_dir)))) as c:
        out = []
        for p in paths:
            r = await c.request(method, p)
            assert r.status == status, (p, r.status, await r.text())
            out.append(await r.json())
        return out


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


async def test_odd_results_records_sort_filter_and_page(run_dir: Path) -> None:
    """Mixed types under one key (a str reward next to floats, an int task), a NaN reward, a
    600-character rollout id (cut by clip) and a lone surrogate: every sort key, the id filter
    and the groups answer 200 (before: TypeError / AttributeError / UnicodeEncodeError, 500)."""
    recs = [
        {"rollout_id": "s1", "reward": "bad", "task": 7, "stop_reason": ["x"], "turns": "3"},
        {"rollout_id": "s2", "reward": float("nan"), "turns": 2},
        {"rollout_id": "L" * 600, "reward": 1.0, "task": "T" * 700},
    ]
    _append(run_dir / "results.jsonl", "".join(json.dumps(r) + "\n" for r in recs).encode())
    _append(run_dir / "results.jsonl", b'{"rollout_id": "sur\\ud800", "reward": 0.5}\n')
    paths = [f"/api/rollouts?sort={k}&desc={d}" for k in SORT_KEYS for d in (0, 1)]
    got = await answers(run_dir, [*paths, "/api/rollouts?q=LLLL", "/api/groups", "/api/run"])
    first = got[paths.index("/api/rollouts?sort=reward&desc=0")]
    assert first["all"] == 8
    by_reward = [r["reward"] for r in first["items"]]
    assert by_reward[:5] == sorted(by_reward[:5]) and "bad" in by_reward  # numbers, then strings
    ids = {r["rollout_id"] if isinstance(r["rollout_id"], str) else "cut" for r in first["items"]}
    assert "sur\ud800" in ids and "cut" in ids  # the surrogate comes back as a JSON escape
    assert got[-3]["total"] == 1  # the cut id is found by its head


async def test_unreadable_metrics_and_results_files(run_dir: Path, tmp_path: Path) -> None:
    """metrics.jsonl with NaN, non-object lines, invalid UTF-8, absurd nesting, or a directory;
    results.jsonl a directory: answered with what can be read and the problem named (before:
    500; then one bad line made the whole file read as [])."""
    (run_dir / "metrics.jsonl").write_bytes(b'{"kind": "train", "loss": NaN}\n[1, 2]\n5\n{"kind": "eval"}\n')
    [m] = await answers(run_dir, ["/api/metrics"])
    assert m["records"] == [{"kind": "train", "loss": "nan"}, {"kind": "eval"}]
    assert m["unreadable_lines"] == 2  # the two lines that are not JSON objects
    _append(run_dir / "metrics.jsonl", b'"\xff\xfe"\n{"kind": "train", "outer_batch": 1}\n')
    _append(run_dir / "metrics.jsonl", b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
    _append(run_dir / "metrics.jsonl", b'{"kind": "eval", "outer_batch": 2}\n{"kind": "tr')  # + a torn tail
    [m, run] = await answers(run_dir, ["/api/metrics", "/api/run"])  # before: RecursionError, 500
    assert m["records"] == [
        {"kind": "train", "loss": "nan"},
        {"kind": "eval"},
        {"kind": "train", "outer_batch": 1},
        {"kind": "eval", "outer_batch": 2},
    ]
    assert m["unreadable_lines"] == 4 and run["problems"]["unreadable_metrics_lines"] == 4
    assert "unreadable_metrics" not in run["problems"]  # the file is readable
    (run_dir / "metrics.jsonl").write_text('{"kind": "eval", "outer_batch": 0}\n')
    [m, run] = await answers(run_dir, ["/api/metrics", "/api/run"])
    assert m["unreadable_lines"] == 0 and "unreadable_metrics_lines" not in run["problems"]
    (run_dir / "metrics.jsonl").unlink()
    (run_dir / "metrics.jsonl").mkdir()
    (run_dir / "results.jsonl").unlink()
    (run_dir / "results.jsonl").mkdir()
    [m, run, items] = await answers(run_dir, ["/api/metrics", "/api/run", "/api/rollouts"])
    assert m["records"] == [] and run["problems"]["unreadable_metrics"] == 1
    assert "a directory, not a regular file" in run["problems"]["unreadable_results_file"]
    assert run["problems"]["unreadable_files"] == {"metrics.jsonl": "a directory, not a regular file"}
    assert items["all"] == 4  # the trajectory store still lists every rollout


async def test_file_route_refuses_what_it_cannot_read(run_dir: Path) -> None:
    """Very long paths (ENAMETOOLONG) are a 400, not a 500; traversal stays 403."""
    await answers(run_dir, ["/api/file?path=" + "a/" * 3000, "/api/file?path=" + "a" * 5000], 400)
    await answers(
        run_dir, ["/api/file?path=%2e%2e/%2e%2e/etc/passwd", "/api/file?path=..%2f..%2fetc%2fpasswd"], 403
    )


def _snapshot(d: Path) -> dict[str, str]:
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in d.rglob("*") if p.is_file()
    }


async def test_read_only_and_concurrent(run_dir: Path) -> None:
    """Other methods than GET/HEAD are 405; 60 concurrent requests while the run grows all
    answer; nothing in the run directory changes but what the test appended."""
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        await answers(run_dir, ["/api/run", "/api/rollouts", "/api/file?path=config.json"], 405, method)
    before = _snapshot(run_dir)
    async with TestClient(TestServer(make_app(RunView(run_dir)))) as c:
        paths = ["/api/rollouts?sort=reward", "/api/live", "/api/groups", "/api/rollout/alpha-r0",
                 "/api/rollout/alpha-r0/row/1", "/api/run"] * 10  # fmt: skip

        async def one(p: str) -> int:
            r = await c.get(p)
            await r.read()
            return r.status

        line = json.dumps({"rollout_id": "late", "reward": 1.0}) + "\n"
        tasks = [asyncio.create_task(one(p)) for p in paths]
        _append(run_dir / "results.jsonl", line.encode())
        assert set(await asyncio.gather(*tasks)) == {200}
    after = _snapshot(run_dir)
    assert {k for k in after if after[k] != before.get(k)} == {"results.jsonl"}


def test_cli_refuses_bad_ports_and_warns_off_loopback(run_dir: Path, capsys) -> None:
    """Out-of-range port: a usage error (before: OverflowError traceback, exit 1); a busy port
    fails before the tokenizer is loaded (before: ~15 s later); a RUN_DIR that is a file: exit 2;
    a non-loopback --host: a warning on stderr."""
    from strands_art.cli import main

    for bad in ("99999", "-1"):
        with pytest.raises(SystemExit) as e:
            main(["view", str(run_dir), "--port", bad])
        assert e.value.code == 2
    assert "port must be in 0..65535" in capsys.readouterr().err
    assert main(["view", str(run_dir / "config.json")]) == 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert main(["view", str(run_dir), "--port", str(s.getsockname()[1])]) == 2
    err = capsys.readouterr().err
    assert "no run directory" in err and "cannot listen on 127.0.0.1" in err
    assert main(["view", str(run_dir), "--host", "256.0.0.1", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "not loopback" in err and "cannot listen on 256.0.0.1:0" in err


def add_odd_trajectory(run_dir: Path, rid: str = "odd") -> None:
    """A copy of alpha-r1 (its Parquet part too) whose JSON holds what the trajectory type does
    not promise: events and messages that are not objects, tool_calls that are a string or hold
    null, markup and a bidi override in names, recovery notes that are a number, a 10 MB tool
    result. Appended as a raw line (a foreign or hand-edited writer)."""
    jsonl = run_dir / "trajectories" / "trajectories.jsonl"
    src = next(
        json.loads(x) for x in jsonl.read_text().splitlines() if x.startswith('{"rollout_id": "alpha-r1"')
    )
    src["rollout_id"] = rid
    src["turns"][-1]["messages"] += [
        {"role": "<script>alert(1)</script>", "content": 5},
        {"role": "tool", "content": [{"type": "image_url", "image_url": "javascript:alert(2)"}, 7, None]},
        {"role": "assistant", "content": None, "tool_calls": "x"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "\u202e<b>x", "arguments": {"a": 1}}}, None],
        },
        "a string message",
        None,
        {"role": "tool", "content": "B" * 10_000_000},
    ]
    src["events"] += [
        {"kind": "<img src=x onerror=alert(3)>", "turn": 0, "reason": "\u202eR"},
        "not an object",
        5,
    ]
    src["events"] += [
        {"kind": "fork", "turn": 99, "position": "x"},
        {"kind": "fork", "turn": 1, "position": "x"},
    ]
    src["metadata"]["ill_formed_turns"] = [{"turn": 0, "problems": 5}]
    src["metadata"]["recovered_calls"] = [{"turn": 0, "how": {"x": 1}}]
    rows = run_dir / "trajectories" / "rows"
    shutil.copy(rows / "part-alpha-r1.parquet", rows / f"part-{rid}.parquet")
    _append(jsonl, (json.dumps(src) + "\n").encode())


async def test_odd_trajectory_shapes(run_dir: Path) -> None:
    """Before: an event that is not an object raised AttributeError in the index, so the command
    died at start (and every API call of a live run answered 500 once such a line arrived)."""
    add_odd_trajectory(run_dir)
    items, d, row = await answers(run_dir, ["/api/rollouts", "/api/rollout/odd", "/api/rollout/odd/row/0"])
    assert "odd" in [r["rollout_id"] for r in items["items"]]
    assert d["turns"][0]["problems"] == [5] and d["turns"][0]["recovered"] == [{"x": 1}]
    assert [e["kind"] for e in d["events"]][-3:] == ["<img src=x onerror=alert(3)>", "fork", "fork"]
    assert d["turns"][-1]["messages"][-1]["content"]["size"] == 10_000_000
    assert row["sampled"] == sum(row["mask"]) > 0


class _RustLikeTokenizer:
    """Decodes IDs as ``<id>`` and, like the Rust tokenizer, raises on IDs that do not fit u32."""

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        if any(not 0 <= i < 2**32 for i in ids):
            raise OverflowError("number too small to fit in target type")
        return "".join(f"<{i}>" for i in ids)


async def test_token_ids_the_tokenizer_cannot_take(run_dir: Path) -> None:
    """A stored row holding -1 (before: OverflowError from the decoder, 500 on the row page and
    on the rollout page when it is sampled): decoded as empty text, the rest as usual."""
    from strands_art.store import TrajectoryStore
    from strands_art.trajectory import Row, Trajectory, Turn

    ids = [5, -1, -2]
    t = Trajectory(
        "neg", "g", [Turn(0, ids[:2], ids[2:], [-0.5], "stop")], [Row(ids, [0, 0, 1], [0, 0, -0.5], "neg")]
    )
    TrajectoryStore(run_dir / "trajectories").append(t)
    async with TestClient(TestServer(make_app(RunView(run_dir, _RustLikeTokenizer())))) as c:
        r = await c.get("/api/rollout/neg/row/0")
        assert r.status == 200, await r.text()
        assert (await r.json())["texts"] == {"5": "<5>", "-1": "", "-2": ""}
        r = await c.get("/api/rollout/neg")
        assert r.status == 200, await r.text()
        assert (await r.json())["turns"][0]["output_text"] == ""
