"""Every input of a render, recorded with the trajectory so its rows can be rebuilt later.

A prompt's tokens depend on more than the messages: the template variables fixed when the
renderer was built (the "Today Date" of Llama 3.x, GPT-OSS's "Current date" and reasoning effort),
the user's ``chat_template_kwargs``, the chat template itself and the tokenizer. The gateway
records them on each trajectory (``metadata["render"]``, :func:`render_inputs`) when the session
opens; ``strands-art replay --from-run`` passes the variables back and refuses a tokenizer or
template whose hash differs (:func:`check_render_inputs`), so a stored run replays to the same
rows on another day.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

_CACHE: dict[tuple[str, int, int], str] = {}
_LOCK = threading.Lock()


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def tokenizer_sha256(tokenizer: Any) -> str | None:
    """SHA-256 of the tokenizer's ``tokenizer.json`` (the vocabulary, merges, added tokens and
    normalizers): the file's bytes when the tokenizer was loaded from a directory holding one
    (cached by path, size and mtime: ~10 ms per 10 MB once), else its serialization
    (``Tokenizer.to_str()``, slower: 0.3-2 s for large vocabularies). None when neither exists."""
    path = Path(str(getattr(tokenizer, "name_or_path", "") or "")) / "tokenizer.json"
    if path.is_file():
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        with _LOCK:
            if key not in _CACHE:
                _CACHE[key] = hashlib.sha256(path.read_bytes()).hexdigest()
            return _CACHE[key]
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    to_str = getattr(backend, "to_str", None)
    return _sha256(to_str()) if callable(to_str) else None


def _jsonable(value: Any) -> Any:
    """``value`` as JSON would store it (unknown objects as their ``str``)."""
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def render_inputs(renderer: Any) -> dict[str, Any]:
    """The render inputs of a :class:`~strands_art.render.ChatRenderer`, JSON-ready.

    Returns ``{"family", "template_vars", "chat_template_sha256", "tokenizer_sha256"}``:
    ``template_vars`` are the variables every render gets (the family's fixed ones, e.g.
    ``date_string`` / ``current_date``, then the user's ``chat_template_kwargs``).
    """
    return {
        "family": renderer.family.name,
        "template_vars": _jsonable(renderer.render_vars),
        "chat_template_sha256": _sha256(renderer.chat_template or ""),
        "tokenizer_sha256": tokenizer_sha256(renderer.tokenizer),
    }


class RenderInputsMismatch(ValueError):
    """A stored rollout was rendered with another tokenizer or chat template than the one at hand."""


def check_render_inputs(recorded: dict[str, Any] | None, renderer: Any) -> None:
    """Refuse to rebuild rows with a tokenizer or template other than the recorded one.

    Raises:
        RenderInputsMismatch: naming what differs (both hashes).
    """
    if not recorded:
        return
    now = render_inputs(renderer)
    for key, what in (("chat_template_sha256", "chat template"), ("tokenizer_sha256", "tokenizer")):
        was, is_ = recorded.get(key), now.get(key)
        if was and is_ and was != is_:
            raise RenderInputsMismatch(
                f"the rollout was rendered with another {what} (sha256 {was[:12]}..., here {is_[:12]}...): "
                "its rows cannot be rebuilt token for token; use the run's tokenizer"
            )
