"""A task's declared offline environment (offline/): validation, seeding, the agent cannot write it,
and a real build that resolves only with it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from strands_art.envs.migrationbench.evaluate.evaluator import BadTask, EvalTask, evaluate
from strands_art.envs.migrationbench.generate.offline_propose import (
    in_range,
    missing_coordinates,
    propose,
    stub_parent_pom,
    stub_plugin,
)
from strands_art.envs.migrationbench.maven.offline_repo import (
    DEBIAN_REPO,
    PLUGIN_METADATA,
    debian_version,
    plugin_metadata,
    seed_local_repo,
    serve_metadata_versions,
)
from strands_art.envs.migrationbench.tasks.offline_env import (
    STUB_DESCRIPTOR,
    STUB_MOJO,
    OfflineEnvError,
    declaration,
    load_offline_env,
    seed_offline_env,
)
from strands_art.envs.migrationbench.tasks.tasks import TaskError, load_task
from strands_art.envs.sandbox import SandboxUnavailable, require_sandbox

try:
    require_sandbox()
    SANDBOX_OK = True
except SandboxUnavailable:
    SANDBOX_OK = False

needs_sandbox = pytest.mark.skipif(not SANDBOX_OK, reason="bubblewrap sandbox unavailable here")
needs_bundle_plugin = pytest.mark.skipif(
    not (DEBIAN_REPO / "org/apache/felix/maven-bundle-plugin").is_dir() or shutil.which("mvn") is None,
    reason="mvn or Debian's maven-bundle-plugin missing (scripts/setup-system.sh)",
)

OSS_PARENT = "org/sonatype/oss/oss-parent/7/oss-parent-7.pom"
JACOCO = "org/jacoco/jacoco-maven-plugin/0.8.3/jacoco-maven-plugin-0.8.3"

# An upstream-style POM: the deployment-only oss-parent and a coverage plugin (Debian lacks both),
# bundle packaging, whose lifecycle names resources/compiler/surefire/jar/install without versions,
# and a version range (Debian's repository has no version metadata to choose from).
POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <parent><groupId>org.sonatype.oss</groupId><artifactId>oss-parent</artifactId><version>7</version></parent>
  <groupId>demo</groupId><artifactId>bundled</artifactId><version>1.0</version>
  <packaging>bundle</packaging>
  <properties><maven.compiler.release>17</maven.compiler.release></properties>
  <dependencies>
    <dependency><groupId>junit</groupId><artifactId>junit</artifactId><version>[4.11,5.0)</version><scope>test</scope></dependency>
  </dependencies>
  <build><plugins>
    <plugin><groupId>org.apache.felix</groupId><artifactId>maven-bundle-plugin</artifactId>
      <version>3.5.1</version><extensions>true</extensions></plugin>
    <plugin><groupId>org.jacoco</groupId><artifactId>jacoco-maven-plugin</artifactId><version>0.8.3</version>
      <executions><execution><goals><goal>prepare-agent</goal></goals></execution>
        <execution><id>report</id><phase>test</phase><goals><goal>report</goal></goals></execution></executions>
    </plugin>
  </plugins></build>
</project>
"""


def _jar_with(path: Path, extra: str | None, implementation: str | None = None) -> None:
    """Rewrite a stub jar with one more entry, or with another implementation class named."""
    with zipfile.ZipFile(path) as z:
        descriptor = z.read(STUB_DESCRIPTOR).decode()
    if implementation:
        descriptor = descriptor.replace(STUB_MOJO, implementation, 1)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(STUB_DESCRIPTOR, descriptor)
        if extra:
            z.writestr(extra, b"\xca\xfe\xba\xbe")


def write_task(root: Path, *, offline: bool) -> Path:
    """A task directory: repo/ with POM above, one class and two tests; offline/ when asked."""
    repo = root / "repo"
    (repo / "src/main/java/demo").mkdir(parents=True)
    (repo / "src/test/java/demo").mkdir(parents=True)
    (repo / "pom.xml").write_text(POM)
    (repo / "src/main/java/demo/Calc.java").write_text(
        "package demo;\npublic class Calc { public static int add(int a, int b) { return a + b; } }\n"
    )
    (repo / "src/test/java/demo/CalcTest.java").write_text(
        "package demo;\nimport org.junit.Test;\nimport static org.junit.Assert.assertEquals;\n"
        "public class CalcTest {\n  @Test public void adds() { assertEquals(3, Calc.add(1, 2)); }\n"
        "  @Test public void negatives() { assertEquals(-1, Calc.add(1, -2)); }\n}\n"
    )
    meta = {
        "repo": "demo/bundled",
        "base_commit": "0" * 40,
        "num_java_files": 2,
        "num_loc": 7,
        "num_pom_xml": 1,
        "num_src_test_java_files": 1,
        "num_test_cases": 2,
        "license": "Apache-2.0",
    }
    if offline:
        pom = root / "offline" / OSS_PARENT
        pom.parent.mkdir(parents=True)
        pom.write_text(stub_parent_pom("org.sonatype.oss", "oss-parent", "7"))
        stub = stub_plugin(
            "org.jacoco", "jacoco-maven-plugin", "0.8.3", ["prepare-agent", "report"], DEBIAN_REPO
        )
        if stub is not None:
            (root / "offline" / JACOCO).parent.mkdir(parents=True)
            (root / "offline" / f"{JACOCO}.pom").write_text(stub[0])
            (root / "offline" / f"{JACOCO}.jar").write_bytes(stub[1])
        junit = debian_version(DEBIAN_REPO, "junit", "junit")
        if junit is not None:
            (root / "offline" / "junit/junit").mkdir(parents=True)
            (root / "offline" / "junit/junit" / PLUGIN_METADATA).write_text(
                plugin_metadata("junit", "junit", junit)
            )
        meta["offline"] = declaration(root / "offline")
    (root / "task.json").write_text(json.dumps(meta))
    return root


def test_declaration_lists_every_file_with_its_sha256(tmp_path: Path) -> None:
    task = write_task(tmp_path / "t", offline=True)
    meta = json.loads((task / "task.json").read_text())
    digest = hashlib.sha256((task / "offline" / OSS_PARENT).read_bytes()).hexdigest()
    assert meta["offline"]["files"][OSS_PARENT] == digest
    assert sorted(meta["offline"]["files"]) == [
        f"junit/junit/{PLUGIN_METADATA}",
        f"{JACOCO}.jar",
        f"{JACOCO}.pom",
        OSS_PARENT,
    ]
    env = load_offline_env(task, meta)
    assert env is not None
    assert env.coordinates() == ["junit:junit"] + ["org.jacoco:jacoco-maven-plugin:0.8.3"] * 2 + [
        "org.sonatype.oss:oss-parent:7"
    ]
    assert EvalTask.from_dir(task).offline_env == env


@pytest.mark.parametrize(
    "damage, message",
    [
        (
            lambda t: (t / "offline" / OSS_PARENT).write_text(
                stub_parent_pom("org.sonatype.oss", "oss-parent", "7") + "<!-- edited -->"
            ),
            "changed",
        ),
        (
            lambda t: (t / "offline" / "x.pom").write_text("<project/>"),
            "not a Maven repository path|only GROUP",
        ),
        (lambda t: (t / "offline" / OSS_PARENT).unlink(), "missing"),
        (lambda t: os.symlink("/etc/passwd", t / "offline" / "org" / "evil.pom"), "not a regular file"),
        (lambda t: _jar_with(t / "offline" / f"{JACOCO}.jar", "Evil.class"), "may hold only"),
        (lambda t: _jar_with(t / "offline" / f"{JACOCO}.jar", None, "java.lang.Runtime"), "may only be"),
    ],
    ids=["changed", "bad-path", "missing", "symlink", "jar-with-class", "jar-naming-other-code"],
)
def test_an_offline_dir_that_differs_from_its_declaration_is_a_bad_task(
    tmp_path: Path, damage, message
) -> None:
    task = write_task(tmp_path / "t", offline=True)
    damage(task)
    with pytest.raises(BadTask, match=message):
        EvalTask.from_dir(task)
    with pytest.raises(TaskError, match=message):
        load_task(task)


def test_undeclared_offline_dir_and_bad_coordinates_are_refused(tmp_path: Path) -> None:
    task = write_task(tmp_path / "t", offline=True)
    meta = json.loads((task / "task.json").read_text())
    with pytest.raises(OfflineEnvError, match="declares no 'offline'"):
        load_offline_env(task, {k: v for k, v in meta.items() if k != "offline"})
    pom = task / "offline" / OSS_PARENT
    pom.write_text(stub_parent_pom("org.sonatype.oss", "other-parent", "7"))  # path says oss-parent
    with pytest.raises(OfflineEnvError, match="the POM is org.sonatype.oss:other-parent:7"):
        declaration(task / "offline")


def test_seeding_copies_the_files_and_refuses_one_changed_after_loading(tmp_path: Path) -> None:
    task = write_task(tmp_path / "t", offline=True)
    env = load_offline_env(task, json.loads((task / "task.json").read_text()))
    assert env is not None
    local = tmp_path / "local"
    assert seed_offline_env(local, env) == 4
    assert (local / OSS_PARENT).read_bytes() == (task / "offline" / OSS_PARENT).read_bytes()
    (task / "offline" / OSS_PARENT).write_text(stub_parent_pom("org.sonatype.oss", "oss-parent", "7") + " ")
    with pytest.raises(OfflineEnvError, match="changed since"):
        seed_offline_env(tmp_path / "local2", env)


@pytest.mark.skipif(
    not (DEBIAN_REPO / "org/apache/maven/plugins/maven-surefire-plugin").is_dir(), reason="no Debian repo"
)
def test_plugin_version_metadata_is_seeded_always(tmp_path: Path) -> None:
    seed_local_repo(tmp_path)
    meta = (tmp_path / "org/apache/maven/plugins/maven-surefire-plugin" / PLUGIN_METADATA).read_text()
    assert "<release>2.22.3</release>" in meta and "<version>2.22.3</version>" in meta


def test_missing_coordinates_are_read_from_maven_messages() -> None:
    log = (
        "[ERROR]   Non-resolvable parent POM for demo:x:1.0: Could not find artifact "
        "org.sonatype.oss:oss-parent:pom:7 in debian-system-repo (file:///usr/share/maven-repo) and "
        "'parent.relativePath' points at no local POM @ line 5, column 11\n"
        "[ERROR] Failed to execute goal on project x: Could not resolve dependencies for project demo:x:jar:1.0: "
        "The following artifacts could not be resolved: com.google.guava:guava:jar:18.0, "
        "org.mockito:mockito-all:jar:1.10.19: Could not find artifact com.google.guava:guava:jar:18.0 in d\n"
        "[ERROR] Error resolving version for plugin 'org.apache.maven.plugins:maven-deploy-plugin' from the "
        "repositories [local (/tmp/r), debian-system-repo (file:///usr/share/maven-repo)]: Plugin not found\n"
        "[ERROR] Failed to execute goal on project y: Could not find artifact org.example:gone:jar:tests:2.0 in r\n"
        "[WARNING] Failed to retrieve plugin descriptor for org.apache.maven.plugins:maven-antrun-plugin:1.3: "
        "Plugin org.apache.maven.plugins:maven-antrun-plugin:1.3 or one of its dependencies could not be "
        "resolved: Could not find artifact org.apache.maven.plugins:maven-antrun-plugin:jar:1.3 in r\n"
    )
    assert [str(m) for m in missing_coordinates(log)] == [
        "com.google.guava:guava:jar:18.0 (artifact)",
        "org.apache.maven.plugins:maven-deploy-plugin (plugin version)",
        "org.example:gone:jar:2.0 (artifact)",
        "org.mockito:mockito-all:jar:1.10.19 (artifact)",
        "org.sonatype.oss:oss-parent:pom:7 (parent)",
    ]  # the warning about a plugin the build never runs is not a blocker


def test_proposal_stubs_a_deployment_parent_and_blocks_what_debian_lacks(tmp_path: Path) -> None:
    debian = tmp_path / "debian"
    jar = debian / "com/google/guava/guava/31.1-jre/guava-31.1-jre.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"PK")
    log = (
        "[ERROR] Non-resolvable parent POM for a:b:1: Could not find artifact org.sonatype.oss:oss-parent:pom:9 in r\n"
        "[ERROR] Could not find artifact com.google.guava:guava:jar:18.0 in r\n"
        "[ERROR] Could not find artifact org.jacoco:jacoco-maven-plugin:jar:0.8.5 in r\n"
    )
    prop = propose(missing_coordinates(log), debian)
    assert sorted(prop.files) == [
        "com/google/guava/guava/18.0/guava-18.0.pom",
        "org/sonatype/oss/oss-parent/9/oss-parent-9.pom",
    ]
    assert "<version>31.1-jre</version>" in prop.files["com/google/guava/guava/18.0/guava-18.0.pom"]
    assert prop.blocked == [
        "org.jacoco:jacoco-maven-plugin:jar:0.8.5 (artifact): Debian packages no org.jacoco:jacoco-maven-plugin"
    ]
    # what is proposed passes the task validation
    for rel, text in prop.files.items():
        (tmp_path / "offline" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "offline" / rel).write_text(text)
    assert len(declaration(tmp_path / "offline")["files"]) == 2


def test_versions_named_by_metadata_are_linked_from_debian_into_the_local_repo(tmp_path: Path) -> None:
    """Maven resolves a version it chose from the local repository's metadata (a range) from the
    local repository only: the chosen version's POM and jar are linked in from Debian's."""
    debian, local = tmp_path / "debian", tmp_path / "local"
    for name in ("guava-31.1-jre.jar", "guava-31.1-jre.pom"):
        (debian / "com/google/guava/guava/31.1-jre").mkdir(parents=True, exist_ok=True)
        (debian / "com/google/guava/guava/31.1-jre" / name).write_bytes(name.encode())
    meta = local / "com/google/guava/guava" / PLUGIN_METADATA
    meta.parent.mkdir(parents=True)
    text = plugin_metadata("com.google.guava", "guava", "31.1-jre")
    meta.write_text(text.replace("</versions>", "<version>99.0</version><version>../x</version></versions>"))
    rel = "com/google/guava/guava/" + PLUGIN_METADATA
    assert serve_metadata_versions(local, [rel, "not/metadata.pom"], debian) == 2
    jar = local / "com/google/guava/guava/31.1-jre/guava-31.1-jre.jar"
    assert jar.is_symlink() and jar.read_bytes() == b"guava-31.1-jre.jar"
    # a version Debian does not ship and one that is no path segment are skipped
    assert sorted(p.name for p in (local / "com/google/guava/guava").iterdir()) == [
        "31.1-jre",
        PLUGIN_METADATA,
    ]
    assert serve_metadata_versions(local, [rel], debian) == 0  # nothing twice, nothing replaced


@pytest.mark.parametrize(
    ("version", "spec", "inside"),
    [
        ("31.1-jre", "[30.0-jre,)", True),
        ("29.0-jre", "[30.0-jre,)", False),
        ("2.0", "[1.0,2.0)", False),
        ("2.0", "[1.0,2.0]", True),
        ("1.0", "(1.0,2.0]", False),
        ("1.5", "[1.5]", True),
        ("1.1", "(,1.0],[1.2,)", False),
        ("1.3", "(,1.0],[1.2,)", True),
        ("1.0", "1.0", False),  # a plain version is no range
    ],
)
def test_maven_version_ranges(version: str, spec: str, inside: bool) -> None:
    assert in_range(version, spec) is inside


def test_a_version_range_is_served_by_metadata_naming_debians_version_inside_it(tmp_path: Path) -> None:
    debian = tmp_path / "debian"
    for rel in ("com/google/guava/guava/31.1-jre/guava-31.1-jre.jar", "junit/junit/4.13.2/junit-4.13.2.jar"):
        (debian / rel).parent.mkdir(parents=True, exist_ok=True)
        (debian / rel).write_bytes(b"PK")
    log = (
        "[ERROR] Failed to execute goal on project k: Could not resolve dependencies for project a:k:jar:0.1: "
        "Failed to collect dependencies at com.google.guava:guava:jar:[30.0-jre,): No versions available for "
        "com.google.guava:guava:jar:[30.0-jre,) within specified range -> [Help 1]\n"
        "[ERROR] Failed to execute goal on project k: ... No versions available for "
        "junit:junit:jar:[5.0,6.0) within specified range -> [Help 1]\n"
        "[ERROR] Could not find artifact junit:junit-dep:jar:4.8.2 in r\n"
    )
    missing = missing_coordinates(log)
    assert [str(m) for m in missing] == [
        "com.google.guava:guava:jar:[30.0-jre,) (range)",
        "junit:junit:jar:[5.0,6.0) (range)",
        "junit:junit-dep:jar:4.8.2 (artifact)",
    ]
    prop = propose(missing, debian)
    assert sorted(prop.files) == [
        "com/google/guava/guava/maven-metadata-local.xml",
        "junit/junit-dep/4.8.2/junit-dep-4.8.2.pom",
    ]
    meta = prop.files["com/google/guava/guava/maven-metadata-local.xml"]
    assert "<version>31.1-jre</version>" in meta and "<release>31.1-jre</release>" in meta
    assert "<artifactId>junit</artifactId>" in prop.files["junit/junit-dep/4.8.2/junit-dep-4.8.2.pom"]
    assert prop.blocked == ["junit:junit:jar:[5.0,6.0) (range): Debian's 4.13.2 is outside it"]
    for rel, text in prop.files.items():  # the metadata passes the task validation
        (tmp_path / "offline" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "offline" / rel).write_text(text)
    assert len(declaration(tmp_path / "offline")["files"]) == 2


@needs_sandbox
async def test_the_agents_shell_cannot_modify_the_task_offline_dir(tmp_path: Path) -> None:
    from strands_art.envs.migrationbench.agent.toolenv import OFFLINE_COPY, prepare_tool_env
    from strands_art.envs.migrationbench.agent.tools import make_tools
    from strands_art.envs.migrationbench.workspace import Workspace

    task = write_task(tmp_path / "t", offline=True)
    env = load_task(task).offline_env
    before = {p: p.read_bytes() for p in (task / "offline").rglob("*") if p.is_file()}
    with Workspace.for_task(task) as w:
        tenv = prepare_tool_env(w, offline=True, offline_env=env)
        shell, _ = make_tools(w, env=tenv.env, extra_path=tenv.extra_path, sandbox=tenv.sandbox)
        copy = w.aux_dir / OFFLINE_COPY / OSS_PARENT
        assert copy.read_bytes() == (task / "offline" / OSS_PARENT).read_bytes()
        for command in (
            f"echo evil > {task / 'offline' / OSS_PARENT}",
            f"rm -r {task / 'offline'}",
            f"ls {task}",
            f"echo evil > {copy}",
            f"rm {copy}",
        ):
            text = (await shell(command=command))["content"][0]["text"]
            assert not text.endswith("[exit code: 0]"), (command, text)
        assert copy.read_bytes() == (task / "offline" / OSS_PARENT).read_bytes()
        # the agent's local repository got the declared file
        assert (Path(tenv.env["MVN_LOCAL_REPO"]) / OSS_PARENT).is_file()
    assert {p: p.read_bytes() for p in (task / "offline").rglob("*") if p.is_file()} == before


@pytest.mark.maven
@needs_sandbox
@needs_bundle_plugin
def test_a_task_with_offline_builds_where_the_same_task_without_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STRANDS_ART_MAVEN_OFFLINE", "1")
    bare = write_task(tmp_path / "bare", offline=False)
    without = evaluate(bare / "repo", EvalTask.from_dir(bare), timeout_s=300)
    assert without.reward == 0.0 and "build_failed" in without.details["reasons"]
    assert "org.sonatype.oss:oss-parent:pom:7" in " ".join(
        without.details.get("maven_errors") or [without.details.get("log_tail", "")]
    )
    declared = write_task(tmp_path / "declared", offline=True)
    with_env = evaluate(declared / "repo", EvalTask.from_dir(declared), timeout_s=300)
    assert with_env.reward == 1.0, with_env.details.get("reasons")
    assert with_env.tests_run == 2
    # repo/ is the same bytes in both tasks: only the declared environment differs
    assert (bare / "repo" / "pom.xml").read_bytes() == (declared / "repo" / "pom.xml").read_bytes()
