"""A run directory as the viewer reads it: indexed once, followed while it grows, read lazily.

:class:`RunView` keeps only small things in memory: each rollout's results record, where its
trajectory line sits in ``trajectories.jsonl`` (:meth:`TrajectoryStore.scan`) and a summary of
it (counts, event kinds, policy versions), computed once when the line is first seen. A
rollout's turns, messages and tokens are read from disk when asked for (:meth:`rollout`,
:meth:`row`). :meth:`refresh` reads only what was appended since the last call, so a page
polling a live run costs a ``stat`` and the new lines.

Every file is opened through :class:`.files.RunFiles` (from the run directory's descriptor, no
symlink followed at any component, regular files only, sizes bounded) and parsed by the
project's own readers: the trajectory store's :func:`~strands_art.store.scan_lines` and
:func:`~strands_art.store.read_line`,
:func:`~strands_art.envs.migrationbench.run.rundir.scan_results_in` and
:func:`~strands_art.training.metrics.parse_metrics`; advantages come from
:func:`~strands_art.training.grpo.group_advantages`. Run-level files (``config.json``,
``live.json``, ``metrics.jsonl``) are parsed once per change of the file and refused above
:data:`RUN_FILE_LIMIT` / :data:`METRICS_LIMIT` bytes (named under ``problems``).
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from strands_art.envs.migrationbench.run.rundir import (
    LIVE_FILE,
    RESULTS_FILE,
    TRAJECTORIES_DIR,
    scan_results_in,
)
from strands_art.store import ROW_SCHEMA, StoredLine, part_name, read_line, scan_lines
from strands_art.training.grpo import GRPOConfig, group_advantages, reward_problem
from strands_art.training.metrics import MetricsFile, parse_metrics
from strands_art.training.provenance import CODE_FILE, parse_code
from strands_art.trajectory import Trajectory
from strands_art.validation import is_int

from .files import NotRegular, Refused, RunFiles, TooLarge
from .training import TrainedIndex, group_key

logger = logging.getLogger(__name__)

FIELD_LIMIT = 20_000
"""Characters of one text field sent to the page; longer ones are cut (:func:`clip`)."""
RUN_FILE_LIMIT = 4 << 20
"""Bytes of ``config.json`` or ``live.json`` the viewer parses; a larger file is named under
``problems`` (``too_large``) and not shown."""
METRICS_LIMIT = 64 << 20
"""Bytes of ``metrics.jsonl`` the viewer parses (about 60,000 outer batches)."""
CODE_LINES_LIMIT = 200
"""Lines of ``code.jsonl`` sent to the page (one per process that trained the run)."""


def clip(value: Any, limit: int = FIELD_LIMIT) -> Any:
    """``value`` with every string longer than ``limit`` characters replaced by
    ``{"truncated": True, "head": first limit characters, "size": full length}`` (recursively
    through dicts and lists)."""
    if isinstance(value, str):
        return (
            value if len(value) <= limit else {"truncated": True, "head": value[:limit], "size": len(value)}
        )
    if isinstance(value, dict):
        return {str(k): clip(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clip(v, limit) for v in value]
    return value


class RunView:
    """A read-only view of one run directory (``strands-art migrate``, the training loop, or a
    trajectory store of the HTTP front).

    Args:
        root: the run directory (or a store directory holding ``trajectories.jsonl``).
        tokenizer: a tokenizer with ``decode`` (None: token text is not shown).

    Raises:
        FileNotFoundError: ``root`` is not a directory.
    """

    def __init__(self, root: str | Path, tokenizer: Any = None) -> None:
        try:
            self.files = RunFiles(root)
        except OSError:
            raise FileNotFoundError(f"no run directory at {root}") from None
        self.root = self.files.root
        prefix = f"{TRAJECTORIES_DIR}/"
        if not self.files.exists(prefix + "trajectories.jsonl") and self.files.exists("trajectories.jsonl"):
            prefix = ""  # a bare store (strands-art serve --store DIR)
        self._jsonl = prefix + "trajectories.jsonl"
        self._rows = prefix + "rows/"
        self.tokenizer = tokenizer
        self._lock = threading.Lock()
        self._texts: dict[int, str] = {}
        self._special: set[int] | None = None
        self.trained = TrainedIndex(self.files)
        self._reset()

    @property
    def is_training(self) -> bool:
        """A ``strands-art train`` run (its ``train.json`` exists)."""
        return self.files.is_file("train.json")

    def _reset(self) -> None:
        self.results: dict[str, dict[str, Any]] = {}
        self.lines: dict[str, StoredLine] = {}
        self.summaries: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        kept = ("unreadable_metrics", "unreadable_metrics_lines", "unreadable_files")  # not of the index
        old = getattr(self, "problems", {})
        self.problems: dict[str, Any] = {"unreadable_results": 0, "torn_results_bytes": 0}
        self.problems.update((k, old[k]) for k in kept if k in old)
        self._results_pos = self._store_pos = 0
        self._sizes: tuple[int, int] = (-2, -2)  # never seen (-1: no regular file)
        self._items: list[dict[str, Any]] | None = None

    # ------------------------------------------------------------------ index
    def refresh(self) -> bool:
        """Read what was appended since the last call; True if anything changed. A file that
        shrank (a resume reconciled it) is read again from the start."""
        with self._lock:
            sizes = (self.files.size(RESULTS_FILE), self.files.size(self._jsonl))
            if self.is_training and self.trained.refresh():
                self._items = None
                if sizes == self._sizes:
                    return True
            if sizes == self._sizes:
                return False
            if sizes[0] < self._results_pos or sizes[1] < self._store_pos:
                self._reset()
            self._sizes = sizes
            self._items = None
            records, bad, torn = [], 0, 0
            try:
                with self.files.open(RESULTS_FILE) as f:
                    records, self._results_pos, bad, torn = scan_results_in(f, self._results_pos)
                self.problems.pop("unreadable_results_file", None)
            except (NotRegular, Refused) as exc:  # missing; a directory, a FIFO, a symlink
                if self.files.exists(RESULTS_FILE):
                    self.problems["unreadable_results_file"] = _reason(exc)
            except OSError as exc:  # no permission
                logger.warning("cannot read %s: %s", RESULTS_FILE, exc)
                self.problems["unreadable_results_file"] = _reason(exc)
            self.problems["unreadable_results"] += bad
            self.problems["torn_results_bytes"] = torn
            for rec in records:
                self._see(rec["rollout_id"])
                self.results[rec["rollout_id"]] = rec
            if self.files.exists(self._jsonl):
                try:
                    with self.files.open(self._jsonl) as f:
                        lines, self._store_pos, torn = scan_lines(f, self._store_pos)
                        summaries = [self._summary(f, line) for line in lines]
                    self.problems.pop("unreadable_trajectories_file", None)
                except OSError as exc:  # a directory, a FIFO, a symlink, no permission
                    logger.warning("cannot read %s: %s", self._jsonl, exc)
                    lines, summaries, torn = [], [], 0
                    self.problems["unreadable_trajectories_file"] = _reason(exc)
                self.problems["torn_trajectory_bytes"] = torn
                for line, summary in zip(lines, summaries, strict=True):
                    if line.rollout_id is None or summary is None:
                        self.problems["unreadable_trajectories"] = (
                            self.problems.get("unreadable_trajectories", 0) + 1
                        )
                        continue
                    self._see(line.rollout_id)
                    self.lines[line.rollout_id] = line
                    self.summaries[line.rollout_id] = summary
            return True

    def _summary(self, f: Any, line: StoredLine) -> dict[str, Any] | None:
        """The summary of one indexed line of the open JSONL file; None when unreadable."""
        if line.rollout_id is None:
            return None
        try:
            return _summarize(read_line(f, line, self._jsonl))
        except (ValueError, TypeError, AttributeError, KeyError) as exc:  # odd JSON shapes
            logger.warning("%s", exc)
            return None

    def _see(self, rid: str) -> None:
        if rid not in self.results and rid not in self.lines:
            self.order.append(rid)

    # ------------------------------------------------------------------ run
    def run_json(self, rel: str, limit: int = RUN_FILE_LIMIT) -> Any:
        """The JSON value of the run-level file ``rel`` (``config.json``, ``live.json``,
        ``train.json``...), parsed once per change of the file (:meth:`.files.RunFiles.cached`);
        None when absent or not JSON. A file that cannot be read — over ``limit`` bytes, a
        symlink, a FIFO, a directory — is None too, named under ``problems["unreadable_files"]``
        ({rel: reason})."""
        try:
            value = self.files.cached(rel, limit, _json_or_none, "json")
        except (OSError, TooLarge, ValueError) as exc:
            self._note(rel, exc)
            return None
        self._note(rel, None)
        return value

    def _note(self, rel: str, exc: BaseException | None) -> None:
        """Name ``rel`` under ``problems["unreadable_files"]`` with why it cannot be read, or
        take it off (``exc`` None, or a file that is simply absent)."""
        bad = self.problems.setdefault("unreadable_files", {})
        if exc is None or (isinstance(exc, NotRegular) and not self.files.exists(rel)):
            bad.pop(rel, None)
        else:
            bad[rel] = _reason(exc)
        if not bad:
            del self.problems["unreadable_files"]

    def config(self) -> dict[str, Any] | None:
        """``config.json`` of the run, else its ``train.json`` (a training run's settings),
        clipped; None if neither is there and readable (:meth:`run_json`)."""
        for name in ("config.json", "train.json"):
            data = self.run_json(name)
            if data is not None:
                return clip(data, 2000) if isinstance(data, dict) else None
        return None

    def code(self) -> list[dict[str, Any]]:
        """The lines of ``code.jsonl`` (:mod:`strands_art.training.provenance`: the code each
        process that trained the run ran — commit, dirty, the outer batch it started at), the
        first :data:`CODE_LINES_LIMIT`, clipped; [] when there is none (a run of an older
        strands-art, or no training run). A file that cannot be read (a symlink, a FIFO, over
        :data:`RUN_FILE_LIMIT` bytes) is [] too, named under ``problems["unreadable_files"]``."""
        try:
            lines = self.files.cached(CODE_FILE, RUN_FILE_LIMIT, parse_code, "code")
        except (OSError, TooLarge, ValueError) as exc:
            self._note(CODE_FILE, exc)
            return []
        self._note(CODE_FILE, None)
        return [clip(line, 200) for line in lines[:CODE_LINES_LIMIT]]

    def metrics(self) -> list[dict[str, Any]]:
        """Records of ``metrics.jsonl`` (a training run), [] if there is none. A line that is
        not a JSON object (not UTF-8, not JSON, nested too deep) is skipped and counted in
        ``problems["unreadable_metrics_lines"]``; a file that cannot be read at all (a
        directory, a FIFO, a symlink, over :data:`METRICS_LIMIT` bytes) reads as [] with
        ``problems["unreadable_metrics"]`` set to 1 and the reason under
        ``problems["unreadable_files"]``. Parsed once per change of the file."""
        try:
            scanned: MetricsFile = self.files.cached("metrics.jsonl", METRICS_LIMIT, parse_metrics, "metrics")
        except (OSError, TooLarge) as exc:
            self._note("metrics.jsonl", exc)
            if "metrics.jsonl" in self.problems.get("unreadable_files", {}):
                logger.warning("cannot read metrics.jsonl: %s", exc)
                self.problems["unreadable_metrics"] = 1
            return []
        self._note("metrics.jsonl", None)
        self.problems.pop("unreadable_metrics", None)
        if scanned.skipped:
            self.problems["unreadable_metrics_lines"] = len(scanned.skipped)
        else:
            self.problems.pop("unreadable_metrics_lines", None)
        return scanned.records

    def live(self) -> list[dict[str, Any]]:
        """Rollouts in flight (``live.json``: rollout_id, turn, last_call, started), [] if none."""
        data = self.run_json(LIVE_FILE)
        items = data.get("rollouts") if isinstance(data, dict) else None
        return [clip(i, 200) for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    def rollouts(self) -> list[dict[str, Any]]:
        """One summary per rollout, in the order first seen, with its GRPO ``advantage`` within
        its group (``group``: the trajectory's group id, else the task), ``zero_variance``
        (every reward of the group equal: no learning signal). Computed once per state of the
        files (:meth:`refresh`); the list is new, its dicts are shared."""
        with self._lock:
            if self._items is None:
                self._items = self._compute_items()
            return list(self._items)

    def mark_parts(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Set ``part_missing`` on ``items`` (a stat per stored rollout: a Parquet part can vanish
        without the JSONL files changing, so it is checked for what is about to be shown)."""
        for item in items:
            item["part_missing"] = bool(
                item["stored"] and not self.files.is_file(self.part_rel(item["rollout_id"]))
            )
        return items

    def part_rel(self, rid: str) -> str:
        """Where ``rid``'s Parquet part is, relative to the run directory."""
        return self._rows + part_name(rid)

    def read_part(self, rid: str, columns: list[str] | None = None) -> pa.Table:
        """The Parquet rows of ``rid`` (``columns`` of :data:`~strands_art.store.ROW_SCHEMA`).

        Raises:
            FileNotFoundError: the part is missing (or not a regular file).
            PermissionError: a symlink on the way (:class:`.files.Refused`).
            OSError, pyarrow.ArrowInvalid: unreadable.
        """
        with self.files.open(self.part_rel(rid)) as f:
            return pq.read_table(f, columns=columns, schema=ROW_SCHEMA)

    def _compute_items(self) -> list[dict[str, Any]]:
        items = [self._item(rid) for rid in self.order]
        groups: dict[str, list[dict[str, Any]]] = {}
        for item in items:
            groups.setdefault(str(item["group"]), []).append(item)
        cfg = GRPOConfig()
        training = self.is_training
        for members in groups.values():
            usable = [m for m in members if not m.get("failed") and reward_problem(m.get("reward")) is None]
            zero = len({m["reward"] for m in usable}) <= 1
            if training:  # the trainer's own advantages (rows/ob-*.trained.parquet), none before
                for m in members:
                    rid = m["rollout_id"]
                    m["advantage"] = self.trained.advantage.get(rid) if isinstance(rid, str) else None
                    m["excluded"] = self.trained.excluded.get(rid) if isinstance(rid, str) else None
                    fwd = self.trained.forwarded.get(rid) if isinstance(rid, str) else None
                    m["rows_forwarded"] = fwd[0] if fwd else None
            else:
                advantages = group_advantages([m["reward"] for m in usable], cfg)
                for m, a in zip(usable, advantages, strict=True):
                    m["advantage"] = a
            for m in members:
                m["group_size"] = len(members)
                m["zero_variance"] = zero and m.get("split") != "eval"  # held-out: no GRPO group
        return items

    def _item(self, rid: str) -> dict[str, Any]:
        rec = self.results.get(rid, {})
        summ = self.summaries.get(rid, {})
        item: dict[str, Any] = {"rollout_id": rid, "advantage": None, "stored": rid in self.lines}
        item.update(summ)
        for key in ("task", "index", "seed", "reward", "build_success", "java17_bytecode", "tests_run",
                    "tests_required", "tests_equivalent", "stop_reason", "error", "failed"):  # fmt: skip
            if key in rec:
                item[key] = rec[key]
        if "turns" in rec and "turns" not in item:
            item["turns"] = rec["turns"]
        item["wall_s"] = (rec.get("times") or {}).get("wall_s", summ.get("wall_s"))
        item["group"] = (
            (group_key(rid, summ.get("group_id")) if self.is_training else None)
            or summ.get("group_id")
            or item.get("task")
            or rid
        )
        item = clip(item, 500)
        if isinstance(item["group"], dict):  # a cut label stays a string (grouped by its head)
            item["group"] = item["group"]["head"] + "…"
        return item

    # ------------------------------------------------------------------ one rollout
    def trajectory(self, rid: str) -> Trajectory:
        """The stored trajectory of ``rid``.

        Raises:
            KeyError: no stored trajectory of that id.
            ValueError: its line is unreadable.
        """
        self.refresh()
        line = self.lines[rid]
        try:
            with self.files.open(self._jsonl) as f:
                return read_line(f, line, self._jsonl)
        except OSError as exc:  # replaced by a symlink or a FIFO since it was indexed
            raise ValueError(f"{self._jsonl}: {_reason(exc)}") from None

    def text(self, ids: list[int]) -> str | None:
        """Decoded text of ``ids`` with special tokens kept; None without a tokenizer."""
        if self.tokenizer is None:
            return None
        return self.tokenizer.decode([i for i in ids if _decodable(i)], skip_special_tokens=False)

    def special_ids(self) -> set[int]:
        """IDs of the tokenizer's special and added tokens (shown as such); empty without one."""
        if self._special is None:
            tok = self.tokenizer
            added = getattr(tok, "added_tokens_decoder", None) or {}
            self._special = {int(i) for i in added} | set(getattr(tok, "all_special_ids", None) or [])
        return self._special

    def token_texts(self, ids: list[int]) -> dict[str, str] | None:
        """``{str(id): decoded text}`` of each distinct id (cached per id), None without a
        tokenizer."""
        if self.tokenizer is None:
            return None
        distinct = set(ids)
        missing = [i for i in distinct if i not in self._texts]
        self._texts.update((i, "") for i in missing if not _decodable(i))  # negative or > 32 bits
        missing = [i for i in missing if i not in self._texts]
        if missing:
            backend = getattr(self.tokenizer, "backend_tokenizer", None)  # a fast tokenizer: one Rust call
            if backend is not None:
                texts = backend.decode_batch([[i] for i in missing], skip_special_tokens=False)
            else:
                texts = [self.tokenizer.decode([i], skip_special_tokens=False) for i in missing]
            self._texts.update(zip(missing, texts, strict=True))
        return dict(zip(map(str, distinct), map(self._texts.__getitem__, distinct), strict=True))


def _decodable(token_id: Any) -> bool:
    """An ID the tokenizer can be asked about (a stored row may hold anything: -1 raised
    OverflowError in the Rust decoder)."""
    return isinstance(token_id, int) and 0 <= token_id < 2**32


def _json_or_none(data: bytes) -> Any:
    """The JSON value of ``data``; None when it is not UTF-8 JSON (or nested too deep)."""
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None


def _reason(exc: BaseException) -> str:
    """One short line for ``problems``: the OS's words for an :class:`OSError`."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:200]
    return str(exc)[:200]


def _events(t: Trajectory) -> list[dict[str, Any]]:
    """The trajectory's events that are JSON objects (a hand-edited or foreign line may hold
    anything there)."""
    return [ev for ev in t.events if isinstance(ev, dict)] if isinstance(t.events, list) else []


def _summarize(t: Trajectory) -> dict[str, Any]:
    kinds: dict[str, int] = {}
    for ev in _events(t):
        kinds[str(ev.get("kind"))] = kinds.get(str(ev.get("kind")), 0) + 1
    ill = len(t.metadata.get("ill_formed_turns", []) or [])
    if ill:
        kinds["ill_formed"] = ill
    versions = sorted({tn.policy_version for tn in t.turns if tn.policy_version is not None})
    meta = t.metadata
    return {
        "group_id": t.group_id,
        "task": meta.get("task"),
        "reward": t.reward,
        "turns": len(t.turns),
        "rows": len(t.rows),
        "tokens": t.num_tokens,
        "sampled_tokens": sum(r.num_sampled for r in t.rows),
        "events": kinds,
        "policy_versions": versions,
        "stop_reason": meta.get("stop_reason") or (t.turns[-1].finish_reason if t.turns else None),
        "wall_s": round(sum(tn.timings.get("total", 0.0) for tn in t.turns), 3),
        "failed": bool(meta.get("failed")),
        "error": meta.get("error") if meta.get("failed") else None,
        "split": meta.get("split") if meta.get("split") in ("train", "eval") else None,
        "outer_batch": meta.get("outer_batch") if is_int(meta.get("outer_batch")) else None,
    }
