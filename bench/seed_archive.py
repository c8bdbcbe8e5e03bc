"""The two copies of a ``bench/seed_experiments.py`` run: its run directory and its archived copy.

A run ``(ARM, seed S)`` lives in ``RUN_ROOT/ARM/seedS`` while it trains; ``--archive DIR`` keeps
what the tables read of it (``train.json`` with this machine's paths as ``$RUN_ROOT`` / ``$TASKS``,
``metrics.jsonl`` and the rollout records) in ``DIR/ARM/seedS`` (:func:`archive_runs`), so a machine without the run
root reads finished runs back. Which copy is read (:func:`pick`), and what the archive takes, follow
one rule: a copy never gives way to one that is behind it (fewer outer batches or evaluations, or
not finished where it is), and copies with other settings are never mixed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from run_settings import TASK_KEYS  # train.json's task directories, shown as $TASKS/…
from seed_tables import Run, read_run

LOGS = ("metrics.jsonl", "code.jsonl", "env/rollouts/results.jsonl")
"""A run directory's logs the archive keeps beside ``train.json``: what the tables read (the
code that trained it too), and the rollout records (``bench/migration_learning.py``'s per-kind
rewards and audit read them)."""


def archive_problem(archive: str | None, run_root: str) -> str | None:
    """Why ``--archive`` cannot be used with ``--run-root`` (the error's text after ``--archive
    ARCHIVE: ``), or None: a file is there, or it is the run root or a folder in or around it (its
    copies would replace the runs' own files). Used by both benches' argument checks."""
    if not archive:
        return None
    if Path(archive).exists() and not Path(archive).is_dir():
        return "not a directory"
    a, r = Path(archive).resolve(), Path(run_root).resolve()
    if a == r or a.is_relative_to(r) or r.is_relative_to(a):
        return "the run root, or a folder in or around it (its copies would replace the runs' own files)"
    return None


def portable(names: dict[str, str], arm: str, seed: int, settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` with ``run_dir`` as ``$RUN_ROOT/ARM/seedS`` and the task directories as their
    ``$TASKS/…`` names (``names``: the placeholders of ``seed_experiments.placeholders``; else
    ``$TASKS/`` and the directory's name): what the archive keeps and the report shows. A copy
    already archived is left as it is."""
    out = {**settings, "run_dir": f"$RUN_ROOT/{arm}/seed{seed}"}
    for key in TASK_KEYS:
        if out.get(key) and not str(out[key]).startswith("$TASKS/"):
            out[key] = names.get(os.path.abspath(out[key]), "$TASKS/" + Path(out[key]).name)
    return out


def comparable(settings: dict[str, Any]) -> dict[str, Any]:
    """What must agree between two copies of one run: every setting but ``run_dir``, and of the
    task directories only whether there are any (their paths are another machine's)."""
    return {k: (bool(v) if k in TASK_KEYS else v) for k, v in settings.items() if k != "run_dir"}


def read_copy(base: Path | None, arm: str, seed: int, names: dict[str, str]) -> Run | None:
    """The run ``base/ARM/seedS`` read back (:func:`seed_tables.read_run`) with :func:`portable`
    settings, or None when it holds no ``train.json`` (or ``base`` is None).

    Raises:
        ValueError: its files cannot be read (``run_reader.RunFileError``), or its ``train.json`` is
            another arm's or seed's.
    """
    if base is None or not (base / arm / f"seed{seed}" / "train.json").exists():
        return None
    run = read_run(base / arm / f"seed{seed}")
    if (run.arm, run.seed) != (arm, seed):
        raise ValueError(
            f"{run.dir / 'train.json'}: the run of {run.arm} seed {run.seed}, in the directory of {arm} seed {seed}"
        )
    run.settings = portable(names, arm, seed, run.settings)
    return run


def differ(a: Run, b: Run) -> str | None:
    """The first setting two copies of a run disagree on (:func:`comparable`), as text, or None."""
    x, y = comparable(a.settings), comparable(b.settings)
    key = next((k for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)), None)
    return None if key is None else f"{key} ({x.get(key)!r} vs {y.get(key)!r})"


def behind(a: Run, b: Run) -> bool:
    """Whether copy ``a`` is behind copy ``b`` anywhere: fewer outer batches, fewer evaluations, or
    unfinished where ``b`` is finished (:attr:`seed_tables.Run.progress`)."""
    return any(x < y for x, y in zip(a.progress, b.progress, strict=True))


def where(run: Run) -> str:
    return f"{run.dir} ({len(run.trains)} of {run.settings['outer_batches']} outer batches, {len(run.evals)} evaluation(s), {run.state})"


def pick(here: Run | None, kept: Run | None) -> tuple[Run | None, str | None]:
    """The copy of a run to read, of its run directory's (``here``) and its archived one (``kept``),
    and a note to show when the archived copy is further (else None).

    The run directory's copy, unless it is behind the archived one (:func:`behind`): then the
    archived copy stays as it is (:func:`archive_runs` keeps it) and the run directory's is still
    the one read and trained on, as an archived run with no run directory is run again from its
    start; but an archived copy that is finished where the run directory's is not is refused.

    Raises:
        ValueError: naming both copies: other settings, or a finished archived copy beside an
            unfinished one in the run directory.
    """
    if here is None or kept is None:
        return here or kept, None
    if (d := differ(here, kept)) is not None:
        raise ValueError(
            f"{here.dir} and its archived copy {kept.dir} differ in {d}: two runs, not one; move one of "
            "them away (or pass another --run-root / --archive)"
        )
    if not behind(here, kept):
        return here, None
    if kept.finished:
        raise ValueError(
            f"the archived copy {where(kept)} is further than the run directory's {where(here)}: move "
            f"{here.dir} away to read the archived run back, or remove {kept.dir} to go on with the run directory's"
        )
    return (
        here,
        f"note: the archived copy {where(kept)} is further than {where(here)}; it is kept until the run directory's run is as far",
    )


def locate(root: Path, archive: Path | None, arm: str, seed: int, names: dict[str, str]) -> Run | None:
    """Run ``(arm, seed)`` as read (:func:`pick` of :func:`read_copy` in ``root`` and ``archive``),
    or None when neither holds it."""
    return pick(read_copy(root, arm, seed, names), read_copy(archive, arm, seed, names))[0]


def archive_runs(names: dict[str, str], root: Path, archive: Path, runs: list[tuple[str, int]]) -> list[str]:
    """Copy what the tables read of each run directory of ``runs`` under ``root`` into
    ``archive/ARM/seedS``: ``train.json`` as :func:`portable` (no path of this machine in a
    committed file), and the logs of :data:`LOGS` it has (refused if one names the run root: it
    would carry a path of this machine). An archived copy the run directory's is behind (:func:`behind`) is kept as it
    is. Each file is written whole (a temporary file renamed over it).

    Returns:
        A note per archived copy kept.

    Raises:
        ValueError: a log that holds the run root's absolute path; a run directory
            and its archived copy with other settings (:func:`differ`); a run file that cannot be
            read (``run_reader.RunFileError``).
    """
    notes = []
    for arm, seed in runs:
        here = read_copy(root, arm, seed, names)
        if here is None:
            continue
        kept = read_copy(archive, arm, seed, names)
        if kept is not None:
            if (d := differ(here, kept)) is not None:
                raise ValueError(f"{here.dir} not archived: its archived copy {kept.dir} differs in {d}")
            if behind(here, kept):
                notes.append(f"note: {where(kept)} kept: {where(here)} is behind it")
                continue
        texts = {}
        for name in LOGS:
            path = here.dir / name
            if path.exists():
                texts[name] = path.read_text(encoding="utf-8")
                for place in (os.path.abspath(root), *(os.path.abspath(k) for k in names)):
                    if place in texts[name]:
                        what = "the run root" if place == os.path.abspath(root) else "the directory"
                        raise ValueError(
                            f"{path} names {what} {place}: not archived (a path of this machine)"
                        )
        write_copy(archive / arm / f"seed{seed}", texts, here.settings)
    return notes


def write_copy(dest: Path, logs: dict[str, str | None], settings: dict[str, Any]) -> None:
    """Write an archived copy into ``dest``: each log of ``logs`` (name -> text; None removes a
    copy left from before), then ``train.json`` from ``settings`` last, so a copy cut short has no
    ``train.json`` and is never read back. Each file is written whole (a temporary file renamed
    over it).

    Raises:
        OSError: a file that cannot be written; what was written before it stays.
    """
    (dest / "train.json").unlink(missing_ok=True)
    for name, text in {**logs, "train.json": json.dumps(settings, indent=2) + "\n"}.items():
        if text is None:
            (dest / name).unlink(missing_ok=True)
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / f"{name}.tmp").write_text(text, encoding="utf-8")
        os.replace(dest / f"{name}.tmp", dest / name)
