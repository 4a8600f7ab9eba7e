"""OpenAI Responses API items: ``message``, ``function_call``,
``function_call_output``, ``reasoning`` (and the short ``{role, content}`` form).

One canonical message per item, in order: messages keep their role and text
blocks, a ``function_call`` is an assistant tool part, a ``reasoning`` item a
reasoning part (its summary texts; ``encrypted_content`` kept), and a
``function_call_output`` completes the tool part of its ``call_id`` and stays
in place as a ``tool-result`` part so the item list is written back exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxcompact.errors import FormatError
from ctxcompact.formats.chat import SWE_AGENT_KEY, call_state
from ctxcompact.formats.jsonl import json_kind
from ctxcompact.formats.source import (
    image_block,
    message_owner,
    pydantic_ai_record,
    source_dict,
)
from ctxcompact.formats.usage import openai_usage
from ctxcompact.formats.views import View, viewed
from ctxcompact.models import MessageWithParts, Part, Session, SessionInfo
from ctxcompact.policy import Policy

#: The message role of each item role (a developer message is a system one).
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def _blocks(mid: str, content: Any) -> list[Part]:
    if isinstance(content, str):
        return [Part(id=f"{mid}-p00", type="text", text=content)]
    parts = []
    for j, block in enumerate(content or []):
        rest = {k: v for k, v in block.items() if k != "text"}
        if "text" in block:
            parts.append(Part(id=f"{mid}-p{j:02d}", type="text", text=block["text"], source=rest))
        else:
            parts.append(Part(id=f"{mid}-p{j:02d}", type="file", source=block))
    return parts


KINDS = ("message", "function_call", "function_call_output", "reasoning")

#: Output items the API runs itself (hosted tools), which
#: ``live.from_openai_response`` keeps as parts of their own type.
SERVER_ITEMS = (
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
)


def _check_items(items: Sequence[Any], session_id: str) -> None:
    """Items of another format are refused: each is an object with a ``type``
    string or a ``role``, and one at least is an item this reader maps
    (unknown item types are kept, so the type alone proves nothing)."""
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise FormatError(f"item {i} is not an object", row=i, session_id=session_id)
        if not isinstance(item.get("type"), str) and "role" not in item:
            raise FormatError(f"not an OpenAI Responses item: item {i} has no 'type' or 'role'",
                              row=i, session_id=session_id)  # fmt: skip
    if items and not any(i.get("type", "message" if "role" in i else None) in KINDS
                         for i in items):  # fmt: skip
        raise FormatError("not OpenAI Responses input: no item is a message, function_call, "
                          "function_call_output or reasoning", session_id=session_id)  # fmt: skip


def from_openai_responses(
    items: Sequence[Mapping[str, Any]], session_id: str = "session"
) -> Session:
    _check_items(items, session_id)
    out: list[MessageWithParts] = []
    calls: dict[str, Part] = {}
    for i, item in enumerate(items):
        mid = f"{session_id}-i{i:06d}"
        kind = item.get("type", "message" if "role" in item else None)
        try:  # a logged reply's usage on an item of it, kept in the item too
            usage = openai_usage(item.get("usage"), f"item {i}: usage", "responses")
        except FormatError as e:
            raise FormatError(str(e), row=i, session_id=session_id, message_id=mid) from None
        tokens = {"tokens": usage} if usage else {}  # unset when none (not set to null)
        if kind == "message":
            role = item.get("role")
            if role not in _ROLES:
                raise FormatError(f"item {i} has an unknown role {role!r}", row=i,
                                  column="role", session_id=session_id)  # fmt: skip
            rest = {k: v for k, v in item.items() if k != "content"}
            rest["content_is_text"] = isinstance(item.get("content"), str)
            try:
                parts = _blocks(mid, item.get("content"))
            except (TypeError, AttributeError):
                got = json_kind(item.get("content"))
                raise FormatError(f"item {i}: content must be a string or a list of blocks "
                                  f"(objects), got {got}", row=i,
                                  session_id=session_id) from None  # fmt: skip
            mine = tokens if _ROLES[role] == "assistant" else {}
            out.append(MessageWithParts.of(_ROLES[role], mid, session_id, parts, source=rest,
                                           **mine))  # fmt: skip
        elif kind == "function_call":
            # a falsy value is no arguments, as in the native reader
            state = call_state(item.get("arguments") or None)
            call = Part(id=f"{mid}-t00", type="tool", tool=item.get("name"),
                        callID=item.get("call_id"), state=state, source=dict(item))  # fmt: skip
            calls[str(item.get("call_id"))] = call
            out.append(MessageWithParts.of("assistant", mid, session_id, [call], **tokens))
        elif kind == "function_call_output":
            done = calls.get(str(item.get("call_id")))
            output = item.get("output")
            text = output if isinstance(output, str) else json.dumps(output)
            if done is not None and done.state is not None:
                done.state.status, done.state.output = "completed", text
            result = Part(id=f"{mid}-p00", type="tool-result", callID=item.get("call_id"),
                          source=dict(item))  # fmt: skip
            out.append(MessageWithParts.of("user", mid, session_id, [result]))
        elif kind == "reasoning":
            summary = "\n".join(s.get("text", "") for s in item.get("summary") or [])
            thought = Part(id=f"{mid}-p00", type="reasoning", text=summary, source=dict(item))
            out.append(MessageWithParts.of("assistant", mid, session_id, [thought], **tokens))
        else:
            # An item type this version does not know: kept, not sent to models.
            out.append(MessageWithParts.of("system", mid, session_id, source={"raw": dict(item)}))
    return Session(info=SessionInfo(id=session_id), messages=out)


def to_openai_responses(
    session: Session, *, view: View = "full", policy: Policy | None = None
) -> list[dict[str, Any]]:
    """Responses input items of ``session``; ``view="model"``: what the model is
    sent (placeholders, from the latest compaction on; ``formats.views``)."""
    session = viewed(session, view, policy)
    items: list[dict[str, Any]] = []
    for message in session.messages:
        source = source_dict(message.info)
        if "raw" in source:
            items.append(source["raw"])
            continue
        source.pop(SWE_AGENT_KEY, None)  # SWE-agent's own record, no key of an item
        if message_owner(source) == "pydantic-ai":
            source = {}  # a pydantic-ai message's kind, timestamp, usage... are no item keys
        if message.role == "user" and source.get("role") == "tool":
            # a chat tool result with no call before it: Responses has no tool
            # role, so it is the output item of its call id (read back as one)
            content = source.get("content")
            output = content if isinstance(content, str) else json.dumps(content)
            items.append({"type": "function_call_output", "call_id": source.get("tool_call_id"),
                          "output": "" if content is None else output})  # fmt: skip
            continue
        parts = message.parts
        if (
            len(parts) == 1
            and parts[0].type in ("tool", "tool-result", "reasoning")
            and _source(parts[0]).get("type") in KINDS
        ):  # an item read from Responses, as it was (a source kept by another
            # format, e.g. chat's raw "arguments", is no Responses item)
            items.append(_source(parts[0]))
            continue
        # A message item read from Responses is written as it was (the short
        # {role, content} form too); any other is a typed "message" item, as
        # the API writes them and as detection tells them from chat messages.
        read = "role" in source and "content_is_text" in source
        head = {} if read else {"type": "message"}
        as_text = source.pop("content_is_text", False)
        role = source.get("role") or message.role
        if as_text and len(parts) == 1:
            items.append({**head, **source, "role": role, "content": parts[0].text})
            continue
        # Parts a Responses message cannot hold (tool calls and reasoning of a
        # converted session) follow it as items of their own.
        blocks = [p for p in parts if p.type in ("text", "file")]
        if blocks or not parts:
            content = [_block(p, role) for p in blocks]
            items.append({**head, **source, "role": role, "content": content})
        for p in parts:
            if p.type not in ("text", "file"):
                items += _items_of(p)
    return items


def _source(part: Part) -> dict[str, Any]:
    return source_dict(part)


def _block(part: Part, role: str) -> dict[str, Any]:
    source = _source(part)
    if part.type == "text":
        # a Responses block kept without its text (or another block with a
        # type); a chat or Anthropic text block's keys, a pydantic-ai part, are none
        kind = "output_text" if role == "assistant" else "input_text"
        own = "type" in source and not pydantic_ai_record(source)
        return {**(source if own else {"type": kind}), "text": part.text}
    if source.get("type") in ("image_url", "image"):  # a chat or an Anthropic image
        return image_block(
            part, lambda url: {"type": "input_image", "image_url": url}, "input_text"
        )
    if source:
        return source
    if part.url and (part.mime or "").startswith("image/"):  # an image built elsewhere
        return {"type": "input_image", "image_url": part.url}
    file = {"type": "input_file", "file_url": part.url, "filename": part.filename}
    return {k: v for k, v in file.items() if v is not None}


def _items_of(part: Part) -> list[dict[str, Any]]:
    """A tool call (and its output, once it has one) or a reasoning summary; other
    part types (step markers, patches, ...) have no Responses item."""
    if part.type == "reasoning":
        return [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": part.text or ""}]}
        ]
    source = _source(part)
    if part.type != "tool":
        # an item the API ran itself, kept by from_openai_response: as it was
        return [source] if part.type in SERVER_ITEMS and source.get("type") == part.type else []
    state = part.state
    if source.get("type") == "custom_tool_call" and source.get("call_id") == part.callID:
        # a freeform tool's call, read by from_openai_response: its text is input["input"]
        given = (state.input if state else None) or {}
        text = given.get("input")
        custom: list[dict[str, Any]] = [
            {**source, "input": text if isinstance(text, str) else json.dumps(given)}
        ]
        if state is not None and state.status in ("completed", "error"):
            body = state.output if state.status == "completed" else state.error
            custom.append({"type": "custom_tool_call_output", "call_id": part.callID,
                           "output": body or ""})  # fmt: skip
        return custom
    arguments = json.dumps((state.input if state else None) or {})
    out: list[dict[str, Any]] = [{"type": "function_call", "call_id": part.callID or part.id,
                                  "name": part.tool, "arguments": arguments}]  # fmt: skip
    if state is not None and state.status in ("completed", "error"):
        body = state.output if state.status == "completed" else state.error
        out.append(
            {
                "type": "function_call_output",
                "call_id": part.callID or part.id,
                "output": body or "",
            }
        )
    return out


__all__ = ["from_openai_responses", "to_openai_responses"]
