"""Per-rollout workspace: a private copy of a task repository with confined path resolution.

Each rollout edits its own copy of ``<task>/repo`` so rollouts never see each other's changes
and the bundled task stays pristine. Every path a tool receives goes through
:meth:`Workspace.resolve`, which accepts a path only if its *real* location (after following
symlinks, including symlinked parent directories) is inside the workspace root. A refused path
raises :class:`PathOutsideWorkspace`, whose message is written for the model to read.

Besides the repository root the workspace owns an ``aux`` directory outside the repository
(for a ``mvn`` wrapper, a Maven local repository, a private HOME); it is removed by
:meth:`Workspace.cleanup` together with the copy.

A copied workspace belongs to its own unprivileged sandbox identity
(:func:`~strands_art.envs.sandbox.allocate_identity`): the copy and ``aux`` are owned by that uid
with mode 0700, inside a fresh directory under ``base_dir`` (the runner passes
``<run_dir>/workspaces``; default: the system temp dir). ``base_dir`` is created with mode 0711
when we are root (the sandbox uid must traverse it to reach its own directory, and may not list
it) and 0700 otherwise; below a directory the sandbox uid cannot enter it becomes a symlink to a
directory in the system temp dir.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from strands_art.envs.sandbox.policy import (
    Identity,
    allocate_identity,
    chown_tree,
    release_identity,
    untraversable_ancestor,
)
from strands_art.envs.sandbox.removal import remove_tree

logger = logging.getLogger(__name__)


#: Name prefix of the system-temp-dir directory a ``base_dir`` links to (see :func:`_make_base`).
LINKED_BASE_PREFIX = "strands-art-workspaces-"


class PathOutsideWorkspace(ValueError):
    """A tool path that resolves outside the workspace root (``..``, absolute path, symlink)."""


class Workspace:
    """A directory tree that tools may touch; everything else is refused.

    Args:
        root: the repository directory the model works in. It must exist; it is stored as its
            real path (symlinks resolved), and that is the path shown to the model.
        owned_dirs: directories removed by :meth:`cleanup` (the temporary copy, ``aux``).
            A workspace built directly on an existing directory owns nothing and
            ``cleanup()`` leaves it in place.
        identity: the sandbox uid that owns the tree (see the module doc). Default for a
            workspace on an existing directory: the caller's own uid, unchanged (no switch),
            so its sandbox runs as the caller outside its namespaces.
        aux_dir: an existing ``aux`` directory (a copy made by :meth:`copy_of` has one).

    Raises:
        FileNotFoundError: ``root`` is not an existing directory.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        owned_dirs: tuple[Path, ...] = (),
        identity: Identity | None = None,
        aux_dir: Path | None = None,
    ) -> None:
        real = Path(os.path.realpath(root))
        if not real.is_dir():
            raise FileNotFoundError(f"workspace root {root!s} is not a directory")
        self.root: Path = real
        self._owned: list[Path] = list(owned_dirs)
        self._aux: Path | None = aux_dir
        self.identity: Identity = identity or Identity(os.getuid(), os.getgid(), drop=False)
        self._release = identity is not None

    # ------------------------------------------------------------------ construction
    @classmethod
    def copy_of(
        cls,
        source: str | os.PathLike[str],
        dest: str | os.PathLike[str] | None = None,
        *,
        base_dir: str | os.PathLike[str] | None = None,
    ) -> Workspace:
        """Copy ``source`` (a repository directory) into a fresh workspace with its own identity.

        Args:
            source: directory to copy (trusted: a task); symlinks inside it are copied as
                symlinks (a link that points outside stays refused by :meth:`resolve`).
            dest: where the copy goes; must not exist yet (it is created and owned; ``aux`` is
                a sibling directory). Default: ``<new dir under base_dir>/repo`` with ``aux``
                beside it, and that whole directory is owned.
            base_dir: where the new directory is made (created if missing, see the module
                doc); default the system temp dir. Ignored with ``dest``.

        Returns:
            The workspace rooted at the copy.

        Raises:
            FileNotFoundError: ``source`` is not a directory.
            FileExistsError: ``dest`` already exists.
            PermissionError: ``base_dir`` lies below a directory the sandbox uid cannot enter.
        """
        src = Path(source)
        if not src.is_dir():
            raise FileNotFoundError(f"cannot copy workspace: {src} is not a directory")
        identity = allocate_identity()
        try:
            if dest is None:
                parent = _make_base(base_dir, identity) if base_dir is not None else None
                top = Path(os.path.realpath(tempfile.mkdtemp(prefix="strands-art-ws-", dir=parent)))
                target, aux = top / "repo", top / "aux"
                owned: tuple[Path, ...] = (top,)
            else:
                target = Path(dest)
                if target.exists():
                    raise FileExistsError(f"workspace destination {target} already exists")
                target.parent.mkdir(parents=True, exist_ok=True)
                aux = Path(tempfile.mkdtemp(prefix=f"{target.name}-aux-", dir=target.parent))
                top = target
                owned = (target, aux)
            shutil.copytree(src, target, symlinks=True, ignore=maven_build_outputs)
            aux.mkdir(exist_ok=True)
            for d in owned:
                chown_tree(d, identity)
                os.chmod(d, 0o700)
        except BaseException:
            release_identity(identity)
            raise
        logger.debug("workspace copied %s -> %s (uid %d)", src, target, identity.uid)
        return cls(target, owned_dirs=owned, identity=identity, aux_dir=Path(os.path.realpath(aux)))

    @classmethod
    def for_task(
        cls,
        task_dir: str | os.PathLike[str],
        dest: str | os.PathLike[str] | None = None,
        *,
        base_dir: str | os.PathLike[str] | None = None,
    ) -> Workspace:
        """Copy ``<task_dir>/repo`` into a fresh workspace (see :meth:`copy_of`)."""
        repo = Path(task_dir) / "repo"
        if not repo.is_dir():
            raise FileNotFoundError(f"task {task_dir} has no repo/ directory")
        return cls.copy_of(repo, dest, base_dir=base_dir)

    # ------------------------------------------------------------------ paths
    @property
    def aux_dir(self) -> Path:
        """A private scratch directory outside the repository (created on first use, owned)."""
        if self._aux is None:
            self._aux = Path(os.path.realpath(tempfile.mkdtemp(prefix="strands-art-aux-")))
            chown_tree(self._aux, self.identity)
            self._owned.append(self._aux)
        return self._aux

    @property
    def writable_dirs(self) -> tuple[Path, ...]:
        """What a sandboxed command of this workspace may write: the repository and ``aux``."""
        return (self.root, self.aux_dir)

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """True if the real path of ``path`` is the root or lies under it (no resolution of ``path``)."""
        p = Path(path)
        return p == self.root or p.is_relative_to(self.root)

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """Map a tool path to a real absolute path inside the workspace.

        Relative paths resolve against the root; absolute paths are accepted only if they lie
        inside it. The check is made twice: lexically (``..`` may not climb out) and on the
        real path (``os.path.realpath`` follows every existing symlink, also in parent
        directories). A path that does not exist yet is allowed if its existing part is inside.

        Returns:
            The real path (symlinks resolved) of the target.

        Raises:
            PathOutsideWorkspace: empty path, NUL byte, or a location outside the root.
        """
        text = os.fspath(path)
        if not text or not text.strip():
            raise PathOutsideWorkspace(f"Empty path. Give a path inside the workspace {self.root}.")
        if "\x00" in text:
            raise PathOutsideWorkspace("Invalid path: it contains a NUL byte.")
        expanded = Path(text)
        joined = expanded if expanded.is_absolute() else self.root / expanded
        lexical = Path(os.path.normpath(joined))
        if not self.contains(lexical):
            raise PathOutsideWorkspace(
                f"Path {text!r} is outside the workspace {self.root}. Only paths inside the workspace are "
                "allowed; relative paths are resolved against it."
            )
        real = Path(os.path.realpath(lexical))
        if not self.contains(real):
            raise PathOutsideWorkspace(
                f"Path {text!r} leads outside the workspace {self.root} through a symbolic link "
                f"(it resolves to {real}). Only paths inside the workspace are allowed."
            )
        return real

    def relative(self, path: Path) -> str:
        """``path`` relative to the root ("." for the root itself), for messages."""
        rel = path.relative_to(self.root)
        return str(rel) if str(rel) != "." else "."

    # ------------------------------------------------------------------ lifetime
    def cleanup(self) -> None:
        """Remove the directories this workspace owns (the copy and ``aux``); idempotent."""
        for d in self._owned:
            try:
                remove_tree(d)  # iterative: any depth, any file type (sandbox.removal)
            except OSError as exc:
                logger.warning("could not remove workspace directory %s: %s", d, exc)
        self._owned.clear()
        self._aux = None
        if self._release:
            release_identity(self.identity)
            self._release = False

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        return f"Workspace(root={str(self.root)!r})"


def _make_base(base_dir: str | os.PathLike[str], identity: Identity) -> Path:
    """Create ``base_dir`` (0711 as root, 0700 otherwise) where the sandbox uid can reach it.

    ``bwrap`` runs as the sandbox uid and must walk to the directory it binds. When an ancestor
    of ``base_dir`` has no ``o+x`` (e.g. a run directory under ``/root``), the directory is made
    in the system temp dir instead and ``base_dir`` becomes a symlink to it (logged).
    """
    base = Path(base_dir)
    if base.is_symlink() or not identity.drop:
        base.mkdir(parents=True, exist_ok=True)
    elif not base.exists() and untraversable_ancestor(base / "x") is not None:
        blocked = untraversable_ancestor(base / "x")
        base.parent.mkdir(parents=True, exist_ok=True)
        real = Path(tempfile.mkdtemp(prefix=LINKED_BASE_PREFIX))
        base.symlink_to(real, target_is_directory=True)
        logger.warning(
            "%s is below %s, which the sandbox uid cannot enter; workspaces live in %s (linked from %s)",
            base,
            blocked,
            real,
            base,
        )
    else:
        base.mkdir(parents=True, exist_ok=True)
    real = Path(os.path.realpath(base))
    os.chmod(real, 0o711 if identity.drop else 0o700)
    if identity.drop:
        blocked = untraversable_ancestor(real / "x")
        if blocked is not None:
            raise PermissionError(
                f"workspace directory {real} lies below {blocked}, which the sandbox uid cannot enter "
                f"(no o+x): choose a run directory elsewhere, or `chmod o+x {blocked}`"
            )
    return real


def remove_base_if_empty(base_dir: str | os.PathLike[str]) -> None:
    """Remove a ``base_dir`` made by :meth:`Workspace.copy_of` once no workspace is left in it
    (also the temp-dir directory it links to, see :func:`_make_base`); anything left stays."""
    base = Path(base_dir)
    real = Path(os.path.realpath(base))
    try:
        os.rmdir(real)
    except OSError:
        return  # missing, or still holds a workspace
    if base.is_symlink():
        base.unlink()


def remove_base(base_dir: str | os.PathLike[str]) -> int:
    """Remove a ``base_dir`` made by :meth:`Workspace.copy_of` with everything in it (what a dead
    run left: workspaces, evaluation build copies); the next :meth:`Workspace.copy_of` makes it
    again. When ``base_dir`` is a symlink, the directory it links to is removed too if it is one
    of ours (a :data:`LINKED_BASE_PREFIX` directory owned by this uid); any other link target is
    left alone and only the link goes.

    Returns:
        How many entries were removed from it (0 when it did not exist).
    """
    base = Path(base_dir)
    if base.is_symlink():
        real = Path(os.path.realpath(base))
        base.unlink()
        try:
            ours = real.name.startswith(LINKED_BASE_PREFIX) and real.lstat().st_uid == os.geteuid()
        except OSError:
            ours = False
        return _remove_tree(real) if ours and real.is_dir() else 0
    if base.is_dir():
        return _remove_tree(base)
    if base.exists():
        base.unlink()
    return 0


def _remove_tree(directory: Path) -> int:
    count = sum(1 for _ in directory.iterdir())
    try:
        remove_tree(directory)  # never follows a symlink inside; no recursion limit
    except OSError as exc:
        logger.warning("could not remove all of %s: %s", directory, exc)
    return count


def maven_build_outputs(directory: str, names: list[str]) -> set[str]:
    """``copytree`` ignore: a module's ``target/`` (Maven build output next to a ``pom.xml``), so a
    stale build in the source (e.g. after ``strands-art evaluate`` ran in place) never reaches a
    rollout's workspace."""
    return {"target"} if "target" in names and "pom.xml" in names else set()
