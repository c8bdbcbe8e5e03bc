"""Projects that try to forge the MigrationBench reward (issue 22), built from the bundled
``compiler-props`` task: helpers for tests/test_reward_attacks.py.

Each builder returns a repository directory; the attack code is real Java that runs in the
scoring build (a test class's ``static {}`` block, a JVM shutdown hook) or a git trick in the
repository's ``.git``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

TASK = Path(__file__).resolve().parents[2] / "examples" / "migrationbench" / "tasks" / "compiler-props"
TEST_DIR = "src/test/java/org/example/textstats"
GIT = ["git", "-c", "user.email=a@b", "-c", "user.name=a", "-c", "commit.gpgsign=false"]

# Writes 61 (Java 17) at bytes 6-7 of every class file under target/classes while tests run.
FORGE_CLASS_VERSIONS = """
    static {
        try (java.util.stream.Stream<java.nio.file.Path> s = java.nio.file.Files.walk(java.nio.file.Path.of("target/classes"))) {
            for (java.nio.file.Path p : (Iterable<java.nio.file.Path>) s::iterator) {
                if (!p.toString().endsWith(".class")) continue;
                byte[] b = java.nio.file.Files.readAllBytes(p);
                b[6] = 0; b[7] = (byte) %d;
                java.nio.file.Files.write(p, b);
            }
        } catch (Throwable t) { }
    }
"""

# At JVM exit (after the tests, before Maven reads on): every report says 0 failures and 0
# errors, and extra reports appear: negative counts, a non-integer, a class that does not exist.
REWRITE_REPORTS = """
    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            java.nio.file.Path dir = java.nio.file.Path.of("target/surefire-reports");
            try (java.util.stream.Stream<java.nio.file.Path> s = java.nio.file.Files.list(dir)) {
                for (java.nio.file.Path p : (Iterable<java.nio.file.Path>) s::iterator) {
                    String name = p.getFileName().toString();
                    if (!name.startsWith("TEST-")) continue;
                    String x = new String(java.nio.file.Files.readAllBytes(p), "UTF-8");
                    x = x.replaceAll("failures=\\"[0-9]+\\"", "failures=\\"0\\"")
                         .replaceAll("errors=\\"[0-9]+\\"", "errors=\\"0\\"")
                         .replaceAll("(?s)<failure.*?</failure>", "");
                    java.nio.file.Files.write(p, x.getBytes("UTF-8"));
                }
                %s
            } catch (Throwable t) { }
        }));
    }
"""
EXTRA_REPORTS = {
    "TEST-zz-negative.xml": '<testsuite name="org.example.textstats.WordCounterTest" tests="0" '
    'failures="-2" errors="0" skipped="0"/>',
    "TEST-zz-abc.xml": '<testsuite name="org.example.textstats.SlugsTest" tests="abc" failures="0" '
    'errors="0" skipped="0"/>',
    "TEST-zz-ghost.xml": '<testsuite name="org.example.Ghost" tests="50" failures="0" errors="0" '
    'skipped="0"/>',
}

# surefire told to ignore failures and to run tests even when asked to skip them.
SUREFIRE_EXCUSES = """
  <build>
    <plugins>
      <plugin>
        <artifactId>maven-surefire-plugin</artifactId>
        <configuration>
          <testFailureIgnore>true</testFailureIgnore>
          <skipTests>false</skipTests>
          <skip>false</skip>
        </configuration>
      </plugin>
    </plugins>
  </build>
</project>"""


def copy_task_repo(dest: Path, migrated: bool) -> Path:
    """``compiler-props``' ``repo/`` at ``dest``, with its reference patch applied if ``migrated``."""
    shutil.copytree(TASK / "repo", dest, ignore=shutil.ignore_patterns("target"))
    if migrated:
        subprocess.run(["git", "apply", str(TASK / "reference.patch")], cwd=dest, check=True)
    return dest


def _inject(path: Path, code: str) -> None:
    text = path.read_text(encoding="utf-8")
    head = f"public class {path.stem} {{"
    assert head in text, path
    path.write_text(text.replace(head, head + code, 1), encoding="utf-8")


def _excuse_failures(repo: Path) -> None:
    pom = repo / "pom.xml"
    text = pom.read_text(encoding="utf-8")
    text = text.replace(
        "<properties>",
        "<properties>\n    <maven.test.failure.ignore>true</maven.test.failure.ignore>"
        "\n    <skipTests>false</skipTests>",
        1,
    )
    pom.write_text(text.replace("</project>", SUREFIRE_EXCUSES, 1), encoding="utf-8")
    (repo / ".mvn").mkdir(exist_ok=True)
    (repo / ".mvn" / "maven.config").write_text("-fn -Dmaven.test.failure.ignore=true -B\n")


def forged_class_versions(dest: Path, major: int = 61, migrated: bool = False) -> Path:
    """The unmigrated project (Java 8 bytecode) whose tests rewrite every class to ``major``,
    with a POM that insists on running the tests (``skipTests``/``skip`` false)."""
    repo = copy_task_repo(dest, migrated)
    _excuse_failures(repo)
    _inject(repo / TEST_DIR / "SlugsTest.java", FORGE_CLASS_VERSIONS % major)
    return repo


def failing_tests_with_forged_reports(dest: Path, extra_reports: bool = True) -> Path:
    """The migrated project with two failing tests, failures excused by the POM and
    ``.mvn/maven.config``, and a shutdown hook that rewrites the reports (and, with
    ``extra_reports``, adds :data:`EXTRA_REPORTS`). Honest score: 0.5."""
    repo = copy_task_repo(dest, migrated=True)
    _excuse_failures(repo)
    test = repo / TEST_DIR / "WordCounterTest.java"
    text = test.read_text(encoding="utf-8")
    for method in ("splitsOnPunctuationAndLowercases() {", "emptyTextHasNoWords() {"):
        text = text.replace(method, method + ' if (true) throw new AssertionError("still broken");', 1)
    test.write_text(text, encoding="utf-8")
    writes = ""
    if extra_reports:
        writes = " ".join(
            f"java.nio.file.Files.write(dir.resolve({json.dumps(name)}), {json.dumps(body)}.getBytes());"
            for name, body in EXTRA_REPORTS.items()
        )
    _inject(repo / TEST_DIR / "SlugsTest.java", REWRITE_REPORTS % writes)
    return repo


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def git_replaced_original(dest: Path) -> tuple[Path, str]:
    """A migrated repository whose ``.git`` lies about the original: two of the base commit's
    tests deleted, two empty ones added, committed, and ``git replace BASE NEW``. Returns the
    repository and the (genuine) base commit id. Honest score: 0.5 (two missing, two added)."""
    repo = copy_task_repo(dest, migrated=False)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "original")
    base = _git(repo, "rev-parse", "HEAD")
    subprocess.run(["git", "apply", str(TASK / "reference.patch")], cwd=repo, check=True)
    test = repo / TEST_DIR / "WordCounterTest.java"
    text = test.read_text(encoding="utf-8")
    for method in ("countsFrequencies", "mostFrequentBreaksTiesAlphabetically"):
        text = text.replace(f"public void {method}()", f"public void {method}Gone()", 1)
    text = text.replace(
        "@Test\n    public void countsFrequenciesGone()", "public void countsFrequenciesGone()"
    )
    text = text.replace(
        "@Test\n    public void mostFrequentBreaksTiesAlphabeticallyGone()",
        "public void mostFrequentBreaksTiesAlphabeticallyGone()",
    )
    text = text.rstrip().removesuffix("}") + (
        "    @Test public void alwaysPassesA() { }\n    @Test public void alwaysPassesB() { }\n}\n"
    )
    test.write_text(text, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "migrated")
    tree = _git(repo, "rev-parse", "HEAD^{tree}")
    fake = _git(repo, "commit-tree", tree, "-m", "original")
    _git(repo, "replace", base, fake)
    return repo, base


def task_without_repo(dest: Path, base_commit: str) -> Path:
    """A task directory holding only ``task.json`` (a bare record) for ``compiler-props``."""
    dest.mkdir(parents=True)
    meta = json.loads((TASK / "task.json").read_text(encoding="utf-8"))
    meta["base_commit"] = base_commit
    (dest / "task.json").write_text(json.dumps(meta), encoding="utf-8")
    return dest


# ---------------------------------------------------------------- round 2 (b22)


def _surefire_config(configuration: str) -> str:
    """A ``<build>`` block configuring surefire with ``configuration``, ending the POM."""
    return (
        "\n  <build><plugins><plugin><artifactId>maven-surefire-plugin</artifactId>"
        f"<configuration>{configuration}</configuration></plugin></plugins></build>\n</project>"
    )


# surefire told to run the tests inside Maven's own JVM (no fork), twice over.
SUREFIRE_IN_PROCESS = _surefire_config("<forkCount>0</forkCount><forkMode>never</forkMode>")

_PASSING_REPORT = (
    '<?xml version="1.0" encoding="UTF-8"?><testsuite name="org.example.textstats.%s" tests="%d" '
    'failures="0" errors="0" skipped="0">%s</testsuite>'
)

# Loaded in the test JVM (Maven's own when surefire does not fork): passing reports for both
# test classes, then the JVM ends with status 0 before any failure is reported.
HALT_WITH_FORGED_REPORTS = """
    static {
        try {
            java.nio.file.Path dir = java.nio.file.Path.of("target/surefire-reports");
            java.nio.file.Files.createDirectories(dir);
            %s
        } catch (Throwable t) { }
        Runtime.getRuntime().halt(0);
    }
"""


def _passing_report(cls: str, methods: list[str]) -> str:
    cases = "".join(
        f'<testcase name="{m}" classname="org.example.textstats.{cls}" time="0"/>' for m in methods
    )
    return _PASSING_REPORT % (cls, len(methods), cases)


PASSING_REPORTS = {
    "TEST-org.example.textstats.SlugsTest.xml": _passing_report(
        "SlugsTest", ["stripsAccentsAndPunctuation", "collapsesSeparators"]
    ),
    "TEST-org.example.textstats.WordCounterTest.xml": _passing_report(
        "WordCounterTest",
        [
            "splitsOnPunctuationAndLowercases",
            "emptyTextHasNoWords",
            "countsFrequencies",
            "mostFrequentBreaksTiesAlphabetically",
        ],
    ),
}


def _write_files_java(files: dict[str, str]) -> str:
    return " ".join(
        f"java.nio.file.Files.write(dir.resolve({json.dumps(name)}), {json.dumps(body)}.getBytes());"
        for name, body in files.items()
    )


def _break_two_tests(repo: Path, statement: str) -> None:
    test = repo / TEST_DIR / "WordCounterTest.java"
    text = test.read_text(encoding="utf-8")
    for method in ("splitsOnPunctuationAndLowercases() {", "emptyTextHasNoWords() {"):
        assert method in text
        text = text.replace(method, method + " " + statement, 1)
    test.write_text(text, encoding="utf-8")


def in_process_tests_halt_maven(dest: Path) -> Path:
    """The migrated project with two failing tests; the POM (``forkCount`` 0, ``forkMode``
    never) and ``.mvn/maven.config`` (``-DforkCount=0``) run the tests inside Maven's JVM, where
    the failing class's ``static {}`` writes passing reports for both classes and calls
    ``Runtime.halt(0)``: Maven ends with status 0. Honest score: 0.5."""
    repo = copy_task_repo(dest, migrated=True)
    pom = repo / "pom.xml"
    pom.write_text(pom.read_text(encoding="utf-8").replace("</project>", SUREFIRE_IN_PROCESS, 1))
    (repo / ".mvn").mkdir(exist_ok=True)
    (repo / ".mvn" / "maven.config").write_text("-B -DforkCount=0 -DforkMode=never\n")
    _break_two_tests(repo, 'if (true) throw new AssertionError("still broken");')
    _inject(
        repo / TEST_DIR / "WordCounterTest.java",
        HALT_WITH_FORGED_REPORTS % _write_files_java(PASSING_REPORTS),
    )
    return repo


# At the test JVM's exit (after surefire wrote the reports): no test was skipped.
HIDE_SKIPS = (
    REWRITE_REPORTS.replace('x.replaceAll("failures=', 'x.replaceAll("skipped=')
    .replace('"failures=\\"0\\"")', '"skipped=\\"0\\"")')
    .replace('.replaceAll("errors=\\"[0-9]+\\"", "errors=\\"0\\"")', '.replaceAll("(?s)<skipped[^>]*/>", "")')
    .replace("<failure.*?</failure>", "<skipped.*?</skipped>")
    % ""
)


def skipped_tests_with_hidden_skips(dest: Path) -> Path:
    """The migrated project whose two broken tests are skipped by a failed assumption
    (``Assume.assumeTrue(false)``, method names and annotations unchanged: Maven passes), and a
    shutdown hook that removes every trace of a skip from the reports. Honest score: 0.5."""
    repo = copy_task_repo(dest, migrated=True)
    _break_two_tests(repo, "org.junit.Assume.assumeTrue(false);")
    _inject(repo / TEST_DIR / "SlugsTest.java", HIDE_SKIPS)
    return repo


SUREFIRE_EXCLUDES = _surefire_config("<excludes><exclude>**/WordCounterTest.java</exclude></excludes>")

FORGE_REPORT_AT_EXIT = """
    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            java.nio.file.Path dir = java.nio.file.Path.of("target/surefire-reports");
            try { %s } catch (Throwable t) { }
        }));
    }
"""


def excluded_failing_class_with_forged_report(dest: Path) -> Path:
    """The migrated project with two failing tests in ``WordCounterTest``, a POM whose surefire
    ``<excludes>`` leaves that class out, and a shutdown hook in ``SlugsTest`` that writes a
    passing report for it. Honest score: 0.5."""
    repo = copy_task_repo(dest, migrated=True)
    pom = repo / "pom.xml"
    pom.write_text(pom.read_text(encoding="utf-8").replace("</project>", SUREFIRE_EXCLUDES, 1))
    _break_two_tests(repo, 'if (true) throw new AssertionError("still broken");')
    wc = "TEST-org.example.textstats.WordCounterTest.xml"
    _inject(
        repo / TEST_DIR / "SlugsTest.java",
        FORGE_REPORT_AT_EXIT % _write_files_java({wc: PASSING_REPORTS[wc]}),
    )
    return repo


# From the forked test JVM: attach to Maven's JVM (same uid, same /tmp) with the JDK's Attach
# API and load an agent (a class of the test sources) that halts it with status 0, after
# writing passing reports for both classes.
HALT_AGENT = """package org.example.textstats;

public class HaltAgent {
    public static void agentmain(String args) {
        Runtime.getRuntime().halt(0);
    }
}
"""
ATTACH_AND_HALT_MAVEN = """
    static {
        try {
            java.nio.file.Path dir = java.nio.file.Path.of("target/surefire-reports");
            java.nio.file.Files.createDirectories(dir);
            %s
            java.nio.file.Path jar = java.nio.file.Path.of("target/halt-agent.jar").toAbsolutePath();
            java.util.jar.Manifest mf = new java.util.jar.Manifest();
            mf.getMainAttributes().put(java.util.jar.Attributes.Name.MANIFEST_VERSION, "1.0");
            mf.getMainAttributes().putValue("Agent-Class", "org.example.textstats.HaltAgent");
            try (java.util.jar.JarOutputStream out = new java.util.jar.JarOutputStream(
                    java.nio.file.Files.newOutputStream(jar), mf)) {
                out.putNextEntry(new java.util.jar.JarEntry("org/example/textstats/HaltAgent.class"));
                out.write(java.nio.file.Files.readAllBytes(
                    java.nio.file.Path.of("target/test-classes/org/example/textstats/HaltAgent.class")));
            }
            Class<?> vmc = Class.forName("com.sun.tools.attach.VirtualMachine");
            java.util.Optional<ProcessHandle> p = ProcessHandle.current().parent();
            while (p.isPresent()) {
                ProcessHandle h = p.get();
                if (h.info().command().orElse("").endsWith("java")) {
                    try {
                        Object vm = vmc.getMethod("attach", String.class).invoke(null, Long.toString(h.pid()));
                        vmc.getMethod("loadAgent", String.class).invoke(vm, jar.toString());
                    } catch (Throwable t) {
                        System.out.println("attach to " + h.pid() + " failed: " + t);
                    }
                }
                p = h.parent();
            }
        } catch (Throwable t) {
            System.out.println("attack failed: " + t);
        }
    }
"""


def attach_from_test_jvm_halts_maven(dest: Path) -> Path:
    """The migrated project with two failing tests whose class's ``static {}`` writes passing
    reports, then attaches to Maven's JVM and loads an agent that halts it with status 0.
    Honest score: 0.5."""
    repo = copy_task_repo(dest, migrated=True)
    _break_two_tests(repo, 'if (true) throw new AssertionError("still broken");')
    (repo / TEST_DIR / "HaltAgent.java").write_text(HALT_AGENT, encoding="utf-8")
    _inject(
        repo / TEST_DIR / "WordCounterTest.java", ATTACH_AND_HALT_MAVEN % _write_files_java(PASSING_REPORTS)
    )
    return repo


def abstract_failing_class_with_forged_report(dest: Path) -> Path:
    """The migrated project with two failing tests in ``WordCounterTest``, made ``abstract``
    (surefire runs no abstract class; its test methods are all still in the sources), and a
    shutdown hook in ``SlugsTest`` that writes a passing report for it. Honest score: 0.5."""
    repo = copy_task_repo(dest, migrated=True)
    _break_two_tests(repo, 'if (true) throw new AssertionError("still broken");')
    test = repo / TEST_DIR / "WordCounterTest.java"
    text = test.read_text(encoding="utf-8")
    test.write_text(
        text.replace("public class WordCounterTest {", "public abstract class WordCounterTest {", 1)
    )
    wc = "TEST-org.example.textstats.WordCounterTest.xml"
    _inject(
        repo / TEST_DIR / "SlugsTest.java",
        FORGE_REPORT_AT_EXIT % _write_files_java({wc: PASSING_REPORTS[wc]}),
    )
    return repo


# ---------------------------------------------------------------- round 3 (issue 48): which tests

TASKS = TASK.parent


def copy_repo_of(task: str, dest: Path, migrated: bool = True) -> Path:
    """Any bundled task's ``repo/`` at ``dest``, with its reference patch applied if ``migrated``."""
    shutil.copytree(TASKS / task / "repo", dest, ignore=shutil.ignore_patterns("target"))
    if migrated:
        subprocess.run(["git", "apply", str(TASKS / task / "reference.patch")], cwd=dest, check=True)
    return dest


def committed_report(repo: Path, where: str, cls: str, methods: list[str]) -> None:
    """A passing surefire report for ``cls`` committed in the repository under ``where``."""
    cases = "".join(f'<testcase name="{m}" classname="{cls}" time="0"/>' for m in methods)
    path = repo / where / f"TEST-{cls}.xml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'<?xml version="1.0" encoding="UTF-8"?><testsuite name="{cls}" tests="{len(methods)}" '
        f'failures="0" errors="0" skipped="0">{cases}</testsuite>',
        encoding="utf-8",
    )


def _compiler_config(pom: Path, extra: str) -> None:
    """Add ``extra`` to the maven-compiler-plugin's ``<configuration>`` of ``pom``."""
    text = pom.read_text(encoding="utf-8")
    head = "<artifactId>maven-compiler-plugin</artifactId>"
    if head not in text:
        plugin = (
            f"<build><plugins><plugin>{head}<configuration>{extra}</configuration></plugin></plugins></build>"
        )
        pom.write_text(text.replace("</project>", plugin + "\n</project>", 1), encoding="utf-8")
        return
    at = text.index("<configuration>", text.index(head)) + len("<configuration>")
    pom.write_text(text[:at] + extra + text[at:], encoding="utf-8")


def uncompiled_unmigrated_class(dest: Path) -> Path:
    """``sun-base64`` with ``<release>17</release>`` (the reference POM) but ``BasicAuth`` (which
    still imports ``sun.misc.BASE64Encoder``) left out of compilation by the compiler's
    ``<excludes>`` (and the tests by ``default-testCompile`` bound to no phase), and a passing report for the test
    committed under ``src/target/surefire-reports``. Honest score: 0.0 (a source not compiled)."""
    repo = copy_repo_of("sun-base64", dest)
    # the unmigrated class back (the reference patch migrated it)
    shutil.copy(TASKS / "sun-base64/repo/src/main/java/org/example/auth/BasicAuth.java",
                repo / "src/main/java/org/example/auth/BasicAuth.java")  # fmt: skip
    _compiler_config(repo / "pom.xml", "<excludes><exclude>**/BasicAuth.java</exclude></excludes>")
    pom = repo / "pom.xml"  # and the test compilation unbound (its test would not compile)
    pom.write_text(
        pom.read_text(encoding="utf-8").replace(
            "<version>3.8.1</version>",
            "<version>3.8.1</version><executions><execution><id>default-testCompile</id>"
            "<phase>none</phase></execution></executions>",
            1,
        ),
        encoding="utf-8",
    )
    committed_report(repo, "src/target/surefire-reports", "org.example.auth.BasicAuthTest", ["encodes"])
    return repo


def excluded_tests_with_parameterized_count(dest: Path) -> Path:
    """``compiler-props`` migrated with two failing tests in ``WordCounterTest``, left out of
    test compilation by the compiler's ``<testExcludes>``, and ``SlugsTest`` made
    ``@RunWith(Parameterized.class)`` with two parameters, so that more tests pass (8) than the
    task requires (6). Honest score: 0.0 (a test source not compiled)."""
    repo = copy_task_repo(dest, migrated=True)
    _break_two_tests(repo, 'if (true) throw new AssertionError("still broken");')
    _compiler_config(
        repo / "pom.xml", "<testExcludes><testExclude>**/WordCounterTest.java</testExclude></testExcludes>"
    )
    slugs = repo / TEST_DIR / "SlugsTest.java"
    text = slugs.read_text(encoding="utf-8")
    text = text.replace(
        "public class SlugsTest {",
        "@org.junit.runner.RunWith(org.junit.runners.Parameterized.class)\npublic class SlugsTest {\n"
        "    @org.junit.runners.Parameterized.Parameters public static java.util.List<Object[]> data() {\n"
        "        return java.util.Arrays.asList(new Object[][] {{1}, {2}, {3}, {4}}); }\n"
        "    public SlugsTest(int n) { }\n",
        1,
    )
    slugs.write_text(text, encoding="utf-8")
    return repo


#: A JUnit Platform filter (registered as a service in the test resources) that drops every test
#: of the two failing methods, silently.
DROP_FILTER = """package org.example.roman;

import org.junit.platform.engine.FilterResult;
import org.junit.platform.engine.TestDescriptor;
import org.junit.platform.launcher.PostDiscoveryFilter;

public class DropBroken implements PostDiscoveryFilter {
    @Override
    public FilterResult apply(TestDescriptor d) {
        String name = d.getDisplayName();
        boolean broken = name.equals("zeroIsRejected") || name.equals("largestValue");
        return broken ? FilterResult.excluded("x") : FilterResult.included("y");
    }
}
"""
#: Six methods carrying an annotation meta-annotated with ``@Test`` (JUnit 5 runs them as tests).
COMPOSED_TESTS = """package org.example.roman;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.Test;

public class RomanExtraTest {
    @Target(ElementType.METHOD) @Retention(RetentionPolicy.RUNTIME) @Test
    public @interface Check { }

    @Check void one() { }
    @Check void two() { }
    @Check void three() { }
    @Check void four() { }
    @Check void five() { }
    @Check void six() { }
}
"""


def platform_filter_and_composed_tests(dest: Path) -> Path:
    """``junit-mix`` migrated, ``RomanRangeTest``'s two tests failing
    (JUnit 4, run by the vintage engine), a ``PostDiscoveryFilter`` registered in
    ``src/test/resources/META-INF/services/`` that drops them, a ``junit-platform.properties``,
    and six new methods with a composed ``@Check`` (meta-annotated with ``@Test``) making up the
    count; the launcher is a test dependency. Honest score: 0.5 (the filter is removed: the
    failures fail the test build; and tests were added)."""
    repo = copy_repo_of("junit-mix", dest)
    test = repo / "src/test/java/org/example/roman/RomanRangeTest.java"
    text = test.read_text(encoding="utf-8")
    for name in ("zeroIsRejected", "largestValue"):
        text = text.replace(
            f"public void {name}() {{", f'public void {name}() {{ if (true) throw new AssertionError("x");', 1
        )
    test.write_text(text, encoding="utf-8")
    (repo / "src/test/java/org/example/roman/DropBroken.java").write_text(DROP_FILTER, encoding="utf-8")
    (repo / "src/test/java/org/example/roman/RomanExtraTest.java").write_text(
        COMPOSED_TESTS, encoding="utf-8"
    )
    services = repo / "src/test/resources/META-INF/services"
    services.mkdir(parents=True)
    (services / "org.junit.platform.launcher.PostDiscoveryFilter").write_text(
        "org.example.roman.DropBroken\n"
    )
    (repo / "src/test/resources/junit-platform.properties").write_text(
        "junit.jupiter.conditions.deactivate=*\n"
    )
    pom = repo / "pom.xml"
    pom.write_text(
        pom.read_text(encoding="utf-8").replace(
            "<dependencies>",
            "<dependencies><dependency><groupId>org.junit.platform</groupId>"
            "<artifactId>junit-platform-launcher</artifactId><version>1.7.0</version>"
            "<scope>test</scope></dependency>",
            1,
        ),
        encoding="utf-8",
    )
    return repo


#: At the test JVM's exit: a second passing report about WordCounterTest (its four original
#: methods) as ``TEST-...-x.xml`` and as a failsafe report, and SlugsTest's report claiming 1000.
DUPLICATE_REPORTS_AT_EXIT = """
    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                java.nio.file.Path dir = java.nio.file.Path.of("target/surefire-reports");
                java.nio.file.Path safe = java.nio.file.Path.of("target/failsafe-reports");
                java.nio.file.Files.createDirectories(safe);
                java.nio.file.Files.write(dir.resolve("TEST-org.example.textstats.WordCounterTest-x.xml"), %(wc)s.getBytes());
                java.nio.file.Files.write(safe.resolve("TEST-org.example.textstats.WordCounterTest.xml"), %(wc)s.getBytes());
                java.nio.file.Path own = dir.resolve("TEST-org.example.textstats.SlugsTest.xml");
                String x = new String(java.nio.file.Files.readAllBytes(own), "UTF-8");
                java.nio.file.Files.write(own, x.replaceFirst("tests=\\"[0-9]+\\"", "tests=\\"1000\\"").getBytes("UTF-8"));
            } catch (Throwable t) { }
        }));
    }
"""


def unicode_escapes_and_duplicate_reports(dest: Path) -> Path:
    """``compiler-props`` migrated, POM untouched: the two failing tests hidden from javac by
    ``// \\u000a /*`` ... ``// \\u000a */`` (a comment to a parser that does not decode Unicode
    escapes first), two javac-only tests added by ``// \\u000a @Test public void ...``, and a
    shutdown hook writing duplicate reports (:data:`DUPLICATE_REPORTS_AT_EXIT`). Honest score:
    0.5 (tests missing and added; the duplicates count nothing)."""
    repo = copy_task_repo(dest, migrated=True)
    test = repo / TEST_DIR / "WordCounterTest.java"
    text = test.read_text(encoding="utf-8")
    first = text.index("    @Test\n    public void splitsOnPunctuationAndLowercases()")
    third = text.index("    @Test\n    public void countsFrequencies()")
    text = (
        text[:first]
        + "    // \\u000a /*\n"
        + text[first:third]
        + "    // \\u000a */\n"
        + "    // \\u000a @Test public void javacOnlyA() { }\n"
        + "    // \\u000a @Test public void javacOnlyB() { }\n"
        + text[third:]
    )
    test.write_text(text, encoding="utf-8")
    wc = json.dumps(PASSING_REPORTS["TEST-org.example.textstats.WordCounterTest.xml"])
    _inject(repo / TEST_DIR / "SlugsTest.java", DUPLICATE_REPORTS_AT_EXIT % {"wc": wc})
    return repo
