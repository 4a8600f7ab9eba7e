"""Anthropic Messages content blocks, and Claude Code session JSONL built on them.

Blocks map to parts in order: ``text`` -> text, ``thinking`` /
``redacted_thinking`` -> reasoning (signature kept), ``tool_use`` -> a tool
part, ``image`` -> file. A ``tool_result`` block completes the tool part of
its ``tool_use_id`` (``is_error`` -> status error) and also stays in its user
turn as a ``tool-result`` part (a foreign part type the scans skip), so the
turn is written back exactly as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxcompact.errors import FormatError
from ctxcompact.formats.chat import CHAT_KEYS, SWE_AGENT_KEY
from ctxcompact.formats.jsonl import json_kind
from ctxcompact.formats.responses import SERVER_ITEMS
from ctxcompact.formats.source import (
    data_url,
    image_block,
    message_owner,
    session_record,
    source_dict,
    source_of,
    split_data_url,
    text_record,
)
from ctxcompact.formats.views import View, viewed
from ctxcompact.models import MessageWithParts, Part, Session, SessionInfo, TokenUsage, ToolState
from ctxcompact.policy import Policy


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) if isinstance(b, Mapping) else str(b) for b in content
        )
    return "" if content is None else json.dumps(content)


def _parts(mid: str, content: Any, calls: dict[str, Part], first: int = 0) -> list[Part]:
    """The parts of a message's content, numbered from ``first`` (the parts the
    message already has)."""
    if isinstance(content, str):
        return [Part(id=f"{mid}-p{first:02d}", type="text", text=content)]
    parts = []
    for j, block in enumerate(content or [], first):
        pid = f"{mid}-p{j:02d}"
        if not isinstance(block, Mapping):
            parts.append(Part(id=pid, type="unknown", source={"raw": block}))
            continue
        kind = block.get("type")
        rest = {k: v for k, v in block.items() if k not in ("type", "text", "thinking")}
        if kind == "text":
            parts.append(Part(id=pid, type="text", text=block.get("text", ""),
                              **({"source": rest} if rest else {})))  # fmt: skip
        elif kind in ("thinking", "redacted_thinking"):
            parts.append(Part(id=pid, type="reasoning", text=block.get("thinking", ""),
                              source={"type": kind, **rest}))  # fmt: skip
        elif kind == "tool_use":
            part = Part(id=pid, type="tool", tool=block.get("name"), callID=block.get("id"),
                        state=ToolState(status="pending", input=block.get("input") or {}),
                        source=block)  # fmt: skip
            calls[str(block.get("id"))] = part
            parts.append(part)
        elif kind == "tool_result":
            call = calls.get(str(block.get("tool_use_id")))
            if call is not None and call.state is not None:
                text = _result_text(block.get("content"))
                if block.get("is_error"):
                    call.state.status, call.state.error = "error", text
                else:
                    call.state.status, call.state.output = "completed", text
            parts.append(Part(id=pid, type="tool-result", callID=block.get("tool_use_id"),
                              source=block))  # fmt: skip
        elif kind == "image":
            source = block.get("source") or {}
            media = source.get("media_type")
            # the image's URL on the part (base64 data as a data: URL), so the
            # model view sends an image block and the estimates count an image
            url = None
            if source.get("type") == "base64" and isinstance(source.get("data"), str):
                url = data_url(media, source["data"])
            elif source.get("type") == "url" and isinstance(source.get("url"), str):
                url = source["url"]
            # an image block is an image even when it names no media type
            parts.append(Part(id=pid, type="file", mime=media or "image/*", source=block,
                              **({"url": url} if url is not None else {})))  # fmt: skip
        else:
            parts.append(Part(id=pid, type=str(kind or "unknown"), source=block))
    return parts


def _blocks(message: MessageWithParts) -> list[dict[str, Any]]:
    out = []
    for p in message.parts:
        source = source_dict(p)
        if p.type == "text":
            # an Anthropic text block's source holds its other keys (cache_control,
            # citations); another format's record (a Responses input_text kept
            # without its text, a chat refusal or text block's keys, a pydantic-ai
            # part) is none of them: the text goes in a plain text block
            out.append({"type": "text", "text": p.text or "", **text_record(p, "anthropic")})
        elif p.type == "reasoning":
            kind = source.pop("type", "thinking")
            block = {"type": kind, **({"thinking": p.text or ""} if kind == "thinking" else {})}
            out.append({**block, **source})
        elif p.type == "tool" and not _from_anthropic(p):
            out.append({"type": "tool_use", "id": p.callID or p.id, "name": p.tool,
                        "input": (p.state.input if p.state else None) or {}})  # fmt: skip
        elif p.type == "file" and source.get("type") in ("image_url", "input_image"):
            out.append(_image(p))  # a chat or a Responses image
        elif p.type in SERVER_ITEMS and source.get("type") == p.type:
            pass  # a Responses hosted tool's item (live.from_openai_response): no block
        elif source:
            out.append(source["raw"] if set(source) == {"raw"} else source)
        elif p.type == "file" and p.url:  # a file part built elsewhere: a data: URL as
            out.append(_image(p))  # base64 data (url sources must be http(s)), else by URL
        # other parts built elsewhere (step markers, patches...) have no block
    return out


def _usage(usage: Any) -> TokenUsage | None:
    if not isinstance(usage, Mapping):
        return None
    return TokenUsage.model_validate({
        "input": usage.get("input_tokens") or 0, "output": usage.get("output_tokens") or 0,
        "cache": {"read": usage.get("cache_read_input_tokens") or 0,
                  "write": usage.get("cache_creation_input_tokens") or 0},
    })  # fmt: skip


def _refuse_orphans(where: str, content: Any, calls: Mapping[str, Part], row: int | None,
                    session_id: str, message_id: str) -> None:  # fmt: skip
    """Raise for a ``tool_result`` block of ``content`` whose call no earlier
    ``tool_use`` made (in ``calls`` or before it in ``content``): it would be
    counted nowhere (the native reader refuses it the same way)."""
    made = set(calls)
    for j, block in enumerate(content if isinstance(content, list) else []):
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "tool_use":
            made.add(str(block.get("id")))
        elif block.get("type") == "tool_result" and str(block.get("tool_use_id")) not in made:
            raise FormatError(
                f"{where} content[{j}] holds the tool_result of tool_use_id "
                f"{json.dumps(str(block.get('tool_use_id')))}, which no earlier message called",
                row=row, session_id=session_id, message_id=message_id,
            )  # fmt: skip


def from_anthropic(request: Mapping[str, Any], session_id: str = "session") -> Session:
    """A session from a Messages API request body: ``{"system"?, "messages": [...]}``."""
    if not isinstance(request, Mapping):
        raise FormatError(f"an Anthropic request must be an object, got {json_kind(request)}",
                          session_id=session_id)  # fmt: skip
    messages = request.get("messages")
    if not isinstance(messages, list):
        raise FormatError("an Anthropic request needs a 'messages' list", session_id=session_id)
    out: list[MessageWithParts] = []
    calls: dict[str, Part] = {}
    system = request.get("system")
    if system is not None:
        sid = f"{session_id}-system"
        _refuse_orphans("system", system, calls, None, session_id, sid)
        parts = _parts(sid, system, calls)
        out.append(MessageWithParts.of("system", sid, session_id, parts))
    for i, m in enumerate(messages):
        mid = f"{session_id}-m{i:06d}"
        if not isinstance(m, Mapping) or m.get("role") not in ("user", "assistant"):
            raise FormatError(f"message {i} is not a user or assistant turn", row=i,
                              session_id=session_id)  # fmt: skip
        if not isinstance(m.get("content"), str | list):
            got = json_kind(m.get("content"))
            raise FormatError(f"message {i} content must be a list of blocks or a string, got "
                              f"{got}", row=i, session_id=session_id)  # fmt: skip
        _refuse_orphans(f"message {i}", m.get("content"), calls, i, session_id, mid)
        rest = {k: v for k, v in m.items() if k not in ("role", "content")}
        if isinstance(m.get("content"), str):
            rest["content_is_text"] = True
        parts = _parts(mid, m.get("content"), calls)
        out.append(MessageWithParts.of(m["role"], mid, session_id, parts,
                                       **({"source": rest} if rest else {})))  # fmt: skip
    rest = {k: v for k, v in request.items() if k not in ("system", "messages")}
    return Session(info=SessionInfo(id=session_id, **({"source": rest} if rest else {})),
                   messages=out)  # fmt: skip


def _content(message: MessageWithParts, as_text: bool) -> Any:
    """A turn's (or the system prompt's) content: its one text block as a
    string when ``as_text``, unless the block holds more than its text (a
    system prompt's ``cache_control`` was lost in an Anthropic round trip)."""
    blocks = _blocks(message)
    if as_text and len(blocks) == 1 and set(blocks[0]) == {"type", "text"} \
            and blocks[0]["type"] == "text":  # fmt: skip
        return blocks[0]["text"]
    return blocks


def _joined(first: Any, second: Any) -> Any:
    """Two system prompts (a text or a list of blocks each) as one."""
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}\n\n{second}"

    def blocks(v: Any) -> list[Any]:
        return [{"type": "text", "text": v}] if isinstance(v, str) else list(v)

    return blocks(first) + blocks(second)


def _image(part: Part) -> dict[str, Any]:
    """An Anthropic image block for an image read from another format: a ``data:``
    URL as base64 data, another URL by reference, else a text naming it."""
    return image_block(part, _image_at)


def _image_at(url: str) -> dict[str, Any]:
    inline = split_data_url(url)
    if inline is not None:
        media_type, data = inline
        return {"type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": data}}  # fmt: skip
    return {"type": "image", "source": {"type": "url", "url": url}}


def _from_anthropic(part: Part) -> bool:
    """A tool part read from a ``tool_use`` block (its source is that block, the
    call's id in it; a source kept by another format, e.g. chat's raw
    ``arguments``, is not, nor is the ``type: tool_use`` with ``name`` / ``input``
    that older versions wrote into chat tool calls: the chat reader keeps those
    keys without the id, and the block written from them had no id and lost its
    result)."""
    source = source_of(part)
    return (
        isinstance(source, Mapping)
        and source.get("type") == "tool_use"
        and source.get("id") == part.callID
    )


def _foreign_result(part: Part) -> bool:
    """A tool result kept in a turn of its own by another format (a Responses
    ``function_call_output``), not an Anthropic ``tool_result`` block."""
    source = source_of(part)
    return part.type == "tool-result" and not (
        isinstance(source, Mapping) and source.get("type") == "tool_result"
    )


def _results(message: MessageWithParts) -> list[dict[str, Any]]:
    """``tool_result`` blocks for the finished calls of a message built elsewhere
    (one read from Anthropic has its results in its next user turn already)."""
    out = []
    for p in message.parts:
        state = p.state
        if p.type != "tool" or _from_anthropic(p) or state is None:
            continue
        if state.status in ("completed", "error"):
            failed = state.status == "error"
            block = {"type": "tool_result", "tool_use_id": p.callID or p.id,
                     "content": (state.error if failed else state.output) or ""}  # fmt: skip
            out.append({**block, "is_error": True} if failed else block)
    return out


#: Records the chat reader keeps beside a message's chat keys (SWE-agent's
#: agent keys, LangChain's fields): no keys of an Anthropic turn.
_CHAT_RECORDS = (SWE_AGENT_KEY, "langchain")


def to_anthropic(
    session: Session, *, view: View = "full", policy: Policy | None = None
) -> dict[str, Any]:
    """An Anthropic Messages request body of ``session``; ``view="model"``: what
    the model is sent (placeholders, from the latest compaction on; ``formats.views``)."""
    session = viewed(session, view, policy)
    body: dict[str, Any] = session_record(session.info, "anthropic")
    messages = []
    for message in session.messages:
        if message.role == "system":
            system = _content(message, True)
            if system in ("", []):
                continue  # nothing the model reads (a Claude Code title or file snapshot)
            if "system" in body:  # several system messages: one system prompt, in order
                system = _joined(body["system"], system)
            body["system"] = system
            continue
        if message.parts and all(_foreign_result(p) for p in message.parts):
            continue  # a turn of another format's results: `_results` wrote each after its call
        rest = source_dict(message.info)
        owner = message_owner(rest)
        as_text = bool(rest.pop("content_is_text", False))
        # a turn keeps its own other keys only: a Responses item's (type, id,
        # status...) and a pydantic-ai message's (kind, timestamp, usage...) are
        # none, nor are a chat message's keys (its "content": null, a "developer"
        # role, a name) or SWE-agent's and LangChain's records kept beside them
        if owner in ("openai-responses", "pydantic-ai"):
            rest = {}
        rest = {k: v for k, v in rest.items() if k not in (*CHAT_KEYS, *_CHAT_RECORDS)}
        messages.append({"role": message.role, "content": _content(message, as_text), **rest})
        results = _results(message)
        if results:
            messages.append({"role": "user", "content": results})
    body["messages"] = messages
    return body


# --- Claude Code session JSONL ---------------------------------------------------------


def _call_id(event: Mapping[str, Any]) -> str | None:
    """The API message id of an assistant event (``message.id``, a non-empty
    string). Claude Code writes one line per content block of a model call,
    every line with the call's id (and its usage, repeated)."""
    message = event.get("message")
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return None
    call = message.get("id")
    return call if isinstance(call, str) and call else None


def from_claude_code(events: Sequence[Any], session_id: str | None = None) -> Session:
    """One message per JSONL event (``user``, ``assistant``, ``summary``, ``system``...),
    except that the lines of one model call (assistant events with the same
    ``message.id``) make one message: a later line's blocks follow the first
    line's, whose envelope (uuid, usage, stop reason) stands for the call."""
    sid = session_id or next(
        (str(e["sessionId"]) for e in events if isinstance(e, Mapping) and e.get("sessionId")),
        "claude",
    )
    out: list[MessageWithParts] = []
    calls: dict[str, Part] = {}
    used: set[str] = set()
    by_call: dict[str, MessageWithParts] = {}
    for i, event in enumerate(events):
        mid = f"{sid}-e{i:06d}"
        call_id = _call_id(event) if isinstance(event, Mapping) else None
        if call_id is not None and call_id in by_call:
            merged = by_call[call_id]
            content = event["message"].get("content")
            merged.parts.extend(_parts(merged.id, content, calls, len(merged.parts)))
            continue
        if not isinstance(event, Mapping):
            # A line that is JSON but not an event: kept as it is, never dropped.
            out.append(MessageWithParts.of("system", mid, sid, source={"raw": event}))
            continue
        if event.get("uuid") and str(event["uuid"]) not in used:
            mid = str(event["uuid"])  # a repeated uuid keeps the positional id instead
        used.add(mid)
        message = event.get("message")
        if _is_title(event):
            # a conversation's title for /resume, never sent to the model: kept
            # whole in the event, with no part (as a file-history snapshot)
            kept = {"event": dict(event), "text_key": None}
            out.append(MessageWithParts.of("system", mid, sid, source=kept))
            continue
        if not isinstance(message, Mapping):
            text = str(event.get("summary") or event.get("content") or "")
            rest = {k: v for k, v in event.items() if k not in ("summary",)}
            out.append(MessageWithParts.of(
                "system", mid, sid, [_aside_text(f"{mid}-p00", text, event)] if text else [],
                source={"event": rest, "text_key": "summary" if "summary" in event else None},
            ))  # fmt: skip
            continue
        source = {"event": {k: v for k, v in event.items() if k != "message"},
                  "message": {k: v for k, v in message.items() if k != "content"},
                  "content_is_text": isinstance(message.get("content"), str),
                  "has_content": "content" in message}  # fmt: skip
        parts = _parts(mid, message.get("content"), calls)
        if message.get("role") == "assistant":
            out.append(MessageWithParts.of(
                "assistant", mid, sid, parts, parentID=event.get("parentUuid"),
                modelID=message.get("model"), finish=message.get("stop_reason"),
                tokens=_usage(message.get("usage")), source=source,
            ))  # fmt: skip
        else:
            out.append(MessageWithParts.of("user", mid, sid, parts, source=source))
        if call_id is not None:
            by_call[call_id] = out[-1]
    return Session(info=SessionInfo(id=sid), messages=out)


def _aside_text(pid: str, text: str, event: Mapping[str, Any]) -> Part:
    """The text of an event without a message body. A ``system`` event (a hook's
    or a local command's note, an API retry, a compaction boundary) is shown to
    the user, never sent to the model: its text is kept, ``ignored``."""
    if event.get("type") == "system":
        return Part(id=pid, type="text", text=text, ignored=True)
    return Part(id=pid, type="text", text=text)


def to_claude_code(session: Session) -> list[dict[str, Any]]:
    events = []
    for message in session.messages:
        source = source_dict(message.info, claude_code=True)
        if "raw" in source:
            events.append(source["raw"])
            continue
        # A session built elsewhere names itself on every event, so that several
        # sessions written to one file read back as they were.
        made: dict[str, Any] = {"type": message.role, "uuid": message.id, "sessionId": session.id}
        # the event read is reused only when it was a Claude Code event (not an OpenHands one)
        read = source.get("event")
        if isinstance(read, Mapping) and isinstance(read.get("type"), str):
            event = dict(read)
        else:
            # another format's source (SWE-agent's "agent", chat's "name"...) says
            # nothing about a Claude Code event: the event is made from scratch
            event, source = made, {}
        if message.role == "system":
            # a Claude Code event read keeps its text where it was ("summary", or
            # in the event itself: no text_key); a made one holds it as "content"
            key = source.get("text_key") if source else "content"
            if key:
                event[key] = "".join(p.text or "" for p in message.parts)
            events.append(event)
            continue
        body = dict(source.get("message") or {"role": message.role})
        if source.get("has_content", True):
            body["content"] = _content(message, bool(source.get("content_is_text")))
        event["message"] = body
        events.append(event)
        results = _results(message)
        if results:
            events.append({"type": "user", "uuid": f"{message.id}-results", "sessionId": session.id,
                           "message": {"role": "user", "content": results}})  # fmt: skip
    return events


# Lines Claude Code writes outside the conversation, never model input: a title
# (for /resume) and a file-history snapshot. Without a ``sessionId`` at the top
# of a file they wait for the session of the first other line.
_ASIDE_TYPES = ("summary", "file-history-snapshot")


def _is_title(event: Any) -> bool:
    """A ``summary`` line: a conversation's title (for /resume), never model input."""
    return (isinstance(event, Mapping) and event.get("type") == "summary"
            and not isinstance(event.get("message"), Mapping))  # fmt: skip


def claude_code_sessions(events: Iterable[Any], default_id: str, suffix: str = "") -> list[Session]:
    """Events of a Claude Code file, grouped by the last ``sessionId`` seen
    (``default_id`` before the first one), one session each. ``summary`` and
    ``file-history-snapshot`` lines without a ``sessionId`` before the file's
    first other event join that event's session (never a session of their own).
    ``suffix``: what each ``sessionId`` is suffixed with (a subagent's file:
    ``formats.source.subagent_suffix``)."""
    by_session: dict[str, list[Any]] = {}
    current = default_id
    held: list[Any] | None = []  # None once the first other event is read
    for event in events:
        is_event = isinstance(event, Mapping)
        given = is_event and event.get("sessionId")
        if held is not None and is_event and not given and event.get("type") in _ASIDE_TYPES:
            held.append(event)
            continue
        if given:
            current = str(event["sessionId"]) + suffix
        if held is not None:
            by_session.setdefault(current, []).extend(held)
            held = None
        by_session.setdefault(current, []).append(event)
    if held:  # a file of nothing but such lines
        by_session.setdefault(current, []).extend(held)
    return [from_claude_code(evs, sid) for sid, evs in by_session.items()]


__all__ = [
    "claude_code_sessions",
    "from_anthropic",
    "from_claude_code",
    "to_anthropic",
    "to_claude_code",
]
