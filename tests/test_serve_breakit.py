"""Break-it findings on the HTTP front and `serve` (issue 28 item 10): lone surrogates refused
before anything is opened or recorded, the store never loses a closed rollout, a header-read
timeout, `serve` checks its address and --store before creating anything."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
import pytest
from support.serve_helpers import gateway, running_front

from strands_art.backends.base import InvalidSample, SampleResult, check_sample
from strands_art.cli import build_parser, main
from strands_art.serve.cli import validate_serve_args
from strands_art.store import TrajectoryStore

USER = [{"role": "user", "content": "What is 2 + 2?"}]
ANSWER = [{"text": "Four.<|im_end|>"}] * 3


async def test_lone_surrogate_in_group_id_is_400_and_opens_nothing(qwen3, tmp_path):
    gw = gateway(qwen3, ANSWER)
    store = TrajectoryStore(tmp_path / "store")
    async with running_front(gw, store=store) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post(
            "/sessions",
            content=b'{"rollout_id": "r1", "group_id": "g\\ud800"}',
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 400 and r.json()["error"]["param"] == "group_id"
        assert "U+D800" in r.json()["error"]["message"] and not gw.is_open("r1")
        # the same id opens cleanly afterwards, and its closed rollout reaches the store
        assert (await http.post("/sessions", json={"rollout_id": "r1", "group_id": "g"})).status_code == 201
        r = await http.post("/rollouts/r1/v1/chat/completions", json={"messages": USER})
        assert r.status_code == 200
        assert (await http.post("/sessions/r1/close", json={"reward": 1.0})).status_code == 200
    [stored] = list(store)
    assert stored.rollout_id == "r1" and stored.group_id == "g" and len(stored.turns) == 1


@pytest.mark.parametrize(
    "body",
    [
        b'{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": '
        b'{"name": "add", "description": "adds \\udc80", "parameters": {"type": "object"}}}]}',
        b'{"messages": [{"role": "user", "content": "hi"}], "model": "p\\ud800"}',
        b'{"messages": [{"role": "user", "content": "hi"}], "metadata": {"k": "\\udfff"}}',
    ],
    ids=["tool description", "model", "metadata"],
)
async def test_lone_surrogate_in_a_request_field_is_400_before_auto_open(qwen3, body):
    gw = gateway(qwen3, ANSWER)
    async with running_front(gw, auto_open=True) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post(
            "/rollouts/r/v1/chat/completions", content=body, headers={"Content-Type": "application/json"}
        )
    assert r.status_code == 400, r.text
    assert "lone surrogate" in r.json()["error"]["message"] and r.json()["error"]["param"]
    assert gw.backend.calls == 0 and not gw.is_open("r")


async def test_a_trajectory_the_store_cannot_write_keeps_its_session_open(qwen3, tmp_path):
    gw = gateway(qwen3, ANSWER)
    gw.open_session("r", "g")
    store = TrajectoryStore(tmp_path / "store")
    async with running_front(gw, store=store) as base, httpx.AsyncClient(base_url=base) as http:
        assert (
            await http.post("/rollouts/r/v1/chat/completions", json={"messages": USER})
        ).status_code == 200
        # a value the Parquet schema cannot hold (loss_mask is int8): store.encode refuses it
        # (a lone surrogate no longer does: the store writes U+FFFD for it, see test_store.py)
        gw.trajectory("r").rows[0].loss_mask[0] = 300
        r = await http.post("/sessions/r/close", json={"reward": 0.5})
    assert r.status_code == 500 and "stays open" in r.json()["error"]["message"]
    assert gw.is_open("r") and len(gw.trajectory("r").turns) == 1 and list(store) == []


async def test_slow_header_connections_are_closed_after_the_header_timeout(qwen3):
    gw = gateway(qwen3, ANSWER)
    gw.open_session("r")
    async with running_front(gw, header_timeout=0.5) as base:
        port = int(base.rsplit(":", 1)[1])
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(20)]
        for _, writer in conns:
            writer.write(b"POST /rollouts/r/v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # no end
            await writer.drain()
        # each is closed by the server: EOF, well before the 60 s a slow client would hold it
        closed = await asyncio.wait_for(asyncio.gather(*(r.read() for r, _ in conns)), timeout=20)
        assert closed == [b""] * 20
        for _, writer in conns:
            writer.close()
        async with httpx.AsyncClient(base_url=base) as http:  # a normal client is served
            assert (
                await http.post("/rollouts/r/v1/chat/completions", json={"messages": USER})
            ).status_code == 200


def _serve(capsys, tmp_path: Path, *extra: str) -> tuple[int, str]:
    script = tmp_path / "script.json"
    script.write_text('[{"text": "hi<|im_end|>"}]')
    code = main(["serve", "--backend", "scripted", "--tokenizer", "qwen3", "--script", str(script), *extra])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return code, lines[0]


def test_serve_on_a_busy_port_creates_no_store(capsys, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        code, line = _serve(capsys, tmp_path, "--port", str(port), "--store", str(tmp_path / "store"))
    assert code == 2 and f"cannot listen on 127.0.0.1:{port}" in line
    assert not (tmp_path / "store").exists()


def test_serve_on_a_bad_host_creates_no_store(capsys, tmp_path):
    code, line = _serve(capsys, tmp_path, "--host", "no-such-host.invalid", "--store", str(tmp_path / "s"))
    assert code == 2 and "cannot listen on no-such-host.invalid" in line
    assert not (tmp_path / "s").exists()


def test_serve_refuses_a_store_that_is_a_file(capsys, tmp_path):
    (tmp_path / "f").write_text("x")
    code, line = _serve(capsys, tmp_path, "--store", str(tmp_path / "f"))
    assert code == 2 and "exists and is not a directory" in line
    assert (tmp_path / "f").read_text() == "x"


@pytest.mark.parametrize("value", [-1e300, -3.5e38, float("-inf")])
def test_check_sample_refuses_logprobs_beyond_float32(value):
    with pytest.raises(InvalidSample, match="float32"):
        check_sample(SampleResult([1, 2], [-0.5, value], "stop"), 100, 10)


def test_check_sample_keeps_the_float32_range():
    check_sample(SampleResult([1, 2], [-3.4e38, 0.0], "stop"), 100, 10)


def test_serve_offers_llamacpp_and_defaults_to_the_models_preferred_backend(capsys):
    from strands_art.registry import LLAMACPP_ALIASES

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert "llamacpp" in capsys.readouterr().out
    args = build_parser().parse_args(["serve", "--model", next(iter(LLAMACPP_ALIASES))])
    validate_serve_args(args)
    assert args.backend == "llamacpp"
    args.backend, args.model = None, "smollm2"
    validate_serve_args(args)
    assert args.backend == "transformers"
