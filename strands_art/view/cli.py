"""``strands-art view RUN_DIR [--host 127.0.0.1] [--port 8765] [--allow-host NAME] [--open] [--tokenizer NAME]``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import webbrowser
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def add_view_parser(sub: Any) -> None:
    p = sub.add_parser(
        "view",
        help="browse a run directory in a web page: rollouts, conversations, rows token by token",
        description="A read-only web viewer of a strands-art migrate / training run directory or a "
        "trajectory store (docs/viewer.md). Serves on loopback by default and prints the URL.",
    )
    p.add_argument(
        "run_dir",
        nargs="+",
        help="the run directory (results.jsonl, trajectories/, metrics.jsonl); with more than one, "
        "the page /compare shows them side by side (the first is the run page's)",
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, loopback only)"
    )
    p.add_argument("--port", type=_port, default=8765, help="port (default: 8765; 0 picks a free one)")
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests addressed to this host name (repeatable; default: only loopback "
        "names and the --host address, against DNS rebinding)",
    )
    p.add_argument("--open", action="store_true", help="open the page in a browser, where one exists")
    p.add_argument(
        "--tokenizer",
        default=None,
        help="tokenizer alias or directory that decodes the tokens (default: the run's config.json "
        "tokenizer or model; without one, token IDs are shown undecoded)",
    )
    p.set_defaults(func=main_from_args)


def _port(text: str) -> int:
    """A TCP port number for argparse (0 to 65535; else a usage error, exit 2)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be in 0..65535, got {port}")
    return port


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_run_tokenizer(run_dir: Path, name: str | None) -> Any:
    """The decoder (:func:`.decoder.load_decoder`) of the tokenizer named by ``name``, else by
    the run's ``config.json``; None (with a warning) when none is named or it cannot be loaded."""
    from .decoder import load_decoder

    name = name or _tokenizer_name(run_dir) or None
    if not name or not isinstance(name, str):
        return None
    try:
        return load_decoder(name)
    except Exception as exc:  # noqa: BLE001 - any loader failure: show IDs, say why
        logger.warning("cannot load tokenizer %r (%s); tokens are shown as IDs (pass --tokenizer)", name, exc)
        return None


def _tokenizer_name(run_dir: Path) -> str:
    """The tokenizer the run names (its config.json, else train.json: ``tokenizer``, else
    ``model``), "" for none. Read through :class:`.files.RunFiles`: no symlink followed, a FIFO
    never blocks, a file over :data:`.reader.RUN_FILE_LIMIT` is not read."""
    from .files import RunFiles, TooLarge
    from .reader import RUN_FILE_LIMIT

    try:
        files = RunFiles(run_dir)
    except OSError:
        return ""
    for file in ("config.json", "train.json"):
        try:
            cfg = json.loads(files.read(file, RUN_FILE_LIMIT))
        except (OSError, ValueError, TooLarge, RecursionError):
            continue
        if isinstance(cfg, dict):
            name = cfg.get("tokenizer") or cfg.get("model") or ""
            return name if isinstance(name, str) else ""
    return ""


RUN_MARKERS = ("config.json", "train.json", "results.jsonl", "trajectories", "metrics.jsonl")
"""What a ``migrate`` or ``train`` run directory holds from its start (``view`` warns without any)."""


def main_from_args(args: argparse.Namespace) -> int:
    from .reader import RunView
    from .server import start_server

    dirs = [Path(d) for d in args.run_dir]
    for d in dirs:
        if not d.is_dir():
            print(f"strands-art view: no run directory at {d}", file=sys.stderr)
            return 2
    run_dir = dirs[0]
    views = [RunView(d) for d in dirs]  # tokenizers come once the port is ours: a busy port fails at once
    view = views[0]
    for v in views:
        v.refresh()
    if not view.order and not any(view.files.exists(name) for name in RUN_MARKERS):
        print(
            f"strands-art view: warning: {run_dir} holds no run (none of {', '.join(RUN_MARKERS)}); "
            "serving it anyway: a run started there appears as it writes",
            file=sys.stderr,
        )
    if not _is_loopback(args.host):
        print(
            f"strands-art view: warning: serving on {args.host}, not loopback: anyone who can reach "
            "this address can read the run (no authentication)",
            file=sys.stderr,
        )

    async def serve() -> None:
        runner = await start_server(view, args.host, args.port, others=views[1:], allow_hosts=args.allow_host)
        loaded: dict[str, Any] = {}
        for v in views:
            name = args.tokenizer or _tokenizer_name(v.root)
            if name not in loaded:
                loaded[name] = await asyncio.to_thread(load_run_tokenizer, v.root, args.tokenizer)
            v.tokenizer = loaded[name]
            v._special = None  # computed again with the tokenizer
        port = runner.addresses[0][1]
        host = f"[{args.host}]" if ":" in args.host else args.host
        url = f"http://{host}:{port}/"
        print(
            f"strands-art view: {len(view.order)} rollouts of {run_dir} at {url} (Ctrl-C stops)", flush=True
        )
        if len(views) > 1:
            print(f"strands-art view: {len(views)} runs side by side at {url}compare", flush=True)
        if args.open and not webbrowser.open(url):
            print("strands-art view: no browser found here; open the URL yourself", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(f"strands-art view: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    return 0
