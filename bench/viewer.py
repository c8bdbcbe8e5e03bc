"""``strands-art view`` on a big run, in a real browser: run page, a 32K-token row, server memory.

Writes a synthetic run directory with the project's own writers (``TrajectoryStore.append``:
JSONL + a Parquet part per rollout; ``results.jsonl`` lines as ``strands-art migrate`` writes
them; a ``metrics.jsonl`` of training records): ``--rollouts`` rollouts (default 1,000) of
``--turns`` turns in groups of 4, one of them a single row of ``--big-row`` tokens (default
32,768), about 2 million row tokens in all, token IDs drawn from the Qwen3 vocabulary (decoded
by the real tokenizer), every turn's prompt the prefix of its row (as the gateway records it).

Then starts the real command (``python -m strands_art.cli view RUN --port 0 --tokenizer
qwen3``), and in Debian's chromium (Playwright) loads, ``--loads`` times each:

- the run page, until its first paint and until the rollouts table, groups and plots are
  rendered (``performance.mark("run-rendered")`` in run.js; ``run_page_s``);
- the row page of the 32K-token row, until it is interactive (tokens laid out, the visible
  lines in the DOM, keyboard handlers attached: ``performance.mark("row-interactive")``;
  ``row_page_s``), then scrolls it through in 60 steps and records the longest frame;

and reads the server's peak RSS (``VmHWM`` of /proc/PID/status) at the end. Side by side, in
the same browser and alternately with each load (so under the same machine load), a baseline run
of 8 rollouts with a 2,048-token row on a second server: the ratios say what the run's size
costs over the fixed cost of a page. Times are from the navigation start, medians over the loads
with their spread. Goals: run page < 1 s, row page < 1 s, RSS < 300 MB.

    python bench/viewer.py [--rollouts 1000] [--turns 4] [--big-row 32768] [--loads 5] [--keep DIR]
    python bench/viewer.py --training 100 [--per-batch 8]    # a training run (make_train_run)

With ``--training B`` the run is a synthetic ``strands-art train`` run (:func:`make_train_run`:
B outer batches, the trajectory store, the rows as trained, ``train.json``, ``metrics.jsonl``);
the run page is then the training run's (outer-batch table, plots, rollouts, groups) and the row
page the 32K-token row of batch 2 with its rows-as-trained overlay.

Ends with ``RESULT run_page_s=… row_page_s=… server_rss_mb=… run_page_vs_baseline=…
row_page_vs_2k=…``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from strands_art.store import TrajectoryStore
from strands_art.trajectory import Row, Trajectory, Turn

CHROMIUM = "/usr/bin/chromium"
VOCAB = 151_000  # below Qwen3's added tokens: plain text pieces


def make_run(root: Path, rollouts: int, turns: int, big_row: int, seed: int = 0) -> dict[str, int]:
    """Write the synthetic run; returns its counts."""
    rng = random.Random(seed)
    store = TrajectoryStore(root / "trajectories")
    total = 0
    with open(root / "results.jsonl", "w") as res:
        for i in range(rollouts):
            task, k = f"task-{i // 4:03d}", i % 4
            rid = f"{task}-r{k}"
            size = big_row if i == 0 else rng.randint(1200, 2800)
            row_ids = [rng.randrange(VOCAB) for _ in range(size)]
            mask = [0] * size
            lps = [0.0] * size
            tns, spans, row_turns = [], [], []
            bounds = sorted(rng.sample(range(size // 3, size), turns - 1)) + [size]
            start = size // 4
            for t, end in enumerate(bounds):
                out = min(end - start, rng.randint(40, 400))
                s0 = end - out
                for j in range(s0, end):
                    mask[j], lps[j] = 1, round(-rng.expovariate(3.0), 4)
                tns.append(
                    Turn(
                        t,
                        row_ids[:s0],
                        row_ids[s0:end],
                        lps[s0:end],
                        "tool_calls" if t < turns - 1 else "stop",
                        row=0,
                        timings={"total": 0.4, "sample": 0.35},
                        policy_version=i // 64,
                        messages=[{"role": "user", "content": f"turn {t} of {rid}"}],
                    )  # fmt: skip
                )
                spans.append([s0, end])
                row_turns.append(t)
                start = end
            reward = rng.choice([0.0, 0.5, 1.0])
            row = Row(row_ids, mask, lps, rid, task, row_turns, spans, reward, {"policy_versions": {}})
            events = [{"turn": 1, "kind": "heal", "reason": "closer", "lineage": 0}] if i % 7 == 0 else []
            traj = Trajectory(
                rid, task, tns, [row], events, reward, {"task": task, "seed": i, "stop_reason": "completed"}
            )
            store.append(traj)
            total += size
            rec = {"rollout_id": rid, "task": task, "index": k, "seed": i, "reward": reward,
                   "build_success": reward > 0, "java17_bytecode": reward > 0, "tests_run": 3, "tests_required": 3,
                   "tests_equivalent": reward == 1.0, "stop_reason": "completed", "error": None, "turns": turns,
                   "token_capture": True, "rows": 1, "tokens": size, "sampled_tokens": sum(mask),
                   "times": {"wall_s": round(rng.uniform(20, 300), 3)}}  # fmt: skip
            res.write(json.dumps(rec) + "\n")
    with open(root / "metrics.jsonl", "w") as m:
        for b in range(rollouts // 64):
            m.write(json.dumps({"kind": "train", "outer_batch": b, "reward_mean": 0.3 + 0.02 * b, "loss": 0.1 / (b + 1),
                                "approx_kl": 0.001 * b, "clip_fraction": 0.05, "grad_norm": 1.0 + rng.random(),
                                "lr": 1e-5, "rows_per_rollout": 1.0, "zero_advantage_groups": rng.randint(0, 4)}) + "\n")  # fmt: skip
    (root / "config.json").write_text(
        json.dumps({"model": "qwen3", "history_mode": "tree", "synthetic": True})
    )
    return {
        "rollouts": rollouts,
        "row_tokens": total,
        "jsonl_mb": round(store.jsonl.stat().st_size / 2**20, 1),
    }


def make_train_run(
    root: Path, batches: int, per_batch: int, big_row: int, turns: int = 2, seed: int = 0
) -> dict[str, int]:
    """A synthetic ``strands-art train`` run written with the command's own writers
    (:class:`~strands_art.training.run_store.RunStore`: the trajectory store and the rows as trained
    per outer batch): ``batches`` outer batches of ``per_batch`` rollouts in groups of 4, a held-out
    evaluation of 8 rollouts every 10 batches (and before and after), ``train.json`` and a
    ``metrics.jsonl`` with the per-batch keys (rows, processed_tokens, actor_update_s, e2e_s, ...).
    The first rollout of batch 2 is one row of ``big_row`` tokens; the rest 300-1,200. The trace's
    trainer logprobs are the sampler's plus noise (a few large gaps), 3 % of tokens clipped."""
    from strands_art.training.run_store import RunStore

    rng = random.Random(seed)
    store = RunStore(root)
    store.history_mode = "linear"

    def rollout(rid: str, group: str, size: int, version: int) -> Trajectory:
        ids = [rng.randrange(VOCAB) for _ in range(size)]
        mask, lps = [0] * size, [0.0] * size
        cut = sorted(rng.sample(range(size // 3, size), turns - 1)) + [size]
        tns, spans, start = [], [], size // 4
        for t, end in enumerate(cut):
            s0 = max(start, end - rng.randint(20, 200))
            for j in range(s0, end):
                mask[j], lps[j] = 1, round(-rng.expovariate(3.0), 4)
            tns.append(Turn(t, ids[:s0], ids[s0:end], lps[s0:end], "stop", row=0, timings={"total": 0.3},
                            policy_version=version, messages=[{"role": "user", "content": f"turn {t} of {rid}"}]))  # fmt: skip
            spans.append([s0, end])
            start = end
        reward = rng.choice([0.0, 1.0])
        row = Row(ids, mask, lps, rid, group, list(range(turns)), spans, reward,
                  {"policy_versions": {str(t): version for t in range(turns)}})  # fmt: skip
        return Trajectory(
            rid, group, tns, [row], [], reward, {"stop_reason": "completed", "success": reward == 1.0}
        )

    total = 0
    records = []
    for b in range(batches):
        if b % 10 == 0:
            held = [
                rollout(f"eval-b{b}-key{k}-r0", f"key{k}", rng.randint(300, 600), 2 * b) for k in range(8)
            ]
            store.add(held, "eval", b)
            rs = [t.reward for t in held]
            records.append({"kind": "eval", "outer_batch": b, "val_reward": sum(rs) / 8, "val_reward_std": 0.5,
                            "val_success": sum(rs) / 8, "val_rollouts": 8, "val_failed": 0, "eval_s": 40.0})  # fmt: skip
        trajs = []
        for i in range(per_batch):
            size = big_row if (b == 2 and i == 0) else rng.randint(300, 1200)
            trajs.append(rollout(f"b{b}-task{i // 4}-r{i % 4}", f"task{i // 4}", size, 2 * b))
            total += size
        store.add(trajs, "train", b)
        trace = {}
        for t in trajs:
            row = t.rows[0]
            n = len(row.input_ids)
            m = np.asarray(row.loss_mask, dtype=np.int8)
            samp = np.asarray(row.logprobs, dtype=np.float32)
            noise = np.asarray(
                [rng.gauss(0, 0.01) if rng.random() > 0.01 else rng.gauss(0, 1.0) for _ in range(n)],
                dtype=np.float32,
            )
            trainer = np.where(m > 0, samp + noise, 0).astype(np.float32)
            trace[id(row)] = {"row": row, "advantage": 0.0, "step": 2 * b + 1, "loss_mask": m, "trainer_logprobs": trainer,
                              "sampler_logprobs": samp, "old_logprobs": samp, "importance_weight": m.astype(np.float32),
                              "clipped": ((np.abs(noise) > 0.5) & (m > 0)).astype(np.int8)}  # fmt: skip
        store.write_trained(b, trajs, trace)
        rows_tokens = sum(len(t.rows[0].input_ids) for t in trajs)
        records.append({"kind": "train", "outer_batch": b, "step": 2 * b + 2, "reward_mean": rng.random(),
                        "rollouts": per_batch, "failed_rollouts": 0, "groups": per_batch // 4,
                        "zero_advantage_groups": rng.randint(0, 1), "rows": per_batch, "tokens": rows_tokens,
                        "processed_tokens": rows_tokens, "optimizer_steps": 2, "rollout_s": rng.uniform(40, 80),
                        "train_s": rng.uniform(20, 40), "actor_update_s": rng.uniform(18, 38), "e2e_s": rng.uniform(70, 130),
                        "loss": 0.1, "grad_norm": 1.0, "approx_kl": 1e-3, "clip_fraction": 0.03, "lr": 3e-4})  # fmt: skip
    records.append(
        {
            "kind": "eval",
            "outer_batch": batches,
            "val_reward": 0.5,
            "val_reward_std": 0.5,
            "val_rollouts": 8,
            "eval_s": 40.0,
        }
    )
    with open(root / "metrics.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    (root / "train.json").write_text(
        json.dumps({"env": "lookup", "model": "qwen3", "outer_batches": batches, "synthetic": True})
    )
    return {
        "rollouts": batches * per_batch,
        "row_tokens": total,
        "jsonl_mb": round(store.store.jsonl.stat().st_size / 2**20, 1),
    }


def peak_rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", text).group(1)) / 1024  # type: ignore[union-attr]


def start_server(root: Path) -> tuple[subprocess.Popen, str, float]:
    """The real ``strands-art view`` command on ``root``: (process, URL, seconds until ready)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "strands_art.cli", "view", str(root), "--port", "0", "--tokenizer", "qwen3"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    line = proc.stdout.readline()  # type: ignore[union-attr]
    m = re.search(r"at (http://\S+/)", line)
    if m is None:
        proc.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    return proc, m.group(1), time.perf_counter() - t0


def measure(page: Any, url: str, row_id: str) -> dict[str, float]:
    """One load of the run page and of ``row_id``'s row 0 (seconds from navigation start)."""
    mark = "() => performance.getEntriesByName('{}').length > 0"
    start = "performance.getEntriesByName('{}')[0].startTime"
    page.goto(url)
    page.wait_for_function(mark.format("run-rendered"), timeout=120_000)
    out = {
        "run": page.evaluate(start.format("run-rendered")) / 1000,
        "fcp": page.evaluate("(performance.getEntriesByName('first-contentful-paint')[0]||{}).startTime||0")
        / 1000,
    }
    page.goto(f"{url}row?id={row_id}&row=0")
    page.wait_for_function(mark.format("row-interactive"), timeout=120_000)
    out["row"] = page.evaluate(start.format("row-interactive")) / 1000
    out["frame"] = page.evaluate(
        """async () => {
            const pane = document.getElementById('tokens'); let worst = 0;
            for (let k = 1; k <= 60; k++) {
                const t0 = performance.now();
                pane.scrollTop = pane.scrollHeight * k / 60;
                await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
                worst = Math.max(worst, performance.now() - t0);
            }
            return worst;
        }"""
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rollouts", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--big-row", type=int, default=32768)
    ap.add_argument("--loads", type=int, default=5)
    ap.add_argument("--keep", default=None, help="write the run here and keep it (default: a temp dir)")
    ap.add_argument(
        "--training", type=int, default=0, metavar="B",
        help="a synthetic strands-art train run of B outer batches x --per-batch rollouts instead "
        "(its batch-2 rollout holds the --big-row row; baseline: 3 batches, a 2,048-token row)",
    )  # fmt: skip
    ap.add_argument("--per-batch", type=int, default=8)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="viewer-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    small = Path(tempfile.mkdtemp(prefix="viewer-bench-small-"))
    t0 = time.perf_counter()
    if args.training:
        counts = make_train_run(root, args.training, args.per_batch, args.big_row)
        make_train_run(small, 3, args.per_batch, 2048, seed=1)
        row_id, what = (
            "b2-task0-r0",
            f"training run of {args.training} outer batches x {args.per_batch} rollouts",
        )
        base_what = f"3 outer batches x {args.per_batch}"
    else:
        counts = make_run(root, args.rollouts, args.turns, args.big_row)
        make_run(small, 8, args.turns, 2048, seed=1)
        row_id, what, base_what = "task-000-r0", "run", "8 rollouts"
    print(f"synthetic {what}: {counts['rollouts']} rollouts, {counts['row_tokens']:,} row tokens, "
          f"trajectories.jsonl {counts['jsonl_mb']} MB, written in {time.perf_counter() - t0:.1f} s; "
          f"baseline beside it: {base_what}, a 2,048-token row; cpus={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f}")  # fmt: skip
    procs = []
    try:
        proc, url, ready = start_server(root)
        procs.append(proc)
        print(f"server ready in {ready:.1f} s (tokenizer load + index of the run) at {url}")
        sproc, surl, _ = start_server(small)
        procs.append(sproc)
        big, base = [], []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            for n in range(args.loads):  # the big run and the baseline alternately: the same load
                for target, u in ((big, url), (base, surl)):
                    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
                    target.append(measure(ctx.new_page(), u, row_id))
                    ctx.close()
                b, s0 = big[-1], base[-1]
                print(f"load {n}: run page first paint {b['fcp']:.3f} s, rendered {b['run']:.3f} s "
                      f"(baseline {s0['run']:.3f} s); 32K row interactive {b['row']:.3f} s (2K row {s0['row']:.3f} s); "
                      f"worst scroll frame {b['frame']:.0f} ms (2K row {s0['frame']:.0f} ms); loadavg {os.getloadavg()[0]:.1f}")  # fmt: skip
            browser.close()
        rss = peak_rss_mb(proc.pid)
    finally:
        for pr in procs:
            pr.terminate()
            pr.wait(timeout=10)
        shutil.rmtree(small, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    def spread(rows: list[dict[str, float]], key: str) -> str:
        xs = [r[key] for r in rows]
        return f"median {statistics.median(xs):.3f} s (min {min(xs):.3f}, max {max(xs):.3f})"

    print(f"run page rendered: {spread(big, 'run')}; first paint {spread(big, 'fcp')}; "
          f"baseline ({base_what}) {spread(base, 'run')}: ratio {med(big, 'run') / med(base, 'run'):.2f}")  # fmt: skip
    print(f"32K-token row interactive: {spread(big, 'row')}; 2K-token row {spread(base, 'row')}: "
          f"ratio {med(big, 'row') / med(base, 'row'):.2f}; worst scroll frame median {med(big, 'frame'):.0f} ms "
          f"(2K row {med(base, 'frame'):.0f} ms)")  # fmt: skip
    print(f"server peak RSS {rss:.1f} MB; goals: run page < 1 s, row page < 1 s, RSS < 300 MB")
    print(
        f"RESULT run_page_s={med(big, 'run'):.3f} row_page_s={med(big, 'row'):.3f} server_rss_mb={rss:.1f} "
        f"run_page_vs_baseline={med(big, 'run') / med(base, 'run'):.2f} row_page_vs_2k={med(big, 'row') / med(base, 'row'):.2f}"
    )


if __name__ == "__main__":
    main()
