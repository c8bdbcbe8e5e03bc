"""Checkpoints of the embedded trainer: LoRA adapter + optimizer + counters + RNG, crash-safe.

Layout under a run directory::

    checkpoints/ob-000003/adapter_model.safetensors   peft adapter (``save_pretrained``)
                          adapter_config.json
                          optimizer.pt                AdamW state_dict
                          rng.pt                      python / torch (/ cuda) RNG states
                          state.json                  outer_batch, step, trainer config, extras
    checkpoints/latest                                name of the newest complete checkpoint

A checkpoint is written to a temporary directory and renamed into place, then ``latest`` is
replaced atomically, so a crash at any point leaves the previous checkpoint usable. Only the
``keep`` newest checkpoints are kept.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
from pathlib import Path
from typing import Any

import torch

logger = logging.getLogger(__name__)

ADAPTER_FILE = "adapter_model.safetensors"


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete, or does not match the model."""


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    run_dir: str | os.PathLike[str],
    model: Any,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
    keep: int = 2,
) -> Path:
    """Save a checkpoint named after ``state["outer_batch"]``; returns its directory.

    Args:
        run_dir: the run directory (``checkpoints/`` is created inside).
        model: a peft model (only the adapter is saved).
        optimizer: its optimizer.
        state: JSON-serializable counters; must hold ``outer_batch`` (batches completed) and
            ``step`` (optimizer steps taken).
        keep: how many newest checkpoints to keep.

    Raises:
        ValueError: if ``state`` lacks ``outer_batch`` or ``step``.
    """
    if "outer_batch" not in state or "step" not in state:
        raise ValueError("checkpoint state needs 'outer_batch' and 'step'")
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    name = f"ob-{int(state['outer_batch']):06d}"
    final = root / name
    tmp = root / f".{name}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        model.save_pretrained(str(tmp))
        if not (tmp / ADAPTER_FILE).exists():
            raise CheckpointError(f"save_pretrained wrote no {ADAPTER_FILE} (is the model a peft model?)")
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save(_rng_state(), tmp / "rng.pt")
        (tmp / "state.json").write_text(json.dumps(state, indent=2))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    pointer = root / ".latest.tmp"
    pointer.write_text(name)
    os.replace(pointer, root / "latest")
    for old in sorted(p for p in root.glob("ob-*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    logger.info("checkpoint %s (outer batch %s, step %s)", final, state["outer_batch"], state["step"])
    return final


def latest_checkpoint(run_dir: str | os.PathLike[str]) -> Path | None:
    """The newest complete checkpoint of a run, or None if there is none."""
    root = Path(run_dir) / "checkpoints"
    pointer = root / "latest"
    if not pointer.exists():
        return None
    path = root / pointer.read_text().strip()
    if not (path / "state.json").exists():
        raise CheckpointError(f"{pointer} names {path.name}, which is incomplete or missing")
    return path


def load_checkpoint(
    path: str | os.PathLike[str], model: Any, optimizer: torch.optim.Optimizer
) -> dict[str, Any]:
    """Load adapter weights, optimizer state and RNG states in place; returns ``state.json``.

    Raises:
        CheckpointError: a missing file, or adapter keys that do not match the model.
    """
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = Path(path)
    for f in (ADAPTER_FILE, "optimizer.pt", "rng.pt", "state.json"):
        if not (path / f).exists():
            raise CheckpointError(f"checkpoint {path} lacks {f}")
    device = next(model.parameters()).device
    weights = load_file(str(path / ADAPTER_FILE), device=str(device))
    result = set_peft_model_state_dict(model, weights)
    unexpected = getattr(result, "unexpected_keys", None) or []
    if unexpected:
        raise CheckpointError(f"adapter keys do not match the model: {unexpected[:3]}")
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location=device, weights_only=True))
    _set_rng_state(torch.load(path / "rng.pt", weights_only=False))
    return json.loads((path / "state.json").read_text())
