"""Read the test reports a Maven build left behind: surefire's and failsafe's XML, one run per
``<testcase>``.

Surefire's ``TEST-*.xml`` (``<testsuite tests failures errors skipped>`` with one ``<testcase
classname name>`` per executed test, a ``<skipped/>``, ``<failure/>`` or ``<error/>`` child when
it did not pass), from every module's ``target/surefire-reports`` and
``target/failsafe-reports`` (modules: :func:`.buildoutputs.pom_dirs`). The build wrote them, so
each is read as a regular file of at most :data:`MAX_REPORT_BYTES`, never through a symlink.
"""

from __future__ import annotations

import logging
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from strands_art.envs.migrationbench.evaluate.buildoutputs import MAX_WALK_ENTRIES, pom_dirs
from strands_art.envs.sandbox.files import UnsafeFile, read_bytes

logger = logging.getLogger(__name__)

#: A surefire/failsafe report larger than this is unreadable (a build can write anything there).
MAX_REPORT_BYTES = 64 << 20


@dataclass
class TestReport:
    """What the counted reports say, one ``<testcase>`` per run (never a summary attribute).

    Reports are read from every module's ``target/surefire-reports`` and
    ``target/failsafe-reports`` only (a module: a directory holding a ``pom.xml``, and the
    project root). ``tests``/``failures``/``errors``/``skipped`` count ``<testcase>`` elements
    (a ``<failure>``, ``<error>`` or ``<skipped>`` child, or none: passed); ``passed_keys`` /
    ``not_passed_keys`` are the ``pkg.Class#method`` keys (:func:`case_key`: parameterized runs
    folded to their method) with a passing run / with a run that did not pass.

    ``unreadable``: report paths that are not regular files or not XML (counted as nothing);
    ``malformed``: ``"path: why"`` for reports whose summary counts are not integers >= 0 or
    claim more failed, errored and skipped tests than tests (counted as nothing); ``unmatched``:
    report paths that are not one test suite about classes declared in the test sources, in the
    file named after it (counted as nothing: see :func:`_suite_matches`); ``duplicates``: a
    second report about a suite already counted (``TEST-C.xml`` and ``TEST-C-x.xml``, or one
    class in both surefire's and failsafe's reports: the first, surefire's canonical file,
    counts).
    """

    __test__ = False  # not a pytest class

    files: int = 0
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    modules: list[str] = field(default_factory=list)
    skipped_keys: list[str] = field(default_factory=list)
    passed_keys: set[str] = field(default_factory=set)
    not_passed_keys: set[str] = field(default_factory=set)
    classes: set[str] = field(default_factory=set)
    unreadable: list[str] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        """Test runs executed and passed: ``tests - failures - errors - skipped``."""
        return self.tests - self.failures - self.errors - self.skipped

    def passed_methods(self) -> set[str]:
        """Keys with at least one passing run and none that failed, errored or was skipped."""
        return self.passed_keys - self.not_passed_keys


def case_key(classname: str, name: str) -> str:
    """``pkg.Outer$Inner`` + ``method(int)[2]`` (JUnit 4 ``method[2]``, surefire's JUnit 5
    ``method{int}[2]``) -> ``pkg.Outer.Inner#method``."""
    method = re.split(r"[(\[{]", name, maxsplit=1)[0].strip()
    return f"{classname.replace('$', '.')}#{method}"


#: A report count: a decimal integer >= 0 (at most 9 digits: no report holds a billion tests).
_COUNT = re.compile(r"[0-9]{1,9}")
_COUNT_ATTRS = ("tests", "failures", "errors", "skipped")


def _suite_counts(suite: ET.Element) -> dict[str, int] | str:
    """The four counts of one ``<testsuite>``, or why they cannot be believed."""
    counts = {}
    for attr in _COUNT_ATTRS:
        raw = suite.get(attr)
        if raw is None:
            counts[attr] = 0  # surefire writes all four; a missing one counts nothing
        elif _COUNT.fullmatch(raw.strip()):
            counts[attr] = int(raw.strip())
        else:
            return f"{attr}={raw[:40]!r} is not an integer >= 0"
    if counts["failures"] + counts["errors"] + counts["skipped"] > counts["tests"]:
        return f"failures+errors+skipped exceed tests ({counts})"
    return counts


def _suite_matches(suite: ET.Element, known: set[str], file_name: str) -> bool:
    """Whether a ``<testsuite>`` is about test classes of the sources and sits in the file surefire
    names after it (``TEST-<suite name>.xml``, or ``TEST-<suite name>-<reportNameSuffix>.xml``):
    its name is a class of the sources (JUnit reports), or it holds test cases and each names
    one (TestNG's ``TEST-TestSuite.xml``)."""
    name = suite.get("name") or ""
    if file_name != f"TEST-{name}.xml" and not file_name.startswith(f"TEST-{name}-"):
        return False
    if name.replace("$", ".") in known:
        return True
    cases = [(case.get("classname") or "").replace("$", ".") for case in suite.iter("testcase")]
    return bool(cases) and all(name in known for name in cases)


_REPORT_KINDS = ("surefire-reports", "failsafe-reports")


def report_dirs(project_dir: Path) -> list[Path]:
    """Where the scoring build's reports are read: ``target/surefire-reports`` and
    ``target/failsafe-reports`` of the root and of every directory holding a ``pom.xml``
    (outside ``target/`` and hidden directories); a ``target/`` anywhere else is never read."""
    modules = [project_dir, *(d for d in pom_dirs(project_dir) if d != project_dir)]
    return [module / "target" / kind for kind in _REPORT_KINDS for module in modules]


def _report_order(xml: Path, project_dir: Path) -> tuple[int, str, bool, str]:
    """Surefire before failsafe, then module, then ``TEST-C.xml`` before ``TEST-C-suffix.xml``."""
    kind = _REPORT_KINDS.index(xml.parent.name)
    return kind, xml.parent.parent.parent.relative_to(project_dir).as_posix(), "-" in xml.name[5:-4], xml.name


def read_test_reports(project_dir: Path, test_classes: Collection[str] | None = None) -> TestReport:
    """Read the surefire/failsafe ``TEST-*.xml`` reports of every module under ``project_dir``
    (:func:`report_dirs`) into a :class:`TestReport`.

    Each report is checked before it counts (see :class:`TestReport`): unreadable, malformed,
    (when ``test_classes`` is given: the dotted names of the types declared in the test
    sources) unmatched and duplicate reports are listed and count nothing, never guessed. A
    report's suites all count or none does.
    """
    report = TestReport()
    modules: set[str] = set()
    known = None if test_classes is None else set(test_classes)
    found = []
    for where in report_dirs(project_dir):
        try:
            if where.is_symlink() or where.parent.is_symlink() or not where.is_dir():
                continue
            with os.scandir(where) as it:
                found += [
                    where / e.name for e in it if e.name.startswith("TEST-") and e.name.endswith(".xml")
                ]
        except OSError:
            continue
        if len(found) > MAX_WALK_ENTRIES:
            raise UnsafeFile(f"more than {MAX_WALK_ENTRIES} reports under {project_dir}")
    counted: set[tuple[str, str]] = set()  # :func:`_suite_identity` of the suites counted
    for xml in sorted(found, key=lambda p: _report_order(p, project_dir)):
        rel = xml.relative_to(project_dir).as_posix()
        try:
            root = ET.fromstring(read_bytes(project_dir, rel, max_bytes=MAX_REPORT_BYTES))
        except (ET.ParseError, OSError) as exc:
            logger.warning("unreadable test report %s: %s", rel, exc)
            report.unreadable.append(rel)
            continue
        suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
        parsed = []
        for suite in suites:
            counts = _suite_counts(suite)
            if isinstance(counts, str):
                report.malformed.append(f"{rel}: {counts}")
                break
            parsed.append(suite)
        else:
            if known is not None and (len(suites) != 1 or not _suite_matches(suites[0], known, xml.name)):
                report.unmatched.append(rel)
                continue
            names = {_suite_identity(suite, known, xml.parent.name) for suite in parsed}
            if names & counted:
                report.duplicates.append(rel)
                continue
            counted |= names
            for suite in parsed:
                _count_cases(suite, report)
            report.files += 1
            module = xml.parent.parent.parent.relative_to(project_dir).as_posix()
            modules.add("" if module == "." else module)
    report.modules = sorted(modules)
    return report


def _suite_identity(suite: ET.Element, known: set[str] | None, kind: str) -> tuple[str, str]:
    """What a second report must not repeat: a class's suite once over both kinds of report; an
    aggregate suite (TestNG's ``TestSuite``, about several classes) once per kind."""
    name = suite.get("name") or ""
    aggregate = known is not None and name.replace("$", ".") not in known
    return name, kind if aggregate else ""


def _count_cases(suite: ET.Element, report: TestReport) -> None:
    """Add one suite's ``<testcase>`` elements to ``report``, one run each."""
    for case in suite.iter("testcase"):
        classname = case.get("classname") or ""
        key = case_key(classname, case.get("name") or "")
        report.tests += 1
        report.classes.add(classname.replace("$", "."))
        children = {child.tag for child in case}
        if "skipped" in children:
            report.skipped += 1
            report.skipped_keys.append(key)
        elif "failure" in children:
            report.failures += 1
        elif "error" in children:
            report.errors += 1
        else:
            report.passed_keys.add(key)
            continue
        report.not_passed_keys.add(key)
