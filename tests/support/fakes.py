"""Shared test doubles: a random tiny Llama with SmolLM2's vocabulary, and the aiohttp server
lifecycle used by the fake vLLM and fake OpenAI servers, and a training task whose reward varies
within a group."""

from __future__ import annotations

import dataclasses

import torch
from aiohttp import web
from transformers import LlamaConfig, LlamaForCausalLM

from strands_art.training.grpo import GRPOConfig

SMOLLM2_VOCAB = 49152
SMOLLM2_EOS = 2  # <|im_end|>

#: the tiny random model never writes its end token, so every answer it samples is truncated,
#: which GRPO leaves out of the loss by default: trainer tests on it train them (as
#: ``train --train-truncated`` does), or they would have nothing to train
TRAIN_TRUNCATED = GRPOConfig(train_truncated=True)


def tiny_llama(hidden_size: int = 32) -> LlamaForCausalLM:
    """A 2-layer random Llama over SmolLM2's vocabulary (seeded; peaked next-token distributions
    like a trained model's, via a large init range)."""
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=SMOLLM2_VOCAB,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=SMOLLM2_EOS,
        pad_token_id=SMOLLM2_EOS,
        tie_word_embeddings=True,
        initializer_range=0.5,
    )
    return LlamaForCausalLM(cfg).eval()


class LocalServer:
    """Start/stop an aiohttp app on 127.0.0.1 with a free port; subclasses add routes."""

    url: str = ""
    url_suffix: str = ""
    _runner: web.AppRunner | None = None

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def start(self):
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}{self.url_suffix}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


@dataclasses.dataclass(frozen=True)
class LengthTask:
    """Reward = characters of the reply mod 7 / 6: varies within a group of sampled replies."""

    name: str

    def messages(self):
        return [{"role": "user", "content": f"Say something about {self.name}."}]

    def reward(self, text: str, truncated: bool = False) -> float:
        return (len(text) % 7) / 6
