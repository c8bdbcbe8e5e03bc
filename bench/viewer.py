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

and reads the server's peak RSS (``VmHWM`` of /proc/PID/status) at the end. Times are from the
navigation start, medians over the loads with their spread. Goals: run page < 1 s, row page < 1 s,
RSS < 300 MB.

    python bench/viewer.py [--rollouts 1000] [--turns 4] [--big-row 32768] [--loads 5] [--keep DIR]

Ends with ``RESULT run_page_s=… row_page_s=… server_rss_mb=…``.
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


def peak_rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", text).group(1)) / 1024  # type: ignore[union-attr]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rollouts", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--big-row", type=int, default=32768)
    ap.add_argument("--loads", type=int, default=5)
    ap.add_argument("--keep", default=None, help="write the run here and keep it (default: a temp dir)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="viewer-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    counts = make_run(root, args.rollouts, args.turns, args.big_row)
    print(f"synthetic run: {counts['rollouts']} rollouts, {counts['row_tokens']:,} row tokens, "
          f"trajectories.jsonl {counts['jsonl_mb']} MB, written in {time.perf_counter() - t0:.1f} s; "
          f"cpus={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f}")  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "strands_art.cli", "view", str(root), "--port", "0", "--tokenizer", "qwen3"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        url = re.search(r"at (http://\S+/)", line).group(1)  # type: ignore[union-attr]
        print(
            f"server ready in {time.perf_counter() - t0:.1f} s (tokenizer load + index of the run): {line.strip()}"
        )
        big = "task-000-r0"
        runs, fcps, rows, frames = [], [], [], []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            for n in range(args.loads):
                ctx = browser.new_context(viewport={"width": 1400, "height": 900})
                page = ctx.new_page()
                page.goto(url)
                page.wait_for_function(
                    "() => performance.getEntriesByName('run-rendered').length > 0", timeout=60_000
                )
                runs.append(page.evaluate("performance.getEntriesByName('run-rendered')[0].startTime") / 1000)
                fcps.append(
                    page.evaluate(
                        "(performance.getEntriesByName('first-contentful-paint')[0]||{}).startTime||0"
                    )
                    / 1000
                )
                n_rows = page.locator("table#rollouts tbody tr").count()
                page.goto(f"{url}row?id={big}&row=0")
                page.wait_for_function(
                    "() => performance.getEntriesByName('row-interactive').length > 0", timeout=60_000
                )
                rows.append(
                    page.evaluate("performance.getEntriesByName('row-interactive')[0].startTime") / 1000
                )
                n_tokens = page.locator("#stat-sampled").count() and page.evaluate(
                    "document.querySelectorAll('#tokens .tok').length"
                )
                frames.append(page.evaluate(
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
                ))  # fmt: skip
                print(f"load {n}: run page first paint {fcps[-1]:.3f} s, rendered {runs[-1]:.3f} s ({n_rows} table rows); "
                      f"32K row interactive {rows[-1]:.3f} s ({n_tokens} token elements in the DOM), "
                      f"worst scroll frame {frames[-1]:.0f} ms")  # fmt: skip
                ctx.close()
            browser.close()
        rss = peak_rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs):.3f} s (min {min(xs):.3f}, max {max(xs):.3f})"

    print(f"run page rendered: median {med(runs)}; first paint {med(fcps)}")
    print(
        f"32K-token row interactive: median {med(rows)}; worst scroll frame median {statistics.median(frames):.0f} ms"
    )
    print(f"server peak RSS {rss:.1f} MB; goals: run page < 1 s, row page < 1 s, RSS < 300 MB")
    print(
        f"RESULT run_page_s={statistics.median(runs):.3f} row_page_s={statistics.median(rows):.3f} server_rss_mb={rss:.1f}"
    )


if __name__ == "__main__":
    main()
