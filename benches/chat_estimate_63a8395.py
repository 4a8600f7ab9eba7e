"""The pure-Python chat estimate and split as they were before chat lists
were counted by the core (``scans/chat.py`` and ``live/split.py`` at
63a8395; the Anthropic-block fallback of ``chat_counts`` at f9fdeea^),
kept only as the baseline the engine's counts are measured against
(``benches/test_small_calls.py``). Not part of the package; nothing else
imports it. The helpers they called that are unchanged since are imported
(the split's boundary search and the messages' check, changed since, are
copied below).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxcompact.errors import FormatError
from ctxcompact.live.split import Split, leading_system, summary_round
from ctxcompact.scans.content import IMAGE_TOKENS, content_text, split_images
from ctxcompact.scans.estimate import estimate_tokens


def _blocks(message: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    """The Anthropic content blocks of ``kind`` (``tool_use``, ``tool_result``) in ``message``."""
    content = message.get("content")
    if isinstance(content, str) or not isinstance(content, Sequence):
        return []
    return [b for b in content if isinstance(b, Mapping) and b.get("type") == kind]


def _result_ids(message: Mapping[str, Any]) -> set[str]:
    """The calls ``message`` answers: a tool message's, a turn's ``tool_result`` blocks'."""
    ids = {str(b.get("tool_use_id")) for b in _blocks(message, "tool_result")}
    if message.get("role") == "tool":
        ids.add(str(message.get("tool_call_id")))
    return ids


def _call_ids(message: Mapping[str, Any]) -> set[str]:
    """The calls ``message`` makes: its ``tool_calls``, its ``tool_use`` blocks."""
    ids = {str(b.get("id")) for b in _blocks(message, "tool_use")}
    return ids | {str(c.get("id")) for c in (message.get("tool_calls") or [])}


def _adjust(messages: Sequence[Mapping[str, Any]], boundary: int, floor: int) -> int:
    """Move the boundary back until no tool call in the head has a result in the tail."""
    while boundary > floor:
        if _result_ids(messages[boundary]):
            boundary -= 1  # a result must stay with its call
            continue
        tail_results = set().union(*(_result_ids(m) for m in messages[boundary:]))
        head_calls = set().union(*(_call_ids(m) for m in messages[floor:boundary]))
        if tail_results & head_calls:
            boundary -= 1
            continue
        break
    return boundary


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


def _compact_json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value or {}, ensure_ascii=False, separators=(",", ":"))


def _call_texts(call: Mapping[str, Any]) -> tuple[str, str]:
    if call.get("type") == "custom" or ("custom" in call and "function" not in call):
        custom = call.get("custom")
        custom = custom if isinstance(custom, Mapping) else {}
        given = custom.get("input")
        return str(custom.get("name") or ""), given if isinstance(given, str) else (
            "" if given is None else _compact_json(given))  # fmt: skip
    fn = call.get("function")
    fn = fn if isinstance(fn, Mapping) else {}
    return str(fn.get("name") or ""), _compact_json(fn.get("arguments"))


def _tool_block_texts(content: Any) -> tuple[list[str], int]:
    texts: list[str] = []
    images = 0
    if isinstance(content, str) or not isinstance(content, Sequence):
        return texts, 0
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "tool_use":
            texts += [str(block.get("name") or ""), _compact_json(block.get("input"))]
        elif block.get("type") == "tool_result":
            inner, n = split_images(block.get("content"))
            texts.append(content_text(inner))
            images += n
    return texts, images


def _content_tokens(content: Any, method: str) -> int:
    texts, images = split_images(content)
    tools, tool_images = _tool_block_texts(content)
    return (
        estimate_tokens(content_text(texts), method)  # type: ignore[arg-type]
        + sum(estimate_tokens(t, method) for t in tools)  # type: ignore[arg-type]
        + (images + tool_images) * IMAGE_TOKENS
    )


def _message_tokens(message: Mapping[str, Any], method: str, overhead: int) -> int:
    tokens = overhead + _content_tokens(message.get("content"), method)
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        tokens += estimate_tokens(reasoning, method)  # type: ignore[arg-type]
    for call in message.get("tool_calls") or []:
        name, arguments = _call_texts(call)
        tokens += estimate_tokens(name, method)  # type: ignore[arg-type]
        tokens += estimate_tokens(arguments, method)  # type: ignore[arg-type]
    return tokens


def estimate_chat_message(message: Mapping[str, Any], *, method: str = "opencode",
                          overhead: int = 4) -> int:  # fmt: skip
    check_chat_messages([message])
    return _message_tokens(message, method, overhead)


def chat_counts_blocks(messages: Sequence[Mapping[str, Any]], *, method: str = "opencode",
                       overhead: int = 4) -> list[int]:  # fmt: skip
    """``chat_counts`` of a list holding Anthropic blocks at f9fdeea^ (the
    ``unmapped`` test, then the Python estimate of each message)."""
    check_chat_messages(messages)
    return [estimate_chat_message(m, method=method, overhead=overhead) for m in messages]


def select_split(messages: Sequence[Mapping[str, Any]], *, keep_tokens: int,
                 method: str = "opencode", overhead: int = 4) -> Split:  # fmt: skip
    """``select_split(messages, keep_tokens=...)`` at 63a8395 (the tokens policy)."""
    start = lead = leading_system(messages)
    system = messages[0] if lead else None
    previous, previous_round = None, 0
    if len(messages) > start and (r := summary_round(messages[start])) is not None:
        previous, previous_round = content_text(messages[start].get("content")), r
        start += 1
    boundary, used = len(messages), 0
    while boundary > start:
        cost = estimate_chat_message(messages[boundary - 1], method=method, overhead=overhead)
        if used + cost > keep_tokens:
            break
        used += cost
        boundary -= 1
    boundary = _adjust(messages, boundary, start) if boundary < len(messages) else boundary
    users = [i for i in range(start, len(messages))
             if messages[i].get("role") == "user" and not _result_ids(messages[i])]  # fmt: skip
    request = users[-1] if users and users[-1] < boundary else None
    return Split(system, previous, previous_round, list(messages[start:boundary]),
                 list(messages[boundary:]), start, boundary, list(messages[:lead]),
                 request)  # fmt: skip
