"""Shared fixtures of the benchmarks: the shell tool spec and a Maven-like log line."""

from __future__ import annotations

SHELL_TOOL = {
    "type": "function",
    "function": {
        "name": "shell",
        "description": "Run a shell command.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}
LOG_LINE = "[INFO] Compiling 12 source files to /home/dev/repo/target/classes with javac [debug target 17]\n"
