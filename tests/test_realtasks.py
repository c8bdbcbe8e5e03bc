"""The real-task builder: export a record's commit untouched, propose offline/, score, report."""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import subprocess
import types
from pathlib import Path

import pytest

from strands_art.envs.migrationbench.generate.fromrecords import make_tasks_from_records
from strands_art.envs.migrationbench.generate.realtasks import (
    BLOCKED_DIR,
    BuildError,
    done_records,
    export_commit,
    find_clone,
    gitlinks,
    mark_remaking,
    summary,
)
from strands_art.envs.migrationbench.tasks.taskinfo import git_tree_id
from strands_art.envs.migrationbench.tasks.tasks import load_task
from strands_art.envs.sandbox import SandboxUnavailable, require_sandbox

try:
    require_sandbox()
    SANDBOX_OK = True
except SandboxUnavailable:
    SANDBOX_OK = False

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <parent><groupId>org.sonatype.oss</groupId><artifactId>oss-parent</artifactId><version>7</version></parent>
  <groupId>demo</groupId><artifactId>up</artifactId><version>1.0</version>
  <properties><maven.compiler.source>1.8</maven.compiler.source><maven.compiler.target>1.8</maven.compiler.target></properties>
  <dependencies>
    <dependency><groupId>junit</groupId><artifactId>junit</artifactId><version>4.12</version><scope>test</scope></dependency>
  </dependencies>
</project>
"""


def git(*args: str, cwd: Path) -> str:
    env = {
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@b",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@b",
    }
    env |= {
        "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
        "HOME": str(cwd),
    }
    env["PATH"] = "/usr/bin:/bin"
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def upstream(root: Path, second_commit: bool = True) -> tuple[Path, str]:
    """A clone ``root/demo__up`` of an 'upstream' project; returns it and the base commit."""
    repo = root / "demo__up"
    (repo / "src/main/java/demo").mkdir(parents=True)
    (repo / "src/test/java/demo").mkdir(parents=True)
    (repo / "pom.xml").write_text(POM)
    (repo / "src/main/java/demo/Calc.java").write_text(
        "package demo;\npublic class Calc { public static int add(int a, int b) { return a + b; } }\n"
    )
    (repo / "src/test/java/demo/CalcTest.java").write_text(
        "package demo;\nimport org.junit.Test;\nimport static org.junit.Assert.assertEquals;\n"
        "public class CalcTest { @Test public void adds() { assertEquals(3, Calc.add(1, 2)); } }\n"
    )
    (repo / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "base", cwd=repo)
    base = git("rev-parse", "HEAD", cwd=repo)
    if second_commit:  # upstream moved on: the export must still be base_commit
        (repo / "later.txt").write_text("later\n")
        git("add", "-A", cwd=repo)
        git("commit", "-qm", "later", cwd=repo)
    return repo, base


def test_export_is_the_commit_byte_for_byte(tmp_path: Path) -> None:
    repo, base = upstream(tmp_path / "clones")
    git_dir = find_clone(tmp_path / "clones", "demo/up", base)
    assert git_dir == repo / ".git"
    assert find_clone(tmp_path / "clones", "demo/up", "f" * 40) is None
    tree = export_commit(git_dir, base, tmp_path / "out" / "repo")
    out = tmp_path / "out" / "repo"
    assert git_tree_id(out) == tree == git("rev-parse", f"{base}^{{tree}}", cwd=repo)
    assert not (out / "later.txt").exists() and (out / "crlf.txt").read_bytes() == b"a\r\nb\r\n"
    assert git("rev-parse", "HEAD", cwd=out) == base
    with pytest.raises(BuildError, match="git fetch of base_commit from the clone failed") as failed:
        export_commit(git_dir, "e" * 40, tmp_path / "out2")
    assert str(tmp_path) not in str(failed.value)  # reports name no path of this machine


def test_a_submodule_exports_as_its_empty_directory_and_hashes_as_its_gitlink(tmp_path: Path) -> None:
    repo, _ = upstream(tmp_path / "clones", second_commit=False)
    link = "f00d" * 10  # a submodule's commit: only its id is in upstream's tree
    git("update-index", "--add", "--cacheinfo", f"160000,{link},libs/proto", cwd=repo)
    (repo / ".gitmodules").write_text('[submodule "proto"]\n\tpath = libs/proto\n\turl = ../proto\n')
    git("add", ".gitmodules", cwd=repo)
    git("commit", "-qm", "with a submodule", cwd=repo)
    base = git("rev-parse", "HEAD", cwd=repo)
    out = tmp_path / "out" / "repo"
    tree = export_commit(repo / ".git", base, out)
    assert tree == git("rev-parse", f"{base}^{{tree}}", cwd=repo)
    assert (out / "libs/proto").is_dir() and not any((out / "libs/proto").iterdir())
    assert gitlinks(out) == {"libs/proto": link}
    assert git_tree_id(out) != tree  # without the gitlink the tree differs
    # a filled submodule directory is not upstream's tree
    (out / "libs/proto/Extra.java").write_text("class Extra {}\n")
    assert git_tree_id(out, gitlinks(out)) != tree


def _args(out: Path, records: Path, repos: Path, reference: Path | None) -> argparse.Namespace:
    return argparse.Namespace(
        out_dir=str(out),
        from_records=str(records),
        repos=str(repos),
        reference=str(reference) if reference else None,
        only=None,
        max_seconds=0.0,
        timeout=300.0,
        recheck=False,
        retry_blocked=False,
        remake=False,
        max_rounds=6,
    )


@pytest.mark.parametrize(
    ("flags", "made_again"),
    [({}, []), ({"retry_blocked": True}, ["b/blocked"]), ({"remake": True}, ["a/made", "b/blocked"])],
)
def test_which_done_records_are_made_again(tmp_path: Path, monkeypatch, flags, made_again) -> None:
    """A rerun skips what report.jsonl holds; --retry-blocked redoes the blocked records, --remake
    every selected one (the builder itself is replaced here: what is checked is the selection)."""
    from strands_art.envs.migrationbench.generate import fromrecords

    base = "ab" * 20
    rows = [
        {"repo": r, "base_commit": base, "num_test_cases": 1, "license": "MIT"}
        for r in ("a/made", "b/blocked")
    ]
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "tasks"
    out.mkdir()
    (out / "report.jsonl").write_text(
        json.dumps(rows[0] | {"status": "made", "untouched": 0.0, "reference": 1.0}) + "\n"
        + json.dumps(rows[1] | {"status": "blocked", "blocked": ["org.x:y:1 not in Debian"]}) + "\n"
    )  # fmt: skip
    calls: list[str] = []

    def fake_make(record, git_dir, out_dir, **kw):
        calls.append(record["repo"])
        return record | {"status": "made", "untouched": 0.0, "reference": None}

    monkeypatch.setattr(fromrecords, "find_clone", lambda repos, repo, commit: tmp_path)
    monkeypatch.setattr(fromrecords, "make_real_task", fake_make)
    args = _args(out, records, tmp_path, None)
    for k, v in flags.items():
        setattr(args, k, v)
    make_tasks_from_records(args)
    assert calls == made_again


def test_a_torn_report_line_is_made_again_not_a_traceback(tmp_path: Path) -> None:
    """A killed write leaves a torn last line in report.jsonl: it stopped every later run with a
    JSONDecodeError traceback; the record of a torn line is now made again."""
    out = tmp_path / "tasks"
    out.mkdir()
    made = {"repo": "a/made", "base_commit": "ab" * 20, "status": "made", "untouched": 0.0, "reference": 1.0}
    (out / "report.jsonl").write_text(json.dumps(made) + "\n" + '{"repo": "b/torn", "base_co' + "\n[1]\n")
    assert done_records(out) == {"a/made": made}
    with open(out / "report.jsonl", "a") as f:
        f.write('{"repo": "c/torn-last", "stat')  # no newline: the next line must not join it
    rec = {"repo": "c/torn-last", "base_commit": "cd" * 20, "num_test_cases": 1}
    assert mark_remaking(out, rec) == done_records(out)["c/torn-last"]
    mark_remaking(out, rec | {"repo": "d/next"})  # after a whole line: no blank line between
    lines = (out / "report.jsonl").read_text().split("\n")
    assert lines[-4] == '{"repo": "c/torn-last", "stat' and lines[-1] == ""
    assert [json.loads(x)["repo"] for x in lines[-3:-1]] == ["c/torn-last", "d/next"]


def test_a_remake_that_does_not_finish_is_not_reported_made(tmp_path: Path, monkeypatch, capsys) -> None:
    """--remake removes the made task's directory, then builds: when the sandbox stops it (or the
    run is killed) the report still said ``made`` for a half-made directory, and a rerun without
    --remake skipped it (exit 0). Now a ``remaking`` line stands until the remake's outcome, and
    any rerun makes it again. The builder is real up to its first build (git export, task.json)."""
    from strands_art.envs.migrationbench.generate import realtasks
    from strands_art.envs.sandbox import SandboxError

    clones = tmp_path / "clones"
    repo, base = upstream(clones)
    record = {"repo": "demo/up", "base_commit": base, "num_test_cases": 1, "license": "MIT"}
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps(record) + "\n")
    out = tmp_path / "tasks"
    (out / "demo__up" / "repo").mkdir(parents=True)
    (out / "demo__up" / "task.json").write_text('{"real": {"check": {"ok": true}}}')  # the made task
    (out / "report.jsonl").write_text(
        json.dumps(record | {"status": "made", "untouched": 0.0, "reference": 1.0}) + "\n"
    )

    def no_sandbox(*a, **kw):
        raise SandboxError("bwrap: setting up uid map: Permission denied")

    monkeypatch.setattr(realtasks, "evaluate", no_sandbox)
    args = _args(out, records, clones, None)
    args.remake = True
    assert make_tasks_from_records(args) == 2
    assert "the sandbox cannot start" in capsys.readouterr().err
    assert done_records(out)["demo/up"]["status"] == "remaking"
    assert "check" not in json.loads((out / "demo__up" / "task.json").read_text())["real"]  # half-made
    assert "demo/up " in summary(out) and "REMAKING: its remake did not finish" in summary(out)
    assert summary(out).endswith("RESULT records=1 made=0 blocked=0 reference_ok=0 remaking=1\n")
    args.remake = False  # a plain rerun makes it again (before: skipped it as made, exit 0)
    assert make_tasks_from_records(args) == 2


def test_remake_stopped_by_max_seconds_names_the_records_left(tmp_path: Path, monkeypatch, capsys) -> None:
    """``--remake --max-seconds`` said "run again to continue", but the same command remakes every
    record again from the first: it now names the ``--only`` list of the records it did not reach."""
    from strands_art.envs.migrationbench.generate import fromrecords

    base = "ab" * 20
    rows = [{"repo": r, "base_commit": base, "num_test_cases": 1} for r in ("a/one", "b/two", "c/three")]
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "tasks"
    out.mkdir()
    (out / "report.jsonl").write_text(
        "".join(json.dumps(r | {"status": "made", "untouched": 0.0, "reference": None}) + "\n" for r in rows)
    )
    clock = itertools.chain([0, 1, 2], itertools.repeat(100))  # start, a/one starts, its line; then 100 s
    monkeypatch.setattr(fromrecords, "time", types.SimpleNamespace(monotonic=lambda: next(clock)))
    monkeypatch.setattr(fromrecords, "find_clone", lambda repos, repo, commit: tmp_path)
    monkeypatch.setattr(
        fromrecords,
        "make_real_task",
        lambda record, *a, **kw: record | {"status": "made", "untouched": 0.0, "reference": None},
    )
    args = _args(out, records, tmp_path, None)
    args.remake, args.max_seconds = True, 5.0
    make_tasks_from_records(args)
    assert (
        "stopped after 5 s: to remake the rest, run again with --remake --only b/two,c/three"
        in capsys.readouterr().out
    )


@pytest.mark.maven
@pytest.mark.skipif(not SANDBOX_OK or shutil.which("mvn") is None, reason="sandbox or mvn missing")
def test_builder_proposes_offline_and_checks_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STRANDS_ART_MAVEN_OFFLINE", "1")
    repo, base = upstream(tmp_path / "clones")
    record = {
        "repo": "demo/up",
        "base_commit": base,
        "num_java_files": 2,
        "num_loc": 6,
        "num_pom_xml": 1,
        "num_src_test_java_files": 1,
        "num_test_cases": 1,
        "license": "MIT",
    }
    unparsed = record | {"repo": "demo/unparsed", "num_test_cases": -1}
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps(record) + "\n" + json.dumps(unparsed) + "\n")
    patch = tmp_path / "demo__up.patch"
    patch.write_text(
        "--- a/pom.xml\n+++ b/pom.xml\n@@ -4,3 +4,3 @@\n"
        "   <groupId>demo</groupId><artifactId>up</artifactId><version>1.0</version>\n"
        "-  <properties><maven.compiler.source>1.8</maven.compiler.source><maven.compiler.target>1.8</maven.compiler.target></properties>\n"
        "+  <properties><maven.compiler.source>17</maven.compiler.source><maven.compiler.target>17</maven.compiler.target></properties>\n"
        "   <dependencies>\n"
    )
    out = tmp_path / "tasks"
    assert make_tasks_from_records(_args(out, records, tmp_path / "clones", patch)) == 0
    (report,) = done_records(out).values()
    assert report["status"] == "made" and report["untouched"] == 0.0 and report["reference"] == 1.0
    assert report["offline_files"] == ["org/sonatype/oss/oss-parent/7/oss-parent-7.pom"]
    task = load_task(out / "demo__up")  # a valid task: offline/ declared and checked
    assert task.offline_env is not None and task.offline_env.coordinates() == [
        "org.sonatype.oss:oss-parent:7"
    ]
    assert git_tree_id(task.repo_dir) == git("rev-parse", f"{base}^{{tree}}", cwd=repo)  # pristine repo/
    meta = json.loads((out / "demo__up" / "task.json").read_text())
    assert meta["real"]["check"] == {"untouched_reward": 0.0, "reference_reward": 1.0, "ok": True}
    assert summary(out).endswith("RESULT records=1 made=1 blocked=0 reference_ok=1\n")
    assert not (out / BLOCKED_DIR).exists()
    # a rerun resumes: nothing is built again
    assert make_tasks_from_records(_args(out, records, tmp_path / "clones", patch)) == 0
    assert len((out / "report.jsonl").read_text().splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--recheck"], "--recheck needs --from-records"),
        (["--repos", "clones"], "--repos needs --from-records"),
        (["--only", "a/b"], "--only needs --from-records"),
        (["--from-records", "records.csv"], "--from-records needs --repos DIR"),
        (
            ["--from-records", "records.csv", "--repos", ".", "--max-rounds", "-1"],
            "--max-rounds must be an integer from 0 to 50, got -1",
        ),
    ],
)
def test_record_flags_without_their_partner_are_refused_before_anything_runs(
    tmp_path: Path, capsys, argv, message
):
    """A record-only flag without --from-records used to start the synthetic build of 13 tasks;
    --from-records without --repos named ``--repos None``. Both: one line, exit 2, nothing made."""
    from strands_art.cli import build_parser

    out = tmp_path / "out"
    args = build_parser().parse_args(["make-tasks", str(out), *argv])
    assert args.func(args) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_only_naming_no_usable_record_exits_2_and_says_which(tmp_path: Path, capsys) -> None:
    """``--only X`` where X is no record used to exit 0 having made nothing; now exit 2 naming X:
    not a record, a skipped record (unparsed count), or a record without a clone. Nothing built."""
    repo, base = upstream(tmp_path / "clones", second_commit=False)
    record = {"repo": "demo/up", "base_commit": base, "num_test_cases": 1}
    rows = [record, record | {"repo": "demo/unparsed", "num_test_cases": -1}]
    rows.append(record | {"repo": "demo/noclone"})
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "tasks"
    for only, said in [
        ("demo/typo", "--only 'demo/typo': demo/typo is not a record (records: "),
        ("demo/up,demo/unparsed", "demo/unparsed was skipped: num_test_cases -1"),
        (",", "no repo given"),
        ("demo/noclone,demo/up", "--only demo/noclone: no clone holding base_commit under "),
    ]:
        args = _args(out, records, tmp_path / "clones", None)
        args.only = only
        assert make_tasks_from_records(args) == 2, only
        err = capsys.readouterr().err
        assert said in err, (only, err)
        assert not (out / "demo__up").exists() and not (out / "report.jsonl").exists()
