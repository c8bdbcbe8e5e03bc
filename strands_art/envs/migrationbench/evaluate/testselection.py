"""Which tests a project's POMs tell Maven to run, compared with the original's.

Surefire runs the test classes its configuration selects (``<includes>``, ``<excludes>``,
``<test>``, ``<groups>``, an execution moved to phase ``none``...), and the test JVM can write a
report for any class at any time (a shutdown hook). So a class left out of the run, plus a
passing report forged for it, would count as passed. Honest projects do select tests (integration
tests excluded from surefire), so the evaluator does not force one selection: it requires the
migrated project to keep the *original's* (:func:`selection_changes`). A migration has no reason
to change which tests run; one that does fails the test fact (``test_selection_changed``).

The *selection* of a POM (:func:`selection`) is, as ``(element path, canonical XML)`` pairs:
its ``<packaging>`` and each of its ``<modules>`` (a module or a POM added is fine: it can only
add tests, which the test-method comparison sees); ``<build>``'s directories (``directory``,
``outputDirectory``, ``testSourceDirectory``, ``testOutputDirectory``); the properties that
select tests (:data:`SELECTING_PROPERTIES`); and inside every surefire/failsafe plugin (also
under ``pluginManagement`` and profiles, and any plugin whose ``artifactId`` is missing or an
expression) the elements of :data:`SELECTING_ELEMENTS` and its ``<executions>``.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from strands_art.envs.migrationbench.evaluate.buildpolicy import (
    _is_compiler_plugin,
    _is_test_plugin,
    _local,
    harden_pom,
    iter_poms,
    parse_pom,
)
from strands_art.envs.sandbox.files import read_bytes

#: Test-plugin parameters that choose which test classes or methods run, or where they come from.
SELECTING_ELEMENTS = frozenset(
    {
        "includes",
        "excludes",
        "include",
        "exclude",
        "test",
        "includesFile",
        "excludesFile",
        "groups",
        "excludedGroups",
        "dependenciesToScan",
        "testClassesDirectory",
        "testSourceDirectory",
        "classesDirectory",
        "reportsDirectory",
        "suiteXmlFiles",
        "testNGArtifactName",
        "junitArtifactName",
        "includeJUnit5Engines",
        "excludeJUnit5Engines",
        "failIfNoSpecifiedTests",
        "executions",
        # JUnit Platform configuration parameters (a filter, a deactivated condition, an
        # extension auto-detected) and the system properties that can carry them
        "configurationParameters",
        "properties",
        "systemPropertyVariables",
        "systemProperties",
        "systemPropertiesFile",
    }
)
#: maven-compiler-plugin parameters that leave sources out of compilation (its ``<skip>`` is
#: removed by :mod:`.buildpolicy`).
COMPILER_SELECTING_ELEMENTS = frozenset(
    {"includes", "excludes", "testIncludes", "testExcludes", "include", "exclude"}
)
#: Parameters that a *custom* test selection sets (surefire's default selection otherwise).
_CUSTOM_SELECTION = frozenset(
    {"includes", "excludes", "include", "exclude", "test", "includesFile", "excludesFile", "groups",
     "excludedGroups", "suiteXmlFiles", "dependenciesToScan", "testClassesDirectory", "testSourceDirectory"}
)  # fmt: skip
_CUSTOM_PROPERTIES = re.compile(
    r"test|it\.test|groups|excludedGroups|dependenciesToScan|(surefire|failsafe)\.(includes|excludes)File"
)
#: Files on the test class path that choose at run time which tests run (JUnit Platform
#: launcher and engine services, Jupiter extensions auto-detected, TestNG listeners, the
#: Platform's configuration file), by file name: :func:`restore_runtime_selection`.
RUNTIME_SELECTION_FILES = frozenset(
    {
        "junit-platform.properties",
        "org.junit.platform.launcher.PostDiscoveryFilter",
        "org.junit.platform.launcher.LauncherSessionListener",
        "org.junit.platform.launcher.LauncherDiscoveryListener",
        "org.junit.platform.launcher.TestExecutionListener",
        "org.junit.platform.launcher.LauncherInterceptor",
        "org.junit.platform.engine.TestEngine",
        "org.junit.jupiter.api.extension.Extension",
        "org.testng.ITestNGListener",
    }
)
#: ``<properties>`` that feed those parameters (their user-property names).
SELECTING_PROPERTIES = re.compile(
    r"test|it\.test|groups|excludedGroups|dependenciesToScan|(surefire|failsafe)\..*|junit\..*"
)
_BUILD_DIRS = frozenset({"directory", "outputDirectory", "testSourceDirectory", "testOutputDirectory"})


def _canonical(node: ET.Element) -> str:
    """Namespace-free, whitespace-trimmed XML of ``node`` (attributes ignored: Maven reads none)."""
    inner = "".join(_canonical(child) for child in node)
    return f"<{_local(node.tag)}>{(node.text or '').strip()}{inner}</{_local(node.tag)}>"


def selection(data: bytes) -> Counter[str] | None:
    """The selection of the POM ``data`` (see the module doc) as a multiset of
    ``"element/path = <canonical xml>"``; None when ``data`` is not a POM. Judged as the scoring
    build sees it (:func:`.buildpolicy.harden_pom` applied first), so a hardened copy and its
    original compare equal."""
    hardened = harden_pom(data)
    if hardened is not None:
        data = hardened[0]
    root = parse_pom(data)
    if root is None:
        return None
    found: Counter[str] = Counter()

    def walk(node: ET.Element, path: str, in_test_plugin: bool, in_compiler: bool) -> None:
        for child in node:
            name = _local(child.tag)
            here = f"{path}/{name}"
            if path == "project" and name == "modules":  # one entry per module: adding one is fine
                found.update(f"{here}/module = {_canonical(m)}" for m in child if _local(m.tag) == "module")
                continue
            if (
                (in_test_plugin and name in SELECTING_ELEMENTS)
                or (in_compiler and name in COMPILER_SELECTING_ELEMENTS)
                or (path == "project" and name == "packaging")
                or (path.endswith("/properties") and SELECTING_PROPERTIES.fullmatch(name))
                or (path.endswith("project/build") and name in _BUILD_DIRS)
            ):
                found[f"{here} = {_canonical(child)}"] += 1
                continue
            if in_test_plugin and name == "argLine":  # -Djunit.* there sets Platform parameters
                junit = sorted(t for t in (child.text or "").split() if t.startswith("-Djunit."))
                if junit:
                    found[f"{here} junit parameters = {' '.join(junit)}"] += 1
            plugin = name == "plugin"
            walk(
                child,
                here,
                in_test_plugin or (plugin and _is_test_plugin(child)),
                in_compiler or (plugin and _is_compiler_plugin(child)),
            )

    walk(root, "project", False, False)
    return found


def selection_changes(build: Path, original: Mapping[str, bytes]) -> list[str]:
    """How the POMs of the build copy ``build`` select tests differently from the original's.

    ``original``: the original's POM candidates by relative path (:func:`original_poms`, or
    ``*.xml`` blobs of the base commit). Every POM of the copy (:func:`.buildpolicy.iter_poms`)
    is compared with the original's file at the same path (a new POM: against an empty
    selection), and an original ``pom.xml`` that the copy lacks (a module removed with its POM,
    so no check looks for its classes) is listed too. Returns ``"path: added|removed <entry>"``
    lines (at most 50), empty when nothing changed.
    """
    changes: list[str] = []
    seen: set[str] = set()
    for rel, data in iter_poms(build):
        now = selection(data)
        if now is None:
            continue
        seen.add(rel)
        before = selection(original[rel]) if rel in original else None
        added = now - (before or Counter())
        # a module added, or the packaging of a new POM (a new module), leaves no test out
        harmless = ("project/modules/module",) + (("project/packaging",) if before is None else ())
        before = before if before is not None else Counter()
        changes += [
            f"{rel}: added {entry}" for entry in sorted(added.elements()) if not entry.startswith(harmless)
        ]
        changes += [f"{rel}: removed {entry}" for entry in sorted((before - now).elements())]
    for rel in sorted(original):
        if rel.rsplit("/", 1)[-1] == "pom.xml" and rel not in seen and selection(original[rel]) is not None:
            changes.append(f"{rel}: removed (the POM is gone)")
    return changes[:50]


def original_poms(root: Path) -> dict[str, bytes]:
    """The POM candidates of a trusted original directory (a task's ``repo/``), outside
    ``target/`` directories, by relative path."""
    return {rel: data for rel, data in iter_poms(root) if "target" not in rel.split("/")[:-1]}


def default_selection(original: Mapping[str, bytes]) -> tuple[bool, bool]:
    """``(surefire, failsafe)``: whether the original's POMs leave surefire's test selection at
    its default (no includes, excludes, test, groups, suite files, test directories, selecting
    property) and whether any of them configures failsafe (whose default includes are ``IT*``,
    ``*IT``, ``*ITCase``). ``original``: POM candidates by path (:func:`original_poms`)."""
    custom = failsafe = False
    for rel, data in original.items():
        entries = selection(data) if rel.endswith(".xml") else None
        if entries is None:
            continue
        for entry in entries:
            path = entry.split(" = ", 1)[0]
            last = path.rsplit("/", 1)[-1]
            if "/plugin/" in path and last in _CUSTOM_SELECTION:
                custom = True
            if path.startswith("project/properties/") and _CUSTOM_PROPERTIES.fullmatch(last):
                custom = True
            if path.startswith("project/build/test"):
                custom = True
        root = parse_pom(data)
        if root is not None and any(
            _local(node.tag) == "artifactId" and "failsafe" in (node.text or "") for node in root.iter()
        ):
            failsafe = True
    return not custom, failsafe


def runtime_selection_files(root: Path) -> dict[str, bytes]:
    """The :data:`RUNTIME_SELECTION_FILES` below ``root`` (a trusted original: a task's ``repo/``),
    by relative path, outside ``target/`` and hidden directories."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "target" and not d.startswith("."))
        for name in filenames:
            if name in RUNTIME_SELECTION_FILES:
                rel = (Path(dirpath) / name).relative_to(root).as_posix()
                try:
                    found[rel] = read_bytes(root, rel, max_bytes=_RUNTIME_FILE_MAX_BYTES)
                except OSError:
                    continue
    return found


_RUNTIME_FILE_MAX_BYTES = 1 << 20


def restore_runtime_selection(build: Path, original: Mapping[str, bytes], where: str = "") -> list[str]:
    """Remove from the build copy ``build`` every :data:`RUNTIME_SELECTION_FILES` file (below
    ``where``, anywhere else than ``.git``) that is not the original's file at the same path
    with the same bytes (``original``: the original's files by path, from
    :func:`runtime_selection_files` or the base commit's objects). A filter that drops a failing
    test, a listener, an engine or a Platform parameter added or changed by the migration is
    thus gone before any build; returns ``"path: removed (...)"`` lines for the verdict.

    ``where`` (relative): only that subtree, e.g. a module's ``target`` after the compile build
    (a file generated there is compared by name and bytes with every original file)."""
    removed = []
    wanted = {(rel.rsplit("/", 1)[-1], data) for rel, data in original.items()}
    top = build / where if where else build
    for dirpath, dirnames, filenames in os.walk(top):
        # the sources' pass leaves the modules' build outputs (target/ next to a pom.xml) to the
        # outputs' pass (``where``), which compares by name and bytes
        outputs = not where and "pom.xml" in filenames
        dirnames[:] = sorted(d for d in dirnames if d != ".git" and not (outputs and d == "target"))
        for name in sorted(filenames):
            if name not in RUNTIME_SELECTION_FILES:
                continue
            path = Path(dirpath) / name
            rel = path.relative_to(build).as_posix()
            try:
                data = read_bytes(build, rel, max_bytes=_RUNTIME_FILE_MAX_BYTES)
            except OSError:
                data = None
            same = original.get(rel) == data if not where else (name, data) in wanted
            if data is None or not same:
                path.unlink()
                removed.append(f"{rel}: removed (test selection at run time, not the original's)")
    return removed
