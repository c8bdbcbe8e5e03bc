"""Propose a task's offline environment from what an offline Maven build failed to resolve.

:func:`missing_coordinates` reads a Maven log (the evaluator's compile or test build) and returns
every coordinate Maven said it could not find, with what wanted it:

* ``Non-resolvable parent POM ...: Could not find artifact G:A:pom:V`` — a parent;
* ``Non-resolvable import POM ...`` — a BOM imported in ``dependencyManagement``;
* ``Could not find artifact G:A:EXT[:CLASSIFIER]:V``, ``Failure to find G:A:EXT:V``, ``The
  following artifacts could not be resolved: G:A:EXT:V, ...`` — an artifact (a dependency, a
  plugin, a plugin's dependency);
* ``Error resolving version for plugin 'G:A'`` — a plugin named without a version, for which
  no version metadata exists;
* ``No versions available for G:A:EXT:RANGE within specified range`` — a dependency declared
  with a version range (``[30.0-jre,)``), for which no version metadata exists.

:func:`propose` turns each into a file of ``offline/`` (:mod:`.offline_env`) when Debian's
repository can serve it, and into a *blocker* (the exact coordinate, and why) when it cannot:

| missing | Debian has the artifact | file proposed |
|---|---|---|
| artifact or plugin | another version | relocation POM to Debian's version |
| parent or import POM | another version | Debian's POM under the wanted version (neither follows relocations) |
| parent | no, and it is a deployment-only parent (:data:`DEPLOYMENT_PARENTS`) | stub POM: coordinates and ``pom`` packaging |
| plugin | no, and it is build tooling (:data:`INERT_PLUGINS`) | inert stub: POM + a jar holding only ``plugin.xml`` (:func:`stub_plugin`) |
| plugin version | yes | ``maven-metadata-local.xml`` naming Debian's version |
| version range | yes, a version inside the range | ``maven-metadata-local.xml`` naming Debian's version |
| anything else | no | none: blocked |

Source of the message formats: Maven 3.8's ``DefaultModelBuilder`` (parent/import), Maven
Resolver's ``ArtifactNotFoundException`` and ``DefaultPluginVersionResolver`` texts, as printed
by Debian's Maven 3.8.7 (verified on real repositories' logs here).
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from strands_art.envs.migrationbench.maven.offline_repo import (
    DEBIAN_REPO,
    debian_version,
    plugin_metadata,
    relocation_pom,
    version_key,
)
from strands_art.envs.migrationbench.tasks.offline_env import METADATA_NAME, STUB_DESCRIPTOR, STUB_MOJO

DEPLOYMENT_PARENTS = frozenset(
    {
        ("org.sonatype.oss", "oss-parent"),  # repositories, a release profile (gpg, javadoc, sources)
        ("org.sonatype.forge", "forge-parent"),
    }
)
"""Parents that only configure deployment (distribution repositories, release profiles): a stub
with their coordinates changes nothing ``mvn verify`` does."""

_GAV = r"[A-Za-z0-9_.\-]+(?::[A-Za-z0-9_.\-]+){3,4}"
_FIND = re.compile(r"(?:Could not find artifact|Failure to find|The POM for) (" + _GAV + ")")
_LIST = re.compile(
    r"The following artifacts could not be resolved: ([^\n]*?)(?:: (?:Could not|Failure|Cannot)|$)"
)
_VERSION = re.compile(r"Error resolving version for plugin '([A-Za-z0-9_.\-]+):([A-Za-z0-9_.\-]+)'")
_RANGE = re.compile(
    r"No versions available for ([A-Za-z0-9_.\-]+):([A-Za-z0-9_.\-]+):([A-Za-z0-9_.\-]+):"
    r"([\[(][^ ]*[\])]) within specified range"
)
_PLUGIN = re.compile(
    r"Plugin ([A-Za-z0-9_.\-]+):([A-Za-z0-9_.\-]+):([A-Za-z0-9_.\-]+) or one of its dependencies"
)

INERT_PLUGINS = frozenset(
    {
        ("org.jacoco", "jacoco-maven-plugin"),
        ("org.eluder.coveralls", "coveralls-maven-plugin"),
        ("org.codehaus.mojo", "cobertura-maven-plugin"),
        ("org.sonatype.plugins", "nexus-staging-maven-plugin"),
        ("org.apache.maven.plugins", "maven-gpg-plugin"),
        ("org.apache.maven.plugins", "maven-release-plugin"),
        ("org.apache.maven.plugins", "maven-checkstyle-plugin"),
        ("org.apache.maven.plugins", "maven-pmd-plugin"),
        ("org.apache.maven.plugins", "maven-project-info-reports-plugin"),
        ("org.apache.maven.plugins", "maven-repository-plugin"),
        ("com.mycila", "license-maven-plugin"),
        ("com.mycila.maven-license-plugin", "maven-license-plugin"),
        ("org.codehaus.mojo", "license-maven-plugin"),
        ("org.codehaus.mojo", "findbugs-maven-plugin"),
        ("com.github.spotbugs", "spotbugs-maven-plugin"),
        ("org.codehaus.mojo", "animal-sniffer-maven-plugin"),
        ("external.atlassian.jgitflow", "jgitflow-maven-plugin"),
        ("com.github.github", "site-maven-plugin"),
        ("org.sonarsource.scanner.maven", "sonar-maven-plugin"),
        # deployment transports, loaded as build extensions
        ("org.apache.maven.wagon", "wagon-ssh"),
        ("org.apache.maven.wagon", "wagon-ssh-external"),
        ("org.apache.maven.wagon", "wagon-webdav-jackrabbit"),
        ("org.apache.maven.wagon", "wagon-ftp"),
    }
)
"""Build tooling that changes nothing ``mvn verify`` compiles or tests (coverage, release, staging,
signing, style and licence checks, reports): Debian packages none of them, so each is served by an
inert stub (:func:`stub_plugin`) whose goals do nothing. A coverage agent's ``argLine`` is then
not set: a surefire ``argLine`` that names it fails, and the task is not made."""


ALIASES = {
    ("cglib", "cglib-nodep"): ("cglib", "cglib"),
    ("junit", "junit-dep"): ("junit", "junit"),
    ("org.junit.platform", "junit-platform-surefire-provider"): (
        "org.apache.maven.surefire",
        "surefire-junit-platform",
    ),
}
"""Artifacts Debian ships under other coordinates, doing the same job: ``junit-dep`` is JUnit 4
without Hamcrest's classes inside (it depends on ``hamcrest-core``, as Debian's ``junit`` does);
``cglib-nodep`` is cglib
with its ASM dependency repackaged inside (Debian's ``cglib`` depends on Debian's ASM); JUnit's
own surefire provider (a surefire plugin dependency of JUnit 5.0-5.2 projects) was replaced by
surefire's ``surefire-junit-platform``, which Debian's surefire 2.22.3 ships."""


@dataclass(frozen=True, order=True)
class Missing:
    """One coordinate Maven could not resolve. ``kind``: ``parent``, ``import``, ``plugin`` (the
    plugin's own jar), ``artifact``, ``range`` (``version`` is the range as declared) or
    ``plugin-version`` (then ``ext`` and ``version`` are empty)."""

    group: str
    artifact: str
    version: str
    ext: str = "jar"
    kind: str = "artifact"

    def __str__(self) -> str:
        if self.kind == "plugin-version":
            return f"{self.group}:{self.artifact} (plugin version)"
        return f"{self.group}:{self.artifact}:{self.ext}:{self.version} ({self.kind})"


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _child_text(el: ET.Element, name: str) -> str | None:
    for c in el:
        if _local(c.tag) == name:
            return (c.text or "").strip()
    return None


def _parse_gav(text: str) -> tuple[str, str, str, str]:
    parts = text.split(":")
    if len(parts) == 4:
        return parts[0], parts[1], parts[2], parts[3]
    return parts[0], parts[1], parts[2], parts[4]  # G:A:EXT:CLASSIFIER:V


def missing_coordinates(log: str) -> list[Missing]:
    """Every coordinate the ``[ERROR]`` lines of ``log`` (a Maven build's output) say could not be
    resolved, sorted, without duplicates (see the module doc for the messages read)."""
    found: set[Missing] = set()
    # only what failed the build: Maven also warns about plugins it never runs (site, antrun of
    # the super-POM's site lifecycle) whose descriptors it could not read
    errors = [line for line in log.splitlines() if line.startswith("[ERROR]")]
    plugins = {(m.group(1), m.group(2), m.group(3)) for line in errors for m in _PLUGIN.finditer(line)}
    for line in errors:
        kind = (
            "parent"
            if "Non-resolvable parent POM" in line
            else "import"
            if "Non-resolvable import POM" in line
            else "artifact"
        )
        gavs = [m.group(1) for m in _FIND.finditer(line)]
        for m in _LIST.finditer(line):
            gavs += [g.strip() for g in m.group(1).split(",") if re.fullmatch(_GAV, g.strip())]
        for gav in gavs:
            g, a, ext, v = _parse_gav(gav)
            what = kind if ext == "pom" else "plugin" if (g, a, v) in plugins else "artifact"
            found.add(Missing(g, a, v, ext, what))
        for m in _VERSION.finditer(line):
            found.add(Missing(m.group(1), m.group(2), "", "", "plugin-version"))
        for m in _RANGE.finditer(line):
            found.add(Missing(m.group(1), m.group(2), m.group(4), m.group(3), "range"))
    return sorted(found)


def in_range(version: str, spec: str) -> bool:
    """Whether ``version`` lies in the Maven version range ``spec`` (``[1.0,2.0)``, ``[30.0-jre,)``,
    ``(,1.0],[1.2,)``, ``[1.5]``), comparing as :func:`.offline_repo.debian_version` orders
    versions (numeric parts numerically; a qualifier sorts below a number). False for text that
    holds no bracketed interval."""
    for m in re.finditer(r"([\[(])([^\[\]()]*)([\])])", spec):
        body = m.group(2)
        lo, hi = (x.strip() for x in body.split(",", 1)) if "," in body else (body.strip(), body.strip())
        ok = True
        if lo:
            c = _compare(version, lo)
            ok = ok and (c > 0 or (c == 0 and m.group(1) == "["))
        if hi:
            c = _compare(version, hi)
            ok = ok and (c < 0 or (c == 0 and m.group(3) == "]"))
        if ok:
            return True
    return False


def _compare(a: str, b: str) -> int:
    ka, kb = version_key(a), version_key(b)
    return (ka > kb) - (ka < kb)


@dataclass
class Proposal:
    """Files for ``offline/`` (relative path -> text), what each serves, and what cannot be served."""

    files: dict[str, str | bytes] = field(default_factory=dict)
    served: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)


def _pom_path(group: str, artifact: str, version: str) -> str:
    return "/".join((*group.split("."), artifact, version, f"{artifact}-{version}.pom"))


def _copy_pom_as(text: str, artifact: str, from_version: str, to_version: str) -> str | None:
    pattern = (
        rf"(<artifactId>{re.escape(artifact)}</artifactId>\s*<version>){re.escape(from_version)}(</version>)"
    )
    out, n = re.subn(pattern, rf"\g<1>{to_version}\g<2>", text, count=1)
    return out if n == 1 else None


def stub_parent_pom(group: str, artifact: str, version: str) -> str:
    """A parent POM holding nothing but its coordinates (for :data:`DEPLOYMENT_PARENTS`)."""
    return (
        "<project>\n  <modelVersion>4.0.0</modelVersion>\n"
        f"  <groupId>{group}</groupId>\n  <artifactId>{artifact}</artifactId>\n  <version>{version}</version>\n"
        "  <packaging>pom</packaging>\n"
        "  <!-- written by strands-art make-tasks: a stub of a deployment-only parent -->\n</project>\n"
    )


def plugin_goals(project_dir: Path, group: str, artifact: str) -> list[str]:
    """The goals the project's POMs bind for plugin ``group:artifact`` (its executions), sorted."""
    goals: set[str] = set()
    for pom in project_dir.rglob("pom.xml"):
        if ".git" in pom.parts or "target" in pom.parts:
            continue
        try:
            root = ET.parse(pom).getroot()
        except (ET.ParseError, OSError):
            continue
        for el in root.iter():
            if _local(el.tag) != "plugin":
                continue
            g = _child_text(el, "groupId") or "org.apache.maven.plugins"
            if (g, _child_text(el, "artifactId")) != (group, artifact):
                continue
            goals |= {
                (x.text or "").strip()
                for x in el.iter()
                if _local(x.tag) == "goal" and (x.text or "").strip()
            }
    return sorted(goals)


def stub_plugin(
    group: str, artifact: str, version: str, goals: list[str], debian_repo: Path
) -> tuple[str, bytes] | None:
    """An inert plugin stub (:data:`.offline_env.STUB_MOJO` for every goal): its POM text and jar
    bytes, or None when Debian's maven-dependency-plugin (which implements it) is missing."""
    dep_version = debian_version(debian_repo, "org.apache.maven.plugins", "maven-dependency-plugin")
    if dep_version is None:
        return None
    pom = (
        "<project>\n  <modelVersion>4.0.0</modelVersion>\n"
        f"  <groupId>{group}</groupId>\n  <artifactId>{artifact}</artifactId>\n  <version>{version}</version>\n"
        "  <packaging>maven-plugin</packaging>\n"
        "  <!-- written by strands-art make-tasks: an inert stub of build tooling Debian does not package -->\n"
        "  <dependencies>\n    <dependency><groupId>org.apache.maven.plugins</groupId>"
        f"<artifactId>maven-dependency-plugin</artifactId><version>{dep_version}</version></dependency>\n"
        "  </dependencies>\n</project>\n"
    )
    mojos = "".join(
        f"""    <mojo>
      <goal>{goal}</goal>
      <description>inert stub (strands-art make-tasks)</description>
      <requiresDirectInvocation>false</requiresDirectInvocation>
      <requiresProject>true</requiresProject>
      <requiresReports>false</requiresReports>
      <aggregator>false</aggregator>
      <requiresOnline>false</requiresOnline>
      <inheritedByDefault>true</inheritedByDefault>
      <phase>initialize</phase>
      <implementation>{STUB_MOJO}</implementation>
      <language>java</language>
      <instantiationStrategy>per-lookup</instantiationStrategy>
      <executionStrategy>once-per-session</executionStrategy>
      <threadSafe>true</threadSafe>
      <parameters>
        <parameter><name>project</name><type>org.apache.maven.project.MavenProject</type><required>true</required><editable>false</editable><description/></parameter>
      </parameters>
      <configuration>
        <project implementation="org.apache.maven.project.MavenProject" default-value="${{project}}"/>
      </configuration>
    </mojo>
"""
        for goal in goals
    )
    descriptor = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<plugin>\n  <name>inert stub</name>\n'
        f"  <groupId>{group}</groupId>\n  <artifactId>{artifact}</artifactId>\n  <version>{version}</version>\n"
        f"  <goalPrefix>{artifact.removesuffix('-maven-plugin').removeprefix('maven-').removesuffix('-plugin')}</goalPrefix>\n"
        "  <isolatedRealm>false</isolatedRealm>\n  <inheritedByDefault>true</inheritedByDefault>\n"
        f"  <mojos>\n{mojos}  </mojos>\n  <dependencies/>\n</plugin>\n"
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        info = zipfile.ZipInfo(STUB_DESCRIPTOR, date_time=(2020, 1, 1, 0, 0, 0))
        z.writestr(info, descriptor)
    return pom, buf.getvalue()


def propose(
    missing: list[Missing], debian_repo: Path = DEBIAN_REPO, project_dir: Path | None = None
) -> Proposal:
    """The ``offline/`` files that serve ``missing`` from ``debian_repo``, and the blockers.
    ``project_dir``: the project, read for the goals an inert plugin stub must declare."""
    out = Proposal()
    for m in missing:
        if m.kind == "plugin-version":
            v = debian_version(debian_repo, m.group, m.artifact)
            if v is None:
                out.blocked.append(f"{m}: Debian packages no {m.group}:{m.artifact}")
                continue
            rel = "/".join((*m.group.split("."), m.artifact, METADATA_NAME))
            out.files[rel] = plugin_metadata(m.group, m.artifact, v)
            out.served.append(f"{m} -> version metadata {v}")
            continue
        if m.kind == "range":
            v = debian_version(debian_repo, m.group, m.artifact, m.ext if m.ext in ("jar", "pom") else "jar")
            if v is None or not in_range(v, m.version):
                why = (
                    f"Debian packages no {m.group}:{m.artifact}"
                    if v is None
                    else f"Debian's {v} is outside it"
                )
                out.blocked.append(f"{m}: {why}")
                continue
            rel = "/".join((*m.group.split("."), m.artifact, METADATA_NAME))
            out.files[rel] = plugin_metadata(m.group, m.artifact, v)
            out.served.append(f"{m} -> version metadata {v}")
            continue
        rel = _pom_path(m.group, m.artifact, m.version)
        if m.kind in ("parent", "import"):
            v = debian_version(debian_repo, m.group, m.artifact, "pom")
            if v is not None and v != m.version:
                src = debian_repo.joinpath(*m.group.split("."), m.artifact, v, f"{m.artifact}-{v}.pom")
                text = _copy_pom_as(src.read_text(encoding="utf-8"), m.artifact, v, m.version)
                if text is not None:
                    out.files[rel] = text
                    out.served.append(f"{m} -> Debian's {v} POM under {m.version}")
                    continue
            if m.kind == "parent" and (m.group, m.artifact) in DEPLOYMENT_PARENTS:
                out.files[rel] = stub_parent_pom(m.group, m.artifact, m.version)
                out.served.append(f"{m} -> stub (deployment-only parent)")
                continue
            out.blocked.append(f"{m}: Debian packages no {m.group}:{m.artifact} POM to serve it")
            continue
        v = debian_version(debian_repo, m.group, m.artifact, m.ext if m.ext in ("jar", "pom") else "jar")
        if v is None and m.ext != "pom":
            v = debian_version(debian_repo, m.group, m.artifact, "pom")
        if v is None and m.kind == "plugin" and (m.group, m.artifact) in INERT_PLUGINS:
            goals = plugin_goals(project_dir, m.group, m.artifact) if project_dir is not None else []
            stub = stub_plugin(m.group, m.artifact, m.version, goals, debian_repo)
            if stub is not None:
                base = "/".join((*m.group.split("."), m.artifact, m.version, f"{m.artifact}-{m.version}"))
                out.files[f"{base}.pom"], out.files[f"{base}.jar"] = stub
                out.served.append(f"{m} -> inert stub (goals: {', '.join(goals) or 'none'})")
                continue
        alias = ALIASES.get((m.group, m.artifact))
        if v is None and alias is not None and (av := debian_version(debian_repo, *alias)) is not None:
            out.files[rel] = relocation_pom(m.group, m.artifact, m.version, (*alias, av))
            out.served.append(f"{m} -> relocation to {':'.join(alias)}:{av}")
            continue
        if v is None or v == m.version:
            why = (
                "Debian packages no " + f"{m.group}:{m.artifact}"
                if v is None
                else "Debian's copy is incomplete"
            )
            out.blocked.append(f"{m}: {why}")
            continue
        out.files[rel] = relocation_pom(m.group, m.artifact, m.version, (m.group, m.artifact, v))
        out.served.append(f"{m} -> relocation to {v}")
    return out
