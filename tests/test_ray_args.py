"""``migrate --ray`` without a cluster: the options, their checks, the sweep of dead attempts, and
that nothing imports Ray unless ``--ray`` is given (the cluster tests: tests/test_ray_rollouts.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from strands_art.cli import build_parser
from strands_art.envs.migrationbench.run.ray_runner import ATTEMPT_PREFIX, sweep
from strands_art.envs.migrationbench.run.rundir import open_run_dir
from strands_art.envs.migrationbench.run.runner import main_from_args

ROOT = Path(__file__).resolve().parents[1]


def test_ray_address_forms() -> None:
    parse = build_parser().parse_args
    assert parse(["migrate"]).ray is None
    assert parse(["migrate", "--ray"]).ray == "local"
    assert parse(["migrate", "--ray", "auto"]).ray == "auto"
    args = parse(["migrate", "--ray", "10.0.0.5:6379", "--ray-cpus", "2", "--ray-memory-gb", "3"])
    assert (args.ray, args.ray_cpus, args.ray_memory_gb, args.ray_retries) == ("10.0.0.5:6379", 2.0, 3.0, 3)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--ray", "", "--backend", "transformers"], "--ray must be auto, HOST:PORT"),
        (["--ray", "a b", "--backend", "transformers"], "--ray must be auto, HOST:PORT"),
        (["--ray", "--ray-cpus", "0", "--backend", "transformers"], "--ray-cpus"),
        (["--ray", "--ray-memory-gb", "nan", "--backend", "transformers"], "--ray-memory-gb"),
        (["--ray", "--ray-retries", "-1", "--backend", "transformers"], "--ray-retries"),
        (["--ray", "--backend", "litellm", "--model", "openai/gpt-4o"], "token-capturing backends only"),
        (
            ["--ray", "--records", "r.csv", "--backend", "transformers"],
            "--ray with --records is not supported",
        ),
    ],
)
def test_bad_ray_options_stop_before_anything_is_written(tmp_path: Path, capsys, argv, message) -> None:
    run_dir = tmp_path / "run"
    args = build_parser().parse_args(["migrate", "--run-dir", str(run_dir), *argv])
    assert main_from_args(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not run_dir.exists()


def test_sweep_removes_dead_attempts_only(tmp_path: Path) -> None:
    live = open_run_dir(tmp_path / f"{ATTEMPT_PREFIX}live")  # holds its lock: a running attempt
    dead = open_run_dir(tmp_path / f"{ATTEMPT_PREFIX}dead")
    (dead.path / "workspaces" / "w1").mkdir(parents=True)
    (dead.path / "workspaces" / "w1" / "Main.java").write_text("class Main {}")
    dead.close()  # its process is gone: the lock is free
    other = tmp_path / "not-an-attempt"
    other.mkdir()
    try:
        assert sweep(tmp_path) == 1
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"{ATTEMPT_PREFIX}live", "not-an-attempt"]
        assert sweep(tmp_path) == 0
    finally:
        live.close()
    assert sweep(tmp_path) == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["not-an-attempt"]
    assert sweep(tmp_path / "missing") == 0


def test_cli_and_package_do_not_import_ray() -> None:
    code = (
        "import json, sys, strands_art\n"
        "from strands_art.cli import build_parser\n"
        "build_parser().parse_args(['migrate', '--ray'])\n"
        "import strands_art.envs.migrationbench.run.runner, strands_art.envs.migrationbench.run.ray_runner\n"
        "print(json.dumps('ray' in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) is False


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("address", [":80", "host:", "host:99999", "host:x"])
def test_malformed_ray_host_port_is_refused_in_one_line(tmp_path: Path, capsys, address) -> None:
    run_dir = tmp_path / "run"
    args = build_parser().parse_args(
        ["migrate", "--run-dir", str(run_dir), "--ray", address, "--backend", "transformers"]
    )
    assert main_from_args(args) == 2
    err = capsys.readouterr().err
    assert "--ray must be auto, HOST:PORT" in err and err.count("\n") == 1, err
    assert not run_dir.exists()


def test_unreachable_ray_address_is_refused_before_ray_init(monkeypatch) -> None:
    """A HOST:PORT nothing listens on: refused by a TCP probe, not after Ray's minutes of retries."""
    ray = pytest.importorskip("ray")
    from strands_art.envs.migrationbench.run.ray_runner import connect as migrate_connect
    from strands_art.training.ray_rollouts import connect as train_connect
    from strands_art.validation import UsageError

    def no_init(*a, **k):
        raise AssertionError("ray.init reached for an unreachable address")

    monkeypatch.setattr(ray, "init", no_init)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    address = f"127.0.0.1:{_closed_port()}"
    with pytest.raises(UsageError, match="nothing answers"):
        migrate_connect(address, slots=1)
    with pytest.raises(ValueError, match="nothing answers"):
        train_connect(address, slots=1, resources={})
