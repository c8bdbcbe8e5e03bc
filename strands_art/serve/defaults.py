"""The HTTP front's defaults, shared by the package, :mod:`.app` and :mod:`.cli` (a leaf: imports nothing)."""

from __future__ import annotations

DEFAULT_HOST = "127.0.0.1"  # loopback: reaching the front from elsewhere is a deliberate choice
DEFAULT_PORT = 8000
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
