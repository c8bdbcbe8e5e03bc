"""Non-text content (issue 14 item 12): an image a tool returns, a document the user sends, an
image part through the HTTP front → the model sees placeholder text, the trajectory records a
``non_text_content`` event, the rollout goes on (real Qwen3 tokenizer, scripted backend)."""

from __future__ import annotations

import httpx
import pytest
from strands import Agent, tool
from strands.agent.conversation_manager import NullConversationManager
from support.serve_helpers import gateway as front_gateway
from support.serve_helpers import running_front

from strands_art.backends.scripted import ScriptedBackend
from strands_art.conversion.openai import replace_non_text_parts
from strands_art.conversion.strands import StrandsFormatError, strands_user_to_openai
from strands_art.gateway import RolloutGateway
from strands_art.model import ARTModel

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 92  # 100 bytes
SHOT = "[image omitted (png, 100 bytes): this model reads text only]"


@tool
def screenshot() -> dict:
    """Take a screenshot of the build output."""
    return {
        "status": "success",
        "content": [{"text": "BUILD OK"}, {"image": {"format": "png", "source": {"bytes": PNG}}}],
    }


async def test_tool_returning_an_image_gives_a_placeholder_and_the_rollout_goes_on(qwen3):
    script = [
        {"text": '<tool_call>\n{"name": "screenshot", "arguments": {}}\n</tool_call><|im_end|>'},
        {"text": "The build passed.<|im_end|>"},
    ]
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, script))
    agent = Agent(
        model=ARTModel(gateway=gw, session_id="img"),
        tools=[screenshot],
        callback_handler=None,
        conversation_manager=NullConversationManager(),
    )
    result = await agent.invoke_async("Did the build pass?")
    assert str(result).strip() == "The build passed."
    traj = gw.close_session("img")
    assert len(traj.turns) == 2 and len(traj.rows) == 1  # the second turn extends the first row
    second_prompt = qwen3.decode(traj.turns[1].prompt_ids)
    assert f"BUILD OK\n{SHOT}" in second_prompt
    events = [e for e in traj.events if e["kind"] == "non_text_content"]
    assert len(events) == 1
    assert events[0]["placeholders"] == [SHOT] and events[0]["turn"] == 1 and events[0]["message"] == 2


def test_user_document_and_video_blocks_become_placeholders_and_cache_points_are_dropped():
    omitted: list[str] = []
    msgs = strands_user_to_openai(
        {
            "role": "user",
            "content": [
                {"text": "Summarize: "},
                {"document": {"format": "pdf", "name": "report", "source": {"bytes": b"%PDF-1.7 x"}}},
                {"video": {"format": "mp4", "source": {"s3Location": {"uri": "s3://b/k"}}}},
                {"cachePoint": {"type": "default"}},
            ],
        },
        omitted,
    )
    doc = "[document omitted (report, pdf, 10 bytes): this model reads text only]"
    video = "[video omitted (mp4): this model reads text only]"
    assert msgs == [{"role": "user", "content": f"Summarize: {doc}{video}"}]
    assert omitted == [doc, video]
    with pytest.raises(StrandsFormatError, match="unsupported user content block"):
        strands_user_to_openai({"role": "user", "content": [{"hologram": {}}]})


def test_openai_parts_become_text_parts():
    msg = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this? "},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
            {"type": "input_audio", "input_audio": {"data": "UklGR", "format": "wav"}},
        ],
    }
    out, placeholders = replace_non_text_parts(msg)
    assert placeholders == [
        "[image omitted (image/jpeg): this model reads text only]",
        "[audio omitted (wav): this model reads text only]",
    ]
    assert [p["type"] for p in out["content"]] == ["text", "text", "text"]
    assert msg["content"][1]["type"] == "image_url"  # the caller's message is not mutated
    assert replace_non_text_parts({"role": "user", "content": "plain"}) == (
        {"role": "user", "content": "plain"},
        [],
    )


async def test_http_front_image_part_gets_a_placeholder_and_an_event(qwen3):
    gw = front_gateway(qwen3, [{"text": "A cat.<|im_end|>"}])
    image = {"type": "image_url", "image_url": {"url": "https://example.invalid/cat.png"}}
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "What is this? "}, image]}],
    }
    async with running_front(gw, auto_open=True) as base:
        async with httpx.AsyncClient() as client:
            r = await client.post(f"{base}/rollouts/r1/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "A cat."
    traj = gw.trajectory("r1")
    assert "What is this? [image omitted: this model reads text only]" in qwen3.decode(
        traj.turns[0].prompt_ids
    )
    assert [e["code"] for e in traj.events if e["kind"] == "non_text_content"] == ["non_text_content"]
