"""Assemble a generated Java 8 project (files before and after the reference migration) for one kind.

:func:`build_project` draws everything from one ``random.Random``: names (group, package,
artifact, version), the plain classes and their tests (:mod:`.gen_java`), the hazard
(:mod:`.gen_hazards`), where the Java level is set (:mod:`.gen_layout`), the JUnit flavour of
each test class (JUnit 4, JUnit 5, or both with the vintage engine) and the plugin pins. It
returns the Java 8 files and the files the reference migration changes (``None``: deleted).
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any

from strands_art.envs.migrationbench.generate import gen_layout as lay
from strands_art.envs.migrationbench.generate.gen_domain import domain_components
from strands_art.envs.migrationbench.generate.gen_hazards import HAZARDS
from strands_art.envs.migrationbench.generate.gen_java import (
    JUNIT4,
    JUNIT5,
    Component,
    Hazard,
    render_test_class,
)
from strands_art.envs.migrationbench.generate.gen_pom import Dep, Plugin, Pom

MIXED = "mixed"

_TLDS = ["com", "org", "io", "net"]
_ORGS = [
    "acme",
    "globex",
    "initech",
    "umbrella",
    "hooli",
    "vandelay",
    "wonka",
    "stark",
    "wayne",
    "tyrell",
    "cyberdyne",
    "soylent",
    "oscorp",
    "aperture",
    "monarch",
    "dunder",
    "nakatomi",
    "gringotts",
    "contoso",
    "fabrikam",
]
_PRODUCTS = [
    "ledger",
    "billing",
    "catalog",
    "inventory",
    "ticketing",
    "payroll",
    "shipping",
    "metrics",
    "scheduler",
    "notes",
    "search",
    "pricing",
    "audit",
    "gateway",
    "reports",
    "accounts",
    "orders",
    "survey",
    "library",
    "fleet",
]
_MODULES = ["core", "api", "service", "model", "client", "storage", "util", "domain"]
_PEOPLE = [
    ("Ana Lima", "ana"),
    ("Ben Okafor", "ben"),
    ("Chen Wei", "chen"),
    ("Dora Novak", "dora"),
    ("Eli Cohen", "eli"),
    ("Fatima Diallo", "fatima"),
    ("Gus Berg", "gus"),
    ("Hana Sato", "hana"),
]


@dataclass
class Names:
    group_id: str
    package: str
    artifact: str
    version: str
    title: str
    author: str
    email: str
    date: str  # git author/committer date, "YYYY-MM-DDTHH:MM:SS+0000"


@dataclass
class Project:
    """``before``: every file of the Java 8 project; ``after``: what the reference changes."""

    names: Names
    before: dict[str, str]
    after: dict[str, str | None]
    meta: dict[str, Any] = field(default_factory=dict)


def draw_names(rng: random.Random) -> Names:
    tld, org, product = rng.choice(_TLDS), rng.choice(_ORGS), rng.choice(_PRODUCTS)
    artifact = product + rng.choice(["", "", "-core", "-service", "-lib", "-tools"])
    version = f"{rng.randint(0, 4)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}" + rng.choice(["-SNAPSHOT", ""])
    person, login = rng.choice(_PEOPLE)
    date = (
        f"{rng.randint(2016, 2020)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        f"T{rng.randint(8, 19):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}+0000"
    )
    return Names(
        f"{tld}.{org}",
        f"{tld}.{org}.{product}",
        artifact,
        version,
        f"{org.capitalize()} {product.capitalize()}",
        person,
        f"{login}@{org}.example",
        date,
    )


# --------------------------------------------------------------------------- JUnit


def _junit_deps(rng: random.Random, flavours: set[str], pom: Pom) -> list[Dep]:
    """Test dependencies (with versions; a version property may be added to ``pom``)."""
    deps = []
    if JUNIT4 in flavours:
        deps.append(Dep("junit", "junit", rng.choice(["4.12", "4.12", "4.13", "4.13.1"]), "test"))
    if JUNIT5 in flavours:
        v = rng.choice(["5.3.2", "5.4.2", "5.5.2", "5.6.2", "5.7.0", "5.7.2", "5.8.1", "5.8.2"])
        if rng.random() < 0.5:
            key = rng.choice(["junit.jupiter.version", "junit5.version", "junit.version"])
            pom.set_prop(key, v)
            v = f"${{{key}}}"
        if not v.startswith("5.3") and rng.random() < 0.5:
            deps.append(Dep("org.junit.jupiter", "junit-jupiter", v, "test"))
        else:
            deps += [
                Dep("org.junit.jupiter", "junit-jupiter-api", v, "test"),
                Dep("org.junit.jupiter", "junit-jupiter-engine", v, "test"),
            ]
        if JUNIT4 in flavours:
            deps.append(
                Dep(
                    "org.junit.vintage",
                    "junit-vintage-engine",
                    v,
                    "test",
                    comment="JUnit 4 tests run on the JUnit Platform through the vintage engine.",
                )
            )
    return deps


def _surefire(rng: random.Random, flavours: set[str], force: bool = False) -> Plugin | None:
    """A surefire pin: >= 2.22 for JUnit 5 (older ones do not run the JUnit Platform)."""
    if JUNIT5 in flavours:
        return Plugin(lay.SUREFIRE, rng.choice(["2.22.0", "2.22.1", "2.22.2", "2.22.2", "3.0.0-M5"]))
    if force or rng.random() < 0.5:
        return Plugin(lay.SUREFIRE, rng.choice(["2.19.1", "2.20", "2.22.2"]))
    return None


def _flavours(rng: random.Random, n_tests: int, allowed: tuple[str, ...]) -> list[str]:
    """One JUnit flavour per test class; ``mixed`` gives each of JUnit 4 and 5 at least one."""
    choice = rng.choice(allowed)
    if choice != MIXED:
        return [choice] * n_tests
    out = [JUNIT4, JUNIT5] + [rng.choice([JUNIT4, JUNIT5]) for _ in range(n_tests - 2)]
    rng.shuffle(out)
    return out


# --------------------------------------------------------------------------- files


def _java_files(prefix: str, package: str, comps: list[Component], flavours: list[str]) -> dict[str, str]:
    base = package.replace(".", "/")
    files = {}
    for comp, flavour in zip(comps, flavours, strict=True):
        for stem, text in comp.sources.items():
            files[f"{prefix}src/main/java/{base}/{stem}.java"] = text
        files[f"{prefix}src/test/java/{base}/{comp.class_name}Test.java"] = render_test_class(
            package, f"{comp.class_name}Test", comp.tests, flavour, comp.test_imports, comp.test_extra
        )
    return files


def _hazard_after(prefix: str, package: str, hazard: Hazard | None) -> dict[str, str | None]:
    if hazard is None:
        return {}
    base = package.replace(".", "/")
    return {f"{prefix}src/main/java/{base}/{stem}.java": text for stem, text in hazard.after.items()}


def _count(comps: list[Component]) -> dict[str, int]:
    return {
        "main_classes": sum(len(c.sources) for c in comps),
        "test_classes": len(comps),
        "test_methods": sum(len(c.tests) for c in comps),
    }


# --------------------------------------------------------------------------- layouts

_LEVEL = {
    "java-level-props": lay.level_props,
    "compiler-plugin": lay.level_plugin,
    "release-flag": lay.level_release,
    "profile": lay.level_profile,
    "old-plugins": lay.level_old_plugins,
}


def _single(rng: random.Random, names: Names, kind: str) -> Project:
    hazard = HAZARDS[kind](rng, names.package, names.artifact) if kind in HAZARDS else None
    allowed = (JUNIT4,) if kind == "old-plugins" else (JUNIT4, JUNIT5, MIXED)
    taken = set(hazard.component.sources) if hazard else set()
    n_domain = rng.randint(1, 3) if hazard is None else rng.randint(0, 2)
    comps = domain_components(rng, names.package, n_domain, taken) + ([hazard.component] if hazard else [])
    if len(comps) < 2:  # mixed needs a test class of each flavour
        allowed = tuple(a for a in allowed if a != MIXED)
    flavours = _flavours(rng, len(comps), allowed)

    pom = Pom(names.group_id, names.artifact, names.version, name=names.title)
    pom.set_prop("project.build.sourceEncoding", "UTF-8")
    style, fix = _LEVEL.get(kind, lay.level_simple)(rng, pom)
    pom.dependencies += _junit_deps(rng, set(flavours), pom)
    surefire = pom.plugin(lay.SUREFIRE)
    if surefire is None:
        surefire = _surefire(rng, set(flavours), force=kind == "surefire-argline")
        if surefire is not None:
            pom.plugins.append(surefire)
    fixes = [fix]
    if kind == "surefire-argline":
        style2, fix2 = lay.surefire_argline(rng, pom, surefire)
        style = f"{style}+{style2}"
        fixes.append(fix2)
    after_pom = copy.deepcopy(pom)
    for f in fixes:
        f(after_pom)
    if hazard is not None and hazard.add_deps:
        after_pom.dependencies[:0] = hazard.add_deps
    before = {"pom.xml": pom.render(), **_java_files("", names.package, comps, flavours)}
    after = {"pom.xml": after_pom.render(), **_hazard_after("", names.package, hazard)}
    meta = {"level": style, "junit": sorted(set(flavours)), "modules": 1, **_count(comps)}
    return Project(names, before, after, meta)


def _multi(rng: random.Random, names: Names) -> Project:
    mods = [f"{names.artifact.split('-')[0]}-{m}" for m in rng.sample(_MODULES, rng.randint(2, 3))]
    root = Pom(
        names.group_id,
        f"{names.artifact.split('-')[0]}-parent",
        names.version,
        packaging="pom",
        name=names.title,
        modules=mods,
    )
    root.set_prop("project.build.sourceEncoding", "UTF-8")
    style, fix = (
        lay.level_props(rng, root) if rng.random() < 0.6 else lay.level_plugin(rng, root, managed=True)
    )
    mod_flavours = [rng.choice([JUNIT4, JUNIT5]) for _ in mods]
    root.dependency_management = _junit_deps(rng, set(mod_flavours), root)
    surefire = _surefire(rng, set(mod_flavours))
    if surefire is not None:
        root.plugin_management.append(surefire)
    override = rng.randrange(len(mods)) if rng.random() < 0.5 else None
    parent = (names.group_id, root.artifact_id, names.version, None)
    before: dict[str, str] = {}
    after: dict[str, str | None] = {}
    all_comps: list[Component] = []
    taken: set[str] = set()
    for i, (mod, flavour) in enumerate(zip(mods, mod_flavours, strict=True)):
        pkg = f"{names.package}.{mod.split('-', 1)[1]}"
        comps = domain_components(rng, pkg, rng.randint(1, 2), taken)
        all_comps += comps
        pom = Pom(None, mod, None, parent=parent)
        if i > 0 and rng.random() < 0.5:
            pom.dependencies.append(Dep(names.group_id, mods[0], "${project.version}"))
        want = ("junit",) if flavour == JUNIT4 else ("org.junit.jupiter",)
        pom.dependencies += [
            Dep(d.group_id, d.artifact_id, None, "test")
            for d in root.dependency_management
            if d.group_id in want
        ]
        mod_after = copy.deepcopy(pom)
        if i == override:
            pom.plugins.append(lay.compiler_plugin(rng, None))
            mod_after = copy.deepcopy(pom)
            c = mod_after.plugin(lay.COMPILER)
            c.drop("source", "target")
            if not c.config:
                mod_after.plugins.remove(c)
        before[f"{mod}/pom.xml"] = pom.render()
        if i == override:
            after[f"{mod}/pom.xml"] = mod_after.render()
        before.update(_java_files(f"{mod}/", pkg, comps, [flavour] * len(comps)))
    root_after = copy.deepcopy(root)
    fix(root_after)
    before = {"pom.xml": root.render(), **before}
    after = {"pom.xml": root_after.render(), **after}
    style = f"multi-module:{style}" + (f"+override:{mods[override]}" if override is not None else "")
    meta = {"level": style, "junit": sorted(set(mod_flavours)), "modules": len(mods), **_count(all_comps)}
    return Project(names, before, after, meta)


def _parent(rng: random.Random, names: Names) -> Project:
    base = names.artifact.split("-")[0]
    pdir = rng.choice(["parent", "build-parent", f"{base}-parent"])
    parent_pom = Pom(
        names.group_id, f"{base}-parent", names.version, packaging="pom", name=f"{names.title} parent"
    )
    parent_pom.set_prop("project.build.sourceEncoding", "UTF-8")
    style, fix = (
        lay.level_props(rng, parent_pom)
        if rng.random() < 0.5
        else lay.level_plugin(rng, parent_pom, managed=True)
    )
    comps = domain_components(rng, names.package, rng.randint(1, 3), set())
    flavours = _flavours(rng, len(comps), (JUNIT4, JUNIT5, MIXED) if len(comps) > 1 else (JUNIT4, JUNIT5))
    parent_pom.dependency_management = _junit_deps(rng, set(flavours), parent_pom)
    surefire = _surefire(rng, set(flavours))
    if surefire is not None:
        parent_pom.plugin_management.append(surefire)
    aggregator = rng.random() < 0.5
    if aggregator:
        app_dir = f"{base}-app/"
        rel = f"../{pdir}/pom.xml"
    else:
        app_dir, rel = "", f"{pdir}/pom.xml"
    app = Pom(
        None,
        f"{base}-app" if aggregator else names.artifact,
        None,
        parent=(names.group_id, parent_pom.artifact_id, names.version, rel),
    )
    app.dependencies = [
        Dep(d.group_id, d.artifact_id, None, "test") for d in parent_pom.dependency_management
    ]
    parent_after = copy.deepcopy(parent_pom)
    fix(parent_after)
    before = {f"{pdir}/pom.xml": parent_pom.render(), f"{app_dir}pom.xml": app.render()}
    if aggregator:
        root = Pom(
            names.group_id,
            f"{base}-build",
            names.version,
            packaging="pom",
            name=names.title,
            modules=[pdir, app_dir.rstrip("/")],
        )
        before["pom.xml"] = root.render()
    before.update(_java_files(app_dir, names.package, comps, flavours))
    meta = {
        "level": f"parent-pom:{'aggregator' if aggregator else 'relative'}:{style}",
        "junit": sorted(set(flavours)),
        "modules": 2 if aggregator else 1,
        **_count(comps),
    }
    return Project(names, dict(sorted(before.items())), {f"{pdir}/pom.xml": parent_after.render()}, meta)


def build_project(kind: str, rng: random.Random) -> Project:
    """The project of ``kind`` (a key of :data:`strands_art.envs.migrationbench.generate.generate.KINDS`)."""
    names = draw_names(rng)
    if kind == "multi-module":
        return _multi(rng, names)
    if kind == "parent-pom":
        return _parent(rng, names)
    return _single(rng, names, kind)
