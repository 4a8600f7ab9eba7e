"""A (pivot-filtered, pruned) session as the messages a model receives.

The placeholder strings are protocol constants that other runtimes read,
shared with the Rust estimator (``_core``) so estimates and the real model
input agree.
"""

from __future__ import annotations

import json
from typing import Any

from ctxcompact import _core
from ctxcompact.models import AssistantMessage, MessageWithParts, Part, Session, SystemMessage

CLEARED_TOOL_OUTPUT = _core.CLEARED_TOOL_OUTPUT  # "[Old tool result content cleared]"
INTERRUPTED_TOOL = _core.INTERRUPTED_TOOL  # "[Tool execution was interrupted]"
COMPACTION_QUESTION = _core.COMPACTION_QUESTION  # "What did we do so far?"


def tool_result_text(part: Part) -> str:
    """What the model sees as the result of a tool part."""
    state = part.state
    if state is None or state.status in ("pending", "running"):
        return INTERRUPTED_TOOL
    if part.compacted:
        return CLEARED_TOOL_OUTPUT
    if state.status == "error":
        return state.error or ""
    return state.output or ""


def tool_arguments(part: Part) -> str:
    """A tool call's arguments as sent: compact JSON, non-ASCII kept (the ``input``
    column of the part-row table holds the same string, so the batch estimate reads it
    as stored)."""
    arguments = (part.state.input if part.state else None) or {}
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def _user_content(message: MessageWithParts) -> str | list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if part.type == "text" and not part.ignored and part.text:
            blocks.append({"type": "text", "text": part.text})
        elif part.type == "compaction":
            blocks.append({"type": "text", "text": COMPACTION_QUESTION})
        elif part.type == "file":
            if (part.mime or "").startswith("image/") and part.url:
                blocks.append({"type": "image_url", "image_url": {"url": part.url}})
            else:
                name = part.filename or part.url or "file"
                blocks.append({"type": "text", "text": f"[file: {name} ({part.mime})]"})
    if all(b["type"] == "text" for b in blocks):
        return "\n\n".join(b["text"] for b in blocks)
    return blocks


def _assistant(message: MessageWithParts) -> list[dict[str, Any]]:
    texts = [p.text for p in message.parts if p.type == "text" and not p.ignored and p.text]
    tools = [p for p in message.parts if p.type == "tool"]
    out: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
    if tools:
        out["tool_calls"] = [
            {
                "id": p.callID or p.id,
                "type": "function",
                "function": {
                    "name": p.tool or "",
                    "arguments": tool_arguments(p),
                },
            }
            for p in tools
        ]
    if out["content"] is None and not tools:
        return []
    # Every call is followed by its result, so no call is ever left without one.
    results = [
        {"role": "tool", "tool_call_id": p.callID or p.id, "content": tool_result_text(p)}
        for p in tools
    ]
    return [out, *results]


def to_model_messages(session: Session, *, system: str | None = None) -> list[dict[str, Any]]:
    """OpenAI Chat Completions messages for ``session`` with the placeholder rules applied.

    Pass the output of ``filter_pivot`` to send only what follows the latest
    compaction. Reasoning, step markers and ignored text are not sent.
    """
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    for message in session.messages:
        if isinstance(message.info, AssistantMessage):
            messages.extend(_assistant(message))
        elif isinstance(message.info, SystemMessage):
            text = "\n\n".join(p.text for p in message.parts if p.type == "text" and p.text)
            if text:
                messages.append({"role": "system", "content": text})
        else:
            content = _user_content(message)
            if content:
                messages.append({"role": "user", "content": content})
    return messages
