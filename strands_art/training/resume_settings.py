"""The settings ``strands-art train --resume`` continues a run with, from its ``train.json`` and
the flags the command restates.

A resumed run trains with the settings it started with (``train.json``,
:class:`~strands_art.training.settings.TrainSettings`). A flag given again is accepted when it
says what the run effectively used, compared by meaning, not by spelling (:func:`meaning`):
``--old-logprobs auto`` is what ``auto`` resolves to at the run's ``--max-staleness``;
``--max-draws`` equal to ``--prompt-batch`` is the default (no extra draws); a ``--history-mode``
the run left to its environment is the mode its gateway captured in (the ``history_mode`` of its
train records in ``metrics.jsonl``); a tasks directory is its absolute path. Any other value is a
change, refused with every differing flag listed; the one change a resume accepts is a larger
``--outer-batches``, which extends the run.

``--threads`` the run left to torch is torch's default here (what a resume trains with).

Not resolved here (the environment decides it when it is built, after this check): a
``--max-turns`` or ``--prompt`` the run left to an environment that recommends none (the bundled
environments recommend theirs, and ``train.json`` records it); restating one is refused as a change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from strands_art.training.metrics import read_metrics
from strands_art.training.old_logprobs import resolve_old_logprobs
from strands_art.training.settings import FLAG_OF, TrainSettings

# addresses a run directory's train.json may name but a resume uses only when the command restates
# them (a local Ray cluster, "local" or "auto", needs no restating): (setting, what it is, why)
_NAMED_BY_RUN_DIR = (
    ("ray", "Ray cluster", "a cluster's answers are unpickled here: this command connects to one"),
    ("vllm_url", "vLLM server", "prompts and adapters go to that server: this command sends them"),
)


def recorded_history_mode(run_dir: str | Path) -> str | None:
    """The capture mode of the run's newest train record (``metrics.jsonl``), None without one."""
    modes = [
        r.get("history_mode")
        for r in read_metrics(Path(run_dir) / "metrics.jsonl")
        if r.get("kind") == "train" and isinstance(r.get("history_mode"), str)
    ]
    return modes[-1] if modes else None


def meaning(key: str, value: Any, settings: TrainSettings, history_mode: str | None) -> Any:
    """What ``value`` of setting ``key`` means in a run with the rest of ``settings``
    (``history_mode``: the mode the run's gateway captured in, for a run that left it unset)."""
    if key == "old_logprobs":
        return resolve_old_logprobs(value, settings.max_staleness)
    if key == "max_draws" and value is None:
        return settings.prompt_batch
    if key == "history_mode" and value is None:
        return history_mode
    if key == "threads" and value is None:  # torch's default on this machine (imported only here)
        import torch

        return torch.get_num_threads()
    if key in ("train_tasks", "eval_tasks") and isinstance(value, str):
        return Path(value).absolute()
    return value


def differing(saved: TrainSettings, given: Mapping[str, Any], history_mode: str | None) -> list[str]:
    """The settings of ``given`` (by ``train.json`` key; None: left unset) that differ in meaning
    (:func:`meaning`) from the run's ``saved`` ones, ``history_mode`` the mode it captured in; one
    ``--flag VALUE (the run has VALUE)`` each, in ``given``'s order. A history mode the run left
    unset and has not captured in yet differs from none."""
    clash = []
    for key, value in given.items():
        raw = getattr(saved, key)
        mine = meaning(key, raw, saved, history_mode)
        theirs = meaning(key, value, saved, history_mode)
        if theirs == mine or (key == "history_mode" and mine is None):
            continue
        stated = "left unset" if value is None else repr(value)
        here = f" (= {theirs!r} in this run)" if key == "old_logprobs" and theirs != value else ""
        has = f"the run left it to torch: {mine} here" if key == "threads" and raw is None else None
        clash.append(
            f"{FLAG_OF[key]} {stated}{here} ({has or f'the run has {mine if raw is None else raw!r}'})"
        )
    return clash


def resume_settings(saved: TrainSettings, given: Mapping[str, Any], env: str | None) -> TrainSettings:
    """The settings to resume ``saved`` (the run's ``train.json``) with, ``given`` the settings
    the command line restates and ``env`` its ``--env`` (None: not given).

    Raises:
        ValueError: a Ray cluster or vLLM server ``train.json`` names that the command does not
            restate; or restated flags that differ from the run's (all of them named, each with
            the run's value).
    """
    for key, what, why in _NAMED_BY_RUN_DIR:
        value = getattr(saved, key)
        if value not in (None, "local", "auto") and given.get(key) != value:
            raise ValueError(
                f"--resume: the run's train.json names the {what} {value!r}; {why} only when told to: "
                f"pass {FLAG_OF[key]} {value} to resume with it"[:400]
            )
    more = given.get("outer_batches")
    if more is not None and more > saved.outer_batches:  # extend a run (finished or not)
        saved = dataclasses.replace(saved, outer_batches=more)
    history = saved.history_mode or recorded_history_mode(saved.run_dir)
    clash = differing(saved, given, history)
    if env not in (None, saved.env):
        clash.append(f"--env {env!r} (the run has {saved.env!r})")
    if clash:
        raise ValueError("--resume trains with the run's own settings; these differ: " + "; ".join(clash))
    if saved.history_mode is None and history is None and given.get("history_mode") is not None:
        # nothing captured yet (no train record): the stated mode is the run's from now on, and the
        # gateway the environment builds is checked to capture in it (run.check_history_mode)
        saved = dataclasses.replace(saved, history_mode=given["history_mode"])
    return saved
