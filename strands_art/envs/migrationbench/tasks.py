"""MigrationBench tasks: the bundled offline projects, or real MigrationBench records.

A task directory holds ``task.json`` (the MigrationBench record fields ``repo``, ``base_commit``,
``num_java_files``, ``num_loc``, ``num_pom_xml``, ``num_src_test_java_files``,
``num_test_cases``, ``license``), ``repo/`` (the Java 8 project) and, for bundled tasks,
``reference.patch`` (a hand-written minimal migration).

Real records (a CSV or Parquet file, as published on the Hugging Face hub as
``AmazonScience/migration-bench-java-{full,selected}``) are materialized by cloning
``https://github.com/{repo}`` at ``base_commit`` into a task directory; that needs network access
to the git host (see docs/migrationbench.md). The bundled tasks are the offline default.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strands_art.validation import is_int

from .evaluator import MAX_TEST_CASES, check_commit_id

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


class TaskError(ValueError):
    """A task directory or record file is missing or malformed."""


@dataclass(frozen=True)
class Task:
    """One migration task.

    Attributes:
        name: the task directory's name (bundled) or the record's repo with "/" → "__".
        dir: the task directory (``task.json``, ``repo/``, optional ``reference.patch``).
        record: the MigrationBench record (dict with :data:`RECORD_FIELDS`).
    """

    name: str
    dir: Path
    record: dict[str, Any]

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
    return Path(__file__).resolve().parents[3] / "examples" / "migrationbench" / "tasks"


def load_task(task_dir: str | Path) -> Task:
    """Read one task directory; raises TaskError if ``task.json`` or ``repo/`` is missing."""
    d = Path(task_dir)
    meta = d / "task.json"
    if not meta.is_file():
        raise TaskError(f"{d}: no task.json (is this a task directory?)")
    if not (d / "repo").is_dir():
        raise TaskError(f"{d}: no repo/ directory")
    try:
        record = json.loads(meta.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:  # invalid UTF-8 or JSON, or nested too deeply
        raise TaskError(f"{meta}: invalid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise TaskError(f"{meta}: must hold a JSON object, got {type(record).__name__}")
    missing = [f for f in RECORD_FIELDS if f not in record]
    if missing:
        raise TaskError(f"{meta}: missing record fields {missing}")
    check_record(record, str(meta))
    return Task(name=d.name, dir=d, record=record)


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
    tasks = {p.name: load_task(p) for p in sorted(base.iterdir()) if (p / "task.json").is_file()}
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


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """MigrationBench records from a CSV or Parquet file (columns :data:`RECORD_FIELDS`).

    Raises:
        TaskError: the file cannot be read, lacks ``repo``/``base_commit``, or a row fails
            :func:`check_record`.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    p = Path(path)
    try:
        table = pq.read_table(p) if p.suffix == ".parquet" else pacsv.read_csv(p)
    except (OSError, pa.ArrowException) as exc:
        raise TaskError(f"{p}: cannot read the records ({' '.join(str(exc).split())[:200]})") from None
    missing = [f for f in RECORD_FIELDS[:2] if f not in table.column_names]
    if missing:
        raise TaskError(f"{p}: missing columns {missing} (need at least repo, base_commit)")
    records = table.to_pylist()
    for i, record in enumerate(records):
        check_record(record, f"{p} row {i}")
    return records


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
