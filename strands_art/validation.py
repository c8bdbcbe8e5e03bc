"""Range checks for command-line and config values: one clear message naming the flag.

Used by every ``strands-art`` subcommand before it writes anything, and by ``migrate --resume``
for the values it reads back from ``config.json``. A value is refused when it is not a number
of the right kind (``True`` is not an integer here, ``1`` is not a boolean), not finite (``nan``, ``inf``), or outside
its range; the message names the flag, the range and the value given.
"""

from __future__ import annotations

import argparse
import math
import numbers
from typing import Any


class UsageError(ValueError):
    """A command-line or config value is out of range (exit status 2, no traceback)."""


def is_int(value: Any) -> bool:
    """True for an integer: ``int`` or any :class:`numbers.Integral` (numpy integers), never a
    ``bool`` (``True`` would pass a range check and mean 1)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: Any, *, finite: bool = True) -> bool:
    """True for a real number (:class:`numbers.Real`: int, float, numpy numbers), never a ``bool``;
    with ``finite`` (the default) also never ``nan`` or ``±inf``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return not finite or math.isfinite(value)
    except OverflowError:  # an int no float holds (10**400 from YAML)
        return False


def check_int(flag: str, value: Any, lo: int, hi: int) -> int:
    """``int(value)`` if it is an integer (:func:`is_int`: numpy integers too, not a bool) in
    ``[lo, hi]``; else :class:`UsageError`."""
    if not is_int(value) or not lo <= value <= hi:
        raise UsageError(f"{flag} must be an integer from {lo:,} to {hi:,}, got {_show(value)}")
    return int(value)


def check_float(flag: str, value: Any, lo: float, hi: float, *, lo_open: bool = False) -> float:
    """``value`` as a float if it is a finite real number (:func:`is_real`: numpy numbers too, not a
    bool) in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``); else :class:`UsageError`."""
    ok = is_real(value)
    if ok:
        ok = (lo < value if lo_open else lo <= value) and value <= hi
    if not ok:
        bracket = "(" if lo_open else "["
        raise UsageError(f"{flag} must be a finite number in {bracket}{lo:g}, {hi:g}], got {_show(value)}")
    return float(value)


def check_bool(flag: str, value: Any) -> bool:
    """``value`` if it is ``True`` or ``False`` (not ``1``, ``"yes"`` or ``null``, e.g. from a
    hand-edited ``config.json``) or a ``numpy.bool_`` (a pandas/parquet dataset row); else
    :class:`UsageError`."""
    if isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool"):
        return bool(value)
    raise UsageError(f"{flag} must be true or false, got {_show(value)}")


OFF_WORDS = ("off", "0", "no", "false")
ON_WORDS = ("on", "1", "yes", "true")
"""How a switch given in an environment variable is spelled (any case, spaces around ignored)."""


def env_switch(value: str | None) -> bool | None:
    """An environment variable's ``value`` read as a switch: False for :data:`OFF_WORDS`,
    True for :data:`ON_WORDS`, None when unset or empty (the caller's default) or anything else
    (for a variable whose value may also be a path: see :func:`check_env_switch` for one that may not).
    """
    word = (value or "").strip().lower()
    return False if word in OFF_WORDS else True if word in ON_WORDS else None


def check_env_switch(name: str, value: str | None, default: bool = True) -> bool:
    """:func:`env_switch`, ``default`` when unset or empty; anything else is :class:`UsageError`
    naming the variable (a typo such as ``of`` must not leave a switch silently on)."""
    got = env_switch(value)
    if got is not None:
        return got
    if not (value or "").strip():
        return default
    raise UsageError(
        f"{name} must be one of {', '.join(OFF_WORDS)} (off) or {', '.join(ON_WORDS)} (on), got {value!r}"
    )


def check_http_url(flag: str, value: Any) -> str:
    """``value`` if it is an ``http://`` or ``https://`` URL with a host; else :class:`UsageError`."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value) if isinstance(value, str) else None
        ok = parts is not None and parts.scheme in ("http", "https") and bool(parts.hostname)
        if ok:
            parts.port  # noqa: B018 - raises ValueError on a port that is not a number in range
    except ValueError:
        ok = False
    if not ok:
        raise UsageError(f"{flag} must be an http:// or https:// URL with a host, got {_show(value)}")
    return value


def check_path(flag: str, value: Any) -> Any:
    """``value`` if it is None (the flag left out) or a non-blank path string; else
    :class:`UsageError`. An empty path is what an unset shell variable gives (``--tasks-dir
    "$TASKS"``), and must not fall back to the flag's default."""
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise UsageError(f"{flag} is empty (an unset variable?): give a path, or leave {flag} out")
    return value


def listed(names: list[str], most: int = 5) -> str:
    """``names`` joined for a message: the first ``most``, then ``... (N more)``."""
    more = len(names) - most
    return ", ".join(names[:most]) + (f" ... ({more} more)" if more > 0 else "")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_sampling(
    temperature: Any, max_new_tokens: Any, top_p: Any = 1.0, max_context_tokens: Any = None
) -> None:
    """The sampling values every command takes (``serve``, ``migrate``, ``train``):
    ``--temperature`` [0, 100], ``--top-p`` (0, 1], ``--max-new-tokens`` 1 … 2^20,
    ``--max-context-tokens`` 2 … 2^24 or unset (None).

    Raises:
        UsageError: the first value out of range, naming its flag.
    """
    check_float("--temperature", temperature, 0.0, 100.0)
    check_float("--top-p", top_p, 0.0, 1.0, lo_open=True)
    check_int("--max-new-tokens", max_new_tokens, 1, 1 << 20)
    if max_context_tokens is not None:
        check_int("--max-context-tokens", max_context_tokens, 2, 1 << 24)


def add_sampling_args(
    group: Any,
    *,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    context_default: str,
    per_request: bool = False,
) -> None:
    """Add the sampling flags ``migrate`` and ``serve`` share to an argparse ``group``, with each
    command's defaults: ``--temperature``, ``--top-p``, ``--max-new-tokens`` (tokens per turn),
    ``--max-context-tokens`` (default None, ``context_default`` says what None means).
    ``per_request``: a request may set its own value (``serve``), the flag is only the default.
    :func:`check_sampling_args` checks them."""
    unless = " unless a request sets its own" if per_request else ""
    group.add_argument(
        "--temperature",
        type=float,
        default=temperature,
        help=f"sampling temperature{unless} (default {temperature:g})",
    )
    group.add_argument(
        "--top-p", type=float, default=top_p, help=f"nucleus sampling mass{unless} (default {top_p:g})"
    )
    group.add_argument(
        "--max-new-tokens",
        type=int,
        default=max_new_tokens,
        help=f"tokens sampled per turn{unless} (default {max_new_tokens})",
    )
    group.add_argument(
        "--max-context-tokens", type=int, default=None, help=f"context budget (default: {context_default})"
    )


def check_backend_url(backend: str | None, base_url: Any) -> None:
    """``--base-url``, when given, is an http(s) URL with a host (:func:`check_http_url`), and
    ``--backend vllm`` has one (``migrate`` and ``serve``).

    Raises:
        UsageError: naming the flag.
    """
    if backend == "vllm" and not base_url:
        raise UsageError("--backend vllm needs --base-url (see docs/setup-vllm.md)")
    if base_url is not None:
        check_http_url("--base-url", base_url)


def check_sampling_args(args: argparse.Namespace) -> None:
    """:func:`check_sampling` on the sampling flags ``migrate`` and ``serve`` share
    (``args.temperature``, ``top_p``, ``max_new_tokens``, ``max_context_tokens``).

    Raises:
        UsageError: the first value out of range.
    """
    check_sampling(args.temperature, args.max_new_tokens, args.top_p, args.max_context_tokens)


def check_ray_address(address: str) -> None:
    """Refuse a ``--ray`` address that is not ``local``, ``auto``, ``ray://HOST:PORT`` or
    ``HOST:PORT`` (non-empty host without spaces, port 1..65535).

    Raises:
        UsageError: the one-line message naming the address.
    """
    if address in ("local", "auto"):
        return
    rest = address[len("ray://") :] if address.startswith("ray://") else address
    host, _, port = rest.rpartition(":")
    if not host or any(c.isspace() for c in address) or not (port.isdigit() and 0 < int(port) < 65536):
        raise UsageError(f"--ray must be auto, HOST:PORT or ray://HOST:PORT, got {address!r}")


def probe_ray_address(address: str, timeout_s: float = 5.0) -> None:
    """Before ``ray.init``: refuse a ``HOST:PORT`` (or ``ray://HOST:PORT``) nothing answers on
    within ``timeout_s`` seconds (a TCP connect); ``ray.init`` itself retries for minutes.

    Raises:
        UsageError: the host does not resolve or nothing listens on the port.
    """
    import socket

    if address in ("local", "auto"):
        return
    check_ray_address(address)
    rest = address[len("ray://") :] if address.startswith("ray://") else address
    host, _, port = rest.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise UsageError(f"--ray {address}: nothing answers at {host}:{port} ({exc})") from None
