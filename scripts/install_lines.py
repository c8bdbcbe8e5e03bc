"""The install lines the documentation gives, and the package sources pip is configured with.

Pure parsing, no network: `scripts/check_installs.py` resolves what this module finds.

An install line is a fenced shell block in a Markdown file, announced by a marker comment on the
line before its opening fence::

    <!-- install-check: name=cluster python=3.11,3.12 fails-on=3.13 -->
    ```bash
    pip install -e '.[verl-vllm]'
    ```

``name`` identifies the line in the report, ``python`` lists the CPython versions it must resolve
for, ``fails-on`` (optional) the versions on which it must *not* resolve (what the docs say is
unsupported). Every ``pip install`` command inside the block is part of the line (a later command
installs into the environment of the earlier ones, so the union of their requirements must
resolve together); other commands (``python3 -m venv``, ``export``) are ignored. A ``pip install``
anywhere in the scanned files outside such a block is an error: every documented line is checked.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

# the Markdown files whose install lines are checked (relative to the checkout)
DOC_GLOBS = ("README.md", "docs/*.md", "bench/README.md")

MARKER = re.compile(r"<!--\s*install-check:(?P<body>.*?)-->")
FENCE = re.compile(r"^\s*(```|~~~)")
PIP_INSTALL = re.compile(r"\bpip3?\s+install\b")
PY_VERSION = re.compile(r"^3\.\d{1,2}$")

# pip install options that take a value, and those that do not change what gets resolved
_VALUE_OPTIONS = {"-e", "--editable", "-r", "--requirement", "-c", "--constraint"}
_IGNORED_FLAGS = {"-q", "--quiet", "-U", "--upgrade", "--no-cache-dir", "--pre"}


class DocError(ValueError):
    """A marker, block or ``pip install`` command the checker cannot take as an install line;
    the message names the file and line."""


@dataclass(frozen=True)
class PipInstall:
    """One ``pip install`` command: requirement strings as written (local paths kept, e.g.
    ``.[verl]``), constraint files, and whether it ran with ``--no-deps``."""

    requirements: tuple[str, ...]
    constraints: tuple[str, ...] = ()
    no_deps: bool = False


@dataclass(frozen=True)
class InstallBlock:
    """One documented install line: its marker fields and its ``pip install`` commands, in order.

    ``where`` is ``file:line`` of the marker (relative path)."""

    name: str
    where: str
    pythons: tuple[str, ...]
    fails_on: tuple[str, ...]
    commands: tuple[PipInstall, ...]
    text: str  # the block as written, for the report


@dataclass
class PipSources:
    """Where pip looks for packages (``pip config list`` plus ``PIP_*`` variables), as uv flags
    take them. ``notes`` says what was dropped and why (e.g. a ``file://`` index that does not
    exist here)."""

    index_url: str = "https://pypi.org/simple"
    extra_index_urls: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def parse_marker(body: str, where: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """``name=... python=3.11,3.12 [fails-on=3.13]`` -> (name, pythons, fails_on)."""
    fields: dict[str, str] = {}
    for item in body.split():
        key, sep, value = item.partition("=")
        if not sep or not value or key not in ("name", "python", "fails-on") or key in fields:
            raise DocError(
                f"{where}: bad install-check marker field {item!r} (want name=, python=, fails-on=)"
            )
        fields[key] = value
    if "name" not in fields or "python" not in fields:
        raise DocError(f"{where}: an install-check marker needs name= and python=")
    pythons = tuple(fields["python"].split(","))
    fails_on = tuple(fields["fails-on"].split(",")) if "fails-on" in fields else ()
    for version in pythons + fails_on:
        if not PY_VERSION.match(version):
            raise DocError(f"{where}: {version!r} is not a Python version like 3.11")
    if set(pythons) & set(fails_on):
        raise DocError(f"{where}: a Python version cannot be both in python= and fails-on=")
    return fields["name"], pythons, fails_on


def parse_pip_install(argv: list[str], where: str) -> PipInstall:
    """The argument vector after ``pip install`` -> `PipInstall`.

    Raises `DocError` on an option the checker does not model (an index option, ``--target``...):
    better refuse than check something other than what the docs say."""
    requirements: list[str] = []
    constraints: list[str] = []
    no_deps = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in _VALUE_OPTIONS:
            if i + 1 >= len(argv):
                raise DocError(f"{where}: {arg} without a value")
            value = argv[i + 1]
            i += 2
            if arg in ("-c", "--constraint"):
                constraints.append(value)
            elif arg in ("-r", "--requirement"):
                raise DocError(
                    f"{where}: requirement files (-r) are not supported in documented install lines"
                )
            else:
                requirements.append(value)
            continue
        if arg == "--no-deps":
            no_deps = True
        elif arg.startswith("-"):
            if arg not in _IGNORED_FLAGS:
                raise DocError(f"{where}: pip option {arg!r} is not modelled by the install check")
        else:
            requirements.append(arg)
        i += 1
    if not requirements:
        raise DocError(f"{where}: pip install without a requirement")
    return PipInstall(tuple(requirements), tuple(constraints), no_deps)


def pip_commands(text: str, where: str) -> list[PipInstall]:
    """Every ``pip install`` command of a shell block (``pip``, ``pip3``, ``$VENV/bin/pip``,
    ``python -m pip``; comments and line continuations handled)."""
    commands = []
    for line in text.replace("\\\n", " ").splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise DocError(f"{where}: cannot split {line.strip()!r}: {exc}") from None
        for start in range(len(words) - 1):
            word, nxt = words[start], words[start + 1]
            if os.path.basename(word) in ("pip", "pip3") and nxt == "install":
                commands.append(parse_pip_install(words[start + 2 :], where))
                break
    return commands


def find_blocks(root: Path, globs: tuple[str, ...] = DOC_GLOBS) -> list[InstallBlock]:
    """All marked install blocks of the documentation under ``root``.

    Raises `DocError` for a marker not followed by a fenced block, a marked block without a
    ``pip install``, a duplicate name, or a ``pip install`` outside a marked block."""
    blocks: list[InstallBlock] = []
    files = sorted({p for g in globs for p in glob.glob(str(root / g))})
    for path in files:
        rel = os.path.relpath(path, root)
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            where = f"{rel}:{i + 1}"
            marker = MARKER.search(lines[i])
            if marker:
                name, pythons, fails_on = parse_marker(marker.group("body"), where)
                if i + 1 >= len(lines) or not FENCE.match(lines[i + 1]):
                    raise DocError(f"{where}: install-check marker not followed by a ``` block")
                end = i + 2
                while end < len(lines) and not FENCE.match(lines[end]):
                    end += 1
                text = "\n".join(lines[i + 2 : end])
                commands = pip_commands(text, where)
                if not commands:
                    raise DocError(f"{where}: marked block has no pip install")
                blocks.append(InstallBlock(name, where, pythons, fails_on, tuple(commands), text))
                i = end + 1
                continue
            if PIP_INSTALL.search(lines[i]):
                raise DocError(
                    f"{where}: 'pip install' outside an install-check block (every documented "
                    "install line is resolved by scripts/check-installs.sh: put it in a marked block)"
                )
            i += 1
    names = [b.name for b in blocks]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise DocError(f"install-check names used twice: {', '.join(dupes)}")
    return blocks


def project_name(root: Path) -> str:
    """``[project].name`` of the checkout's pyproject.toml."""
    with open(root / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["name"]


_LOCAL = re.compile(r"^(?P<path>\.{1,2}(/[^\[]*)?)(?P<extras>\[[^\]]*\])?$")


def to_resolvable(requirement: str, root: Path, name: str) -> str:
    """A requirement as uv takes it: a local path (``.``, ``./``, ``.[verl,dev]``, relative to the
    checkout, as the docs are run from its root) becomes ``name[extras] @ file:///abs``; anything
    else is passed through."""
    match = _LOCAL.match(requirement)
    if not match:
        return requirement
    path = (root / match.group("path")).resolve()
    return f"{name}{match.group('extras') or ''} @ {path.as_uri()}"


def parse_pip_config(listing: str, env: dict[str, str], exists=os.path.exists) -> PipSources:
    """``pip config list`` output and the ``PIP_*`` environment -> `PipSources`.

    Precedence as pip's: environment, then ``install.``, then ``global.`` keys. Multi-valued
    keys (extra-index-url, find-links) split on whitespace. A ``file://`` index, a find-links
    directory or a constraint file that does not exist is dropped with a note (pip warns and
    goes on without it)."""
    values: dict[str, tuple[int, str]] = {}
    rank = {"global": 0, "install": 1, ":env:": 2}
    for line in listing.splitlines():
        m = re.match(r"^(?P<section>[^.]+)\.(?P<key>[a-z-]+)=(?P<q>['\"])(?P<value>.*)(?P=q)$", line.strip())
        if not m or m.group("section") not in rank:
            continue
        r = rank[m.group("section")]
        key = m.group("key")
        if key not in values or values[key][0] <= r:
            values[key] = (r, m.group("value"))
    for key in ("index-url", "extra-index-url", "find-links", "constraint"):
        env_value = env.get("PIP_" + key.upper().replace("-", "_"))
        if env_value:
            values[key] = (3, env_value)

    def get(key: str) -> list[str]:
        return values[key][1].split() if key in values else []

    sources = PipSources()
    if get("index-url"):
        sources.index_url = get("index-url")[0]

    def keep(kind: str, location: str) -> bool:
        local = location[len("file://") :] if location.startswith("file://") else location
        if "://" in local or exists(local):
            return True
        sources.notes.append(f"pip's {kind} {location} does not exist here: left out")
        return False

    sources.extra_index_urls = [u for u in get("extra-index-url") if keep("extra-index-url", u)]
    sources.find_links = [u for u in get("find-links") if keep("find-links", u)]
    sources.constraints = [u for u in get("constraint") if keep("constraint", u)]
    return sources
