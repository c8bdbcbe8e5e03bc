"""Issue 22: attacks on the reward's evidence, run through the real evaluator.

The Maven tests (marked ``maven``) build real projects in the sandbox: forged class versions,
failing tests hidden by the POM and by a shutdown hook that rewrites the reports, extra reports
with negative or non-integer counts, and ``git replace`` of the base commit of a task given
without ``repo/``; round 2: tests run in Maven's JVM that halt it, a test JVM attaching to
Maven's to halt it, skips erased from the reports, a failing class excluded by surefire or made
abstract with a forged report. Each asserts the honest score (each scored 1.0 before its fix). The honest migrated control (1.0) is
tests/test_evaluator.py::test_reference_patch_scores_one. The rest checks the pieces without
Maven: report validation, POM hardening, hash-checked git objects.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest
from support import reward_attacks as attacks

from strands_art.envs.migrationbench.evaluate import evaluator as ev
from strands_art.envs.migrationbench.evaluate.buildpolicy import harden_build, harden_pom
from strands_art.envs.migrationbench.evaluate.evaluator import EvalTask, evaluate
from strands_art.envs.migrationbench.evaluate.gitorigin import GitObjectError, original_tests_from_git
from strands_art.envs.migrationbench.evaluate.testreports import read_test_reports
from strands_art.envs.sandbox import (
    Identity,
    SandboxUnavailable,
    allocate_identity,
    release_identity,
    require_sandbox,
)
from strands_art.envs.sandbox.removal import remove_tree

NEEDS_MVN = pytest.mark.skipif(
    shutil.which("mvn") is None, reason="mvn not installed (scripts/setup-system.sh)"
)


def _score(repo: Path, task_dir: Path = attacks.TASK) -> dict:
    return evaluate(repo, EvalTask.from_dir(task_dir), timeout_s=240, offline=True).to_json()


# ---------------------------------------------------------------- real builds
@pytest.mark.maven
@NEEDS_MVN
def test_forged_class_versions_score_zero_for_the_unmigrated_project(tmp_path: Path) -> None:
    repo = attacks.forged_class_versions(tmp_path / "repo")
    result = _score(repo)
    details = result["details"]
    # the compile build ran no test (the POM's skipTests/skip=false were removed), so the
    # classes it left are javac's: major 52, and the test build never started
    assert details["maven_exit_code"] == 0, details["log_tail"]
    assert details["class_major_versions"] == {"52": 2}
    assert details["test_maven_exit_code"] is None
    assert "pom.xml: project/build/plugins/plugin/configuration/skipTests" in details["hardened"]
    assert "pom.xml: project/build/plugins/plugin/configuration/skip" in details["hardened"]
    assert ev.REASON_NOT_JAVA17 in details["reasons"]
    assert result["java17_bytecode"] is False and result["reward"] == 0.0


@pytest.mark.maven
@NEEDS_MVN
def test_class_files_rewritten_while_tests_run_score_zero(tmp_path: Path) -> None:
    """The migrated project, but its tests write 52 into its classes: what the tests ran
    against is not what the compiler made; the re-check after the test build catches it."""
    repo = attacks.forged_class_versions(tmp_path / "repo", major=52, migrated=True)
    result = _score(repo)
    details = result["details"]
    assert details["class_major_versions"] == {"61": 2}, details["log_tail"]
    assert details["test_maven_exit_code"] == 0
    assert len(details["class_files_rewritten"]) == 2
    assert details["reasons"] == [ev.REASON_CLASSES_REWRITTEN]
    assert result["java17_bytecode"] is False and result["reward"] == 0.0


@pytest.mark.maven
@NEEDS_MVN
def test_failing_tests_hidden_by_pom_and_rewritten_reports_score_half(tmp_path: Path) -> None:
    repo = attacks.failing_tests_with_forged_reports(tmp_path / "repo")
    result = _score(repo)
    details = result["details"]
    assert result["build_success"] is True, details["log_tail"]
    # every excuse went before the build: POM parameter, property, maven.config options
    for removed in (
        "pom.xml: project/properties/maven.test.failure.ignore",
        "pom.xml: project/build/plugins/plugin/configuration/testFailureIgnore",
        ".mvn/maven.config: -fn",
        ".mvn/maven.config: -Dmaven.test.failure.ignore=true",
    ):
        assert removed in details["hardened"]
    # Maven itself failed the test build; the shutdown hook's rewritten reports say 0 failures
    assert details["test_maven_exit_code"] not in (0, None)
    assert ev.REASON_TESTS_FAILED in details["reasons"]
    # the extra reports: negative and non-integer counts refused, an unknown class not counted
    malformed = details["malformed_reports"]
    assert any(m.startswith("target/surefire-reports/TEST-zz-negative.xml: failures='-2'") for m in malformed)
    assert any(m.startswith("target/surefire-reports/TEST-zz-abc.xml: tests='abc'") for m in malformed)
    assert ev.REASON_REPORT_MALFORMED in details["reasons"]
    assert details["unmatched_reports"] == ["target/surefire-reports/TEST-zz-ghost.xml"]
    assert details["tests_total"] == 6  # the two real reports only
    assert result["tests_equivalent"] is False and result["reward"] == 0.5


@pytest.mark.maven
@NEEDS_MVN
def test_git_replace_of_the_base_commit_scores_the_honest_half(tmp_path: Path) -> None:
    repo, base = attacks.git_replaced_original(tmp_path / "repo")
    task_dir = attacks.task_without_repo(tmp_path / "task", base)
    result = _score(repo, task_dir)
    details = result["details"]
    assert result["build_success"] is True, details["log_tail"]
    assert details["test_maven_exit_code"] == 0 and result["tests_run"] == 6
    assert details["missing_tests"] == [
        "org.example.textstats.WordCounterTest#countsFrequencies",
        "org.example.textstats.WordCounterTest#mostFrequentBreaksTiesAlphabetically",
    ]
    assert details["added_tests"] == [
        "org.example.textstats.WordCounterTest#alwaysPassesA",
        "org.example.textstats.WordCounterTest#alwaysPassesB",
    ]
    # the two renamed methods of the original have no passing run either (which tests passed)
    assert details["tests_not_passed"] == details["missing_tests"]
    assert details["reasons"] == [ev.REASON_TESTS_NOT_PASSED, ev.REASON_TESTS_MISSING, ev.REASON_TESTS_ADDED]
    assert result["reward"] == 0.5


# ---------------------------------------------------------------- the pieces, without Maven
def _report(root: Path, name: str, body: str) -> None:
    d = root / "target" / "surefire-reports"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(body)


@pytest.mark.parametrize(
    ("attrs", "why"),
    [
        ('tests="abc" failures="0"', "tests='abc' is not an integer >= 0"),
        ('tests="3" failures="-2"', "failures='-2' is not an integer >= 0"),
        ('tests="2" failures="1" errors="1" skipped="1"', "failures+errors+skipped exceed tests"),
        ('tests="1e3"', "tests='1e3' is not an integer >= 0"),
        ('tests="9999999999"', "is not an integer >= 0"),
    ],
)
def test_malformed_report_counts_nothing_and_says_why(tmp_path: Path, attrs: str, why: str) -> None:
    _report(
        tmp_path,
        "TEST-p.A.xml",
        '<testsuite name="p.A" tests="2" failures="1"><testcase name="x" classname="p.A"/>'
        '<testcase name="y" classname="p.A"><failure/></testcase></testsuite>',
    )
    _report(
        tmp_path,
        "TEST-p.B.xml",
        f'<testsuite name="p.B" {attrs}><testcase name="z" classname="p.B"/></testsuite>',
    )
    report = read_test_reports(tmp_path, {"p.A", "p.B"})
    assert (report.files, report.tests, report.failures) == (1, 2, 1)
    assert report.passed_methods() == {"p.A#x"}  # p.B#z's report is not believed
    assert len(report.malformed) == 1 and report.malformed[0].startswith(
        "target/surefire-reports/TEST-p.B.xml: "
    )
    assert why in report.malformed[0]


def test_report_for_a_class_not_in_the_sources_or_in_a_second_file_is_not_counted(tmp_path: Path) -> None:
    cases = '<testcase name="a" classname="{0}"/><testcase name="b" classname="{0}"/>'
    _report(
        tmp_path,
        "TEST-p.A$Inner.xml",
        f'<testsuite name="p.A$Inner" tests="2">{cases.format("p.A$Inner")}</testsuite>',
    )
    _report(
        tmp_path,
        "TEST-ghost.xml",
        f'<testsuite name="p.Ghost" tests="50">{cases.format("p.Ghost")}</testsuite>',
    )
    _report(
        tmp_path,
        "TEST-p.Ghost.xml",
        f'<testsuite name="p.Ghost" tests="50">{cases.format("p.Ghost")}</testsuite>',
    )
    # a real class, in a file not named after it
    _report(
        tmp_path,
        "TEST-zz-again.xml",
        f'<testsuite name="p.A$Inner" tests="40">{cases.format("p.A$Inner")}</testsuite>',
    )
    report = read_test_reports(tmp_path, {"p.A", "p.A.Inner"})
    assert (report.files, report.tests) == (1, 2)
    assert report.unmatched == [
        f"target/surefire-reports/{name}"
        for name in ("TEST-ghost.xml", "TEST-p.Ghost.xml", "TEST-zz-again.xml")
    ]
    # without the source list: one report per suite, one run per <testcase>, never tests="50"
    unchecked = read_test_reports(tmp_path)
    assert (unchecked.files, unchecked.tests) == (2, 4)
    assert unchecked.duplicates == [
        "target/surefire-reports/TEST-p.Ghost.xml",
        "target/surefire-reports/TEST-zz-again.xml",
    ]
    # TestNG's one report for all classes: matched by its test cases' classes
    _report(
        tmp_path,
        "TEST-TestSuite.xml",
        '<testsuite name="TestSuite" tests="1"><testcase classname="p.A" name="x"/></testsuite>',
    )
    assert read_test_reports(tmp_path, {"p.A", "p.A.Inner"}).tests == 3


POM = """<?xml version="1.0"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<properties><maven.test.skip>true</maven.test.skip><keep.me>1</keep.me></properties>
<build><pluginManagement><plugins><plugin><artifactId>${sf}</artifactId>
<executions><execution><configuration><skip>true</skip></configuration></execution></executions>
</plugin></plugins></pluginManagement>
<plugins><plugin><artifactId>maven-jar-plugin</artifactId><configuration><skip>true</skip></configuration></plugin></plugins>
</build>
<profiles><profile><build><plugins><plugin><artifactId>maven-failsafe-plugin</artifactId>
<configuration><testFailureIgnore>true</testFailureIgnore></configuration></plugin></plugins></build></profile></profiles>
</project>"""


def test_harden_pom_removes_every_excuse_and_keeps_the_rest() -> None:
    out, removed = harden_pom(POM.encode())
    assert removed == [
        "project/properties/maven.test.skip",
        "project/build/pluginManagement/plugins/plugin/executions/execution/configuration/skip",
        "project/profiles/profile/build/plugins/plugin/configuration/testFailureIgnore",
    ]
    text = out.decode()
    assert '<project xmlns="http://maven.apache.org/POM/4.0.0">' in text and "ns0:" not in text
    assert "<keep.me>1</keep.me>" in text
    assert "maven-jar-plugin</artifactId><configuration><skip>true</skip>" in text  # not a test plugin
    assert harden_pom(b"<settings/>") is None and harden_pom(b"not xml") is None


def test_harden_build_filters_mvn_configs_and_finds_poms_by_content(tmp_path: Path) -> None:
    (tmp_path / ".mvn").mkdir()
    (tmp_path / ".mvn/maven.config").write_text(
        "-B -T2 -fn --fail-at-end -DskipTests -Dfoo=bar -pl core -Ptest\n"
    )
    (tmp_path / ".mvn/jvm.config").write_text(
        "-Xmx1g -javaagent:lib/a.jar @args -XX:OnError=sh --add-opens java.base/java.lang=ALL-UNNAMED\n"
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub/build.xml").write_text(POM)  # a <module>sub/build.xml</module> POM
    removed = harden_build(tmp_path)
    assert (tmp_path / ".mvn/maven.config").read_text().split() == ["-B", "-T2", "-Dfoo=bar", "-Ptest"]
    assert (tmp_path / ".mvn/jvm.config").read_text().split() == [
        "-Xmx1g",
        "--add-opens",
        "java.base/java.lang=ALL-UNNAMED",
    ]
    assert ".mvn/maven.config: -fn" in removed and ".mvn/jvm.config: -javaagent:lib/a.jar" in removed
    assert "sub/build.xml: project/properties/maven.test.skip" in removed


def _identity_and_sandbox() -> tuple[Identity, bool]:
    """A sandbox uid and git sandboxed where the machine allows it, else ourselves unconfined."""
    try:
        require_sandbox()
    except SandboxUnavailable:
        return Identity(os.getuid(), os.getgid(), drop=False), True
    return allocate_identity(), False


def test_git_objects_are_hash_checked(tmp_path: Path) -> None:
    """``git replace`` is ignored, and a loose object rewritten in place is refused."""
    repo, base = attacks.git_replaced_original(tmp_path / "repo")
    identity, unsafe = _identity_and_sandbox()
    top = Path(tempfile.mkdtemp(prefix="strands-art-test-"))
    os.chmod(top, 0o711)
    try:
        build = top / "repo"
        ev._copy_for_build(repo, build, identity)
        original = original_tests_from_git(build, base, identity, unsafe, top)
        assert sorted(original.keys()) == [
            "org.example.textstats.SlugsTest#collapsesSeparators",
            "org.example.textstats.SlugsTest#stripsAccentsAndPunctuation",
            "org.example.textstats.WordCounterTest#countsFrequencies",
            "org.example.textstats.WordCounterTest#emptyTextHasNoWords",
            "org.example.textstats.WordCounterTest#mostFrequentBreaksTiesAlphabetically",
            "org.example.textstats.WordCounterTest#splitsOnPunctuationAndLowercases",
        ]
        with pytest.raises(GitObjectError, match="not a full commit id"):
            original_tests_from_git(build, base[:12], identity, unsafe, top)
        # forge the base commit's loose object: same id, other content (the agent's tree)
        fake_tree = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD^{tree}"], capture_output=True, text=True, check=True
        ).stdout.strip()
        body = f"tree {fake_tree}\nauthor a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n\noriginal\n".encode()
        loose = build / ".git/objects" / base[:2] / base[2:]
        loose.chmod(0o644)
        loose.write_bytes(zlib.compress(b"commit %d\0" % len(body) + body))
        with pytest.raises(
            GitObjectError, match=f"object {base} is not the commit its id names|hash mismatch"
        ):
            original_tests_from_git(build, base, identity, unsafe, top)
    finally:
        shutil.rmtree(top, ignore_errors=True)
        if not unsafe:
            release_identity(identity)


def test_task_without_repo_needs_a_full_commit_id(tmp_path: Path) -> None:
    task = attacks.task_without_repo(tmp_path / "task", "abcdef0")
    with pytest.raises(ev.BadTask, match="full base_commit id"):
        EvalTask.from_dir(task)


def test_evaluate_cli_tells_a_bad_task_from_a_bad_repository(tmp_path: Path, capsys) -> None:
    from strands_art.cli import main as cli_main

    # a repository that is not there is the agent's fault: scored 0.0 with its reason, exit 0
    assert cli_main(["evaluate", str(tmp_path / "nope"), "--task", str(attacks.TASK)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reward"] == 0.0 and out["evaluation_error"]["reason"] == "bad_repository"
    assert "is not a directory" in out["evaluation_error"]["message"]
    (tmp_path / "repo").mkdir()
    assert cli_main(["evaluate", str(tmp_path / "repo"), "--task", str(tmp_path / "no-task")]) == 2
    assert "bad task" in capsys.readouterr().err
    # a repository that exists but is broken is scored, not refused
    assert cli_main(["evaluate", str(tmp_path / "repo"), "--task", str(attacks.TASK)]) == 0
    out = capsys.readouterr().out
    assert '"reasons": [\n      "no_pom"\n    ]' in out and '"reward": 0.0' in out


def test_build_outputs_1200_directories_deep_are_walked_without_recursion(tmp_path: Path) -> None:
    from strands_art.envs.migrationbench.evaluate.buildoutputs import class_versions

    (tmp_path / "pom.xml").write_text("<project/>")
    top = deep = tmp_path / "target"
    try:
        (deep / "classes").mkdir(parents=True)
        deep = deep / "classes"
        for _ in range(1200):  # (pathlib's mkdir(parents=True) would recurse too deep itself)
            deep = deep / "d"
            deep.mkdir()
        (deep / "X.class").write_bytes(b"\xca\xfe\xba\xbe\x00\x00\x00\x3d")
        _report(deep, "TEST-p.A.xml", '<testsuite name="p.A" tests="1"/>')
        versions = class_versions(tmp_path)
        assert list(versions.values()) == [61] and next(iter(versions)).endswith("/d/d/X.class")
        # a report dir below target/classes is no module's: never read (reports are read from
        # each module's target/ only)
        assert read_test_reports(tmp_path, {"p.A"}).files == 0
    finally:  # pytest's own clean-up (shutil.rmtree) recurses: remove the tree iteratively
        remove_tree(top)


# ---------------------------------------------------------------- round 2 (b22): real builds
@pytest.mark.maven
@NEEDS_MVN
def test_tests_in_mavens_jvm_that_halt_it_score_half(tmp_path: Path) -> None:
    """forkCount 0 / forkMode never (POM and maven.config): a failing class's static block
    writes passing reports and halts Maven's JVM with status 0. Before the fix: 1.0."""
    repo = attacks.in_process_tests_halt_maven(tmp_path / "repo")
    result = _score(repo)
    details = result["details"]
    assert result["build_success"] is True, details["log_tail"]
    for removed in (
        "pom.xml: project/build/plugins/plugin/configuration/forkCount",
        "pom.xml: project/build/plugins/plugin/configuration/forkMode",
        ".mvn/maven.config: -DforkCount=0",
        ".mvn/maven.config: -DforkMode=never",
    ):
        assert removed in details["hardened"]
    # the halt ended the forked test JVM, not Maven: surefire fails the build
    assert details["test_maven_exit_code"] not in (0, None)
    assert ev.REASON_TESTS_FAILED in details["reasons"]
    assert result["tests_equivalent"] is False and result["reward"] == 0.5


@pytest.mark.maven
@NEEDS_MVN
def test_skips_hidden_from_the_reports_score_half(tmp_path: Path) -> None:
    """Two tests skipped by a failed assumption (Maven passes), every skip erased from the
    reports by a shutdown hook. Before the fix: 1.0. Maven's printed counts still say 2."""
    repo = attacks.skipped_tests_with_hidden_skips(tmp_path / "repo")
    result = _score(repo)
    details = result["details"]
    assert result["build_success"] is True, details["log_tail"]
    assert details["test_maven_exit_code"] == 0
    assert details["tests_skipped_maven"] == 2
    assert "org.example.textstats.WordCounterTest (2 skipped, Maven's output)" in details["newly_skipped"]
    assert ev.REASON_REPORTS_CONTRADICT_MAVEN in details["reasons"]
    assert ev.REASON_NEWLY_SKIPPED in details["reasons"]
    assert result["tests_equivalent"] is False and result["reward"] == 0.5


# ---------------------------------------------------------------- round 2 (b22): the pieces
def test_harden_pom_removes_fork_settings_that_run_tests_in_mavens_jvm(tmp_path: Path) -> None:
    pom = (
        "<project><properties><forkCount>0</forkCount></properties><build><plugins><plugin>"
        "<artifactId>maven-surefire-plugin</artifactId><configuration><forkCount>0C</forkCount>"
        "<forkMode>never</forkMode><reuseForks>true</reuseForks></configuration></plugin></plugins>"
        "</build></project>"
    )
    out, removed = harden_pom(pom.encode())
    assert removed == [
        "project/properties/forkCount",
        "project/build/plugins/plugin/configuration/forkCount",
        "project/build/plugins/plugin/configuration/forkMode",
    ]
    assert b"<reuseForks>true</reuseForks>" in out
    (tmp_path / ".mvn").mkdir()
    (tmp_path / ".mvn/maven.config").write_text("-B -DforkCount=0 -DforkMode=never\n")
    (tmp_path / ".mvn/jvm.config").write_text("-Xmx1g -DforkCount=0\n")
    assert harden_build(tmp_path) == [
        ".mvn/jvm.config: -DforkCount=0",
        ".mvn/maven.config: -DforkCount=0",
        ".mvn/maven.config: -DforkMode=never",
    ]


def test_surefire_skip_counts_are_read_from_maven_output() -> None:
    import io

    from strands_art.envs.migrationbench.maven.mavenlog import digest_log

    log = (
        b"[INFO] Tests run: 2, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: 0.01 s - in p.A\n"
        b"[WARNING] Tests run: 4, Failures: 0, Errors: 0, Skipped: 2, Time elapsed: 0.2 s - in p.B$In\n"
        b"[WARNING] Tests run: 3, Failures: 0, Errors: 0, Skipped: 1, Time elapsed: 1 s -- in p.C\n"
        b"Tests run: 9, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: 0 s - in p.B$In\n"  # printed by a test
        b"[WARNING] Tests run: 9, Failures: 0, Errors: 0, Skipped: 3\n"
    )
    digest = digest_log(io.BytesIO(log), tail_chars=0)
    assert digest.max_skipped == 3
    assert digest.skipped_by_class == {"p.B$In": 2, "p.C": 1}
    assert not digest.skip_lines_overflow
    assert digest_log(io.BytesIO(b"no tests\n"), tail_chars=0).max_skipped == 0


def test_selection_changes_list_tests_the_poms_leave_out_that_the_original_ran(tmp_path: Path) -> None:
    from strands_art.envs.migrationbench.evaluate.testselection import original_poms, selection_changes

    plugin = (
        "<plugin><artifactId>maven-surefire-plugin</artifactId><configuration>{}</configuration>"
        "<executions><execution><id>default-test</id><phase>{}</phase></execution></executions></plugin>"
    )
    orig_pom = (
        "<project><modules><module>a</module><module>b</module></modules><build><plugins>"
        + plugin.format(
            "<excludes><exclude>**/*IT.java</exclude></excludes><skipTests>true</skipTests>", "test"
        )
        + "</plugins></build></project>"
    )
    orig = tmp_path / "orig"
    for rel, text in {"pom.xml": orig_pom, "a/pom.xml": "<project/>", "b/pom.xml": "<project/>"}.items():
        (orig / rel).parent.mkdir(parents=True, exist_ok=True)
        (orig / rel).write_text(text)
    poms = original_poms(orig)
    assert sorted(poms) == ["a/pom.xml", "b/pom.xml", "pom.xml"]
    # an honest copy: same selection, reformatted, an argLine added, hardened (skipTests gone)
    honest = tmp_path / "honest"
    shutil.copytree(orig, honest)
    (honest / "pom.xml").write_text(
        orig_pom.replace(
            "<excludes>", "<argLine>--add-opens java.base/java.lang=ALL-UNNAMED</argLine>\n <excludes>"
        )
    )
    (honest / "pom.xml").write_text(
        (honest / "pom.xml")
        .read_text()
        .replace("<module>b</module>", "<module>b</module><module>docs</module>")
    )
    (honest / "docs").mkdir()
    (honest / "docs/pom.xml").write_text("<project><packaging>pom</packaging></project>")  # a new module
    harden_build(honest)
    assert selection_changes(honest, poms) == []
    # excludes widened, the default test execution unbound, module b gone with its POM, a test
    # property, and a new module POM that is pom-packaged
    hostile = tmp_path / "hostile"
    shutil.copytree(orig, hostile)
    (hostile / "pom.xml").write_text(
        orig_pom.replace("**/*IT.java", "**/*Test.java")
        .replace("<phase>test</phase>", "<phase>none</phase>")
        .replace("<project>", "<project><properties><test>Slugs*</test></properties>")
        .replace("<module>b</module>", "<module>c</module>")
    )
    shutil.rmtree(hostile / "b")
    (hostile / "a" / "pom.xml").write_text("<project><packaging>pom</packaging></project>")
    changes = selection_changes(hostile, poms)
    assert "a/pom.xml: added project/packaging = <packaging>pom</packaging>" in changes
    assert "b/pom.xml: removed (the POM is gone)" in changes
    assert "pom.xml: removed project/modules/module = <module>b</module>" in changes
    assert not any("<module>c</module>" in c for c in changes)  # adding a module leaves no test out
    assert "pom.xml: added project/properties/test = <test>Slugs*</test>" in changes
    assert any(
        c.startswith("pom.xml: added project/build/plugins/plugin/configuration/excludes") for c in changes
    )
    assert any(c.startswith("pom.xml: removed project/build/plugins/plugin/executions") for c in changes)
    assert any("<phase>none</phase>" in c for c in changes)


@pytest.mark.maven
@NEEDS_MVN
def test_failing_class_excluded_with_a_forged_report_scores_half(tmp_path: Path) -> None:
    """surefire's <excludes> leaves the failing class out and a shutdown hook writes a passing
    report for it (Maven passes, the report is in the right file for a real class). Before the
    fix: 1.0. The POM no longer selects the original's tests."""
    repo = attacks.excluded_failing_class_with_forged_report(tmp_path / "repo")
    result = _score(repo)
    details = result["details"]
    assert result["build_success"] is True, details["log_tail"]
    assert details["test_maven_exit_code"] == 0
    assert details["test_selection_changed"] == [
        "pom.xml: added project/build/plugins/plugin/configuration/excludes = "
        "<excludes><exclude>**/WordCounterTest.java</exclude></excludes>"
    ]
    assert details["reasons"] == [ev.REASON_TEST_SELECTION_CHANGED]
    assert result["tests_equivalent"] is False and result["reward"] == 0.5


@pytest.mark.maven
@NEEDS_MVN
def test_test_jvm_attaching_to_maven_to_halt_it_scores_half(tmp_path: Path) -> None:
    """A failing class's static block writes passing reports, attaches to Maven's JVM (Attach
    API, same uid) and loads an agent that halts it with status 0. Maven's JVM refuses attaches
    (-XX:+DisableAttachMechanism), so the failures end the build."""
    repo = attacks.attach_from_test_jvm_halts_maven(tmp_path / "repo")
    result = _score(repo)
    details = result["details"]
    assert result["build_success"] is True, details["log_tail"]
    assert "failed: com.sun.tools.attach" in details["log_tail"] or "attach to" in details["log_tail"]
    assert details["test_maven_exit_code"] not in (0, None)
    assert ev.REASON_TESTS_FAILED in details["reasons"]
    assert result["reward"] == 0.5


def test_a_count_line_is_found_across_a_block_seam_inside_a_long_line() -> None:
    """Test output without a line end (a background process writing to Maven's stdout) cannot
    hide Maven's own count line by moving it across a read block's or a line piece's boundary."""
    import io

    from strands_art.envs.migrationbench.maven.mavenlog import BLOCK_BYTES, digest_log

    line = b"[WARNING] Tests run: 6, Failures: 0, Errors: 0, Skipped: 2\n"
    for cut in (1, 20, len(line) - 2):
        data = b"A" * (BLOCK_BYTES - cut) + line
        assert digest_log(io.BytesIO(data), tail_chars=0).max_skipped == 2, cut


def test_tests_no_engine_runs_are_marked() -> None:
    """What makes a test method never run where it is declared (newly so: ``newly_disabled``)."""
    from strands_art.envs.migrationbench.tasks.javatests import parse_test_methods

    src = (
        "package p; public {}class A {{ @Test public void x() {{}} static class B {{ @Test void y() {{}} }}"
        " class C {{ @Test void z() {{}} }} @Nested class D {{ @Test void w() {{}} @Test private void v() {{}}"
        " @Test static void u() {{}} @Test int t() {{ return 0; }} @TestFactory List<Object> f() {{ return null; }} }} }}"
    )
    before, _ = parse_test_methods(src.format(""))
    after, _ = parse_test_methods(src.format("abstract "))
    runs = {m.key: not m.never_runs for m in before}
    assert runs == {
        "p.A#x": True,
        "p.A.B#y": True,
        "p.A.C#z": False,  # an inner class without @Nested
        "p.A.D#w": True,
        "p.A.D#v": False,  # private
        "p.A.D#u": False,  # static
        "p.A.D#t": False,  # not void
        "p.A.D#f": True,  # a @TestFactory returns its tests
    }
    assert {m.key: not m.never_runs for m in after}["p.A#x"] is False  # an abstract class


@pytest.mark.maven
@NEEDS_MVN
def test_failing_class_made_abstract_with_a_forged_report_scores_half(tmp_path: Path) -> None:
    """The failing class made abstract (surefire runs none) and a passing report forged for
    it: every test method is still in the sources, Maven passes. Its tests are newly disabled."""
    repo = attacks.abstract_failing_class_with_forged_report(tmp_path / "repo")
    result = _score(repo)
    details = result["details"]
    assert result["build_success"] is True, details["log_tail"]
    assert details["test_maven_exit_code"] == 0
    assert (
        "org.example.textstats.WordCounterTest#emptyTextHasNoWords (never runs)" in details["newly_disabled"]
    )
    assert details["reasons"] == [ev.REASON_NEWLY_DISABLED]
    assert result["tests_equivalent"] is False and result["reward"] == 0.5
