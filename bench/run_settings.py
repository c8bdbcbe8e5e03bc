"""Whether a ``strands-art train`` run directory was started with the flags a bench states: the
benches that read runs back (``seed_experiments.py``, ``migration_learning.py``) compare them the
way ``strands-art train --resume`` compares restated flags, by meaning
(:func:`strands_art.training.resume_settings.resume_settings`).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from strands_art.training.resume_settings import resume_settings
from strands_art.training.settings import DEFAULTS, TrainSettings
from strands_art.training.train_cli import add_train_parser

TASK_KEYS = ("train_tasks", "eval_tasks")
"""``train.json``'s task directories: paths of the machine that ran, not compared."""


def given_settings(flags: list[str]) -> dict[str, Any]:
    """The settings ``strands-art train FLAGS`` names (parsed by the command's own parser), by
    ``train.json`` key; those left out are not in it.

    Raises:
        SystemExit: flags the command refuses (its usage message on stderr).
    """
    parser = argparse.ArgumentParser(prog="strands-art")
    add_train_parser(parser.add_subparsers())
    ns = parser.parse_args(["train", "--run-dir", "RUN_DIR", *flags])  # the run directory is not compared
    return {k: getattr(ns, k) for k in DEFAULTS if getattr(ns, k, None) is not None}


def differences(flags: list[str], settings: Mapping[str, Any], run_dir: str | Path) -> list[str]:
    """The settings in which ``flags`` differ from a run's ``train.json`` (``settings``, the run at
    ``run_dir``), one ``--flag VALUE (the run has VALUE)`` each; empty when the flags say what the
    run used. Task directories are not compared; a larger ``--outer-batches`` is a difference
    (``--resume`` would extend the run, a bench that resumes without restating it would not).

    Raises:
        SystemExit: ``flags`` the command refuses.
        ValueError: ``settings`` that are not a ``train.json`` of valid settings.
    """
    given = {k: v for k, v in given_settings(flags).items() if k not in TASK_KEYS}
    saved = TrainSettings.from_dict({**settings, "run_dir": str(run_dir)})
    clash = []
    if given.get("outer_batches", saved.outer_batches) != saved.outer_batches:
        clash.append(f"--outer-batches {given.pop('outer_batches')!r} (the run has {saved.outer_batches!r})")
    try:
        resume_settings(saved, given, saved.env)
    except ValueError as e:
        clash.append(str(e).split("these differ: ", 1)[-1])
    return clash
