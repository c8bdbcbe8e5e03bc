"""verl lives in ``strands_art/verl/``: the shipped YAML names its paths, and each name it gives is
defined there (checked in the source: verl is not needed); its ``episode_kwargs`` build the
rollout configuration.

Runs in the main venv and in .venv-verl (scripts/test-verl.sh)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
HAS_VERL = importlib.util.find_spec("verl") is not None


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
    from strands_art.envs.migrationbench.run.episodes import episode_config

    loops = yaml.safe_load((ROOT / "examples/migrationbench/verl_agent_loops.yaml").read_text())
    kwargs = loops[0]["episode_kwargs"]
    assert set(kwargs) <= {*LIMIT_FIELDS, "run_dir"}
    assert episode_config(kwargs) == RolloutConfig()
    assert episode_config({**kwargs, "max_turns": 30}) == RolloutConfig(max_turns=30)
