"""verl moved to ``strands_art/verl/`` (issue 26 item 2): the old ``strands_art.training.verl_*``
paths still import for one release, with a DeprecationWarning, as the same module objects; the
shipped YAML names the new paths, and each name it gives is defined there.

Runs in the main venv (without verl: the shim warns, then the new module's ImportError names its
new path) and in .venv-verl (scripts/test-verl.sh: the old path is the new module)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
MOVED = ("adapter", "agent_loop", "backend", "trainer")
HAS_VERL = importlib.util.find_spec("verl") is not None


@pytest.mark.parametrize("name", MOVED)
def test_old_path_warns_and_is_the_new_module(name):
    old, new = f"strands_art.training.verl_{name}", f"strands_art.verl.{name}"
    # only the old name is forgotten: re-executing the new module would register verl's agent loop
    # and trainer a second time, with new class objects
    saved = {old: sys.modules.pop(old)} if old in sys.modules else {}
    try:
        with pytest.warns(DeprecationWarning, match=f"moved to {new}"):
            try:
                module = importlib.import_module(old)
            except ImportError as exc:  # only without verl, and with the new path's hint
                assert not HAS_VERL and f"{new} needs verl==0.9.1" in str(exc)
                assert name != "backend"  # the backend speaks verl's protocol without importing verl
                return
        assert module is sys.modules[new] is sys.modules[old]
        assert module.__name__ == new
    finally:
        sys.modules.pop(old, None)
        sys.modules.update(saved)


def defined_names(module: str) -> set[str]:
    path = ROOT / (module.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_yaml_names_the_new_paths_and_they_exist():
    loops = yaml.safe_load((ROOT / "examples/migrationbench/verl_agent_loops.yaml").read_text())
    dotted = [loop[key] for loop in loops for key in ("_target_", "episode") if key in loop]
    assert len(dotted) == 2 * len(loops) >= 2
    for target in dotted:
        module, _, attr = target.rpartition(".")
        # the agent loop is the verl front's; the MigrationBench episode is the environment's
        assert module.startswith(("strands_art.verl.", "strands_art.envs.migrationbench.")), target
        assert attr in defined_names(module), target


def test_yaml_episode_kwargs_build_the_rollout_config():
    """The YAML's ``episode_kwargs`` are read by the episode into a RolloutConfig: every key is a
    rollout limit or ``run_dir``, and the config they build is the defaults' (the YAML repeats none)."""
    from strands_art.envs.migrationbench.config import LIMIT_FIELDS, RolloutConfig
    from strands_art.envs.migrationbench.episodes import episode_config

    loops = yaml.safe_load((ROOT / "examples/migrationbench/verl_agent_loops.yaml").read_text())
    kwargs = loops[0]["episode_kwargs"]
    assert set(kwargs) <= {*LIMIT_FIELDS, "run_dir"}
    assert episode_config(kwargs) == RolloutConfig()
    assert episode_config({**kwargs, "max_turns": 30}) == RolloutConfig(max_turns=30)


def test_the_old_episode_path_is_still_defined_for_one_release():
    """``strands_art.verl.agent_loop.migrationbench_episode`` (in users' YAML) resolves through the
    module's ``__getattr__`` to the moved function (checked in the source: verl is not needed)."""
    tree = ast.parse((ROOT / "strands_art/verl/agent_loop.py").read_text())
    getattr_fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__")
    assert "migrationbench_episode" in ast.unparse(getattr_fn)
    assert "MIGRATIONBENCH_EPISODE" in defined_names("strands_art.verl.agent_loop")
