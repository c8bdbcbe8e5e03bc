"""Actor-update seconds of recorded outer batches, replayed side by side in one process: the
actor-time row of the history-mode table (bench/seed_experiments.py, Table 2) without the
machine's load changing between the two runs, on this CPU or on a GPU machine.

Each ``--rows LABEL=RUN_DIR[:OUTER_BATCH]`` is the rows a ``strands-art train`` run trained on
(``RUN_DIR/rows/ob-NNNNNN.jsonl``) with that run's settings (``RUN_DIR/train.json``: batching,
PPO mini-batch, micro-batch tokens, checkpointing). Per repetition, per variant, each row set is
replayed on a fresh copy of the same base model with the same fresh LoRA adapter (seed 0), in
alternating order (A B, then B A, ...). A variant is ``recorded`` (the run's own settings),
``plain`` (no activation checkpointing) or ``checkpointed``, optionally ``-bf16`` (``--autocast
bf16``). Prints one line per replay (rows, tokens in the rows, tokens processed, optimizer steps,
seconds, loss, gradient norm) and ends with ``RESULT`` per variant: the median seconds of each
row set and, for the first two labels, ``actor_s_reduction`` (1 - second / first) beside
``tokens_reduction`` (the same for processed tokens).

``--random-weights DIR`` builds the model from ``DIR/config.json`` with random weights (seed 0) and
reads the tokenizer from ``DIR``: for a machine without the model's weights (the GPU machine).
The seconds of a forward and backward pass do not depend on the weights' values; the loss and
gradient norm then mean nothing and are printed as such.

    python bench/actor_time.py --rows tree=$ROOT/tree-fixed-steps/seed0 --rows linear=$ROOT/linear-fixed-steps/seed0 \\
        --variants recorded,recorded-bf16 --reps 3
    python bench/actor_time.py --device cuda --random-weights $CONFIG --rows ... --reps 5
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

KINDS = ("recorded", "plain", "checkpointed")


def parse_rows(spec: str) -> tuple[str, Path, int]:
    """``LABEL=RUN_DIR[:OUTER_BATCH]`` -> (label, run dir, outer batch; 0 when not given). A run
    directory whose path holds ':' is read whole when what follows its last ':' holds a '/'
    (``a=runs/12:30/seed0``); else give the outer batch (``a=runs/x:y:0``).

    Raises:
        argparse.ArgumentTypeError: no label, or an outer batch that is not an integer.
    """
    label, sep, rest = spec.partition("=")
    if not sep or not label:
        raise argparse.ArgumentTypeError(f"--rows {spec!r}: LABEL=RUN_DIR[:OUTER_BATCH]")
    run_dir, _, ob = rest.rpartition(":") if ":" in rest else (rest, "", "0")
    if "/" in ob:  # the ':' was inside the path
        run_dir, ob = rest, "0"
    if not ob.isdigit():
        raise argparse.ArgumentTypeError(f"--rows {spec!r}: the outer batch after ':' must be an integer")
    return label, Path(run_dir), int(ob)


def load_trajectories(run_dir: Path, outer_batch: int) -> list[Any]:
    """The trajectories of ``RUN_DIR/rows/ob-NNNNNN.jsonl`` (rows, group, reward) as trained.

    Raises:
        OSError: the file is missing or unreadable.
        ValueError: a line that is not a JSON trajectory of rows (its number named).
    """
    from strands_art.trajectory import Row, Trajectory

    out = []
    path = run_dir / "rows" / f"ob-{outer_batch:06d}.jsonl"
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                d = json.loads(line)
                rows = [Row.from_dict(r) for r in d["rows"]]
                out.append(Trajectory(d["rollout_id"], d["group_id"], rows=rows, reward=d["reward"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(
                    f"{path} line {n}: not a trajectory of rows ({type(exc).__name__}: {exc})"
                ) from None
    return out


def trainer_config(run_dir: Path, variant: str) -> Any:
    """The run's trainer configuration with ``variant`` applied (module doc).

    Raises:
        FileNotFoundError, ValueError: ``RUN_DIR/train.json`` is missing or not valid settings.
    """
    from strands_art.training.settings import TrainSettings

    kind, _, bf16 = variant.partition("-")
    saved = TrainSettings.load(run_dir).to_dict()
    if kind != "recorded":
        saved.update(gradient_checkpointing=kind == "checkpointed", share_prefix=False)
    saved["autocast"] = bf16 or "off"
    return TrainSettings.from_dict(saved).trainer_config()


def base_model(args: argparse.Namespace, model_name: str) -> tuple[Any, Any]:
    """(model on ``args.device`` in eval mode, tokenizer): ``model_name``'s weights, or with
    ``--random-weights DIR`` its architecture from ``DIR/config.json`` with random float32 weights
    (seed 0) and ``DIR``'s tokenizer."""
    import torch

    if args.random_weights:
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        torch.manual_seed(0)
        config = AutoConfig.from_pretrained(args.random_weights)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(args.random_weights)
        return model.to(args.device).eval(), tok
    from strands_art.registry import load_causal_lm, load_tokenizer

    return load_causal_lm(model_name, device=args.device), load_tokenizer(model_name)


def replay(base: Any, tok: Any, config: Any, trajs: list[Any], device: str) -> dict[str, Any]:
    """One update of ``trajs`` on a copy of ``base`` with a fresh LoRA adapter (seed 0): ``s``,
    its wall seconds (the device synchronized before and after), and the update's
    ``processed_tokens``, ``optimizer_steps``, ``loss`` and ``grad_norm``."""
    import torch

    from strands_art.training.local import LocalTrainer

    model = copy.deepcopy(base)
    torch.manual_seed(0)
    trainer = LocalTrainer(model, tok, config)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sync()
    t0 = time.perf_counter()
    m = trainer.update(trajs)
    sync()
    s = time.perf_counter() - t0
    del trainer, model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {"s": s, **{k: m.get(k) for k in ("processed_tokens", "optimizer_steps", "loss", "grad_norm")}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", action="append", type=parse_rows, required=True, metavar="LABEL=RUN_DIR[:OB]")
    p.add_argument(
        "--variants", default="recorded", help=f"comma-separated: {', '.join(KINDS)}, each optionally -bf16"
    )
    p.add_argument("--reps", type=int, default=3, help="repetitions (the row sets alternate in order)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--random-weights", metavar="DIR", help="config.json and tokenizer here, weights random")
    p.add_argument("--out", help="also write every replay here (JSON)")
    args = p.parse_args(argv)
    if args.reps < 1:
        p.error(f"--reps {args.reps}: at least 1")
    if args.threads < 0:
        p.error(f"--threads {args.threads}: 0 (torch's default) or more")
    if not re.fullmatch(r"cpu|cuda(:\d+)?", args.device):
        p.error(f"--device {args.device!r}: cpu, cuda or cuda:N")
    variants = args.variants.split(",")
    bad = [v for v in variants if v.partition("-")[0] not in KINDS or v.partition("-")[2] not in ("", "bf16")]
    if bad:
        p.error(f"--variants: unknown {bad}; each is one of {', '.join(KINDS)}, optionally with -bf16")
    if len({label for label, *_ in args.rows}) != len(args.rows):
        p.error("--rows: each label once")
    import torch

    from strands_art.training.settings import TrainSettings

    if args.threads:
        torch.set_num_threads(args.threads)
    sets, models = {}, set()
    for label, d, ob in args.rows:
        try:  # a missing rows file or train.json, a damaged row: one line, before the model loads
            sets[label] = (d, ob, load_trajectories(d, ob))
            models.add(TrainSettings.load(d).model)
            if not sets[label][2]:
                raise ValueError(f"rows/ob-{ob:06d}.jsonl holds no trajectory")
        except (OSError, ValueError) as exc:
            p.error(f"--rows {label}={d}:{ob}: {' '.join(str(exc).split())[:300]}")
    if len(models) != 1:
        p.error(f"--rows: runs of different models {sorted(models)}")
    base, tok = base_model(args, models.pop())
    print(f"device {args.device} ({torch.cuda.get_device_name() if args.device.startswith('cuda') else 'cpu'}), "
          f"torch {torch.__version__}, weights {'random (time only)' if args.random_weights else 'the model'}",
          flush=True)  # fmt: skip
    got: list[dict[str, Any]] = []
    labels = list(sets)
    for rep in range(args.reps):
        for variant in variants:
            for label in labels if rep % 2 == 0 else labels[::-1]:
                d, ob, trajs = sets[label]
                r = replay(base, tok, trainer_config(d, variant), trajs, args.device)
                r.update(label=label, variant=variant, rep=rep, rows=sum(len(t.rows) for t in trajs),
                         tokens=sum(len(row) for t in trajs for row in t.rows))  # fmt: skip
                got.append(r)
                loss = "n/a (random weights)" if args.random_weights else f"{r['loss']:.6f}"
                print(
                    f"rep {rep} {variant:15s} {label:10s} rows {r['rows']:3d} tokens {r['tokens']:6d} "
                    f"processed {r['processed_tokens']:6d} steps {r['optimizer_steps']} | {r['s']:8.2f} s | "
                    f"loss {loss}",
                    flush=True,
                )
    if args.out:
        Path(args.out).write_text(json.dumps(got, indent=1) + "\n", encoding="utf-8")
    fields = []
    for variant in variants:
        med = {
            label: statistics.median(g["s"] for g in got if g["variant"] == variant and g["label"] == label)
            for label in labels
        }
        fields += [f"s_{variant}_{label}={s:.2f}" for label, s in med.items()]
        if len(labels) >= 2 and med[labels[0]] > 0:
            a, b = labels[:2]
            tok_a, tok_b = (next(g["processed_tokens"] for g in got if g["label"] == x) for x in (a, b))
            fields.append(f"actor_s_reduction_{variant}={100 * (1 - med[b] / med[a]):.2f}%")
            if tok_a:
                fields.append(f"tokens_reduction={100 * (1 - tok_b / tok_a):.2f}%")
    print("RESULT " + " ".join(dict.fromkeys(fields)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
