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

from strands_art.training.resume_settings import differing, recorded_history_mode
from strands_art.training.settings import DEFAULTS, TrainSettings
from strands_art.training.train_cli import add_train_parser

TASK_KEYS = ("train_tasks", "eval_tasks")
"""``train.json``'s task directories: paths of the machine that ran, not compared."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The benches' ``--help``: the epilog's lines as written, a default shown where there is one
    (not for None, False or an empty string or list)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "%(default)" not in text
            and not any(action.default is x for x in (None, False, argparse.SUPPRESS))
            and (action.default not in ("", []))
        ):
            text += " (default: %(default)s)"
        return text


def archived_bench_parser(doc: str, epilog: str, layout: str) -> argparse.ArgumentParser:
    """The parser of a bench whose runs an ``--archive`` can hold: the docstring's first paragraph,
    ``epilog`` (its lines kept), and ``--run-root`` (``layout``: the run directories under it)."""
    p = argparse.ArgumentParser(
        description=doc.split("\n\n")[0], formatter_class=HelpFormatter, epilog=epilog
    )
    p.add_argument(
        "--run-root",
        required=True,
        help=f"{layout} (made when missing; with --table-only it may be missing when --archive holds the runs)",
    )
    return p


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


BENCH_OWN = ("--env", "--train-tasks", "--eval-tasks", "--run-dir", "--resume", "--seed")
"""Flags a bench that starts runs gives each run itself (:func:`flag_problem` refuses them in
the flags it checks): the environment, the task and run directories, the seed."""


def flag_problem(flags: list[str], env: str = "migrationbench") -> str | None:
    """Why ``strands-art train --env ENV FLAGS`` would stop before loading anything, or None: a
    flag its parser refuses (its usage message is on stderr), or a value out of range or sizes
    that do not fit together (the command's own checks: :meth:`TrainSettings.resolve`, after the
    environment's recommended settings)."""
    own = sorted({f.split("=")[0] for f in flags} & set(BENCH_OWN))
    if own:
        return f"{', '.join(own)}: the bench sets these itself"
    try:
        given = given_settings(flags)
    except SystemExit:
        return "not `strands-art train` flags (its message above)"
    try:
        TrainSettings.resolve(env, "RUN_DIR", given, env_defaults(env))
    except ValueError as exc:
        return str(exc)
    return None


def differences(
    flags: list[str], settings: Mapping[str, Any], run_dir: str | Path, every: bool = True
) -> list[str]:
    """The settings in which a run started as ``strands-art train --env ENV FLAGS`` would differ
    from a run's ``train.json`` (``settings``, the run at ``run_dir``), one ``--flag VALUE (the run
    has VALUE)`` each; empty when the flags start the run it is. With ``every``, every setting is
    compared, those ``flags`` leave out at their defaults (the environment's, then
    :data:`DEFAULTS`); else only those ``flags`` name (a bench whose report shows the runs' own
    ``train.json``). Compared by meaning, as ``--resume`` compares them
    (:func:`~strands_art.training.resume_settings.differing`); task directories and the
    environment are not compared. Beyond ``--resume``'s rules, two are differences here, because a
    bench resumes a run without restating its flags: a larger ``--outer-batches`` (``--resume``
    would extend the run) and a ``--history-mode`` the run left to its environment before it
    captured anything (``--resume`` would adopt it); with ``every``, a ``--history-mode`` the flags
    leave to the environment where the run stated one.

    Raises:
        SystemExit: ``flags`` the command refuses.
        ValueError: ``settings`` that are not a ``train.json`` of valid settings.
    """
    try:
        saved = TrainSettings.from_dict({**settings, "run_dir": str(run_dir)})
    except TypeError as exc:  # a required setting missing (env, ...)
        raise ValueError(f"{Path(run_dir) / 'train.json'}: not the settings of a run ({exc})") from None
    given = given_settings(flags)
    if every:
        defaults = env_defaults(saved.env)
        given = TrainSettings.resolve(saved.env, str(run_dir), given, defaults, cross_checks=False).to_dict()
    want = {k: v for k, v in given.items() if k not in (*TASK_KEYS, "run_dir", "env")}
    clash = []
    if want.get("outer_batches", saved.outer_batches) != saved.outer_batches:
        clash.append(f"--outer-batches {want.pop('outer_batches')!r} (the run has {saved.outer_batches!r})")
    mode, captured = want.get("history_mode"), recorded_history_mode(run_dir)
    if every and mode is None and saved.history_mode is not None:  # unset: the environment's, not the run's
        want.pop("history_mode")
        clash.append(f"--history-mode left unset (the run has {saved.history_mode!r})")
    elif mode is not None and saved.history_mode is None and captured is None:
        clash.append(
            f"--history-mode {mode!r} (the run left it to its environment and has captured nothing yet)"
        )
    return clash + differing(saved, want, saved.history_mode or captured)


def env_defaults(env: str) -> Mapping[str, Any]:
    """The settings a bundled environment recommends (its ``TrainEnvironment.defaults``, read
    without building it); an environment of the user's (``module:function``): none."""
    if env == "migrationbench":
        from strands_art.envs.migrationbench.run.train_env import DEFAULTS
    elif env == "lookup":
        from strands_art.envs.lookup import TRAIN_DEFAULTS as DEFAULTS
    elif env == "capitals":
        from strands_art.envs.capitals import DEFAULTS
    else:
        return {}
    return DEFAULTS
