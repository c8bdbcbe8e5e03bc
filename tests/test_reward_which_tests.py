"""Issue 48, part 1: the reward checks *which* tests passed, from reports this evaluation's build
wrote, and reads the sources as javac does. Each attack of the issue runs through the real
evaluator (real Maven builds in the sandbox, marked ``maven``), grouped so that one build shows
several defences; the honest control (1.0) is tests/test_evaluator.py::test_reference_patch_scores_one.
Each attack scored 1.0 (or 0.5 where the build fact was forged) before the fix.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support import reward_attacks as attacks

from strands_art.envs.migrationbench.evaluate import evaluator as ev
from strands_art.envs.migrationbench.evaluate.evaluator import EvalTask, evaluate

NEEDS_MVN = pytest.mark.skipif(
    shutil.which("mvn") is None, reason="mvn not installed (scripts/setup-system.sh)"
)


def _score(repo: Path, task: str = "compiler-props") -> dict:
    return evaluate(repo, EvalTask.from_dir(attacks.TASKS / task), timeout_s=240, offline=True).to_json()


@pytest.mark.maven
@NEEDS_MVN
def test_unmigrated_class_left_out_of_compilation_fails_the_build_fact(tmp_path: Path) -> None:
    """sun-base64: ``<release>17</release>`` and the class still importing
    ``sun.misc.BASE64Encoder`` excluded from compilation (its test too), a passing report
    committed under ``src/target``. Before: build ✔, Java 17 ✔, 1.0 with the report."""
    repo = attacks.uncompiled_unmigrated_class(tmp_path / "repo")
    result = _score(repo, "sun-base64")
    details = result["details"]
    assert details["maven_exit_code"] == 0, details["log_tail"]
    assert details["class_major_versions"] == {"61": 1}  # Credentials only
    assert details["sources_not_compiled"] == [
        "src/main/java/org/example/auth/BasicAuth.java (target/classes/org/example/auth/BasicAuth.class)",
        "src/test/java/org/example/auth/BasicAuthTest.java "
        "(target/test-classes/org/example/auth/BasicAuthTest.class)",
    ]
    assert details["reasons"] == [ev.REASON_SOURCES_NOT_COMPILED]
    assert details["test_maven_exit_code"] is None  # no test build: the committed report is moot
    assert result["build_success"] is False and result["reward"] == 0.0


@pytest.mark.maven
@NEEDS_MVN
def test_failing_class_not_compiled_with_a_parameterized_count_scores_zero(tmp_path: Path) -> None:
    """The failing class left out by the compiler's ``<testExcludes>``, the count made up by a
    ``Parameterized`` runner (8 passing runs of 6 required). Before: 1.0."""
    repo = attacks.excluded_tests_with_parameterized_count(tmp_path / "repo")
    result = _score(repo)
    details = result["details"]
    assert details["maven_exit_code"] == 0, details["log_tail"]
    assert details["sources_not_compiled"] == [
        "src/test/java/org/example/textstats/WordCounterTest.java "
        "(target/test-classes/org/example/textstats/WordCounterTest.class)"
    ]
    assert details["reasons"] == [ev.REASON_SOURCES_NOT_COMPILED]
    assert result["reward"] == 0.0


@pytest.mark.maven
@NEEDS_MVN
def test_platform_filter_is_removed_and_composed_tests_are_seen(tmp_path: Path) -> None:
    """junit-mix: a ``PostDiscoveryFilter`` service drops the two failing tests, a
    ``junit-platform.properties`` is added, six ``@Check`` (meta-annotated ``@Test``) methods
    make up the count. Before: 1.0. Now the service and the properties are gone before the
    build, so the failures fail the test build; the six are seen as added."""
    repo = attacks.platform_filter_and_composed_tests(tmp_path / "repo")
    result = _score(repo, "junit-mix")
    details = result["details"]
    assert result["build_success"] is True, details["log_tail"]
    removed = "removed (test selection at run time, not the original's)"
    for path in (
        "src/test/resources/META-INF/services/org.junit.platform.launcher.PostDiscoveryFilter",
        "src/test/resources/junit-platform.properties",
    ):
        assert f"{path}: {removed}" in details["hardened"]
    assert details["test_maven_exit_code"] not in (0, None)  # the dropped tests ran, and failed
    assert details["added_tests"] == [
        "org.example.roman.RomanExtraTest#five",
        "org.example.roman.RomanExtraTest#four",
        "org.example.roman.RomanExtraTest#one",
        "org.example.roman.RomanExtraTest#six",
        "org.example.roman.RomanExtraTest#three",
        "org.example.roman.RomanExtraTest#two",
    ]
    assert details["tests_not_passed"] == [
        "org.example.roman.RomanRangeTest#largestValue",
        "org.example.roman.RomanRangeTest#zeroIsRejected",
    ]
    assert details["reasons"] == [ev.REASON_TESTS_FAILED, ev.REASON_TESTS_NOT_PASSED, ev.REASON_TESTS_ADDED]
    assert result["reward"] == 0.5


@pytest.mark.maven
@NEEDS_MVN
def test_unicode_escapes_and_duplicate_reports_score_half(tmp_path: Path) -> None:
    """POM untouched: the failing tests hidden from javac by ``// \\u000a /*``, javac-only
    tests added by ``// \\u000a @Test``, and duplicate passing reports (``TEST-C-x.xml``, a
    failsafe report) plus ``tests="1000"`` written at the test JVM's exit. Before: 1.0."""
    repo = attacks.unicode_escapes_and_duplicate_reports(tmp_path / "repo")
    result = _score(repo)
    details = result["details"]
    assert result["build_success"] is True, details["log_tail"]
    assert details["test_maven_exit_code"] == 0  # javac saw no failing test
    hidden = [
        "org.example.textstats.WordCounterTest#emptyTextHasNoWords",
        "org.example.textstats.WordCounterTest#splitsOnPunctuationAndLowercases",
    ]
    assert details["missing_tests"] == hidden  # the parser reads what javac reads
    assert details["added_tests"] == [
        "org.example.textstats.WordCounterTest#javacOnlyA",
        "org.example.textstats.WordCounterTest#javacOnlyB",
    ]
    assert details["tests_not_passed"] == hidden  # the duplicates that list them count nothing
    assert details["duplicate_reports"] == [
        "target/surefire-reports/TEST-org.example.textstats.WordCounterTest-x.xml",
        "target/failsafe-reports/TEST-org.example.textstats.WordCounterTest.xml",
    ]
    assert result["tests_run"] == 6 and details["tests_total"] == 6  # <testcase>s, not tests="1000"
    assert details["reasons"] == [ev.REASON_TESTS_NOT_PASSED, ev.REASON_TESTS_MISSING, ev.REASON_TESTS_ADDED]
    assert result["reward"] == 0.5


@pytest.mark.maven
@NEEDS_MVN
async def test_migrate_run_with_committed_reports_and_skipped_test_compilation_scores_zero(
    tmp_path: Path, qwen3
) -> None:
    """Through a real ``migrate`` run (scripted policy, real tools, real evaluator): the POM
    migrated with the compiler's ``<skip>`` (no test compiles), half the main code deleted, and
    two passing reports written under ``src/target/surefire-reports``. Before: 1.0 in
    results.jsonl. Now the ``<skip>`` is removed from the build copy, so the tests compile
    against the deleted class and the build fails; the reports are never read."""
    import io
    import json

    from rich.console import Console
    from support.migrate_script import StepsThenAnswer

    from strands_art.backends.scripted import ScriptedBackend
    from strands_art.cli import build_parser
    from strands_art.envs.migrationbench.run.runner import run_migration
    from strands_art.store import TrajectoryStore

    pom = (attacks.TASK / "repo/pom.xml").read_text(encoding="utf-8").replace("1.8", "17")
    pom = pom.replace(
        "</project>",
        "<build><plugins><plugin><artifactId>maven-compiler-plugin</artifactId>"
        "<configuration><skip>true</skip></configuration></plugin></plugins></build>\n</project>",
    )
    report = '<testsuite name="org.example.textstats.{0}" tests="{1}" failures="0" errors="0" skipped="0"/>'
    steps = [
        ("file_editor", {"command": "create", "path": "pom.xml", "file_text": pom}),
        ("shell", {"command": "rm src/main/java/org/example/textstats/Slugs.java"}),
    ] + [
        (
            "file_editor",
            {
                "command": "create",
                "path": f"src/target/surefire-reports/TEST-org.example.textstats.{cls}.xml",
                "file_text": report.format(cls, n),
            },
        )
        for cls, n in (("SlugsTest", 2), ("WordCounterTest", 4))
    ]
    backend = ScriptedBackend(qwen3, StepsThenAnswer(qwen3, steps))
    run_dir = tmp_path / "run"
    argv = ["migrate", "--tasks", "compiler-props", "--model", "qwen3-scripted", "--run-dir", str(run_dir)]
    argv += ["--max-turns", "8", "--concurrency", "1", "--no-plot"]
    await run_migration(
        build_parser().parse_args(argv),
        Console(file=io.StringIO(), width=200),
        backend_factory=lambda a: (backend, qwen3),
    )
    [rec] = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert rec["tool_stats"]["calls"] == {"file_editor": 3, "shell": 1}, rec
    assert rec["reward"] == 0.0 and rec["build_success"] is False and rec["tests_run"] == 0, rec
    [traj] = list(TrajectoryStore(run_dir / "trajectories"))
    details = traj.metadata["evaluation"]["details"]
    assert "pom.xml: project/build/plugins/plugin/configuration/skip" in details["hardened"]
    assert details["reasons"] == [ev.REASON_BUILD_FAILED]
    assert any("SlugsTest" in line for line in details["maven_errors"])  # the tests compiled, and failed to
