"""A prune policy over a chat message list (what runtimes hold in memory).

The list is read by the core as a session is (``scans/chatrows.py``: the
native chat mapper, once), the policy's prune chooses the tool results to
clear, and a new list comes back with those results replaced by the policy's
placeholder (and their call arguments by ``{}`` with ``clear_inputs``),
oversized results cut by ``truncate_output``. The sizes before and after are
the core's per-message estimates of the same rows: a chat list gets the fates
and counts of the same history stored as a session. Everything else is the
input's own dicts, copied. The caller keeps the original list: that is where
the cleared text stays.

A result already cleared by an earlier round (its text starts with
OpenCode's placeholder) counts as compacted, so a second round is idempotent.
A tool message with ``"pinned": true`` is never cleared or cut. Reasoning
sent back (``reasoning_content``) is kept on the newest ``keep_thinking``
assistant messages only (the mapper keeps it as the message's own key, not a
reasoning part: the counts leave it out, as a stored session's do).

A list whose turns hold Anthropic content blocks is read as the same turns
stored in the ``anthropic`` format are: a cleared result keeps its
``tool_result`` block and ``tool_use_id``, its ``content`` the placeholder
(a cut one, the cut text); ``clear_inputs`` empties the ``tool_use`` block's
``input``. ``thinking`` blocks are left as they are (the API wants a tool
loop's thinking whole and signed, and drops older turns' thinking itself):
they count as a stored session's reasoning does, the newest
``keep_thinking`` assistant turns' only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ctxcompact._core as _core
from ctxcompact.errors import ConfigError
from ctxcompact.policy import Policy
from ctxcompact.scans.chat import validate_chat_messages
from ctxcompact.scans.chatrows import is_cleared, read_chat, result_block
from ctxcompact.scans.content import check_chat_messages, content_text, custom_call
from ctxcompact.scans.estimate import EstimateMethod


@dataclass(frozen=True)
class ChatMask:
    """The masked list, the tool call ids whose results were cleared, and the
    estimated size of the list before and after (the core's, per message in
    ``counts_before`` / ``counts_after``: what the split-point family sizes
    its tail by)."""

    messages: list[dict[str, Any]]
    cleared: list[str]
    tokens_before: int
    tokens_after: int
    counts_before: list[int] = field(default_factory=list)
    counts_after: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class _Options:
    """What ``prune`` reads of a config: the policy and the estimate options."""

    policy: Policy
    estimate_method: str
    message_overhead: int


def _cleared_input(call: Mapping[str, Any]) -> dict[str, Any]:
    """``call`` with its input cleared: a function call's arguments ``{}``, a
    custom call's text "" (read by the chat mapper as the input ``{}``)."""
    custom = custom_call(call)
    if custom is not None:
        return {**call, "custom": {**custom, "input": ""}}
    return {**call, "function": {**call.get("function", {}), "arguments": "{}"}}


def _clear_inputs(message: dict[str, Any], ids: set[str]) -> None:
    """``message`` (a copy) with the input of its calls ``ids`` cleared: a
    chat tool call's (``_cleared_input``), a ``tool_use`` block's ``{}``."""
    if message.get("tool_calls"):
        message["tool_calls"] = [_cleared_input(call) if str(call.get("id")) in ids else call
                                 for call in message["tool_calls"]]  # fmt: skip
    content = message.get("content")
    if isinstance(content, (list, tuple)):
        message["content"] = [
            {**b, "input": {}}
            if isinstance(b, Mapping) and b.get("type") == "tool_use" and b.get("id") in ids
            else b
            for b in content
        ]  # fmt: skip


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
    id); a message the chat mapper cannot read (an unknown or malformed
    Anthropic block) its ``FormatError``. Each names the message index; the
    input is never changed.
    """
    policy = Policy.load(policy)
    validate_chat_messages(check_chat_messages(messages))
    if isinstance(overhead, bool) or not isinstance(overhead, int) or overhead < 0:
        raise ConfigError(f"overhead must be a non-negative integer, got {overhead!r}",
                          column="message_overhead")  # fmt: skip
    rows = read_chat(messages)
    chosen = rows.pruned(_Options(policy, method, overhead))
    tool = rows.table.column("tool").to_pylist()
    inputs = rows.table.column("input").to_pylist()
    call_ids = rows.table.column("part_id").to_pylist()  # a tool part's: its call id
    results: dict[int, list[int]] = {}  # chat index -> the tool rows whose result it holds
    for row, at in rows.result_at.items():
        results.setdefault(at, []).append(row)
    inputs_cleared: dict[int, set[str]] = {}  # chat index -> the calls whose input is cleared
    if policy.clear_inputs:
        for row in chosen:
            inputs_cleared.setdefault(rows.message_at[row], set()).add(call_ids[row])
    chosen_rows = set(chosen)
    out: list[dict[str, Any]] = []
    cleared: list[str] = []
    steps = sum(1 for m in messages if m.get("role") == "assistant")
    for i, raw in enumerate(messages):
        message = dict(raw)
        if message.get("role") == "assistant":
            steps -= 1  # newer assistant messages than this one
            if steps >= policy.keep_thinking:
                message.pop("reasoning_content", None)  # older thinking is cleared
        if (ids := inputs_cleared.get(i)) is not None:
            _clear_inputs(message, ids)
        for row in sorted(results.get(i, ())):
            call_id = call_ids[row]
            j = result_block(raw, call_id)  # None: a tool message, its content the result
            holder = raw if j is None else raw["content"][j]
            text = content_text(holder.get("content"))
            new: str | None = None
            if row in chosen_rows:
                cleared.append(call_id)
                new = _core.cleared_placeholder(
                    tool[row] or "", inputs[row], text, call_id,
                    describe=policy.placeholder == "describe",
                )  # fmt: skip
            elif (
                policy.truncate_output is not None
                and holder.get("pinned") is not True
                and raw.get("pinned") is not True
                and not is_cleared(text)
            ):
                cut = _core.truncate_output(text, policy.truncate_output)
                new = cut if cut != text else None
            if new is None:
                continue
            if j is None:
                message["content"] = new
            else:  # the block rewritten in place, its tool_use_id and keys kept
                blocks = list(message["content"])
                blocks[j] = {**holder, "content": new}
                message["content"] = blocks
        out.append(message)
    before = rows.counts(method=method, overhead=overhead)
    after = rows.counts(chosen, policy.render_options(), method=method, overhead=overhead)
    return ChatMask(out, cleared, sum(before), sum(after), before, after)


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
    (``mask_chat_messages``: an Anthropic turn's blocks as the ``anthropic``
    format reads them). Returns new message dicts; the input is not changed.
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
