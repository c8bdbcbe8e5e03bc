"""List the test methods of a Maven project from its sources, with tree-sitter's Java grammar.

A *test method* is a method annotated ``@Test`` (JUnit 4, JUnit 5, TestNG — matched by simple
name, so ``@org.junit.Test`` counts too), ``@ParameterizedTest``, ``@RepeatedTest``,
``@TestFactory`` or ``@TestTemplate`` (the JUnit 5 annotations that make a method a test). It is
*disabled* when it, or a class enclosing it, carries ``@Ignore`` or ``@Disabled`` (the
unconditional forms; ``@DisabledOnOs`` and friends are conditions, not disabling).

Test sources are every ``src/test/java`` directory in the tree (one per Maven module; ``target/``
and hidden directories skipped). Classes are walked through nested, enum, record and interface
bodies; local and anonymous classes inside method bodies are not (JUnit does not run them).

tree-sitter-java reads Java 21 syntax (records, text blocks, switch expressions, ``instanceof``
patterns, sealed types), which the upstream MigrationBench evaluator's parser cannot.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter_java
from tree_sitter import Language, Node, Parser

from strands_art.envs.sandbox.files import read_bytes

logger = logging.getLogger(__name__)

TEST_ANNOTATIONS = frozenset({"Test", "ParameterizedTest", "RepeatedTest", "TestFactory", "TestTemplate"})
DISABLING_ANNOTATIONS = frozenset({"Ignore", "Disabled"})
_TYPE_DECLS = frozenset(
    {"class_declaration", "enum_declaration", "record_declaration", "interface_declaration"}
)
_SKIP_DIRS = frozenset({"target", "node_modules"})


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

    @property
    def modules(self) -> list[str]:
        return sorted({m.module for m in self.methods})


@functools.lru_cache(maxsize=1)
def _parser() -> Parser:
    return Parser(Language(tree_sitter_java.language()))


_CLASS_PRODUCING = _TYPE_DECLS | {"annotation_type_declaration", "module_declaration"}


def declares_type(source: bytes) -> bool:
    """Whether a Java compilation unit declares a class, interface, enum, record, annotation type
    or module, i.e. whether javac writes a class file for it.

    A ``package-info.java`` (package declaration, annotations, Javadoc) or a file holding only
    comments declares none: javac writes no class file for it (for ``package-info`` only when
    the package carries annotations, JLS §7.4.1), so it is not expected to produce one.
    """
    stack = [_parser().parse(source).root_node]
    while stack:
        node = stack.pop()
        if node.type in _CLASS_PRODUCING:
            return True
        if node.type in ("program", "ERROR"):
            stack.extend(node.children)
    return False


def _annotation_names(modifiers: Node | None) -> list[str]:
    """Simple names of the annotations in a ``modifiers`` node (``@a.b.Test(x)`` -> ``Test``)."""
    if modifiers is None:
        return []
    names = []
    for child in modifiers.children:
        if child.type in ("marker_annotation", "annotation"):
            name = child.child_by_field_name("name")
            if name is not None:
                names.append(name.text.decode("utf-8").rsplit(".", 1)[-1])
    return names


def _modifiers(node: Node) -> Node | None:
    for child in node.children:
        if child.type == "modifiers":
            return child
    return None


def _walk_type(
    node: Node,
    outer: str,
    disabled: bool,
    module: str,
    rel: str,
    out: list[TestMethod],
    types: list[str] | None = None,
    outer_is_type: bool = False,
) -> None:
    name_node = node.child_by_field_name("name")
    if name_node is None:
        return
    qual = f"{outer}.{name_node.text.decode('utf-8')}" if outer else name_node.text.decode("utf-8")
    if types is not None:
        types.append(qual)
    modifiers = _modifiers(node)
    disabled = disabled or bool(DISABLING_ANNOTATIONS.intersection(_annotation_names(modifiers)))
    words = {c.type for c in modifiers.children} if modifiers is not None else set()
    # an abstract class, or an inner (non-static, nested) class that is not @Nested: not run
    never = "abstract" in words or (
        bool(outer_is_type)
        and node.type == "class_declaration"
        and "static" not in words
        and "Nested" not in _annotation_names(modifiers)
    )
    body = node.child_by_field_name("body")
    if body is None:
        return
    for member in body.children:
        if member.type == "enum_body_declarations":  # enum constants first, then members
            for sub in member.children:
                _member(sub, qual, disabled, module, rel, out, types, never)
        else:
            _member(member, qual, disabled, module, rel, out, types, never)


def _member(
    member: Node,
    qual: str,
    disabled: bool,
    module: str,
    rel: str,
    out: list[TestMethod],
    types: list[str] | None = None,
    never: bool = False,
) -> None:
    if member.type in _TYPE_DECLS:
        _walk_type(member, qual, disabled, module, rel, out, types, outer_is_type=True)
    elif member.type == "method_declaration":
        names = _annotation_names(_modifiers(member))
        test_ann = next((n for n in names if n in TEST_ANNOTATIONS), None)
        method_name = member.child_by_field_name("name")
        if test_ann is not None and method_name is not None:
            out.append(
                TestMethod(
                    class_name=qual,
                    method=method_name.text.decode("utf-8"),
                    module=module,
                    file=rel,
                    disabled=disabled or bool(DISABLING_ANNOTATIONS.intersection(names)),
                    annotation=test_ann,
                    never_runs=never or _never_runs(member, test_ann),
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


def parse_test_methods(
    source: bytes | str, *, module: str = "", file: str = "", types: list[str] | None = None
) -> tuple[list[TestMethod], bool]:
    """Test methods in one Java compilation unit; returns ``(methods, had_syntax_error)``.

    ``types``, when given, receives the dotted names of every class, interface, enum and record
    declared in it (nested ones too)."""
    data = source.encode("utf-8") if isinstance(source, str) else source
    tree = _parser().parse(data)
    root = tree.root_node
    package = ""
    out: list[TestMethod] = []
    for node in root.children:
        if node.type == "package_declaration":
            for child in node.children:
                if child.type in ("scoped_identifier", "identifier"):
                    package = child.text.decode("utf-8")
        elif node.type in _TYPE_DECLS:
            _walk_type(node, package, False, module, file, out, types)
    return out, root.has_error


MAX_SOURCE_BYTES = 8 << 20


def find_test_source_dirs(project_dir: Path) -> list[Path]:
    """Every ``src/test/java`` directory under ``project_dir`` (skips target/ and hidden dirs)."""
    found = []
    for cand in sorted(project_dir.rglob("src/test/java")):
        parts = cand.relative_to(project_dir).parts
        if cand.is_dir() and not any(p in _SKIP_DIRS or p.startswith(".") for p in parts):
            found.append(cand)
    return found


def collect_tests(project_dir: Path | str) -> TestInventory:
    """Parse every ``*.java`` under every module's ``src/test/java``.

    Raises FileNotFoundError if ``project_dir`` does not exist. Files with syntax errors are
    still scanned (tree-sitter recovers) and listed in ``parse_errors``.
    """
    root = Path(project_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"not a directory: {root}")
    methods: list[TestMethod] = []
    errors: list[str] = []
    types: list[str] = []
    files = 0
    for src_dir in find_test_source_dirs(root):
        module_path = src_dir.parent.parent.parent.relative_to(root).as_posix()
        module = "" if module_path == "." else module_path
        for path in sorted(src_dir.rglob("*.java")):
            rel = path.relative_to(root).as_posix()
            try:  # the tree may be agent-written: no symlink is followed, only regular files read
                data = read_bytes(root, rel, max_bytes=MAX_SOURCE_BYTES)
            except OSError as exc:
                errors.append(rel)
                logger.warning("unreadable test source %s: %s", rel, exc)
                continue
            found, had_error = parse_test_methods(data, module=module, file=rel, types=types)
            files += 1
            methods.extend(found)
            if had_error:
                errors.append(rel)
                logger.warning("syntax errors in %s (tree-sitter recovered what it could)", rel)
    return TestInventory(methods=sorted(methods), files=files, parse_errors=errors, classes=frozenset(types))
