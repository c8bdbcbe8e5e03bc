"""No native thread of an extension outlives the work it was started for (issue 28 item 10:
``strands-art replay`` aborted at exit in ``PyGILState_Release``). ``tokenizers``'
``Tokenizer.async_encode`` completes its futures from a tokio runtime whose worker threads live
on until the interpreter shuts down and then touch it; the renderer encodes in Python worker
threads instead, which ``asyncio.run`` joins."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import asyncio, json, os
from strands_art.registry import load_tokenizer
from strands_art.render import ChatRenderer

renderer = ChatRenderer(load_tokenizer("qwen3"))

async def main():
    return await asyncio.gather(*(renderer.encode("hello world " * k) for k in range(1, 50)))

ids = asyncio.run(main())
names = []
for t in os.listdir("/proc/self/task"):
    try:
        names.append(open(f"/proc/self/task/{t}/comm").read().strip())
    except OSError:
        pass
print(json.dumps({"threads": names, "lengths": [len(x) for x in ids]}))
"""


def test_async_encoding_leaves_no_tokio_threads_behind():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300, check=True
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert not [t for t in report["threads"] if t.startswith("tokio")], report["threads"]
    assert report["lengths"] == sorted(report["lengths"]) and report["lengths"][0] > 0
