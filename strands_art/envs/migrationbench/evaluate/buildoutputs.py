"""Read the class files a Maven build left behind: their versions, and the sources that left none.

Class-file major version: bytes 6-7 (big-endian) of a ``.class`` file (JVMS §4.1); 52 = Java 8,
61 = Java 17. The build's test reports are read by :mod:`.testreports`.
"""

from __future__ import annotations

import logging
import os
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from strands_art.envs.migrationbench.tasks.javatests import declares_type, source_files, top_level_class_files
from strands_art.envs.sandbox.files import UnsafeFile, read_bytes

logger = logging.getLogger(__name__)

JAVA17_MAJOR = 61
_CLASS_MAGIC = b"\xca\xfe\xba\xbe"


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


def pom_dirs(project_dir: Path) -> list[Path]:
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
    for module in pom_dirs(project_dir):
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
    for module in pom_dirs(project_dir):
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
        for d in pom_dirs(project_dir)
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
