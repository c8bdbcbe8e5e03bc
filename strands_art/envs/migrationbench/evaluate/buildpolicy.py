"""Make the scoring build report test failures whatever the evaluated project says.

The evaluated project is hostile, and Maven lets a project hide failing tests from the build's
exit status: ``<testFailureIgnore>`` in surefire's configuration, a ``maven.test.failure.ignore``
property, ``<skip>``/``<skipTests>``, ``-fn`` in ``.mvn/maven.config``; and ``forkCount`` 0
(``forkMode`` never) runs the tests inside Maven's JVM, where ``Runtime.halt(0)`` in a test ends
the build with status 0 before a failure is reported (in a forked JVM surefire fails the build:
"The forked VM terminated without properly saying goodbye"). A value written in a POM
wins over a ``-D`` on the command line (Maven's plugin parameter rules), so passing
``-Dmaven.test.failure.ignore=false`` is not enough: :func:`harden_build` rewrites the evaluator's
own build copy (never the agent's workspace) before any build runs:

* in every POM of the copy (any regular file up to 8 MiB whose root element is ``<project>``,
  whatever its name: a ``<module>`` or ``<relativePath>`` may name any file): every
  element named in :data:`FORBIDDEN_ELEMENTS` is removed wherever it is (plugin configuration,
  executions, ``pluginManagement``, profiles, ``<properties>``), and so is ``<skip>`` in the
  configuration of a plugin whose ``artifactId`` names surefire, failsafe or the compiler (its
  ``<skip>`` leaves the tests uncompiled), or is not a literal (``${...}``);
* ``.mvn/maven.config`` keeps only the options of :data:`MAVEN_CONFIG_ALLOWED` (``-B``, ``-T4``,
  ``-Dname=value`` with a name that does not select, skip or excuse tests, ``-Pprofile``...);
  ``.mvn/jvm.config`` keeps only heap/stack sizes, ``-Dname=value`` and ``--add-opens`` style
  module options (no ``-javaagent``, ``@argfiles``, ``-XX:OnError``...). Everything dropped is
  returned, for the evaluation's details.

:func:`forced_args` are the command-line switches added to both builds (fail fast, failures
fatal). A POM that the XML parser cannot read is left as it is: Maven cannot read it either.
"""

from __future__ import annotations

import logging
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from strands_art.envs.sandbox.files import read_bytes

logger = logging.getLogger(__name__)

#: Elements removed from every POM: the switches that skip tests or excuse their failures, as
#: plugin parameters and as the properties that set them.
FORBIDDEN_ELEMENTS = frozenset(
    {
        "testFailureIgnore",
        "skipTests",
        "skipExec",
        "skipITs",
        "maven.test.failure.ignore",
        "maven.test.skip",
        "maven.test.skip.exec",
        "surefire.skip",
        "failsafe.skip",
        # tests in Maven's own JVM (forkCount 0, forkMode never): a test that ends that JVM with
        # Runtime.halt(0) ends the build with status 0 before any failure is reported
        "forkCount",
        "forkMode",
        # main sources not compiled (the build fact also requires every source compiled)
        "maven.main.skip",
        "skipMain",
    }
)
_TEST_PLUGINS = ("surefire", "failsafe")
_COMPILER_PLUGIN = "compiler"

#: Properties a ``-D`` may not set (in ``.mvn/maven.config``): they skip, select or excuse tests,
#: or point Maven at other settings or another local repository.
_FORBIDDEN_PROPS = re.compile(
    r"(maven\.test\..*|skipTests|skipITs|test|it\.test|surefire\..*|failsafe\..*|maven\.repo\.local"
    r"|maven\.main\.skip|testFailureIgnore|forkCount|forkMode)"
)
#: ``.mvn/maven.config`` options kept (one token each); everything else is dropped.
MAVEN_CONFIG_ALLOWED = re.compile(
    r"-B|--batch-mode|-ntp|--no-transfer-progress|-e|--errors|-U|--update-snapshots|-V"
    r"|--show-version|-T[0-9]+C?|-P[A-Za-z0-9_.,!-]+|-D[A-Za-z0-9_.-]+(=[^\s\"'`$;&|<>]*)?"
)
#: ``.mvn/jvm.config`` options kept (one token each).
JVM_CONFIG_ALLOWED = re.compile(
    r"-Xm[sx][0-9]+[kKmMgG]?|-Xss[0-9]+[kKmMgG]?|-D[A-Za-z0-9_.-]+(=[^\s\"'`$;&|<>@]*)?"
    r"|--add-(opens|exports|reads|modules)(=[A-Za-z0-9_./,=-]+)?|[A-Za-z0-9_.]+/[A-Za-z0-9_.]+=[A-Za-z0-9_.,-]+"
)

_POM_MAX_BYTES = 8 << 20


def forced_args() -> list[str]:
    """Command-line switches for every scoring build: stop at the first failure and never excuse
    one (they also override what a POM's *expression defaults* would read; POM values are
    removed by :func:`harden_build`)."""
    return ["-ff", "-Dmaven.test.failure.ignore=false", "-DtestFailureIgnore=false"]


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _plugin_artifact(plugin: ET.Element) -> str:
    for child in plugin:
        if _local(child.tag) == "artifactId":
            return (child.text or "").strip()
    return ""


def _is_test_plugin(plugin: ET.Element) -> bool:
    artifact = _plugin_artifact(plugin)
    return "$" in artifact or not artifact or any(name in artifact for name in _TEST_PLUGINS)


def _is_compiler_plugin(plugin: ET.Element) -> bool:
    artifact = _plugin_artifact(plugin)
    return "$" in artifact or not artifact or _COMPILER_PLUGIN in artifact


def parse_pom(data: bytes) -> ET.Element | None:
    """The root ``<project>`` element of the POM ``data``; None when it is not XML or not a POM."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        return None
    return root if _local(root.tag) == "project" else None


def harden_pom(data: bytes) -> tuple[bytes, list[str]] | None:
    """``data`` (a POM) without the switches that hide test failures; None when it is not a POM
    (not XML, or a root other than ``<project>``) or holds none. Returns ``(new bytes, removed
    element paths)``."""
    root = parse_pom(data)
    if root is None:
        return None
    removed: list[str] = []

    def walk(node: ET.Element, path: str, skippable: bool) -> None:
        for child in list(node):
            name = _local(child.tag)
            here = f"{path}/{name}"
            if name in FORBIDDEN_ELEMENTS or (skippable and name == "skip"):
                node.remove(child)
                removed.append(here)
                continue
            plugin = name == "plugin" and (_is_test_plugin(child) or _is_compiler_plugin(child))
            walk(child, here, skippable or plugin)

    walk(root, _local(root.tag), False)
    if not removed:
        return None
    namespace = root.tag[1:].split("}", 1)[0] if root.tag.startswith("{") else ""
    if namespace:
        ET.register_namespace("", namespace)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True), removed


def _filter_tokens(path: Path, allowed: re.Pattern[str], refuse_props: bool) -> list[str]:
    """Rewrite ``path`` keeping the allowed whitespace-separated tokens; returns the dropped ones."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    kept, dropped = [], []
    for token in text.split():
        prop = token[2:].split("=", 1)[0] if token.startswith("-D") else None
        ok = allowed.fullmatch(token) is not None
        if ok and refuse_props and prop is not None and _FORBIDDEN_PROPS.fullmatch(prop):
            ok = False
        (kept if ok else dropped).append(token)
    if dropped:
        path.write_text("".join(f"{t}\n" for t in kept), encoding="utf-8")
    return dropped


def iter_poms(build: Path) -> Iterator[tuple[str, bytes]]:
    """``(relative path, bytes)`` of every file of the copy ``build`` that may be a POM (a regular
    file up to 8 MiB mentioning ``project`` in its first 4 KiB; whatever its name: a
    ``<module>x/build.xml</module>`` or ``<relativePath>`` may name any file), in path order.
    Symlinked files are skipped: what they point to is a file of the copy, listed in its own
    right."""
    for dirpath, dirnames, filenames in os.walk(build):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(build).as_posix()
            if path.is_symlink() or not path.is_file():
                continue
            try:
                head = read_bytes(build, rel, max_bytes=4096, prefix=True)
                if b"project" not in head:
                    continue
                yield rel, read_bytes(build, rel, max_bytes=_POM_MAX_BYTES)
            except OSError:
                continue


def harden_build(build: Path) -> list[str]:
    """Rewrite the build copy ``build`` as the module doc says; returns what was removed
    (``"path: element-or-option"``, at most 100 entries listed).

    ``build`` is the evaluator's fresh copy (regular files and directories, symlinks that stay
    inside it); no build has run in it yet.
    """
    removed: list[str] = []
    for name in ("jvm.config", "maven.config"):
        path = build / ".mvn" / name
        if path.is_symlink() or not path.is_file():
            continue
        allowed = MAVEN_CONFIG_ALLOWED if name == "maven.config" else JVM_CONFIG_ALLOWED
        removed += [f".mvn/{name}: {t}" for t in _filter_tokens(path, allowed, refuse_props=True)]
    for rel, data in iter_poms(build):
        hardened = harden_pom(data)
        if hardened is not None:
            (build / rel).write_bytes(hardened[0])
            removed += [f"{rel}: {element}" for element in hardened[1]]
    if removed:
        logger.info("scoring build: removed %d test-excusing switches: %s", len(removed), removed[:5])
    return removed[:100]
