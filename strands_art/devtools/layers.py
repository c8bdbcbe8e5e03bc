"""The package's import graph: the edges that point up its layers, and import cycles.

``python -m strands_art.devtools.layers`` walks every module of ``strands_art`` (``ast``: imports
at module level *and* inside functions, ``TYPE_CHECKING`` blocks included), maps each module to
its layer by folder or file (:data:`LAYERS`, first matching prefix wins, so a new module in a
folder inherits the folder's layer) and prints every edge that goes from a lower layer to a
higher one, minus the :data:`KNOWN_EXCEPTIONS`, and every import cycle (:func:`cycles`: modules
that import each other, directly or around a loop, counting imports inside functions; an import
under ``if TYPE_CHECKING:`` never runs and does not count), minus the :data:`KNOWN_CYCLES`.
Exit status 1 when there is a new upward edge or cycle, when a known exception or cycle no
longer occurs, or when a module matches no layer.

Data flows down (docs/architecture.md): apps and environments use the package; fronts turn a
harness's messages into gateway calls through the conversion path; the gateway drives history, rendering and capture, which
use the leaves. ``training/`` reads trajectories: it sits beside history, so it never imports the
gateway, a front or ``envs``. Imports within one layer are allowed.

Not seen: an import by a string (``importlib.import_module``, hydra's ``get_object``): verl's
episode path (a YAML string) and the lazy table of ``strands_art/__init__.py`` (the public API,
an app-layer module) use it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "strands_art"

# (layer number, name, module prefixes). Higher imports lower; a prefix is a dotted module path
# matching itself and everything below it. Order of the rows is the order of matching.
LAYERS: list[tuple[int, str, tuple[str, ...]]] = [
    # view/ reads every kind of run directory (migrate's, the training loop's, the HTTP front's
    # store): an app over stored files; it never imports the gateway (tests/test_layers.py)
    (
        6,
        "apps",
        ("strands_art", "strands_art.cli", "strands_art.demo", "strands_art.devtools", "strands_art.view"),
    ),
    (6, "envs", ("strands_art.envs",)),
    (
        5,
        "fronts",
        (
            "strands_art.model",
            "strands_art.formats",
            "strands_art.streaming",
            "strands_art.turn_tags",
            "strands_art.serve",
            "strands_art.verl",
            "strands_art.replay",
        ),
    ),
    # every front's messages become the gateway's canonical messages here (one path, one place
    # for its events); it knows no front
    (4, "conversion", ("strands_art.conversion",)),
    (3, "gateway", ("strands_art.gateway",)),
    (
        2,
        "history/render/capture, training",
        (
            "strands_art.history",
            "strands_art.render",
            "strands_art.render_inputs",
            "strands_art.render_system",
            "strands_art.turn_parse",
            "strands_art.turn_cut",
            "strands_art.capture",
            "strands_art.rowcheck",
            "strands_art.literal",
            "strands_art.context_length",
            "strands_art.training",
        ),
    ),
    (
        1,
        "leaves",
        (
            "strands_art.backends",
            "strands_art.toolcalls",
            "strands_art.families",
            "strands_art.trajectory",
            "strands_art.store",
            "strands_art.registry",
            "strands_art.models_gguf",
            "strands_art.validation",
            "strands_art.invocation",
            "strands_art.model_cache",
            "strands_art.message_errors",
        ),
    ),
]

# The parts of a package whose folders are its architecture: package -> rows of (rank, part,
# module prefixes). Within the package a module imports only its own part or a part of a lower
# rank; parts of one rank never import each other; a module of the package matching no row is
# unplaced. The package's own name as a prefix means its ``__init__.py`` only.
_MB = "strands_art.envs.migrationbench"
PARTS: dict[str, list[tuple[int, str, tuple[str, ...]]]] = {
    _MB: [
        # the lazy public names (imports by string, and under TYPE_CHECKING)
        (5, "public names", (_MB,)),
        (4, "run", (f"{_MB}.run",)),
        # tasks are made before a run, never by it; the generator checks them with the evaluator
        (4, "generate", (f"{_MB}.generate",)),
        # the reward never imports the agent, the agent never imports the reward
        (3, "evaluate", (f"{_MB}.evaluate",)),
        (3, "agent", (f"{_MB}.agent",)),
        (2, "maven", (f"{_MB}.maven",)),
        (1, "tasks", (f"{_MB}.tasks",)),
        (0, "shared", (f"{_MB}.config", f"{_MB}.workspace", f"{_MB}.controlseq", f"{_MB}.treedigest")),
    ],
}

# (importer, imported) -> why it stays for now. The test fails on any upward edge not listed here
# and on any listed edge that no longer occurs.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}

# sorted modules of one cycle -> why it stays for now. The command fails on any other cycle and on
# any listed cycle that no longer occurs; the test fails on any cycle at all, listed or not.
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}  # empty since issue 26; tests/test_layers.py keeps it so


@dataclass(frozen=True)
class Edge:
    """One import: ``importer`` imports ``imported`` (both dotted module names) at ``line``;
    ``where`` is ``"module"`` (runs on import), ``"function"`` (runs when the function is called)
    or ``"type"`` (under ``if TYPE_CHECKING:``: never runs)."""

    importer: str
    imported: str
    line: int
    where: str = "module"


def package_root() -> Path:
    """The folder of the ``strands_art`` package this module belongs to."""
    return Path(__file__).resolve().parents[1]


def module_name(path: Path, root: Path) -> str:
    """``root/a/b.py`` -> ``strands_art.a.b``; ``root/a/__init__.py`` -> ``strands_art.a``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` (a module or ``module.attribute``) lies in."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, where: str) -> Iterator[tuple[ast.AST, str]]:
    """Every node below ``node`` with where it runs: ``"type"`` inside ``if TYPE_CHECKING:``,
    else ``"function"`` inside a function or lambda, else ``where``."""
    for child in ast.iter_child_nodes(node):
        here = where
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and where != "type":
            here = "function"
        yield child, here
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield stmt, "type"
                yield from _walk(stmt, "type")
            for stmt in child.orelse:
                yield stmt, here
                yield from _walk(stmt, here)
        else:
            yield from _walk(child, here)


def imports_of(module: str, path: Path, known: dict[str, Path]) -> list[Edge]:
    """The package-internal imports of one module, at any depth of its AST.

    ``from a.b import c`` is an edge to ``a.b.c`` when that is a module, else to ``a.b``; relative
    imports are resolved against the module's package.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    base = module if is_package else module.rpartition(".")[0]
    edges: dict[Edge, None] = {}  # ordered, without repeats (``from m import a, b``)
    for node, where in _walk(tree, "module"):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                source = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                source = node.module or ""
            targets = [f"{source}.{alias.name}" for alias in node.names]
        for target in targets:
            if not target.startswith(PACKAGE):
                continue
            resolved = _resolve(target, known)
            if resolved is not None and resolved != module:
                edges[Edge(module, resolved, node.lineno, where)] = None
    return list(edges)


def layer_of(module: str) -> tuple[int, str] | None:
    """``(number, name)`` of the first :data:`LAYERS` row with a prefix covering ``module``."""
    for number, name, prefixes in LAYERS:
        for prefix in prefixes:
            if module == prefix or (prefix != PACKAGE and module.startswith(prefix + ".")):
                return number, name
    return None


def _covers(prefix: str, module: str, package: str) -> bool:
    return module == prefix or (prefix != package and module.startswith(prefix + "."))


def part_of(module: str) -> tuple[str, int, str] | None:
    """``(package, rank, part)`` of the first :data:`PARTS` row covering ``module``; ``(package,
    -1, "")`` for a module of a :data:`PARTS` package that no row covers; None outside them."""
    for package, rows in PARTS.items():
        if not _covers(package, module, ""):
            continue
        for rank, part, prefixes in rows:
            if any(_covers(prefix, module, package) for prefix in prefixes):
                return package, rank, part
        return package, -1, ""
    return None


def part_breaks(edges: list[Edge]) -> list[Edge]:
    """The edges between two parts of one :data:`PARTS` package that its rules forbid: to a part
    of a higher rank, or to another part of the same rank (``TYPE_CHECKING`` imports count)."""
    found = []
    for e in edges:
        a, b = part_of(e.importer), part_of(e.imported)
        if a is None or b is None or a[0] != b[0] or a[1] < 0 or b[1] < 0 or a[2] == b[2]:
            continue
        if b[1] >= a[1]:
            found.append(e)
    return found


def cycles(edges: list[Edge]) -> list[tuple[str, ...]]:
    """The import cycles of ``edges``: each strongly connected set of two or more modules (sorted
    names), over the edges that run (``where`` is not ``"type"``), sorted.

    A cycle through an import inside a function still couples the modules both ways (each must
    be understood with the other; the import order decides what works), so it counts.
    """
    graph: dict[str, set[str]] = {}
    for e in edges:
        if e.where != "type":
            graph.setdefault(e.importer, set()).add(e.imported)
            graph.setdefault(e.imported, set())
    # Tarjan's algorithm, iterative (no recursion limit on a deep chain)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    members.append(top)
                    if top == node:
                        break
                if len(members) > 1:
                    found.append(tuple(sorted(members)))
    return sorted(found)


@dataclass
class Report:
    """What :func:`check` found: upward edges beyond the exceptions, stale exceptions, modules
    without a layer, the number of modules and edges walked, import cycles beyond
    :data:`KNOWN_CYCLES` and known cycles that no longer occur."""

    upward: list[Edge]
    stale: list[tuple[str, str]]
    unplaced: list[str]
    num_modules: int
    num_edges: int
    cycles: list[tuple[str, ...]] = field(default_factory=list)
    stale_cycles: list[tuple[str, ...]] = field(default_factory=list)
    part_breaks: list[Edge] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.upward or self.stale or self.unplaced or self.cycles or self.stale_cycles or self.part_breaks
        )


def check(root: Path | None = None) -> Report:
    """Walk the package under ``root`` (default: this installation) and compare with the layers."""
    root = root or package_root()
    known = modules(root)
    edges = [e for m, p in known.items() for e in imports_of(m, p, known)]
    unplaced = sorted(m for m in known if layer_of(m) is None or (part_of(m) or ("", 0, ""))[1] < 0)
    upward, excepted = [], set()
    for e in edges:
        a, b = layer_of(e.importer), layer_of(e.imported)
        if a is None or b is None or b[0] <= a[0]:
            continue
        if (e.importer, e.imported) in KNOWN_EXCEPTIONS:
            excepted.add((e.importer, e.imported))
        else:
            upward.append(e)
    stale = sorted(set(KNOWN_EXCEPTIONS) - excepted)
    found = cycles(edges)
    new_cycles = [c for c in found if c not in KNOWN_CYCLES]
    stale_cycles = sorted(set(KNOWN_CYCLES) - set(found))
    return Report(
        upward, stale, unplaced, len(known), len(edges), new_cycles, stale_cycles, part_breaks(edges)
    )


def _shown(prefix: str, root: Path, package: str = PACKAGE) -> str:
    """A :data:`LAYERS` or :data:`PARTS` prefix as docs/architecture.md writes it: ``model.py``,
    ``serve/``, ``__init__.py`` (``package`` itself)."""
    if prefix == package:
        return "`__init__.py`"
    path = root.joinpath(*prefix.split(".")[1:])
    return f"`{path.name}/`" if path.is_dir() else f"`{path.name}.py`"


def markdown_table(root: Path | None = None) -> str:
    """:data:`LAYERS` as the Markdown table of docs/architecture.md ("Layers"), top layer first;
    ``--table`` prints it and tests/test_layers.py checks that the doc holds it verbatim."""
    root = root or package_root()
    lines = ["| layer | name | modules |", "|---|---|---|"]
    for number, name, prefixes in LAYERS:
        lines.append(f"| {number} | {name} | {', '.join(_shown(p, root) for p in prefixes)} |")
    for package, rows in PARTS.items():
        folder = "/".join(package.split(".")[1:])
        lines += ["", f"| rank | part of `{folder}/` | modules | never imports |", "|---|---|---|---|"]
        for rank, part, prefixes in rows:
            never = [p for r, p, _ in rows if p != part and r >= rank]
            shown = ", ".join(_shown(p, root, package) for p in prefixes)
            lines.append(f"| {rank} | {part} | {shown} | {', '.join(never) or '-'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the upward edges (``importer:line -> imported``), the import cycles and a summary;
    1 if any problem. ``--table``: print :func:`markdown_table` instead."""
    if argv and argv[0] == "--table":
        print(markdown_table())
        return 0
    report = check()
    for e in report.upward:
        a, b = layer_of(e.importer), layer_of(e.imported)
        print(f"UPWARD {e.importer}:{e.line} ({a[1]}) -> {e.imported} ({b[1]})")
    for importer, imported in report.stale:
        print(
            f"STALE exception {importer} -> {imported}: no longer imported; remove it from KNOWN_EXCEPTIONS"
        )
    for e in report.part_breaks:
        a, b = part_of(e.importer), part_of(e.imported)
        print(
            f"PART {e.importer}:{e.line} ({a[2]}, rank {a[1]}) -> {e.imported} ({b[2]}, rank {b[1]}): "
            "a part imports only its own part or lower ranks"
        )
    for m in report.unplaced:
        print(f"UNPLACED {m}: add its folder or file to LAYERS (and PARTS, inside a package listed there)")
    for c in report.cycles:
        print(f"CYCLE {' <-> '.join(c)}: move what they share into a leaf module")
    for c in report.stale_cycles:
        print(f"STALE cycle {' <-> '.join(c)}: no longer a cycle; remove it from KNOWN_CYCLES")
    for (importer, imported), why in KNOWN_EXCEPTIONS.items():
        print(f"known exception {importer} -> {imported}: {why}")
    for c, why in KNOWN_CYCLES.items():
        print(f"known cycle {' <-> '.join(c)}: {why}")
    print(
        f"{report.num_modules} modules, {report.num_edges} import edges, {len(report.upward)} upward "
        f"(+{len(KNOWN_EXCEPTIONS) - len(report.stale)} known exceptions), {len(report.part_breaks)} "
        f"between parts, {len(report.cycles)} cycles "
        f"(+{len(KNOWN_CYCLES) - len(report.stale_cycles)} known)"
    )
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
