"""The public surface (issue 26 item 1): ``strands_art`` exports what a user needs, loads it
lazily, and the README's agent snippet imports from nowhere else."""

from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import strands_art

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "vllm", "verl", "ray", "xllamacpp", "strands", "httpx", "peft", "numpy")
#: also kept out of the command-line parser: the task generator's Java parser
PARSER_HEAVY = (*HEAVY, "tree_sitter", "tree_sitter_java")


def readme_snippet() -> str:
    text = (ROOT / "README.md").read_text()
    return re.search(r"## Use it in your agent\n\n```python\n(.*?)```", text, re.S).group(1)


def imported_modules(code: str) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom):
            modules.append(node.module or "")
        elif isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
    return modules


def test_readme_snippet_imports_only_from_strands_art_and_strands():
    modules = imported_modules(readme_snippet())
    assert "strands_art" in modules and "strands" in modules
    assert [m for m in modules if m not in ("strands_art", "strands")] == []


def test_import_is_cheap_no_optional_dependency_loaded():
    """A fresh interpreter: ``import strands_art`` pulls in none of the heavy modules, and touching
    one name loads that name's module only (the scripted backend does not load vLLM or verl)."""
    code = (
        "import json, sys\n"
        "import strands_art\n"
        f"heavy = {HEAVY!r}\n"
        "def loaded():\n"
        "    return sorted({m.split('.')[0] for m in sys.modules} & set(heavy))\n"
        "before = loaded()\n"
        "strands_art.SamplingParams\n"
        "print(json.dumps({'before': before, 'after': loaded(),"
        " 'modules': sorted(m for m in sys.modules if m.startswith('strands_art'))}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    result = json.loads(out.stdout)
    assert result["before"] == []
    assert "vllm" not in result["after"] and "verl" not in result["after"] and "torch" not in result["after"]
    assert "strands_art.backends.base" in result["modules"]
    assert not any(m.startswith(("strands_art.gateway", "strands_art.training")) for m in result["modules"])


@pytest.mark.parametrize("name", strands_art.__all__)
def test_every_exported_name_resolves_to_its_module_and_is_documented(name):
    value = getattr(strands_art, name)
    assert value.__name__ == name
    assert value.__module__ == strands_art._LAZY[name]
    doc = inspect.getdoc(value) or ""
    assert len(doc) >= 30, f"{name} needs a docstring with shapes, units, errors"


def test_type_checking_imports_match_the_lazy_table():
    """Editors and type checkers see the same names the lazy table serves."""
    tree = ast.parse((ROOT / "strands_art" / "__init__.py").read_text())
    guarded = next(
        n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"
    )
    seen = {alias.name: node.module for node in guarded.body for alias in node.names}
    assert seen == strands_art._LAZY
    assert sorted(strands_art.__all__) == sorted(strands_art._LAZY)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        strands_art.Nope  # noqa: B018
    assert "ARTModel" in dir(strands_art)


@pytest.mark.parametrize("argv", [None, ["--help"], ["make-tasks", "--help"]])
def test_the_command_line_parser_loads_no_model_library(argv: list[str] | None) -> None:
    """Every ``strands-art`` command builds the whole parser first: the ``train`` subcommand's
    settings once imported torch there, so ``strands-art view`` (and ``--help``) paid for it
    (the viewer's server: 430 MB peak RSS instead of 250 MB); ``make-tasks``' registration
    imported the task generator's Java parser (tree-sitter)."""
    run = "build_parser()" if argv is None else f"main({argv!r})"
    code = (
        "import io, json, sys\n"
        "from strands_art.cli import build_parser, main\n"
        "out = sys.stdout\n"
        "sys.stdout = io.StringIO()\n"
        "try:\n"
        f"    {run}\n"
        "except SystemExit:\n"
        "    pass\n"
        "help_text = sys.stdout.getvalue()\n"
        "sys.stdout = out\n"
        f"print(json.dumps([help_text, sorted({{m.split('.')[0] for m in sys.modules}} & set({PARSER_HEAVY!r}))]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    help_text, loaded = json.loads(out.stdout)
    assert loaded == []
    if argv:  # the help was printed (the parser ran), not an early failure
        assert help_text.startswith("usage: strands-art")


MB_INIT = ROOT / "strands_art" / "envs" / "migrationbench" / "__init__.py"


def test_migrationbench_names_resolve_to_their_modules_and_load_lazily():
    """``strands_art.envs.migrationbench`` serves its common names from the parts that define them
    (issue 46): the table, the TYPE_CHECKING imports and ``__all__`` agree, each name is its
    module's own, and importing the package (what every part's import does first) loads no
    part and no heavy library."""
    import strands_art.envs.migrationbench as mb

    tree = ast.parse(MB_INIT.read_text())
    guarded = next(
        n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"
    )
    seen = {alias.name: node.module for node in guarded.body for alias in node.names}
    assert seen == mb._LAZY and sorted(mb.__all__) == sorted(mb._LAZY)
    for name, module in mb._LAZY.items():
        value = getattr(mb, name)
        assert value.__module__ == module and value.__name__ == name, name
    with pytest.raises(AttributeError, match="no attribute 'evaluate_repo'"):
        mb.evaluate_repo  # noqa: B018
    code = (
        "import json, sys\n"
        "import strands_art.envs.migrationbench\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('strands_art', 'strands'))"
        " or m.split('.')[0] in ('torch', 'tree_sitter', 'pyarrow'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(out.stdout) == ["strands_art", "strands_art.envs", "strands_art.envs.migrationbench"]


def test_the_agent_doc_snippet_imports_the_public_names():
    """docs/migrationbench-agent.md builds the agent from ``strands_art.envs.migrationbench``'s
    names only, and each of them is served there."""
    import strands_art.envs.migrationbench as mb

    text = (ROOT / "docs" / "migrationbench-agent.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    tree = ast.parse(code)
    froms = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert [n.module for n in froms] == ["strands_art.envs.migrationbench"]
    names = [a.name for n in froms for a in n.names]
    assert names and all(name in mb.__all__ for name in names)
