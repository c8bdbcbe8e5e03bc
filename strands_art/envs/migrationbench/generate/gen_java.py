"""Java sources for the task generator: test-class rendering (JUnit 4 or 5) and plain components.

A :class:`Component` is one main class and the test methods that exercise it. Test bodies are
written once with assertions JUnit 4 and JUnit 5 spell alike (``assertEquals``, ``assertTrue``,
``assertFalse``, ``assertNull``, the three-argument ``assertEquals`` for doubles);
:func:`render_test_class` adds the flavour's imports and annotations, and exception tests become
``@Test(expected = ...)`` (JUnit 4) or ``assertThrows`` (JUnit 5).

The plain components (:data:`DOMAIN`) are Java 8 code that runs unchanged on 17; their expected
values are computed here in Python with the same arithmetic (IEEE doubles, ASCII strings), drawn
from the task's random generator (:mod:`.gen_domain`). Hazard components live in :mod:`.gen_hazards`.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from string import Template

from strands_art.envs.migrationbench.generate.gen_pom import Dep

JUNIT4, JUNIT5 = "junit4", "junit5"


@dataclass
class TestCase:
    """One test method: ``body`` statements, or ``throws=(exception class, statement)`` after them."""

    name: str
    body: list[str]
    throws: tuple[str, str] | None = None


@dataclass
class Component:
    """A main class (``sources``: file stem -> Java text, package line included) and its tests."""

    class_name: str
    sources: dict[str, str]
    tests: list[TestCase]
    test_imports: list[str] = field(default_factory=list)
    test_extra: list[str] = field(default_factory=list)  # lines of the test class body (helpers)


@dataclass
class Hazard:
    """A component with a removed-API hazard (``component.sources`` are the Java 8 ones); ``after``:
    the migrated sources by file stem (``None``: deleted); ``add_deps``: what the fix adds to the POM."""

    component: Component
    after: dict[str, str | None]
    add_deps: list[Dep] = field(default_factory=list)


#: Short ASCII strings for encoding tests (keys, tokens, user names).
TOKENS = ["alice:secret", "bob@example.org", "key-2019-07", "hello world", "ticket#42", "Zm9v", "tenant/7"]


def jstr(text: str) -> str:
    """A Java string literal for ASCII ``text``."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def jdouble(x: float) -> str:
    """A Java double literal that parses to exactly ``x`` (Python's repr is round-trip exact)."""
    if math.isinf(x):
        return "Double.POSITIVE_INFINITY" if x > 0 else "Double.NEGATIVE_INFINITY"
    text = repr(float(x))
    return text if ("." in text or "e" in text) else text + ".0"


def fill(template: str, **values: str) -> str:
    """``string.Template`` substitution of ``$Name`` placeholders (Java code has no ``$``)."""
    return Template(template).substitute(values)


_ASSERT = re.compile(r"\b(assert(?:Equals|True|False|Null|NotNull|Throws))\(")


def render_test_class(
    package: str,
    class_name: str,
    tests: list[TestCase],
    flavour: str,
    imports: list[str] = (),
    extra: list[str] = (),
) -> str:
    """The text of ``<class_name>.java`` in ``package`` for ``flavour`` (:data:`JUNIT4` or :data:`JUNIT5`)."""
    j5 = flavour == JUNIT5
    used = set()
    for t in tests:
        for line in t.body:
            used.update(_ASSERT.findall(line))
        if t.throws is not None and j5:
            used.add("assertThrows")
    assert_cls = "org.junit.jupiter.api.Assertions" if j5 else "org.junit.Assert"
    statics = [f"import static {assert_cls}.{name};" for name in sorted(used)]
    plain = sorted({*imports, "org.junit.jupiter.api.Test" if j5 else "org.junit.Test"})
    out = [f"package {package};", ""]
    out += statics + ([""] if statics else [])
    out += [f"import {i};" for i in plain]
    out += ["", f"{'' if j5 else 'public '}class {class_name} {{"]
    vis = "" if j5 else "public "
    if extra:
        out += ["", *extra]
    for t in tests:
        out.append("")
        if t.throws is not None and not j5:
            out.append(f"    @Test(expected = {t.throws[0]}.class)")
        else:
            out.append("    @Test")
        out.append(f"    {vis}void {t.name}() {{")
        out += [f"        {line}" for line in t.body]
        if t.throws is not None:
            exc, stmt = t.throws
            out.append(f"        assertThrows({exc}.class, () -> {stmt});" if j5 else f"        {stmt};")
        out.append("    }")
    out.append("}")
    return "\n".join(out) + "\n"


def pick_tests(rng: random.Random, makers: list[Callable[[], TestCase]], lo: int = 2) -> list[TestCase]:
    """Between ``lo`` and all of ``makers``, in their order, each called once."""
    k = rng.randint(min(lo, len(makers)), len(makers))
    chosen = sorted(rng.sample(range(len(makers)), k))
    return [makers[i]() for i in chosen]
