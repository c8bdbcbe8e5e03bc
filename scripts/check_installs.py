"""Resolve every documented install line at metadata level, for each Python it claims.

Run it as ``scripts/check-installs.sh`` (``./scripts/test.sh`` does, so CI does). The lines come
from marked blocks in the docs (`install_lines.find_blocks`); each is resolved with
``uv pip compile --python-version X --python-platform linux``, which reads package metadata
(PEP 658 files, or byte ranges of the wheel) and downloads no wheel. Never replace this with a
plain ``pip install --dry-run``: an index without separate metadata files makes pip download
every candidate wheel (tens of GB for the vLLM and verl sets).

Sources: by default those pip is configured with on this machine (``pip config list`` and
``PIP_*``: index-url, extra-index-url, find-links, constraint), merged as pip merges them
(``--index-strategy unsafe-best-match``), so the answer is what ``pip install`` would do here;
``--pypi-only`` resolves against PyPI alone, as a user elsewhere would.

uv considers only the lower bound of a package's Requires-Python (uv's documented behaviour), so
after each resolution the Requires-Python of every resolved release is read from the index's
simple API (PEP 691 JSON) and checked against the target Python: that is how ``verl 0.9.1``'s
``<3.13`` is caught.

Exit status 1 when a line does not resolve for a Python it claims, or resolves for one it says
fails on; 2 when the docs cannot be read as install lines or uv is missing.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

sys.path.insert(0, str(Path(__file__).resolve().parent))
from install_lines import (  # noqa: E402
    DocError,
    InstallBlock,
    PipSources,
    find_blocks,
    parse_pip_config,
    project_name,
    to_resolvable,
)

ROOT = Path(__file__).resolve().parent.parent
KEY_PACKAGES = ("torch", "vllm", "transformers", "verl", "strands-agents", "opentelemetry-sdk")
UV_TIMEOUT_S = 600  # one resolution; a cold one takes ~10-50 s here
PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==(?P<version>\S+)")


@dataclass
class Resolution:
    """One ``uv pip compile`` run: ``pins`` maps canonical names to versions; ``error`` holds
    uv's explanation when it found no solution; ``seconds`` is wall time."""

    ok: bool
    pins: dict[str, str]
    error: str
    seconds: float
    note: str = ""


def find_uv() -> str:
    """uv beside this interpreter (the dev extra installs it), else on PATH."""
    here = Path(sys.executable).parent / "uv"
    if here.exists():
        return str(here)
    found = shutil.which("uv")
    if not found:
        raise SystemExit("check-installs: uv not found; pip install -e '.[dev]' installs it")
    return found


def pip_sources() -> PipSources:
    """This machine's pip configuration (`install_lines.parse_pip_config`)."""
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    return parse_pip_config(listing, dict(os.environ))


def uv_source_args(sources: PipSources) -> list[str]:
    """`PipSources` as ``uv pip compile`` flags."""
    args = ["--index-url", sources.index_url, "--index-strategy", "unsafe-best-match"]
    for url in sources.extra_index_urls:
        args += ["--extra-index-url", url]
    for link in sources.find_links:
        args += ["--find-links", link]
    for path in sources.constraints:
        args += ["--constraint", path]
    return args


def parse_pins(compiled: str) -> dict[str, str]:
    """``name==version`` lines of uv's output -> {canonical name: version}."""
    pins = {}
    for line in compiled.splitlines():
        m = PIN.match(line.strip())
        if m:
            pins[canonicalize_name(m.group("name"))] = m.group("version")
    return pins


def resolve(
    uv: str,
    requirements: list[str],
    constraints: list[str],
    python: str,
    source_args: list[str],
    no_deps: bool,
    installed: dict[str, str] | None = None,
) -> Resolution:
    """``uv pip compile`` of ``requirements`` for CPython ``python`` on x86-64 Linux.

    ``installed`` (name -> version, what earlier steps installed) is handed to uv as preferences
    (an existing output file), as pip keeps an installed release when it satisfies the new
    requirements; like pip, uv does not treat the installed packages' own requirements as
    constraints."""
    with tempfile.TemporaryDirectory(prefix="check-installs-") as tmp:
        req = Path(tmp) / "requirements.in"
        req.write_text("\n".join(requirements) + "\n")
        out = Path(tmp) / "requirements.txt"
        out.write_text("".join(f"{n}=={v}\n" for n, v in (installed or {}).items()))
        cmd = [uv, "pip", "compile", str(req), "-o", str(out), "--python-version", python]
        cmd += ["--python-platform", "linux", "--quiet"]
        cmd += ["--no-header", "--no-annotate", "--no-config", "--color", "never", *source_args]
        for path in constraints:
            cmd += ["--constraint", str((ROOT / path).resolve())]
        if no_deps:
            cmd.append("--no-deps")
        start = time.monotonic()
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, cwd=ROOT, check=False, timeout=UV_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            return Resolution(
                False, {}, f"uv pip compile did not finish within {UV_TIMEOUT_S} s", UV_TIMEOUT_S
            )
        seconds = time.monotonic() - start
        compiled = out.read_text() if proc.returncode == 0 else ""
    if proc.returncode != 0:
        return Resolution(False, {}, proc.stderr.strip(), seconds)
    return Resolution(True, parse_pins(compiled), "", seconds)


def by_release(files: list[tuple[str, str | None]]) -> dict[Version, list[str | None]]:
    """An index page's (filename, Requires-Python) pairs grouped by release version; files whose
    name is not a wheel or sdist name are skipped."""
    releases: dict[Version, list[str | None]] = {}
    for filename, requires in files:
        try:
            if filename.endswith(".whl"):
                version = parse_wheel_filename(filename)[1]
            else:
                version = parse_sdist_filename(filename)[1]
        except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
            continue
        releases.setdefault(version, []).append(requires)
    return releases


def python_allowed(requires: list[str | None], python: str) -> bool:
    """Whether some file of a release (its files' Requires-Python values) accepts CPython
    ``python``; a file without one, or with one pip cannot parse, accepts every Python."""
    target = Version(python)
    for spec in requires:
        try:
            if not spec or target in SpecifierSet(spec):
                return True
        except InvalidSpecifier:
            return True
    return False


_ANCHOR = re.compile(r"<a\s[^>]*?href=\"(?P<href>[^\"]+)\"(?P<attrs>[^>]*)>")


def parse_simple_page(response: httpx.Response) -> list[tuple[str, str | None]]:
    """(filename, Requires-Python) of every file on a simple-index project page: PEP 691 JSON,
    or PEP 503 HTML (``data-requires-python``)."""
    if "json" in response.headers.get("content-type", ""):
        return [(f["filename"], f.get("requires-python")) for f in response.json()["files"]]
    entries = []
    for m in _ANCHOR.finditer(response.text):
        requires = re.search(r"data-requires-python=\"([^\"]*)\"", m.group("attrs"))
        filename = html.unescape(m.group("href")).split("#")[0].rsplit("/", 1)[-1]
        entries.append((filename, html.unescape(requires.group(1)) if requires else None))
    return entries


class RequiresPythonIndex:
    """Requires-Python of every release of the resolved projects, from the project pages
    of an http(s) simple index (PEP 691 JSON or PEP 503 HTML), fetched once per project. A page
    that cannot be read raises (the check must not pass on missing data)."""

    def __init__(self, index_url: str):
        self.index_url = index_url.rstrip("/")
        self.client = httpx.Client(
            timeout=60,
            follow_redirects=True,
            headers={"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"},
            limits=httpx.Limits(max_connections=16),
        )
        self.releases: dict[str, dict[Version, list[str | None]]] = {}

    def fetch(self, name: str) -> None:
        response = self.client.get(f"{self.index_url}/{name}/")
        if response.status_code == 404:  # not on this index (e.g. from find-links)
            self.releases[name] = {}
            return
        response.raise_for_status()
        self.releases[name] = by_release(parse_simple_page(response))

    def prefetch(self, names: set[str]) -> None:
        todo = sorted(names - self.releases.keys())
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(self.fetch, todo))

    def conflicts(self, pins: dict[str, str], python: str) -> tuple[list[str], int]:
        """(resolved releases that refuse ``python``, count of releases not found on the index)."""
        refused, unknown = [], 0
        for name, version in sorted(pins.items()):
            requires = self.releases.get(name, {}).get(Version(version))
            if requires is None:
                unknown += 1
            elif not python_allowed(requires, python):
                refused.append(
                    f"{name} {version} requires Python {' / '.join(sorted(set(filter(None, requires))))}"
                )
        return refused, unknown


@dataclass
class Check:
    block: InstallBlock
    python: str
    expect_ok: bool
    resolution: Resolution | None = None
    refused: tuple[str, ...] = ()
    unknown: int = 0

    @property
    def resolves(self) -> bool:
        return bool(self.resolution and self.resolution.ok and not self.refused)

    @property
    def passed(self) -> bool:
        return self.resolves == self.expect_ok


def run_check(uv: str, check: Check, source_args: list[str], name: str) -> Resolution:
    """Resolve one block for one Python as pip would install it: each ``pip install`` command in
    turn, preferring what the earlier ones installed. With several commands, the environment they
    leave (later versions replacing earlier ones) is then resolved again with every release
    pinned, which succeeds exactly when every installed package's requirements hold (what
    ``pip check`` verifies): a second step that upgrades something the first one needed fails
    here. ``--no-deps`` commands are resolved without dependencies and exempt that check."""
    installed: dict[str, str] = {}
    every: list[str] = []
    seconds = 0.0
    constraints = [c for command in check.block.commands for c in command.constraints]
    for step, command in enumerate(check.block.commands, 1):
        requirements = [to_resolvable(r, ROOT, name) for r in command.requirements]
        every += requirements
        res = resolve(uv, requirements, constraints, check.python, source_args, command.no_deps, installed)
        seconds += res.seconds
        if not res.ok:
            label = f"step {step}, {' '.join(command.requirements)}" if len(check.block.commands) > 1 else ""
            return Resolution(False, {}, res.error, seconds, label)
        installed.update(res.pins)
    if len(check.block.commands) == 1:
        return Resolution(True, installed, "", seconds)
    if any(command.no_deps for command in check.block.commands):
        return Resolution(True, installed, "", seconds, "a --no-deps step: pip check not expected to pass")
    pinned = [f"{n}=={v}" for n, v in installed.items()] + every
    final = resolve(uv, pinned, constraints, check.python, source_args, no_deps=False)
    seconds += final.seconds
    if not final.ok:
        note = "the steps leave an inconsistent environment (pip check fails)"
        return Resolution(False, {}, final.error, seconds, note)
    return Resolution(
        True, installed, "", seconds, f"{len(check.block.commands)} steps, consistent after the last"
    )


def report(check: Check) -> str:
    res = check.resolution
    status = "ok" if check.passed else "FAIL"
    head = f"[{status:4}] {check.block.name} py{check.python} ({check.block.where}, {res.seconds:.1f} s)"
    if check.resolves:
        keys = "  ".join(f"{k} {res.pins[k]}" for k in KEY_PACKAGES if k in res.pins)
        body = f"resolves: {len(res.pins)} packages  {keys}"
        if res.note:
            body += f"  ({res.note})"
        if check.unknown:
            body += f"  ({check.unknown} not on the index: Requires-Python unchecked)"
        if not check.expect_ok:
            body += "  -- but the docs say it fails on this Python"
    else:
        reason = (
            "; ".join(check.refused)
            if check.refused
            else res.error.splitlines()[-1].strip()
            if res.error
            else "?"
        )
        if res.note and not check.refused:
            reason = f"{res.note}: {reason}"
        body = ("fails, as documented: " if not check.expect_ok else "DOES NOT RESOLVE: ") + reason
        if check.expect_ok and res.error:
            body += "\n" + "\n".join("         | " + line for line in res.error.splitlines()[-25:])
    return f"{head}\n         {body}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pypi-only", action="store_true", help="ignore this machine's pip configuration")
    parser.add_argument("--only", action="append", help="check only this install line (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the install lines and exit")
    args = parser.parse_args(argv)
    try:
        blocks = find_blocks(ROOT)
    except DocError as exc:
        print(f"check-installs: {exc}", file=sys.stderr)
        return 2
    if args.only:
        unknown = set(args.only) - {b.name for b in blocks}
        if unknown:
            print(f"check-installs: no install line named {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        blocks = [b for b in blocks if b.name in args.only]
    if args.list:
        for b in blocks:
            print(f"{b.name} ({b.where}) python={','.join(b.pythons)} fails-on={','.join(b.fails_on) or '-'}")
            print("\n".join("    " + line for line in b.text.splitlines()))
        return 0
    uv = find_uv()
    sources = PipSources() if args.pypi_only else pip_sources()
    source_args = uv_source_args(sources)
    uv_version = subprocess.run([uv, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"check-installs: {uv_version}; sources: {' '.join(source_args)}")
    for note in sources.notes:
        print(f"check-installs: note: {note}")
    checks = [Check(b, py, True) for b in blocks for py in b.pythons]
    checks += [Check(b, py, False) for b in blocks for py in b.fails_on]
    name = project_name(ROOT)
    start = time.monotonic()
    # network-bound (uv waits on index round trips): run the resolutions side by side
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        longest_first = sorted(checks, key=lambda c: (-len(c.block.commands), c.python))
        futures = {pool.submit(run_check, uv, c, source_args, name): c for c in longest_first}
        for future in concurrent.futures.as_completed(futures):
            futures[future].resolution = future.result()
    resolved_s = time.monotonic() - start
    index = None
    if sources.index_url.startswith(("http://", "https://")):
        index = RequiresPythonIndex(sources.index_url)
        try:
            index.prefetch({n for c in checks if c.resolution.ok for n in c.resolution.pins})
        except httpx.HTTPError as exc:
            print(
                f"check-installs: cannot read Requires-Python from {sources.index_url}: {exc}",
                file=sys.stderr,
            )
            return 1
    else:
        print(f"check-installs: note: index {sources.index_url} is not http(s): Requires-Python unchecked")
    for check in checks:
        if index and check.resolution.ok:
            refused, check.unknown = index.conflicts(check.resolution.pins, check.python)
            check.refused = tuple(refused)
    checks.sort(key=lambda c: (blocks.index(c.block), c.python))
    for block in blocks:
        print(f"\n{block.name} ({block.where}):")
        print("\n".join("    " + line for line in block.text.splitlines()))
        for check in (c for c in checks if c.block is block):
            print(report(check))
    failed = [c for c in checks if not c.passed]
    print(
        f"\ncheck-installs: {len(checks)} checks of {len(blocks)} install lines, {len(failed)} failed, "
        f"{time.monotonic() - start:.0f} s ({resolved_s:.0f} s resolving, the rest reading Requires-Python)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
