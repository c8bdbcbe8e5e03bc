"""MigrationBench tasks: the bundled offline projects, or real MigrationBench records.

A task directory holds ``task.json`` (the MigrationBench record fields ``repo``, ``base_commit``,
``num_java_files``, ``num_loc``, ``num_pom_xml``, ``num_src_test_java_files``,
``num_test_cases``, ``license``), ``repo/`` (the Java 8 project) and, for bundled tasks,
``reference.patch`` (a hand-written minimal migration).

Real records (a CSV or Parquet file, as published on the Hugging Face hub as
``AmazonScience/migration-bench-java-{full,selected}``) are materialized by cloning
``https://github.com/{repo}`` at ``base_commit`` into a task directory; that needs network access
to the git host (see docs/migrationbench-tasks.md). The bundled tasks are the offline default.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strands_art.envs.migrationbench.tasks.offline_env import OfflineEnv, load_offline_env
from strands_art.envs.migrationbench.tasks.taskdir import (
    MAX_TEST_CASES,
    check_commit_id,
    check_task_name,
    check_task_tree,
    read_task_json,
)
from strands_art.validation import is_int

logger = logging.getLogger(__name__)

RECORD_FIELDS = (
    "repo",
    "base_commit",
    "num_java_files",
    "num_loc",
    "num_pom_xml",
    "num_src_test_java_files",
    "num_test_cases",
    "license",
)

#: the fields every record must have (:func:`read_records`, :func:`check_record`)
REQUIRED_FIELDS = ("repo", "base_commit", "num_test_cases")


class TaskError(ValueError):
    """A task directory or record file is missing or malformed."""


@dataclass(frozen=True)
class Task:
    """One migration task.

    Attributes:
        name: the task directory's name (bundled) or the record's repo with "/" → "__".
        dir: the task directory (``task.json``, ``repo/``, optional ``reference.patch``).
        record: the MigrationBench record (dict with :data:`RECORD_FIELDS`).
        offline_env: the task's declared offline Maven environment (``offline/``, validated:
            :mod:`.offline_env`), or None.
    """

    name: str
    dir: Path
    record: dict[str, Any]
    offline_env: OfflineEnv | None = None

    @property
    def repo_dir(self) -> Path:
        return self.dir / "repo"

    @property
    def reference_patch(self) -> Path | None:
        p = self.dir / "reference.patch"
        return p if p.exists() else None

    @property
    def num_test_cases(self) -> int:
        num = self.record.get("num_test_cases")
        return -1 if num is None else int(num)


def bundled_tasks_dir() -> Path:
    """``examples/migrationbench/tasks`` of the source checkout this package runs from."""
    return Path(__file__).resolve().parents[4] / "examples" / "migrationbench" / "tasks"


def load_task(task_dir: str | Path) -> Task:
    """Read one task directory.

    Raises:
        TaskError: ``task.json`` or ``repo/`` is missing; ``task.json`` is not a regular file
            holding a JSON object with the record fields (:func:`check_record`); the task's name
            (its directory's, and ``name`` if given) is not 1-150 file-name characters
            (:func:`.taskdir.check_task_name`); ``repo/`` is deeper or larger than the evaluator's
            build copy accepts; ``offline/`` differs from its declaration (:mod:`.offline_env`).
    """
    d = Path(task_dir)
    meta = d / "task.json"
    if not os.path.lexists(meta):
        raise TaskError(f"{d}: no task.json (is this a task directory?)")
    if not (d / "repo").is_dir():
        raise TaskError(f"{d}: no repo/ directory")
    try:
        record = read_task_json(meta)  # a FIFO, a huge file, not an object: refused, never read
        name = check_task_name(d.name or d.resolve().name, f"{d} (the task directory's name)")
        if "name" in record:
            check_task_name(record["name"], str(meta))
        offline_env = load_offline_env(d, record)
        check_task_tree(d / "repo")  # a tree the evaluator's build copy refuses is a bad task
    except ValueError as exc:  # TaskDirError, OfflineEnvError
        raise TaskError(str(exc)) from None
    missing = [f for f in RECORD_FIELDS if f not in record]
    if missing:
        raise TaskError(f"{meta}: missing record fields {missing}")
    check_record(record, str(meta))
    return Task(name=name, dir=d, record=record, offline_env=offline_env)


_REPO_NAME = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def check_record(record: dict[str, Any], where: str) -> None:
    """Refuse record values that would be misread: ``repo`` not ``OWNER/NAME`` (or naming ``..``),
    ``base_commit`` not a hex id (it is passed to git), ``num_test_cases`` not an integer >= 0
    (upstream's -1/-2 "unparsed" and the utg split's missing count cannot be scored).

    Raises:
        TaskError: naming ``where`` and the field.
    """
    repo = record.get("repo")
    if not isinstance(repo, str) or not _REPO_NAME.fullmatch(repo) or ".." in repo.split("/"):
        raise TaskError(f"{where}: repo must be OWNER/NAME, got {str(repo)[:80]!r}")
    try:
        check_commit_id(record.get("base_commit"), f"{where}: base_commit")
    except ValueError as exc:
        raise TaskError(str(exc)) from None
    num = record.get("num_test_cases")  # the evaluator needs it: refuse now, not after the rollout
    if not is_int(num) or not 0 <= num <= MAX_TEST_CASES:
        raise TaskError(
            f"{where}: num_test_cases must be an integer from 0 to {MAX_TEST_CASES:,} (the evaluator "
            f"compares the tests run with it), got {repr(num)[:40]}"
        )


def load_tasks(root: str | Path | None = None, names: list[str] | None = None) -> list[Task]:
    """All task directories under ``root`` (default: the bundled tasks), sorted by name.

    ``names`` selects a subset; an unknown name raises TaskError listing the known ones.

    Raises:
        TaskError: ``root`` is not a directory, is one task's own directory (it holds
            ``task.json``: give its parent), or holds no task directory (a subdirectory with
            ``task.json``, as ``strands-art make-tasks`` writes); a malformed task; an unknown name.
    """
    base = Path(root) if root else bundled_tasks_dir()
    if not base.is_dir():
        raise TaskError(f"no task directory at {base}")
    if (base / "task.json").is_file():
        raise TaskError(
            f"{base} is one task's directory (it holds task.json); give the directory that holds the "
            f"task directories, here {base.parent}"
        )
    # lexists: a task.json that is not a regular file (a FIFO) is refused by load_task, not skipped
    tasks = {p.name: load_task(p) for p in sorted(base.iterdir()) if os.path.lexists(p / "task.json")}
    if not tasks:
        raise TaskError(
            f"{base} holds no task: a tasks directory holds one directory per task, each with task.json "
            "(as `strands-art make-tasks` writes them)"
        )
    if names:
        unknown = [n for n in names if n not in tasks]
        if unknown:
            raise TaskError(f"unknown task(s) {unknown}; known: {sorted(tasks)}")
        return [tasks[n] for n in names]
    return list(tasks.values())


def read_records(path: str | Path, skipped: list[tuple[int, str, str]] | None = None) -> list[dict[str, Any]]:
    """MigrationBench records from a CSV, Parquet, JSON (a list of objects) or JSONL (one object
    per line) file, as published, in file order.

    Required in every row: ``repo`` (``OWNER/NAME``), ``base_commit`` (a hex commit id) and
    ``num_test_cases`` (an integer >= 0): :func:`check_record`. The other :data:`RECORD_FIELDS`
    (``num_java_files``, ``num_loc``, ``num_pom_xml``, ``num_src_test_java_files``, ``license``)
    are optional: kept when present, never checked here. Columns beyond them are kept as read.

    A row whose ``num_test_cases`` is negative (upstream's "unparsed" markers -1 and -2: 13 of
    the 300 java-selected records) cannot be scored: it is skipped with a warning, and appended
    to ``skipped`` as ``(row index, repo, reason)`` when a list is given (index from 0 over the
    records, blank JSONL lines not counted).

    Raises:
        TaskError: the file cannot be read or parsed (a JSONL error names its line number, from
            1), a required column is missing from the whole file, or a row (other than an
            unparsed count) fails :func:`check_record` (naming ``row I`` or, for JSONL, ``line N``).
    """
    p = Path(path)
    rows = _read_rows(p)
    records: list[dict[str, Any]] = []
    for i, (where, record) in enumerate(rows):
        num = record.get("num_test_cases")
        if is_int(num) and num < 0:
            why = f"num_test_cases {num} (upstream could not count its tests): cannot be scored"
            logger.warning("%s (%s): skipped, %s", where, str(record.get("repo"))[:80], why)
            if skipped is not None:
                skipped.append((i, str(record.get("repo")), why))
            continue
        check_record(record, where)
        records.append(record)
    return records


def _jsonl_rows(p: Path, text: str) -> list[tuple[str, dict[str, Any]]]:
    """The objects of a JSONL text, each with ``"P line N"`` (N from 1); blank lines skipped.

    Raises:
        TaskError: a line is not JSON, or not a JSON object, naming its line number.
    """
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskError(f"{p} line {n}: not JSON ({exc.msg} at column {exc.colno})") from None
        except RecursionError:
            raise TaskError(f"{p} line {n}: not JSON (nested too deeply)") from None
        if not isinstance(row, dict):
            raise TaskError(f"{p} line {n}: expected a JSON object (one record), got {type(row).__name__}")
        rows.append((f"{p} line {n}", row))
    return rows


def _read_rows(p: Path) -> list[tuple[str, dict[str, Any]]]:
    """The rows of a records file as dicts, each with where it is (``"P row I"``, I from 0, or
    for JSONL ``"P line N"``), see :func:`read_records`."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    suffix = p.suffix.lower()
    try:
        if suffix == ".jsonl":
            rows = _jsonl_rows(p, p.read_text(encoding="utf-8"))
        elif suffix == ".json":
            data = json.loads(p.read_text(encoding="utf-8"))
            if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
                raise TaskError(f"{p}: expected a list of JSON objects (one record each)")
            rows = [(f"{p} row {i}", r) for i, r in enumerate(data)]
        else:
            table = pq.read_table(p) if suffix == ".parquet" else pacsv.read_csv(p)
            rows = [(f"{p} row {i}", r) for i, r in enumerate(table.to_pylist())]
            columns = set(table.column_names)
    except TaskError:
        raise
    except (OSError, ValueError, RecursionError, pa.ArrowException) as exc:
        raise TaskError(f"{p}: cannot read the records ({' '.join(str(exc).split())[:200]})") from None
    if suffix in (".json", ".jsonl"):
        columns = set().union(*(r for _, r in rows))
    missing = [f for f in REQUIRED_FIELDS if f not in columns]
    if missing:
        raise TaskError(f"{p}: missing columns {missing} (every record needs {', '.join(REQUIRED_FIELDS)})")
    return rows


def materialize_record(
    record: dict[str, Any], dest_root: str | Path, git_base: str = "https://github.com"
) -> Task:
    """Clone ``record['repo']`` at ``record['base_commit']`` into ``dest_root/<name>/repo``.

    Writes ``task.json`` beside it. Raises TaskError for a bad record (:func:`check_record`) or
    when git fails (e.g. no network).
    """
    check_record(record, f"record {str(record.get('repo'))[:80]!r}")
    name = str(record["repo"]).replace("/", "__")
    d = Path(dest_root) / name
    repo = d / "repo"
    if not (repo / ".git").exists():
        d.mkdir(parents=True, exist_ok=True)
        url = f"{git_base.rstrip('/')}/{record['repo']}.git"
        for cmd in (
            ["git", "clone", "--quiet", "--filter=blob:none", "--", url, str(repo)],
            # base_commit is hex (check_record), so never an option; checkout has no --end-of-options
            ["git", "-C", str(repo), "checkout", "--quiet", "--detach", record["base_commit"]],
        ):
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                raise TaskError(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-500:]}")
    full = {f: record.get(f) for f in RECORD_FIELDS}
    (d / "task.json").write_text(json.dumps(full, indent=2) + "\n", encoding="utf-8")
    return Task(name=name, dir=d, record=full)
