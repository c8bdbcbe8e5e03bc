"""The evaluation cache (:mod:`strands_art.envs.migrationbench.evaluate.evalcache`): keys from the host's
own copy, misses on any difference, a store the sandboxed agent cannot reach, and cached verdicts
equal to fresh ones with real Maven builds."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strands_art.envs.migrationbench.evaluate import evalcache
from strands_art.envs.migrationbench.evaluate.evalcache import (
    EvalCache,
    cache_for_run,
    cached_evaluate_command,
)
from strands_art.envs.migrationbench.evaluate.verdict import REASON_BUILD_FAILED, REASON_TESTS_TIMEOUT
from strands_art.envs.migrationbench.treedigest import TreeTooLarge, tree_digest

TASKS_DIR = Path(__file__).resolve().parents[1] / "examples" / "migrationbench" / "tasks"
NEEDS_MVN = pytest.mark.skipif(
    shutil.which("mvn") is None, reason="mvn not installed (scripts/setup-system.sh)"
)


def _write_tree(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return root


# ---------------------------------------------------------------- the tree digest
names = st.text(alphabet="abcXYZ019._-", min_size=1, max_size=6).filter(lambda s: s not in (".", ".."))
trees = st.dictionaries(
    st.lists(names, min_size=1, max_size=3).map("/".join),
    st.binary(min_size=1, max_size=64),
    min_size=1,
    max_size=8,
).filter(
    # no path both a file and a directory
    lambda d: not any(a != b and b.startswith(a + "/") for a in d for b in d)
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=trees, pick=st.integers(min_value=0), pos=st.integers(min_value=0), bit=st.integers(0, 7))
def test_one_byte_anywhere_changes_the_digest(tmp_path_factory, tree, pick, pos, bit) -> None:
    base = tmp_path_factory.mktemp("t")
    a = _write_tree(base / "a", tree)
    b = _write_tree(base / "elsewhere" / "b", tree)
    assert tree_digest(a) == tree_digest(b)  # where the tree lies does not count
    rel = sorted(tree)[pick % len(tree)]
    data = bytearray(tree[rel])
    data[pos % len(data)] ^= 1 << bit
    (b / rel).write_bytes(bytes(data))
    assert tree_digest(a) != tree_digest(b)


def test_names_modes_links_and_empty_directories_count(tmp_path: Path) -> None:
    a = _write_tree(tmp_path / "a", {"pom.xml": b"<project/>", "src/A.java": b"class A {}"})
    d0 = tree_digest(a)
    (a / "src" / "A.java").rename(a / "src" / "B.java")  # a name
    d1 = tree_digest(a)
    os.chmod(a / "src" / "B.java", 0o755)  # a permission bit
    d2 = tree_digest(a)
    (a / "empty").mkdir()  # an empty directory
    d3 = tree_digest(a)
    (a / "link").symlink_to("pom.xml")
    d4 = tree_digest(a)
    (a / "link").unlink()
    (a / "link").symlink_to("src")  # the same name, another target
    d5 = tree_digest(a)
    assert len({d0, d1, d2, d3, d4, d5}) == 6


def test_a_bound_on_bytes_stops_the_digest_and_changes_nothing_below_it(tmp_path: Path) -> None:
    a = _write_tree(tmp_path / "a", {"pom.xml": b"x" * 60, "src/A.java": b"y" * 50})
    assert tree_digest(a, max_bytes=110) == tree_digest(a)  # 110 bytes of files: at the bound
    with pytest.raises(TreeTooLarge, match="more than 109 bytes"):
        tree_digest(a, max_bytes=109)


# ---------------------------------------------------------------- the cache, with a counting evaluator
class Counter:
    """Stands in for the evaluator (no Maven): records the trees it was given, scores by pom.xml."""

    def __init__(self, reasons: tuple[str, ...] = ()) -> None:
        self.calls: list[tuple[Path, bytes]] = []
        self.reasons = list(reasons)

    def __call__(self, repo: Any, task_dir: Any, **kwargs: Any) -> dict[str, Any]:
        pom = (Path(repo) / "pom.xml").read_bytes()
        self.calls.append((Path(repo), pom))
        ok = b"release>17" in pom
        return {"reward": 1.0 if ok else 0.0, "build_success": ok, "java17_bytecode": ok, "tests_run": 3,
                "tests_required": 3, "tests_equivalent": ok,
                "details": {"reasons": [] if ok else [*self.reasons, REASON_BUILD_FAILED], "left_out_of_build": []}}  # fmt: skip


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    d = tmp_path / "task"
    _write_tree(d / "repo", {"pom.xml": b"<release>8</release>"})
    (d / "task.json").write_text(json.dumps({"name": "t", "num_test_cases": 3}))
    return d


def test_identical_trees_evaluate_once_and_a_one_byte_difference_misses(
    tmp_path: Path, task_dir: Path
) -> None:
    cache, ev = EvalCache(), Counter()
    trees = [
        _write_tree(tmp_path / f"ws{i}", {"pom.xml": pom, "src/A.java": b"class A {}"})
        for i, pom in enumerate(
            [b"<release>17</release>", b"<release>17</release>", b"<release>17</release> "]
        )
    ]
    out = [
        cached_evaluate_command(t, task_dir, cache=cache, scratch_dir=tmp_path, evaluate=ev) for t in trees
    ]
    assert [o["details"]["eval_cache"]["hit"] for o in out] == [False, True, False]
    assert len(ev.calls) == 2 and (cache.hits, cache.misses, cache.stored) == (1, 2, 2)
    assert out[1]["reward"] == out[0]["reward"] == 1.0
    # the evaluator was given the host's own copy, never the agent's workspace
    assert all(path not in trees and not path.exists() for path, _ in ev.calls)
    assert [pom for _, pom in ev.calls] == [b"<release>17</release>", b"<release>17</release> "]


def test_maven_outputs_are_left_out_of_the_key_as_the_evaluator_leaves_them_out(
    tmp_path: Path, task_dir: Path
) -> None:
    cache, ev = EvalCache(), Counter()
    a = _write_tree(tmp_path / "a", {"pom.xml": b"<release>17</release>"})
    b = _write_tree(
        tmp_path / "b", {"pom.xml": b"<release>17</release>", "target/classes/A.class": b"\xca\xfe"}
    )
    for t in (a, b):
        cached_evaluate_command(t, task_dir, cache=cache, scratch_dir=tmp_path, evaluate=ev)
    assert len(ev.calls) == 1 and cache.hits == 1


def test_another_task_or_timeout_is_another_key(tmp_path: Path, task_dir: Path) -> None:
    cache, ev = EvalCache(), Counter()
    ws = _write_tree(tmp_path / "ws", {"pom.xml": b"<release>17</release>"})
    other = tmp_path / "task2"
    shutil.copytree(task_dir, other)
    (other / "task.json").write_text(json.dumps({"name": "t", "num_test_cases": 4}))  # one field differs
    cached_evaluate_command(ws, task_dir, cache=cache, scratch_dir=tmp_path, evaluate=ev)
    cached_evaluate_command(ws, other, cache=cache, scratch_dir=tmp_path, evaluate=ev)
    cached_evaluate_command(ws, task_dir, 100.0, cache=cache, scratch_dir=tmp_path, evaluate=ev)
    assert len(ev.calls) == 3 and cache.hits == 0


def test_a_timeout_verdict_is_never_stored(tmp_path: Path, task_dir: Path) -> None:
    cache, ev = EvalCache(), Counter(reasons=(REASON_TESTS_TIMEOUT,))
    ws = _write_tree(tmp_path / "ws", {"pom.xml": b"<release>8</release>"})
    for _ in range(2):
        out = cached_evaluate_command(ws, task_dir, cache=cache, scratch_dir=tmp_path, evaluate=ev)
    assert len(ev.calls) == 2 and cache.stored == 0 and out["details"]["eval_cache"]["stored"] is False


def test_a_directory_shares_verdicts_across_runs_and_ignores_a_forged_entry(
    tmp_path: Path, task_dir: Path
) -> None:
    ws = _write_tree(tmp_path / "ws", {"pom.xml": b"<release>17</release>"})
    ev = Counter()
    first = cached_evaluate_command(
        ws, task_dir, cache=EvalCache(tmp_path / "c"), scratch_dir=tmp_path, evaluate=ev
    )
    assert (tmp_path / "c").stat().st_mode & 0o777 == 0o700
    second = cached_evaluate_command(
        ws, task_dir, cache=EvalCache(tmp_path / "c"), scratch_dir=tmp_path, evaluate=ev
    )
    assert (
        len(ev.calls) == 1 and second["details"]["eval_cache"]["hit"] and second["reward"] == first["reward"]
    )
    key = first["details"]["eval_cache"]["key"]
    # an entry whose key field is not its name, or not JSON: a miss, evaluated afresh
    (tmp_path / "c" / f"{key}.json").write_text(json.dumps({"key": "0" * 64, "verdict": {"reward": 1.0}}))
    third = cached_evaluate_command(
        ws, task_dir, cache=EvalCache(tmp_path / "c"), scratch_dir=tmp_path, evaluate=ev
    )
    assert len(ev.calls) == 2 and third["details"]["eval_cache"]["hit"] is False


def test_cache_for_run_default_shared_and_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(evalcache.CACHE_ENV, raising=False)
    run = cache_for_run(tmp_path / "run")
    assert (
        run is cache_for_run(tmp_path / "run")
        and run.directory == (tmp_path / "run" / "eval-cache").resolve()
    )
    monkeypatch.setenv(evalcache.CACHE_ENV, str(tmp_path / "shared"))
    assert cache_for_run(tmp_path / "run").directory == (tmp_path / "shared").resolve()
    monkeypatch.setenv(evalcache.CACHE_ENV, "off")
    assert cache_for_run(tmp_path / "run") is None


def test_no_cache_evaluates_the_workspace_itself(tmp_path: Path, task_dir: Path) -> None:
    ev = Counter()
    ws = _write_tree(tmp_path / "ws", {"pom.xml": b"<release>17</release>"})
    out = cached_evaluate_command(ws, task_dir, cache=None, evaluate=ev)
    assert ev.calls[0][0] == ws and "eval_cache" not in out["details"]


# ---------------------------------------------------------------- the agent's sandbox cannot reach it
@pytest.mark.maven
@NEEDS_MVN
@pytest.mark.skipif(not (TASKS_DIR / "compiler-props").is_dir(), reason="bundled task compiler-props missing")
async def test_the_sandboxed_agent_cannot_read_or_write_the_cache(tmp_path: Path) -> None:
    from strands_art.envs.migrationbench.agent.toolenv import prepare_tool_env
    from strands_art.envs.migrationbench.agent.tools import make_tools
    from strands_art.envs.migrationbench.workspace import Workspace

    run_dir = tmp_path / "run"
    cache = EvalCache(run_dir / "eval-cache")
    cache.put("a" * 64, {"reward": 1.0, "details": {}})
    entry = run_dir / "eval-cache" / f"{'a' * 64}.json"
    with Workspace.for_task(TASKS_DIR / "compiler-props", base_dir=run_dir / "workspaces") as w:
        tenv = prepare_tool_env(w, offline=True)
        shell, _ = make_tools(w, env=tenv.env, extra_path=tenv.extra_path, sandbox=tenv.sandbox)
        for command in (
            f"cat {entry}",
            f"ls {entry.parent}",
            f"echo x > {entry}",
            f"touch {entry.parent}/b.json",
        ):
            text = (await shell(command=command))["content"][0]["text"]
            assert "[exit code: 0]" not in text, (command, text)
    assert json.loads(entry.read_text())["verdict"] == {"reward": 1.0, "details": {}}
    assert sorted(p.name for p in entry.parent.iterdir()) == [entry.name]


# ---------------------------------------------------------------- cached == fresh, real Maven
def _copy_task(task_dir: Path, dest: Path, reference: bool) -> Path:
    repo = dest / "repo"
    shutil.copytree(task_dir / "repo", repo, ignore=shutil.ignore_patterns("target"))
    if reference:
        subprocess.run(["git", "apply", "--whitespace=nowarn", str(task_dir / "reference.patch")], cwd=repo,
                       check=True, capture_output=True)  # fmt: skip
    return repo


VOLATILE = {"evaluate_duration_s", "maven_duration_s", "log_tail", "maven_errors", "eval_cache"}


def _comparable(verdict: dict[str, Any]) -> dict[str, Any]:
    """The verdict without Maven's text and timings, which differ between two fresh evaluations of
    one tree too (elapsed times, surefire's jar and dump names, javac's file order, which follows
    the directory's; in a racing attack which lines were printed before the halt)."""
    return {**verdict, "details": {k: v for k, v in verdict["details"].items() if k not in VOLATILE}}


def _fresh_cached_hit(repo: Path, task_dir: Path, tmp_path: Path) -> tuple[dict, dict, dict]:
    from strands_art.envs.migrationbench.evaluate.evaluator import evaluate_command

    # scratch in the system's temp directory: the sandbox uid must be able to enter it (tmp_path is 0700)
    fresh = evaluate_command(repo, task_dir, 240)
    cache = EvalCache(tmp_path / "cache")
    miss = cached_evaluate_command(repo, task_dir, 240, cache=cache)
    hit = cached_evaluate_command(repo, task_dir, 240, cache=cache)
    assert miss["details"]["eval_cache"]["hit"] is False and hit["details"]["eval_cache"]["hit"] is True
    return fresh, miss, hit


@pytest.mark.maven
@NEEDS_MVN
@pytest.mark.skipif(not (TASKS_DIR / "compiler-props").is_dir(), reason="bundled task compiler-props missing")
def test_cached_verdict_equals_fresh_on_a_reference_migration(tmp_path: Path) -> None:
    task_dir = TASKS_DIR / "compiler-props"
    fresh, miss, hit = _fresh_cached_hit(_copy_task(task_dir, tmp_path, reference=True), task_dir, tmp_path)
    assert fresh["reward"] == 1.0
    assert _comparable(fresh) == _comparable(miss) == _comparable(hit)


BUNDLED = (
    sorted(p.name for p in TASKS_DIR.iterdir() if (p / "task.json").is_file()) if TASKS_DIR.is_dir() else []
)


SWEEP = pytest.mark.skipif(
    os.environ.get("STRANDS_ART_EVALCACHE_SWEEP") != "1",
    reason="the every-task/every-attack sweep (~25 pairs of real evaluations, ~30 min of a worker) runs with "
    "STRANDS_ART_EVALCACHE_SWEEP=1; the suite keeps the one-task equality tests above",
)


@SWEEP
@pytest.mark.slow
@pytest.mark.maven
@NEEDS_MVN
@pytest.mark.parametrize("reference", [False, True], ids=["untouched", "reference"])
@pytest.mark.parametrize("name", BUNDLED)
def test_cached_verdict_equals_fresh_on_every_bundled_task(
    name: str, reference: bool, tmp_path: Path
) -> None:
    task_dir = TASKS_DIR / name
    fresh, miss, hit = _fresh_cached_hit(_copy_task(task_dir, tmp_path, reference), task_dir, tmp_path)
    assert fresh["reward"] == (1.0 if reference else 0.0)
    assert _comparable(fresh) == _comparable(miss) == _comparable(hit)


def _attacks() -> list[str]:
    return [
        "forged_class_versions", "failing_tests_with_forged_reports", "in_process_tests_halt_maven",
        "skipped_tests_with_hidden_skips", "excluded_failing_class_with_forged_report",
        "attach_from_test_jvm_halts_maven", "abstract_failing_class_with_forged_report",
    ]  # fmt: skip


@SWEEP
@pytest.mark.slow
@pytest.mark.maven
@NEEDS_MVN
@pytest.mark.parametrize("attack", _attacks())
def test_cached_verdict_equals_fresh_on_every_attack(attack: str, tmp_path: Path) -> None:
    from support import reward_attacks as attacks

    repo = getattr(attacks, attack)(tmp_path / "repo")
    fresh, miss, hit = _fresh_cached_hit(repo, attacks.TASK, tmp_path)
    assert fresh["reward"] < 1.0
    assert _comparable(fresh) == _comparable(miss) == _comparable(hit)


def test_a_tree_the_copy_refuses_is_evaluated_directly_uncached(
    tmp_path: Path, task_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from strands_art.envs.sandbox.files import UnsafeFile

    def refuse(*args: Any, **kwargs: Any) -> list[str]:
        raise UnsafeFile("more than 500000 files and directories")

    monkeypatch.setattr(evalcache, "copy_for_build", refuse)
    ev, cache = Counter(), EvalCache()
    ws = _write_tree(tmp_path / "ws", {"pom.xml": b"<release>17</release>"})
    out = cached_evaluate_command(ws, task_dir, cache=cache, scratch_dir=tmp_path, evaluate=ev)
    assert ev.calls[0][0] == ws and "eval_cache" not in out["details"] and cache.stored == 0


def test_a_new_cache_directory_is_made_0700_and_an_on_word_means_the_run_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = EvalCache(tmp_path / "a" / "b" / "cache").directory
    assert made is not None and stat.S_IMODE(made.stat().st_mode) == 0o700
    for word in ("on", " TRUE ", "1", "yes", ""):
        monkeypatch.setenv(evalcache.CACHE_ENV, word)
        assert evalcache.cache_directory(tmp_path / "run") == tmp_path / "run" / "eval-cache"
    for word in ("off", "0", "No", "false"):
        monkeypatch.setenv(evalcache.CACHE_ENV, word)
        assert evalcache.cache_directory(tmp_path / "run") is None


@pytest.mark.parametrize("mode", [0o1777, 0o755, 0o770, 0o701])
def test_an_existing_directory_open_to_others_is_refused_and_left_as_it_was(
    tmp_path: Path, mode: int
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    (shared / "theirs.txt").write_text("someone else's file")
    with pytest.raises(evalcache.CacheDirectoryError, match=rf"open to others \(mode {mode:04o}\)"):
        EvalCache(shared)
    assert (
        stat.S_IMODE(shared.stat().st_mode) == mode
        and (shared / "theirs.txt").read_text() == "someone else's file"
    )
    shared.chmod(0o700)  # the user's own decision: then it is used, and its files stay
    assert EvalCache(shared).directory == shared and (shared / "theirs.txt").exists()


def test_the_setting_is_checked_before_a_run_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o777)
    open_dir.chmod(0o777)
    cases = {
        str(afile): f"{evalcache.CACHE_ENV}={afile}: evaluation cache {afile}: exists and is not a directory",
        str(afile / "sub"): f"cannot be created: {afile} is not a directory this user can write",
        str(open_dir): "open to others (mode 0777)",
    }
    for setting, message in cases.items():
        monkeypatch.setenv(evalcache.CACHE_ENV, setting)
        with pytest.raises(evalcache.CacheDirectoryError, match=re.escape(message)):
            evalcache.check_cache_setting(tmp_path / "run")
    monkeypatch.setenv(evalcache.CACHE_ENV, str(tmp_path / "new" / "cache"))
    evalcache.check_cache_setting(tmp_path / "run")  # creatable: fine, and not created yet
    assert not (tmp_path / "new").exists() and not (tmp_path / "run").exists()
    monkeypatch.delenv(evalcache.CACHE_ENV)
    (tmp_path / "run" / "eval-cache").mkdir(parents=True, mode=0o755)
    (tmp_path / "run" / "eval-cache").chmod(0o755)
    with pytest.raises(
        evalcache.CacheDirectoryError, match=r"^evaluation cache .*open to others \(mode 0755\)"
    ):
        evalcache.check_cache_setting(tmp_path / "run")  # the run's own default, no variable named
