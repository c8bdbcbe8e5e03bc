"""The follow-up command a run prints must run where the person stands (newcomer pass: after
``./scripts/migrate.sh`` a bare ``strands-art view ...`` answered "command not found")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from strands_art.invocation import strands_art_command, view_command

SCRIPT = Path(sys.executable).parent / "strands-art"
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="strands-art script not installed here")


def test_off_path_the_command_is_the_environments_script_relative_to_here(monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(SCRIPT.parents[2])  # the checkout holding .venv
    command = strands_art_command()
    assert command == str(SCRIPT.relative_to(SCRIPT.parents[2]))
    assert view_command("runs/migrate-1") == f"{command} view runs/migrate-1"
    help_text = subprocess.run([*command.split(), "view", "--help"], capture_output=True, text=True)
    assert help_text.returncode == 0 and "run directory" in help_text.stdout


def test_on_path_it_is_the_bare_name_and_odd_paths_are_quoted(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", f"{SCRIPT.parent}{os.pathsep}/usr/bin:/bin")
    assert strands_art_command() == "strands-art"
    assert view_command("runs/a b") == "strands-art view 'runs/a b'"
    monkeypatch.chdir(tmp_path)  # outside the checkout: an absolute path
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert strands_art_command() == str(SCRIPT)


def test_migrate_sh_runs_where_it_is_called_from(tmp_path) -> None:
    """``scripts/migrate.sh`` from another directory resolves the person's relative paths there
    (newcomer pass: it changed to the checkout, so ``--resume runs/...`` named the checkout's)."""
    repo = Path(__file__).resolve().parents[1]
    if not (repo / ".venv" / "bin" / "strands-art").exists():
        pytest.skip("no .venv in this checkout (scripts/bootstrap.sh makes it)")
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / "config.json").write_text('{"not_a_migrate_key": 1}')
    out = subprocess.run(
        ["bash", str(repo / "scripts" / "migrate.sh"), "--resume", "runs/r"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr[-2000:]
    assert (
        "--resume runs/r: runs/r/config.json holds keys migrate does not know: 'not_a_migrate_key'"
        in out.stderr
    )
