"""Chat-template rendering and tokenization.

Messages are rendered with the model's own Hugging Face chat template
(``apply_chat_template(..., tokenize=False)``, tools passed as ``tools=``), then encoded in a
worker thread (``asyncio.to_thread``) so the event loop is never blocked by a long prompt. Not
with ``Tokenizer.async_encode``: it completes its futures from a tokio runtime inside the
tokenizers extension whose threads outlive ``asyncio.run`` and touch the interpreter while it
shuts down: 3 of 40 processes making 200 concurrent ``async_encode`` calls crashed at exit
(SIGSEGV) on the development machine, none of 40 with threads, which ``asyncio.run`` joins; the
SIGABRT in ``PyGILState_Release`` at the exit of ``strands-art replay`` (4 of 24 runs, two at
once) is that kind of crash. tests/test_native_threads.py checks that no tokio thread is left. Special tokens in rendered text (``<|im_end|>``, ``<tool_call>``) are added tokens
of the tokenizer, so they are recognised as single IDs, never split.

Templates that do not support tools (e.g. SmolLM2's ChatML template) get the Hermes tool
convention: a tool instruction appended to the system message, assistant tool calls written as
``<tool_call>{json}</tool_call>`` in the content, tool results sent as user turns wrapped in
``<tool_response>``. See :func:`strands_art.toolcalls.select.render_tools_instruction`.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import types
from typing import Any

from strands_art.literal import ESC
from strands_art.render_system import AS_USER, KEEP, probe_mid_system, system_as_user
from strands_art.validation import is_int

logger = logging.getLogger(__name__)

#: seconds of template work between yields to the event loop in :meth:`ChatRenderer.arender`
RENDER_SLICE_S = 0.0003


class TemplateError(ValueError):
    """The chat template could not render the given messages (e.g. a malformed message)."""


class ChatRenderer:
    """Render chat messages with a tokenizer's chat template and tokenize the result.

    Args:
        tokenizer: a ``transformers`` fast tokenizer with a chat template.
        chat_template: optional Jinja template overriding the tokenizer's own.
        chat_template_kwargs: extra template variables (e.g. ``{"enable_thinking": False}``).
        family: a model family name (:data:`strands_art.families.FAMILIES`); default: detected
            from the template (:func:`strands_art.families.family_for`).
        special_tokens_in_content: "text" (default): text from the request (message content,
            reasoning, tool-call arguments, tool specs) that spells a control token
            (``<|im_end|>``, ``</think>``) is tokenized as text, so special-token IDs appear only
            where the template writes them (:mod:`strands_art.literal`); "special": the old
            behaviour, such text becomes the control token. Families that render with their own
            library (Harmony) get the same escaped text: the library writes the sentinels as
            ordinary characters, :meth:`encode` turns them back into text tokens.

    Raises:
        TemplateError: no chat template.
        UnknownFamily: ``family`` is not a registered name.
    """

    def __init__(
        self,
        tokenizer: Any,
        chat_template: str | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        family: str | None = None,
        special_tokens_in_content: str = "text",
    ) -> None:
        if special_tokens_in_content not in ("text", "special"):
            raise ValueError(
                f"special_tokens_in_content must be 'text' or 'special', got {special_tokens_in_content!r}"
            )
        self.tokenizer = tokenizer
        self.chat_template = chat_template or getattr(tokenizer, "chat_template", None)
        if not self.chat_template:
            raise TemplateError("the tokenizer has no chat template; pass chat_template=")
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.backend = tokenizer.backend_tokenizer  # tokenizers.Tokenizer (Rust core)
        from strands_art.literal import LiteralText

        #: escapes request text before rendering (None: text may become control tokens)
        self.literal = LiteralText(self.backend) if special_tokens_in_content == "text" else None
        from strands_art.families import ModelFamily, family_for
        from strands_art.toolcalls.base import DEFAULT_END_MARKERS
        from strands_art.toolcalls.hermes import HermesParser

        #: the model family: end tokens, tool-call format, history rewrites (strands_art/families)
        self.family = family_for(self.chat_template, tokenizer, family)
        self.family.configure(dict(chat_template_kwargs or {}))
        eos = getattr(tokenizer, "eos_token", None)
        markers = tuple(
            dict.fromkeys((*DEFAULT_END_MARKERS, *self.family.end_tokens, *([eos] if eos else [])))
        )
        parser = self.family.parser(self.chat_template, markers)
        if self.family.tools_in_template:  # the template renders ``tools`` and a call syntax we parse
            self.supports_tools = parser is not None and "tools" in self.chat_template
        else:  # the family writes the tool list into the system prompt; the template renders calls
            self.supports_tools = parser is not None
        # templates without tool support get the Hermes convention (see module docstring)
        self.tool_parser = parser if self.supports_tools else HermesParser(markers)
        self._template = _compile(self.chat_template)
        self._family_renders = type(self.family).render is not ModelFamily.render
        #: a system message after the conversation started: kept at its position by the format
        #: ("keep"), or rendered as a user message there ("user"); :mod:`strands_art.render_system`
        self.mid_system = KEEP
        # gpt-oss style templates read ``thinking``; only they get the alias (a dict per message).
        # Any word ``thinking`` counts (``m.thinking``, ``m.get('thinking')``, ``'thinking' in m``),
        # ``enable_thinking`` does not.
        self._reads_thinking = re.search(r"\bthinking\b", self.chat_template) is not None
        self._render_kwargs = {**self.family.template_vars(), **self.chat_template_kwargs}
        self._template_vars = {**getattr(tokenizer, "special_tokens_map", {}), **self._render_kwargs}
        #: token ID -> text of the family's end tokens that may stand in for the closer's end token
        self.closer_end_ids = self._token_ids(self.family.closer_end_tokens)
        self.end_of_turn_ids = self._end_of_turn_ids()
        if not self._family_renders:  # Harmony writes developer messages where they stand
            self.mid_system = probe_mid_system(self.render)
        #: token ID -> text of the family's tokens that open another author's turn
        self.turn_start_ids = self._token_ids(self.family.turn_start_tokens)
        # one past the largest token ID (added tokens included): a sampled ID must be below it
        self.vocab_size = max(self.backend.get_vocab(with_added_tokens=True).values()) + 1

    # ----------------------------------------------------------------- rendering
    def render(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
    ) -> str:
        """Render OpenAI-format chat messages to the text the model sees.

        Returns the rendered prompt (str). Raises TemplateError when the template fails.

        Renders with the template compiled in transformers' sandboxed Jinja environment (its
        filters and globals; see :func:`_compile`), called directly: ``apply_chat_template`` would
        first rebuild the whole conversation out of plain JSON types, which costs as much as the
        render on long histories and is not needed for our normalized messages.
        ``tests/test_render.py`` checks the output equals ``apply_chat_template``'s.
        """
        try:
            if self._family_renders:  # the family renders with its official library (Harmony)
                lit = self.literal  # request text spelling a control token stays text
                own = self.family.render(
                    lit.escape(messages) if lit else messages,
                    (lit.escape(tools) if lit and tools else tools),
                    add_generation_prompt,
                )
                if own is not None:
                    return own
            msgs, tool_specs = self._template_inputs(messages, tools)
            if self._template is not None:
                return self._template.render(
                    messages=msgs,
                    tools=tool_specs,
                    documents=None,
                    add_generation_prompt=add_generation_prompt,
                    **self._template_vars,
                )
            return self.tokenizer.apply_chat_template(
                msgs,
                tools=tool_specs,
                chat_template=self.chat_template,
                add_generation_prompt=add_generation_prompt,
                tokenize=False,
                **self._render_kwargs,
            )
        except Exception as exc:  # jinja2 errors, TypeError on malformed fields
            raise _template_error(exc) from exc

    async def arender(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        slice_s: float = RENDER_SLICE_S,
    ) -> str:
        """:meth:`render` on the event loop, yielding to it every ``slice_s`` seconds of template work.

        Returns the same text as :meth:`render`; raises TemplateError. Jinja renders through a
        generator of output pieces, so a long history is rendered cooperatively: no worker thread
        (which would hold the GIL against the event loop for whole switch intervals). Yields can
        only happen between output pieces, so template work that emits nothing runs in one go
        (Qwen3's scan for the last user query: ~0.5 ms at 100 messages, ~3 ms at 1,000).
        Cancellation closes the render.
        """
        if self._family_renders:  # Harmony renders in Rust, well under a slice per message
            return self.render(messages, tools, add_generation_prompt)
        if self._template is None:  # apply_chat_template path: no generator to slice
            return await asyncio.to_thread(self.render, messages, tools, add_generation_prompt)
        parts: list[str] = []
        pieces = None
        try:
            msgs, tool_specs = self._template_inputs(messages, tools)
            pieces = self._template.generate(
                messages=msgs,
                tools=tool_specs,
                documents=None,
                add_generation_prompt=add_generation_prompt,
                **self._template_vars,
            )
            clock = time.perf_counter
            deadline = clock() + slice_s
            for n, piece in enumerate(pieces, 1):
                parts.append(piece)
                if not n % 8 and clock() > deadline:
                    await asyncio.sleep(0)
                    deadline = clock() + slice_s
        except Exception as exc:  # jinja2 errors, TypeError on malformed fields, the Hermes rewrite
            raise _template_error(exc) from exc
        finally:
            if pieces is not None:
                pieces.close()
        if clock() > deadline - slice_s / 2:  # most of a slice used: let others in before the caller goes on
            await asyncio.sleep(0)
        return "".join(parts)

    def _template_inputs(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """The messages and tool specs as the template receives them (Hermes rewrite, aliases;
        request text escaped so it cannot spell a control token, :mod:`strands_art.literal`)."""
        if self.mid_system == AS_USER:
            messages = system_as_user(messages)
        if self.literal is not None:
            messages = self.literal.escape(messages)
            tools = self.literal.escape(tools) if tools else tools
        if self.supports_tools or not tools:
            msgs = self.family.prepare_messages(messages)
        else:
            msgs = self._hermes_messages(messages, tools)
        tool_specs = tools if (tools and self.supports_tools) else None
        if tool_specs and not self.family.tools_in_template:
            msgs = _with_system_text(msgs, self.family.tools_instruction(tool_specs) or "")
            tool_specs = None
        if self._reads_thinking:
            msgs = [_alias_reasoning(m) for m in msgs]
        return msgs, tool_specs

    def _hermes_messages(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict]:
        """Rewrite tool use into plain text for templates without tool support."""
        from strands_art.toolcalls.hermes import format_tool_calls
        from strands_art.toolcalls.select import render_tools_instruction

        out: list[dict[str, Any]] = []
        rest = messages
        if messages and messages[0].get("role") == "system":
            out.append({"role": "system", "content": messages[0].get("content") or ""})
            rest = messages[1:]
        for m in rest:
            role = m.get("role")
            if role == "assistant" and m.get("tool_calls"):
                parts = [m.get("content") or "", format_tool_calls(m["tool_calls"])]
                out.append({"role": "assistant", "content": "\n".join(p for p in parts if p)})
            elif role == "tool":
                body = f"<tool_response>\n{m.get('content') or ''}\n</tool_response>"
                if out and out[-1].get("_tool_block"):
                    out[-1]["content"] += "\n" + body
                else:
                    out.append({"role": "user", "content": body, "_tool_block": True})
            else:
                out.append({k: v for k, v in m.items() if k in ("role", "content")})
        for m in out:
            m.pop("_tool_block", None)
        return _with_system_text(out, render_tools_instruction(tools))

    # ------------------------------------------------------------- tokenization
    async def encode(self, text: str) -> list[int]:
        """Token IDs of ``text`` (list[int]); special tokens recognised, none added.

        Runs in a worker thread (``asyncio.to_thread``), off the event loop (not with
        ``Tokenizer.async_encode``: see the module docstring).
        """
        if self.literal is not None and ESC in text:  # escaped request text: control tokens as text
            return await asyncio.to_thread(self.literal.encode, text)
        return await asyncio.to_thread(self.encode_sync, text)

    def encode_sync(self, text: str) -> list[int]:
        """Blocking variant of :meth:`encode`, for tools and benchmarks."""
        if self.literal is not None and ESC in text:
            return self.literal.encode(text)
        return list(self.backend.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids`` with special tokens kept (so it round-trips through the template)."""
        return self.backend.decode(list(ids), skip_special_tokens=False)

    def token_strings(self, ids: list[int]) -> list[str]:
        """The vocabulary string of each ID (for divergence reports)."""
        return [self.backend.id_to_token(i) or f"<{i}>" for i in ids]

    @property
    def render_vars(self) -> dict[str, Any]:
        """The variables every render gets: the family's fixed ones (e.g. Llama 3.x's
        ``date_string``, GPT-OSS's ``current_date``), then the user's ``chat_template_kwargs``.
        Recorded with each trajectory (:mod:`strands_art.render_inputs`)."""
        return dict(self._render_kwargs)

    # ------------------------------------------------------------------ template
    def _end_of_turn_ids(self) -> tuple[int, ...]:
        """Token IDs that end an assistant turn (the stop IDs), read from the template.

        Renders a probe assistant message and takes the first special token that follows its
        content (``<|im_end|>`` for ChatML/Qwen), then the family's end tokens and the tokenizer's
        EOS; a family with ``stop_tokens`` (Harmony) gives them all.
        """
        if self.family.stop_tokens is not None:
            return tuple(self._token_ids(self.family.stop_tokens))
        ids: list[int] = []
        probe = "PROBE_CONTENT_7f3a"
        try:
            text = self.render(
                [{"role": "user", "content": "hi"}, {"role": "assistant", "content": probe}],
                add_generation_prompt=False,
            )
            tail = text[text.rindex(probe) + len(probe) :]
            special = self._special_ids()
            for tid in self.encode_sync(tail):
                if tid in special:
                    ids.append(tid)
                    break
        except (TemplateError, ValueError):
            logger.warning("could not find the end-of-turn token from the chat template")
        ids.extend(self._token_ids(self.family.end_tokens))
        eos = getattr(self.tokenizer, "eos_token_id", None)
        ids.extend(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        ids.extend(_generation_config_eos(getattr(self.tokenizer, "name_or_path", "") or ""))
        return tuple(dict.fromkeys(int(i) for i in ids))

    def _token_ids(self, tokens: tuple[str, ...]) -> dict[int, str]:
        """ID -> text of each token in ``tokens`` the vocabulary holds as one token."""
        out: dict[int, str] = {}
        for text in tokens:
            tid = self.backend.token_to_id(text)
            if tid is not None:
                out[int(tid)] = text
        return out

    def _special_ids(self) -> set[int]:
        return set(getattr(self.tokenizer, "all_special_ids", []) or []) | {
            i for i, t in self.backend.get_added_tokens_decoder().items() if t.special
        }


def _template_error(exc: Exception) -> TemplateError:
    return TemplateError(f"chat template failed to render the messages: {exc}")


def _compile(chat_template: str) -> Any:
    """The chat template compiled in an overlay of transformers' sandboxed Jinja environment, with
    a faster attribute lookup (:func:`_fast_getattr`), or None to use apply_chat_template."""
    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template

        env = _compile_jinja_template(chat_template).environment.overlay()
    except Exception:  # a transformers without this helper, or a template it cannot compile
        logger.info("rendering through apply_chat_template (no compiled-template fast path)")
        return None
    env.getattr = _fast_getattr(env)
    return env.from_string(chat_template)


def _fast_getattr(env: Any) -> Any:
    """``env.getattr`` with the sandbox's answer for the objects a chat template reads, computed directly.

    Jinja's sandboxed ``getattr`` (every ``message.role``, ``loop.last``, ``ns.flag``) first tries
    the Python attribute, catches the AttributeError a dict raises, then runs the safety checks:
    about three quarters of a long render. For exact ``dict``s whose key is not a dict attribute
    the sandbox returns the item (or undefined); for ``str``, Jinja's ``LoopContext`` and
    ``Namespace`` objects and a name without a leading underscore (other than ``format`` /
    ``format_map``, which the sandbox wraps) its checks always pass and it returns the attribute
    (wrapped as the sandbox does when a namespace or loop value is a bound ``str.format``).
    Those cases are answered here; everything else goes through the sandbox unchanged, so
    templates keep exactly the sandbox's permissions (tests/test_render_sandbox.py).
    """
    from jinja2.runtime import LoopContext
    from jinja2.utils import Namespace

    sandbox_getattr = type(env).getattr
    plain = {str, LoopContext, Namespace}
    namespace = env.globals.get("namespace")
    if isinstance(namespace, type):
        plain.add(namespace)  # transformers' TemplateNamespace

    def getattr_(obj: Any, attribute: str) -> Any:
        tp = type(obj)
        if tp is dict:
            if attribute not in _DICT_ATTRS:
                try:
                    return obj[attribute]
                except KeyError:
                    return env.undefined(obj=obj, name=attribute)
        elif tp in plain and attribute[:1] != "_" and attribute not in _WRAPPED_STR_METHODS:
            try:
                value = getattr(obj, attribute)
            except AttributeError:
                pass
            else:  # a namespace or loop item may itself be a bound str.format: the sandbox wraps it
                if tp is str or type(value) not in _BOUND_METHODS:
                    return value
                return env.wrap_str_format(value) or value
        return sandbox_getattr(env, obj, attribute)

    return getattr_


_DICT_ATTRS = frozenset(dir(dict))
#: the types jinja2's ``wrap_str_format`` looks at (final types: an exact type check is isinstance)
_BOUND_METHODS = frozenset((types.MethodType, types.BuiltinMethodType))
_WRAPPED_STR_METHODS = frozenset(("format", "format_map"))


def _generation_config_eos(directory: str) -> list[int]:
    """The ``eos_token_id`` list of ``DIRECTORY/generation_config.json`` (the model's own end
    tokens, e.g. Llama 3.1's ``[128001, 128008, 128009]``), or [] when there is none."""
    import json
    import os

    path = os.path.join(directory, "generation_config.json")
    if not directory or not os.path.isfile(path):
        return []
    try:
        with open(path, encoding="utf-8") as f:
            eos = json.load(f).get("eos_token_id")
    except (OSError, ValueError, AttributeError):
        logger.warning("unreadable %s; its end tokens are not used", path)
        return []
    eos = eos if isinstance(eos, list) else [eos]
    return [int(i) for i in eos if is_int(i)]


def _with_system_text(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """``messages`` with ``text`` appended to the system message after a blank line (a system
    message holding only ``text`` is prepended when there is none)."""
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": f"{first.get('content') or ''}\n\n{text}"}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def _alias_reasoning(message: dict[str, Any]) -> dict[str, Any]:
    """Expose ``reasoning_content`` as ``thinking`` too, as transformers does for gpt-oss templates."""
    reasoning = message.get("reasoning_content")
    return {"thinking": reasoning, **message} if reasoning is not None else message
