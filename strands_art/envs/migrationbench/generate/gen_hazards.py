"""Removed-API hazards for the task generator: Java 8 code that breaks on 17, and its fix.

Each maker returns a :class:`Hazard`: a component (main classes + tests, see
:mod:`.gen_java`) whose code uses an API that Java 17 no longer has, the migrated sources that
replace it (``None`` deletes a file), and the dependencies the fix adds to the POM. The tests are
the same before and after (test equivalence), and they fail or do not compile on JDK 17 until the
hazard is fixed:

* ``javax-annotation``: ``@PostConstruct`` / ``@PreDestroy`` / ``@Generated`` (JSR 250 left the
  JDK in 11, JEP 320); fix: the ``javax.annotation-api`` dependency.
* ``jaxb``: ``javax.xml.bind.DatatypeConverter`` (JAXB left in 11); fix: the ``jaxb-api`` dependency.
* ``nashorn``: a ``javax.script`` JavaScript engine (Nashorn left in 15): compiles, no engine at
  run time; fix: a small expression parser in place of the engine.
* ``reflective-access``: ``setAccessible`` on private fields of ``java.lang.String`` or
  ``java.util.ArrayList`` (denied by strong encapsulation since 16/17); fix: the public API.
* ``base64``: ``sun.misc.BASE64Encoder/Decoder`` (removed in 9); fix: ``java.util.Base64``.

The first two and the last are here; ``nashorn`` and ``reflective-access`` (they fail only when
the tests run) are in :mod:`.gen_hazards_runtime`. :data:`HAZARDS` maps the kind names to all five.
"""

from __future__ import annotations

import base64
import hashlib
import random
from collections.abc import Callable

from strands_art.envs.migrationbench.generate.gen_hazards_runtime import nashorn, reflective_access
from strands_art.envs.migrationbench.generate.gen_java import (
    TOKENS,
    Component,
    Hazard,
    TestCase,
    fill,
    jstr,
    pick_tests,
)
from strands_art.envs.migrationbench.generate.gen_pom import Dep

# --------------------------------------------------------------------------- javax.annotation

_CONTAINER = """package $pkg;

import java.lang.annotation.Annotation;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import javax.annotation.PostConstruct;
import javax.annotation.PreDestroy;

/** A tiny container: {@code @PostConstruct} on start, {@code @PreDestroy} on stop in reverse order. */
public class $cls {

    private final List<Object> started = new ArrayList<>();

    public void start(Object... beans) {
        for (Object bean : beans) {
            invoke(bean, PostConstruct.class);
            started.add(bean);
        }
    }

    public void stop() {
        for (int i = started.size() - 1; i >= 0; i--) {
            invoke(started.get(i), PreDestroy.class);
        }
        started.clear();
    }

    public int size() {
        return started.size();
    }

    private static void invoke(Object bean, Class<? extends Annotation> marker) {
        for (Method m : bean.getClass().getDeclaredMethods()) {
            if (m.isAnnotationPresent(marker)) {
                try {
                    m.setAccessible(true);
                    m.invoke(bean);
                } catch (IllegalAccessException e) {
                    throw new IllegalStateException(e);
                } catch (InvocationTargetException e) {
                    throw new IllegalStateException(m.getName() + " failed", e.getCause());
                }
            }
        }
    }
}
"""

_POOL = """package $pkg;

import javax.annotation.PostConstruct;
import javax.annotation.PreDestroy;

/** A pool of $noun handles, filled when its container starts and drained when it stops. */
public class $cls {

    private final int capacity;
    private final StringBuilder log;
    private int idle;

    public $cls(int capacity, StringBuilder log) {
        this.capacity = capacity;
        this.log = log;
    }

    @PostConstruct
    void open() {
        idle = capacity;
        log.append("$tag+");
    }

    @PreDestroy
    void close() {
        idle = 0;
        log.append("$tag-");
    }

    public int idle() {
        return idle;
    }
}
"""

_INFO = """package $pkg;

import javax.annotation.Generated;

/** Build coordinates, written by the release tooling. */
@Generated("$tool")
public final class $cls {

    public static final String NAME = "$name";
    public static final String VERSION = "$version";

    private $cls() {
    }

    public static String banner() {
        return NAME + " " + VERSION;
    }
}
"""

_JAVAX_ANNOTATION = [
    Dep(
        "javax.annotation",
        "javax.annotation-api",
        v,
        comment="javax.annotation (JSR 250) left the JDK in Java 11 (JEP 320).",
    )
    for v in ("1.3.2", "1.3.1", "1.3")
]


def javax_annotation(rng: random.Random, pkg: str, artifact: str) -> Hazard:
    cls = rng.choice(["Container", "Lifecycle", "BeanHost", "MiniContainer"])
    pool = rng.choice(["ConnectionPool", "WorkerPool", "SessionPool", "ChannelPool"])
    info = rng.choice(["BuildInfo", "Version", "ReleaseInfo"])
    noun = pool[: -len("Pool")].lower()
    tag_a, tag_b = rng.sample(["db", "cache", "queue", "mail", "files", "auth"], 2)
    n = rng.randint(1, 9)
    version = f"{rng.randint(1, 4)}.{rng.randint(0, 12)}.{rng.randint(0, 9)}"
    sources = {
        cls: fill(_CONTAINER, pkg=pkg, cls=cls),
        pool: fill(_POOL, pkg=pkg, cls=pool, noun=noun, tag=tag_a),
        info: fill(
            _INFO,
            pkg=pkg,
            cls=info,
            tool=rng.choice(["release-tool", "buildinfo-maven", "gen"]),
            name=artifact,
            version=version,
        ),
    }
    # a bean whose @PostConstruct throws, declared in the test class (javax.annotation there too)
    broken = [
        "    static class Broken {",
        "        @PostConstruct",
        "        void fail() {",
        f'            throw new IllegalArgumentException("{rng.choice(["boom", "no config", "refused"])}");',
        "        }",
        "    }",
    ]

    def opens() -> TestCase:
        return TestCase(
            "startOpensPool",
            [
                "StringBuilder log = new StringBuilder();",
                f"{pool} p = new {pool}({n}, log);",
                f"new {cls}().start(p);",
                f"assertEquals({n}, p.idle());",
                f'assertEquals("{tag_a}+", log.toString());',
            ],
        )

    def reverse() -> TestCase:
        return TestCase(
            "stopsInReverseOrder",
            [
                "StringBuilder log = new StringBuilder();",
                f"{cls} c = new {cls}();",
                f"{pool} first = new {pool}(1, log);",
                f"{pool} second = new {pool}(2, log);",
                "c.start(first, second);",
                "assertEquals(2, c.size());",
                "c.stop();",
                f'assertEquals("{tag_a}+{tag_a}+{tag_a}-{tag_a}-", log.toString());',
                "assertEquals(0, c.size());",
            ],
        )

    def fails() -> TestCase:
        return TestCase(
            "failingPostConstructIsReported",
            [],
            ("IllegalStateException", f"new {cls}().start(new Broken())"),
        )

    def banner() -> TestCase:
        return TestCase("bannerNamesTheBuild", [f'assertEquals("{artifact} {version}", {info}.banner());'])

    tests = pick_tests(rng, [opens, reverse, fails, banner])
    comp = Component(cls, sources, tests, test_imports=["javax.annotation.PostConstruct"])
    comp.test_extra = broken if any(t.name == "failingPostConstructIsReported" for t in tests) else []
    if not comp.test_extra:
        comp.test_imports = []
    return Hazard(comp, {}, [rng.choice(_JAVAX_ANNOTATION)])


# --------------------------------------------------------------------------- JAXB

_JAXB_METHODS = {
    "fingerprint": """    /** SHA-256 of the UTF-8 text, as upper-case hex. */
    public static String fingerprint(String text) {
        try {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            return DatatypeConverter.printHexBinary(md.digest(text.getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is always available", e);
        }
    }
""",
    "toHex": """    public static String toHex(String text) {
        return DatatypeConverter.printHexBinary(text.getBytes(StandardCharsets.UTF_8));
    }
""",
    "fromHex": """    public static String fromHex(String hex) {
        return new String(DatatypeConverter.parseHexBinary(hex), StandardCharsets.UTF_8);
    }
""",
    "encode": """    public static String encode(String text) {
        return DatatypeConverter.printBase64Binary(text.getBytes(StandardCharsets.UTF_8));
    }
""",
    "decode": """    public static String decode(String base64) {
        return new String(DatatypeConverter.parseBase64Binary(base64), StandardCharsets.UTF_8);
    }
""",
}

_JAXB_API = [
    Dep(
        "javax.xml.bind",
        "jaxb-api",
        v,
        comment="javax.xml.bind left the JDK in Java 11 (JEP 320); DatatypeConverter is in the API jar.",
    )
    for v in ("2.3.1", "2.3.0", "2.2.11")
]


def jaxb(rng: random.Random, pkg: str, artifact: str) -> Hazard:
    cls = rng.choice(["Fingerprints", "TokenCodec", "HexCodec", "Encodings", "KeyPrinter"])
    methods = sorted(rng.sample(sorted(_JAXB_METHODS), rng.randint(2, 4)))
    imports = ["java.nio.charset.StandardCharsets"]
    if "fingerprint" in methods:
        imports += ["java.security.MessageDigest", "java.security.NoSuchAlgorithmException"]
    imports.append("javax.xml.bind.DatatypeConverter")
    body = "\n".join(_JAXB_METHODS[m] for m in methods)
    text = (
        f"package {pkg};\n\n"
        + "".join(f"import {i};\n" for i in sorted(imports))
        + f"\n/** Hex and Base64 forms of keys and tokens. */\npublic final class {cls} {{\n\n"
        + f"    private {cls}() {{\n    }}\n\n{body}}}\n"
    )
    cases: list[TestCase] = []
    for m in methods:
        word = rng.choice(TOKENS)
        raw = word.encode()
        w, hexed, b64 = jstr(word), raw.hex(), base64.b64encode(raw).decode()
        if m == "fingerprint":
            sha = hashlib.sha256(raw).hexdigest().upper()
            cases.append(
                TestCase("fingerprintIsUpperHexSha256", [f'assertEquals("{sha}", {cls}.fingerprint({w}));'])
            )
        elif m == "toHex":
            cases.append(TestCase("printsHex", [f'assertEquals("{hexed.upper()}", {cls}.toHex({w}));']))
        elif m == "fromHex":
            cases.append(TestCase("parsesHex", [f'assertEquals({w}, {cls}.fromHex("{hexed}"));']))
            cases.append(
                TestCase("oddHexIsRejected", [], ("IllegalArgumentException", f'{cls}.fromHex("abc")'))
            )
        elif m == "encode":
            cases.append(TestCase("encodesBase64", [f'assertEquals("{b64}", {cls}.encode({w}));']))
        else:
            cases.append(TestCase("decodesBase64", [f'assertEquals({w}, {cls}.decode("{b64}"));']))
    makers = [lambda t=t: t for t in cases]
    return Hazard(Component(cls, {cls: text}, pick_tests(rng, makers)), {}, [rng.choice(_JAXB_API)])


# --------------------------------------------------------------------------- sun.misc.BASE64

_SUN_BASE64 = """package $pkg;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import sun.misc.BASE64Decoder;
import sun.misc.BASE64Encoder;

/** $doc */
public final class $cls {

    private $cls() {
    }

    public static String encode(String text) {
        return new BASE64Encoder().encode(text.getBytes(StandardCharsets.UTF_8));
    }

    public static String decode(String base64) {
        try {
            return new String(new BASE64Decoder().decodeBuffer(base64), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalArgumentException("bad base64", e);
        }
    }

    public static String basicHeader(String user, String password) {
        if (user.indexOf(':') >= 0) {
            throw new IllegalArgumentException("user must not contain ':'");
        }
        return "Basic " + encode(user + ":" + password);
    }
}
"""

_JAVA_BASE64 = """package $pkg;

import java.nio.charset.StandardCharsets;
import java.util.Base64;

/** $doc */
public final class $cls {

    private $cls() {
    }

    public static String encode(String text) {
        return Base64.getEncoder().encodeToString(text.getBytes(StandardCharsets.UTF_8));
    }

    public static String decode(String base64) {
        try {
            return new String(Base64.getDecoder().decode(base64), StandardCharsets.UTF_8);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("bad base64", e);
        }
    }

    public static String basicHeader(String user, String password) {
        if (user.indexOf(':') >= 0) {
            throw new IllegalArgumentException("user must not contain ':'");
        }
        return "Basic " + encode(user + ":" + password);
    }
}
"""


def sun_base64(rng: random.Random, pkg: str, artifact: str) -> Hazard:
    cls = rng.choice(["BasicAuth", "Base64Text", "Credentials", "HeaderCodec", "AuthHeaders"])
    doc = rng.choice(
        ["Base64 text and HTTP Basic headers (RFC 7617).", "Encodes credentials for the legacy gateway."]
    )
    w1, w2 = rng.sample(TOKENS, 2)
    user, pw = (
        rng.choice(["admin", "svc", "ops", "reader"]),
        rng.choice(["s3cret", "hunter2", "pa55", "open sesame"]),
    )

    def b64(s: str) -> str:
        return base64.b64encode(s.encode()).decode()

    makers = [
        lambda: TestCase("encodesText", [f'assertEquals("{b64(w1)}", {cls}.encode({jstr(w1)}));']),
        lambda: TestCase("decodesText", [f'assertEquals({jstr(w2)}, {cls}.decode("{b64(w2)}"));']),
        lambda: TestCase(
            "roundTrips", [f"assertEquals({jstr(w1 + w2)}, {cls}.decode({cls}.encode({jstr(w1 + w2)})));"]
        ),
        lambda: TestCase(
            "buildsBasicHeader",
            [f'assertEquals("Basic {b64(user + ":" + pw)}", {cls}.basicHeader("{user}", "{pw}"));'],
        ),
        lambda: TestCase(
            "rejectsColonInUser", [], ("IllegalArgumentException", f'{cls}.basicHeader("a:b", "x")')
        ),
    ]
    comp = Component(cls, {cls: fill(_SUN_BASE64, pkg=pkg, cls=cls, doc=doc)}, pick_tests(rng, makers))
    return Hazard(comp, {cls: fill(_JAVA_BASE64, pkg=pkg, cls=cls, doc=doc)})


#: Removed-API hazard makers by kind name.
HAZARDS: dict[str, Callable[[random.Random, str, str], Hazard]] = {
    "javax-annotation": javax_annotation,
    "jaxb": jaxb,
    "nashorn": nashorn,
    "reflective-access": reflective_access,
    "base64": sun_base64,
}
