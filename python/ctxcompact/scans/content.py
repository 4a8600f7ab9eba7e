"""What an OpenAI chat message's content holds, as every count reads it: its
text, its image blocks, its tool calls' names and arguments, and Anthropic
``tool_use`` / ``tool_result`` blocks as their chat twins. Read by
``scans/chat.py`` (estimates) and ``scans/estimate.py`` (exact counts), so
neither imports the other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import ctxcompact._core as _core
from ctxcompact.errors import FormatError

#: What one image block is estimated to cost, whatever its URL (the core's
#: ``IMAGE_TOKENS``: about the most Anthropic, OpenAI and Gemini charge for a
#: screenshot-sized image; a data URL's base64 is not text the model reads).
IMAGE_TOKENS = _core.IMAGE_TOKENS
#: Content blocks that are images: chat ``image_url``, Anthropic and LangChain
#: ``image``, Responses ``input_image``.
IMAGE_BLOCKS = frozenset({"image_url", "image", "input_image"})


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string, a list of blocks, or None."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        out = []
        for block in content:
            if isinstance(block, Mapping):
                if isinstance(block.get("text"), str):
                    out.append(block["text"])
                elif block.get("type") == "image_url":
                    out.append(str(block.get("image_url", {}).get("url", "")))
            elif isinstance(block, str):
                out.append(block)
        return "\n".join(out)
    return str(content)


#: The types a plain message's ``content`` may be (``check_chat_messages``).
_CONTENT_TYPES = (str, list, tuple)


def check_chat_messages(messages: Any) -> Sequence[Mapping[str, Any]]:
    """``messages`` if it is a list of chat message dicts a count can read:
    each a mapping with a string ``role`` and a ``content`` that is a string,
    a list of blocks or None. Else a ``FormatError`` naming the message (its
    index in ``row``, the key at fault in ``column``): a malformed one would
    be counted as whatever its ``str()`` is."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise FormatError(
            f"chat messages must be a list of message dicts, got {type(messages).__name__}"
        )
    for i, m in enumerate(messages):
        if type(m) is dict:  # the plain case, without the ABC checks
            content, calls = m.get("content"), m.get("tool_calls")
            if (
                type(m.get("role")) is str
                and (content is None or type(content) in _CONTENT_TYPES)
                and (calls is None or (type(calls) is list and all(type(c) is dict for c in calls)))
            ):
                continue
        if not isinstance(m, Mapping):
            raise FormatError(f"chat message {i} is not a dict: {type(m).__name__}", row=i)
        if not isinstance(m.get("role"), str):
            raise FormatError(f"chat message {i} has no string 'role'", row=i, column="role")
        content = m.get("content")
        if not (content is None or isinstance(content, (str, list, tuple))):
            raise FormatError(
                f"chat message {i}: 'content' must be a string, a list of blocks or null, "
                f"got {type(content).__name__}",
                row=i,
                column="content",
            )
        calls = m.get("tool_calls")
        if calls is not None and not (
            isinstance(calls, (list, tuple)) and all(isinstance(c, Mapping) for c in calls)
        ):
            raise FormatError(
                f"chat message {i}: 'tool_calls' must be a list of dicts",
                row=i,
                column="tool_calls",
            )
    return messages


def split_images(content: Any) -> tuple[Any, int]:
    """``content`` without its image blocks, and how many there were."""
    if isinstance(content, Sequence) and not isinstance(content, str):
        texts = [
            b for b in content if not (isinstance(b, Mapping) and b.get("type") in IMAGE_BLOCKS)
        ]
        return texts, len(content) - len(texts)
    return content, 0


def compact_json(value: Any) -> str:
    """A tool call's arguments as the model is sent them: a string as it is,
    anything else (None: no arguments, ``{}``) as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value or {}, ensure_ascii=False, separators=(",", ":"))


def custom_call(call: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``custom`` object of an OpenAI custom (freeform) tool call as the
    chat mapper reads one (``{"type": "custom", "custom": {"name", "input"}}``,
    no ``function``: rust/src/ingest/chat.rs ``custom_call``), else None."""
    custom = call.get("custom")
    if call.get("type") == "custom" and isinstance(custom, Mapping) and not call.get("function"):
        return custom
    return None


def call_texts(call: Mapping[str, Any]) -> tuple[str, str]:
    """(name, arguments) of an OpenAI chat tool call, as the model reads them: a
    function call's ``function.name`` and ``function.arguments`` (compact JSON
    when not a string yet), a custom (freeform) call's ``custom.name`` and its
    ``custom.input`` text."""
    if call.get("type") == "custom" or ("custom" in call and "function" not in call):
        custom = call.get("custom")
        custom = custom if isinstance(custom, Mapping) else {}
        given = custom.get("input")
        return str(custom.get("name") or ""), given if isinstance(given, str) else (
            "" if given is None else compact_json(given))  # fmt: skip
    fn = call.get("function")
    fn = fn if isinstance(fn, Mapping) else {}
    return str(fn.get("name") or ""), compact_json(fn.get("arguments"))


#: Anthropic content blocks that carry a tool call or its result.
TOOL_BLOCKS = frozenset({"tool_use", "tool_result"})


def tool_block_texts(content: Any) -> tuple[list[str], int]:
    """What the model reads of ``content``'s Anthropic tool blocks, counted as
    their OpenAI chat twins are (``to_anthropic_messages`` and the Anthropic
    writer build one from the other): a ``tool_use`` block's ``name`` and
    ``input`` as compact JSON (a tool call's name and arguments), a
    ``tool_result`` block's ``content`` (a tool message's: its text, a string
    or text blocks; its images apart). Returns the texts, one per call name,
    call input and result, and how many images the results hold."""
    texts: list[str] = []
    images = 0
    if isinstance(content, str) or not isinstance(content, Sequence):
        return texts, 0
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "tool_use":
            texts += [str(block.get("name") or ""), compact_json(block.get("input"))]
        elif block.get("type") == "tool_result":
            inner, n = split_images(block.get("content"))
            texts.append(content_text(inner))
            images += n
    return texts, images
