"""Offline Maven layer: fresh local repo seeding, settings, mode choice, run_maven with timeouts."""

from __future__ import annotations

import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from strands_art.envs.migrationbench.maven import maven
from strands_art.envs.migrationbench.maven.offline_repo import (
    DEBIAN_REPO,
    RELOCATIONS,
    pinned_versions,
    seed_local_repo,
    write_settings,
)

needs_debian_repo = pytest.mark.skipif(
    not (DEBIAN_REPO / "org/apache/maven/plugins/maven-compiler-plugin/3.10.1").is_dir(),
    reason="Debian maven repo not installed (scripts/setup-system.sh)",
)
needs_mvn = pytest.mark.skipif(shutil.which("mvn") is None, reason="mvn not installed")

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>demo</groupId><artifactId>{artifact}</artifactId><version>1.0</version>
  <properties>
    <maven.compiler.source>1.8</maven.compiler.source>
    <maven.compiler.target>1.8</maven.compiler.target>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
    <junit.version>4.12</junit.version>
    <compiler.version>3.8.1</compiler.version>
  </properties>
  <dependencies>
    <dependency><groupId>junit</groupId><artifactId>junit</artifactId>
      <version>${{junit.version}}</version><scope>test</scope></dependency>
  </dependencies>
  <build><plugins>
    <plugin><artifactId>maven-compiler-plugin</artifactId><version>${{compiler.version}}</version></plugin>
    <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-surefire-plugin</artifactId>
      <version>2.22.2</version></plugin>
  </plugins></build>
</project>
"""


def write_project(
    root: Path, test_body: str = "assertEquals(3, Calc.add(1, 2));", artifact: str = "demo"
) -> Path:
    """A one-module Java 8 project pinning versions Debian lacks (compiler 3.8.1, surefire 2.22.2,
    junit 4.12)."""
    (root / "src/main/java/demo").mkdir(parents=True)
    (root / "src/test/java/demo").mkdir(parents=True)
    (root / "pom.xml").write_text(POM.format(artifact=artifact))
    (root / "src/main/java/demo/Calc.java").write_text(
        "package demo;\npublic class Calc { public static int add(int a, int b) { return a + b; } }\n"
    )
    (root / "src/test/java/demo/CalcTest.java").write_text(
        "package demo;\nimport org.junit.Test;\nimport static org.junit.Assert.assertEquals;\n"
        f"public class CalcTest {{ @Test public void adds() throws Exception {{ {test_body} }} }}\n"
    )
    return root


def test_strip_ansi() -> None:
    assert (
        maven.strip_ansi("\x1b[1;34m[INFO]\x1b[m BUILD \x1b[32mSUCCESS\x1b[0m\n") == "[INFO] BUILD SUCCESS\n"
    )


def test_offline_mode_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(maven.OFFLINE_ENV, "1")
    assert maven.use_offline() is True
    monkeypatch.setenv(maven.OFFLINE_ENV, "0")
    assert maven.use_offline() is False
    assert maven.use_offline(True) is True  # explicit flag wins
    monkeypatch.setenv(maven.OFFLINE_ENV, "maybe")
    with pytest.raises(ValueError, match="STRANDS_ART_MAVEN_OFFLINE"):
        maven.use_offline()


def test_auto_mode_probes_central_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(maven.OFFLINE_ENV, raising=False)
    calls = []

    def fake_urlopen(req, timeout):  # noqa: ANN001
        calls.append((req.full_url, timeout))
        raise OSError("network unreachable")

    maven.central_reachable.cache_clear()
    monkeypatch.setattr(maven.urllib.request, "urlopen", fake_urlopen)
    try:
        assert maven.use_offline() is True
        assert maven.use_offline() is True
    finally:
        maven.central_reachable.cache_clear()
    assert calls == [(maven.CENTRAL_URL, 3.0)]


def test_settings_offline_and_online(tmp_path: Path) -> None:
    repo = tmp_path / "repo & co"
    ns = "{http://maven.apache.org/SETTINGS/1.0.0}"
    offline = ET.parse(write_settings(tmp_path / "s.xml", repo, offline=True)).getroot()
    assert offline.findtext(f"{ns}localRepository") == str(repo)
    assert offline.findtext(f"{ns}mirrors/{ns}mirror/{ns}mirrorOf") == "*"
    assert offline.findtext(f"{ns}mirrors/{ns}mirror/{ns}url") == "file:///usr/share/maven-repo"
    online = ET.parse(write_settings(tmp_path / "o.xml", repo, offline=False)).getroot()
    assert online.findtext(f"{ns}localRepository") == str(repo)
    assert online.find(f"{ns}mirrors") is None


def test_pinned_versions_resolves_properties(tmp_path: Path) -> None:
    write_project(tmp_path)
    found = pinned_versions(tmp_path)
    assert ("junit", "junit", "4.12") in found
    assert ("org.apache.maven.plugins", "maven-compiler-plugin", "3.8.1") in found  # default groupId
    assert ("org.apache.maven.plugins", "maven-surefire-plugin", "2.22.2") in found


def test_relocation_table_targets_exist_in_debian_repo() -> None:
    if not DEBIAN_REPO.is_dir():
        pytest.skip("no Debian maven repo")
    missing = [
        r.target
        for r in RELOCATIONS
        if not DEBIAN_REPO.joinpath(*r.target[0].split("."), *r.target[1:]).is_dir()
    ]
    assert missing == []


@needs_debian_repo
def test_seed_local_repo(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p")
    pom = project / "pom.xml"
    pom.write_text(pom.read_text().replace("2.22.2", "2.99.7"))  # a pin not in the table
    local = tmp_path / "m2"
    written = seed_local_repo(local, project_dir=project)
    assert written > 50
    plugins = local / "org/apache/maven/plugins"
    reloc = ET.parse(plugins / "maven-compiler-plugin/3.8.1/maven-compiler-plugin-3.8.1.pom").getroot()
    assert reloc.findtext("distributionManagement/relocation/version") == "3.10.1"
    assert (plugins / "maven-surefire-plugin/2.99.7/maven-surefire-plugin-2.99.7.pom").is_file()
    assert not (plugins / "maven-compiler-plugin/3.10.1").exists()  # Debian has it
    assert not (plugins / "maven-compiler-plugin/3.1").exists()  # Debian ships its own relocation
    jar = local / "org/codehaus/plexus/plexus-utils/1.1/plexus-utils-1.1.jar"
    assert jar.read_bytes()[:2] == b"PK"
    bom = ET.parse(local / "org/junit/junit-bom/5.8.2/junit-bom-5.8.2.pom").getroot()
    ns = "{http://maven.apache.org/POM/4.0.0}"
    assert bom.findtext(f"{ns}version") == "5.8.2"
    assert len(bom.findall(f"{ns}dependencyManagement/{ns}dependencies/{ns}dependency")) > 5
    annot = ET.parse(
        local / "javax/annotation/javax.annotation-api/1.3.2/javax.annotation-api-1.3.2.pom"
    ).getroot()
    assert annot.findtext("distributionManagement/relocation/artifactId") == "geronimo-annotation_1.3_spec"


def test_missing_pom_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no pom.xml"):
        maven.run_maven(tmp_path, ["verify"], offline=True)


@pytest.mark.maven
@needs_mvn
@needs_debian_repo
def test_offline_build_with_old_pins(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p")
    log = tmp_path / "mvn.log"
    result = maven.run_maven(project, ["clean", "verify"], 240, offline=True, log_path=log)
    assert result.ok, result.output_tail
    assert result.offline and not result.timed_out
    text = log.read_text()
    assert "\x1b[" not in text
    assert "maven-compiler-plugin:3.10.1:compile" in text
    assert "Tests run: 1, Failures: 0, Errors: 0, Skipped: 0" in text
    assert (project / "target/surefire-reports/TEST-demo.CalcTest.xml").is_file()
    assert not (Path.home() / ".m2/repository/junit/junit/4.12").exists()


def _processes_mentioning(marker: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                pids.append(int(proc.name))
    return pids


@pytest.mark.maven
@needs_mvn
@needs_debian_repo
def test_hung_build_is_killed_with_its_process_group(tmp_path: Path) -> None:
    project = write_project(tmp_path / "hung-project", test_body="Thread.sleep(Long.MAX_VALUE);")
    result = maven.run_maven(project, ["clean", "verify"], 20, offline=True)
    assert result.timed_out
    assert result.exit_code is None
    assert 19 < result.duration_s < 40
    assert "Running demo.CalcTest" in result.output_tail  # it hung in the forked test JVM
    assert _processes_mentioning(str(project)) == [], "Maven or its test JVM survived the timeout"
    assert os.path.isdir(project)
