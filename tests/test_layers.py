"""The import graph points down the layers and has no cycles (issue 26 items 2 and 5;
docs/architecture.md, "Layers").

``strands_art.devtools.layers`` walks every module's imports (module level and inside
functions); the first test is the repository's own check, the others show that the walker sees
what it must: an upward edge at function level, a relative import, a new module in a folder
(``training/``, ``serve/``) by its folder, and a module that no layer covers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from strands_art.devtools import layers

ROOT = Path(__file__).resolve().parents[1]


def test_no_upward_edges_beyond_the_known_exceptions():
    report = layers.check()
    assert [(e.importer, e.line, e.imported) for e in report.upward] == []
    assert report.stale == [] and report.unplaced == []
    assert report.num_modules > 100 and report.num_edges > 300


def test_the_viewer_reads_stores_and_never_the_gateway():
    root = layers.package_root()
    known = layers.modules(root)
    view_edges = [
        e.imported
        for m, path in known.items()
        if m.startswith("strands_art.view")
        for e in layers.imports_of(m, path, known)
    ]
    assert "strands_art.store" in view_edges
    assert not [
        m
        for m in view_edges
        if m.startswith(("strands_art.gateway", "strands_art.model", "strands_art.serve.app"))
    ]


def test_command_prints_the_summary_and_exits_zero():
    out = subprocess.run(
        [sys.executable, "-m", "strands_art.devtools.layers"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert " 0 upward " in out.stdout.splitlines()[-1]


def write(root: Path, module: str, text: str = "") -> None:
    path = root / Path(*module.split(".")[1:])
    path = path / "__init__.py" if module.count(".") == 0 or text == "package" else path.with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("" if text == "package" else text)


def test_walker_finds_function_level_relative_and_new_folder_edges(tmp_path):
    root = tmp_path / "strands_art"
    write(root, "strands_art", "package")
    write(root, "strands_art.gateway", "")
    write(root, "strands_art.model", "from strands_art.gateway import RolloutGateway\n")  # down: fine
    write(root, "strands_art.trajectory", "def f():\n    from strands_art import gateway\n")
    write(root, "strands_art.training", "package")
    write(root, "strands_art.training.trainmod", "from ..model import ARTModel\n")
    write(root, "strands_art.serve", "package")
    write(root, "strands_art.serve.newmod", "import strands_art.envs.lookup\n")
    write(root, "strands_art.envs", "package")
    write(root, "strands_art.envs.lookup", "from strands_art.serve import newmod\n")  # envs use the package
    write(root, "strands_art.newthing", "")
    report = layers.check(root)
    found = sorted((e.importer, e.imported, e.line) for e in report.upward)
    assert found == [
        ("strands_art.serve.newmod", "strands_art.envs.lookup", 1),
        ("strands_art.training.trainmod", "strands_art.model", 1),
        ("strands_art.trajectory", "strands_art.gateway", 2),
    ]
    assert report.unplaced == ["strands_art.newthing"]
    assert len(report.stale) == len(layers.KNOWN_EXCEPTIONS)  # none of them occurs in this tree
    assert not report.ok


def test_no_import_cycles_even_through_imports_inside_functions():
    """The cycles issue 26 named (registry <-> models_gguf <-> families.sources, backends.vllm <->
    vllm_stream, families.base -> history.normalize, serve <-> serve.app, serve.fields <->
    serve.wire) are gone: what they shared is in leaf modules. No cycle is allowed, not even one
    listed in KNOWN_CYCLES: a new one fails here until what its modules share moves down."""
    report = layers.check()
    assert report.cycles == [] and report.stale_cycles == []
    known = layers.modules(layers.package_root())
    edges = [e for m, p in known.items() for e in layers.imports_of(m, p, known)]
    found = layers.cycles(edges)
    assert found == [] and layers.KNOWN_CYCLES == {}
    imported = {(e.importer, e.imported) for e in edges if e.where != "type"}
    assert ("strands_art.serve.app", "strands_art.serve") not in imported
    assert ("strands_art.serve.fields", "strands_art.serve.wire") not in imported
    assert ("strands_art.families.base", "strands_art.history.normalize") not in {
        (e.importer, e.imported) for e in edges
    }


def test_cycle_finder_counts_function_imports_and_not_type_checking_ones(tmp_path):
    root = tmp_path / "strands_art"
    write(root, "strands_art", "package")
    write(root, "strands_art.a", "import strands_art.b\n")
    write(root, "strands_art.b", "def f():\n    from strands_art import c\n")
    write(root, "strands_art.c", "def g():\n    import strands_art.a\n")  # a -> b -> c -> a
    write(root, "strands_art.d", "from strands_art import e\n")
    write(
        root,
        "strands_art.e",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from strands_art.d import X\n",
    )
    known = layers.modules(root)
    edges = [e for m, p in known.items() for e in layers.imports_of(m, p, known)]
    where = {(e.importer, e.imported): e.where for e in edges}
    assert where == {
        ("strands_art.a", "strands_art.b"): "module",
        ("strands_art.b", "strands_art.c"): "function",
        ("strands_art.c", "strands_art.a"): "function",
        ("strands_art.d", "strands_art.e"): "module",
        ("strands_art.e", "strands_art.d"): "type",
    }
    assert layers.cycles(edges) == [("strands_art.a", "strands_art.b", "strands_art.c")]
    report = layers.check(root)
    assert report.cycles == [("strands_art.a", "strands_art.b", "strands_art.c")]
    assert report.stale_cycles == [] and not report.ok


def test_readme_layout_names_every_top_level_module():
    """The README's layout block lists every module and package directly under strands_art/."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    names = {p.stem if p.suffix == ".py" else p.name for p in layers.package_root().iterdir()}
    names = {n for n in names if not n.startswith("__") and n != "py.typed"}
    missing = sorted(n for n in names if not re.search(rf"(?<![\w/]){re.escape(n)}(\.py|/)", block))
    assert missing == []
    assert "__init__.py" in block


def test_architecture_doc_holds_the_generated_layer_table():
    """docs/architecture.md's layer table is ``python -m strands_art.devtools.layers --table``,
    verbatim: the doc cannot drift from LAYERS."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    table = layers.markdown_table()
    assert table in doc
    assert "| 4 | conversion | `conversion/` |" in table.splitlines()
    out = subprocess.run(
        [sys.executable, "-m", "strands_art.devtools.layers", "--table"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0 and out.stdout.strip() == table


def test_architecture_doc_names_only_files_that_exist():
    """Every ``name.py`` or ``folder/`` path docs/architecture.md names in backticks is a file or
    folder of the package (or of the checkout): no module it describes has moved away."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    pkg = layers.package_root()
    named = set(re.findall(r"`([\w./]+\.py)`", doc)) | set(
        re.findall(r"(?<=[`( ])([a-z_]+/[\w/.]*\.py)", doc)
    )
    files = {p.relative_to(pkg).as_posix() for p in pkg.rglob("*.py")}
    missing = sorted(
        n for n in named if not (ROOT / n).exists() and not any(f == n or f.endswith("/" + n) for f in files)
    )
    assert missing == []
    assert len(named) > 20


# --- the parts of envs/migrationbench/ (issue 46): layers.PARTS --------------------------------

MB = "strands_art.envs.migrationbench"


def _part_module(part: str) -> str:
    """One module of ``part`` (a PARTS row name) in a synthetic tree."""
    rows = {name: prefixes for _, name, prefixes in layers.PARTS[MB]}
    prefix = rows[part][0]
    return prefix if prefix == MB or part == "shared" else f"{prefix}.mod"


def _parts_tree(root: Path, extra: dict[str, str]) -> None:
    """A synthetic ``strands_art`` with the migrationbench parts, one module each (plus their
    packages), and ``extra`` (module -> source) on top."""
    for pkg in ("strands_art", "strands_art.envs", MB):
        write(root, pkg, "package")
    for _, part, prefixes in layers.PARTS[MB]:
        for prefix in prefixes:
            if prefix != MB and part != "shared":
                write(root, prefix, "package")
        if part != "public names":
            write(root, _part_module(part), "")
    for module, text in extra.items():
        write(root, module, text)


def _breaks(tmp_path: Path, importer: str, imported: str, how: str = "module") -> list[tuple[str, str]]:
    """The part breaks of a synthetic tree where ``importer``'s module imports ``imported``'s
    (``how``: at module level, inside a function, or under TYPE_CHECKING)."""
    target = _part_module(imported)
    line = {
        "module": f"import {target}\n",
        "function": f"def f():\n    import {target}\n",
        "type": f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import {target}\n",
    }[how]
    root = tmp_path / "strands_art"
    module = _part_module(importer)
    _parts_tree(root, {} if module == MB else {module: line})
    if module == MB:
        (root / "envs" / "migrationbench" / "__init__.py").write_text(line)
    report = layers.check(root)
    assert report.unplaced == [] and report.upward == []
    return [(e.importer, e.imported) for e in report.part_breaks]


def _part_pairs(allowed: bool) -> list[tuple[str, str]]:
    rows = layers.PARTS[MB]
    return [(a, b) for ra, a, _ in rows for rb, b, _ in rows if a != b and (rb < ra) == allowed]


def test_the_migrationbench_parts_keep_their_rules():
    """The real package: no import between its parts against PARTS, every row names modules that
    exist, and the evaluator <-> verdict cycle is gone (both import the EvalTask leaf)."""
    report = layers.check()
    assert report.part_breaks == [] and report.ok
    known = layers.modules(layers.package_root())
    for _, part, prefixes in layers.PARTS[MB]:
        for prefix in prefixes:
            assert prefix in known, (part, prefix)
    edges = {(e.importer, e.imported) for m, p in known.items() for e in layers.imports_of(m, p, known)}
    assert (f"{MB}.evaluate.verdict", f"{MB}.evaluate.evaluator") not in edges
    assert (f"{MB}.evaluate.verdict", f"{MB}.evaluate.evaltask") in edges
    assert (f"{MB}.evaluate.evaluator", f"{MB}.evaluate.evaltask") in edges
    # the parts are real folders: no module left flat beside them but the shared four
    flat = sorted(m for m in known if m.startswith(MB + ".") and m.count(".") == 3)
    assert flat == [
        f"{MB}.{n}"
        for n in (
            "agent",
            "config",
            "controlseq",
            "evaluate",
            "generate",
            "maven",
            "run",
            "tasks",
            "treedigest",
            "workspace",
        )
    ]


def test_the_evaluator_never_imports_the_agent(tmp_path):
    assert _breaks(tmp_path, "evaluate", "agent") == [(f"{MB}.evaluate.mod", f"{MB}.agent.mod")]


def test_the_agent_never_imports_the_evaluator(tmp_path):
    assert _breaks(tmp_path, "agent", "evaluate") == [(f"{MB}.agent.mod", f"{MB}.evaluate.mod")]


def test_the_generator_never_imports_the_runner(tmp_path):
    assert _breaks(tmp_path, "generate", "run") == [(f"{MB}.generate.mod", f"{MB}.run.mod")]


def test_the_runner_never_imports_the_generator(tmp_path):
    assert _breaks(tmp_path, "run", "generate", "function") == [(f"{MB}.run.mod", f"{MB}.generate.mod")]


def test_the_evaluator_and_the_generator_never_import_the_runner(tmp_path):
    assert _breaks(tmp_path, "evaluate", "run", "type") == [(f"{MB}.evaluate.mod", f"{MB}.run.mod")]


def test_maven_never_imports_the_evaluator(tmp_path):
    assert _breaks(tmp_path, "maven", "evaluate") == [(f"{MB}.maven.mod", f"{MB}.evaluate.mod")]


def test_tasks_never_import_maven(tmp_path):
    """A task is read by every part: the task loader once imported the evaluator's checks."""
    assert _breaks(tmp_path, "tasks", "maven") == [(f"{MB}.tasks.mod", f"{MB}.maven.mod")]


def test_the_shared_modules_import_no_part(tmp_path):
    assert _breaks(tmp_path, "shared", "tasks") == [(f"{MB}.config", f"{MB}.tasks.mod")]


def test_no_part_imports_the_public_names(tmp_path):
    assert _breaks(tmp_path, "run", "public names") == [(f"{MB}.run.mod", MB)]


@pytest.mark.parametrize(("importer", "imported"), _part_pairs(allowed=False))
def test_every_forbidden_pair_of_parts_is_a_break(tmp_path, importer, imported):
    found = _breaks(tmp_path, importer, imported)
    assert found == [(_part_module(importer), _part_module(imported))]
    out = layers.check(tmp_path / "strands_art")
    assert not out.ok


@pytest.mark.parametrize(("importer", "imported"), _part_pairs(allowed=True))
def test_every_downward_pair_of_parts_is_allowed(tmp_path, importer, imported):
    assert _breaks(tmp_path, importer, imported) == []


def test_a_new_module_beside_the_parts_is_unplaced(tmp_path):
    root = tmp_path / "strands_art"
    _parts_tree(root, {f"{MB}.newthing": ""})
    report = layers.check(root)
    assert report.unplaced == [f"{MB}.newthing"] and not report.ok
