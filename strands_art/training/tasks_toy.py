"""A small verifiable task for the embedded trainer: "the capital of X, in one word".

Prompt: ``"What is the capital of {country}? Answer with one word only."``. Reward (verifiable,
in [0, 1])::

    r = 1 / (number of words in the reply)   if the capital is one of the words (case-insensitive)
    r = 0                                    otherwise, or if the reply was cut at max_new_tokens

so "Paris" scores 1.0, "Paris." 1.0, "The capital of France is Paris." 1/6, a wrong or missing
city 0, and so does a reply that never ends ("Paris Paris Paris ..." cut by the token limit). SmolLM2-135M-Instruct usually knows the capital but answers with a full
sentence, so its reward is low but not zero and varies within a group: GRPO has signal from the
first batch, and the improvement (shorter, still correct answers) is visible in a few minutes
on CPU. Every country here has a one-word capital. :func:`capital_tasks` splits them into a
training and a held-out set (different countries), so evaluation measures the learned format
on prompts never trained on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

PROMPT = "What is the capital of {country}? Answer with one word only."

CAPITALS: tuple[tuple[str, str], ...] = (
    ("France", "Paris"),
    ("Japan", "Tokyo"),
    ("Italy", "Rome"),
    ("Spain", "Madrid"),
    ("Germany", "Berlin"),
    ("Egypt", "Cairo"),
    ("Russia", "Moscow"),
    ("China", "Beijing"),
    ("England", "London"),
    ("Greece", "Athens"),
    ("Portugal", "Lisbon"),
    ("Austria", "Vienna"),
    ("Ireland", "Dublin"),
    ("Norway", "Oslo"),
    ("Sweden", "Stockholm"),
    ("Denmark", "Copenhagen"),
    ("Finland", "Helsinki"),
    ("Poland", "Warsaw"),
    ("Hungary", "Budapest"),
    ("Turkey", "Ankara"),
    ("Iran", "Tehran"),
    ("Iraq", "Baghdad"),
    ("Thailand", "Bangkok"),
    ("Kenya", "Nairobi"),
    ("Peru", "Lima"),
    ("Chile", "Santiago"),
    ("Cuba", "Havana"),
    ("Canada", "Ottawa"),
    ("Australia", "Canberra"),
    ("Belgium", "Brussels"),
    ("Netherlands", "Amsterdam"),
    ("Switzerland", "Bern"),
)

HELD_OUT: tuple[str, ...] = ("Germany", "Egypt", "Greece", "Austria", "Norway", "Poland", "Thailand", "Cuba")

_WORD = re.compile(r"[^\W\d_](?:[^\W\d_]|['’-])*", re.UNICODE)


@dataclass(frozen=True)
class CapitalTask:
    """One prompt of the task.

    Attributes:
        country: the country asked about.
        capital: the expected one-word answer.
    """

    country: str
    capital: str

    @property
    def name(self) -> str:
        """The task id (GRPO group id)."""
        return f"capital-{self.country.lower()}"

    def messages(self) -> list[dict[str, Any]]:
        """The chat messages of the prompt (one user turn)."""
        return [{"role": "user", "content": PROMPT.format(country=self.country)}]

    def reward(self, text: str, truncated: bool = False) -> float:
        """The verifiable reward of a reply (see the module docstring)."""
        return 0.0 if truncated else capital_reward(text, self.capital)


def capital_reward(text: str, capital: str) -> float:
    """``1 / words`` if ``capital`` is one of the reply's words (case-insensitive), else 0.

    Words are runs of letters (apostrophes and hyphens inside a word allowed); digits and
    punctuation are not words. An empty reply scores 0.
    """
    words = _WORD.findall(text)
    if not words or capital.lower() not in (w.lower() for w in words):
        return 0.0
    return 1.0 / len(words)


def capital_tasks(split: Literal["train", "heldout", "all"] = "train") -> list[CapitalTask]:
    """The task's prompts: ``train`` (24 countries), ``heldout`` (8, see :data:`HELD_OUT`) or all.

    Raises:
        ValueError: on an unknown split.
    """
    if split not in ("train", "heldout", "all"):
        raise ValueError(f"split must be 'train', 'heldout' or 'all', got {split!r}")
    tasks = [CapitalTask(c, cap) for c, cap in CAPITALS]
    if split == "all":
        return tasks
    held = set(HELD_OUT)
    return [t for t in tasks if (t.country in held) == (split == "heldout")]
