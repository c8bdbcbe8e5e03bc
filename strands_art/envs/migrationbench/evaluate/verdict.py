"""The verdict of one evaluation from its evidence: the rules of :mod:`.evaluator`, and why a
fact failed as machine-readable reason codes (``details["reasons"]``).

:mod:`.evaluator` gathers the evidence (build copy, compile build, class-file snapshot, test
build, reports, original tests) and re-exports everything here; import from there.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from strands_art.envs.migrationbench.evaluate.buildoutputs import BytecodeReport
from strands_art.envs.migrationbench.evaluate.evaltask import EvalTask
from strands_art.envs.migrationbench.evaluate.testreports import read_test_reports
from strands_art.envs.migrationbench.maven.maven import MavenResult
from strands_art.envs.migrationbench.tasks.javatests import TestInventory

BUILD_REWARD = 0.5
TEST_REWARD = 0.5

# Machine-readable reasons (``details["reasons"]``) why a fact of the reward failed.
REASON_NO_POM = "no_pom"  #: the repository has no root pom.xml
REASON_BUILD_FAILED = "build_failed"  #: the compile build exited non-zero
REASON_BUILD_TIMEOUT = "build_timeout"  #: the compile build ran out of time
REASON_NOT_JAVA17 = "bytecode_not_java17"  #: a main class file is not major 61
REASON_MODULE_WITHOUT_CLASSES = "module_without_classes"  #: a module with sources left no classes
REASON_CLASSES_REWRITTEN = "class_files_rewritten"  #: a class file's version changed during the test build
REASON_TESTS_FAILED = "tests_failed"  #: the test build exited non-zero (failing tests are fatal)
REASON_TESTS_TIMEOUT = "tests_timeout"  #: the test build ran out of time
REASON_REPORT_UNREADABLE = "report_unreadable"  #: a report is not a regular XML file
REASON_REPORT_MALFORMED = "report_malformed"  #: a report's counts are not integers >= 0 or do not add up
REASON_REPORTS_CONTRADICT_MAVEN = "reports_contradict_maven"  #: reports show failures, Maven passed
REASON_TOO_FEW_TESTS = "too_few_tests"  #: fewer tests passed than num_test_cases
REASON_TESTS_MISSING = "tests_missing"  #: an original test method is gone
REASON_TESTS_ADDED = "tests_added"  #: a test method that the original lacks
REASON_NEWLY_DISABLED = "newly_disabled"  #: a test newly @Ignore'd/@Disabled, or no engine runs it now
REASON_NEWLY_SKIPPED = "newly_skipped"  #: a test case skipped that the original did not disable
REASON_ORIGINAL_UNAVAILABLE = "original_tests_unavailable"  #: base_commit's objects missing or forged
REASON_OUTPUTS_UNREADABLE = "build_outputs_unreadable"  #: the build left a tree that cannot be walked
REASON_TEST_SELECTION_CHANGED = "test_selection_changed"  #: the POMs select other tests than the original's
REASON_SOURCES_NOT_COMPILED = "sources_not_compiled"  #: a main or test source left no class file
REASON_TESTS_NOT_PASSED = "tests_not_passed"  #: an original test method has no passing run in the reports


@dataclass
class EvalResult:
    """The evaluator's verdict; :meth:`to_json` gives the documented JSON object."""

    build_success: bool
    java17_bytecode: bool
    tests_run: int
    tests_required: int
    tests_equivalent: bool
    reward: float
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _diff(a: Counter[str], b: Counter[str], limit: int = 50) -> list[str]:
    return sorted((a - b).elements())[:limit]


def score(
    build: Path,
    task: EvalTask,
    original: TestInventory | str,
    current: TestInventory,
    built: MavenResult,
    tested: MavenResult | None,
    bytecode: BytecodeReport,
    rewritten: list[str],
    left_out: list[str],
    selection: list[str] = (),
    uncompiled: list[str] = (),
    default_selection: tuple[bool, bool] = (True, False),
) -> EvalResult:
    """The verdict (see the rules in the module doc): ``built`` is the compile build, ``tested``
    the test build (None when the build fact failed), ``bytecode`` judged on the class files as
    the compile build left them, ``rewritten`` the ones the test build changed, ``original``
    the original's inventory or why it is unavailable, ``selection`` how the POMs select tests
    differently from the original's (:func:`.testselection.selection_changes`), ``uncompiled``
    the sources the compile build left without class files
    (:func:`.buildoutputs.uncompiled_sources`), ``default_selection`` whether the original's
    POMs keep surefire's default selection and configure failsafe
    (:func:`.testselection.default_selection`)."""
    reasons: list[str] = []
    if built.timed_out:
        reasons.append(REASON_BUILD_TIMEOUT)
    elif not built.ok:
        reasons.append(REASON_BUILD_FAILED)
    if bytecode.wrong_count or not bytecode.total:
        reasons.append(REASON_NOT_JAVA17)
    if bytecode.modules_without_classes:
        reasons.append(REASON_MODULE_WITHOUT_CLASSES)
    if rewritten:
        reasons.append(REASON_CLASSES_REWRITTEN)
    if uncompiled:
        reasons.append(REASON_SOURCES_NOT_COMPILED)
    java17 = bytecode.ok and not rewritten
    build_success = built.ok and java17 and not uncompiled
    last = tested or built
    details: dict[str, Any] = {
        "task": task.name,
        "maven_exit_code": built.exit_code,
        "timed_out": built.timed_out,
        "maven_offline": built.offline,
        "maven_duration_s": round(built.duration_s + (tested.duration_s if tested else 0.0), 2),
        "test_maven_exit_code": tested.exit_code if tested else None,
        "test_timed_out": tested.timed_out if tested else False,
        "left_out_of_build": left_out[:50],
        "class_files": bytecode.total,
        "class_major_versions": {str(k): v for k, v in bytecode.by_major.items()},
        "wrong_major_version_count": bytecode.wrong_count,
        "wrong_major_version": [f"{path} ({major})" for path, major in bytecode.wrong[:5]],
        "modules_without_classes": bytecode.modules_without_classes,
        "class_files_rewritten": rewritten[:20],
        "sources_not_compiled": list(uncompiled)[:50],
        "maven_errors": list(built.error_lines if not built.ok else last.error_lines),
        "log_tail": (built if not built.ok else last).output_tail[-4000:],
    }
    tests_run = 0
    tests_equivalent = False
    if build_success and tested is not None:
        reports = read_test_reports(build, current.classes)
        tests_run = reports.passed
        if tested.timed_out:
            reasons.append(REASON_TESTS_TIMEOUT)
        elif not tested.ok:
            reasons.append(REASON_TESTS_FAILED)
        if reports.unreadable:
            reasons.append(REASON_REPORT_UNREADABLE)
        if reports.malformed:
            reasons.append(REASON_REPORT_MALFORMED)
        # a report is the test JVM's to rewrite (a shutdown hook runs after surefire wrote it);
        # the skips surefire *printed* are not: a test can print more, never fewer
        hidden_skips = tested.max_skipped > reports.skipped or tested.skip_lines_overflow
        if (tested.ok and (reports.failures or reports.errors)) or hidden_skips:
            reasons.append(REASON_REPORTS_CONTRADICT_MAVEN)
        if tests_run < task.num_test_cases:
            reasons.append(REASON_TOO_FEW_TESTS)
        if selection:
            reasons.append(REASON_TEST_SELECTION_CHANGED)
        if isinstance(original, str):
            reasons.append(REASON_ORIGINAL_UNAVAILABLE)
            details["original_error"] = original
            original = TestInventory(methods=[], files=0, parse_errors=[])
        orig_keys, cur_keys = original.keys(), current.keys()
        newly_disabled = _diff(current.disabled_keys(), original.disabled_keys())
        # a test no engine runs any more (class made abstract, method made private...) is disabled
        newly_disabled += [
            f"{k} (never runs)" for k in _diff(current.never_run_keys(), original.never_run_keys())
        ]
        orig_disabled = set(original.disabled_keys())
        newly_skipped = sorted({k for k in reports.skipped_keys if k not in orig_disabled})
        orig_disabled_classes = {k.split("#", 1)[0] for k in orig_disabled}
        newly_skipped += [
            f"{cls} ({n} skipped, Maven's output)"
            for cls, n in tested.skipped_by_class
            if cls.replace("$", ".") not in orig_disabled_classes
        ]
        missing, added = _diff(orig_keys, cur_keys), _diff(cur_keys, orig_keys)
        # which tests passed, not how many: every original test method that runs must have a
        # passing run (and none that did not pass) in a report this build wrote
        required = original.required_keys(*default_selection, reports.classes)
        passed = reports.passed_methods()
        not_passed = [key for key in required if key not in passed]
        for flag, reason in (
            (not_passed, REASON_TESTS_NOT_PASSED),
            (missing, REASON_TESTS_MISSING),
            (added, REASON_TESTS_ADDED),
            (newly_disabled, REASON_NEWLY_DISABLED),
            (newly_skipped, REASON_NEWLY_SKIPPED),
        ):
            if flag and REASON_ORIGINAL_UNAVAILABLE not in reasons:
                reasons.append(reason)
        tests_equivalent = not reasons
        details.update(
            {
                "test_reports": reports.files,
                "test_modules": reports.modules,
                "tests_total": reports.tests,
                "tests_failed": reports.failures,
                "tests_errors": reports.errors,
                "tests_skipped": reports.skipped,
                "unreadable_reports": reports.unreadable,
                "malformed_reports": reports.malformed[:20],
                "unmatched_reports": reports.unmatched[:20],
                "duplicate_reports": reports.duplicates[:20],
                "tests_required_to_pass": len(required),
                "tests_not_passed": not_passed[:50],
                "test_methods_original": sum(orig_keys.values()),
                "test_methods_now": sum(cur_keys.values()),
                "missing_tests": missing,
                "added_tests": added,
                "newly_disabled": newly_disabled,
                "newly_skipped": newly_skipped[:50],
                "test_selection_changed": list(selection)[:20],
                "tests_skipped_maven": tested.max_skipped,
                "test_parse_errors": current.parse_errors,
            }
        )
    details["reasons"] = reasons
    reward = BUILD_REWARD * build_success + TEST_REWARD * (build_success and tests_equivalent)
    return EvalResult(
        build_success=build_success,
        java17_bytecode=java17,
        tests_run=tests_run,
        tests_required=task.num_test_cases,
        tests_equivalent=tests_equivalent,
        reward=float(reward),
        details=details,
    )
