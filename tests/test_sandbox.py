"""The sandbox layer's own pieces: policy and command line, fail-closed probe, process lifetime,
host-side safe file access (strands_art/envs/sandbox/). Escape attempts: test_sandbox_attacks.py."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strands_art.envs.sandbox import Limits, Sandbox, SandboxUnavailable, allowed_env, probe, require_sandbox
from strands_art.envs.sandbox.files import UnsafeFile, copy_tree, read_bytes, write_bytes
from strands_art.envs.sandbox.policy import Identity, allocate_identity

try:
    require_sandbox()
    SANDBOX_OK = True
except SandboxUnavailable:
    SANDBOX_OK = False


# ---------------------------------------------------------------- policy and command line
def test_limits_reject_nonsense() -> None:
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="positive int"):
            Limits(processes=bad)  # type: ignore[arg-type]
    assert "--nproc=7:7" in Limits(processes=7).prlimit_args() and "--core=0:0" in Limits().prlimit_args()


def test_environment_allow_list() -> None:
    env = allowed_env({"OPENAI_API_KEY": "k", "LD_PRELOAD": "x.so", "PYTHONPATH": "/p", "JAVA_HOME": "/j"})
    assert env == {
        "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "LANG": "C.UTF-8",
        "JAVA_HOME": "/j",
    }
    with pytest.raises(ValueError, match="NUL"):
        allowed_env({"HOME": "a\x00b"})


def test_command_line_has_every_namespace_and_no_host_root() -> None:
    sb = Sandbox(
        Identity(1_500_000_123, 1_500_000_123, drop=True), writable=(Path("/w"),), readonly=(Path("/r"),)
    )
    tools = {"prlimit": "/usr/bin/prlimit", "setpriv": "/usr/bin/setpriv", "bwrap": "/usr/bin/bwrap"}
    argv = sb.argv(["bash", "-c", "x"], cwd="/w", env={"HOME": "/w"}, passwd_fd=5, group_fd=6, tools=tools)
    text = " ".join(argv)
    assert argv[0] == "/usr/bin/prlimit" and "--reuid=1500000123" in argv and "--no-new-privs" in argv
    assert argv.index("/usr/bin/setpriv") < argv.index("/usr/bin/bwrap")
    for flag in (
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--cap-drop ALL",
        "--remount-ro /",
        "--bind /w /w",
        "--ro-bind-try /r /r",
    ):
        assert flag in text, flag
    assert "--share-net" not in argv and "--ro-bind / /" not in text and "--ro-bind-try /etc /etc" not in text
    assert "--dev-bind" not in text and "/sys" not in argv
    assert argv[-4:] == ["--", "bash", "-c", "x"]
    # binds come after the private /tmp, or a bound path under /tmp would be hidden by it
    assert text.index("--tmpfs /tmp") < text.index("--ro-bind-try /r /r") < text.index("--bind /w /w")


def test_identities_are_distinct_and_unprivileged() -> None:
    ids = {allocate_identity().uid for _ in range(50)}
    assert len(ids) == 50
    if os.geteuid() == 0:
        assert min(ids) >= 1_500_000_000


def test_probe_failure_is_never_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def failing(timeout_s: float = 30.0) -> dict:
        calls.append(1)
        raise SandboxUnavailable("the command sandbox is not available: test")

    monkeypatch.setattr(probe, "_verified", set())
    monkeypatch.setattr(probe, "probe_sandbox", failing)
    for _ in range(3):
        with pytest.raises(SandboxUnavailable):
            require_sandbox()
    assert len(calls) == 3


# ---------------------------------------------------------------- process lifetime
@pytest.mark.skipif(not SANDBOX_OK, reason="bubblewrap sandbox unavailable here")
def test_a_killed_runner_leaves_no_sandboxed_process(tmp_path: Path) -> None:
    marker = f"{int(time.time()) % 100000}.{os.getpid()}3"
    script = textwrap.dedent(f"""
        import os, tempfile
        from strands_art.envs.sandbox import Sandbox, allocate_identity, chown_tree, run_sync
        ident = allocate_identity()
        d = tempfile.mkdtemp(); os.chmod(d, 0o711); w = os.path.join(d, "w"); os.mkdir(w); chown_tree(w, ident)
        print("ready", flush=True)
        run_sync(Sandbox(ident, writable=(w,)), ["sh", "-c", "setsid sleep {marker} & sleep {marker}"],
                 cwd=w, env={{}}, timeout_s=120)
    """)
    runner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env={**os.environ})
    assert runner.stdout is not None and runner.stdout.readline().strip() == b"ready"
    deadline = time.monotonic() + 20
    while len(_pids_with(f"sleep {marker}", exact=True)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(_pids_with(f"sleep {marker}", exact=True)) == 2, "the sandboxed command never started"
    runner.send_signal(signal.SIGKILL)  # the runner dies without any cleanup of its own
    runner.wait()
    deadline = time.monotonic() + 10
    while _pids_with(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _pids_with(f"sleep {marker}") == []


def _pids_with(text: str, exact: bool = False) -> list[int]:
    """PIDs whose command line contains ``text`` (``exact``: is ``text``)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                if (cmd == text) if exact else (text in cmd):
                    out.append(int(d.name))
            except OSError:
                pass
    return out


# ---------------------------------------------------------------- host-side file access
def test_read_and_write_refuse_special_files(tmp_path: Path) -> None:
    (tmp_path / "ok.txt").write_text("hello")
    assert read_bytes(tmp_path, "ok.txt", max_bytes=100) == b"hello"
    assert read_bytes(tmp_path, "ok.txt", max_bytes=2, prefix=True) == b"he"
    with pytest.raises(UnsafeFile, match="limit is 2"):
        read_bytes(tmp_path, "ok.txt", max_bytes=2)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UnsafeFile, match="FIFO"):
        read_bytes(tmp_path, "fifo", max_bytes=10)
    with pytest.raises(UnsafeFile, match="FIFO"):
        write_bytes(tmp_path, "fifo", b"x")
    os.symlink(tmp_path / "ok.txt", tmp_path / "link")
    with pytest.raises(UnsafeFile, match="symbolic link"):
        read_bytes(tmp_path, "link", max_bytes=10)
    os.link(tmp_path / "ok.txt", tmp_path / "hard")
    with pytest.raises(UnsafeFile, match="hard links"):
        write_bytes(tmp_path, "hard", b"x")
    assert (tmp_path / "ok.txt").read_text() == "hello"
    with pytest.raises(UnsafeFile, match=r"'\.\.'"):
        read_bytes(tmp_path, "../x", max_bytes=10)


def test_write_creates_parents_owned_by_the_identity(tmp_path: Path) -> None:
    ident = Identity(
        os.getuid() if os.geteuid() else 4242, os.getgid() if os.geteuid() else 4242, drop=os.geteuid() == 0
    )
    assert write_bytes(tmp_path, "a/b/c.txt", b"x", identity=ident) is True
    assert (tmp_path / "a/b/c.txt").read_bytes() == b"x"
    for p in (tmp_path / "a", tmp_path / "a/b", tmp_path / "a/b/c.txt"):
        assert p.stat().st_uid == ident.uid
    assert write_bytes(tmp_path, "a/b/c.txt", b"yz", identity=ident) is False
    assert (tmp_path / "a/b/c.txt").read_bytes() == b"yz"


_NAME = st.sampled_from(["a", "b", "..", ".", "x"])


@settings(max_examples=80, deadline=None)
@given(
    links=st.lists(
        st.tuples(
            st.sampled_from(["l1", "d/l2", "d/e/l3"]), st.lists(_NAME, min_size=1, max_size=5), st.booleans()
        ),
        max_size=4,
    )
)
def test_copy_never_keeps_a_link_that_leads_out(tmp_path_factory: pytest.TempPathFactory, links) -> None:
    """Property: whatever symlinks a repository holds, none in the build copy resolves outside it,
    and every regular file arrives with its content."""
    base = tmp_path_factory.mktemp("copy")
    src = base / "src"
    (src / "d" / "e").mkdir(parents=True)
    (src / "a").write_text("A")
    (src / "d" / "f").write_text("F")
    for where, parts, absolute in links:
        link = src / where
        if link.exists() or link.is_symlink():
            continue
        target = os.path.join(*parts)
        os.symlink(("/" + target) if absolute else target, link)
    dst = base / "dst"
    skipped = copy_tree(src, dst)
    real_dst = dst.resolve()
    for p in dst.rglob("*"):
        if p.is_symlink():
            assert not os.path.isabs(os.readlink(p))
            assert Path(os.path.realpath(p)).is_relative_to(real_dst), (p, os.readlink(p))
    assert (dst / "a").read_text() == "A" and (dst / "d" / "f").read_text() == "F"
    assert all(stat.S_ISLNK((src / s).lstat().st_mode) for s in skipped)


def test_untraversable_ancestor() -> None:
    import shutil
    import tempfile

    from strands_art.envs.sandbox.policy import untraversable_ancestor

    base = Path(tempfile.mkdtemp(prefix="strands-art-test-"))  # in the system temp dir (o+x)
    try:
        os.chmod(base, 0o711)
        closed = base / "closed"
        closed.mkdir(mode=0o700)
        assert untraversable_ancestor(base / "x") is None
        assert untraversable_ancestor(base / "not-yet" / "deeper" / "x") is None  # ours to create
        assert untraversable_ancestor(closed / "ws" / "x") == closed
    finally:
        shutil.rmtree(base)
