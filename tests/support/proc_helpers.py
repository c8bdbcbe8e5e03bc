"""Finding a test's marker processes in ``/proc`` (Linux), e.g. the ``sleep 301`` a runner left."""

from __future__ import annotations

from pathlib import Path

from strands_art.envs.migrationbench.run.reaper import processes


def sleeping(*durations: str) -> set[int]:
    """Pids of the ``sleep D`` processes for each ``D`` in ``durations`` (spelt as on the command line)."""
    wanted = [[b"sleep", d.encode()] for d in durations]
    found = set()
    for pid in processes():
        try:
            cmd = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd[:2] in wanted:
            found.add(pid)
    return found
