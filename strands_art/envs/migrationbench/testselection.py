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

import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from strands_art.envs.migrationbench.buildpolicy import (
    _is_test_plugin,
    _local,
    harden_pom,
    iter_poms,
    parse_pom,
)

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

    def walk(node: ET.Element, path: str, in_test_plugin: bool) -> None:
        for child in node:
            name = _local(child.tag)
            here = f"{path}/{name}"
            if path == "project" and name == "modules":  # one entry per module: adding one is fine
                found.update(f"{here}/module = {_canonical(m)}" for m in child if _local(m.tag) == "module")
                continue
            if (
                (in_test_plugin and name in SELECTING_ELEMENTS)
                or (path == "project" and name == "packaging")
                or (path.endswith("/properties") and SELECTING_PROPERTIES.fullmatch(name))
                or (path.endswith("project/build") and name in _BUILD_DIRS)
            ):
                found[f"{here} = {_canonical(child)}"] += 1
                continue
            walk(child, here, in_test_plugin or (name == "plugin" and _is_test_plugin(child)))

    walk(root, "project", False)
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
