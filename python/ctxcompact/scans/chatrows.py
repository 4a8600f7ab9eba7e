"""A chat list as the engine reads it: its fates and counts from the core.

A chat list (what a runtime or a framework integration holds: OpenAI chat
messages, whose content may also be Anthropic content blocks) is read once
by the core's chat mapper in its chat-list mode (``_core.chat_rows``,
rust/src/ingest/chat.rs ``chat_list``) into a one-session part-row table,
the table a stored session of the same history gives (an Anthropic turn's
blocks read as the ``anthropic`` format reads them: a ``tool_use`` block a
tool part, a ``tool_result`` block its result). The policy's prune (prune.rs)
chooses the tool results to clear, and the per-message estimates
(messages.rs, ``sent_messages``: one count per model message, so one per
chat message) size the list before and after: a chat list gets the fates
and counts the same history gets stored as a session. Python only maps the
answers back to the chat list's indices.

Two marks the chat list carries and a stored session holds in its columns
are set on the table: a tool message (or a ``tool_result`` block, or the
message holding it) with ``"pinned": true`` is a pinned part, and a result
already cleared by an earlier round (its text starts with the placeholder's
prefix) a compacted one, so a second round is idempotent.
A tool part's id is its call id (what a described placeholder names: the
chat list knows calls by it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

import ctxcompact._core as _core
from ctxcompact.errors import FormatError
from ctxcompact.scans.chat import result_blocks
from ctxcompact.scans.content import check_chat_messages, content_text
from ctxcompact.scans.estimate import EstimateMethod
from ctxcompact.scans.view import CLEARED_TOOL_OUTPUT

#: What every placeholder starts with (OpenCode's, and the described one).
_CLEARED_PREFIX = CLEARED_TOOL_OUTPUT[:-1]
#: The key a tool message is tagged with on its way to the mapper: the
#: mapper keeps it with the result (``result_source``), naming the chat
#: index of the result its own pairing chose; the mapper's chat-list mode
#: puts a ``tool_result`` block's chat index under the same key
#: (rust/src/ingest/chat.rs ``AT``).
_AT = "ctxcompact_at"
_SESSION = "chat"
#: ``sent_messages``' kinds: the message itself, a ``tool`` result.
_MESSAGE, _RESULT = 0, 1


def is_cleared(text: str) -> bool:
    """The text is a placeholder a policy left (OpenCode's or the described one)."""
    return text.startswith(_CLEARED_PREFIX)


@dataclass(frozen=True)
class ChatRows:
    """A chat list read by the core's chat mapper, with where each row came from."""

    #: The part rows (one session), pinned parts marked, ids the call ids.
    table: pa.Table
    #: How many chat messages the list holds.
    size: int
    #: The chat index of each row's message (a tool part: its call's message).
    message_at: list[int]
    #: Tool part row -> the chat index of the message holding its result (a
    #: ``tool`` message, or a user turn with its ``tool_result`` block).
    result_at: dict[int, int]
    #: Tool part rows whose result an earlier round cleared.
    cleared_before: list[int]

    def counts(self, marked: Sequence[int] = (), render: Mapping[str, Any] | None = None, *,
               method: str, overhead: int) -> list[int]:  # fmt: skip
        """Per chat message, its estimate as sent (``sent_messages``) with the
        tool parts at ``marked`` rows compacted and the policy's ``render``
        options (placeholders, cut outputs, cleared inputs). A message the
        model is not sent (nothing to send) counts 0, as in a stored session."""
        table = self.table
        if marked:
            column = _core.mark_rows(table.column("compacted_at"),
                                     pa.array(sorted(marked), pa.uint64()), 1)  # fmt: skip
            table = table.set_column(table.schema.get_field_index("compacted_at"),
                                     "compacted_at", column)  # fmt: skip
        rows, tokens, kinds, _ = _core.sent_messages(
            table, method=method, overhead=overhead, **(render or {})
        )
        out = [0] * self.size
        for row, count, kind in zip(rows.to_pylist(), tokens.to_pylist(), kinds.to_pylist(),
                                    strict=True):  # fmt: skip
            at = self.message_at[row] if kind == _MESSAGE else self.result_at.get(row)
            if at is not None:  # an unanswered call's interrupted result is not in the list
                out[at] += count
        return out

    def pruned(self, config: Any) -> list[int]:
        """The rows of the tool parts the policy clears (``prune`` over the
        table, the results earlier rounds cleared counted as compacted)."""
        from ctxcompact.scans.parts import prune

        table = self.table
        if self.cleared_before:
            column = _core.mark_rows(table.column("compacted_at"),
                                     pa.array(self.cleared_before, pa.uint64()), 1)  # fmt: skip
            table = table.set_column(table.schema.get_field_index("compacted_at"),
                                     "compacted_at", column)  # fmt: skip
        return [int(r) for r in prune(table, config).rows.to_pylist()]


def result_block(message: Mapping[str, Any], call_id: str) -> int | None:
    """The index of the ``tool_result`` block of ``call_id`` in an Anthropic
    turn's content (the first, as the mapper pairs), else None (a ``tool``
    message: its content is the result)."""
    return next((j for j, cid in result_blocks(message) if cid == call_id), None)


def result_of(message: Mapping[str, Any], call_id: str) -> Mapping[str, Any]:
    """What holds the result of ``call_id`` in ``message`` (its chat index
    is the row's ``result_at``): the ``tool`` message, or its ``tool_result``
    block (its ``content``, its ``pinned`` mark)."""
    j = result_block(message, call_id)
    return message if j is None else message["content"][j]


def chat_counts(
    messages: Sequence[Mapping[str, Any]], *, method: EstimateMethod = "opencode",
    overhead: int = 4,
) -> list[int]:  # fmt: skip
    """Per message, its estimate as the engine counts it: the list read by
    the chat mapper as a stored session is, each chat message its model
    message's count (``ChatRows.counts``; a custom call its name and its
    input ``{"input": text}`` as compact JSON, as stored; an Anthropic
    turn's blocks as the same turn stored in the ``anthropic`` format: a
    ``tool_result`` block's count at the turn holding it). A message the
    mapper cannot read is its ``FormatError``."""
    check_chat_messages(messages)
    # One core call from the list's bytes to its counts (rust/src/chatlist.rs):
    # ``read_chat(messages).counts(...)`` without the table crossing over.
    # a message the core cannot read: "chat list, message N: ...", ``row`` N
    return _core.chat_counts(_chat_json(messages), len(messages), session=_SESSION,
                             method=str(method), overhead=overhead)  # fmt: skip


def _chat_json(messages: Sequence[Mapping[str, Any]]) -> bytes:
    """The list as the chat mapper reads it: one session, each ``tool``
    message tagged with its index (``_AT``), no message's own ``id`` (the
    rows name each message by its index, so ids given twice cannot merge two
    messages). The binding writes a list of plain JSON values itself (no
    ``json.dumps``: python/chat_json.rs); a list holding anything else is
    written here."""
    data = _core.chat_list_json(messages, session=_SESSION)
    return _dumps_json(messages) if data is None else data


def _dumps_json(messages: Sequence[Mapping[str, Any]]) -> bytes:
    """``_chat_json`` by ``json.dumps`` (any value it writes: a subclass, an
    object as its ``str``); a lone surrogate is refused naming the message."""
    tagged: list[Mapping[str, Any]] = []
    for i, message in enumerate(messages):
        if type(message) is dict and "id" not in message and message.get("role") != "tool":
            tagged.append(message)  # serialized as it is: no copy
            continue
        copy = {k: v for k, v in message.items() if k != "id"}
        if copy.get("role") == "tool":
            copy[_AT] = i
        tagged.append(copy)
    # a key the rows do not read may hold what JSON cannot: its str() is kept
    text = json.dumps({"id": _SESSION, "messages": tagged}, ensure_ascii=False, default=str)
    try:
        return text.encode()
    except UnicodeEncodeError as e:
        # A lone surrogate (a str decoded from JSON may hold one): no UTF-8 holds it,
        # as the core's reader refuses one in a chat list file.
        at = next(i for i, m in enumerate(tagged) if not _encodes(m))
        raise FormatError(
            f"chat message {at} holds a lone surrogate ({e.reason}), which UTF-8 cannot "
            "hold; fix the text (e.g. decode with errors='replace')",
            row=at,
        ) from None


def _encodes(message: Mapping[str, Any]) -> bool:
    """``message`` as ``_chat_json`` writes it is UTF-8 (no lone surrogate)."""
    try:
        json.dumps(message, ensure_ascii=False, default=str).encode()
    except UnicodeEncodeError:
        return False
    return True


def read_chat(messages: Sequence[Mapping[str, Any]]) -> ChatRows:
    """``messages`` (a checked chat list) read by the core's chat mapper.

    A message the mapper cannot read (an unknown or malformed Anthropic
    block...) is its ``FormatError``, naming the message and the block."""
    data = _chat_json(messages)
    raw, _rejected, _lines, _sessions = _core.chat_rows(data)
    table = pa.table(raw)
    prefix = len(_SESSION) + 2  # "chat-m000012" -> 12
    message_at = [-1 if m is None else int(m[prefix:])
                  for m in table.column("message_id").to_pylist()]  # fmt: skip
    result_at: dict[int, int] = {}
    cleared: list[int] = []
    types = table.column("part_type").to_pylist()
    part_json = table.column("part_json").to_pylist()
    part_ids = table.column("part_id").to_pylist()
    rewritten = {"part_id": part_ids}  # and part_json when a result is pinned
    for row, kind in enumerate(types):
        if kind != "tool":
            continue
        part = json.loads(part_json[row])
        part_ids[row] = str(part.get("callID"))
        at = (part.get("result_source") or {}).get(_AT)
        if not isinstance(at, int):
            continue  # no result answered this call
        result_at[row] = at
        result = result_of(messages[at], part_ids[row])
        if result.get("pinned") is True or messages[at].get("pinned") is True:
            part_json[row] = json.dumps({**part, "pinned": True}, ensure_ascii=False)
            rewritten["part_json"] = part_json
        if is_cleared(content_text(result.get("content"))):
            cleared.append(row)
    for name, values in rewritten.items():
        index = table.schema.get_field_index(name)
        table = table.set_column(index, table.schema.field(index),
                                 pa.array(values, table.schema.field(index).type))  # fmt: skip
    return ChatRows(table, len(messages), message_at, result_at, cleared)


__all__ = ["ChatRows", "chat_counts", "is_cleared", "read_chat", "result_block", "result_of"]
