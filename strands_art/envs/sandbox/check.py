"""``strands-art sandbox-check``: prove on this machine that the sandbox holds.

Each check runs an escape attempt *inside* a fresh sandbox and then looks at what the *host*
sees (a file that must not exist, a listener that must not be reached, a process that must be
gone), not only at exit codes. It prints one line per check and exits 0 only when all pass.
``--maven`` adds a real Maven build inside the sandbox (JDK 17 + Debian's Maven repository).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from .bwrap import Sandbox
from .memcg import memory_cgroups
from .policy import Limits, allocate_identity, chown_tree, release_identity
from .probe import SandboxUnavailable, probe_sandbox
from .process import run_sync


class _Box:
    """A throw-away sandbox with a writable directory, for the checks."""

    def __init__(self, limits: Limits) -> None:
        self.identity = allocate_identity()
        self.base = Path(tempfile.mkdtemp(prefix="strands-art-check-"))
        os.chmod(self.base, 0o711)
        self.ws = self.base / "ws"
        self.ws.mkdir()
        chown_tree(self.ws, self.identity)
        os.chmod(self.ws, 0o700)
        self.sandbox = Sandbox(self.identity, writable=(self.ws,), limits=limits)

    def run(
        self, script: str, timeout_s: float = 30.0, env: dict[str, str] | None = None
    ) -> tuple[int | None, str]:
        log = self.base / "out.log"
        with open(log, "w+b") as out:
            code, _ = run_sync(
                self.sandbox,
                ["bash", "-c", script],
                cwd=self.ws,
                env={"HOME": str(self.ws), **(env or {})},
                timeout_s=timeout_s,
                stdout=out,
            )
            out.seek(0)
            return code, out.read().decode("utf-8", errors="replace")

    def close(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)
        release_identity(self.identity)


def _host_paths_absent(paths: list[Path]) -> bool:
    found = [p for p in paths if os.path.lexists(p)]
    for p in found:
        p.unlink()
    return not found


def check_all(maven: bool = False) -> list[tuple[str, bool, str]]:
    """Run every check; ``(name, passed, detail)`` per check.

    Raises:
        SandboxUnavailable: the sandbox does not start at all.
    """
    probe_sandbox()
    tag = uuid.uuid4().hex[:10]
    box = _Box(Limits(processes=256, data_bytes=1 << 30, file_bytes=1 << 20, cpu_s=60, memory_bytes=1 << 30))
    results: list[tuple[str, bool, str]] = []

    def check(name: str, fn: Callable[[], tuple[bool, str]]) -> None:
        try:
            ok, detail = fn()
        except Exception as exc:  # noqa: BLE001 - a check that crashes is a failed check
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        results.append((name, ok, detail))

    try:
        host_root_file = Path("/") / f"strands-art-escape-{tag}"
        host_etc_file = Path("/etc") / f"strands-art-escape-{tag}"
        host_var_tmp = Path("/var/tmp") / f"strands-art-escape-{tag}"

        def uid() -> tuple[bool, str]:
            code, out = box.run("touch mine; id -u")
            owner = (box.ws / "mine").stat().st_uid
            return (
                owner != 0 or os.geteuid() != 0
            ) and code == 0, f"files written inside belong to host uid {owner}"

        def remount() -> tuple[bool, str]:
            code, out = box.run(
                f"mount -o remount,rw / ; mount -t tmpfs none /usr; touch {host_root_file} {host_etc_file} "
                f"{host_var_tmp}; echo done"
            )
            ok = _host_paths_absent([host_root_file, host_etc_file, host_var_tmp])
            return ok, "remount refused; nothing written outside the workspace" if ok else out[-300:]

        def root_secret() -> tuple[bool, str]:
            secret = box.ws / "root-only"
            secret.write_text("s3cret")
            os.chmod(secret, 0o600)
            code, out = box.run("cat root-only; echo x >> root-only; cat /etc/shadow")
            ok = "s3cret" not in out and secret.read_text() == "s3cret"
            secret.unlink()
            return ok, "a root-owned 0600 file is neither readable nor writable; no /etc/shadow"

        def devices() -> tuple[bool, str]:
            code, out = box.run(
                f"mknod dev-{tag} c 1 3; echo x > /dev/shm/{tag}; ls /sys 2>&1; echo 1 > /proc/sys/kernel/sysrq"
            )
            ok = not (box.ws / f"dev-{tag}").exists() and not Path(f"/dev/shm/{tag}").exists()
            return ok and "No such file" in out, "mknod refused, /dev/shm private, no /sys"

        def network() -> tuple[bool, str]:
            server = socket.socket()
            server.bind(("127.0.0.1", 0))
            server.listen()
            server.settimeout(6)
            port = server.getsockname()[1]
            got: list[object] = []

            def accept() -> None:
                try:
                    got.append(server.accept())
                except OSError:
                    pass

            t = threading.Thread(target=accept, daemon=True)
            t.start()
            box.run(f"exec 3<>/dev/tcp/127.0.0.1/{port}; echo hi >&3; getent hosts repo.maven.apache.org", 10)
            t.join(7)
            server.close()
            return not got, f"no connection reached a host listener on 127.0.0.1:{port}"

        def environment() -> tuple[bool, str]:
            os.environ["STRANDS_ART_CHECK_SECRET"] = tag
            try:
                code, out = box.run("env", env={"OPENAI_API_KEY": tag})
            finally:
                os.environ.pop("STRANDS_ART_CHECK_SECRET", None)
            return tag not in out, "API keys and this process's variables are not passed in"

        def fork_bomb() -> tuple[bool, str]:
            t0 = time.monotonic()
            code, out = box.run("bomb() { bomb | bomb & }; bomb; sleep 2; echo survived", 20)
            ok = time.monotonic() - t0 < 20 and "survived" in out and "fork" in out
            return ok, "forks refused at the process limit; the command still ended"

        def memory() -> tuple[bool, str]:
            code, out = box.run("python3 -c 'b = bytearray(3 << 30); print(\"allocated\")'", 30)
            ok = "allocated" not in out and "MemoryError" in out
            return ok, "a 3 GiB allocation fails (MemoryError) under the 1 GiB data limit"

        def shared_memory() -> tuple[bool, str]:
            program = (
                "import mmap; n = 2 << 30; m = mmap.mmap(-1, n, flags=mmap.MAP_SHARED); "
                "[m.__setitem__(i, 1) for i in range(0, n, 4096)]; print('touched')"
            )
            code, out = box.run(f'python3 -c "{program}"', 60)
            if memory_cgroups().base is None:
                return False, f"no memory cgroup ({memory_cgroups().why}): shared memory is not counted"
            return (
                "touched" not in out and code != 0,
                "a 2 GiB MAP_SHARED mapping is killed at the 1 GiB cgroup limit",
            )

        def file_size() -> tuple[bool, str]:
            code, out = box.run("head -c 3000000 /dev/zero > big; stat -c %s big")
            size = (box.ws / "big").stat().st_size if (box.ws / "big").exists() else 0
            return size <= 1 << 20, f"file size capped at {size} bytes"

        def leftovers() -> tuple[bool, str]:
            marker = f"7{int(time.time()) % 100000}.{os.getpid()}"
            box.run(f"setsid sleep {marker} >/dev/null 2>&1 & disown; nohup sleep {marker} >/dev/null 2>&1 &")
            time.sleep(0.5)
            alive = [
                d for d in Path("/proc").iterdir() if d.name.isdigit() and _cmdline_has(d, f"sleep {marker}")
            ]
            return not alive, "background and setsid processes end with the command"

        for name, fn in (
            ("unprivileged uid", uid),
            ("remount / write outside", remount),
            ("root-only files", root_secret),
            ("mknod, /dev/shm, /sys, /proc/sys", devices),
            ("network (host loopback, DNS)", network),
            ("environment allow-list", environment),
            ("fork bomb", fork_bomb),
            ("memory hog", memory),
            ("shared memory (cgroup)", shared_memory),
            ("file size", file_size),
            ("orphans", leftovers),
        ):
            check(name, fn)
        if maven:
            check("maven build inside", lambda: _maven_check(box))
    finally:
        box.close()
    return results


def _cmdline_has(proc: Path, text: str) -> bool:
    try:
        return text in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False


def _maven_check(box: _Box) -> tuple[bool, str]:
    code, out = box.run("mvn -B -v", 120, env={"JAVA_HOME": "/usr/lib/jvm/java-17-openjdk-amd64"})
    return code == 0 and "Apache Maven" in out, out.strip().splitlines()[0] if out.strip() else f"exit {code}"


def main(maven: bool = False) -> int:
    """Print one line per check; 0 when all pass, 1 when one fails, 2 when there is no sandbox."""
    try:
        results = check_all(maven=maven)
    except SandboxUnavailable as exc:
        print(f"sandbox-check: FAIL: {exc}", file=sys.stderr)
        return 2
    width = max(len(name) for name, _, _ in results)
    for name, ok, detail in results:
        print(f"{'ok  ' if ok else 'FAIL'} {name:<{width}}  {detail}")
    failed = sum(not ok for _, ok, _ in results)
    print(f"sandbox-check: {len(results) - failed}/{len(results)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(maven="--maven" in sys.argv[1:]))
