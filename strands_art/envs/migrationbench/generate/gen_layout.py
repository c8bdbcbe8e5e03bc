"""Where a generated project sets its Java level, and how the reference migration moves it to 17.

Each ``level_*`` function edits a Java 8 :class:`~.gen_pom.Pom` in place (drawing its choices
from ``rng``) and returns a *fix*: a function that applies the reference migration to a deep copy
of the POM. Fixes locate what they change by name (property key, plugin artifact, profile id), so
they work on the copy. The Java level styles are the ones real repositories use:

* ``props``: ``maven.compiler.source/target`` 1.8; fix: ``maven.compiler.release`` 17 or 17/17.
* ``java-version``: ``java.version`` 1.8 feeding ``maven.compiler.source/target``; fix: 17.
* ``plugin``: the compiler plugin's ``<source>/<target>`` 1.8 (literal, or a property such as
  ``java.level``); fix: ``<release>17</release>`` (with a compiler plugin >= 3.6) or 17/17.
* ``release``: ``maven.compiler.release`` or ``<release>`` 8 (JDK 17's javac honours it: major 52).
* ``profile``: the level set in a profile that is active by default, or one activated by
  ``<jdk>[1.8,)</jdk>``.
* ``old-plugins``: compiler 3.1-3.3 with ``<source>/<target>``, surefire 2.12.4-2.18.1 and
  other 2013-era plugin pins; fix: current versions and ``<release>17</release>``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from strands_art.envs.migrationbench.generate.gen_pom import Plugin, Pom, Profile

Fix = Callable[[Pom], None]

COMPILER = "maven-compiler-plugin"
SUREFIRE = "maven-surefire-plugin"
SOURCE_TARGET = ("maven.compiler.source", "maven.compiler.target")
COMPILER_VERSIONS = ("3.1", "3.3", "3.5.1", "3.6.1", "3.7.0", "3.8.0", "3.8.1")

#: JVM options that Java 8 accepted (ignored with a warning) and Java 17 refuses to start with.
REMOVED_JVM_FLAGS = (
    "-XX:MaxPermSize=256m",
    "-XX:MaxPermSize=512m",
    "-XX:PermSize=128m",
    "-XX:+UseConcMarkSweepGC",
    "-XX:+CMSClassUnloadingEnabled",
    "-XX:+UseParNewGC",
    "-XX:+AggressiveOpts",
    "-XX:+UseSplitVerifier",
)
HARMLESS_JVM_FLAGS = (
    "-Xmx512m",
    "-Xms64m",
    "-Dfile.encoding=UTF-8",
    "-Duser.timezone=UTC",
    "-Djava.awt.headless=true",
)


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("-")[0].split("."))


def replace_props(pom: Pom, old: tuple[str, ...], new: list[tuple[str, str]]) -> None:
    """Put ``new`` where the first of ``old`` was (at the end if none was there), dropping ``old``."""
    idx = next((i for i, (k, _) in enumerate(pom.properties) if k in old), len(pom.properties))
    rest = [kv for kv in pom.properties[idx:] if kv[0] not in old]
    pom.properties[:] = pom.properties[:idx] + new + rest


def _plugin_to_17(rng: random.Random, plugin: Plugin | None) -> Callable[[Plugin], None]:
    """A fix for a compiler plugin with ``<source>/<target>`` (drawn now, applied to the copy)."""
    use_release = rng.random() < 0.7

    def fix(p: Plugin) -> None:
        if use_release:
            idx = next(i for i, (k, _) in enumerate(p.config) if k in ("source", "target"))
            p.drop("source", "target")
            p.config.insert(idx, ("release", "17"))
            if p.version is not None and _version(p.version) < (3, 6):
                p.version = "3.8.1"
        else:
            p.set("source", "17")
            p.set("target", "17")

    return fix


def compiler_plugin(rng: random.Random, version: str | None, level: str = "1.8") -> Plugin:
    """A compiler plugin with ``<source>/<target>`` ``level`` and some ordinary settings."""
    p = Plugin(COMPILER, version, [("source", level), ("target", level)])
    extra = rng.random()
    if extra < 0.3:
        p.config.append(("encoding", "UTF-8"))
    elif extra < 0.5:
        p.config.append(
            ("compilerArgs", [rng.choice(["-Xlint:unchecked", "-parameters", "-Xlint:deprecation"])])
        )
    elif extra < 0.6:
        p.config.append(("showWarnings", "true"))
    return p


def level_props(rng: random.Random, pom: Pom) -> tuple[str, Fix]:
    """``maven.compiler.source/target`` 1.8 or a ``java.version`` property (see the module doc)."""
    if rng.random() < 0.6:
        pom.set_prop("maven.compiler.source", "1.8")
        pom.set_prop("maven.compiler.target", "1.8")
        release = rng.random() < 0.6

        def fix(p: Pom) -> None:
            if release:
                replace_props(p, SOURCE_TARGET, [("maven.compiler.release", "17")])
            else:
                p.set_prop("maven.compiler.source", "17")
                p.set_prop("maven.compiler.target", "17")

        return "props", fix
    key = rng.choice(["java.version", "jdk.version", "java.compat.version"])
    pom.set_prop(key, "1.8")
    pom.set_prop("maven.compiler.source", f"${{{key}}}")
    pom.set_prop("maven.compiler.target", f"${{{key}}}")
    return "java-version", lambda p: p.set_prop(key, "17")


def level_plugin(rng: random.Random, pom: Pom, *, managed: bool = False) -> tuple[str, Fix]:
    """The compiler plugin's ``<source>/<target>`` (in ``pluginManagement`` when ``managed``)."""
    version = rng.choice(COMPILER_VERSIONS)
    via = rng.choice([None, None, "java.level", "java.source.version", "jdk.level"])
    plugin = compiler_plugin(rng, version, f"${{{via}}}" if via else "1.8")
    if via:
        pom.set_prop(via, "1.8")
    (pom.plugin_management if managed else pom.plugins).insert(0, plugin)
    if via and rng.random() < 0.6:
        return "plugin-property", lambda p: p.set_prop(via, "17")
    plugin_fix = _plugin_to_17(rng, plugin)

    def fix(p: Pom) -> None:
        plugin_fix(p.plugin(COMPILER, managed=managed))
        if via:
            p.drop_props(via)

    return "plugin", fix


def level_release(rng: random.Random, pom: Pom) -> tuple[str, Fix]:
    """``--release 8`` (JDK 17 honours it, so the untouched build is major 52)."""
    version = rng.choice(["3.6.1", "3.7.0", "3.8.0", "3.8.1", "3.10.1"])
    if rng.random() < 0.5:
        pom.set_prop("maven.compiler.release", "8")
        pom.plugins.insert(0, Plugin(COMPILER, version))
        return "release-property", lambda p: p.set_prop("maven.compiler.release", "17")
    plugin = Plugin(COMPILER, version, [("release", "8")])
    if rng.random() < 0.4:
        plugin.config.append(("encoding", "UTF-8"))
    pom.plugins.insert(0, plugin)
    return "release-plugin", lambda p: p.plugin(COMPILER).set("release", "17")


def level_simple(rng: random.Random, pom: Pom) -> tuple[str, Fix]:
    """Props or compiler plugin, drawn (the level of a project whose hazard lies elsewhere)."""
    return level_props(rng, pom) if rng.random() < 0.5 else level_plugin(rng, pom)


def level_profile(rng: random.Random, pom: Pom) -> tuple[str, Fix]:
    """The level set only inside a profile (active by default, or activated by the JDK)."""
    pid = rng.choice(["java8", "jdk8", "default-jdk", "legacy"])
    if rng.random() < 0.5:
        prof = Profile(pid, ["<activeByDefault>true</activeByDefault>"], [(k, "1.8") for k in SOURCE_TARGET])
        release = rng.random() < 0.5

        def fix(p: Pom) -> None:
            target = next(x for x in p.profiles if x.id == pid)
            if release:
                idx = next(i for i, (k, _) in enumerate(target.properties) if k in SOURCE_TARGET)
                target.properties[:] = [kv for kv in target.properties if kv[0] not in SOURCE_TARGET]
                target.properties.insert(idx, ("maven.compiler.release", "17"))
            else:
                target.properties[:] = [(k, "17" if k in SOURCE_TARGET else v) for k, v in target.properties]

        style = "profile-default"
    else:
        plugin = compiler_plugin(rng, rng.choice(COMPILER_VERSIONS))
        prof = Profile(pid, ["<jdk>[1.8,)</jdk>"], plugins=[plugin])
        plugin_fix = _plugin_to_17(rng, plugin)

        def fix(p: Pom) -> None:
            plugin_fix(next(x for x in p.profiles if x.id == pid).plugins[0])

        style = "profile-jdk"
    pom.profiles.append(prof)
    if rng.random() < 0.5:  # a profile nobody activates here, as real POMs have
        other = Profile(
            rng.choice(["bench", "coverage-off", "quick"]),
            ["<property>", f"  <name>{rng.choice(['bench', 'quick', 'fastBuild'])}</name>", "</property>"],
            [("skipTests", "true")],
        )
        pom.profiles.insert(rng.randint(0, 1), other)
    return style, fix


_OLD_PLUGINS = {
    "maven-clean-plugin": ("2.5", "3.1.0"),
    "maven-resources-plugin": ("2.6", "3.1.0"),
    "maven-jar-plugin": ("2.4", "3.2.0"),
    "maven-install-plugin": ("2.4", "2.5.2"),
    SUREFIRE: (None, "2.22.2"),
}


def level_old_plugins(rng: random.Random, pom: Pom) -> tuple[str, Fix]:
    """Compiler 3.1-3.3 with ``<source>/<target>``, and other 2013-era plugin pins."""
    compiler = compiler_plugin(rng, rng.choice(["3.1", "3.2", "3.3"]))
    chosen = sorted(rng.sample(sorted(_OLD_PLUGINS), rng.randint(2, len(_OLD_PLUGINS))))
    if SUREFIRE not in chosen:
        chosen.append(SUREFIRE)
    plugins = [compiler]
    for name in chosen:
        old = _OLD_PLUGINS[name][0] or rng.choice(["2.12.4", "2.17", "2.18.1"])
        plugins.append(Plugin(name, old))
    pom.plugins[:0] = plugins

    def fix(p: Pom) -> None:
        c = p.plugin(COMPILER)
        c.version = "3.8.1"
        idx = next(i for i, (k, _) in enumerate(c.config) if k in ("source", "target"))
        c.drop("source", "target")
        c.config.insert(idx, ("release", "17"))
        for name in chosen:
            p.plugin(name).version = _OLD_PLUGINS[name][1]

    return "old-plugins", fix


def surefire_argline(rng: random.Random, pom: Pom, surefire: Plugin) -> tuple[str, Fix]:
    """JVM flags Java 17 refuses in surefire's ``argLine`` (plugin configuration or property)."""
    bad = rng.sample(REMOVED_JVM_FLAGS, rng.randint(1, 2))
    if sum("PermSize" in f for f in bad) > 1:
        bad = bad[:1]
    ok = rng.sample(HARMLESS_JVM_FLAGS, rng.randint(0, 2))
    flags = bad + ok
    rng.shuffle(flags)
    kept = [f for f in flags if f in ok]
    if rng.random() < 0.6:
        surefire.set("argLine", " ".join(flags))

        def fix(p: Pom) -> None:
            s = p.plugin(SUREFIRE)
            if kept:
                s.set("argLine", " ".join(kept))
            else:
                s.drop("argLine")

        return "argline-plugin", fix
    pom.set_prop("argLine", " ".join(flags))

    def fix_prop(p: Pom) -> None:
        if kept:
            p.set_prop("argLine", " ".join(kept))
        else:
            p.drop_props("argLine")

    return "argline-property", fix_prop
