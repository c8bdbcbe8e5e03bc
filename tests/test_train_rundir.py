"""A run directory is data, never code (issue 48 part 3), through the real ``strands-art train``
command (real SmolLM2 on the capitals task, the smallest settings): a crafted ``rng.pt`` runs
nothing, ``checkpoints/latest`` cannot lead out of the run, ``train.json``'s own ``run_dir`` is
ignored (a copied run resumes into its copy), a second ``--resume`` of a run that is training is
refused, every damaged file is one line and exit 2 with nothing changed, a full disk while
checkpointing keeps the previous checkpoint and leaves nothing behind, and a sampler that dies
mid-run stops the run at its last checkpoint with the ``--resume`` command."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from strands_art.cli import main

ROOT = Path(__file__).resolve().parents[1]
SMALL = [
    "--env", "capitals", "--model", "smollm2", "--outer-batches", "1", "--prompt-batch", "1",
    "--rollouts-per-prompt", "2", "--ppo-mini-batch", "1", "--max-new-tokens", "4", "--eval-samples", "1",
    "--max-staleness", "0", "--threads", "1", "--seed", "5", "--lr", "2e-2", "--no-progress",
]  # fmt: skip


@pytest.fixture(scope="module")
def base_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished one-batch run (checkpoint ob-000001), copied by each test."""
    run = tmp_path_factory.mktemp("train") / "run"
    assert main(["train", *SMALL, "--run-dir", str(run)]) == 0
    assert (run / "checkpoints" / "latest").read_text() == "ob-000001"
    return run


def _copy(base: Path, dest: Path) -> Path:
    shutil.copytree(base, dest, symlinks=True)
    (dest / ".lock").unlink(missing_ok=True)
    return dest


def _snapshot(d: Path) -> dict[str, str]:
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(d.rglob("*"))
        if p.is_file() and not p.is_symlink() and p.name != ".lock"
    }


def _resume(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["train", "--resume", "--run-dir", str(run), "--no-progress"])
    return code, capsys.readouterr().err


def _one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.startswith("strands-art train:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


def test_a_crafted_rng_pt_runs_no_command(base_run: Path, tmp_path: Path, capsys) -> None:
    """``rng.pt`` replaced by a pickle whose load calls ``os.system``: refused with one line,
    the command never runs (before: ``torch.load(weights_only=False)`` ran it on --resume)."""
    run = _copy(base_run, tmp_path / "run")
    marker = tmp_path / "PWNED"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    torch.save({"python": Payload(), "torch": torch.zeros(1)}, run / "checkpoints" / "ob-000001" / "rng.pt")
    before = _snapshot(run)
    code, err = _resume(run, capsys)
    assert code == 2 and not marker.exists()
    line = _one_line(err)
    assert "rng.pt: not an RNG state saved by strands-art" in line and "nothing unpickled runs" in line
    assert _snapshot(run) == before  # nothing written


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("latest-outside", "names '../../elsewhere/checkpoints/ob-000001', not a checkpoint of this run"),
        ("checkpoint-symlink", "which is reached through a symlink"),
        ("train-json-list", "train.json holds a JSON list, not an object of settings"),
        ("state-no-outer-batch", "state.json: 'outer_batch' must be an integer >= 0, got None"),
        ("adapter-garbage", "adapter_model.safetensors: not a safetensors file"),
        ("rng-garbage", "rng.pt: not an RNG state saved by strands-art"),
        (
            "metrics-no-outer-batch",
            "metrics.jsonl:2: a record without a string 'kind' and an integer 'outer_batch'",
        ),
        ("metrics-str-outer-batch", "(kind 'train', outer_batch '0')"),
        ("metrics-fifo", "metrics.jsonl is not a regular file (a FIFO, socket or device)"),
        ("lock-dir", ".lock is a directory, not a regular file: move it out of the run directory"),
        ("rows-file", "rows is a regular file, not a directory: move it out of the run directory"),
        ("adapter-no-tensors", "adapter_model.safetensors: lacks 420 of the model's 420 adapter tensors"),
        ("adapter-some-tensors", "adapter_model.safetensors: lacks 410 of the model's 420 adapter tensors"),
        ("adapter-shapes", "420 adapter tensors do not fit the model ("),
        ("adapter-nan", "adapter_model.safetensors: 1 of 420 tensors hold NaN or infinite values"),
        ("state-another-batch", "state.json: 'outer_batch' is 5, but the checkpoint is ob-000001"),
    ],
)
def test_a_damaged_run_directory_is_one_line_and_exit_2(
    base_run: Path, tmp_path: Path, capsys, damage: str, message: str
) -> None:
    run = _copy(base_run, tmp_path / "run")
    ck = run / "checkpoints" / "ob-000001"
    if damage == "latest-outside":
        elsewhere = _copy(base_run, tmp_path / "elsewhere")
        (run / "checkpoints" / "latest").write_text("../../elsewhere/checkpoints/ob-000001")
        assert (run / "checkpoints" / "../../elsewhere/checkpoints/ob-000001").exists()
        del elsewhere
    elif damage == "checkpoint-symlink":
        outside = tmp_path / "outside-ob"
        shutil.move(ck, outside)
        ck.symlink_to(outside)
    elif damage == "train-json-list":
        (run / "train.json").write_text("[1, 2]")
    elif damage == "state-no-outer-batch":
        state = json.loads((ck / "state.json").read_text())
        del state["outer_batch"]
        (ck / "state.json").write_text(json.dumps(state))
    elif damage == "adapter-garbage":
        (ck / "adapter_model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}garbage")
    elif damage == "rng-garbage":
        (ck / "rng.pt").write_bytes(os.urandom(300))
    elif damage.startswith("adapter-"):  # a valid safetensors file; loaded, it resumed without a word
        from safetensors.torch import load_file, save_file

        weights = load_file(str(ck / "adapter_model.safetensors"))
        if damage == "adapter-no-tensors":
            weights = {}
        elif damage == "adapter-some-tensors":
            weights = dict(list(weights.items())[:10])
        elif damage == "adapter-shapes":
            weights = {k: torch.zeros(2, 2) for k in weights}
        else:  # every sample of the resumed run failed on NaN probabilities
            first = sorted(weights)[0]
            weights[first] = torch.full_like(weights[first], float("nan"))
        save_file(weights, str(ck / "adapter_model.safetensors"))
        if damage != "adapter-nan":  # checked against the model: only a run with work left loads it
            settings = json.loads((run / "train.json").read_text())
            (run / "train.json").write_text(json.dumps({**settings, "outer_batches": 2}))
    elif damage == "state-another-batch":  # believed, the run resumed "at outer batch 5 (of 1)"
        state = json.loads((ck / "state.json").read_text())
        (ck / "state.json").write_text(json.dumps({**state, "outer_batch": 5}))
    elif damage == "lock-dir":  # was a bare "[Errno 21] Is a directory"
        (run / ".lock").unlink(missing_ok=True)
        (run / ".lock").mkdir()
    elif damage == "rows-file":  # was a bare "[Errno 17] File exists" after the outer batch's rollouts
        shutil.rmtree(run / "rows")
        (run / "rows").write_text("")
    elif damage == "metrics-fifo":  # read, it blocked --resume forever
        (run / "metrics.jsonl").unlink()
        os.mkfifo(run / "metrics.jsonl")
    else:
        lines = (run / "metrics.jsonl").read_text().splitlines()
        train = json.loads(lines[1])
        assert train["kind"] == "train"
        if damage == "metrics-no-outer-batch":
            del train["outer_batch"]
        else:
            train["outer_batch"] = "0"
        lines[1] = json.dumps(train)
        (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    before = _snapshot(run)
    code, err = _resume(run, capsys)
    assert code == 2
    assert message in _one_line(err)
    if damage in ("adapter-no-tensors", "adapter-some-tensors", "adapter-shapes"):
        # checked against the loaded model: TensorBoard's event file was written again from metrics.jsonl
        tb = lambda snap: {k: v for k, v in snap.items() if not k.startswith("tensorboard/")}  # noqa: E731
        assert tb(_snapshot(run)) == tb(before)
    else:
        assert _snapshot(run) == before  # refused before anything was written


def test_a_copied_run_resumes_into_its_copy_and_a_second_resume_is_refused(
    base_run: Path, tmp_path: Path, capsys
) -> None:
    """A copy of an unfinished run (its train.json still naming the original's run_dir) resumed
    with ``--run-dir COPY`` trains and checkpoints only in the copy (before: into the original);
    a second ``--resume`` while it trains stops at once naming the pid (before: ran beside it);
    a killed checkpoint write's ``.ob-N.tmp*`` leftover is removed."""
    original = _copy(base_run, tmp_path / "original")
    copy = _copy(original, tmp_path / "copy")
    settings = json.loads((copy / "train.json").read_text())
    assert settings["run_dir"] == str(base_run)  # a copy names where it was made
    settings.update(outer_batches=2, run_dir=str(original))
    (copy / "train.json").write_text(json.dumps(settings))
    (original / "train.json").write_text(json.dumps(settings))  # the original is unfinished too
    leftover = copy / "checkpoints" / ".ob-000002.tmp4242"
    leftover.mkdir()
    (leftover / "adapter_model.safetensors").write_bytes(b"half")
    before = _snapshot(original)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "strands_art.cli",
            "train",
            "--resume",
            "--run-dir",
            str(copy),
            "--no-progress",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not (copy / ".lock").exists() or (copy / ".lock").read_text().strip() != str(proc.pid):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()  # type: ignore[union-attr]
            time.sleep(0.1)
        code, err = _resume(copy, capsys)
        assert code == 2
        assert f"is being trained by another process (pid {proc.pid})" in _one_line(err)
        out, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-3000:]
    assert (copy / "checkpoints" / "latest").read_text() == "ob-000002"
    assert sorted(p.name for p in (copy / "checkpoints").iterdir()) == ["latest", "ob-000001", "ob-000002"]
    train = [json.loads(x) for x in (copy / "metrics.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["outer_batch"]) for r in train] == [
        ("eval", 0),
        ("train", 0),
        ("eval", 1),  # the one-batch run's final evaluation, kept
        ("train", 1),
        ("eval", 2),
    ]
    assert _snapshot(original) == before  # nothing written into the original


def test_a_full_disk_while_checkpointing_keeps_the_previous_checkpoint(
    base_run: Path, tmp_path: Path, capsys
) -> None:
    """The run resumed on a small tmpfs that holds its files but not another checkpoint: one line
    naming the checkpoint and ENOSPC, with the --resume command, exit 2; ``latest`` still names
    ob-000001 and no ``.ob-*`` temporary is left (before: a traceback)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    used = sum(p.stat().st_size for p in base_run.rglob("*") if p.is_file())
    size_kb = used // 1024 + 512  # the files, the next batch's metrics and rows; not a checkpoint
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        run = _copy(base_run, mnt / "run")
        settings = json.loads((run / "train.json").read_text())
        (run / "train.json").write_text(json.dumps({**settings, "outer_batches": 2}))
        code, err = _resume(run, capsys)
        assert code == 2
        line = _one_line(err)
        assert (
            "cannot write checkpoint" in line and "ob-000002: " in line and "No space left on device" in line
        ), line
        assert "train --resume --run-dir" in line
        assert (run / "checkpoints" / "latest").read_text() == "ob-000001"
        assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["latest", "ob-000001"]
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_an_environment_factory_that_exits_is_one_line(tmp_path: Path, capsys) -> None:
    assert main(["train", "--env", "builtins:exit", "--run-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "environment factory builtins:exit raised SystemExit" in _one_line(err)


def test_a_sampler_that_dies_stops_the_run_at_its_last_checkpoint(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sampler stops answering after the first outer batch (8 held-out samples + 2): the run
    stops before training on batch 1, exit 1, the --resume command printed; the metrics, rows
    and checkpoint stand at batch 1 (before: batch 1 trained on nothing and the run went on).
    Resumed with the sampler back, it finishes as a run that never stopped."""
    run = tmp_path / "run"
    argv = [*SMALL, "--outer-batches", "3", "--env", "tests.support.dying_sampler:train_environment"]
    monkeypatch.setenv("STRANDS_ART_TEST_SAMPLES", "10")
    assert main(["train", *argv, "--run-dir", str(run)]) == 1
    line = _one_line(capsys.readouterr().err)
    assert "the sampler stopped answering during outer batch 1: 2 of 2 rollouts failed" in line
    assert "connection refused" in line and f"train --resume --run-dir {run}" in line
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["outer_batch"]) for r in records] == [("eval", 0), ("train", 0)]
    assert (run / "checkpoints" / "latest").read_text() == "ob-000001"
    assert {p.name.split(".")[0] for p in (run / "rows").iterdir()} == {"ob-000000"}  # nothing of batch 1
    monkeypatch.delenv("STRANDS_ART_TEST_SAMPLES")
    code, err = _resume(run, capsys)
    assert code == 0, err[-3000:]
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["outer_batch"]) for r in records] == [
        ("eval", 0), ("train", 0), ("train", 1), ("train", 2), ("eval", 3)
    ]  # fmt: skip
    assert all(r["failed_rollouts"] == 0 for r in records if r["kind"] == "train")


def test_symlinks_planted_at_temporary_names_are_never_written_through(
    base_run: Path, tmp_path: Path, capsys
) -> None:
    """A run directory with symlinks to outside files at the temporary names a resumed batch
    writes (``rows/ob-000001.tmp`` for the rows, ``rows/ob-000001.trained.tmp`` for the rows as
    trained, ``metrics.jsonl.tmp``): the resume extends the run and every outside file is as it
    was (the rows and their Parquet were written into them, the symlinks then renamed into the
    run)."""
    run = _copy(base_run, tmp_path / "run")
    victims = {}
    for rel in ("rows/ob-000001.tmp", "rows/ob-000001.trained.tmp", "metrics.jsonl.tmp"):
        victim = tmp_path / ("victim-" + rel.replace("/", "-"))
        victim.write_text("PRECIOUS\n")
        (run / rel).symlink_to(victim)
        victims[rel] = victim
    code = main(["train", "--resume", "--outer-batches", "2", "--run-dir", str(run), "--no-progress"])
    assert code == 0, capsys.readouterr().err[-3000:]
    assert {rel: v.read_bytes() for rel, v in victims.items()} == dict.fromkeys(victims, b"PRECIOUS\n")
    for name in ("ob-000001.jsonl", "ob-000001.trained.parquet"):
        assert (run / "rows" / name).is_file() and not (run / "rows" / name).is_symlink()
    lines = (run / "rows" / "ob-000001.jsonl").read_text().splitlines()
    assert lines and all(json.loads(x)["rollout_id"].startswith("b1-") for x in lines)
