"""A throw-away Maven local repository and settings.xml for one build, online or offline.

Offline, every artifact and plugin resolves from Debian's system repository
(``/usr/share/maven-repo``, filled by ``scripts/setup-system.sh``) through a ``file://`` mirror.
Debian ships one version of each artifact (plus relocation POMs for a few old versions), so a
project that pins a version Debian lacks would fail to resolve. :func:`seed_local_repo` writes,
into the fresh local repository, for every pinned version Debian lacks:

* a *relocation POM* pointing at Debian's version (plugins and ordinary dependencies; Maven follows
  ``<distributionManagement><relocation>``, as Debian's own relocation POMs for e.g.
  ``maven-compiler-plugin:3.1`` do);
* for BOMs (``<scope>import</scope>`` does not follow relocations) a copy of Debian's POM under
  the pinned version.

Which versions: a fixed list of common pins per artifact (:data:`RELOCATIONS`, including the
plugin versions Maven 3.8's super-POM binds by default), plus any literal or ``${property}``
version of a table artifact found in the project's own ``pom.xml`` files at build time (so a
pin an agent writes is covered too). It also applies the ``plexus-utils:1.1`` fix: Maven 3.8
asks for it and Debian lacks it, so Debian's 3.4.2 jar is copied in under 1.1, and it writes
version metadata for Debian's plugins (:func:`seed_plugin_metadata`: ``bundle`` packaging names
lifecycle plugins without versions). A task's own declared environment (:mod:`.offline_env`) is
copied in after all of this.

Recipe and rationale: ``docs/migrationbench-evaluator.md`` ("Offline Maven resolution").

Over 450 lines because about 150 of them are data: the relocation table and the two settings.xml
templates.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

logger = logging.getLogger(__name__)

DEBIAN_REPO = Path("/usr/share/maven-repo")

_POM_NS = "{http://maven.apache.org/POM/4.0.0}"


@dataclass(frozen=True)
class Relocation:
    """Serve ``group_id:artifact_id`` at any of ``versions`` from Debian's ``target`` coordinates.

    ``target_group``/``target_artifact`` default to the same coordinates (a version-only
    relocation). ``bom=True`` copies Debian's POM instead of relocating (import scope).
    """

    group_id: str
    artifact_id: str
    target_version: str
    versions: tuple[str, ...]
    target_group: str | None = None
    target_artifact: str | None = None
    bom: bool = False

    @property
    def target(self) -> tuple[str, str, str]:
        return (
            self.target_group or self.group_id,
            self.target_artifact or self.artifact_id,
            self.target_version,
        )


_PLUGINS = "org.apache.maven.plugins"


def _v(versions: str) -> tuple[str, ...]:
    return tuple(versions.split())


_JUPITER_VERSIONS = tuple(
    f"5.{minor}.{patch}" for minor in range(0, 12) for patch in range(0, 4) if (minor, patch) != (9, 2)
)
_PLATFORM_VERSIONS = tuple(
    f"1.{minor}.{patch}" for minor in range(0, 12) for patch in range(0, 4) if (minor, patch) != (9, 1)
)

#: The table: Debian target versions are those of Debian 12 (bookworm).
RELOCATIONS: tuple[Relocation, ...] = (
    # Plugins. Super-POM defaults of Maven 3.8: clean 2.5, resources 2.6, compiler 3.1,
    # surefire 2.12.4, jar 2.4, install 2.4, deploy 2.7, site 3.3 (deploy/site are not run by
    # `verify` and Debian ships neither plugin unless libmaven-{deploy,site}-plugin-java is added).
    Relocation(_PLUGINS, "maven-clean-plugin", "3.2.0", _v("2.5 2.6.1 3.0.0 3.1.0 3.3.1 3.3.2 3.4.0")),
    Relocation(_PLUGINS, "maven-resources-plugin", "3.3.0", _v("2.6 2.7 3.0.1 3.0.2 3.1.0 3.2.0 3.3.1")),
    Relocation(
        _PLUGINS,
        "maven-compiler-plugin",
        "3.10.1",
        _v(
            "3.1 3.2 3.3 3.5 3.5.1 3.6.0 3.6.1 3.6.2 3.7.0 3.8.0 3.8.1 3.9.0 3.10.0 3.11.0 3.12.0 3.12.1 3.13.0"
        ),
    ),
    Relocation(
        _PLUGINS,
        "maven-surefire-plugin",
        "2.22.3",
        _v(
            "2.12.4 2.17 2.18.1 2.19.1 2.20 2.20.1 2.21.0 2.22.0 2.22.1 2.22.2 3.0.0-M3 3.0.0-M4 3.0.0-M5"
            " 3.0.0-M7 3.0.0-M8 3.0.0-M9 3.0.0 3.1.0 3.1.2 3.2.1 3.2.2 3.2.3 3.2.5 3.3.0 3.3.1 3.5.0"
        ),
    ),
    Relocation(
        _PLUGINS,
        "maven-jar-plugin",
        "3.3.0",
        _v("2.4 2.5 2.6 3.0.0 3.0.2 3.1.0 3.1.1 3.1.2 3.2.0 3.2.2 3.4.1 3.4.2"),
    ),
    Relocation(_PLUGINS, "maven-install-plugin", "3.1.0", _v("2.4 2.5.1 2.5.2 3.0.0-M1 3.0.1 3.1.1")),
    Relocation(
        _PLUGINS, "maven-dependency-plugin", "3.5.0", _v("2.8 2.10 3.0.2 3.1.1 3.1.2 3.2.0 3.3.0 3.6.0")
    ),
    # Test libraries.
    Relocation("junit", "junit", "4.13.2", _v("4.8.2 4.10 4.11 4.12 4.13 4.13.1")),
    *(
        Relocation("org.hamcrest", a, "debian", _v("1.1 1.3"))
        for a in ("hamcrest-core", "hamcrest-library", "hamcrest-all")
    ),
    Relocation("org.hamcrest", "hamcrest", "2.2", _v("2.1")),
    *(
        Relocation("org.junit.jupiter", artifact, "5.9.2", _JUPITER_VERSIONS)
        for artifact in (
            "junit-jupiter",
            "junit-jupiter-api",
            "junit-jupiter-engine",
            "junit-jupiter-params",
            "junit-jupiter-migrationsupport",
        )
    ),
    Relocation("org.junit.vintage", "junit-vintage-engine", "5.9.2", _JUPITER_VERSIONS),
    Relocation("org.junit", "junit-bom", "5.9.2", _JUPITER_VERSIONS, bom=True),
    *(
        Relocation("org.junit.platform", artifact, "1.9.1", _PLATFORM_VERSIONS)
        for artifact in (
            "junit-platform-launcher",
            "junit-platform-engine",
            "junit-platform-commons",
            "junit-platform-suite-api",
            "junit-platform-runner",
        )
    ),
    # APIs removed from the JDK after 8 (JEP 320), in the javax.* namespace.
    Relocation("javax.xml.bind", "jaxb-api", "2.3.1", _v("2.1 2.2.11 2.2.12 2.3.0")),
    Relocation(
        "jakarta.xml.bind", "jakarta.xml.bind-api", "2.3.1", _v("2.3.2 2.3.3"), "javax.xml.bind", "jaxb-api"
    ),
    Relocation(
        "org.glassfish.jaxb", "jaxb-runtime", "2.3.0.1", _v("2.3.0 2.3.1 2.3.2 2.3.3 2.3.5 2.3.8 2.3.9")
    ),
    Relocation(
        "com.sun.xml.bind",
        "jaxb-impl",
        "2.3.0.1",
        _v("2.2.11 2.3.0 2.3.0.1 2.3.1 2.3.2 2.3.3 2.3.8 2.3.9"),
        "org.glassfish.jaxb",
        "jaxb-runtime",
    ),
    *(
        Relocation(g, a, "1.3", _v(versions), "org.apache.geronimo.specs", "geronimo-annotation_1.3_spec")
        for g, a, versions in (
            ("javax.annotation", "javax.annotation-api", "1.2 1.3 1.3.1 1.3.2"),
            ("jakarta.annotation", "jakarta.annotation-api", "1.3.4 1.3.5"),
        )
    ),
)

_BY_KEY: dict[tuple[str, str], Relocation] = {(r.group_id, r.artifact_id): r for r in RELOCATIONS}

SETTINGS_OFFLINE = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by strands_art.envs.migrationbench.maven.offline_repo: resolve every artifact and plugin
     from Debian's system repository (file://), never from the network. -->
<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0"
          xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
          xsi:schemaLocation="http://maven.apache.org/SETTINGS/1.0.0 https://maven.apache.org/xsd/settings-1.0.0.xsd">
  <localRepository>{local_repo}</localRepository>
  <interactiveMode>false</interactiveMode>
  <mirrors>
    <mirror>
      <id>debian-system-repo</id>
      <mirrorOf>*</mirrorOf>
      <url>{repo_url}</url>
    </mirror>
  </mirrors>
  <profiles>
    <profile>
      <!-- Debian's repo has no checksum files: redefine central with checksumPolicy=ignore
           (a mirror inherits the policies of the repository it mirrors). -->
      <id>debian-no-checksums</id>
      <repositories>
        <repository>
          <id>central</id>
          <url>{repo_url}</url>
          <releases><enabled>true</enabled><checksumPolicy>ignore</checksumPolicy></releases>
          <snapshots><enabled>false</enabled></snapshots>
        </repository>
      </repositories>
      <pluginRepositories>
        <pluginRepository>
          <id>central</id>
          <url>{repo_url}</url>
          <releases><enabled>true</enabled><checksumPolicy>ignore</checksumPolicy></releases>
          <snapshots><enabled>false</enabled></snapshots>
        </pluginRepository>
      </pluginRepositories>
    </profile>
  </profiles>
  <activeProfiles>
    <activeProfile>debian-no-checksums</activeProfile>
  </activeProfiles>
</settings>
"""

SETTINGS_ONLINE = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by strands_art.envs.migrationbench.maven.offline_repo: Maven Central, fresh local repo. -->
<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
  <localRepository>{local_repo}</localRepository>
  <interactiveMode>false</interactiveMode>
</settings>
"""


def write_settings(path: Path, local_repo: Path, *, offline: bool, debian_repo: Path = DEBIAN_REPO) -> Path:
    """Write a settings.xml for one build at ``path`` and return it.

    Offline: every repository mirrored to ``debian_repo`` with checksum checks off. Online: only
    the local repository is set (Maven Central as usual).
    """
    template = SETTINGS_OFFLINE if offline else SETTINGS_ONLINE
    text = template.format(local_repo=escape(str(local_repo)), repo_url=escape(debian_repo.as_uri()))
    path.write_text(text, encoding="utf-8")
    return path


def _artifact_dir(root: Path, group: str, artifact: str, version: str) -> Path:
    return root.joinpath(*group.split("."), artifact, version)


def relocation_pom(group: str, artifact: str, version: str, target: tuple[str, str, str]) -> str:
    """A POM for ``group:artifact:version`` that relocates to ``target`` (Maven follows it)."""
    tg, ta, tv = (escape(x) for x in target)
    return (
        "<project>\n  <modelVersion>4.0.0</modelVersion>\n"
        f"  <groupId>{escape(group)}</groupId>\n  <artifactId>{escape(artifact)}</artifactId>\n"
        f"  <version>{escape(version)}</version>\n"
        "  <!-- written by strands_art offline_repo: Debian ships another version -->\n"
        "  <distributionManagement>\n    <relocation>\n"
        f"      <groupId>{tg}</groupId>\n      <artifactId>{ta}</artifactId>\n      <version>{tv}</version>\n"
        "    </relocation>\n  </distributionManagement>\n</project>\n"
    )


def _write_relocation(local_repo: Path, debian_repo: Path, rel: Relocation, version: str) -> bool:
    """Write one relocation (or BOM copy) for ``version`` unless Debian already has it."""
    if _artifact_dir(debian_repo, rel.group_id, rel.artifact_id, version).is_dir():
        return False
    tg, ta, tv = rel.target
    target_pom = _artifact_dir(debian_repo, tg, ta, tv) / f"{ta}-{tv}.pom"
    if not target_pom.is_file():
        logger.debug("no Debian artifact %s:%s:%s; skipping relocation", tg, ta, tv)
        return False
    out_dir = _artifact_dir(local_repo, rel.group_id, rel.artifact_id, version)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{rel.artifact_id}-{version}.pom"
    if rel.bom:
        text = target_pom.read_text(encoding="utf-8")
        pattern = rf"(<artifactId>{re.escape(ta)}</artifactId>\s*<version>){re.escape(tv)}(</version>)"
        text, n = re.subn(pattern, rf"\g<1>{version}\g<2>", text, count=1)
        if n != 1:
            raise RuntimeError(f"cannot rewrite the version of BOM {target_pom}")
        out.write_text(text, encoding="utf-8")
    else:
        out.write_text(relocation_pom(rel.group_id, rel.artifact_id, version, rel.target), encoding="utf-8")
    return True


def _seed_plexus_utils_1_1(local_repo: Path, debian_repo: Path) -> None:
    """Maven 3.8 resolves ``plexus-utils:1.1`` for old plugins; serve Debian's 3.4.2 jar as 1.1."""
    src = (
        _artifact_dir(debian_repo, "org.codehaus.plexus", "plexus-utils", "3.4.2") / "plexus-utils-3.4.2.jar"
    )
    if not src.exists():
        logger.warning("Debian plexus-utils 3.4.2 missing (%s); offline builds of old plugins may fail", src)
        return
    out_dir = _artifact_dir(local_repo, "org.codehaus.plexus", "plexus-utils", "1.1")
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, out_dir / "plexus-utils-1.1.jar")
    (out_dir / "plexus-utils-1.1.pom").write_text(
        "<project>\n  <modelVersion>4.0.0</modelVersion>\n  <groupId>org.codehaus.plexus</groupId>\n"
        "  <artifactId>plexus-utils</artifactId>\n  <version>1.1</version>\n</project>\n",
        encoding="utf-8",
    )


PLUGIN_METADATA = "maven-metadata-local.xml"


def plugin_metadata(group: str, artifact: str, version: str) -> str:
    """``maven-metadata-local.xml`` text naming ``version`` as the only, latest and release one."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        "<!-- written by strands_art offline_repo: Debian's repository has no version metadata -->\n"
        f"<metadata>\n  <groupId>{escape(group)}</groupId>\n  <artifactId>{escape(artifact)}</artifactId>\n"
        f"  <versioning>\n    <latest>{escape(version)}</latest>\n    <release>{escape(version)}</release>\n"
        f"    <versions>\n      <version>{escape(version)}</version>\n    </versions>\n"
        "    <lastUpdated>20230101000000</lastUpdated>\n  </versioning>\n</metadata>\n"
    )


def debian_version(debian_repo: Path, group: str, artifact: str, ext: str = "jar") -> str | None:
    """The version of ``group:artifact`` Debian ships with a ``.ext`` file (a jar, not one of its
    relocation POMs; ``ext="pom"`` for parents and BOMs); None when Debian has none.

    The highest numbered release version; else Debian's ``debian`` alias (its canonical version,
    which Debian's own POMs name); else the highest of what is left (``0.x``, ``-SNAPSHOT``: a
    SNAPSHOT cannot be resolved with snapshots off, as the offline settings have them).
    """
    base = debian_repo.joinpath(*group.split("."), artifact)
    try:
        versions = sorted(v.name for v in base.iterdir() if (v / f"{artifact}-{v.name}.{ext}").is_file())
    except OSError:
        return None
    released = [v for v in versions if _RELEASE.fullmatch(v) and "SNAPSHOT" not in v]
    if released:
        return max(released, key=version_key)
    if "debian" in versions:
        return "debian"
    return max(versions, key=version_key) if versions else None


_RELEASE = re.compile(r"\d+(?:\.\d+)*(?:[.-][0-9A-Za-z]+)*")


def version_key(v: str) -> list[int]:
    """``v`` as a sortable key: its ``.``/``-`` parts, numbers as themselves, words as -1."""
    return [int(x) if x.isdigit() else -1 for x in re.split(r"[.-]", v)]


def seed_plugin_metadata(local_repo: Path, debian_repo: Path = DEBIAN_REPO) -> int:
    """Write ``maven-metadata-local.xml`` naming Debian's version for every plugin of the relocation
    table and every ``org.apache.maven.plugins`` plugin Debian ships; return how many.

    Maven resolves a plugin named without a version (the ``bundle`` packaging's lifecycle names
    resources, compiler, surefire, jar, install and deploy so) from version metadata, which
    Debian's repository does not have; the local repository's ``maven-metadata-local.xml`` is
    read for it.
    """
    plugins = {(r.group_id, r.artifact_id) for r in RELOCATIONS if r.artifact_id.endswith("-plugin")}
    try:
        plugins |= {
            (_PLUGINS, d.name)
            for d in debian_repo.joinpath(*_PLUGINS.split(".")).iterdir()
            if d.name.endswith("-plugin")
        }
    except OSError:
        pass
    written = 0
    for group, artifact in sorted(plugins):
        version = debian_version(debian_repo, group, artifact)
        if version is None:
            continue
        out = local_repo.joinpath(*group.split("."), artifact, PLUGIN_METADATA)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(plugin_metadata(group, artifact, version), encoding="utf-8")
        written += 1
    return written


def copy_files(src: Path, local_repo: Path) -> int:
    """Copy the regular files under ``src`` (a task's declared offline environment, see
    :mod:`.offline_env`) into ``local_repo`` at the same relative paths; symlinks are skipped.
    Returns how many were copied. Stdlib only: the ``mvn`` wrapper runs it inside the sandbox."""
    copied = 0
    for dirpath, _dirs, names in os.walk(src):
        for name in names:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            out = local_repo / path.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, out)
            copied += 1
    return copied


_VERSION_DIR = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")


def serve_metadata_versions(
    local_repo: Path, metadata: Iterable[str], debian_repo: Path = DEBIAN_REPO
) -> int:
    """Link Debian's POM and jar of each version that version metadata in ``local_repo`` names
    into ``local_repo``, where it has none; return how many links were made.

    ``metadata``: paths relative to ``local_repo`` (``/``-separated) of ``maven-metadata-local.xml``
    files seeded from a task's offline environment (:mod:`.offline_env`). A version Maven picks
    from the *local* repository's metadata (a version range) is resolved from the local
    repository only, never from Debian's remote one, so the chosen version's files must be
    there. Links are absolute symlinks to Debian's files (read-only system files, visible inside
    the sandbox at the same path). A version that is not a plain path segment, or that Debian
    does not ship, is skipped. Stdlib only: the ``mvn`` wrapper runs it inside the sandbox.
    """
    made = 0
    for rel in metadata:
        parts = rel.split("/")
        if len(parts) < 3 or parts[-1] != PLUGIN_METADATA:
            continue
        group_path, artifact = parts[:-2], parts[-2]
        try:
            root = ET.parse(local_repo.joinpath(*parts)).getroot()
        except (ET.ParseError, OSError):
            continue
        versions = {(el.text or "").strip() for el in root.iter() if _local(el.tag) == "version"}
        for v in sorted(versions):
            if not _VERSION_DIR.fullmatch(v):
                continue
            for ext in ("pom", "jar"):
                name = f"{artifact}-{v}.{ext}"
                src = debian_repo.joinpath(*group_path, artifact, v, name)
                out = local_repo.joinpath(*group_path, artifact, v, name)
                if not src.is_file() or out.exists() or out.is_symlink():
                    continue
                out.parent.mkdir(parents=True, exist_ok=True)
                out.symlink_to(src)
                made += 1
    return made


def pinned_versions(project_dir: Path) -> set[tuple[str, str, str]]:
    """``(groupId, artifactId, version)`` of every plugin/dependency in the project's POMs.

    Reads every ``pom.xml`` under ``project_dir`` (skipping ``target/``); ``${name}`` versions are
    resolved from the union of all POMs' ``<properties>``. Unparseable POMs are skipped (Maven will
    report them). Plugins without a groupId get ``org.apache.maven.plugins``.
    """
    poms = [p for p in project_dir.rglob("pom.xml") if "target" not in p.relative_to(project_dir).parts]
    trees = []
    for pom in poms:
        try:
            if pom.is_symlink() or not pom.is_file() or pom.stat().st_size > _MAX_POM_BYTES:
                raise OSError("not a regular file of sane size")
            trees.append(ET.parse(pom).getroot())
        except (ET.ParseError, OSError) as exc:
            logger.debug("skipping unparseable %s: %s", pom, exc)
    props: dict[str, str] = {}
    for root in trees:
        for el in root.iter():
            if _local(el.tag) == "properties":
                for p in el:
                    if isinstance(p.tag, str) and p.text:
                        props[_local(p.tag)] = p.text.strip()
    found: set[tuple[str, str, str]] = set()
    for root in trees:
        for el in root.iter():
            kind = _local(el.tag) if isinstance(el.tag, str) else ""
            if kind not in ("plugin", "dependency", "parent"):
                continue
            fields = {_local(c.tag): (c.text or "").strip() for c in el if isinstance(c.tag, str)}
            group = fields.get("groupId") or (_PLUGINS if kind == "plugin" else "")
            artifact, version = fields.get("artifactId", ""), fields.get("version", "")
            for _ in range(5):  # nested properties
                m = re.fullmatch(r"\$\{([^}]+)\}", version)
                if not m or m.group(1) not in props:
                    break
                version = props[m.group(1)]
            # a version becomes a directory name in the local repository: no separators, no '..'
            if group and artifact and _SAFE_VERSION.fullmatch(version):
                found.add((group, artifact, version))
    return found


_MAX_POM_BYTES = 4 << 20
_SAFE_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z_+-]*(?:\.[0-9A-Za-z_+-]+)*")


def _local(tag: str) -> str:
    return tag[len(_POM_NS) :] if tag.startswith(_POM_NS) else tag.rsplit("}", 1)[-1]


def seed_local_repo(
    local_repo: Path,
    *,
    project_dir: Path | None = None,
    debian_repo: Path = DEBIAN_REPO,
    extra: Iterable[tuple[str, str, str]] = (),
) -> int:
    """Pre-seed a fresh local repository for an offline build; return the number of POMs written.

    Writes the plexus-utils 1.1 fix, plugin version metadata (:func:`seed_plugin_metadata`) and a
    relocation (or BOM copy) for every table version, every
    version of a table artifact pinned in ``project_dir``'s POMs, and ``extra`` coordinates, that
    Debian lacks. Unknown artifacts are left for Maven to report as unresolvable.
    """
    local_repo.mkdir(parents=True, exist_ok=True)
    _seed_plexus_utils_1_1(local_repo, debian_repo)
    seed_plugin_metadata(local_repo, debian_repo)
    wanted = {(r.group_id, r.artifact_id, v) for r in RELOCATIONS for v in r.versions}
    if project_dir is not None:
        wanted |= {gav for gav in pinned_versions(project_dir) if gav[:2] in _BY_KEY}
    wanted |= {gav for gav in extra if gav[:2] in _BY_KEY}
    written = 0
    for group, artifact, version in sorted(wanted):
        written += _write_relocation(local_repo, debian_repo, _BY_KEY[(group, artifact)], version)
    return written


def _main(argv: list[str]) -> int:
    """``python3 offline_repo.py seed LOCAL_REPO PROJECT_DIR [OFFLINE_DIR]``: the ``mvn`` wrapper's re-seed.

    Runs inside the sandbox with the system Python and this file alone (stdlib only), so the
    agent's Maven calls re-seed relocation POMs for the pins the agent wrote.
    """
    if len(argv) not in (3, 4) or argv[0] != "seed":
        sys.stderr.write("usage: python3 offline_repo.py seed LOCAL_REPO PROJECT_DIR [OFFLINE_DIR]\n")
        return 2
    project = Path(argv[2])
    seed_local_repo(Path(argv[1]), project_dir=project if (project / "pom.xml").is_file() else None)
    if len(argv) == 4:  # the task's declared environment goes last: it wins over the table
        env = Path(argv[3])
        copy_files(env, Path(argv[1]))
        metadata = [p.relative_to(env).as_posix() for p in env.rglob(PLUGIN_METADATA) if not p.is_symlink()]
        serve_metadata_versions(Path(argv[1]), metadata)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
