"""List the test methods of a Maven project from its sources, with tree-sitter's Java grammar.

A *test method* is a method annotated ``@Test`` (JUnit 4, JUnit 5, TestNG),
``@ParameterizedTest``, ``@RepeatedTest``, ``@TestFactory`` or ``@TestTemplate`` (the JUnit 5
annotations that make a method a test: :data:`TEST_ANNOTATION_TYPES`), or with an annotation
type of the project's sources meta-annotated with a JUnit 5 one (a *composed* annotation,
transitively). Annotation names are resolved as javac resolves them (JLS §6.4.1, §7.5): the
file's own types, single-type imports, its package, on-demand imports; so ``@Test`` under
``import own.Test`` is not a test, and a name no import resolves is matched by its simple name.
It is *disabled* when it, or a class enclosing it, carries ``@Ignore`` or ``@Disabled`` (or a
composed ``@Disabled``; the unconditional forms: ``@DisabledOnOs`` and friends are conditions,
not disabling).

Every source is read as javac reads it (:func:`parse_java`: Unicode escapes decoded first,
literals and comments made plain by :mod:`.javasource`).

Test sources are every ``src/test/java`` directory in the tree (one per Maven module; ``target/``
and hidden directories skipped). Classes are walked through nested, enum, record and interface
bodies; local and anonymous classes inside method bodies are not (JUnit does not run them).

tree-sitter-java reads Java 21 syntax (records, text blocks, switch expressions, ``instanceof``
patterns, sealed types), which the upstream MigrationBench evaluator's parser cannot.

Over 450 lines as one job (which methods are tests): the annotation resolver and the type walker
share one parsed unit's state.
"""

from __future__ import annotations

import functools
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter_java
from tree_sitter import Language, Node, Parser

from strands_art.envs.migrationbench.tasks.javasource import javac_view
from strands_art.envs.sandbox.files import read_bytes

logger = logging.getLogger(__name__)

#: The annotation types that make a method a test, by fully qualified name -> simple name
#: (JUnit 4, JUnit 5, TestNG).
TEST_ANNOTATION_TYPES = {
    "org.junit.Test": "Test",
    "org.testng.annotations.Test": "Test",
    "org.junit.jupiter.api.Test": "Test",
    "org.junit.jupiter.params.ParameterizedTest": "ParameterizedTest",
    "org.junit.jupiter.api.RepeatedTest": "RepeatedTest",
    "org.junit.jupiter.api.TestFactory": "TestFactory",
    "org.junit.jupiter.api.TestTemplate": "TestTemplate",
}
#: The ones JUnit Jupiter also finds as *meta*-annotations (a composed annotation, JUnit 5 user
#: guide "Meta-Annotations and Composed Annotations"); JUnit 4 and TestNG do not.
JUPITER_TEST_TYPES = {k: v for k, v in TEST_ANNOTATION_TYPES.items() if ".jupiter." in k}
DISABLING_TYPES = {"org.junit.Ignore": "Ignore", "org.junit.jupiter.api.Disabled": "Disabled"}
NESTED_TYPE = "org.junit.jupiter.api.Nested"
_KNOWN_TYPES = frozenset({*TEST_ANNOTATION_TYPES, *DISABLING_TYPES, NESTED_TYPE})
#: Simple names matched when a name resolves to no type at all (no import names it: a file
#: javac would refuse, or an on-demand import of a package outside the sources).
TEST_ANNOTATIONS = frozenset(TEST_ANNOTATION_TYPES.values())
DISABLING_ANNOTATIONS = frozenset(DISABLING_TYPES.values())
_TYPE_DECLS = frozenset(
    {"class_declaration", "enum_declaration", "record_declaration", "interface_declaration"}
)
_SKIP_DIRS = frozenset({"target", "node_modules"})
#: surefire's and failsafe's default ``<includes>`` (on the top-level class's simple name); their
#: default ``<excludes>`` leave nested classes out (``**/*$*``), which JUnit 5 runs as ``@Nested``.
SUREFIRE_INCLUDES = re.compile(r"Test.*|.*Test|.*Tests|.*TestCase")
FAILSAFE_INCLUDES = re.compile(r"IT.*|.*IT|.*ITCase")


@dataclass(frozen=True, order=True)
class TestMethod:
    """One test method. ``class_name`` is dotted and fully qualified (``pkg.Outer.Inner``);
    ``module`` is the module directory relative to the project root (``""`` for the root);
    ``file`` the source path relative to the root."""

    __test__ = False  # not a pytest class

    class_name: str
    method: str
    module: str = field(compare=False)
    file: str = field(compare=False)
    disabled: bool = field(default=False, compare=False)
    annotation: str = field(default="Test", compare=False)
    #: no test engine runs it where it is declared (:func:`_never_runs`): in an ``abstract``
    #: class (surefire runs none; its methods run only through subclasses, under their names),
    #: in an inner (non-static) class without ``@Nested``, or ``private``, ``static`` or not
    #: ``void`` (but ``@TestFactory``) — JUnit 5 skips such methods silently
    never_runs: bool = field(default=False, compare=False)
    #: the simple name of the top-level class it is declared in (what surefire's and failsafe's
    #: default includes match)
    top_class: str = field(default="", compare=False)
    #: declared in a nested class that is not ``@Nested`` at every level (surefire's default
    #: excludes ``**/*$*`` leave it out; JUnit 4's ``Enclosed`` runner runs it)
    plain_nested: bool = field(default=False, compare=False)

    def default_selected(self, failsafe: bool) -> bool:
        """Whether surefire's default selection (and failsafe's, when ``failsafe``) runs it."""
        if self.plain_nested:
            return False
        return bool(SUREFIRE_INCLUDES.fullmatch(self.top_class)) or (
            failsafe and bool(FAILSAFE_INCLUDES.fullmatch(self.top_class))
        )

    @property
    def key(self) -> str:
        """Identity used to compare test sets: ``pkg.Class#method``."""
        return f"{self.class_name}#{self.method}"


@dataclass
class TestInventory:
    """All test methods found, plus the files tree-sitter reported syntax errors in."""

    __test__ = False

    methods: list[TestMethod]
    files: int
    parse_errors: list[str]
    #: every type declared in the test sources (dotted, fully qualified, nested ones too), with
    #: or without test methods: what a surefire report may name
    classes: frozenset[str] = frozenset()

    def keys(self) -> Counter[str]:
        """Multiset of ``pkg.Class#method`` (overloads count separately)."""
        return Counter(m.key for m in self.methods)

    def disabled_keys(self) -> Counter[str]:
        return Counter(m.key for m in self.methods if m.disabled)

    def never_run_keys(self) -> Counter[str]:
        """Test methods no engine runs where they are declared (:attr:`TestMethod.never_runs`)."""
        return Counter(m.key for m in self.methods if m.never_runs)

    def required_keys(self, default_selection: bool, failsafe: bool, ran_classes: set[str]) -> list[str]:
        """The test methods that must each pass in the test build (sorted, each once): every
        method that is not disabled and runs where it is declared, of a class that ran (a report
        names it: ``ran_classes``, dotted) or, when the POMs keep the default selection
        (``default_selection``; ``failsafe``: failsafe is configured), of a class that
        selection runs (:meth:`TestMethod.default_selected`)."""
        return sorted(
            {
                m.key
                for m in self.methods
                if not m.disabled
                and not m.never_runs
                and (m.class_name in ran_classes or (default_selection and m.default_selected(failsafe)))
            }
        )

    @property
    def modules(self) -> list[str]:
        return sorted({m.module for m in self.methods})


@functools.lru_cache(maxsize=1)
def _parser() -> Parser:
    return Parser(Language(tree_sitter_java.language()))


def parse_java(source: bytes | str) -> Node:
    """The tree-sitter tree (root node) of a compilation unit as javac reads it
    (:func:`.javasource.javac_view`: Unicode escapes decoded, literals and comments made plain)."""
    return _parser().parse(javac_view(source).encode("utf-8")).root_node


_CLASS_PRODUCING = _TYPE_DECLS | {"annotation_type_declaration", "module_declaration"}


def declares_type(source: bytes) -> bool:
    """Whether a Java compilation unit declares a class, interface, enum, record, annotation type
    or module, i.e. whether javac writes a class file for it.

    A ``package-info.java`` (package declaration, annotations, Javadoc) or a file holding only
    comments declares none: javac writes no class file for it (for ``package-info`` only when
    the package carries annotations, JLS §7.4.1), so it is not expected to produce one.
    """
    return bool(top_level_class_files(source))


def top_level_class_files(source: bytes | str) -> list[str]:
    """The class files javac writes for the top-level declarations of a compilation unit, as
    paths relative to the output directory: ``pkg/dir/Type.class`` per top-level class,
    interface, enum, record or annotation type, ``module-info.class`` for a module declaration
    (nested types' ``Outer$Inner.class`` are not listed). Read as javac reads it (:func:`parse_java`);
    declarations tree-sitter recovers from an ``ERROR`` node count too."""
    root = parse_java(source)
    package, names, stack = "", [], list(reversed(root.children))
    while stack:
        node = stack.pop()
        if node.type == "package_declaration":
            package = _package_name(node)
        elif node.type == "module_declaration":
            names.append("module-info")
        elif node.type in _CLASS_PRODUCING:
            name = node.child_by_field_name("name")
            if name is not None:
                names.append(name.text.decode("utf-8"))
        elif node.type == "ERROR":
            stack.extend(reversed(node.children))
    prefix = package.replace(".", "/") + "/" if package else ""
    return ["module-info.class" if n == "module-info" else f"{prefix}{n}.class" for n in names]


def _package_name(node: Node) -> str:
    for child in node.children:
        if child.type in ("scoped_identifier", "identifier"):
            return child.text.decode("utf-8")
    return ""


def _annotation_names(modifiers: Node | None) -> list[str]:
    """Names of the annotations in a ``modifiers`` node as written (``@a.b.Test(x)`` -> ``a.b.Test``)."""
    if modifiers is None:
        return []
    names = []
    for child in modifiers.children:
        if child.type in ("marker_annotation", "annotation"):
            name = child.child_by_field_name("name")
            if name is not None:
                names.append("".join(name.text.decode("utf-8").split()))
    return names


def _modifiers(node: Node) -> Node | None:
    for child in node.children:
        if child.type == "modifiers":
            return child
    return None


@dataclass
class _Unit:
    """One parsed compilation unit and the names it can see (JLS §6.4.1, §7.5)."""

    root: Node
    package: str = ""
    single: dict[str, str] = field(default_factory=dict)  # single-type imports: simple -> fqn
    on_demand: list[str] = field(default_factory=list)  # ``import pkg.*;`` packages (and types)
    local: dict[str, str] = field(default_factory=dict)  # types declared in the file: simple -> fqn
    annotations: dict[str, Node | None] = field(default_factory=dict)  # fqn -> modifiers


def _unit(source: bytes | str) -> _Unit:
    root = parse_java(source)
    unit = _Unit(root)
    for node in root.children:
        if node.type == "package_declaration":
            unit.package = _package_name(node)
        elif node.type == "import_declaration":
            words = [c.type for c in node.children]
            if "static" in words:
                continue
            name = next((c for c in node.children if c.type in ("scoped_identifier", "identifier")), None)
            if name is None:
                continue
            text = "".join(name.text.decode("utf-8").split())
            if "asterisk" in words:
                unit.on_demand.append(text)
            else:
                unit.single.setdefault(text.rsplit(".", 1)[-1], text)
    stack = [(node, unit.package) for node in root.children if node.type in _CLASS_PRODUCING]
    while stack:
        node, outer = stack.pop()
        name = node.child_by_field_name("name")
        if name is None:
            continue
        simple = name.text.decode("utf-8")
        fqn = f"{outer}.{simple}" if outer else simple
        unit.local.setdefault(simple, fqn)
        if node.type == "annotation_type_declaration":
            unit.annotations[fqn] = _modifiers(node)
        body = node.child_by_field_name("body")
        for member in body.children if body is not None else ():
            subs = member.children if member.type == "enum_body_declarations" else [member]
            stack.extend((sub, fqn) for sub in subs if sub.type in _CLASS_PRODUCING)
    return unit


class _Resolver:
    """Resolves annotation names of the units of one project to types, and finds composed
    annotations (annotation types of the sources meta-annotated with a test annotation)."""

    def __init__(self, units: list[_Unit]) -> None:
        self.annotations: dict[str, tuple[_Unit, Node | None]] = {}
        self.declared: set[str] = set()
        for unit in units:
            self.declared.update(unit.local.values())
            for fqn, mods in unit.annotations.items():
                self.annotations.setdefault(fqn, (unit, mods))
        self._kinds: dict[tuple[str, bool], str | None] = {}

    def _exists(self, fqn: str) -> bool:
        return fqn in _KNOWN_TYPES or fqn in self.declared

    def resolve(self, name: str, unit: _Unit) -> str | None:
        """The fully qualified type ``name`` means in ``unit``, or None when no import, nor the
        file, nor its package, nor ``java.lang`` names it."""
        first, _, rest = name.partition(".")
        if rest:  # qualified: a package name, or a type of this file / an import, then members
            head = self.resolve(first, unit) if first[:1].isupper() else None
            return f"{head}.{rest}" if head else name
        if first in unit.local:
            return unit.local[first]
        if first in unit.single:
            return unit.single[first]
        if unit.package and f"{unit.package}.{first}" in self.declared:
            return f"{unit.package}.{first}"
        if not unit.package and first in self.declared:
            return first
        for pkg in unit.on_demand:
            if self._exists(f"{pkg}.{first}"):
                return f"{pkg}.{first}"
        return None

    def _meta(self, fqn: str, targets: dict[str, str], seen: set[str]) -> str | None:
        """``targets[t]`` for the first ``t`` that ``fqn`` is or is meta-annotated with."""
        if fqn in targets:
            return targets[fqn]
        if fqn in seen or fqn not in self.annotations:
            return None
        seen.add(fqn)
        unit, mods = self.annotations[fqn]
        for name in _annotation_names(mods):
            resolved = self.resolve(name, unit)
            hit = self._meta(resolved, targets, seen) if resolved else None
            if hit:
                return hit
        return None

    def kind(self, name: str, unit: _Unit, disabling: bool = False) -> str | None:
        """For a test annotation (``disabling``: a disabling one) as written in ``unit``, its
        type's simple name (``Test``, ``ParameterizedTest``...; ``Ignore``/``Disabled``); None
        when ``name`` is not one. A name no import resolves is matched by its simple name."""
        resolved = self.resolve(name, unit)
        if resolved is None:
            simple = name.rsplit(".", 1)[-1]
            return simple if simple in (DISABLING_ANNOTATIONS if disabling else TEST_ANNOTATIONS) else None
        memo = (resolved, disabling)
        if memo not in self._kinds:
            direct = DISABLING_TYPES if disabling else TEST_ANNOTATION_TYPES
            jupiter = {"org.junit.jupiter.api.Disabled": "Disabled"} if disabling else JUPITER_TEST_TYPES
            self._kinds[memo] = direct.get(resolved) or self._meta(resolved, jupiter, set())
        return self._kinds[memo]

    def is_nested(self, name: str, unit: _Unit) -> bool:
        resolved = self.resolve(name, unit)
        return resolved == NESTED_TYPE or (resolved is None and name.rsplit(".", 1)[-1] == "Nested")


@dataclass
class _Walk:
    """What one unit's walk needs and fills."""

    unit: _Unit
    resolver: _Resolver
    module: str
    rel: str
    out: list[TestMethod]
    types: list[str] | None

    def disabling(self, modifiers: Node | None) -> bool:
        return any(self.resolver.kind(n, self.unit, disabling=True) for n in _annotation_names(modifiers))

    def nested(self, modifiers: Node | None) -> bool:
        return any(self.resolver.is_nested(n, self.unit) for n in _annotation_names(modifiers))


def _walk_type(
    walk: _Walk, node: Node, outer: str, disabled: bool, outer_is_type: bool, top: tuple[str, bool]
) -> None:
    name_node = node.child_by_field_name("name")
    if name_node is None:
        return
    simple = name_node.text.decode("utf-8")
    qual = f"{outer}.{simple}" if outer else simple
    if walk.types is not None:
        walk.types.append(qual)
    modifiers = _modifiers(node)
    disabled = disabled or walk.disabling(modifiers)
    words = {c.type for c in modifiers.children} if modifiers is not None else set()
    nested = walk.nested(modifiers)
    # an abstract class, or an inner (non-static, nested) class that is not @Nested: not run
    never = "abstract" in words or (
        outer_is_type and node.type == "class_declaration" and "static" not in words and not nested
    )
    top = (top[0], top[1] or not nested) if outer_is_type else (simple, False)
    body = node.child_by_field_name("body")
    if body is None:
        return
    for member in body.children:
        subs = member.children if member.type == "enum_body_declarations" else [member]
        for sub in subs:  # enum constants first, then members
            _member(walk, sub, qual, disabled, never, top)


def _member(walk: _Walk, member: Node, qual: str, disabled: bool, never: bool, top: tuple[str, bool]) -> None:
    """``top``: the top-level class's simple name, and whether a class on the way is not ``@Nested``."""
    if member.type in _TYPE_DECLS:
        _walk_type(walk, member, qual, disabled, True, top)
    elif member.type == "method_declaration":
        modifiers = _modifiers(member)
        names = _annotation_names(modifiers)
        test_ann = next((k for n in names if (k := walk.resolver.kind(n, walk.unit))), None)
        method_name = member.child_by_field_name("name")
        if test_ann is not None and method_name is not None:
            walk.out.append(
                TestMethod(
                    class_name=qual,
                    method=method_name.text.decode("utf-8"),
                    module=walk.module,
                    file=walk.rel,
                    disabled=disabled or walk.disabling(modifiers),
                    annotation=test_ann,
                    never_runs=never or _never_runs(member, test_ann),
                    top_class=top[0],
                    plain_nested=top[1],
                )
            )


def _never_runs(method: Node, annotation: str) -> bool:
    """A ``private`` or ``static`` test method, or one not ``void`` (a ``@TestFactory`` returns
    its tests): JUnit 5 does not run it (JUnit 4 fails it, which the build shows anyway)."""
    modifiers = _modifiers(method)
    words = {c.type for c in modifiers.children} if modifiers is not None else set()
    result = method.child_by_field_name("type")
    not_void = result is not None and result.type != "void_type"
    return bool(words & {"private", "static"}) or (not_void and annotation != "TestFactory")


def _methods_of(
    unit: _Unit, resolver: _Resolver, module: str, rel: str, types: list[str] | None
) -> list[TestMethod]:
    out: list[TestMethod] = []
    walk = _Walk(unit, resolver, module, rel, out, types)
    for node in unit.root.children:
        if node.type in _TYPE_DECLS:
            _walk_type(walk, node, unit.package, False, False, ("", False))
    return out


def parse_test_methods(
    source: bytes | str, *, module: str = "", file: str = "", types: list[str] | None = None
) -> tuple[list[TestMethod], bool]:
    """Test methods in one Java compilation unit; returns ``(methods, had_syntax_error)``.

    The unit is read as javac reads it (:func:`parse_java`); annotations are resolved through
    its imports and package, composed annotations declared in it too (:func:`collect_tests`
    resolves across all of a project's sources). ``types``, when given, receives the dotted
    names of every class, interface, enum and record declared in it (nested ones too)."""
    unit = _unit(source)
    return _methods_of(unit, _Resolver([unit]), module, file, types), unit.root.has_error


MAX_SOURCE_BYTES = 8 << 20


def find_source_dirs(project_dir: Path, kind: str = "test") -> list[Path]:
    """Every ``src/<kind>/java`` directory under ``project_dir`` (skips target/ and hidden dirs)."""
    found = []
    for cand in sorted(project_dir.rglob(f"src/{kind}/java")):
        parts = cand.relative_to(project_dir).parts
        if (
            cand.is_dir()
            and not cand.is_symlink()
            and not any(p in _SKIP_DIRS or p.startswith(".") for p in parts)
        ):
            found.append(cand)
    return found


def find_test_source_dirs(project_dir: Path) -> list[Path]:
    """Every ``src/test/java`` directory under ``project_dir`` (skips target/ and hidden dirs)."""
    return find_source_dirs(project_dir, "test")


def source_files(root: Path, kind: str) -> list[str]:
    """``*.java`` paths (relative to ``root``, sorted) under every ``src/<kind>/java`` of ``root``."""
    return sorted(
        path.relative_to(root).as_posix()
        for src_dir in find_source_dirs(root, kind)
        for path in src_dir.rglob("*.java")
    )


def collect_tests(project_dir: Path | str) -> TestInventory:
    """Parse every ``*.java`` under every module's ``src/test/java``.

    Annotations are resolved across the project: through each file's imports and package to
    the types declared in any test or main source (``src/main/java``), so a composed annotation
    meta-annotated with a JUnit Jupiter test annotation makes a test, and an annotation the
    project declares under a test annotation's simple name does not.

    Raises FileNotFoundError if ``project_dir`` does not exist. Files with syntax errors are
    still scanned (tree-sitter recovers) and listed in ``parse_errors``.
    """
    root = Path(project_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"not a directory: {root}")
    errors: list[str] = []
    units: list[tuple[_Unit, str, str]] = []  # (unit, module, rel); module None: a main source
    others: list[_Unit] = []
    for kind in ("test", "main"):
        for rel in source_files(root, kind):
            try:  # the tree may be agent-written: no symlink is followed, only regular files read
                data = read_bytes(root, rel, max_bytes=MAX_SOURCE_BYTES)
            except OSError as exc:
                if kind == "test":
                    errors.append(rel)
                    logger.warning("unreadable test source %s: %s", rel, exc)
                continue
            unit = _unit(data)
            if kind == "main":
                others.append(unit)
                continue
            module_path = rel.split("/src/test/java/", 1)[0] if "/src/test/java/" in rel else "."
            units.append((unit, "" if module_path == "." else module_path, rel))
            if unit.root.has_error:
                errors.append(rel)
                logger.warning("syntax errors in %s (tree-sitter recovered what it could)", rel)
    resolver = _Resolver([u for u, _, _ in units] + others)
    methods: list[TestMethod] = []
    types: list[str] = []
    for unit, module, rel in units:
        methods.extend(_methods_of(unit, resolver, module, rel, types))
    return TestInventory(
        methods=sorted(methods), files=len(units), parse_errors=errors, classes=frozenset(types)
    )
