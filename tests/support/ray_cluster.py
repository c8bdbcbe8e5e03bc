"""A real multi-node Ray cluster on this machine for tests: ``ray start --head`` plus worker nodes.

Every node is its own ``ray start --block`` process (own raylet, object manager, agents), started
in a session of its own with free ports, a private ``--temp-dir`` and small ``--num-cpus``, so it
never joins or disturbs a user's cluster; :meth:`LocalCluster.stop` SIGKILLs each node's process
tree (never ``ray stop``, which would stop every Ray cluster of the machine).

The nodes' environment puts this checkout first on ``PYTHONPATH`` (the workers import
``strands_art`` and ``tests``), points :data:`~strands_art.envs.migrationbench.run.ray_runner.SCRATCH_ENV`
at the test's scratch directory, and makes the head's health checks fast, so a killed node is
declared dead within a few seconds instead of Ray's default half minute.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from strands_art.envs.migrationbench.run.ray_runner import SCRATCH_ENV
from strands_art.envs.migrationbench.run.reaper import descendants, processes

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
FAST_HEALTH_CHECKS = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    "RAY_raylet_start_wait_time_s": "180",  # a node's registration on a loaded 2-core machine
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cmdline(pid: int) -> list[str]:
    try:
        raw = (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def is_ray_process(pid: int) -> bool:
    """A Ray process: a worker (``ray::...`` title) or one of Ray's own binaries and scripts."""
    args = cmdline(pid)
    return bool(args) and (args[0].startswith("ray::") or any("site-packages/ray/" in a for a in args))


@dataclass
class Node:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    resources: dict[str, float]

    def tree(self) -> list[int]:
        """The node's ``ray start`` process and everything below it (now)."""
        return [self.proc.pid, *(p.pid for p in descendants(self.proc.pid, processes()))]

    def kill_ray_processes(self) -> list[int]:
        """SIGKILL the node's Ray processes (raylet, workers, agents, the ``ray start`` parent),
        as when its machine dies, but leave what the workers started themselves (reapers,
        sandboxes): those must end on their own. Returns the pids killed."""
        killed = [pid for pid in self.tree() if pid == self.proc.pid or is_ray_process(pid)]
        for pid in killed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()
        return killed

    def kill_all(self) -> None:
        for pid in reversed(self.tree()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)


@dataclass
class LocalCluster:
    """Start with :meth:`start_head`, add nodes with :meth:`add_node`; always :meth:`stop`."""

    tmp: Path
    scratch: Path
    port: int = 0
    token: str = ""
    nodes: list[Node] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def auth_env(self) -> dict[str, str]:
        """Ray's token authentication with this cluster's own token (never ``~/.ray``'s): the
        nodes get it at start, a driver needs it in its environment before ``ray.init``."""
        if not self.token:
            self.token = secrets.token_hex(32)
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token}

    def _env(self) -> dict[str, str]:
        env = {**os.environ, **FAST_HEALTH_CHECKS, **self.auth_env(), SCRATCH_ENV: str(self.scratch)}
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH")) if p
        )
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        return env

    def _start(self, name: str, argv: list[str], resources: dict[str, float], num_cpus: int) -> Node:
        ports = [
            "--node-manager-port", str(free_port()),
            "--object-manager-port", str(free_port()),
            "--dashboard-agent-listen-port", str(free_port()),
            "--dashboard-agent-grpc-port", str(free_port()),
            "--runtime-env-agent-port", str(free_port()),
            "--metrics-export-port", str(free_port()),
        ]  # fmt: skip
        log = self.tmp / f"{name}.log"
        cmd = [RAY, "start", "--block", *argv, *ports, "--num-cpus", str(num_cpus)]
        cmd += ["--resources", json.dumps(resources), "--disable-usage-stats", "--log-style", "record"]
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=self._env(), start_new_session=True, cwd=ROOT
            )
        node = Node(name, proc, log, resources)
        self.nodes.append(node)
        return node

    def start_head(self, num_cpus: int = 1, resources: dict[str, float] | None = None) -> Node:
        self.port = free_port()
        argv = ["--head", "--port", str(self.port), "--node-ip-address", "127.0.0.1"]
        argv += ["--include-dashboard", "false"]
        argv += ["--temp-dir", str(self.tmp / "ray")]
        return self._start("head", argv, resources or {}, num_cpus)

    def wait_started(self, node: Node, timeout_s: float = 120.0) -> None:
        """Wait for ``ray start`` to report the node up (its log); raises if it exited."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if "Ray runtime started" in node.log.read_text(errors="replace"):
                return
            if node.proc.poll() is not None:
                raise RuntimeError(f"ray node {node.name} exited: {node.log.read_text()[-3000:]}")
            time.sleep(0.2)
        raise TimeoutError(f"ray node {node.name} not started after {timeout_s} s")

    def add_node(self, name: str, resources: dict[str, float], num_cpus: int = 1) -> Node:
        argv = ["--address", self.address, "--node-ip-address", "127.0.0.1"]
        return self._start(name, argv, resources, num_cpus)

    def wait_for_nodes(self, count: int, timeout_s: float = 120.0) -> None:
        """Wait until ``count`` nodes are alive (asks through a connected driver: ``ray.nodes()``)."""
        import ray

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            alive = [n for n in ray.nodes() if n.get("Alive")]
            if len(alive) >= count:
                return
            for node in self.nodes:
                if node.proc.poll() is not None:
                    raise RuntimeError(f"ray node {node.name} exited: {node.log.read_text()[-3000:]}")
            time.sleep(0.5)
        raise TimeoutError(f"{count} Ray nodes not alive after {timeout_s} s")

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.kill_all()
