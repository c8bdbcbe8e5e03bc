"""Test selection the repository can change: the compiler's includes/excludes, Platform
parameters, and the files on the test class path that select tests at run time (no Maven)."""

from __future__ import annotations

from pathlib import Path

from strands_art.envs.migrationbench.evaluate.buildpolicy import harden_pom
from strands_art.envs.migrationbench.evaluate.testselection import (
    default_selection,
    restore_runtime_selection,
    runtime_selection_files,
    selection,
)

COMPILER = (
    "<project><build><plugins><plugin><artifactId>maven-compiler-plugin</artifactId><configuration>"
    "{}</configuration></plugin><plugin><artifactId>maven-surefire-plugin</artifactId><configuration>"
    "<argLine>--add-opens x=y {}</argLine></configuration></plugin></plugins></build></project>"
)


def test_compiler_excludes_and_platform_parameters_are_part_of_the_selection() -> None:
    base = selection(COMPILER.format("<release>17</release>", "").encode())
    changed = selection(
        COMPILER.format(
            "<release>17</release><testExcludes><testExclude>**/B.java</testExclude></testExcludes>",
            "-Djunit.jupiter.conditions.deactivate=*",
        ).encode()
    )
    assert base == {}
    assert sorted(changed) == [
        "project/build/plugins/plugin/configuration/argLine junit parameters = "
        "-Djunit.jupiter.conditions.deactivate=*",
        "project/build/plugins/plugin/configuration/testExcludes = "
        "<testExcludes><testExclude>**/B.java</testExclude></testExcludes>",
    ]


def test_the_compilers_skip_and_skip_main_are_removed() -> None:
    out, removed = harden_pom(
        COMPILER.format("<skip>true</skip><skipMain>true</skipMain>", "").encode()
        .replace(b"<project>", b"<project><properties><maven.main.skip>true</maven.main.skip></properties>")
    )  # fmt: skip
    assert removed == [
        "project/properties/maven.main.skip",
        "project/build/plugins/plugin/configuration/skip",
        "project/build/plugins/plugin/configuration/skipMain",
    ]
    assert b"skip" not in out


def test_default_selection_and_failsafe() -> None:
    plain = b"<project><build><plugins><plugin><artifactId>maven-failsafe-plugin</artifactId></plugin></plugins></build></project>"
    assert default_selection({"pom.xml": plain}) == (True, True)
    custom = COMPILER.replace(
        "<argLine>--add-opens x=y {}</argLine>", "<includes><include>**/*Spec.java</include></includes>"
    )
    assert default_selection({"pom.xml": custom.format("", "").encode()}) == (False, False)
    # a property such as junit.version selects nothing
    versioned = b"<project><properties><junit.version>4.13</junit.version></properties></project>"
    assert default_selection({"pom.xml": versioned}) == (True, False)


def test_runtime_selection_files_that_are_not_the_originals_are_removed(tmp_path: Path) -> None:
    original = tmp_path / "orig"
    services = "src/test/resources/META-INF/services"
    for root in (original, tmp_path / "build"):
        (root / services).mkdir(parents=True)
        (root / "src/test/resources/junit-platform.properties").write_text(
            "junit.jupiter.testinstance.lifecycle.default=per_class\n"
        )
    build = tmp_path / "build"
    (build / services / "org.junit.platform.launcher.PostDiscoveryFilter").write_text("p.Drop\n")
    (build / "src/main/resources/META-INF/services").mkdir(parents=True)
    (
        build / "src/main/resources/META-INF/services/org.junit.platform.launcher.LauncherSessionListener"
    ).write_text("p.L\n")
    (build / ".git").mkdir()
    (build / ".git/junit-platform.properties").write_text("x\n")  # not on any class path
    files = runtime_selection_files(original)
    assert list(files) == ["src/test/resources/junit-platform.properties"]
    removed = restore_runtime_selection(build, files)
    assert removed == [
        "src/main/resources/META-INF/services/org.junit.platform.launcher.LauncherSessionListener: "
        "removed (test selection at run time, not the original's)",
        f"{services}/org.junit.platform.launcher.PostDiscoveryFilter: removed (test selection at run time, not the original's)",
    ]
    assert (build / "src/test/resources/junit-platform.properties").exists()  # the original's, kept
    (build / "src/test/resources/junit-platform.properties").write_text(
        "junit.jupiter.conditions.deactivate=*\n"
    )
    assert restore_runtime_selection(build, files) == [
        "src/test/resources/junit-platform.properties: removed (test selection at run time, not the original's)"
    ]
    # in a build output, a generated file is compared by name and bytes with the original's
    (build / "target/test-classes").mkdir(parents=True)
    (build / "target/test-classes/junit-platform.properties").write_text(
        "junit.jupiter.testinstance.lifecycle.default=per_class\n"
    )
    (build / "target/test-classes/org.junit.platform.engine.TestEngine").write_text("p.E\n")
    assert restore_runtime_selection(build, files, where="target") == [
        "target/test-classes/org.junit.platform.engine.TestEngine: removed (test selection at run time, not the original's)"
    ]
