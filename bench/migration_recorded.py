"""Reading back a results file of ``bench/migration_learning.py``: the finished seeds it printed
(``--recorded``), so the over-seed summary can join seeds whose run directories were on another
machine. The line formats here are the ones ``migration_learning.run`` prints."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from strands_art.envs.migrationbench.generate.generate import HELDOUT_KIND

SEED_LINE = re.compile(r"^seed (\d+): (.*)$")
TRANSFER_LINE = re.compile(
    rf"^  (held-out kind {HELDOUT_KIND}|transfer tasks \(\d+ kinds\)) after (\d+) updates: reward ([\d.]+|nan) \((\d+) rollouts\)$"
)
EVAL_LINE = re.compile(
    r"^  held-out after (\d+) updates: reward ([\d.]+) \(failed rollouts (\d+), (\d+) s\)$"
)
TRAIN_LINE = re.compile(
    r"^  update (\d+): training reward ([\d.]+) \+- ([\d.]+), tied groups (\d+), rows (\d+), "
    r"sampled tokens (\d+), rollouts (\d+) s, training (\d+) s, grad norm ([\d.]+)$"
)


def recorded_seeds(path: Path, settings: str | None = None) -> dict[int, dict[str, Any]]:
    """The finished seeds of an earlier results file of this bench, parsed from the lines this
    bench prints (``seed S: finished``, ``held-out after U updates: ...``, ``update U: ...``).

    Returns {seed: summary} with ``evals``, ``trains`` and ``transfer`` as :func:`summarize_seed`
    gives them (rewards in [0, 1]; seconds as printed, rounded), ``transfer_label`` as printed
    where the seed has transfer lines, and ``recorded`` = ``path``; no per-kind
    rewards or audit (those need the run directory: the file itself holds them). A seed marked NOT
    FINISHED is left out.

    Raises:
        ValueError: the file holds no finished seed, or ``settings`` (the flags after ``settings:``)
            is given and the file's ``settings:`` line differs (names the flags that differ).
        OSError, UnicodeDecodeError: the file cannot be read as text.
    """
    out: dict[int, dict[str, Any]] = {}
    cur: dict[str, Any] | None = None
    lines = path.read_text(encoding="utf-8").splitlines()
    if settings is not None:
        theirs = next((x.removeprefix("settings: ") for x in lines if x.startswith("settings: ")), None)
        if theirs is None:
            raise ValueError(f"{path}: no `settings:` line, so its seeds cannot be checked against these")
        if theirs.split() != settings.split():
            ours, other = set(flag_pairs(settings)), set(flag_pairs(theirs))
            raise ValueError(
                f"{path}: recorded with other settings (there: {' '.join(sorted(other - ours)) or '-'}; "
                f"here: {' '.join(sorted(ours - other)) or '-'})"
            )
    for line in lines:
        if m := SEED_LINE.match(line):
            state = m.group(2)
            if "recorded in" in state or not (state == "finished" or state.startswith("NOT FINISHED")):
                cur = None  # a seed this file joined from another file, or a progress line: not this file's seed
                continue
            cur = {
                "evals": [], "trains": [], "transfer": [], "recorded": path, "finished": m.group(2) == "finished"
            }  # fmt: skip
            out[int(m.group(1))] = cur
        elif cur is not None and (m := EVAL_LINE.match(line)):
            cur["evals"].append((int(m.group(1)), float(m.group(2)), int(m.group(3)), float(m.group(4))))
        elif cur is not None and (m := TRANSFER_LINE.match(line)):
            cur["transfer"].append((int(m.group(2)), float(m.group(3)), int(m.group(4))))
            cur["transfer_label"] = m.group(1)
        elif cur is not None and (m := TRAIN_LINE.match(line)):
            g = m.groups()
            cur["trains"].append({
                "outer_batch": int(g[0]) - 1, "reward_mean": float(g[1]), "reward_std": float(g[2]),
                "zero_advantage_groups": int(g[3]), "rows": int(g[4]), "sampled_tokens": int(g[5]),
                "rollout_s": float(g[6]), "train_s": float(g[7]), "grad_norm": float(g[8]),
            })  # fmt: skip
    done = {seed: s for seed, s in out.items() if s["finished"] and len(s["evals"]) >= 2}
    if not done:
        raise ValueError(f"{path}: no finished seed with two held-out evaluations in this bench's format")
    return done


def flag_pairs(settings: str) -> list[str]:
    """``--lr 3e-4 --kl-coef 0 --gradient-checkpointing`` -> ``["--lr=3e-4", "--kl-coef=0",
    "--gradient-checkpointing"]`` (for naming what differs between two settings lines)."""
    out: list[str] = []
    for tok in settings.split():
        if tok.startswith("--") or not out:
            out.append(tok)
        else:
            out[-1] += f"={tok}"
    return out
