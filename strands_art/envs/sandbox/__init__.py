"""The sandbox every agent command and every evaluator build runs in (bubblewrap).

Layers: :mod:`.policy` (identity, limits, system paths), :mod:`.bwrap` (the command line),
:mod:`.process` (start, time out, kill), :mod:`.probe` (fail closed), :mod:`.files` (host-side
file access to sandbox-written trees: regular files only, no symlink is followed).
Threat model and the one-command check: ``docs/migrationbench-agent.md`` ("Sandbox").
"""

from .bwrap import Sandbox, SandboxError, allowed_env
from .policy import Identity, Limits, allocate_identity, chown_tree, release_identity
from .probe import SandboxUnavailable, probe_sandbox, require_sandbox
from .process import run_async, run_sync

__all__ = [
    "Identity",
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailable",
    "allocate_identity",
    "allowed_env",
    "chown_tree",
    "probe_sandbox",
    "release_identity",
    "require_sandbox",
    "run_async",
    "run_sync",
]
