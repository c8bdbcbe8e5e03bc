"""The agent's Maven memo (strands_art/envs/migrationbench/agent/mavenmemo.py): a back-to-back
repeat of a clean build on the tree it left is answered from the last run; anything else runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strands_art.envs.migrationbench.agent import mavenmemo
from strands_art.envs.migrationbench.agent.mavenmemo import MavenMemo, memoizable
from strands_art.envs.migrationbench.agent.tools import ToolStats, make_tools
from strands_art.envs.migrationbench.treedigest import TreeTooLarge, _file_sha256, tree_digest
from strands_art.envs.migrationbench.workspace import Workspace
from strands_art.validation import UsageError

TASKS_DIR = Path(__file__).resolve().parents[1] / "examples" / "migrationbench" / "tasks"

FAKE_MVN = """#!/bin/sh
# counts its runs outside the workspace, rebuilds target/ like a clean build
echo run >> "{count}"
rm -rf target && mkdir -p target && echo "built $*" > target/out.txt
echo "BUILD $* run $(wc -l < "{count}")"
"""


@pytest.fixture
def fake(tmp_path: Path):
    repo = tmp_path / "task" / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "pom.xml").write_text("<project/>\n")
    (repo / "src" / "A.java").write_text("class A {}\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    count = tmp_path / "count"
    (bin_dir / "mvn").write_text(FAKE_MVN.format(count=count))
    (bin_dir / "mvn").chmod(0o755)
    w = Workspace.for_task(tmp_path / "task")
    yield w, bin_dir, count
    w.cleanup()


def _runs(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


def _text(result: dict) -> str:
    return result["content"][0]["text"]


def _tools(fake, **kw):
    w, bin_dir, _count = fake
    stats = ToolStats()
    shell, editor = make_tools(w, extra_path=[str(bin_dir)], unsafe_no_sandbox=True, stats=stats, **kw)
    return shell, editor, stats


async def test_a_back_to_back_repeat_is_answered_from_the_last_run(fake) -> None:
    shell, _, stats = _tools(fake, maven_memo=True)
    first = _text(await shell(command="mvn -q clean verify"))
    second = _text(await shell(command="mvn -q clean verify"))
    assert first == second == "BUILD -q clean verify run 1\n\n[exit code: 0]"
    assert _runs(fake[2]) == 1
    assert stats.maven_calls == 1 and stats.maven_memo_hits == 1 and stats.maven_memo_saved_s > 0
    assert stats.calls["shell"] == 2 and "shell" not in stats.errors


async def test_a_changed_byte_another_command_or_another_text_runs_again(fake) -> None:
    shell, editor, stats = _tools(fake, maven_memo=True)
    w, _, count = fake
    await shell(command="mvn -q clean verify")
    await editor(command="create", path="target/out.txt", file_text="tampered\n")  # the tree it left, changed
    assert "run 2" in _text(await shell(command="mvn -q clean verify"))
    await shell(command="ls")  # any other shell command forgets the memo
    assert "run 3" in _text(await shell(command="mvn -q clean verify"))
    assert "run 4" in _text(await shell(command="mvn  -q clean verify"))  # not the same text
    assert "run 4" in _text(await shell(command="mvn  -q clean verify"))  # ... its own repeat is a hit
    (w.root / "src" / "A.java").write_text("class A { }\n")  # a source byte
    assert "run 5" in _text(await shell(command="mvn  -q clean verify"))
    assert _runs(count) == 5 and stats.maven_memo_hits == 1 and stats.maven_calls == 5


async def test_builds_without_clean_and_the_off_switch_always_run(fake, monkeypatch) -> None:
    shell, _, stats = _tools(fake, maven_memo=True)
    await shell(command="mvn -q verify")
    await shell(command="mvn -q verify")  # incremental: the output depends on target/, never answered
    assert _runs(fake[2]) == 2 and stats.maven_memo_hits == 0
    monkeypatch.setenv("STRANDS_ART_MAVEN_MEMO", "off")
    off, _, off_stats = _tools(fake)
    await off(command="mvn -q clean verify")
    await off(command="mvn -q clean verify")
    assert _runs(fake[2]) == 4 and off_stats.maven_memo_hits == 0


async def test_a_timed_out_build_is_not_kept(fake) -> None:
    w, bin_dir, count = fake
    (bin_dir / "mvn").write_text(FAKE_MVN.format(count=count).replace('echo "BUILD', 'sleep 5; echo "BUILD'))
    shell, _, stats = _tools(fake, maven_memo=True, command_timeout_s=1)
    assert "timed out" in _text(await shell(command="mvn -q clean verify"))
    assert "timed out" in _text(await shell(command="mvn -q clean verify"))
    assert _runs(count) == 2 and stats.maven_memo_hits == 0 and stats.timeouts == 2


@pytest.mark.parametrize(
    "command",
    [
        "mvn -q verify",  # first goal not clean
        "mvn -q",  # no goal
        "mvn clean verify\nrm -rf src",  # a second line
        "mvn clean verify; rm x",
        "mvn clean verify && touch y",
        "mvn clean verify > log",
        'mvn "clean" verify',
        "mvn clean verify $X",
        "mvn -f other/pom.xml clean verify",  # an option that takes a value
        "mvn -pl core clean verify",
        "./mvnw clean verify",  # the repository's own script
        "/usr/bin/mvn clean verify",
        "mvnx clean",
        "mvn clean verify # note",
        "mvn clean install",  # writes the local repository, which the next build may read
        "mvn -q clean deploy",
        "mvn clean dependency:purge-local-repository verify",  # a plugin goal
        "mvn clean verify install:install-file -Dfile=a.jar",
    ],
)
def test_only_a_plain_clean_build_is_memoizable(command: str) -> None:
    assert not memoizable(command)


@pytest.mark.parametrize(
    "command", ["mvn -q clean verify", "mvn clean", "  mvn\t-B clean package -DskipTests -Dx=y -T2 "]
)
def test_plain_clean_builds_are_memoizable(command: str) -> None:
    assert memoizable(command)


INSTALLING_MVN = """#!/bin/sh
# a module resolved from the local repository ({repo}), which this build's install writes
if [ -e "{repo}/a.jar" ]; then echo "a resolved"; else echo "a missing"; fi
rm -rf target && mkdir -p target
case " $* " in *" install "*) mkdir -p "{repo}" && touch "{repo}/a.jar";; esac
"""


async def test_a_build_that_installs_runs_again(fake, tmp_path: Path) -> None:
    # the first `clean install` installs what the second resolves: a real repeat prints another text
    _, bin_dir, _ = fake
    (bin_dir / "mvn").write_text(INSTALLING_MVN.format(repo=tmp_path / "m2"))
    shell, _, stats = _tools(fake, maven_memo=True)
    assert "a missing" in _text(await shell(command="mvn -q clean install"))
    assert "a resolved" in _text(await shell(command="mvn -q clean install"))
    assert stats.maven_memo_hits == 0 and stats.maven_calls == 2


async def test_a_repeat_with_less_time_left_than_its_run_took_runs(fake) -> None:
    # a real run would be killed at the rollout's time limit: the memo never answers in its place
    _, bin_dir, count = fake
    (bin_dir / "mvn").write_text(
        FAKE_MVN.format(count=count).replace('echo "BUILD', 'sleep 0.5; echo "BUILD')
    )
    left = iter([100.0, 100.0, 0.2])
    shell, _, stats = _tools(fake, maven_memo=True, time_left=lambda: next(left))
    first = _text(await shell(command="mvn -q clean verify"))
    assert _text(await shell(command="mvn -q clean verify")) == first  # time enough: a hit
    assert "timed out after 0.2 s" in _text(await shell(command="mvn -q clean verify"))
    assert stats.maven_memo_hits == 1 and stats.timeouts == 1 and _runs(count) == 2


def test_a_tree_of_too_many_entries_is_not_digested_nor_memoized(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"f{i}").write_text("")  # empty files: free to make, each costs the digest
    assert tree_digest(tmp_path, max_entries=5) == tree_digest(tmp_path)
    with pytest.raises(TreeTooLarge):
        tree_digest(tmp_path, max_entries=4)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "g").write_text("")
    with pytest.raises(TreeTooLarge):
        tree_digest(tmp_path, max_entries=6)  # 7 entries: nested ones count too
    big = tmp_path / "d" / "big"
    big.mkdir()
    for i in range(50):
        (big / f"e{i}").write_text("")
    with pytest.raises(TreeTooLarge, match="more than 10 entries"):
        tree_digest(big, max_entries=10)
    for f in big.iterdir():
        f.unlink()
    big.rmdir()
    memo = MavenMemo(tmp_path, max_entries=6)
    memo.record("mvn clean verify", "BUILD", 1.0)
    assert memo.lookup("mvn clean verify") is None
    roomy = MavenMemo(tmp_path, max_entries=7)
    roomy.record("mvn clean verify", "BUILD", 1.0)
    assert roomy.lookup("mvn clean verify") == ("BUILD", 1.0)


def test_a_file_is_read_only_to_its_size(tmp_path: Path) -> None:
    # a file something keeps appending to cannot hold the digest in its read loop
    import hashlib

    f = tmp_path / "log"
    f.write_bytes(b"0123456789")
    assert _file_sha256(bytes(f), 10) == hashlib.sha256(b"0123456789").digest()
    with pytest.raises(OSError, match="changed size"):
        _file_sha256(bytes(f), 4)  # it grew after lstat
    with pytest.raises(OSError, match="changed size"):
        _file_sha256(bytes(f), 12)  # it shrank


def test_a_fifo_in_a_files_place_does_not_block_the_digest(tmp_path: Path) -> None:
    # swapped in between lstat and open (a process outliving its command, without a sandbox)
    import os
    import threading

    fifo = tmp_path / "swapped"
    os.mkfifo(fifo)
    outcome: list[BaseException | bytes] = []

    def read() -> None:
        try:
            outcome.append(_file_sha256(bytes(fifo), 0))
        except OSError as exc:
            outcome.append(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(5)
    if t.is_alive():  # blocked in open(): unblock it with a writer so the thread can end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert len(outcome) == 1 and isinstance(outcome[0], OSError), outcome
    assert "no longer a regular file" in str(outcome[0])


@given(st.text(max_size=40))
def test_anything_with_shell_syntax_or_a_newline_is_not_memoizable(tail: str) -> None:
    bad = set("\n\r;&|<>$`'\"\\()#*?[]{}!~")
    command = "mvn clean " + tail
    if memoizable(command):
        assert not (set(tail) & bad)
        assert all(w not in ("-f", "-pl", "-s", "-D", "-P") for w in tail.split())


@pytest.mark.maven
@pytest.mark.skipif(shutil.which("mvn") is None, reason="mvn not installed (scripts/setup-system.sh)")
@pytest.mark.skipif(not (TASKS_DIR / "compiler-props").is_dir(), reason="bundled task compiler-props missing")
async def test_a_real_sandboxed_repeat_equals_the_run_and_leaves_the_tree(tmp_path: Path) -> None:
    from strands_art.envs.migrationbench.agent.toolenv import prepare_tool_env

    with Workspace.for_task(TASKS_DIR / "compiler-props", base_dir=tmp_path / "ws") as w:
        tenv = prepare_tool_env(w, offline=True)
        stats = ToolStats()
        shell, _ = make_tools(w, env=tenv.env, extra_path=tenv.extra_path, sandbox=tenv.sandbox, stats=stats,
                              maven_memo=True)  # fmt: skip
        first = _text(await shell(command="mvn -q clean verify"))
        left = tree_digest(w.root)
        assert (w.root / "target").is_dir() and first.endswith("[exit code: 0]")
        second = _text(await shell(command="mvn -q clean verify"))
        assert second == first and tree_digest(w.root) == left
        assert stats.maven_calls == 1 and stats.maven_memo_hits == 1
        (w.root / "target" / "classes" / "extra.txt").write_text("x")  # a file in target/: a miss
        third = _text(await shell(command="mvn -q clean verify"))
        assert (
            third == first
            and stats.maven_calls == 2
            and not (w.root / "target" / "classes" / "extra.txt").exists()
        )


@pytest.mark.parametrize(
    ("value", "on"), [(None, True), ("", True), ("on", True), (" 1 ", True), ("YES", True), ("off", False),
                      ("0", False), ("no", False), ("False", False)],
)  # fmt: skip
def test_the_switch_reads_the_same_words_as_the_evaluation_cache(monkeypatch, value, on) -> None:
    if value is None:
        monkeypatch.delenv(mavenmemo.MEMO_ENV, raising=False)
    else:
        monkeypatch.setenv(mavenmemo.MEMO_ENV, value)
    assert mavenmemo.enabled() is on


@pytest.mark.parametrize("typo", ["of", "disable", "offf", "2"])
def test_a_switch_value_that_is_neither_is_refused(monkeypatch, typo) -> None:
    monkeypatch.setenv(mavenmemo.MEMO_ENV, typo)
    with pytest.raises(
        UsageError, match=rf"STRANDS_ART_MAVEN_MEMO must be one of off, 0, no, false .*got '{typo}'"
    ):
        mavenmemo.enabled()
