"""The transfer set of ``bench/migration_learning.py --transfer-tasks``: tasks of kinds no training
or held-out task has (``make-tasks --split heldout-kind``: base64; real MigrationBench repositories
from ``make-tasks --from-records``, each ``owner__name`` its own kind), evaluated with the held-out
tasks and counted apart. The kinds are written to ``RUN_ROOT/transfer-kinds.json`` so a
``--table-only`` summary splits the same rollouts."""

from __future__ import annotations

import json
import re
from pathlib import Path

from strands_art.envs.migrationbench.generate.generate import HELDOUT_KIND


def kind_of(task: str) -> str:
    """``java-level-props-0000007`` -> ``java-level-props`` (make-tasks names); a real repository's
    task (``owner__name``, ``make-tasks --from-records``) is its own kind, whole, even when its
    name ends in ``-digits`` (``apache__commons-lang-3``)."""
    return task if "__" in task else re.sub(r"-\d+$", "", task)


def combined_eval_tasks(eval_dir: Path, transfer_dir: Path, out: Path, train_dir: Path | None = None) -> Path:
    """Copy every task directory of ``eval_dir`` and ``transfer_dir`` into ``out`` (made once; the
    next call checks that it holds the same task names), write the transfer set's kinds to
    ``out.parent / "transfer-kinds.json"`` (:func:`transfer_kinds` reads them back) and return ``out``.

    Raises:
        ValueError: the transfer set is empty, a kind is in both sets (its rollouts could not be
            split), a transfer kind is a training kind of ``train_dir`` (no transfer to measure),
            or ``out`` exists with other tasks than the two sets hold.
    """
    import shutil

    def names(d: Path) -> list[str]:
        return sorted(p.name for p in d.iterdir() if (p / "task.json").is_file())

    held, transfer = names(eval_dir), names(transfer_dir)
    if not transfer:
        raise ValueError(f"--transfer-tasks {transfer_dir} holds no task directory")
    kinds = sorted({kind_of(n) for n in transfer})
    both = sorted(set(kinds) & {kind_of(n) for n in held})
    if both:
        raise ValueError(
            f"kinds in both --eval-tasks and --transfer-tasks: {both} (give each kind in one set)"
        )
    trained = sorted(set(kinds) & {kind_of(n) for n in names(train_dir)}) if train_dir is not None else []
    if trained:
        raise ValueError(
            f"--transfer-tasks kinds that training tasks have: {trained} (the transfer set is untrained kinds)"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists() and names(out) != sorted(held + transfer):  # refused before its kinds are written
        raise ValueError(f"{out} holds other tasks than --eval-tasks and --transfer-tasks: remove it")
    (out.parent / "transfer-kinds.json").write_text(json.dumps(kinds) + "\n", encoding="utf-8")
    if out.exists():
        return out
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for d, ns in ((eval_dir, held), (transfer_dir, transfer)):
        for n in ns:
            shutil.copytree(d / n, tmp / n, symlinks=True)
    tmp.rename(out)
    return out


def transfer_kinds(root: Path) -> frozenset[str]:
    """The transfer set's kinds of a run root (``transfer-kinds.json``, written by
    :func:`combined_eval_tasks`); {base64} for a root made before that file existed.

    Raises:
        ValueError: the file is not JSON or not a non-empty list of non-empty strings (read
            anyway, the transfer tasks' rollouts would be counted in the held-out reward).
        OSError: the file exists but cannot be read.
    """
    path = root / "transfer-kinds.json"
    if not path.exists():
        return frozenset({HELDOUT_KIND})
    try:
        kinds = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(
            f"{path} is not JSON ({exc}): remove it, or run with --transfer-tasks again"
        ) from None
    if not isinstance(kinds, list) or not kinds or not all(isinstance(k, str) and k for k in kinds):
        raise ValueError(
            f"{path} holds {json.dumps(kinds)[:100]}, not a non-empty list of kinds (task-name prefixes): "
            "remove it, or run with --transfer-tasks again"
        )
    return frozenset(kinds)


def transfer_label(kinds: frozenset[str]) -> str:
    """How the summary names the transfer set: ``held-out kind base64``, or ``transfer tasks (K kinds)``."""
    return (
        f"held-out kind {HELDOUT_KIND}" if kinds == {HELDOUT_KIND} else f"transfer tasks ({len(kinds)} kinds)"
    )
