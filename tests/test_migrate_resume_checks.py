"""``strands-art migrate --resume`` refuses before it starts anything (issue 48 part 4): a
``config.json`` with a key migrate does not know (before: set on the options and silently
unused), and a run directory another process holds even with ``--ray`` (before: refused only
after the Ray cluster had started, 41 s and more)."""

from __future__ import annotations

import fcntl
import json
import os
import sys
from pathlib import Path

from strands_art.cli import build_parser, main


def _config(run: Path, tmp_path: Path, **extra: object) -> None:
    tasks = tmp_path / "tasks"
    (tasks / "alpha" / "repo").mkdir(parents=True)
    args = build_parser().parse_args(
        ["migrate", "--tasks-dir", str(tasks), "--tasks", "alpha", "--run-dir", str(run), "--no-plot"]
    )
    cfg = {k: v for k, v in vars(args).items() if k != "func"}
    cfg.update(extra)
    run.mkdir()
    (run / "config.json").write_text(json.dumps(cfg))


def test_an_unknown_key_in_config_json_is_refused(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    _config(run, tmp_path, max_turnz=3)
    before = sorted(p.name for p in run.iterdir())
    assert main(["migrate", "--resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"--resume {run}: {run / 'config.json'} holds keys migrate does not know: 'max_turnz'" in err
    assert sorted(p.name for p in run.iterdir()) == before  # nothing written, no lock taken


def test_a_busy_run_directory_is_refused_before_ray_starts(tmp_path: Path, capsys) -> None:
    """The lock held (as a running ``migrate --ray`` holds it): the second ``--resume`` stops at
    once with the holder's pid, never reaching ``ray.init``."""
    run = tmp_path / "run"
    _config(run, tmp_path, ray="local", backend="vllm", base_url="http://127.0.0.1:9")
    fd = os.open(run / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, json.dumps({"pid": 4242, "token": "x"}).encode(), 0)
        assert main(["migrate", "--resume", str(run)]) == 2
    finally:
        os.close(fd)
    err = capsys.readouterr().err
    assert f"run directory {run} is in use by another strands-art process (pid 4242)" in err, err
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()  # never started
