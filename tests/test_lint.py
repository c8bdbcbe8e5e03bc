"""The repository as the linter and formatter configured in pyproject.toml see it: ``ruff check``
and ``ruff format --check`` find nothing (source, tests, benches, examples and the Python blocks of
docs/). A failure prints ruff's own findings."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).with_name("ruff")


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    exe = str(RUFF) if RUFF.exists() else shutil.which("ruff")
    if exe is None:
        pytest.fail("ruff is not installed: it is a dev dependency (pip install -e '.[dev]')")
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args", [("check", "."), ("format", "--check", "--output-format", "concise", ".")])
def test_ruff_finds_nothing(args: tuple[str, ...]) -> None:
    done = ruff(*args)
    assert done.returncode == 0, done.stdout + done.stderr
