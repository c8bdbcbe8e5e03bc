"""Where the seconds of one MigrationBench GRPO update and one held-out evaluation go (issue
"A MigrationBench GRPO update in minutes").

Runs ``strands-art train --env migrationbench`` with the recorded settings
(:data:`migration_learning.FLAGS`, ``--outer-batches 1``, then ``--extra``) and attributes its
wall time from what the run records, plus the vLLM server's own Prometheus counters:

- ``--phase update`` (no held-out tasks): one outer batch. The rollout phase's rollout-seconds
  (the sum over its rollouts of their wall time; several run at once) split into sandbox setup
  (workspace copy + tool environment, ``times.setup_s``), sampling (split into prompt prefill,
  decode and queueing by the server's ``vllm:request_prefill_time_seconds`` /
  ``request_decode_time_seconds`` / ``request_queue_time_seconds`` sums), gateway (rendering,
  parsing, token bookkeeping), the agent's Maven builds, its other tools, the scoring evaluation,
  and the rest (the agent framework, the audit, waiting); the update's wall time split into
  forward+backward, optimizer, adapter sync to the server and the rest (advantages, batching);
  and the checkpoint (from the train record's arrival to the end of the process);
- ``--phase eval``: the held-out evaluation before training (the process is stopped once its
  record is written), its rollout-seconds split the same way.

Also the server's prompt tokens, generated tokens and prefix-cache hits (``vllm:prefix_cache_*``),
the load average before and after. Prints a table and ``RESULT phase=... wall_s=...``.

    STRANDS_ART_VLLM_PYTHON=.venv-vllm/bin/python flock /tmp/strands-art-heavy.lock \\
        python bench/update_profile.py --phase update --run-dir $RUN --train-tasks $TASKS/train
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from migration_learning import FLAGS

METRICS = (
    "vllm:request_prefill_time_seconds_sum",
    "vllm:request_decode_time_seconds_sum",
    "vllm:request_queue_time_seconds_sum",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:request_success_total",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--phase", choices=("update", "eval"), required=True)
    p.add_argument("--run-dir", required=True, help="a new directory for the train run")
    p.add_argument("--train-tasks", required=True)
    p.add_argument("--eval-tasks", help="held-out tasks (needed for --phase eval)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--extra", default="", help="more `strands-art train` flags, after FLAGS")
    p.add_argument("--json", help="also write the numbers here")
    p.add_argument(
        "--from-raw", action="store_true",
        help="run nothing: summarize --run-dir from what a run of this bench saved beside it (RUN_DIR.raw.json)",
    )  # fmt: skip
    args = p.parse_args(argv)
    if args.phase == "eval" and not args.eval_tasks:
        p.error("--phase eval needs --eval-tasks")
    return args


def descendants(pid: int) -> list[int]:
    """PIDs whose parent chain reaches ``pid`` (from /proc)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out = []
    for p in parent:
        q = p
        while q in parent and q != pid and q > 1:
            q = parent[q]
        if q == pid and p != pid:
            out.append(p)
    return out


def server_port(pid: int) -> int | None:
    """The ``--port`` of the vLLM server the run started (a descendant of ``pid``)."""
    for p in descendants(pid):
        try:
            argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"vllm.entrypoints.openai.api_server" in argv and b"--port" in argv:
            return int(argv[argv.index(b"--port") + 1])
    return None


def scrape(port: int) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"([a-z_:]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$", line)
        if m and m.group(1) in METRICS:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
    return out


def sigint_default() -> None:
    """In the child before exec: SIGINT's default disposition (Python then installs its
    KeyboardInterrupt handler), whatever this process inherited."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Watcher(threading.Thread):
    """Polls the run: the server's counters (the last scrape wins: the server dies with the run;
    with ``stop_on_eval``, the scrape as the evaluation's record appeared, not the next outer
    batch's requests while the run stops) and when each metrics record appeared."""

    def __init__(self, proc: subprocess.Popen, run_dir: Path, stop_on_eval: bool) -> None:
        super().__init__(daemon=True)
        self.proc, self.run_dir, self.stop_on_eval = proc, run_dir, stop_on_eval
        self.port: int | None = None
        self.first: dict[str, float] | None = None
        self.last: dict[str, float] = {}
        self.arrived: dict[str, float] = {}
        self.frozen = False

    def poll_server(self) -> None:
        if self.port is None:
            self.port = server_port(self.proc.pid)
        if self.port is not None and not self.frozen:
            try:
                snap = scrape(self.port)
                if self.first is None:
                    self.first = snap
                self.last = snap
            except httpx.HTTPError:
                pass

    def run(self) -> None:
        while self.proc.poll() is None:
            self.poll_server()
            path = self.run_dir / "metrics.jsonl"
            if path.exists():
                for line in path.read_text().splitlines():
                    rec = json.loads(line)
                    self.arrived.setdefault(rec["kind"], time.monotonic())
                if self.stop_on_eval and "eval" in self.arrived:
                    self.poll_server()  # the evaluation's requests all answered before its record
                    self.frozen = True
                    self.proc.send_signal(signal.SIGINT)  # Ctrl-C: the command stops cleanly
                    self.stop_on_eval = False
            time.sleep(2)


def rollout_split(records: list[dict[str, Any]], server: dict[str, float]) -> dict[str, float]:
    """Rollout-seconds by where they went (see the module doc)."""
    acc = dict.fromkeys(
        ("wall", "setup", "sampling", "gateway", "agent_maven", "agent_other_tools", "evaluation"), 0.0
    )
    for r in records:
        t = r.get("times", {})
        acc["wall"] += t.get("wall_s", 0.0)
        acc["setup"] += t.get("setup_s", 0.0)
        acc["sampling"] += t.get("sampling_s", 0.0)
        acc["gateway"] += t.get("gateway_s", 0.0)
        agent_maven = r.get("tool_stats", {}).get("maven_s", 0.0)
        acc["agent_maven"] += agent_maven
        acc["agent_other_tools"] += t.get("tools_s", 0.0) - agent_maven
        acc["evaluation"] += t.get("evaluation_s", 0.0)
    acc["rest"] = acc["wall"] - sum(v for k, v in acc.items() if k != "wall")
    pre = server.get("vllm:request_prefill_time_seconds_sum", 0.0)
    dec = server.get("vllm:request_decode_time_seconds_sum", 0.0)
    que = server.get("vllm:request_queue_time_seconds_sum", 0.0)
    total = pre + dec + que
    if total > 0:  # the server's request-seconds, scaled to the gateway's sampling seconds
        for k, v in (("prefill", pre), ("decode", dec), ("queue", que)):
            acc[f"sampling_{k}"] = acc["sampling"] * v / total
    return acc


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run_dir = Path(args.run_dir)
    raw_path = run_dir.with_name(run_dir.name + ".raw.json")
    if args.from_raw:
        return summarize(args, run_dir, json.loads(raw_path.read_text()))
    if run_dir.exists():
        print(f"update_profile.py: {run_dir} exists: give a new --run-dir", file=sys.stderr)
        return 2
    exe = Path(sys.executable).parent / "strands-art"
    cmd = [
        str(exe) if exe.exists() else "strands-art", "train", "--env", "migrationbench",
        "--train-tasks", args.train_tasks, *FLAGS.split(), "--outer-batches", "1", *args.extra.split(),
        "--seed", str(args.seed), "--run-dir", str(run_dir), "--no-progress",
    ]  # fmt: skip
    if args.phase == "eval":
        cmd[cmd.index("--train-tasks") : cmd.index("--train-tasks")] = ["--eval-tasks", args.eval_tasks]
    load0 = os.getloadavg()
    print(f"$ {' '.join(cmd)}\nstart {time.strftime('%H:%M:%S')} load {load0}", flush=True)
    t0 = time.monotonic()
    # SIGINT back to its default in the run: a shell starts a background job (`... &`, nohup) with
    # SIGINT ignored, the run would inherit that and --phase eval's Ctrl-C would not stop it
    proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=sigint_default)
    watch = Watcher(proc, run_dir, stop_on_eval=args.phase == "eval")
    watch.start()
    rc = proc.wait()
    wall = time.monotonic() - t0
    watch.join(timeout=10)
    raw = {"cmd": cmd, "rc": rc, "wall": wall, "load0": load0, "load1": os.getloadavg(), "first": watch.first or {},
           "last": watch.last, "train_to_exit_s": wall - (watch.arrived["train"] - t0) if "train" in watch.arrived else None}  # fmt: skip
    raw_path.write_text(json.dumps(raw, indent=2))  # what the summary needs: it can be redone with --from-raw
    return summarize(args, run_dir, raw)


def summarize(args: argparse.Namespace, run_dir: Path, raw: dict[str, Any]) -> int:
    """Print (and with --json write) the profile of ``run_dir`` from the run's records and ``raw``."""
    cmd, rc, wall, load0, load1 = raw["cmd"], raw["rc"], raw["wall"], tuple(raw["load0"]), tuple(raw["load1"])
    server = {k: raw["last"].get(k, 0.0) - raw["first"].get(k, 0.0) for k in METRICS}
    metrics = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    results = [
        json.loads(x) for x in (run_dir / "env" / "rollouts" / "results.jsonl").read_text().splitlines()
    ]
    out: dict[str, Any] = {"phase": args.phase, "rc": rc, "wall_s": wall, "load_before": load0, "load_after": load1,
                           "server": server, "command": cmd}  # fmt: skip
    lines = [f"exit {rc}, wall {wall:.0f} s, load average before {load0}, after {load1}"]
    if args.phase == "eval":
        ev = next(r for r in metrics if r["kind"] == "eval")
        recs = [r for r in results if r["rollout_id"].startswith("eval-")]
        out.update(phase_s=ev["eval_s"], rollouts=len(recs), val_reward=ev["val_reward"])
        lines.append(
            f"held-out evaluation: {ev['eval_s']:.0f} s wall, {len(recs)} rollouts, reward {ev['val_reward']:.3f}"
        )
    else:
        tr = next(r for r in metrics if r["kind"] == "train")
        recs = [r for r in results if not r["rollout_id"].startswith("eval-")]
        ckpt = raw["train_to_exit_s"] or 0.0
        train = {k: tr.get(k, 0.0) for k in ("train_s", "fwd_bwd_s", "optimizer_s", "sync_s")}
        train["other"] = train["train_s"] - train["fwd_bwd_s"] - train["optimizer_s"] - train["sync_s"]
        out.update(rollout_phase_s=tr["rollout_s"], train=train, checkpoint_and_exit_s=ckpt, rollouts=len(recs),
                   reward_mean=tr.get("reward_mean"), tied_groups=tr.get("zero_advantage_groups"),
                   grad_norm=tr.get("grad_norm"), rows=tr.get("rows"), tokens=tr.get("tokens"))  # fmt: skip
        lines.append(f"update: rollouts {tr['rollout_s']:.0f} s wall ({len(recs)} rollouts), training {train['train_s']:.0f} s "
                     f"(forward+backward {train['fwd_bwd_s']:.0f}, optimizer {train['optimizer_s']:.1f}, adapter sync "
                     f"{train['sync_s']:.1f}, other {train['other']:.1f}), checkpoint + exit {ckpt:.0f} s; reward "
                     f"{tr.get('reward_mean', 0):.3f}, tied groups {tr.get('zero_advantage_groups')}, grad norm "
                     f"{tr.get('grad_norm', 0):.3f}, rows {tr.get('rows')}, tokens {tr.get('tokens')}")  # fmt: skip
    split = rollout_split(recs, server)
    out["rollout_seconds"] = split
    lines.append(f"rollout-seconds (sum over rollouts; {split['wall']:.0f} in all):")
    for k, v in split.items():
        if k != "wall":
            lines.append(
                f"  {k:22s} {v:8.0f} s  {100 * v / split['wall']:5.1f} %"
                if split["wall"]
                else f"  {k} {v:.0f}"
            )
    q, h = server.get("vllm:prefix_cache_queries_total", 0.0), server.get("vllm:prefix_cache_hits_total", 0.0)
    lines.append(f"server: prompt tokens {server['vllm:prompt_tokens_total']:.0f}, generated "
                 f"{server['vllm:generation_tokens_total']:.0f}, prefix cache hits {h:.0f} of {q:.0f} queried tokens, "
                 f"requests {server['vllm:request_success_total']:.0f}")  # fmt: skip
    evals = [r.get("eval_cache_hit") for r in recs if "eval_cache_hit" in r]
    lines.append(f"evaluation cache: {sum(1 for x in evals if x)} hits of {len(evals)} scored rollouts")
    out["eval_cache_hits"], out["eval_cache_lookups"] = sum(1 for x in evals if x), len(evals)
    print("\n".join(lines))
    phase_s = out.get("phase_s") or (out["rollout_phase_s"] + out["train"]["train_s"])
    print(f"RESULT phase={args.phase} wall_s={wall:.0f} phase_s={phase_s:.0f} rollouts={len(recs)} "
          f"load_before={load0[0]:.1f} load_after={load1[0]:.1f}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    return 0 if rc in (0, 130) else rc


if __name__ == "__main__":
    raise SystemExit(main())
