"""Memory accounting that counts shared memory (issue 22, item 3): each sandboxed command runs in
its own memory cgroup, so a 5 GiB anonymous MAP_SHARED mapping with every page touched is killed
inside the real sandbox, where ``RLIMIT_DATA`` alone lets it through.

The limits here are small (256 MiB) so that the test allocates little before the kill; the
default (``Limits().memory_bytes``, 4 GiB) is below the 5 GiB of the attack too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from strands_art.envs.sandbox import (
    Limits,
    Sandbox,
    allocate_identity,
    chown_tree,
    memcg,
    release_identity,
    run_sync,
)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

SHARED = """
import mmap, sys
size = int(sys.argv[1]) << 20
m = mmap.mmap(-1, size, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
for i in range(0, size, 4096):
    m[i] = 1
print("touched", size >> 20, "MiB", flush=True)
"""
PRIVATE = SHARED.replace("mmap.MAP_SHARED", "mmap.MAP_PRIVATE")


def _run(program: str, mib: int, limits: Limits) -> tuple[int | None, str]:
    identity = allocate_identity()
    tmp = Path(tempfile.mkdtemp(prefix="strands-art-memcg-"))
    try:
        chown_tree(tmp, identity)
        with open(tmp.parent / f"{tmp.name}.log", "w+b") as out:
            code, timed_out = run_sync(
                Sandbox(identity, writable=(tmp,), limits=limits),
                ["python3", "-c", program, str(mib)],
                cwd=tmp,
                env={"HOME": str(tmp)},
                timeout_s=120,
                stdout=out,
            )
            out.seek(0)
            text = out.read().decode("utf-8", errors="replace")
        (tmp.parent / f"{tmp.name}.log").unlink()
    finally:
        shutil.rmtree(tmp)
        release_identity(identity)
    assert not timed_out
    return code, text


@pytest.fixture
def cgroups() -> memcg.CgroupSupport:
    support = memcg.memory_cgroups()
    if support.base is None:
        pytest.skip(f"no memory cgroup here: {support.why}")
    return support


def test_a_5gib_shared_mapping_is_killed_in_the_sandbox(cgroups: memcg.CgroupSupport) -> None:
    limits = Limits(memory_bytes=256 << 20)
    code, text = _run(SHARED, 5 << 10, limits)
    assert code != 0 and "touched" not in text, (code, text)
    # the control: the same program under the limit completes, so the kill was the limit's
    code, text = _run(SHARED, 64, limits)
    assert code == 0 and "touched 64 MiB" in text, text
    # every per-command cgroup of this process is gone afterwards (other runs on the machine
    # have their own, named by their pid)
    mine = f"{memcg.PREFIX}{os.getpid()}-*"
    left = list(cgroups.base.glob(mine))
    for _ in range(100):
        if not left:
            break
        time.sleep(0.05)
        left = list(cgroups.base.glob(mine))
    assert left == []


def test_without_a_cgroup_shared_memory_escapes_the_process_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gap the cgroup closes, measured: RLIMIT_DATA refuses a private mapping over it but
    not a shared one."""
    monkeypatch.setattr(memcg, "_support", memcg.CgroupSupport(None, 0, "disabled by the test"))
    limits = Limits(data_bytes=256 << 20)
    code, text = _run(PRIVATE, 512, limits)
    assert code != 0 and "touched" not in text and "Cannot allocate memory" in text, text
    code, text = _run(SHARED, 512, limits)
    assert code == 0 and "touched 512 MiB" in text, text


def test_default_memory_limit_is_below_the_attack() -> None:
    assert Limits().memory_bytes == 4 << 30 < 5 << 30
    with pytest.raises(ValueError, match="memory_bytes"):
        Limits(memory_bytes=0)


def test_the_cgroup_wrapper_fails_closed(cgroups: memcg.CgroupSupport, tmp_path: Path) -> None:
    """A cgroup the command cannot enter stops it before it runs."""
    cgroup = memcg.CommandCgroup(tmp_path / "missing", cgroups.version)
    done = subprocess.run(cgroup.wrap(["echo", "ran"]), capture_output=True, text=True)
    assert done.returncode != 0 and "ran" not in done.stdout


def test_start_up_clean_up_leaves_live_processes_cgroups_alone() -> None:
    """Two runs on one machine: the second's start-up clean-up must not remove the first's
    cgroup made but not yet entered (its command would then fail closed)."""
    assert memcg._owner_alive(f"{memcg.PREFIX}{os.getpid()}-7")
    dead = _a_dead_pid()
    assert not memcg._owner_alive(f"{memcg.PREFIX}{dead}-0")
    assert not memcg._owner_alive(f"{memcg.PREFIX}junk")


def _a_dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid
