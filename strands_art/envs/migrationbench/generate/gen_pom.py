"""A small POM model for the task generator: enough of ``pom.xml`` to write Java 8 projects.

:class:`Pom` holds the parts a generated project varies (parent, modules, properties,
dependencies, plugins, plugin management, profiles) and :meth:`Pom.render` writes them in the
usual element order with two-space indentation, so two equal models give byte-identical files.
A generator builds the Java 8 model, deep-copies it and edits the copy into the migrated one;
the reference patch is the ``git diff`` of the two renderings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.sax.saxutils import escape

HEADER = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
"""

PLUGINS_GROUP = "org.apache.maven.plugins"


@dataclass
class Dep:
    """A ``<dependency>``; ``version`` None leaves it to dependency management."""

    group_id: str
    artifact_id: str
    version: str | None = None
    scope: str | None = None
    comment: str | None = None

    def render(self, ind: str) -> list[str]:
        out = [f"{ind}<!-- {self.comment} -->"] if self.comment else []
        out.append(f"{ind}<dependency>")
        out += [
            f"{ind}  <groupId>{self.group_id}</groupId>",
            f"{ind}  <artifactId>{self.artifact_id}</artifactId>",
        ]
        if self.version is not None:
            out.append(f"{ind}  <version>{self.version}</version>")
        if self.scope is not None:
            out.append(f"{ind}  <scope>{self.scope}</scope>")
        return [*out, f"{ind}</dependency>"]


@dataclass
class Plugin:
    """A ``<plugin>``: ``config`` is ordered ``(element, value)`` pairs of its ``<configuration>``.

    A value that is a list renders as nested ``<arg>`` children (``compilerArgs``)."""

    artifact_id: str
    version: str | None = None
    config: list[tuple[str, str | list[str]]] = field(default_factory=list)
    group_id: str = PLUGINS_GROUP

    def get(self, key: str) -> str | list[str] | None:
        return next((v for k, v in self.config if k == key), None)

    def set(self, key: str, value: str | list[str]) -> None:
        """Replace ``key``'s value in place, or append it."""
        for i, (k, _) in enumerate(self.config):
            if k == key:
                self.config[i] = (key, value)
                return
        self.config.append((key, value))

    def drop(self, *keys: str) -> None:
        self.config = [(k, v) for k, v in self.config if k not in keys]

    def render(self, ind: str) -> list[str]:
        out = [f"{ind}<plugin>"]
        out += [
            f"{ind}  <groupId>{self.group_id}</groupId>",
            f"{ind}  <artifactId>{self.artifact_id}</artifactId>",
        ]
        if self.version is not None:
            out.append(f"{ind}  <version>{self.version}</version>")
        if self.config:
            out.append(f"{ind}  <configuration>")
            for key, value in self.config:
                if isinstance(value, list):
                    out.append(f"{ind}    <{key}>")
                    out += [f"{ind}      <arg>{escape(v)}</arg>" for v in value]
                    out.append(f"{ind}    </{key}>")
                else:
                    out.append(f"{ind}    <{key}>{escape(value)}</{key}>")
            out.append(f"{ind}  </configuration>")
        return [*out, f"{ind}</plugin>"]


@dataclass
class Profile:
    """A ``<profile>``: ``activation`` is raw XML lines inside ``<activation>`` (relative indent)."""

    id: str
    activation: list[str] = field(default_factory=list)
    properties: list[tuple[str, str]] = field(default_factory=list)
    plugins: list[Plugin] = field(default_factory=list)

    def render(self, ind: str) -> list[str]:
        out = [f"{ind}<profile>", f"{ind}  <id>{self.id}</id>"]
        if self.activation:
            out += [
                f"{ind}  <activation>",
                *(f"{ind}    {line}" for line in self.activation),
                f"{ind}  </activation>",
            ]
        out += _properties(self.properties, ind + "  ")
        if self.plugins:
            out += [f"{ind}  <build>", f"{ind}    <plugins>"]
            for p in self.plugins:
                out += p.render(ind + "      ")
            out += [f"{ind}    </plugins>", f"{ind}  </build>"]
        return [*out, f"{ind}</profile>"]


@dataclass
class Pom:
    """One ``pom.xml``. ``parent`` is ``(groupId, artifactId, version, relativePath or None)``."""

    group_id: str | None
    artifact_id: str
    version: str | None
    packaging: str = "jar"
    name: str | None = None
    parent: tuple[str, str, str, str | None] | None = None
    modules: list[str] = field(default_factory=list)
    properties: list[tuple[str, str]] = field(default_factory=list)
    dependency_management: list[Dep] = field(default_factory=list)
    dependencies: list[Dep] = field(default_factory=list)
    plugin_management: list[Plugin] = field(default_factory=list)
    plugins: list[Plugin] = field(default_factory=list)
    profiles: list[Profile] = field(default_factory=list)

    # ------------------------------------------------------------------ edits
    def prop(self, key: str) -> str | None:
        return next((v for k, v in self.properties if k == key), None)

    def set_prop(self, key: str, value: str) -> None:
        """Replace ``key`` in place, or append it."""
        _set(self.properties, key, value)

    def drop_props(self, *keys: str) -> None:
        self.properties[:] = [(k, v) for k, v in self.properties if k not in keys]

    def plugin(self, artifact_id: str, *, managed: bool = False) -> Plugin | None:
        plugins = self.plugin_management if managed else self.plugins
        return next((p for p in plugins if p.artifact_id == artifact_id), None)

    # ------------------------------------------------------------------ text
    def render(self) -> str:
        out = [HEADER.rstrip("\n")]
        if self.parent is not None:
            g, a, v, rel = self.parent
            out += ["", "  <parent>", f"    <groupId>{g}</groupId>", f"    <artifactId>{a}</artifactId>"]
            out.append(f"    <version>{v}</version>")
            if rel is not None:
                out.append(f"    <relativePath>{rel}</relativePath>")
            out.append("  </parent>")
        out.append("")
        if self.group_id is not None:
            out.append(f"  <groupId>{self.group_id}</groupId>")
        out.append(f"  <artifactId>{self.artifact_id}</artifactId>")
        if self.version is not None:
            out.append(f"  <version>{self.version}</version>")
        out.append(f"  <packaging>{self.packaging}</packaging>")
        if self.name:
            out.append(f"  <name>{escape(self.name)}</name>")
        if self.modules:
            out += ["", "  <modules>", *(f"    <module>{m}</module>" for m in self.modules), "  </modules>"]
        if self.properties:
            out += ["", *_properties(self.properties, "  ")]
        if self.dependency_management:
            out += ["", "  <dependencyManagement>", "    <dependencies>"]
            for d in self.dependency_management:
                out += d.render("      ")
            out += ["    </dependencies>", "  </dependencyManagement>"]
        if self.dependencies:
            out += ["", "  <dependencies>"]
            for d in self.dependencies:
                out += d.render("    ")
            out.append("  </dependencies>")
        if self.plugins or self.plugin_management:
            out += ["", "  <build>"]
            if self.plugin_management:
                out += ["    <pluginManagement>", "      <plugins>"]
                for p in self.plugin_management:
                    out += p.render("        ")
                out += ["      </plugins>", "    </pluginManagement>"]
            if self.plugins:
                out.append("    <plugins>")
                for p in self.plugins:
                    out += p.render("      ")
                out.append("    </plugins>")
            out.append("  </build>")
        if self.profiles:
            out += ["", "  <profiles>"]
            for prof in self.profiles:
                out += prof.render("    ")
            out.append("  </profiles>")
        out.append("</project>")
        return "\n".join(out) + "\n"


def _properties(props: list[tuple[str, str]], ind: str) -> list[str]:
    if not props:
        return []
    return [
        f"{ind}<properties>",
        *(f"{ind}  <{k}>{escape(v)}</{k}>" for k, v in props),
        f"{ind}</properties>",
    ]


def _set(pairs: list[tuple[str, str]], key: str, value: str) -> None:
    for i, (k, _) in enumerate(pairs):
        if k == key:
            pairs[i] = (key, value)
            return
    pairs.append((key, value))
