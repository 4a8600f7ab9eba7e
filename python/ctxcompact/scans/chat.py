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

from collections.abc import Mapping, Sequence
from typing import Any

from ctxcompact.errors import (
    ConfigError,
    FormatError,
    OrphanedToolResultError,
    TranscriptError,
    UnknownValueError,
)
from ctxcompact.scans.content import (
    IMAGE_TOKENS,
    TOOL_BLOCKS,
    call_texts,
    check_chat_messages,
    compact_json,
    content_text,
    split_images,
    tool_block_texts,
)
from ctxcompact.scans.estimate import EstimateMethod, estimate_tokens

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


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


def result_blocks(message: Mapping[str, Any]) -> list[tuple[int, str]]:
    """The ``tool_result`` blocks of an Anthropic turn's content: (block index,
    ``str(tool_use_id)``); none for a ``tool`` message (its content is the result)."""
    content = message.get("content")
    if message.get("role") == "tool" or not isinstance(content, (list, tuple)):
        return []
    return [(j, str(b.get("tool_use_id"))) for j, b in enumerate(content)
            if isinstance(b, Mapping) and b.get("type") == "tool_result"]  # fmt: skip


def use_blocks(message: Mapping[str, Any]) -> list[str]:
    """The ids (``str``) of the ``tool_use`` blocks of an Anthropic turn's
    content: the calls it makes in blocks rather than in ``tool_calls``."""
    content = message.get("content")
    if message.get("role") == "tool" or not isinstance(content, (list, tuple)):
        return []
    return [str(b.get("id")) for b in content
            if isinstance(b, Mapping) and b.get("type") == "tool_use"]  # fmt: skip


def answered_calls(message: Mapping[str, Any]) -> list[str]:
    """The ids of the calls whose results ``message`` holds: a ``tool``
    message's ``tool_call_id``, an Anthropic turn's ``tool_result`` blocks'
    ``tool_use_id`` (what answers a call, for the pairing check and its repair)."""
    if message.get("role") == "tool":
        return [str(message.get("tool_call_id"))]
    return [cid for _, cid in result_blocks(message)]


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
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, (list, tuple)) else ()):
            # an Anthropic turn's calls and results pair as the chat ones do
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                calls.add(str(block.get("id")))
            elif (isinstance(block, Mapping) and block.get("type") == "tool_result"
                  and str(block.get("tool_use_id")) not in calls):  # fmt: skip
                raise OrphanedToolResultError(
                    f"message {i} (block {j}) holds the result of tool call "
                    f"{block.get('tool_use_id')!r}, which no earlier assistant message made",
                    column="content", row=i,
                )  # fmt: skip
        if role == "tool" and str(message.get("tool_call_id")) not in calls:
            raise OrphanedToolResultError(
                f"message {i} is the result of tool call {message.get('tool_call_id')!r}, "
                "which no earlier assistant message made",
                column="tool_call_id", row=i,
            )  # fmt: skip


__all__ = [
    "answered_calls",
    "call_texts",
    "content_text",
    "estimate_chat_message",
    "estimate_chat_messages",
    "result_blocks",
    "use_blocks",
    "validate_chat_messages",
]
