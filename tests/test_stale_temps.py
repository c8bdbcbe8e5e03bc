"""A copy a killed process was writing into the model cache (``<target>.tmp<PID>``: a converted
model is gigabytes, and SIGTERM or SIGKILL skips every clean-up) is removed by the next writer;
a live process's copy is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from strands_art.model_cache import remove_stale_temps, temp_beside


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_dead_writers_copy_is_removed_a_live_ones_kept(tmp_path: Path) -> None:
    target = tmp_path / "qwen2.5-coder-0.5b-instruct-q4_k_m-transformers"
    dead, alive = _dead_pid(), os.getpid()
    (tmp_path / f"{target.name}.tmp{dead}").mkdir()
    (tmp_path / f"{target.name}.tmp{dead}" / "model.safetensors").write_bytes(b"\0" * 1024)
    (tmp_path / f"{target.name}.tmp{dead}-140000").write_bytes(b"part")  # a joined GGUF's temp file
    (tmp_path / f"{target.name}.tmp{alive}").mkdir()
    (tmp_path / "other.tmp1").mkdir()  # another target's: not ours to judge
    (tmp_path / f"{target.name}.tmpX").mkdir()  # not a PID
    tmp = temp_beside(target)
    assert tmp == tmp_path / f"{target.name}.tmp{alive}"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{target.name}.tmp{alive}", "other.tmp1", f"{target.name}.tmpX"]
    )
    assert remove_stale_temps(target) == []  # nothing left to remove
    assert remove_stale_temps(tmp_path / "missing" / "x") == []  # no cache directory yet
