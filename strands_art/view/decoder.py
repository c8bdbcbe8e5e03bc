"""Token decoding for the viewer without importing torch into the server.

``transformers`` imports torch when it loads a tokenizer (about 330 MB of resident memory for a
process that only decodes). The viewer loads the tokenizer once in a short-lived child process
(:func:`strands_art.registry.load_tokenizer`, the project's own loader, so every alias works),
takes its Rust ``tokenizers`` backend as JSON and its special-token IDs, and decodes with the
``tokenizers`` library alone. A tokenizer without a Rust backend (a slow, SentencePiece-only
one) is loaded in-process as before.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_CHILD = """
import json, sys
from strands_art.registry import load_tokenizer
tok = load_tokenizer(sys.argv[1])
backend = getattr(tok, "backend_tokenizer", None)
if backend is not None:
    backend.save(sys.argv[2])
special = sorted({int(i) for i in (getattr(tok, "added_tokens_decoder", None) or {})} | set(tok.all_special_ids or []))
sys.stdout.write(json.dumps({"fast": backend is not None, "special": special}))
"""


class Decoder:
    """``decode`` and the special-token IDs of a tokenizer, on its Rust backend only.

    Attributes:
        backend_tokenizer: the ``tokenizers.Tokenizer``.
        all_special_ids: IDs of special and added tokens.
        name_or_path: the alias or directory it was loaded from.
    """

    def __init__(self, backend: Any, special: list[int], name: str) -> None:
        self.backend_tokenizer = backend
        self.all_special_ids = special
        self.name_or_path = name

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.backend_tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)


def load_decoder(name: str, timeout_s: float = 600.0) -> Any:
    """A :class:`Decoder` for tokenizer ``name`` (an alias or directory, as
    :func:`~strands_art.registry.load_tokenizer` takes), or the transformers tokenizer itself
    when it has no Rust backend.

    Raises:
        RuntimeError: the child process could not load it (its last error line is in the message).
    """
    from tokenizers import Tokenizer

    with tempfile.TemporaryDirectory(prefix="strands-art-view-") as tmp:
        path = Path(tmp) / "tokenizer.json"
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, name, str(path)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"cannot load tokenizer {name!r}: {last}")
        data = json.loads(proc.stdout)
        if not data["fast"]:
            from strands_art.registry import load_tokenizer

            return load_tokenizer(name)
        return Decoder(Tokenizer.from_file(str(path)), data["special"], name)
