"""A prune policy over an OpenAI chat message list (what runtimes hold in memory).

The list is read as a session (``from_openai_chat``), the policy's prune scan
chooses the tool results to clear, and a new list comes back with those
results replaced by the policy's placeholder (and their call arguments by
``{}`` with ``clear_inputs``), oversized results cut by ``truncate_output``.
Everything else is the input's own dicts, copied. The caller keeps the
original list: that is where the cleared text stays.

A result already cleared by an earlier round (its text starts with
OpenCode's placeholder) counts as compacted, so a second round is idempotent.
A tool message with ``"pinned": true`` is never cleared or cut. Reasoning
sent back (``reasoning_content``) is kept on the newest ``keep_thinking``
assistant messages only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ctxcompact._core as _core
from ctxcompact.errors import ConfigError
from ctxcompact.models import AssistantMessage, Part, Session
from ctxcompact.policy import Policy
from ctxcompact.scans.chat import chat_tokens, validate_chat_messages
from ctxcompact.scans.content import check_chat_messages, content_text
from ctxcompact.scans.estimate import EstimateMethod
from ctxcompact.scans.view import CLEARED_TOOL_OUTPUT

#: What every placeholder starts with (OpenCode's, and the described one).
_CLEARED_PREFIX = CLEARED_TOOL_OUTPUT[:-1]


@dataclass(frozen=True)
class ChatMask:
    """The masked list, the tool call ids whose results were cleared, and the
    estimated size of the list before and after."""

    messages: list[dict[str, Any]]
    cleared: list[str]
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True)
class _Options:
    """What ``prune`` reads of a config: the policy and the estimate options."""

    policy: Policy
    estimate_method: str
    message_overhead: int


def is_cleared(text: str) -> bool:
    """The text is a placeholder a policy left (OpenCode's or the described one)."""
    return text.startswith(_CLEARED_PREFIX)


def mask_chat_messages(
    messages: Sequence[Mapping[str, Any]],
    policy: Policy | str | Mapping[str, Any],
    *,
    method: EstimateMethod = "opencode",
    overhead: int = 4,
) -> ChatMask:
    """Apply ``policy`` (a ``Policy``, preset name, file or dict) to a chat list.

    A list no model API would take raises what ``compact_messages`` raises
    (``validate_chat_messages``: ``OrphanedToolResultError`` for a tool result
    without an earlier call, ``UnknownValueError`` for an unknown role, a
    ``TranscriptError`` for a message without content or a call without an
    id); a message ``from_openai_chat`` cannot read (an Anthropic block) its
    ``FormatError``. Each names the message index; the input is never changed.
    """
    from ctxcompact.formats.chat import from_openai_chat
    from ctxcompact.scans.parts import prune

    policy = Policy.load(policy)
    validate_chat_messages(check_chat_messages(messages))
    session = from_openai_chat(messages, session_id="chat")
    calls, results = _pairs(messages, session)
    for i, part in results.items():
        if messages[i].get("pinned") is True:
            part.pinned = True
        if is_cleared(content_text(messages[i].get("content"))):
            part.mark_compacted(1)  # cleared by an earlier round: not cleared again
    result = prune(session, _Options(policy, method, overhead))
    chosen = set(result.part_ids)
    out: list[dict[str, Any]] = []
    cleared: list[str] = []
    steps = sum(1 for m in messages if m.get("role") == "assistant")
    for i, raw in enumerate(messages):
        message = dict(raw)
        if message.get("role") == "assistant":
            steps -= 1  # newer assistant messages than this one
            if steps >= policy.keep_thinking:
                message.pop("reasoning_content", None)  # older thinking is cleared
        if i in calls and policy.clear_inputs:
            message["tool_calls"] = [
                {**call, "function": {**call.get("function", {}), "arguments": "{}"}}
                if made is not None and made.id in chosen else call
                for call, made in zip(raw["tool_calls"], calls[i], strict=True)
            ]  # fmt: skip
        if (result_part := results.get(i)) is not None:
            text = content_text(raw.get("content"))
            call_id = str(raw.get("tool_call_id"))
            if result_part.id in chosen:
                cleared.append(call_id)
                message["content"] = _core.cleared_placeholder(
                    result_part.tool or "", _arguments(result_part), text, call_id,
                    describe=policy.placeholder == "describe",
                )  # fmt: skip
            elif policy.truncate_output is not None and not (
                result_part.pinned or result_part.compacted
            ):
                cut = _core.truncate_output(text, policy.truncate_output)
                if cut != text:
                    message["content"] = cut
        out.append(message)
    estimate = {"method": method, "overhead": overhead}
    return ChatMask(
        messages=out,
        cleared=cleared,
        tokens_before=chat_tokens(messages, **estimate),  # type: ignore[arg-type]
        tokens_after=chat_tokens(out, **estimate),  # type: ignore[arg-type]
    )


def _pairs(
    messages: Sequence[Mapping[str, Any]], session: Session
) -> tuple[dict[int, list[Part | None]], dict[int, Part]]:
    """By list index: the tool part of each call of an assistant message, and
    the part a tool result completed. Pairs as ``from_openai_chat`` does: a
    result answers the newest pending call with its id (runs reuse ids), and
    a second result for one call is its own message, not a result."""
    assistants = iter([m for m in session.messages if isinstance(m.info, AssistantMessage)])
    calls: dict[int, list[Part | None]] = {}
    results: dict[int, Part] = {}
    pending: dict[str, Part] = {}
    for i, raw in enumerate(messages):
        if raw.get("role") == "assistant":
            parts = [p for p in next(assistants).parts if p.type == "tool"]
            if raw.get("tool_calls"):
                calls[i] = list(parts)
            for part in parts:
                pending[str(part.callID)] = part
        elif raw.get("role") == "tool":
            answered = pending.pop(str(raw.get("tool_call_id")), None)
            if answered is not None:
                results[i] = answered
    return calls, results


def _arguments(part: Any) -> str | None:
    given = part.state.input if part.state else None
    return None if given is None else json.dumps(given, ensure_ascii=False, separators=(",", ":"))


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


__all__ = ["ChatMask", "is_cleared", "mask_chat_messages", "prune_tool_results"]
