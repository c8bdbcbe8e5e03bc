"""``strands-art make-tasks OUT --from-records R --repos D``: the records of ``R`` made into tasks
under ``OUT``, one at a time, resumable (each record by :func:`.realtasks.make_real_task`).

Which records: every one of ``R`` (:func:`.tasks.read_records`; rows with an unparsed test
count are skipped with a line) that has a clone holding ``base_commit`` under ``D``
(:func:`.realtasks.find_clone`), or only those ``--only`` names: each of them must be a usable
record with a clone, else the command exits 2 naming what is wrong. Records already in
``OUT/report.jsonl`` are skipped (``--retry-blocked`` makes the blocked ones again,
``--remake`` every selected one, made or blocked, ``--recheck`` scores a new ``--reference`` of the
made ones; a record whose remake did not finish, ``remaking`` in the report, is made again by
any run). Prints one line per record and a
``RESULT records=… made=… blocked=… reference_ok=…`` line. ``--max-seconds`` with ``--remake``
prints the ``--only`` list of the records left (the same flags again would remake those already
remade)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from strands_art.envs.migrationbench.generate.realtasks import (
    REMAKING,
    done_records,
    find_clone,
    line,
    make_real_task,
    mark_remaking,
    recheck_reference,
    task_dir_name,
)
from strands_art.envs.migrationbench.tasks.tasks import TaskError, read_records


def _reference_for(reference: Path | None, repo: str, single: bool) -> Path | None:
    if reference is None:
        return None
    if reference.is_dir():
        p = reference / f"{task_dir_name(repo)}.patch"
        return p if p.is_file() else None
    return reference if single else None


def _only(
    args: argparse.Namespace, records: list[dict[str, Any]], skipped: list[tuple[int, str, str]]
) -> set[str] | str | None:
    """The repos ``--only`` names (None without it), or why it names one that is not a record."""
    if not getattr(args, "only", None):
        return None
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    unknown = sorted(only - {r["repo"] for r in records})
    if not only or unknown:
        why = {repo: reason for _, repo, reason in skipped}
        said = "; ".join(
            f"{x} was skipped: {why[x]}" if x in why else f"{x} is not a record" for x in unknown
        )
        return f"--only {args.only!r}: {said or 'no repo given'} (records: {args.from_records})"
    return only


def _continue(args: argparse.Namespace, left: list[tuple[dict[str, Any], Path]]) -> str:
    """How to go on after ``--max-seconds`` stopped before ``left``: the same command; with
    ``--remake`` (which would remake again the ones this run remade) ``--only`` those left."""
    if not args.remake:
        return "run again to continue"
    return f"to remake the rest, run again with --remake --only {','.join(r['repo'] for r, _ in left)}"


def make_tasks_from_records(args: argparse.Namespace) -> int:
    """``strands-art make-tasks OUT --from-records R --repos D [--reference P]``: 0 when every
    record tried was made (and its reference scored 1.0), 1 otherwise, 2 for bad arguments (an
    unreadable records file; an ``--only`` repo that is no record, was skipped, or has no clone)."""
    from strands_art.envs.sandbox import SandboxError

    out, repos = Path(args.out_dir), Path(args.repos) if args.repos else None
    reference = Path(args.reference) if args.reference else None
    if repos is None or not repos.is_dir():
        print(f"strands-art make-tasks: --repos {args.repos!r} is not a directory of clones", file=sys.stderr)
        return 2
    if reference is not None and not reference.exists():
        print(f"strands-art make-tasks: --reference {reference} does not exist", file=sys.stderr)
        return 2
    skipped: list[tuple[int, str, str]] = []
    try:
        records = read_records(args.from_records, skipped)
    except TaskError as exc:
        print(f"strands-art make-tasks: {exc}", file=sys.stderr)
        return 2
    for i, repo, why in skipped:
        print(f"skipped row {i} {repo}: {why}", flush=True)
    only = _only(args, records, skipped)
    if isinstance(only, str):
        print(f"strands-art make-tasks: {only}", file=sys.stderr)
        return 2
    todo = []
    for record in records:
        if only is not None and record["repo"] not in only:
            continue
        git_dir = find_clone(repos, record["repo"], record["base_commit"])
        if git_dir is not None:
            todo.append((record, git_dir))
    without = sorted(only - {r["repo"] for r, _ in todo}) if only is not None else []
    if without:
        print(
            f"strands-art make-tasks: --only {','.join(without)}: no clone holding base_commit under "
            f"{repos} (looked for OWNER__NAME, OWNER+NAME[/repo] and OWNER/NAME there)",
            file=sys.stderr,
        )
        return 2
    out.mkdir(parents=True, exist_ok=True)
    done = done_records(out)
    print(
        f"{len(todo)} of {len(records)} records have a clone under {repos}; {len(done)} already done",
        flush=True,
    )
    t0 = time.monotonic()
    for i, (record, git_dir) in enumerate(todo, 1):
        ref = _reference_for(reference, record["repo"], single=len(todo) == 1)
        prior = done.get(record["repo"])
        again = prior is not None and (
            args.remake
            or prior["status"] == REMAKING
            or (prior["status"] == "blocked" and args.retry_blocked)
        )
        if again:
            prior = None  # made again from the start (e.g. after installing a Debian package)
        if prior is not None and not (
            ref is not None and prior["status"] == "made" and prior.get("reference") != 1.0 and args.recheck
        ):
            continue
        if args.max_seconds and time.monotonic() - t0 > args.max_seconds:
            print(f"stopped after {args.max_seconds:.0f} s: {_continue(args, todo[i - 1 :])}", flush=True)
            break
        try:
            if prior is not None and ref is not None:
                r = recheck_reference(prior, out, ref, timeout_s=args.timeout, max_rounds=args.max_rounds)
            else:
                if again:  # its directory goes first: the report must not call it made meanwhile
                    done[record["repo"]] = mark_remaking(out, record)
                r = make_real_task(
                    record, git_dir, out, reference=ref, timeout_s=args.timeout, max_rounds=args.max_rounds
                )
        except SandboxError as exc:
            print(f"strands-art make-tasks: the sandbox cannot start: {exc}", file=sys.stderr)
            return 2
        done[record["repo"]] = r
        print(f"[{i}/{len(todo)} {time.monotonic() - t0:.0f}s] {line(r)}", flush=True)
    results = [done[r["repo"]] for r, _ in todo if r["repo"] in done]
    made = [r for r in results if r["status"] == "made"]
    ref_ok = [r for r in made if r.get("reference") == 1.0]
    print(
        f"RESULT records={len(results)} made={len(made)} blocked={len(results) - len(made)} "
        f"reference_ok={len(ref_ok)}",
        flush=True,
    )
    return (
        0
        if len(results) == len(todo)
        and all(r.get("reference") in (None, 1.0) for r in made)
        and len(made) == len(results)
        else 1
    )
