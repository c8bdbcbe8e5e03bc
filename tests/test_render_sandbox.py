"""The renderer's faster sandboxed attribute lookup and its cooperative (sliced) async render.

The fast lookup must answer exactly what transformers' sandboxed Jinja environment answers, for
allowed and forbidden accesses alike; ``arender`` must give the same text as ``render`` while
letting other tasks run between slices.
"""

from __future__ import annotations

import asyncio
import functools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.strands_tools import ADD_TOOL
from transformers.utils.chat_template_utils import _compile_jinja_template

from strands_art.render import ChatRenderer, TemplateError

#: reads every kind of object a chat template touches: message dicts (present, missing and
#: dict-method names), loop context, namespaces, str methods, format
PROBE_TEMPLATE = """
{%- set ns = namespace(n=0, seen='') -%}
{%- for m in messages -%}
{%- set ns.n = ns.n + 1 -%}
[{{ loop.index0 }}/{{ loop.length }}{{ '|last' if loop.last }}{{ '|first' if loop.first }}]
{{- m.role }}:{{ m.content }}|{{ m.missing is defined }}|{{ m.name | default('-') }}
{%- if m.items is defined %}|items{% endif -%}
{%- if m['keys'] is defined %}|key-keys{% endif -%}
|{{ m.content.startswith('a') }}|{{ m.content.strip().upper() }}|{{ m.role.replace('u', 'U') }}
|{{ '%s-%s' | format(m.role, ns.n) }}|{{ m.get('role') }}|{{ m.values() | list | length }}
{%- set ns.seen = ns.seen ~ m.role[:1] -%}
{%- endfor -%}
#{{ ns.n }}{{ ns.seen }}{{ ns.unknown is defined }}
{%- if add_generation_prompt %}<gen>{% endif -%}
"""

UNSAFE = [
    "{{ ''.__class__ }}",
    "{{ messages[0].__class__.__mro__ }}",
    "{{ messages.append(1) }}",
    "{{ messages[0].update({'role': 'x'}) }}",
    "{{ messages[0].pop('role') }}",
    "{{ 'a{0.__class__}'.format(messages) }}",
    "{{ messages[0].content.format_map({}) }}",
    "{% set ns = namespace(a=1) %}{{ ns.__dict__ }}",
    "{{ loop_ctx.__init__ }}",
]


def stock(template: str, **kw) -> str:
    """transformers' own compiled sandboxed template: the reference answer."""
    return _compile_jinja_template(template).render(**kw)


def outcome(fn):
    try:
        return ("ok", fn())
    except Exception as exc:  # noqa: BLE001 - compared by type name
        cause = exc.__cause__ or exc
        return ("error", type(cause).__name__)


def test_probe_template_renders_exactly_like_the_stock_sandbox(qwen3):
    r = ChatRenderer(qwen3, chat_template=PROBE_TEMPLATE)
    msgs = [
        {"role": "system", "content": " abc "},
        {"role": "user", "content": "a user", "name": "u1", "items": "shadowed?", "keys": 3},
        {"role": "assistant", "content": ""},
    ]
    for gen in (True, False):
        ours = r.render(msgs, None, gen)
        assert ours == stock(
            PROBE_TEMPLATE, messages=msgs, tools=None, documents=None, add_generation_prompt=gen
        )
        assert "[1/3]user:a user|False|u1|items|key-keys|True|A USER|User\n|user-2|user|5" in ours
        assert ours.endswith("#3sua" + "False" + ("<gen>" if gen else ""))


@pytest.mark.parametrize("template", UNSAFE)
def test_forbidden_accesses_stay_forbidden(qwen3, template):
    msgs = [{"role": "user", "content": "hi {x}"}]
    r = ChatRenderer(qwen3, chat_template="{% for loop_ctx in [1] %}{% endfor %}" + template)
    ours = outcome(lambda: r.render(msgs, None, False))
    ref = outcome(
        lambda: stock(template, messages=msgs, tools=None, documents=None, add_generation_prompt=False)
    )
    assert ours[0] == ref[0]
    if ref[0] == "error":
        assert ours[1] == ref[1], (ours, ref)
    else:  # the sandbox renders it harmlessly (e.g. undefined): ours renders the same text
        assert ours[1].endswith(ref[1])
    assert "<class" not in str(ours[1]) and "mappingproxy" not in str(ours[1])


def test_template_errors_are_template_errors(qwen3):
    r = ChatRenderer(qwen3, chat_template="{{ raise_exception('no tools here') }}")
    with pytest.raises(TemplateError, match="no tools here"):
        r.render([{"role": "user", "content": "x"}])
    with pytest.raises(TemplateError, match="no tools here"):
        asyncio.run(r.arender([{"role": "user", "content": "x"}]))


MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["system", "user", "assistant", "tool"]),
        "content": st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
    },
    optional={"reasoning_content": st.text(max_size=20), "name": st.sampled_from(["n", "items", "get"])},
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(msgs=st.lists(MESSAGE, min_size=1, max_size=8), gen=st.booleans())
def test_real_templates_render_like_the_stock_sandbox(qwen3, smollm2_tok, msgs, gen):
    for tok, tools in ((qwen3, [ADD_TOOL]), (qwen3, None), (smollm2_tok, None)):
        r = ChatRenderer(tok)
        ours = outcome(functools.partial(r.render, msgs, tools, gen))
        ref = outcome(
            functools.partial(
                stock,
                r.chat_template,
                messages=msgs,
                tools=tools,
                documents=None,
                add_generation_prompt=gen,
                **r._template_vars,
            )
        )
        assert ours == ref
        if ours[0] == "ok":
            assert asyncio.run(r.arender(msgs, tools, gen, slice_s=0.0)) == ours[1]


async def test_arender_yields_to_other_tasks_between_slices(qwen3):
    r = ChatRenderer(qwen3)
    msgs = [{"role": "system", "content": "s"}]
    for k in range(60):
        msgs += [
            {"role": "user", "content": f"question {k}"},
            {"role": "assistant", "content": f"answer {k}"},
        ]
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    text = await r.arender(msgs, None, True, slice_s=0.0)  # yield at every check
    during = ticks - before
    task.cancel()
    assert text == r.render(msgs, None, True)
    assert during >= 10  # the other task ran many times while the template rendered

    ticks_before_plain = ticks
    await r.arender(msgs, None, True, slice_s=10.0)  # one slice: at most the final yield
    assert ticks - ticks_before_plain == 0  # the ticker was cancelled; nothing else ran


async def test_cancelled_arender_closes_the_template_generator(qwen3):
    r = ChatRenderer(qwen3)
    msgs = [{"role": "user", "content": f"q{k}"} for k in range(200)]
    task = asyncio.create_task(r.arender(msgs, None, True, slice_s=0.0))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await r.arender(msgs[:2], None, True) == r.render(msgs[:2], None, True)


def test_unserializable_tool_spec_is_a_template_error_on_both_paths(smollm2_tok):
    from decimal import Decimal

    r = ChatRenderer(smollm2_tok)  # no tool support: the Hermes rewrite serializes the specs
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"default": Decimal("1.5")}}}]
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(TemplateError, match="not JSON serializable"):
        r.render(msgs, tools)
    with pytest.raises(TemplateError, match="not JSON serializable"):
        asyncio.run(r.arender(msgs, tools))


@pytest.mark.parametrize(
    "read", ["m.get('thinking')", "('T' if 'thinking' in m else '')", "m.thinking", "m['thinking']"]
)
def test_reasoning_reaches_templates_that_read_thinking(qwen3, read):
    template = "{% for m in messages %}{{ m.role }}:[{{ " + read + " }}]{{ m.content }}\n{% endfor %}"
    msgs = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ans", "reasoning_content": "because"},
    ]
    r = ChatRenderer(qwen3, chat_template=template)
    assert r._reads_thinking
    ours = r.render(msgs, None, False)
    assert ours == qwen3.apply_chat_template(msgs, chat_template=template, tokenize=False)
    assert "assistant:[" in ours and "assistant:[]" not in ours
    assert not ChatRenderer(qwen3)._reads_thinking  # Qwen3's own template: only enable_thinking


def test_bound_str_format_read_off_a_namespace_or_loop_is_wrapped_like_the_sandbox(qwen3):
    from jinja2.utils import Namespace

    template = (
        "{{ cfg.fmt(messages) }}|{% for f in fmts %}{% if loop.previtem is defined %}"
        "{{ loop.previtem(messages) }}{% endif %}{% endfor %}"
    )
    kwargs = {
        "cfg": Namespace(fmt="{0.__class__.__mro__}".format),
        "fmts": ["{0.__class__.__mro__}".format, 1],
    }
    msgs = [{"role": "user", "content": "x"}]
    ref = outcome(
        functools.partial(
            stock, template, messages=msgs, tools=None, documents=None, add_generation_prompt=False, **kwargs
        )
    )
    assert ref == ("error", "SecurityError")
    r = ChatRenderer(qwen3, chat_template=template, chat_template_kwargs=kwargs)
    assert outcome(functools.partial(r.render, msgs, None, False)) == ref
