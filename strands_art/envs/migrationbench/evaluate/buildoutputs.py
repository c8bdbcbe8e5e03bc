"""Read what a Maven build left behind: class-file versions and surefire/failsafe XML reports.

Class-file major version: bytes 6-7 (big-endian) of a ``.class`` file (JVMS §4.1); 52 = Java 8,
61 = Java 17. Test reports: surefire's ``TEST-*.xml`` (``<testsuite tests failures errors
skipped>`` with one ``<testcase classname name>`` per executed test, a ``<skipped/>``,
``<failure/>`` or ``<error/>`` child when it did not pass), from every module's
``target/surefire-reports`` and ``target/failsafe-reports``.
"""

from __future__ import annotations

import logging
import os
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from strands_art.envs.migrationbench.tasks.javatests import declares_type, source_files, top_level_class_files
from strands_art.envs.sandbox.files import UnsafeFile, read_bytes

logger = logging.getLogger(__name__)

JAVA17_MAJOR = 61
_CLASS_MAGIC = b"\xca\xfe\xba\xbe"


#: A surefire/failsafe report larger than this is unreadable (a build can write anything there).
MAX_REPORT_BYTES = 64 << 20


def class_major_version(path: Path, root: Path | None = None) -> int:
    """Major version of one class file.

    ``root``: the tree ``path`` lies in, written by a sandboxed build; the file is then read
    without following symlinks and only if it is a regular file (:mod:`strands_art.envs.sandbox.files`).

    Raises ValueError if it is not a (regular) class file.
    """
    path = Path(path)
    if root is None:
        root, rel = path.parent, Path(path.name)
    else:
        rel = path.relative_to(root) if path.is_relative_to(root) else path
    try:
        head = read_bytes(root, rel, max_bytes=8, prefix=True)
    except (UnsafeFile, OSError) as exc:
        raise ValueError(f"not a class file: {path} ({exc})") from exc
    if len(head) < 8 or head[:4] != _CLASS_MAGIC:
        raise ValueError(f"not a class file: {path}")
    return int.from_bytes(head[6:8], "big")


#: At most this many directory entries are walked under one tree (a build can write millions).
MAX_WALK_ENTRIES = 2_000_000


def walk_tree(
    root: Path, prune: Callable[[str], bool] = lambda name: False
) -> Iterator[tuple[Path, list[str]]]:
    """``(directory, file names)`` for ``root`` and every directory below it, top-down, sorted.

    Iterative (a tree 10,000 directories deep is fine), never follows a symlink (a symlink is
    listed as a file), skips directories whose name ``prune`` accepts and ones it cannot list.

    Raises:
        UnsafeFile: more than :data:`MAX_WALK_ENTRIES` entries.
    """
    stack, seen = [root], 0
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
        except OSError:
            continue
        seen += len(entries)
        if seen > MAX_WALK_ENTRIES:
            raise UnsafeFile(f"more than {MAX_WALK_ENTRIES} entries under {root}")
        yield here, sorted(name for name, is_dir in entries if not is_dir)
        stack.extend(
            here / name for name, is_dir in sorted(entries, reverse=True) if is_dir and not prune(name)
        )


def _pom_dirs(project_dir: Path) -> list[Path]:
    """Directories holding a pom.xml (Maven modules, and stray POMs), outside target/."""
    return sorted(
        here
        for here, files in walk_tree(project_dir, prune=lambda name: name == "target" or name.startswith("."))
        if "pom.xml" in files
    )


def _files_below(root: Path, suffix: str) -> list[Path]:
    return sorted(here / name for here, files in walk_tree(root) for name in files if name.endswith(suffix))


_POM_MAX_BYTES = 8 << 20
_SOURCE_MAX_BYTES = 8 << 20


def _packaging(module: Path, root: Path) -> str:
    """The module's ``<packaging>`` (Maven's default ``jar`` when absent or unreadable); the POM is
    read as a regular file below ``root`` only (:func:`~strands_art.envs.sandbox.files.read_bytes`)."""
    try:
        data = read_bytes(root, (module / "pom.xml").relative_to(root), max_bytes=_POM_MAX_BYTES)
        tree = ET.fromstring(data)
    except (ET.ParseError, OSError, ValueError):
        return "jar"
    for child in tree:
        if child.tag.rsplit("}", 1)[-1] == "packaging":
            return (child.text or "").strip() or "jar"
    return "jar"


def expects_classes(module: Path, root: Path | None = None) -> bool:
    """Whether a Maven module must leave main class files after a successful build.

    No for a ``pom``-packaged module (its lifecycle has no compile phase), a module with only
    resources, and one whose ``src/main/java`` declares no type (only ``package-info.java``
    files or comments: javac writes nothing for them, see
    :func:`~strands_art.envs.migrationbench.tasks.javatests.declares_type`).

    The tree was just written by a sandboxed build: files are read below ``root`` (default
    ``module``) without following a symlink, regular single-link files only, bounded; a source
    that is not (a FIFO, a link, swapped in by the build) counts as declaring a type.
    """
    root = module if root is None else root
    if _packaging(module, root) == "pom":
        return False
    sources = module / "src" / "main" / "java"
    for path in _files_below(sources, ".java"):
        try:
            if declares_type(read_bytes(root, path.relative_to(root), max_bytes=_SOURCE_MAX_BYTES)):
                return True
        except (UnsafeFile, OSError):
            return True  # fail closed: a source swapped for a FIFO or a link cannot excuse a module
    return False


@dataclass
class BytecodeReport:
    """Main class files (``<module>/target/classes/**/*.class``) by major version.

    ``wrong`` lists the first 20 ``(relative path, major)`` pairs that are not 61 (``wrong_count``
    counts them all);
    ``modules_without_classes`` lists modules whose main Java sources declare types but that
    have no compiled classes (e.g. dropped from the reactor), which fails the check too; a
    module that legitimately produces none (:func:`expects_classes`) is not listed.
    """

    total: int = 0
    by_major: dict[int, int] = field(default_factory=dict)
    wrong: list[tuple[str, int]] = field(default_factory=list)
    wrong_count: int = 0
    modules_without_classes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.total > 0 and not self.wrong_count and not self.modules_without_classes


def class_versions(project_dir: Path) -> dict[str, int]:
    """Major version of every main class file, ``<module>/target/classes/**/*.class``, by path
    relative to ``project_dir`` (-1 for a file that is not a regular class file).

    The evaluator takes this snapshot when the compile build has ended (its sandbox, and every
    process in it, is gone) and before any test runs, so no test code can have written it.
    """
    versions: dict[str, int] = {}
    for module in _pom_dirs(project_dir):
        for cls in _files_below(module / "target" / "classes", ".class"):
            try:
                major = class_major_version(cls, project_dir)
            except ValueError:
                major = -1
            versions[cls.relative_to(project_dir).as_posix()] = major
    return versions


def check_bytecode(
    project_dir: Path,
    expected_major: int = JAVA17_MAJOR,
    max_listed: int = 20,
    versions: dict[str, int] | None = None,
) -> BytecodeReport:
    """Check that every main class of every module has major version ``expected_major``.

    ``versions``: a snapshot from :func:`class_versions` to judge (default: read now)."""
    if versions is None:
        versions = class_versions(project_dir)
    report = BytecodeReport()
    by_major: Counter[int] = Counter()
    for module in _pom_dirs(project_dir):
        rel_module = module.relative_to(project_dir).as_posix()
        prefix = "target/classes/" if rel_module == "." else f"{rel_module}/target/classes/"
        if not any(path.startswith(prefix) for path in versions) and expects_classes(module, project_dir):
            report.modules_without_classes.append(rel_module)
    for path, major in versions.items():
        by_major[major] += 1
        report.total += 1
        if major != expected_major:
            report.wrong_count += 1
            if len(report.wrong) < max_listed:
                report.wrong.append((path, major))
    report.by_major = dict(sorted(by_major.items()))
    return report


#: Where javac writes each kind of source's classes, relative to the module.
_OUTPUT_DIRS = {"main": "target/classes", "test": "target/test-classes"}


def expected_class_files(project_dir: Path) -> dict[str, list[str]]:
    """The class files javac must write for the sources of ``project_dir``: for every ``*.java``
    under a module's ``src/main/java`` or ``src/test/java`` (a module: a directory with a
    ``pom.xml`` whose packaging is not ``pom``), its top-level types'
    ``<module>/target/classes/pkg/Type.class`` (``test-classes`` for test sources), by source
    path relative to ``project_dir`` (:func:`.javatests.top_level_class_files`; a file that
    declares no type expects none). Read before any build, so what is expected is what the
    sources declared, not what a build left; a source that cannot be read (a FIFO, a link)
    expects a class file that cannot exist."""
    modules = {
        d.relative_to(project_dir).as_posix()
        for d in _pom_dirs(project_dir)
        if expects_classes_module(d, project_dir)
    }
    expected: dict[str, list[str]] = {}
    for kind, out_dir in _OUTPUT_DIRS.items():
        marker = f"src/{kind}/java/"
        for rel in source_files(project_dir, kind):
            module = rel.split(marker, 1)[0].rstrip("/") if not rel.startswith(marker) else ""
            if (module or ".") not in modules:
                continue
            prefix = f"{module}/{out_dir}/" if module else f"{out_dir}/"
            try:
                data = read_bytes(project_dir, rel, max_bytes=_SOURCE_MAX_BYTES)
            except (UnsafeFile, OSError):
                expected[rel] = [f"{prefix}{rel} (unreadable source)"]
                continue
            expected[rel] = [prefix + cls for cls in top_level_class_files(data)]
    return expected


def expects_classes_module(module: Path, root: Path) -> bool:
    """A module directory whose packaging compiles sources (not ``pom``)."""
    return _packaging(module, root) != "pom"


def uncompiled_sources(project_dir: Path, expected: dict[str, list[str]], limit: int = 50) -> list[str]:
    """``"source (class file)"`` for each class file of ``expected`` (:func:`expected_class_files`)
    that is not a regular class file below ``project_dir`` now (read without following a
    symlink): a source left out of compilation (a compiler ``<excludes>``, ``<skip>``). At most
    ``limit`` listed."""
    missing = []
    for source, classes in sorted(expected.items()):
        for cls in classes:
            try:
                head = read_bytes(project_dir, cls, max_bytes=4, prefix=True)
            except (UnsafeFile, OSError, ValueError):
                head = b""
            if head != _CLASS_MAGIC:
                missing.append(f"{source} ({cls})")
                if len(missing) >= limit:
                    return missing
    return missing


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
    modules = [project_dir, *(d for d in _pom_dirs(project_dir) if d != project_dir)]
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
