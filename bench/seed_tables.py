"""The tables and RESULT line of ``bench/seed_experiments.py``, read from run directories (the
figures: :mod:`seed_figures`).

Every number comes from a ``strands-art train`` run directory (``train.json`` and ``metrics.jsonl``):
a run is read back, never re-run, and a run still in progress is read as far as it got. The
per-outer-batch keys read are the ones ``strands-art train`` writes for this purpose (docs/training-update.md,
"Metrics"): ``rows`` (training sequences), ``processed_tokens`` (tokens forwarded in the optimizer
steps, context included), ``actor_update_s`` (forward, backward, optimizer), ``optimizer_steps``,
``rollout_s``, ``e2e_s`` (the outer batch's wall time, evaluations left out), and the evaluations'
``val_reward`` / ``eval_s``.

- **Table 1, batching** (both arms tree capture): optimizer steps per outer batch (min-max and mean
  over every outer batch of every seed), best and final held-out reward, mean +- sample std over seeds.
- **Table 2, history mode** (both arms fixed-step batching): per seed, the totals over the outer
  batches both runs of the seed have (the pair's common prefix), then summed over seeds; the
  reduction ``1 - linear / tree`` of the sums, and per seed (mean +- std). Processed tokens and
  actor-update time are reduced over the outer batches where both arms ran a pass (:data:`TRAINED`).
- ``best`` is the highest held-out reward of an evaluation after at least one update; ``final``
  the one after the run's last outer batch (only for finished runs).
- The RESULT line (:func:`result_line`): ``seeds`` is the number of seeds finished in every arm
  asked for (``--arms``); a key that needs an arm not asked for reads ``n/a``.

Run files are read strictly (:mod:`run_reader`): only a torn last line of ``metrics.jsonl`` is
skipped (said on stderr); any other line the tables cannot read is an error naming the file and line.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from run_reader import RunFileError, read_metrics, read_settings

from strands_art.training.provenance import read_code

ARMS: dict[str, dict[str, str]] = {
    "tree-fixed-rows": {"history_mode": "tree", "batching": "fixed-rows"},
    "tree-fixed-steps": {"history_mode": "tree", "batching": "fixed-steps"},
    "linear-fixed-steps": {"history_mode": "linear", "batching": "fixed-steps"},
}
"""The three arms: tree + fixed-rows and tree + fixed-steps are the batching experiment; tree +
fixed-steps and linear + fixed-steps the history-mode experiment (the middle arm is in both)."""

ARM_KEYS = frozenset({"history_mode", "batching", "rows_per_mini_batch", "seed", "run_dir"})
"""``train.json`` keys that may differ between the runs compared; every other setting must agree."""

SETTINGS_NEEDS = {"seed": "int", "outer_batches": "int"}
"""The ``train.json`` keys read (:func:`read_run`), beside the arm's (:func:`arm_of`)."""
TRAIN_NEEDS = {
    "rows": "int", "optimizer_steps": "int", "processed_tokens": "number?", "actor_update_s": "number?",
    "e2e_s": "number?", "tokens": "number?", "rollout_s": "number?", "reward_mean": "number?",
}  # fmt: skip
"""The keys every ``train`` record must have (and an integer ``outer_batch``); those marked ``?``
must be numbers where present, and count 0 where a record lacks them (:func:`run_reader.require`)."""
EVAL_NEEDS = {"val_reward": "number", "val_rollouts": "int?", "eval_s": "number?"}
"""The keys of an ``eval`` record (and an integer ``outer_batch``)."""

TOTALS = ("rows", "processed_tokens", "actor_update_s", "e2e_s")
"""Table 2's totals, in its order (the design's four rows)."""
TRAINED = ("processed_tokens", "actor_update_s")
"""The totals of the trainer's passes: compared only over the outer batches (of a seed's pair) whose
arms both ran one."""

LABELS = {
    "rows": "training sequences (rows)",
    "processed_tokens": "processed training tokens",
    "actor_update_s": "actor-update time (s)",
    "e2e_s": "end-to-end time (s, evaluations left out)",
}

DESIGN_TABLE2 = {
    "rows": (138_830, 51_697, 62.76),
    "processed_tokens": (2.29e9, 1.69e9, 26.53),
    "actor_update_s": (29.58 * 3600, 24.18 * 3600, 18.24),
    "e2e_s": (114.06 * 3600, 104.28 * 3600, 8.57),
}
"""The design's history-mode totals (Qwen3-Coder-30B-A3B, 101 outer batches): tree, linear, reduction %."""

DESIGN_TEXT = {
    "rows": ("138,830", "51,697"),
    "processed_tokens": ("2.29 B", "1.69 B"),
    "actor_update_s": ("29.58 h", "24.18 h"),
    "e2e_s": ("114.06 h", "104.28 h"),
}
DESIGN_BEST = {"tree-fixed-rows": 74.92, "tree-fixed-steps": 78.76, "linear-fixed-steps": 78.26}
"""The design's best validation reward (%), per arm (tree + fixed-steps is its batching run)."""
DESIGN_STEPS = {
    "tree-fixed-rows": "1-3 (3 at 1,536 rows)",
    "tree-fixed-steps": "1",
    "linear-fixed-steps": "1",
}


@dataclass
class Run:
    """One run directory read back.

    Attributes:
        arm / seed: from ``train.json`` (the arm its history mode and batching name).
        settings: ``train.json``.
        trains: the ``kind == "train"`` records, in outer-batch order.
        evals: ``(updates before it, val_reward, val_rollouts, eval_s)`` per evaluation.
        torn: the line number of ``metrics.jsonl``'s last line when it had no newline (a write
            cut short, skipped), else None.
        finished: every outer batch trained and (with held-out tasks) the evaluation after the
            last one is in the log.
        unsure: not finished, but only because of the torn last line: every outer batch trained
            and the line cut short may be the final evaluation's record. Such a run is neither
            finished nor to be resumed (``seed_experiments.py`` refuses to run it).
        code: ``code.jsonl``'s lines, one per process that trained the run
            (:mod:`strands_art.training.provenance`); [] for a run from before it.
    """

    dir: Path
    arm: str
    seed: int
    settings: dict[str, Any]
    trains: list[dict[str, Any]] = field(default_factory=list)
    evals: list[tuple[int, float, int, float]] = field(default_factory=list)
    torn: int | None = None
    code: list[dict[str, Any]] = field(default_factory=list)

    @property
    def commits(self) -> list[str]:
        """:func:`commits_of` the run's ``code.jsonl``."""
        return commits_of(self.code)

    @property
    def finished(self) -> bool:
        n = self.settings["outer_batches"]
        evaluated = not self.settings.get("eval_tasks") or any(e[0] == n for e in self.evals)
        return len(self.trains) == n and evaluated

    @property
    def unsure(self) -> bool:
        return (
            self.torn is not None and not self.finished and len(self.trains) == self.settings["outer_batches"]
        )

    @property
    def state(self) -> str:
        """``finished``, ``NOT FINISHED`` or, for an :attr:`unsure` run, what is not known and why."""
        if self.unsure:
            return (
                f"UNSURE: metrics.jsonl's last line, {self.torn}, is cut short and may be the final "
                "evaluation's record"
            )
        return "finished" if self.finished else "NOT FINISHED"

    @property
    def progress(self) -> tuple[int, int, int]:
        """``(finished, outer batches trained, evaluations)``: a copy of a run whose progress is
        below another's in any place is behind it."""
        return int(self.finished), len(self.trains), len(self.evals)

    def totals(self, n: int) -> dict[str, float]:
        """:data:`TOTALS` (and ``tokens``, ``rollout_s``, ``optimizer_steps``) summed over the
        first ``n`` outer batches, and ``eval_s`` over the evaluations up to ``n`` updates."""
        if n > len(self.trains):
            raise ValueError(f"{self.dir}: {n} outer batches asked, {len(self.trains)} trained")
        out = {
            k: float(sum(r.get(k, 0) for r in self.trains[:n]))
            for k in (*TOTALS, "tokens", "rollout_s", "optimizer_steps")
        }
        out["eval_s"] = float(sum(e[3] for e in self.evals if e[0] <= n))
        return out

    @property
    def best(self) -> float | None:
        after = [e[1] for e in self.evals if e[0] >= 1]
        return max(after) if after else None

    @property
    def final(self) -> float | None:
        n = self.settings["outer_batches"]
        return next((e[1] for e in self.evals if e[0] == n), None)


def arm_of(settings: dict[str, Any]) -> str:
    """The :data:`ARMS` name of a run's settings.

    Raises:
        ValueError: a history mode / batching pair that is not one of the arms.
    """
    for name, want in ARMS.items():
        if all(settings.get(k) == v for k, v in want.items()):
            return name
    raise ValueError(
        f"settings with --history-mode {settings.get('history_mode')} --batching {settings.get('batching')} "
        f"are none of the arms {list(ARMS)}"
    )


def read_run(run_dir: Path) -> Run:
    """A run directory's settings and records (:mod:`run_reader`: a torn last line of
    ``metrics.jsonl`` is skipped and said on stderr, :attr:`Run.torn`; a resumed run's records are
    the kept ones, the loop rewrote the log).

    Raises:
        FileNotFoundError: no ``train.json``.
        RunFileError: ``train.json`` not a JSON object with an integer ``seed`` and ``outer_batches``;
            a ``metrics.jsonl`` line other than the last that is not a JSON object, a record with no
            string ``kind``, a train record without :data:`TRAIN_NEEDS` or an eval record without
            :data:`EVAL_NEEDS` (each with an integer ``outer_batch``), named with the file and line;
            the history mode and batching of no arm (:func:`arm_of`); outer batches out of order.
    """
    settings = read_settings(run_dir, SETTINGS_NEEDS)
    try:
        arm = arm_of(settings)
    except ValueError as exc:
        raise RunFileError(f"{run_dir / 'train.json'}: {exc}") from None
    path = run_dir / "metrics.jsonl"
    metrics = read_metrics(path, TRAIN_NEEDS, EVAL_NEEDS)
    run = Run(
        run_dir, arm, settings["seed"], settings, metrics.trains, torn=metrics.torn, code=read_code(run_dir)
    )
    run.evals = [
        (r["outer_batch"], float(r["val_reward"]), int(r.get("val_rollouts", 0)), float(r.get("eval_s", 0.0)))
        for r in metrics.evals
    ]
    if [r["outer_batch"] for r in run.trains] != list(range(len(run.trains))):
        raise RunFileError(f"{path}: train records are not outer batches 0, 1, 2, ... in order")
    return run


def check_same_settings(runs: list[Run]) -> None:
    """Every run was trained with the same settings but for :data:`ARM_KEYS`.

    Raises:
        ValueError: naming the first setting that differs and the two runs.
    """
    for run in runs[1:]:
        a = {k: v for k, v in runs[0].settings.items() if k not in ARM_KEYS}
        b = {k: v for k, v in run.settings.items() if k not in ARM_KEYS}
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                raise ValueError(
                    f"{runs[0].dir} and {run.dir} differ in {key} ({a.get(key)!r} vs {b.get(key)!r}): "
                    "the arms must share every setting but history mode and batching"
                )


def mean_std(xs: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for one value; NaN mean for none)."""
    if not xs:
        return float("nan"), float("nan")
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def pm(xs: list[float], scale: float = 1.0, digits: int = 3) -> str:
    m, s = mean_std([x * scale for x in xs])
    return f"{m:.{digits}f}+-{s:.{digits}f}" if xs else "n/a"


def steps_summary(runs: list[Run]) -> tuple[list[int], str]:
    """Optimizer steps of every outer batch of ``runs``, and ``"min-max (mean m)"``."""
    steps = [int(r["optimizer_steps"]) for run in runs for r in run.trains]
    if not steps:
        return steps, "n/a"
    lo, hi = min(steps), max(steps)
    span = f"{lo}" if lo == hi else f"{lo}-{hi}"
    return steps, f"{span} (mean {statistics.fmean(steps):.2f})"


def table1(runs: list[Run]) -> tuple[list[str], dict[str, Any]]:
    """Table 1 (batching): lines and the numbers the RESULT line takes."""
    lines = [
        "Table 1. Batching (both arms tree capture): optimizer steps per outer batch, held-out reward over seeds",
        "| arm | seeds | rows per outer batch | optimizer steps per outer batch | best held-out | final held-out "
        "| design: steps | design: best |",
        "|---|---|---|---|---|---|---|---|",
    ]
    data: dict[str, Any] = {}
    for arm in ("tree-fixed-rows", "tree-fixed-steps"):
        mine = [r for r in runs if r.arm == arm]
        steps, text = steps_summary(mine)
        rows = [int(r["rows"]) for run in mine for r in run.trains]
        best = [r.best for r in mine if r.best is not None]
        final = [r.final for r in mine if r.final is not None]
        rows_text = f"{min(rows)}-{max(rows)}" if rows else "n/a"
        done = sum(1 for r in mine if r.finished)
        seeds = f"{done}" + (f" (+{len(mine) - done} unfinished)" if len(mine) > done else "")
        lines.append(
            f"| {arm} | {seeds} | {rows_text} | {text} | {pm(best)} ({len(best)}) | {pm(final)} ({len(final)}) "
            f"| {DESIGN_STEPS[arm]} | {DESIGN_BEST[arm]:.2f}% |"
        )
        data[arm] = {"steps": steps, "best": best, "final": final, "rows": rows}
    return lines, data


def pairs(runs: list[Run]) -> list[tuple[Run, Run, int]]:
    """(tree-fixed-steps, linear-fixed-steps, common outer batches) per seed that has both with at
    least one outer batch trained, by seed."""
    by = {(r.arm, r.seed): r for r in runs}
    out = []
    for seed in sorted({r.seed for r in runs}):
        tree, linear = by.get(("tree-fixed-steps", seed)), by.get(("linear-fixed-steps", seed))
        if tree and linear and min(len(tree.trains), len(linear.trains)) > 0:
            out.append((tree, linear, min(len(tree.trains), len(linear.trains))))
    return out


def table2(runs: list[Run]) -> tuple[list[str], dict[str, Any]]:
    """Table 2 (history mode): lines and the numbers the RESULT line and Figure 2 take."""
    ps = pairs(runs)
    sums = {arm: dict.fromkeys((*TOTALS, "tokens", "rollout_s", "eval_s"), 0.0) for arm in ("tree", "linear")}
    per_seed: dict[str, list[float]] = {k: [] for k in TOTALS}
    # the trainer's totals compare only the outer batches where both arms ran a pass: a kept group
    # whose rewards all tie has advantage 0 and trains nothing (0 tokens, ~0 s), which is the
    # rollouts' luck, not the capture's (with one prompt per outer batch, any outer batch of a run)
    pooled = {k: [0.0, 0.0] for k in TOTALS}  # (tree, linear) over the outer batches that count for k
    trained_batches = all_batches = 0
    for tree, linear, n in ps:
        tt, lt = tree.totals(n), linear.totals(n)
        for k in sums["tree"]:
            sums["tree"][k] += tt[k]
            sums["linear"][k] += lt[k]
        both = [
            b for b in range(n)
            if tree.trains[b].get("processed_tokens", 0) > 0 and linear.trains[b].get("processed_tokens", 0) > 0
        ]  # fmt: skip
        trained_batches += len(both)
        all_batches += n
        for k in TOTALS:
            if k in TRAINED:
                t = float(sum(tree.trains[b].get(k, 0) for b in both))
                lin = float(sum(linear.trains[b].get(k, 0) for b in both))
            else:
                t, lin = tt[k], lt[k]
            pooled[k][0] += t
            pooled[k][1] += lin
            if t > 0:
                per_seed[k].append(100.0 * (1 - lin / t))
    reduction = {k: (100.0 * (1 - lin / tr) if tr > 0 else float("nan")) for k, (tr, lin) in pooled.items()}
    batches = [n for *_, n in ps]
    lines = [
        "Table 2. History mode (both arms fixed-step batching): totals over "
        + (
            f"{len(ps)} seed(s) x {'/'.join(map(str, batches))} outer batches (each pair's common outer batches)"
            if ps
            else "no seed with both runs yet"
        ),  # fmt: skip
        "| metric | tree | linear | reduction (pooled) | reduction per seed (mean+-std) | design: tree | design: linear "
        "| design: reduction |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def show(k: str, v: float) -> str:
        return f"{v:,.0f}" if k in ("rows", "processed_tokens") else f"{v:,.1f}"

    for k in TOTALS:
        d = DESIGN_TABLE2[k]
        lines.append(
            f"| {LABELS[k]} | {show(k, sums['tree'][k])} | {show(k, sums['linear'][k])} | {reduction[k]:.2f}% "
            f"| {pm(per_seed[k], digits=2)}% | {DESIGN_TEXT[k][0]} | {DESIGN_TEXT[k][1]} | {d[2]:.2f}% |"
        )
    tree_runs = [r for r in runs if r.arm == "tree-fixed-steps"]
    linear_runs = [r for r in runs if r.arm == "linear-fixed-steps"]
    best_t = [r.best for r in tree_runs if r.best is not None]
    best_l = [r.best for r in linear_runs if r.best is not None]
    lines.append(
        f"| best held-out reward | {pm(best_t)} ({len(best_t)}) | {pm(best_l)} ({len(best_l)}) | - | - "
        f"| {DESIGN_BEST['tree-fixed-steps']:.2f}% (batching run) | {DESIGN_BEST['linear-fixed-steps']:.2f}% | - |"
    )
    if trained_batches < all_batches:
        lines.append(
            f"processed tokens and actor-update time: reductions over the {trained_batches} of {all_batches} outer "
            "batch(es) whose arms both ran a pass (in the others a kept group's rewards all tied in one arm or both: "
            "advantage 0, nothing trained); the columns above are every outer batch's"
        )
    extra = (
        f"also: tokens in the outer batches' rows tree {sums['tree']['tokens']:,.0f} / linear {sums['linear']['tokens']:,.0f}; "
        f"rollout time {sums['tree']['rollout_s']:,.0f} / {sums['linear']['rollout_s']:,.0f} s; held-out evaluations "
        f"{sums['tree']['eval_s']:,.0f} / {sums['linear']['eval_s']:,.0f} s"
    )
    lines.append(extra)
    return lines, {"pairs": ps, "sums": sums, "reduction": reduction, "per_seed": per_seed,
                   "best_tree": best_t, "best_linear": best_l, "trained_batches": (trained_batches, all_batches)}  # fmt: skip


def result_line(
    runs: list[Run], t1: dict[str, Any], t2: dict[str, Any], arms: Sequence[str] = tuple(ARMS)
) -> str:
    """``RESULT seeds=... outer_batches=... rows_reduction=... ...`` (the issue's keys, in its order).

    ``seeds``: the seeds finished in every arm of ``arms`` (the arms asked for); ``seeds_per_arm``
    (last, beyond the issue's keys): per arm of ``arms`` the runs with a held-out evaluation after
    training (finished or not), ``ARM:N`` joined by ``/``: the count each arm's ``best_*`` is over;
    ``outer_batches``:
    the fewest outer batches a finished run of those arms has (0 with none finished). A key that needs an arm not in ``arms`` is ``n/a``: the
    reductions and ``best_tree`` / ``best_linear`` need tree-fixed-steps and linear-fixed-steps,
    ``best_fixed_rows`` and ``steps_per_batch_fixed_rows`` tree-fixed-rows, ``best_fixed_steps`` and
    ``steps_per_batch_fixed_steps`` tree-fixed-steps.
    """
    done = {(r.arm, r.seed) for r in runs if r.finished}
    seeds = sum(1 for s in sorted({r.seed for r in runs}) if all((a, s) in done for a in arms))
    batches = min((len(r.trains) for r in runs if r.finished and r.arm in arms), default=0)
    red = t2["reduction"]
    history = "tree-fixed-steps" in arms and "linear-fixed-steps" in arms

    def reduction(key: str) -> str:
        return f"{red[key]:.2f}%" if history else "n/a"

    def when(arm: str, text: str) -> str:
        return text if arm in arms else "n/a"

    steps_rows = t1["tree-fixed-rows"]["steps"]
    steps_fixed = sorted(set(t1["tree-fixed-steps"]["steps"]))
    rows_span = f"{min(steps_rows)}-{max(steps_rows)}" if steps_rows else "n/a"
    mean_rows = f"{statistics.fmean(steps_rows):.2f}" if steps_rows else "nan"
    return (
        f"RESULT seeds={seeds} outer_batches={batches} rows_reduction={reduction('rows')} "
        f"tokens_reduction={reduction('processed_tokens')} actor_s_reduction={reduction('actor_update_s')} "
        f"e2e_reduction={reduction('e2e_s')} best_tree={when('tree-fixed-steps', pm(t2['best_tree']))} "
        f"best_linear={when('linear-fixed-steps', pm(t2['best_linear']))} "
        f"best_fixed_rows={when('tree-fixed-rows', pm(t1['tree-fixed-rows']['best']))} "
        f"best_fixed_steps={when('tree-fixed-steps', pm(t1['tree-fixed-steps']['best']))} "
        f"steps_per_batch_fixed_rows={when('tree-fixed-rows', f'{mean_rows}({rows_span})')} "
        f"steps_per_batch_fixed_steps={when('tree-fixed-steps', '/'.join(map(str, steps_fixed)) or 'n/a')} "
        f"seeds_per_arm={'/'.join(f'{a}:{sum(1 for r in runs if r.arm == a and r.best is not None)}' for a in arms)}"
    )


def report(
    runs: list[Run], arms: Sequence[str] = tuple(ARMS)
) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    """Per-run lines, Table 1, Table 2 and the RESULT line (last; :func:`result_line` of ``arms``,
    the arms asked for)."""
    check_same_settings(runs)
    lines = ["runs (arm, seed: outer batches trained / asked, held-out reward at each evaluation):"]
    for run in sorted(runs, key=lambda r: (list(ARMS).index(r.arm), r.seed)):
        evals = ", ".join(f"after {b}: {v:.3f} ({n} rollouts)" for b, v, n, _ in run.evals)
        lines.append(
            f"  {run.arm} seed {run.seed}: {len(run.trains)}/{run.settings['outer_batches']} ({run.state}); {evals}; "
            f"code {', '.join(run.commits) or 'not recorded'}"
        )
        for r in run.trains:
            lines.append(
                f"    outer batch {r['outer_batch']}: rows {r.get('rows', 0)}, steps {r.get('optimizer_steps', 0)}, "
                f"processed tokens {r.get('processed_tokens', 0)}, actor {r.get('actor_update_s', 0):.1f} s, "
                f"rollouts {r.get('rollout_s', 0):.0f} s, e2e {r.get('e2e_s', 0):.0f} s, "
                f"reward {r.get('reward_mean', float('nan')):.3f}, tied groups {r.get('zero_advantage_groups', 0)}"
                + (
                    f", drawn {r['groups_drawn']} groups / {r.get('rollouts_drawn', 0)} rollouts "
                    f"({r.get('groups_with_signal', 0)} with signal)"
                    if "groups_drawn" in r
                    else ""
                )  # --max-draws
            )
    l1, t1 = table1(runs)
    l2, t2 = table2(runs)
    return [*lines, "", *l1, "", *l2, "", result_line(runs, t1, t2, arms)], t1, t2


def commits_of(code: list[dict[str, Any]]) -> list[str]:
    """The commits that trained a run, from its ``code.jsonl`` lines (:attr:`Run.code`), in order,
    each once: its first 12 hex digits, ``+dirty`` when its tracked files differed, ``+dirty?`` when
    that is not known; ``?`` for a process that found no commit, and ``?`` first when the first
    recorded process started after outer batch 0 (the batches before it ran code not recorded)."""
    out: list[str] = []
    if code and (code[0].get("from_batch") or code[0].get("resume")):
        out.append("?")
    for line in code:
        commit = line.get("commit")
        c = (
            "?"
            if not commit
            else str(commit)[:12] + {True: "+dirty", None: "+dirty?"}.get(line.get("dirty"), "")
        )
        if c not in out:
            out.append(c)
    return out


def code_note(per_run: list[list[str]]) -> str | None:
    """A header line when the runs (each its :func:`commits_of`) did not all run one clean commit:
    more than one commit (or a checkout with changed files), or runs that did not record their
    code; None when they did."""
    unrecorded = sum(1 for c in per_run if not c)
    commits = sorted({c for run in per_run for c in run})
    if len(commits) > 1 or any("+dirty" in c or c == "?" for c in commits):
        return f"# CODE: the runs ran {len(commits)} commit(s): {', '.join(commits)} (each run's line names its own)"
    if unrecorded and commits:
        return f"# CODE: {unrecorded} run(s) did not record their code (started before code.jsonl); the others ran {commits[0]}"
    return None
