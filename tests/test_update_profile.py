"""bench/update_profile.py's attribution on a run directory written here (no model, no Maven)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # the bench imports its siblings
_spec = importlib.util.spec_from_file_location("update_profile", ROOT / "bench" / "update_profile.py")
up = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(up)


def test_every_rollout_second_is_attributed(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    (run / "env" / "rollouts").mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({
        "kind": "train", "outer_batch": 0, "rollout_s": 300.0, "train_s": 100.0, "fwd_bwd_s": 80.0,
        "optimizer_s": 2.0, "sync_s": 8.0, "reward_mean": 0.25, "zero_advantage_groups": 1, "grad_norm": 0.3,
        "rows": 8, "tokens": 9000}) + "\n")  # fmt: skip
    rec = {"times": {"wall_s": 100.0, "setup_s": 5.0, "sampling_s": 40.0, "gateway_s": 1.0, "tools_s": 30.0,
                     "evaluation_s": 20.0}, "tool_stats": {"maven_s": 25.0}}  # fmt: skip
    (run / "env" / "rollouts" / "results.jsonl").write_text(
        "".join(
            json.dumps({**rec, "rollout_id": f"b0-t-r{k}", "eval_cache_hit": k == 1}) + "\n" for k in range(2)
        )
    )
    raw = {"cmd": ["strands-art"], "rc": 0, "wall": 450.0, "load0": [9.0, 9, 9], "load1": [10.0, 10, 10],
           "train_to_exit_s": 20.0,
           "first": {"vllm:request_prefill_time_seconds_sum": 10.0, "vllm:prompt_tokens_total": 100.0},
           "last": {"vllm:request_prefill_time_seconds_sum": 40.0, "vllm:request_decode_time_seconds_sum": 50.0,
                    "vllm:request_queue_time_seconds_sum": 0.0, "vllm:prompt_tokens_total": 5100.0}}  # fmt: skip
    run.with_name("run.raw.json").write_text(json.dumps(raw))
    out_json = tmp_path / "p.json"
    assert up.main(["--phase", "update", "--run-dir", str(run), "--train-tasks", "T", "--from-raw",
                    "--json", str(out_json)]) == 0  # fmt: skip
    out = json.loads(out_json.read_text())
    split = out["rollout_seconds"]
    assert split["wall"] == 200.0
    assert (split["setup"], split["sampling"], split["gateway"], split["agent_maven"]) == (
        10.0,
        80.0,
        2.0,
        50.0,
    )
    assert (split["agent_other_tools"], split["evaluation"], split["rest"]) == (10.0, 40.0, 8.0)
    # the server's prefill : decode seconds (30 : 50) split the sampling seconds
    assert (split["sampling_prefill"], split["sampling_decode"]) == (30.0, 50.0)
    assert out["train"]["other"] == 10.0 and out["checkpoint_and_exit_s"] == 20.0
    assert (out["eval_cache_hits"], out["eval_cache_lookups"]) == (1, 2)
    assert "RESULT phase=update wall_s=450 phase_s=400 rollouts=2" in capsys.readouterr().out


def test_a_run_started_from_a_background_job_still_stops_on_ctrl_c() -> None:
    """A shell starts `... &` with SIGINT ignored; the run inherits that unless the bench restores
    it (it did not: --phase eval's SIGINT left the run sampling the next outer batch)."""
    import signal
    import subprocess

    code = "import time; print('ready', flush=True); time.sleep(60)"
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job starts
    try:
        kept = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        fixed = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, preexec_fn=up.sigint_default
        )
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        for p in (kept, fixed):
            assert p.stdout.readline() == b"ready\n"
            p.send_signal(signal.SIGINT)
        assert fixed.wait(timeout=30) == -signal.SIGINT  # KeyboardInterrupt ends Python by SIGINT
        with pytest.raises(subprocess.TimeoutExpired):
            kept.wait(timeout=2)  # the inherited SIG_IGN: still running
    finally:
        kept.kill()
        fixed.kill()
        kept.wait()


def test_the_server_counters_freeze_as_the_evaluation_record_appears(tmp_path: Path, monkeypatch) -> None:
    """--phase eval: the profile's counters are those of the evaluation, not of the next outer
    batch's requests while the run stops."""
    import signal

    class Proc:
        def __init__(self):
            self.pid, self.polls, self.signals = 1, 0, []

        def poll(self):
            self.polls += 1
            return None if self.polls <= 3 else 0

        def send_signal(self, sig):
            self.signals.append(sig)

    counter = iter(range(100))
    monkeypatch.setattr(up, "server_port", lambda pid: 8000)
    monkeypatch.setattr(up, "scrape", lambda port: {"vllm:generation_tokens_total": float(next(counter))})
    monkeypatch.setattr(up.time, "sleep", lambda s: None)
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"kind": "eval"}) + "\n")
    proc = Proc()
    watch = up.Watcher(proc, tmp_path, stop_on_eval=True)
    watch.run()
    # iteration 1 scrapes 0, sees the record, scrapes once more (1) and freezes; iterations 2-3 scrape nothing
    assert watch.first == {"vllm:generation_tokens_total": 0.0}
    assert watch.last == {"vllm:generation_tokens_total": 1.0}
    assert proc.signals == [signal.SIGINT] and next(counter) == 2
