"""Real MigrationBench repositories as tasks: one record made into a task, and the report.

``strands-art make-tasks OUT --from-records R --repos D`` (:mod:`.fromrecords`) runs, for each record (:func:`.tasks.read_records`: CSV, Parquet, JSON or JSONL as published) whose
repository has a local clone under ``--repos`` (:func:`find_clone`), :func:`make_real_task`:

1. exports ``base_commit`` into ``OUT/<owner>__<name>/repo`` (a git repository whose ``HEAD`` is
   that commit; its files are checked to hash to the commit's tree, so ``repo/`` is
   byte-identical to upstream) and writes ``task.json``: the record as published, plus ``real``
   (the static counts of :func:`.taskinfo.compute_fields`, the tree id, the builder's check);
2. scores the untouched tree with the evaluator, reads what Maven could not resolve from its log
   (:func:`.offline_propose.missing_coordinates`) and proposes ``offline/``
   (:func:`.offline_propose.propose`), declared in ``task.json`` (:mod:`.offline_env`); repeats
   while a round serves something new (at most ``max_rounds``, then scores once more: a reactor
   build stops at its first module that does not resolve, so each round may reveal more);
3. is *made* when nothing is left unresolved and the untouched tree scores below 1.0; else
   *blocked*, with the exact coordinates (the directory moves to ``OUT/_blocked/``, which holds no
   task, so ``--tasks-dir OUT`` never runs it);
4. with a reference migration (``--reference PATCH``, or a directory of ``<owner>__<name>.patch``)
   copies it to ``reference.patch`` and scores it (must be 1.0; what its test build could not
   resolve is proposed too, and the untouched tree is scored again if ``offline/`` changed).

The last Maven logs of each record are kept in ``OUT/_logs/<owner>__<name>/``. Each record's
outcome is one line of ``OUT/report.jsonl``, written when the record is done, so a
killed run resumes: records with a line are skipped, a half-made directory is made again. A
record made again from the start (``--remake``, ``--retry-blocked``) loses its task directory
first: a ``remaking`` line (:func:`mark_remaking`) says so until its new outcome is written.
``--max-seconds`` stops starting records after that long (run again to continue).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from strands_art.envs.migrationbench.evaluate.evaluator import EvalResult, EvalTask, evaluate
from strands_art.envs.migrationbench.evaluate.verify import apply_patch
from strands_art.envs.migrationbench.generate.offline_propose import Missing, missing_coordinates, propose
from strands_art.envs.migrationbench.tasks.offline_env import OFFLINE_DIR, TASK_KEY, declaration
from strands_art.envs.migrationbench.tasks.taskinfo import compute_fields, git_tree_id
from strands_art.envs.migrationbench.tasks.tasks import RECORD_FIELDS

logger = logging.getLogger(__name__)

REPORT = "report.jsonl"
BLOCKED_DIR = "_blocked"
REMAKING = "remaking"
"""The status of a record whose task is being made again (:func:`mark_remaking`): neither made nor blocked."""
LOGS_DIR = "_logs"


class BuildError(RuntimeError):
    """A record cannot be exported (git failed, or the checkout is not the commit's tree)."""


def task_dir_name(repo: str) -> str:
    """``owner/name`` -> ``owner__name`` (the task directory's name)."""
    return repo.replace("/", "__")


def _git(args: list[str], cwd: Path | None = None, what: str | None = None) -> str:
    """Run git; its stdout. Raises BuildError naming ``what`` (default: the command line) and the
    tail of git's stderr."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": tempfile.gettempdir(),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
    }
    proc = subprocess.run(
        ["git", "-c", "core.autocrlf=false", "-c", "protocol.file.allow=always", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        said = " ".join(proc.stderr.split())[-400:]
        raise BuildError(f"{what or 'git ' + ' '.join(args)[:200]} failed: {said}")
    return proc.stdout.strip()


def find_clone(repos_dir: Path, repo: str, commit: str) -> Path | None:
    """A git directory under ``repos_dir`` that holds ``repo`` at ``commit``, or None.

    Looked for as ``owner__name``, ``owner+name/repo``, ``owner+name`` and ``owner/name``, each a
    work tree (with ``.git``) or a bare repository.
    """
    owner, name = repo.split("/", 1)
    for cand in (
        repos_dir / f"{owner}__{name}",
        repos_dir / f"{owner}+{name}" / "repo",
        repos_dir / f"{owner}+{name}",
        repos_dir / owner / name,
    ):
        for git_dir in (cand / ".git", cand):
            if git_dir.is_dir() and ((git_dir / "objects").is_dir() or (git_dir / "HEAD").exists()):
                try:
                    _git(["--git-dir", str(git_dir), "cat-file", "-e", f"{commit}^{{commit}}"])
                except BuildError:
                    continue
                return git_dir
    return None


def export_commit(git_dir: Path, commit: str, dest: Path) -> str:
    """Make ``dest`` a git repository whose ``HEAD`` is ``commit`` (one commit deep), checked out.

    Returns the commit's tree id. Raises BuildError when git fails or the files do not hash to
    that tree (a checkout filter or line-ending rule changed them: not byte-identical). A
    submodule (a gitlink in the tree, :func:`gitlinks`) is left as git leaves it, an empty
    directory, and hashes as its gitlink: upstream's tree records only the submodule's commit,
    so a task holds none of its files (a build that needs them fails as it would upstream
    without ``git submodule update``).
    """
    dest.mkdir(parents=True)
    _git(["init", "-q", str(dest)])
    clone = str(git_dir.resolve())
    try:  # the message names no path of this machine (it goes into reports)
        _git(
            ["fetch", "-q", "--depth", "1", clone, commit],
            cwd=dest,
            what="git fetch of base_commit from the clone",
        )
    except BuildError as exc:
        raise BuildError(str(exc).replace(clone, "<clone>")) from None
    _git(["checkout", "-q", "--detach", "FETCH_HEAD"], cwd=dest)
    head = _git(["rev-parse", "HEAD"], cwd=dest)
    if head != commit:
        raise BuildError(f"HEAD is {head}, not {commit}")
    tree = _git(["rev-parse", "HEAD^{tree}"], cwd=dest)
    if git_tree_id(dest, gitlinks(dest)) != tree:
        raise BuildError(
            f"the checkout of {commit} does not hash to its tree {tree} (a filter changed files)"
        )
    return tree


def gitlinks(repo: Path) -> dict[str, str]:
    """The submodules of ``repo``'s ``HEAD``: relative path -> the commit its tree records."""
    out = {}
    for entry in _git(["ls-tree", "-r", "-z", "HEAD"], cwd=repo).split("\0"):
        info, _, path = entry.partition("\t")
        if info.split(" ")[:2] == ["160000", "commit"]:
            out[path] = info.split(" ")[2]
    return out


def _write_json(path: Path, value: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _score(
    task_dir: Path, work: Path, label: str, patch: Path | None, timeout_s: float
) -> tuple[EvalResult, str]:
    """Evaluate a copy of ``repo/`` (with ``patch`` applied); return the result and both logs."""
    copy = work / label
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(task_dir / "repo", copy, symlinks=True)
    if patch is not None:
        apply_patch(copy, patch)
    log = work / f"{label}.log"
    result = evaluate(copy, EvalTask.from_dir(task_dir), timeout_s=timeout_s, log_path=log)
    shutil.rmtree(copy, ignore_errors=True)
    text = ""
    keep = task_dir.parent / LOGS_DIR / task_dir.name  # the last build logs of each label, for a reader
    keep.mkdir(parents=True, exist_ok=True)
    for p in (log.with_name(f"{log.stem}.compile{log.suffix}"), log):
        if p.is_file():
            text += p.read_text(encoding="utf-8", errors="replace")
            shutil.copyfile(p, keep / p.name)
    return result, text


def _add_offline(task_dir: Path, files: dict[str, str | bytes], served: list[str]) -> None:
    """Write ``files`` into ``task_dir/offline`` and declare the whole directory in ``task.json``."""
    root = task_dir / OFFLINE_DIR
    for rel, text in files.items():
        out = root.joinpath(*rel.split("/"))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    meta_path = task_dir / "task.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    before = meta.get(TASK_KEY, {}).get("served", [])
    meta[TASK_KEY] = declaration(root, served=sorted({*before, *served}))
    _write_json(meta_path, meta)


def _resolve_rounds(
    task_dir: Path, work: Path, label: str, patch: Path | None, timeout_s: float, max_rounds: int, state: dict
) -> tuple[EvalResult, list[Missing]]:
    """Score, propose what failed to resolve, repeat; return the last result and what is unresolved."""
    result, unresolved = None, []
    for i in range(max_rounds + 1):  # the last score checks the last round's proposal
        result, log = _score(task_dir, work, label, patch, timeout_s)
        unresolved = missing_coordinates(log)
        new = [m for m in unresolved if str(m) not in state["tried"]]
        if not new or i == max_rounds:
            break
        state["tried"].update(str(m) for m in new)
        prop = propose(new, project_dir=task_dir / "repo")
        state["blocked"] += [b for b in prop.blocked if b not in state["blocked"]]
        if not prop.files:
            break
        _add_offline(task_dir, prop.files, prop.served)
        state["changed"] = True
    assert result is not None
    return result, unresolved


def make_real_task(
    record: dict[str, Any],
    git_dir: Path,
    out: Path,
    *,
    reference: Path | None = None,
    timeout_s: float = 600.0,
    max_rounds: int = 6,
) -> dict[str, Any]:
    """Make (or block) the task of one record under ``out``; return its report line (module doc).

    Raises:
        SandboxError: the sandbox cannot start (nothing can be checked on this machine).
    """
    name = task_dir_name(record["repo"])
    task_dir = out / name
    t0 = time.monotonic()
    report = _report_head(record)
    for stale in (task_dir, out / BLOCKED_DIR / name):
        if stale.exists():
            shutil.rmtree(stale)
    with tempfile.TemporaryDirectory(prefix=f"make-{name}-", dir=out) as tmp:
        work = Path(tmp)
        try:
            tree = export_commit(git_dir, record["base_commit"], task_dir / "repo")
        except (BuildError, OSError) as exc:
            return _blocked(out, task_dir, report | {"blocked": [f"export: {exc}"]}, t0)
        try:
            static = compute_fields(task_dir / "repo", dict(record), name=name)
        except (OSError, ValueError) as exc:
            static = {"error": " ".join(str(exc).split())[:300]}
        meta = {f: record.get(f) for f in RECORD_FIELDS}
        meta["real"] = {
            "source": "MigrationBench record as published; repo/ is upstream's tree at base_commit, untouched",
            "upstream_tree": tree,
            "static_fields": {k: v for k, v in static.items() if k not in ("repo", "license", "base_commit")},
        }
        links = gitlinks(task_dir / "repo")
        if links:  # upstream's tree records these submodules' commits, not their files
            meta["real"]["submodules_absent"] = links
        _write_json(task_dir / "task.json", meta)
        state: dict[str, Any] = {"tried": set(), "blocked": [], "changed": False}
        untouched, unresolved = _resolve_rounds(
            task_dir, work, "untouched", None, timeout_s, max_rounds, state
        )
        ref_result = None
        patch = None
        if reference is not None and not unresolved:
            patch = task_dir / "reference.patch"
            shutil.copyfile(reference, patch)
            state["changed"] = False
            try:
                ref_result, ref_unresolved = _resolve_rounds(
                    task_dir, work, "reference", patch, timeout_s, max_rounds, state
                )
                unresolved += [m for m in ref_unresolved if m not in unresolved]
                if state["changed"]:  # offline/ grew for the test build: the untouched score again
                    untouched, _ = _score(task_dir, work, "untouched", None, timeout_s)
            except RuntimeError as exc:  # the patch does not apply
                report["reference_error"] = str(exc)[:300]
        report |= {
            "tests_static": static.get("num_test_cases"),
            "untouched": untouched.reward,
            "untouched_reasons": untouched.details.get("reasons"),
            "reference": ref_result.reward if ref_result is not None else None,
            "reference_reasons": ref_result.details.get("reasons") if ref_result is not None else None,
            "reference_tests": f"{ref_result.tests_run}/{ref_result.tests_required}" if ref_result else None,
            "offline_files": sorted(
                json.loads((task_dir / "task.json").read_text()).get(TASK_KEY, {}).get("files", {})
            ),
        }
        if unresolved:
            blocked = [b for b in state["blocked"] if any(b.startswith(str(m)) for m in unresolved)]
            return _blocked(out, task_dir, report | {"blocked": blocked or [str(m) for m in unresolved]}, t0)
        if untouched.reward >= 1.0:
            return _blocked(
                out, task_dir, report | {"blocked": ["the untouched tree already scores 1.0"]}, t0
            )
        meta = json.loads((task_dir / "task.json").read_text(encoding="utf-8"))
        meta["real"]["check"] = {
            "untouched_reward": untouched.reward,
            "reference_reward": report["reference"],
            "ok": report["reference"] in (None, 1.0),
        }
        _write_json(task_dir / "task.json", meta)
    return _finish(out, report | {"status": "made"}, t0)


def recheck_reference(
    done: dict[str, Any], out: Path, reference: Path, *, timeout_s: float = 600.0, max_rounds: int = 6
) -> dict[str, Any]:
    """Score a (new) reference migration on a made task; append and return its new report line.

    The task stays made; what the reference's builds could not resolve is proposed into
    ``offline/``, up to ``max_rounds`` times as when making it (a reactor build stops at its
    first module that does not resolve, so a reference that changes the build may need as many
    rounds); then the untouched tree is scored again. Raises like :func:`make_real_task`.
    """
    task_dir = out / task_dir_name(done["repo"])
    t0 = time.monotonic()
    report = {k: v for k, v in done.items() if k not in ("status", "seconds")}
    patch = task_dir / "reference.patch"
    shutil.copyfile(reference, patch)
    state: dict[str, Any] = {"tried": set(), "blocked": [], "changed": False}
    with tempfile.TemporaryDirectory(prefix=f"ref-{task_dir.name}-", dir=out) as tmp:
        work = Path(tmp)
        try:
            ref, unresolved = _resolve_rounds(
                task_dir, work, "reference", patch, timeout_s, max_rounds, state
            )
        except RuntimeError as exc:  # the patch does not apply
            return _finish(
                out, report | {"status": "made", "reference": None, "reference_error": str(exc)[:300]}, t0
            )
        if state["changed"]:
            untouched, _ = _score(task_dir, work, "untouched", None, timeout_s)
            report |= {"untouched": untouched.reward, "untouched_reasons": untouched.details.get("reasons")}
    report |= {
        "reference": ref.reward,
        "reference_reasons": ref.details.get("reasons"),
        "reference_tests": f"{ref.tests_run}/{ref.tests_required}",
        "reference_unresolved": [str(m) for m in unresolved],
        "offline_files": sorted(
            json.loads((task_dir / "task.json").read_text()).get(TASK_KEY, {}).get("files", {})
        ),
    }
    meta = json.loads((task_dir / "task.json").read_text(encoding="utf-8"))
    meta["real"]["check"] = {
        "untouched_reward": report["untouched"],
        "reference_reward": ref.reward,
        "ok": ref.reward == 1.0 and report["untouched"] < 1.0,
    }
    _write_json(task_dir / "task.json", meta)
    return _finish(out, report | {"status": "made"}, t0)


def _blocked(out: Path, task_dir: Path, report: dict[str, Any], t0: float) -> dict[str, Any]:
    if task_dir.exists():
        dest = out / BLOCKED_DIR / task_dir.name
        dest.parent.mkdir(exist_ok=True)
        shutil.move(str(task_dir), dest)
    return _finish(out, report | {"status": "blocked"}, t0)


def _finish(out: Path, report: dict[str, Any], t0: float) -> dict[str, Any]:
    report["seconds"] = round(time.monotonic() - t0, 1)
    _append_report(out, report)
    return report


def _append_report(out: Path, line: dict[str, Any]) -> None:
    """Append ``line`` to ``out/report.jsonl`` on a line of its own (after a torn last line too)."""
    with open(out / REPORT, "a+b") as f:
        torn = False
        if f.seek(0, os.SEEK_END) > 0:
            f.seek(-1, os.SEEK_END)
            torn = f.read(1) != b"\n"
        f.write((b"\n" if torn else b"") + json.dumps(line).encode("utf-8") + b"\n")


def _report_head(record: dict[str, Any]) -> dict[str, Any]:
    """The fields every report line of ``record`` starts with."""
    return {"repo": record["repo"], "base_commit": record["base_commit"], "license": record.get("license"),
            "num_test_cases": record.get("num_test_cases")}  # fmt: skip


def mark_remaking(out: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Append (and return) a ``remaking`` line for ``record`` to ``out/report.jsonl``, before its
    task is made again from the start (``--remake``, ``--retry-blocked``): :func:`make_real_task`
    removes the made (or blocked) directory first, so until its new line is written the report must
    not call the record made; a run killed, or stopped by the sandbox, meanwhile leaves this line,
    and the next run (with or without the flag) makes the record again."""
    mark = _report_head(record) | {"status": REMAKING}
    _append_report(out, mark)
    return mark


def done_records(out: Path) -> dict[str, dict[str, Any]]:
    """The report lines already in ``out/report.jsonl``, by repo (the last line of a repo wins).
    A line that is not a JSON object with ``repo`` and ``status`` (torn by a killed write) is
    skipped, so its record is made again rather than the command stopping on it.

    Raises:
        OSError, UnicodeDecodeError: the report cannot be read as text.
    """
    path = out / REPORT
    if not path.is_file():
        return {}
    out_lines: dict[str, dict[str, Any]] = {}
    for x in path.read_text(encoding="utf-8").splitlines():
        try:
            r = json.loads(x)
        except ValueError:
            continue
        if isinstance(r, dict) and isinstance(r.get("repo"), str) and isinstance(r.get("status"), str):
            out_lines[r["repo"]] = r
    return out_lines


def line(r: dict[str, Any]) -> str:
    """One line for a report: repo, commit, licence, tests, untouched, reference, or what blocks it."""
    head = f"{r['repo']} {r['base_commit'][:12]} {r.get('license')} tests={r.get('num_test_cases')}"
    if r["status"] == "blocked":
        return f"{head} BLOCKED: " + " ".join("; ".join(r.get("blocked") or []).split())[:600]
    if r["status"] == REMAKING:
        return f"{head} REMAKING: its remake did not finish (killed, or the sandbox stopped); the next run makes it"
    return (
        f"{head} untouched={r['untouched']} reference={r['reference']} "
        f"(tests {r.get('reference_tests')}) offline_files={len(r.get('offline_files') or [])}"
    )


def summary(out: Path) -> str:
    """The report of ``out`` as text: one line per record (:func:`line`), then the RESULT line."""
    results = sorted(done_records(out).values(), key=lambda r: (r["status"] != "made", r["repo"].lower()))
    made = [r for r in results if r["status"] == "made"]
    blocked = [r for r in results if r["status"] == "blocked"]
    ref_ok = [r for r in made if r.get("reference") == 1.0]
    lines = [line(r) for r in results]
    remaking = len(results) - len(made) - len(blocked)
    lines.append(
        f"RESULT records={len(results)} made={len(made)} blocked={len(blocked)} reference_ok={len(ref_ok)}"
        + (f" remaking={remaking}" if remaking else "")
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m strands_art.envs.migrationbench.generate.realtasks declare TASK_DIR``: write
    ``task.json["offline"]`` for the task's ``offline/`` as it is (after editing it by hand);
    ``... summary OUT_DIR``: print a ``make-tasks --from-records`` report (:func:`summary`)."""
    parser = argparse.ArgumentParser(
        description="Real MigrationBench tasks: declare offline/, or summarize a build."
    )
    parser.add_argument("command", choices=["declare", "summary"])
    parser.add_argument("dir", type=Path, help="a task directory (declare) or make-tasks' OUT_DIR (summary)")
    args = parser.parse_args(argv)
    if args.command == "summary":
        sys.stdout.write(summary(args.dir))
        return 0
    meta_path = args.dir / "task.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    extra = {k: v for k, v in (meta.get(TASK_KEY) or {}).items() if k != "files"}
    meta[TASK_KEY] = declaration(args.dir / OFFLINE_DIR, **extra)
    _write_json(meta_path, meta)
    print(f"{meta_path}: {len(meta[TASK_KEY]['files'])} files declared")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
