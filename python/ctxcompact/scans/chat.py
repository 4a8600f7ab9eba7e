"""Helpers over OpenAI chat-format message lists (what runtimes hold in memory).

``estimate_chat_messages(to_model_messages(session))`` and the batch scan
``estimate_messages(session)`` are one definition of the model input's size
(rust/src/messages.rs states it) and agree message by message: every chat
message costs ``overhead`` (role and separators; seed 001: about 4 tokens),
its content is estimated once as a whole, and a tool call costs its name and
its arguments as compact JSON (a custom call: its name and input). Anthropic
turns are counted as their chat twins: a ``tool_use`` block as a tool call,
a ``tool_result`` block's content as a tool message's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import ctxcompact._core as _core
from ctxcompact.errors import (
    ConfigError,
    FormatError,
    OrphanedToolResultError,
    TranscriptError,
    UnknownValueError,
)
from ctxcompact.scans.estimate import EstimateMethod, estimate_tokens

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
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


def _check_overhead(overhead: Any) -> int:
    if isinstance(overhead, bool) or not isinstance(overhead, int) or overhead < 0:
        raise ConfigError(f"overhead must be a non-negative integer, got {overhead!r}",
                          column="message_overhead")  # fmt: skip
    return overhead


def estimate_chat_message(
    message: Mapping[str, Any], *, method: EstimateMethod = "opencode", overhead: int = 4
) -> int:
    """Overhead + content + reasoning sent back + each tool call's name and arguments.

    Arguments that are not a string yet are counted as compact JSON, as
    ``to_model_messages`` sends them and the part-row table stores them.
    """
    check_chat_messages([message])
    return _message_tokens(message, method, _check_overhead(overhead))


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


def _content_tokens(content: Any, method: EstimateMethod) -> int:
    """The text of ``content`` (as ``content_text`` joins it, images left
    out) plus ``IMAGE_TOKENS`` per image block, plus each Anthropic tool
    block as its OpenAI chat twin counts (``tool_block_texts``)."""
    texts, images = split_images(content)
    tools, tool_images = tool_block_texts(content)
    return (
        estimate_tokens(content_text(texts), method)
        + sum(estimate_tokens(t, method) for t in tools)
        + (images + tool_images) * IMAGE_TOKENS
    )


def _message_tokens(message: Mapping[str, Any], method: EstimateMethod, overhead: int) -> int:
    tokens = overhead + _content_tokens(message.get("content"), method)
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        tokens += estimate_tokens(reasoning, method)
    for call in message.get("tool_calls") or []:
        name, arguments = call_texts(call)
        tokens += estimate_tokens(name, method)
        tokens += estimate_tokens(arguments, method)
    return tokens


def estimate_chat_messages(
    messages: Sequence[Mapping[str, Any]],
    *,
    method: EstimateMethod = "opencode",
    overhead: int = 4,
) -> int:
    """Sum of ``estimate_chat_message`` over ``messages``.

    A list no model API would take is refused as ``compact_messages`` refuses
    it (``validate_chat_messages``: a tool result without an earlier call, an
    unknown role, a message without content, a tool call without an id), the
    error naming the message index.
    """
    overhead = _check_overhead(overhead)
    validate_chat_messages(check_chat_messages(messages))
    return chat_tokens(messages, method=method, overhead=overhead)


def chat_tokens(
    messages: Sequence[Mapping[str, Any]], *, method: EstimateMethod, overhead: int
) -> int:
    """``estimate_chat_messages`` without the pairing and role checks: for lists
    the library built or validated itself (a stored session's model input,
    which may keep an orphaned result as it was read; a split's parts)."""
    overhead = _check_overhead(overhead)
    return sum(_message_tokens(m, method, overhead) for m in check_chat_messages(messages))


#: What replaces the middle of a long old tool result in ``prune_tool_results``.
TRUNCATION_MARK = "\n[... {n} characters of old tool output removed ...]\n"


def prune_tool_results(
    messages: Sequence[Mapping[str, Any]],
    preserve_recent: int | None = None,
    *,
    max_chars: int = 1000,
    policy: Any = None,
) -> list[dict[str, Any]]:
    """Shorten old tool results, a light step before a full compaction (seed 001).

    Every ``role: tool`` message outside the last ``preserve_recent`` messages
    whose text is longer than ``max_chars`` keeps its first and last
    ``max_chars // 2`` characters around a marker saying how much was removed;
    so does every Anthropic ``tool_result`` block (in a user turn) outside
    them. With ``policy`` instead (a ``Policy``, preset name, file or dict), the
    policy's prune clears old results as it does in a stored session
    (``mask_chat_messages``, which reads OpenAI chat lists only: an Anthropic
    block is a ``FormatError``). Returns new message dicts; the input is not changed.
    A list no model API would take raises what ``compact_messages`` raises
    (``validate_chat_messages``: ``OrphanedToolResultError`` for a tool result
    without an earlier call, ``UnknownValueError`` for an unknown role...).
    """
    if policy is not None:
        if preserve_recent is not None:
            raise ConfigError("pass preserve_recent or a policy, not both", column="policy")
        from ctxcompact.scans.masking import mask_chat_messages

        return mask_chat_messages(messages, policy).messages
    if preserve_recent is None:
        raise ConfigError("prune_tool_results needs preserve_recent or a policy",
                          column="preserve_recent")  # fmt: skip
    for name, value in (("preserve_recent", preserve_recent), ("max_chars", max_chars)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{name} must be a non-negative integer, got {value!r}",
                              column=name)  # fmt: skip
    validate_chat_messages(check_chat_messages(messages))
    cut = max(0, len(messages) - preserve_recent)

    def shortened(text: str) -> str | None:
        if len(text) <= max_chars:
            return None
        head, tail = max_chars // 2, max_chars - max_chars // 2
        removed = len(text) - head - tail
        return text[:head] + TRUNCATION_MARK.format(n=removed) + (text[-tail:] if tail else "")

    out = []
    for i, message in enumerate(messages):
        copy = dict(message)
        content = message.get("content")
        if i < cut and message.get("role") == "tool":
            if (short := shortened(content_text(content))) is not None:
                copy["content"] = short
        elif i < cut and isinstance(content, (list, tuple)):
            # an Anthropic turn: its tool_result blocks are tool results too
            blocks = []
            for block in content:
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    short = shortened(content_text(block.get("content")))
                    if short is not None:
                        block = {**block, "content": short}
                blocks.append(block)
            copy["content"] = blocks
        out.append(copy)
    return out


def tool_blocks_as_chat(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``messages`` with Anthropic tool blocks as OpenAI chat holds them (what
    readers of chat lists, the summarizer, understand): an assistant turn's
    ``tool_use`` blocks as its ``tool_calls`` (arguments: the input as compact
    JSON), a user turn's ``tool_result`` blocks as ``tool`` messages before the
    rest of the turn. Messages without tool blocks are the input's own."""
    out: list[Mapping[str, Any]] = []
    for message in messages:
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, Mapping)] if isinstance(
            content, (list, tuple)) else []  # fmt: skip
        if not any(b.get("type") in TOOL_BLOCKS for b in blocks):
            out.append(message)
            continue
        assert isinstance(content, (list, tuple))
        rest = [b for b in content if not (isinstance(b, Mapping) and b.get("type") in TOOL_BLOCKS)]
        calls = [
            {"id": str(b.get("id")), "type": "function",
             "function": {"name": str(b.get("name") or ""),
                          "arguments": compact_json(b.get("input"))}}
            for b in blocks if b.get("type") == "tool_use"
        ]  # fmt: skip
        results = [
            {"role": "tool", "tool_call_id": str(b.get("tool_use_id")),
             "content": content_text(split_images(b.get("content"))[0])}
            for b in blocks if b.get("type") == "tool_result"
        ]  # fmt: skip
        if calls:
            out.append({**message, "content": rest or None,
                        "tool_calls": [*(message.get("tool_calls") or []), *calls]})  # fmt: skip
        else:
            out += results
            if rest:
                out.append({**message, "content": rest})
    return out


def validate_chat_messages(messages: Sequence[Mapping[str, Any]]) -> None:
    """Raise a specific error for a message list no model API would accept."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise FormatError(f"chat messages must be a list of message dicts, got "
                          f"{type(messages).__name__}")  # fmt: skip
    calls: set[str] = set()
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise FormatError(f"chat message {i} is not a dict: {type(message).__name__}", row=i)
        role = message.get("role")
        if role not in ROLES:
            raise UnknownValueError(f"message {i} has an unknown role {role!r}", column="role",
                                    row=i)  # fmt: skip
        if "content" not in message and not message.get("tool_calls"):
            raise TranscriptError(f"message {i} ({role}) has no content", column="content",
                                  row=i)  # fmt: skip
        tool_calls = message.get("tool_calls")
        if tool_calls is not None and not isinstance(tool_calls, (list, tuple)):
            raise FormatError(f"chat message {i}: 'tool_calls' must be a list of call dicts, "
                              f"got {type(tool_calls).__name__}", column="tool_calls",
                              row=i)  # fmt: skip
        for call in tool_calls or []:
            if not isinstance(call, Mapping):
                raise FormatError(f"chat message {i}: tool call is a {type(call).__name__}, "
                                  "not a dict", column="tool_calls", row=i)  # fmt: skip
            if not call.get("id"):
                raise TranscriptError(f"message {i} has a tool call without an id",
                                      column="tool_calls", row=i)  # fmt: skip
            calls.add(str(call["id"]))
        if role == "tool" and str(message.get("tool_call_id")) not in calls:
            raise OrphanedToolResultError(
                f"message {i} is the result of tool call {message.get('tool_call_id')!r}, "
                "which no earlier assistant message made",
                column="tool_call_id", row=i,
            )  # fmt: skip


__all__ = [
    "call_texts",
    "content_text",
    "estimate_chat_message",
    "estimate_chat_messages",
    "prune_tool_results",
    "validate_chat_messages",
]
