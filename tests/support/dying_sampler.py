"""``--env tests.support.dying_sampler:train_environment``: the capitals environment whose sampler
goes away mid-run, for ``strands-art train`` tests.

After ``STRANDS_ART_TEST_SAMPLES`` samples (unset: never) every ``sample`` call of the trainer's
backend raises :class:`~strands_art.backends.base.BackendUnavailable` with the words the vLLM
backend uses for a refused connection — what a vLLM server that died mid-run gives (one cannot
be started and killed within a unit test's time here). Everything else is the real capitals
environment on the real trainer's backend.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from strands_art.backends.base import BackendUnavailable
from strands_art.envs.capitals import train_environment as capitals
from strands_art.training.environment import EnvOptions, TrainEnvironment


def train_environment(options: EnvOptions) -> TrainEnvironment:
    env = capitals(options)
    limit = int(os.environ.get("STRANDS_ART_TEST_SAMPLES", "-1"))
    make_gateway = env.gateway

    def gateway(tokenizer: Any, backend: Any) -> Any:
        if limit >= 0:
            sample, count = backend.sample, [0]

            async def dying(prompt_ids: list[int], params: Any) -> Any:
                count[0] += 1
                if count[0] > limit:
                    raise BackendUnavailable(
                        "cannot reach the sampler at http://127.0.0.1:8000: connection refused"
                    )
                return await sample(prompt_ids, params)

            backend.sample = dying
        return make_gateway(tokenizer, backend)

    return replace(env, gateway=gateway)
