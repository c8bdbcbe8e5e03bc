"""The runs of ``bench/update_cost.py``: each run directory's numbers read strictly
(:func:`run_summary`), per arm over its seeds (:func:`arm_summary`), the run root's copy or the
archived one (:func:`read_run`, :func:`summarize`), a finished run archived without this machine's
paths (:func:`archive_run`, :func:`keep`) and the summary as strict JSON (:func:`write_json`).

Raises (every reader): :class:`run_reader.RunFileError` naming the file and line.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path
from typing import Any

from run_reader import RunFileError, read_jsonl, read_metrics, read_settings, require
from run_settings import TASK_KEYS
from seed_archive import LOGS, comparable, write_copy
from seed_tables import commits_of

from strands_art.training.provenance import read_code

ARMS = ("before", "after")
TRAIN_NEEDS = {
    "rollout_s": "number",
    "train_s": "number",
    "optimizer_steps": "int?",
    "zero_gradient_steps": "int?",
}
EVAL_NEEDS = {"val_reward": "number", "eval_s": "number"}
"""The keys of the train and eval records read (``?``: checked where present; :func:`run_reader.require`)."""


def run_summary(run_dir: Path) -> dict[str, Any]:
    """The numbers of one run directory (finished or not).

    ``finished``: its log has the evaluation after its last outer batch; ``unsure``: not finished,
    every outer batch trained and the log's last line torn (it may be the final evaluation).

    Raises:
        RunFileError: see :mod:`run_reader`: ``train.json`` without an integer ``outer_batches``; a
            line of ``metrics.jsonl`` or ``env/rollouts/results.jsonl`` that cannot be read, a
            record without :data:`TRAIN_NEEDS` / :data:`EVAL_NEEDS`, a result without a ``rollout_id``.
    """
    n = read_settings(run_dir, {"outer_batches": "int"})["outer_batches"]
    metrics = read_metrics(run_dir / "metrics.jsonl", TRAIN_NEEDS, EVAL_NEEDS)
    trains, evals = metrics.trains, metrics.evals
    finished = any(r["outer_batch"] == n for r in evals)
    hits = lookups = memo_hits = 0
    memo_saved = 0.0
    results = read_jsonl(run_dir / "env" / "rollouts" / "results.jsonl")
    seen: dict[str, Any] = {}
    for line, rec in results.records:
        require(f"{results.path}:{line}", rec, {"rollout_id": "str"})
        seen[rec["rollout_id"]] = rec
    for rec in seen.values():
        if "eval_cache_hit" in rec:
            lookups += 1
            hits += bool(rec["eval_cache_hit"])
        stats = rec.get("tool_stats") or {}
        memo_hits += int(stats.get("maven_memo_hits", 0))
        memo_saved += float(stats.get("maven_memo_saved_s", 0.0))
    return {
        "finished": finished,
        "unsure": not finished and metrics.torn is not None and len(trains) == n,
        "update_s": [r["rollout_s"] + r["train_s"] for r in trains],
        "rollout_s": [r["rollout_s"] for r in trains],
        "train_s": [r["train_s"] for r in trains],
        "useful_steps": [r.get("optimizer_steps", 0) - r.get("zero_gradient_steps", 0) for r in trains],
        "optimizer_steps": [r.get("optimizer_steps", 0) for r in trains],
        "rollouts": [r.get("rollouts_drawn", r.get("rows", 0)) for r in trains],
        "groups_with_signal": [r.get("groups_with_signal") for r in trains],
        "eval_s": [r["eval_s"] for r in evals],
        "heldout": [(r["outer_batch"], r["val_reward"]) for r in evals],
        "cache_hits": hits,
        "cache_lookups": lookups,
        "memo_hits": memo_hits,
        "memo_saved_s": memo_saved,
        "metrics_torn": metrics.torn,
        "commits": commits_of(read_code(run_dir)),
    }


def mean(xs: list[float]) -> float:
    return statistics.fmean(xs) if xs else float("nan")


def mean_std(xs: list[float], digits: int = 3) -> str:
    """``MEAN+-STD`` (sample standard deviation; 0 for one value) with ``digits`` decimals; ``nan``
    for no value."""
    if not xs:
        return "nan"
    return f"{statistics.fmean(xs):.{digits}f}+-{statistics.stdev(xs) if len(xs) > 1 else 0.0:.{digits}f}"


def arm_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One arm over its runs: pooled means (``s_per_update``: every update of every run, seconds;
    ``s_per_eval``; ``useful_steps_per_hour``: steps with a gradient per hour of update time) and
    the spread over runs (``*_seeds``: mean +- standard deviation of each run's own mean, text;
    ``heldout_first`` / ``heldout_last`` the same of the first and last evaluation)."""
    update_s = [x for r in runs for x in r["update_s"]]
    useful = sum(x for r in runs for x in r["useful_steps"])
    hours = sum(update_s) / 3600
    last = [r["heldout"][-1][1] for r in runs if len(r["heldout"]) >= 2]
    first = [r["heldout"][0][1] for r in runs if len(r["heldout"]) >= 2]
    return {
        "runs": len(runs),
        "updates": len(update_s),
        "s_per_update": mean(update_s),
        "s_per_eval": mean([x for r in runs for x in r["eval_s"]]),
        "s_per_update_seeds": mean_std([mean(r["update_s"]) for r in runs if r["update_s"]], 0),
        "s_per_eval_seeds": mean_std([mean(r["eval_s"]) for r in runs if r["eval_s"]], 0),
        "useful_steps": useful,
        "optimizer_steps": sum(x for r in runs for x in r["optimizer_steps"]),
        "useful_steps_per_hour": useful / hours if hours else float("nan"),
        "rollouts_per_update": mean([x for r in runs for x in r["rollouts"]]),
        "cache_hits": sum(r["cache_hits"] for r in runs),
        "cache_lookups": sum(r["cache_lookups"] for r in runs),
        "memo_hits": sum(r["memo_hits"] for r in runs),
        "memo_saved_s": sum(r["memo_saved_s"] for r in runs),
        "heldout_first": mean_std(first),
        "heldout_last": mean_std(last),
        "heldout_first_values": first,
        "heldout_last_values": last,
    }


def paired(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per seed that both arms ran (keys of ``runs``: ``ARM-seedS``), after / before of the seconds
    per update, the seconds per evaluation and the useful steps per hour of update time; and each
    ratio's mean +- standard deviation over those seeds (text). A seed where a ratio is undefined
    (no update, no useful step before) is left out of that ratio."""
    seeds = sorted({int(n.rsplit("-seed", 1)[1]) for n in runs})
    per_seed: dict[int, dict[str, float]] = {}
    for seed in seeds:
        b, a = runs.get(f"before-seed{seed}"), runs.get(f"after-seed{seed}")
        if b is None or a is None:
            continue
        ratios = {}
        for key in ("update_s", "eval_s"):
            if b[key] and a[key]:
                ratios[key] = mean(a[key]) / mean(b[key])
        rates = [
            sum(r["useful_steps"]) / (sum(r["update_s"]) / 3600) if sum(r["update_s"]) else None
            for r in (b, a)
        ]
        if rates[0] and rates[1] is not None:
            ratios["useful_steps_per_hour"] = rates[1] / rates[0]
        per_seed[seed] = ratios
    keys = ("update_s", "eval_s", "useful_steps_per_hour")
    return {
        "per_seed": per_seed,
        "spread": {k: mean_std([r[k] for r in per_seed.values() if k in r], 2) for k in keys},
    }


ARCHIVED = LOGS
"""The logs :func:`archive_run` keeps beside ``train.json``: everything :func:`run_summary` reads,
and the code that trained the run (``code.jsonl``), as ``seed_experiments.py``'s archive."""


def read_run(root: Path, name: str, archive: Path | None = None) -> dict[str, Any] | None:
    """:func:`run_summary` of run ``name`` (``ARM-seedS``): the run root's copy, or the archived one
    when the run root has none or an unfinished one (archived runs are finished); None if neither
    holds a ``train.json``. ``where`` says which was read.

    Raises:
        RunFileError: see :func:`run_summary`; both copies there with other settings
            (``seed_archive.comparable``); an archived run that is not a directory, or (with no copy
            in the run root) has no ``train.json`` or is not finished (only finished runs are
            archived): damaged, said rather than dropped or run again quietly. With a copy in the
            run root, an archived copy without ``train.json`` (cut short while written) is the run
            root's to archive again.
    """
    here = run_summary(root / name) if (root / name / "train.json").exists() else None
    if archive is None or not os.path.lexists(archive / name):
        return None if here is None else {**here, "where": "run root"}
    if not (archive / name).is_dir() or (archive / name).is_symlink():
        raise RunFileError(f"{archive / name}: an archived run must be a directory (not a link or a file)")
    if not (archive / name / "train.json").is_file():
        if here is not None:  # a copy cut short (train.json is written last): archived again from here
            return {**here, "where": "run root"}
        raise RunFileError(
            f"{archive / name / 'train.json'}: missing, and the run root has no copy of the run: the archived run "
            "is damaged or was cut short while written; restore it (git checkout) or remove the directory to run "
            "it again"
        )
    if here is not None:
        mine, kept = (comparable(read_settings(d / name, {})) for d in (root, archive))
        if mine != kept:
            keys = sorted(k for k in mine.keys() | kept.keys() if mine.get(k) != kept.get(k))
            raise RunFileError(
                f"{root / name} and its archived copy {archive / name} differ in {', '.join(keys)}: "
                "not mixed; remove the one that is not this bench's"
            )
        if here["finished"]:
            return {**here, "where": "run root"}
    kept_run = run_summary(archive / name)
    if not kept_run["finished"] and here is not None:  # the run root's copy goes on, archived when finished
        return {**here, "where": "run root"}
    if not kept_run["finished"]:  # only finished runs are archived (keep): this one lost records
        raise RunFileError(
            f"{archive / name / 'metrics.jsonl'}: the archived run has no evaluation after its last outer batch: "
            "damaged (only finished runs are archived); restore it (git checkout) or remove the directory to run "
            "it again"
        )
    return {**kept_run, "where": "archive"}


def summarize(root: Path, seeds: list[int], archive: Path | None = None) -> dict[str, Any]:
    """Per run (``ARM-seedS`` holding a ``train.json``, :func:`read_run`) :func:`run_summary`, per
    arm :func:`arm_summary`.

    Raises:
        RunFileError: see :func:`run_summary`.
    """
    out: dict[str, Any] = {"arms": {}, "runs": {}}
    for arm in ARMS:
        runs = []
        for seed in seeds:
            s = read_run(root, f"{arm}-seed{seed}", archive)
            if s is not None:
                out["runs"][f"{arm}-seed{seed}"] = s
                runs.append(s)
        out["arms"][arm] = arm_summary(runs)
    out["paired"] = paired(out["runs"])
    return out


def archive_run(root: Path, name: str, archive: Path, places: list[str]) -> None:
    """Copy what :func:`run_summary` reads of the finished run ``root/name`` into ``archive/name``:
    ``train.json`` with ``run_dir`` as ``$RUN_ROOT/name`` and the task directories as
    ``$TASKS/<name>``, and the logs of :data:`ARCHIVED`. Each file is written whole (a temporary
    file renamed over it).

    Raises:
        ValueError: a log names the run root, one of ``places`` (today's task directories) or the
            run's own task directories (a path of this machine in a committed file); nothing of the
            run is written then.
        RunFileError: ``train.json`` cannot be read.
    """
    src, dest = root / name, archive / name
    settings = read_settings(src, {"outer_batches": "int"})
    own = [os.path.abspath(settings[k]) for k in TASK_KEYS if settings.get(k)]  # the run's, maybe not today's
    settings["run_dir"] = f"$RUN_ROOT/{name}"
    for key in TASK_KEYS:
        if settings.get(key):
            settings[key] = "$TASKS/" + Path(settings[key]).name
    texts: dict[str, str | None] = {}
    for log in ARCHIVED:
        texts[log] = None
        if (src / log).exists():
            text = (src / log).read_text(encoding="utf-8")
            for place in dict.fromkeys((os.path.abspath(root), os.path.realpath(root), *places, *own)):
                if place in text:
                    raise ValueError(f"{src / log} names {place}: not archived (a path of this machine)")
            texts[log] = text
    write_copy(dest, texts, settings)  # a log the run lacks: an older copy's removed


def write_json(path: str, summary: dict[str, Any]) -> None:
    """``summary`` as strict JSON into ``path``: a number that is not defined yet (an arm with no
    update, evaluation or cache lookup: NaN in the summary) is written ``null``."""

    def defined(x: Any) -> Any:
        if isinstance(x, float) and math.isnan(x):
            return None
        if isinstance(x, dict):
            return {k: defined(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [defined(v) for v in x]
        return x

    Path(path).write_text(json.dumps(defined(summary), indent=2, allow_nan=False) + "\n", encoding="utf-8")


def keep(summary: dict[str, Any], root: Path, archive: Path | None, places: list[str]) -> None:
    """:func:`archive_run` every finished run of ``summary`` read from the run root (none without
    ``archive``).

    Raises:
        ValueError, RunFileError: see :func:`archive_run`.
    """
    for name, s in summary["runs"].items():
        if archive is not None and s["finished"] and s["where"] == "run root":
            archive_run(root, name, archive, places)
