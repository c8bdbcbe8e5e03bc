"""Checkpoints of the embedded trainer: LoRA adapter + optimizer + counters + RNG, crash-safe.

Layout under a run directory::

    checkpoints/ob-000003/adapter_model.safetensors   peft adapter (``save_pretrained``)
                          adapter_config.json
                          optimizer.pt                AdamW state_dict
                          rng.pt                      python / torch (/ cuda) RNG states
                          state.json                  outer_batch, step, trainer config, extras
    checkpoints/latest                                name of the newest complete checkpoint

A checkpoint is written to a temporary directory (``.ob-NNNNNN.tmp<pid>``) and renamed into
place, then ``latest`` is replaced atomically, so a crash at any point leaves the previous
checkpoint usable; the leftovers of a killed write are removed by the next save. Only the
``keep`` newest checkpoints are kept.

A run directory is data, never code: nothing in it is unpickled (``optimizer.pt`` and ``rng.pt``
load with ``torch.load(weights_only=True)``: tensors, numbers, strings and containers only — a
crafted pickle is refused, not run); ``latest`` must name a checkpoint of this run
(``ob-NNNNNN``) that is a directory inside it, not reached through a symlink; every file read
must be a regular file, not a symlink; and each file is read completely and checked before
anything is applied to the model, so a damaged checkpoint is one :class:`CheckpointError` naming
the file, never a traceback or a half-loaded model.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import stat
from pathlib import Path
from typing import Any

import torch

logger = logging.getLogger(__name__)

ADAPTER_FILE = "adapter_model.safetensors"
FILES = (ADAPTER_FILE, "optimizer.pt", "rng.pt", "state.json")
"""What a complete checkpoint directory holds (``adapter_config.json`` besides)."""
NAME = re.compile(r"ob-[0-9]{6,12}")
"""The name of a checkpoint directory (and what ``latest`` may hold)."""


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete, damaged, outside the run, or does not match the model."""


class CheckpointWriteError(CheckpointError):
    """A checkpoint could not be written (a full disk, no permission); the previous one stays the
    run's newest and nothing of the failed write is left."""


def _first_line(exc: BaseException) -> str:
    """``TypeName: first line of the message`` (torch's unpickling errors run to 20 lines)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}".rstrip(": ")


def clean_leftovers(root: Path) -> int:
    """Remove what killed checkpoint writes left in ``root`` (``checkpoints/``): ``.ob-*.tmp*``
    directories and ``.latest.tmp``; returns how many were removed."""
    removed = 0
    for p in list(root.glob(".ob-*.tmp*")) + list(root.glob(".latest.tmp")):
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed += 1
    if removed:
        logger.warning("removed %d leftover(s) of a killed checkpoint write in %s", removed, root)
    return removed


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
        CheckpointWriteError: the files could not be written (a full disk: the previous
            checkpoint stays the newest, nothing of this one is left).
    """
    if "outer_batch" not in state or "step" not in state:
        raise ValueError("checkpoint state needs 'outer_batch' and 'step'")
    root = Path(run_dir) / "checkpoints"
    name = f"ob-{int(state['outer_batch']):06d}"
    final = root / name
    tmp = root / f".{name}.tmp{os.getpid()}"
    replaced = root / f".{name}.tmp{os.getpid()}-old"
    try:
        root.mkdir(parents=True, exist_ok=True)
        clean_leftovers(root)
        tmp.mkdir()
        try:
            model.save_pretrained(str(tmp))
            if not (tmp / ADAPTER_FILE).exists():
                raise CheckpointError(f"save_pretrained wrote no {ADAPTER_FILE} (is the model a peft model?)")
            torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
            torch.save(_rng_state(), tmp / "rng.pt")
            (tmp / "state.json").write_text(json.dumps(state, indent=2))
            for f in FILES:  # durable before the rename makes them the checkpoint
                fd = os.open(tmp / f, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            if final.exists():  # a checkpoint of this batch again: the old one goes once the new is in
                os.replace(final, replaced)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        pointer = root / ".latest.tmp"
        pointer.write_text(name)
        os.replace(pointer, root / "latest")
    except CheckpointError:
        raise
    except Exception as exc:  # a full disk, no permission (torch.save says so as a RuntimeError)
        (root / ".latest.tmp").unlink(missing_ok=True)
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else _first_line(exc)
        raise CheckpointWriteError(
            f"cannot write checkpoint {final}: {why}; the run's newest checkpoint is still the one before"
        ) from exc
    shutil.rmtree(replaced, ignore_errors=True)
    for old in sorted(p for p in root.glob("ob-*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    logger.info("checkpoint %s (outer batch %s, step %s)", final, state["outer_batch"], state["step"])
    return final


def latest_checkpoint(run_dir: str | os.PathLike[str]) -> Path | None:
    """The newest complete checkpoint of a run, or None if there is none.

    Raises:
        CheckpointError: ``latest`` is not a regular file, names something that is not a
            checkpoint name (``ob-NNNNNN``), or a checkpoint that is missing, incomplete, a
            symlink or outside the run directory.
    """
    run = Path(run_dir)
    root = run / "checkpoints"
    pointer = root / "latest"
    if not pointer.is_symlink() and not pointer.exists():
        return None
    if pointer.is_symlink() or not pointer.is_file():
        raise CheckpointError(
            f"{pointer} is not a regular file (a symlink or a directory): not a checkpoint pointer"
        )
    with open(pointer, "rb") as f:
        name = f.read(100).decode("utf-8", errors="replace").strip()
    if not NAME.fullmatch(name):
        raise CheckpointError(f"{pointer} names {name[:80]!r}, not a checkpoint of this run (ob-NNNNNN)")
    path = root / name
    if os.path.realpath(path) != os.path.join(os.path.realpath(run), "checkpoints", name):
        raise CheckpointError(
            f"{pointer} names {name}, which is reached through a symlink (it may be outside {run}): refused"
        )
    if not (path / "state.json").exists():
        raise CheckpointError(f"{pointer} names {path.name}, which is incomplete or missing")
    return path


def read_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A checkpoint's ``state.json``, checked: a JSON object whose ``outer_batch`` and ``step`` are
    integers >= 0, ``outer_batch`` the one the checkpoint's name says (``ob-000003``: 3).

    Raises:
        CheckpointError: naming the file and what is wrong with it.
    """
    file = Path(path) / "state.json"
    try:
        state = json.loads(_read_regular(file))
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(f"{file}: not JSON ({_first_line(exc)})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{file}: a JSON {type(state).__name__}, not an object")
    for key in ("outer_batch", "step"):
        value = state.get(key)
        if type(value) is not int or value < 0:
            raise CheckpointError(f"{file}: {key!r} must be an integer >= 0, got {value!r}"[:300])
    name = Path(path).name
    if NAME.fullmatch(name) and int(name[3:]) != state["outer_batch"]:  # save_checkpoint names it so
        raise CheckpointError(
            f"{file}: 'outer_batch' is {state['outer_batch']}, but the checkpoint is {name} "
            f"(saved after {int(name[3:])} outer batches)"[:300]
        )
    return state


def _read_regular(file: Path) -> bytes:
    """The bytes of ``file``, a regular file reached without a symlink as its last component.

    Raises:
        CheckpointError: missing, a symlink, not a regular file, unreadable.
    """
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        why = "a symlink (refused)" if file.is_symlink() else (exc.strerror or str(exc))
        raise CheckpointError(f"checkpoint {file.parent} lacks {file.name}: {why}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CheckpointError(f"{file}: not a regular file")
        return f.read()


def _torch_data(file: Path, what: str) -> Any:
    """``torch.load(weights_only=True)`` of ``file``'s bytes: tensors, numbers, strings and
    containers only; anything else a pickle asks for is refused, never run.

    Raises:
        CheckpointError: not such a file.
    """
    import io

    data = _read_regular(file)
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # UnpicklingError, RuntimeError (not a zip), EOFError, ...
        raise CheckpointError(
            f"{file}: not {what} saved by strands-art (loaded as data only, nothing unpickled runs): "
            f"{_first_line(exc)}"
        ) from None


def read_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Every file of the checkpoint at ``path``, read as data and checked, nothing applied:
    ``{"state": state.json, "weights": {name: tensor}, "optimizer": state dict, "rng": states}``.
    ``strands-art train --resume`` calls it before the model loads, so a damaged checkpoint is
    refused at once.

    Raises:
        CheckpointError: a file missing, a symlink, or not what strands-art wrote (named).
    """
    from safetensors.torch import load as load_safetensors

    path = Path(path)
    for f in FILES:
        if (path / f).is_symlink():
            raise CheckpointError(
                f"checkpoint {path}: {f} is a symlink (refused: it may lead outside the run)"
            )
        if not (path / f).is_file():
            raise CheckpointError(f"checkpoint {path} lacks {f}")
    state = read_state(path)
    try:
        weights = load_safetensors(_read_regular(path / ADAPTER_FILE))
    except CheckpointError:
        raise
    except Exception as exc:  # SafetensorError: a header that is not one, a truncated file
        raise CheckpointError(f"{path / ADAPTER_FILE}: not a safetensors file ({_first_line(exc)})") from None
    nonfinite = sorted(
        k for k, v in weights.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())
    )
    if nonfinite:  # loaded, every sample would fail on NaN probabilities and the run go on
        raise CheckpointError(
            f"{path / ADAPTER_FILE}: {len(nonfinite)} of {len(weights)} tensors hold NaN or infinite values "
            f"({nonfinite[0][:120]}, ...)"
        )
    optimizer_state = _torch_data(path / "optimizer.pt", "an optimizer state")
    if not isinstance(optimizer_state, dict) or not isinstance(optimizer_state.get("param_groups"), list):
        raise CheckpointError(f"{path / 'optimizer.pt'}: not an optimizer state (no param_groups)")
    rng = _torch_data(path / "rng.pt", "an RNG state")
    if not isinstance(rng, dict) or "python" not in rng or not isinstance(rng.get("torch"), torch.Tensor):
        raise CheckpointError(
            f"{path / 'rng.pt'}: not an RNG state saved by strands-art (python and torch states)"
        )
    return {"state": state, "weights": weights, "optimizer": optimizer_state, "rng": rng}


def load_checkpoint(
    path: str | os.PathLike[str], model: Any, optimizer: torch.optim.Optimizer
) -> dict[str, Any]:
    """Load adapter weights, optimizer state and RNG states in place; returns ``state.json``.

    Every file is read and checked (:func:`read_checkpoint`) before anything is applied; a state
    that does not fit leaves the model and optimizer as they were.

    Raises:
        CheckpointError: a missing, damaged or symlinked file, or adapter keys, optimizer groups
            or RNG states that do not match.
    """
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    path = Path(path)
    got = read_checkpoint(path)
    expected = get_peft_model_state_dict(model)
    missing = sorted(set(expected) - set(got["weights"]))
    if missing:  # loaded, those tensors would keep their fresh initialization, silently
        raise CheckpointError(
            f"{path / ADAPTER_FILE}: lacks {len(missing)} of the model's {len(expected)} adapter tensors "
            f"({missing[0][:120]}, ...)"
        )
    wrong = [
        k for k, v in got["weights"].items() if k in expected and tuple(v.shape) != tuple(expected[k].shape)
    ]
    if wrong:
        k = wrong[0]
        raise CheckpointError(
            f"{path / ADAPTER_FILE}: {len(wrong)} adapter tensors do not fit the model ({k[:120]}: "
            f"{tuple(got['weights'][k].shape)}, the model's {tuple(expected[k].shape)})"
        )
    device = next(model.parameters()).device
    before = {k: v.detach().clone() for k, v in model.state_dict().items() if "lora_" in k}
    saved_optimizer = optimizer.state_dict()
    try:
        result = set_peft_model_state_dict(model, {k: v.to(device) for k, v in got["weights"].items()})
        unexpected = getattr(result, "unexpected_keys", None) or []
        if unexpected:
            raise CheckpointError(f"adapter keys do not match the model: {unexpected[:3]}")
        try:
            optimizer.load_state_dict(got["optimizer"])
        except (ValueError, KeyError, TypeError, RuntimeError, AttributeError) as exc:
            raise CheckpointError(
                f"{path / 'optimizer.pt'}: does not fit the model's optimizer ({_first_line(exc)})"
            ) from None
        try:
            _set_rng_state(got["rng"])
        except (ValueError, TypeError, RuntimeError, KeyError) as exc:
            raise CheckpointError(f"{path / 'rng.pt'}: not a usable RNG state ({_first_line(exc)})") from None
    except BaseException:
        model.load_state_dict(before, strict=False)
        optimizer.load_state_dict(saved_optimizer)
        raise
    return got["state"]
