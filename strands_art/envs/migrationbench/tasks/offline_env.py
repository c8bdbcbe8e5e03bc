"""A task's declared offline Maven environment: ``TASK_DIR/offline/``, seeded into every build.

Real repositories pin versions Debian lacks, inherit deployment-only parents
(``org.sonatype.oss:oss-parent``) and use ``bundle`` packaging, whose lifecycle names plugins
without versions. Instead of editing the upstream ``pom.xml`` (the task would no longer be the
upstream repository), a task may carry ``offline/``: a directory in Maven repository layout whose
files are copied into the fresh local repository of every build of that task — the evaluator's
two builds and the agent's own ``mvn`` — after the fixed relocations of :mod:`.offline_repo`.
``repo/`` stays byte-identical to upstream.

Allowed files (nothing else; no code):

* ``G/R/O/U/P/ARTIFACT/VERSION/ARTIFACT-VERSION.pom``: a POM whose ``groupId`` (or its parent's),
  ``artifactId`` and ``version`` (or its parent's) are those of its path. A *relocation* to
  Debian's version (``<distributionManagement><relocation>``) or a *stub* parent (coordinates and
  packaging ``pom`` only, for parents that configure deployment).
* ``G/R/O/U/P/ARTIFACT/maven-metadata-local.xml``: version metadata (``<metadata>`` with that
  ``groupId``/``artifactId``), for plugins named without a version and dependencies declared
  with a version range. Maven resolves a version it chose from local metadata from the local
  repository only, so the builds link Debian's POM and jar of each version named into it
  (:func:`.offline_repo.serve_metadata_versions`; never a file of the task).
* ``G/R/O/U/P/ARTIFACT/VERSION/ARTIFACT-VERSION.jar``: only an *inert plugin stub*, a zip holding
  nothing but ``META-INF/maven/plugin.xml`` (no class), whose coordinates are those of its path
  and whose every goal is implemented by :data:`STUB_MOJO` (Debian's
  ``dependency:properties``, which sets a project property per resolved dependency and nothing
  else; the stub's descriptor asks for no dependency resolution). For build tooling Debian does
  not package (coverage, staging, signing, licence headers): its goals then do nothing.

Declared and checked: ``task.json["offline"]["files"]`` maps every file's path (relative to
``offline/``, ``/``-separated) to its SHA-256; :func:`load_offline_env` refuses an ``offline/``
that is not declared, a declared file that is missing or differs, an undeclared file, a symlink
or special file, a path outside the layout, more than :data:`MAX_FILES` files or a file over
:data:`MAX_FILE_BYTES`, and a POM or metadata file whose coordinates do not match its path.
:func:`seed_offline_env` checks each file's hash again as it copies it.

The agent cannot write the task's ``offline/``: it lives in the task directory, which no sandbox
binds; the agent's ``mvn`` wrapper re-seeds from a root-owned, read-only copy in the workspace's
``aux`` directory (:mod:`.toolenv`), which touches only the agent's own builds.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OFFLINE_DIR = "offline"
"""The directory's name in a task directory."""

TASK_KEY = "offline"
"""Where the declaration lives in ``task.json``: ``{"files": {path: sha256}, ...}``."""

MAX_FILES = 512
MAX_FILE_BYTES = 256 << 10
MAX_DEPTH = 24

METADATA_NAME = "maven-metadata-local.xml"

STUB_MOJO = "org.apache.maven.plugins.dependency.PropertiesMojo"
"""The one implementation an inert plugin stub may name (Debian's maven-dependency-plugin)."""

STUB_DESCRIPTOR = "META-INF/maven/plugin.xml"

_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class OfflineEnvError(ValueError):
    """A task's ``offline/`` or its declaration is malformed (a bad task, not the agent's doing)."""


@dataclass(frozen=True)
class OfflineEnv:
    """A validated ``offline/``: its directory and ``(relative path, sha256)`` of every file."""

    root: Path
    files: tuple[tuple[str, str], ...]

    def coordinates(self) -> list[str]:
        """``group:artifact:version`` of each POM and ``group:artifact`` of each metadata file."""
        return [_coordinates_of(rel) for rel, _ in self.files]


def _coordinates_of(rel: str) -> str:
    parts = rel.split("/")
    if parts[-1] == METADATA_NAME:
        return ".".join(parts[:-2]) + ":" + parts[-2]
    return ".".join(parts[:-3]) + ":" + parts[-3] + ":" + parts[-2]


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _child_text(el: ET.Element, name: str) -> str | None:
    for c in el:
        if _local(c.tag) == name:
            return (c.text or "").strip()
    return None


def check_file(rel: str, data: bytes) -> None:
    """Check one file of ``offline/``: its path is in the layout and its content names it.

    Raises:
        OfflineEnvError: naming ``rel`` and what is wrong.
    """
    parts = rel.split("/")
    if any(not _SEGMENT.fullmatch(p) for p in parts) or len(parts) > MAX_DEPTH:
        raise OfflineEnvError(f"offline/{rel}: not a Maven repository path (segments [A-Za-z0-9_.+-])")
    if len(data) > MAX_FILE_BYTES:
        raise OfflineEnvError(f"offline/{rel}: {len(data):,} bytes, more than {MAX_FILE_BYTES:,}")
    if len(parts) >= 4 and parts[-1] == f"{parts[-3]}-{parts[-2]}.jar":
        _check_stub_jar(rel, data, ".".join(parts[:-3]), parts[-3], parts[-2])
        return
    try:
        root = ET.fromstring(data.decode("utf-8"))
    except (ValueError, ET.ParseError) as exc:
        raise OfflineEnvError(f"offline/{rel}: not UTF-8 XML ({exc})") from None
    if parts[-1] == METADATA_NAME:
        if len(parts) < 3:
            raise OfflineEnvError(f"offline/{rel}: metadata must be GROUP/.../ARTIFACT/{METADATA_NAME}")
        group, artifact = ".".join(parts[:-2]), parts[-2]
        if _local(root.tag) != "metadata":
            raise OfflineEnvError(f"offline/{rel}: root element must be <metadata>")
        found = (_child_text(root, "groupId"), _child_text(root, "artifactId"))
        if found != (group, artifact):
            raise OfflineEnvError(f"offline/{rel}: names {found[0]}:{found[1]}, its path {group}:{artifact}")
        return
    if len(parts) < 4 or parts[-1] != f"{parts[-3]}-{parts[-2]}.pom":
        raise OfflineEnvError(
            f"offline/{rel}: only GROUP/.../ARTIFACT/VERSION/ARTIFACT-VERSION.pom (or .jar: an inert "
            f"plugin stub) and GROUP/.../ARTIFACT/{METADATA_NAME} are allowed (no code)"
        )
    group, artifact, version = ".".join(parts[:-3]), parts[-3], parts[-2]
    if _local(root.tag) != "project":
        raise OfflineEnvError(f"offline/{rel}: root element must be <project>")
    parent = next((c for c in root if _local(c.tag) == "parent"), None)
    found = (
        _child_text(root, "groupId") or (parent is not None and _child_text(parent, "groupId")) or None,
        _child_text(root, "artifactId"),
        _child_text(root, "version") or (parent is not None and _child_text(parent, "version")) or None,
    )
    if found != (group, artifact, version):
        raise OfflineEnvError(
            f"offline/{rel}: the POM is {':'.join(map(str, found))}, its path {group}:{artifact}:{version}"
        )


def _check_stub_jar(rel: str, data: bytes, group: str, artifact: str, version: str) -> None:
    """An inert plugin stub: a zip of :data:`STUB_DESCRIPTOR` alone naming only :data:`STUB_MOJO`."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = [n for n in z.namelist() if not n.endswith("/")]
            if names != [STUB_DESCRIPTOR]:
                raise OfflineEnvError(
                    f"offline/{rel}: a jar may hold only {STUB_DESCRIPTOR} (no code), holds {names[:5]}"
                )
            info = z.getinfo(STUB_DESCRIPTOR)
            if info.file_size > MAX_FILE_BYTES:
                raise OfflineEnvError(
                    f"offline/{rel}: {STUB_DESCRIPTOR} is larger than {MAX_FILE_BYTES:,} bytes"
                )
            root = ET.fromstring(z.read(STUB_DESCRIPTOR).decode("utf-8"))
    except (zipfile.BadZipFile, ValueError, ET.ParseError) as exc:
        if isinstance(exc, OfflineEnvError):
            raise
        raise OfflineEnvError(f"offline/{rel}: not an inert plugin stub ({exc})") from None
    found = (_child_text(root, "groupId"), _child_text(root, "artifactId"), _child_text(root, "version"))
    if _local(root.tag) != "plugin" or found != (group, artifact, version):
        raise OfflineEnvError(
            f"offline/{rel}: the descriptor is {found}, its path {group}:{artifact}:{version}"
        )
    impls = {(m.text or "").strip() for m in root.iter() if _local(m.tag) == "implementation"}
    if impls - {STUB_MOJO}:
        raise OfflineEnvError(
            f"offline/{rel}: a stub's goals may only be {STUB_MOJO}, names {sorted(impls)[:3]}"
        )


def scan_offline_dir(root: Path) -> dict[str, bytes]:
    """Every file of ``root`` (an ``offline/`` directory) by ``/``-separated relative path.

    Walks without following symlinks; each file is checked with :func:`check_file`.

    Raises:
        OfflineEnvError: a symlink or special file, too many files or levels, a bad file.
    """
    out: dict[str, bytes] = {}
    stack: list[tuple[Path, tuple[str, ...]]] = [(root, ())]
    while stack:
        d, prefix = stack.pop()
        if len(prefix) > MAX_DEPTH:
            raise OfflineEnvError(f"{root}: nested more than {MAX_DEPTH} levels")
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as exc:
            raise OfflineEnvError(f"{d}: {exc.strerror or exc}") from None
        for entry in entries:
            rel = "/".join((*prefix, entry.name))
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                stack.append((Path(entry.path), (*prefix, entry.name)))
                continue
            if not stat.S_ISREG(st.st_mode):
                raise OfflineEnvError(
                    f"offline/{rel}: not a regular file (symlinks and special files are refused)"
                )
            if len(out) >= MAX_FILES:
                raise OfflineEnvError(f"{root}: more than {MAX_FILES} files")
            if st.st_size > MAX_FILE_BYTES:
                raise OfflineEnvError(f"offline/{rel}: {st.st_size:,} bytes, more than {MAX_FILE_BYTES:,}")
            data = _read_regular(Path(entry.path))
            check_file(rel, data)
            out[rel] = data
    return out


def _read_regular(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OfflineEnvError(f"{path}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)


def declaration(root: Path, **extra: Any) -> dict[str, Any]:
    """The ``task.json["offline"]`` value for ``root`` as it is now (``files`` plus ``extra`` keys).

    Raises:
        OfflineEnvError: see :func:`scan_offline_dir`.
    """
    files = {rel: hashlib.sha256(data).hexdigest() for rel, data in sorted(scan_offline_dir(root).items())}
    return {"files": files, **extra}


def load_offline_env(task_dir: Path, meta: dict[str, Any]) -> OfflineEnv | None:
    """The task's validated offline environment, or None when it declares none and has no ``offline/``.

    Raises:
        OfflineEnvError: ``offline/`` without a declaration or the reverse, a declaration that is
            not ``{"files": {path: sha256}}``, files that differ from it, or a bad file.
    """
    root = Path(task_dir) / OFFLINE_DIR
    declared = meta.get(TASK_KEY)
    where = f"{Path(task_dir) / 'task.json'}"
    if declared is None:
        if os.path.lexists(root):
            raise OfflineEnvError(
                f"{root} exists but {where} declares no '{TASK_KEY}' (list its files with their SHA-256: "
                "python -m strands_art.envs.migrationbench.generate.realtasks declare TASK_DIR)"
            )
        return None
    files = declared.get("files") if isinstance(declared, dict) else None
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and _SHA256.fullmatch(v) for k, v in files.items()
    ):
        raise OfflineEnvError(f"{where}: '{TASK_KEY}' must be {{\"files\": {{PATH: SHA256, ...}}}}")
    if not root.is_dir() or root.is_symlink():
        raise OfflineEnvError(f"{where} declares '{TASK_KEY}' but {root} is not a directory")
    found = {rel: hashlib.sha256(data).hexdigest() for rel, data in scan_offline_dir(root).items()}
    missing = sorted(set(files) - set(found))
    extra = sorted(set(found) - set(files))
    changed = sorted(rel for rel in set(files) & set(found) if files[rel] != found[rel])
    if missing or extra or changed:
        raise OfflineEnvError(
            f"{root} differs from its declaration in {where}: missing {missing[:5]}, undeclared "
            f"{extra[:5]}, changed {changed[:5]}"
        )
    return OfflineEnv(root=root, files=tuple(sorted(found.items())))


def seed_offline_env(local_repo: Path, env: OfflineEnv) -> int:
    """Copy ``env``'s files into ``local_repo`` (same relative paths); return how many.

    Each file's hash is checked again as it is read (it must still be what was validated).

    Raises:
        OfflineEnvError: a file changed since :func:`load_offline_env`.
    """
    for rel, digest in env.files:
        data = _read_regular(env.root.joinpath(*rel.split("/")))
        if hashlib.sha256(data).hexdigest() != digest:
            raise OfflineEnvError(f"{env.root}/{rel} changed since the task was loaded")
        out = local_repo.joinpath(*rel.split("/"))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
    return len(env.files)
