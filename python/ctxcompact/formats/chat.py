"""OpenAI Chat Completions message lists, and the agent logs built on them.

Mapping (docs/formats.md): system/developer -> system message; user -> user
message (text and image parts); assistant -> assistant message with a text
part and one tool part per call; a ``role: tool`` result is folded into the
tool part of its call (completed, with the output). Keys the canonical model
has no field for are kept under ``source`` on the message or part, so
``to_openai_chat(from_openai_chat(x)) == x`` whenever each call's results
directly follow it (the order every API requires).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxcompact.errors import FormatError
from ctxcompact.formats.jsonl import iterable, json_kind
from ctxcompact.formats.source import source_dict, source_of
from ctxcompact.models import (
    AssistantMessage,
    MessageWithParts,
    Part,
    Session,
    SessionInfo,
    SystemMessage,
    ToolState,
    UserMessage,
)

_MAPPED = {"role", "content", "tool_calls", "tool_call_id"}
#: Content blocks only Anthropic has: a chat session holding one is an Anthropic
#: request read in the wrong format (its calls and results would be lost).
ANTHROPIC_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking")


def _mid(session_id: str, i: int) -> str:
    return f"{session_id}-m{i:06d}"


def _content_parts(mid: str, content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [Part(id=f"{mid}-p00", type="text", text=content)]
    if not iterable(content):
        raise FormatError(f"content must be a string, an array or null, got {json_kind(content)}")
    parts = []
    for j, block in enumerate(content):
        pid = f"{mid}-p{j:02d}"
        if not isinstance(block, Mapping):
            raise FormatError(f"content[{j}] must be an object, got {json_kind(block)}")
        if block.get("type") in ANTHROPIC_BLOCKS:
            raise FormatError(f"not an OpenAI chat message: {mid} content[{j}] is an Anthropic "
                              f"{block['type']!r} block")  # fmt: skip
        if block.get("type") == "text":
            extra = {k: v for k, v in block.items() if k not in ("type", "text")}
            parts.append(Part(id=pid, type="text", text=block.get("text", ""),
                              **({"source": extra} if extra else {})))  # fmt: skip
        elif block.get("type") == "image_url":
            url = (block.get("image_url") or {}).get("url", "")
            parts.append(Part(id=pid, type="file", mime="image/*", url=url, source=block))
        else:
            parts.append(Part(id=pid, type="text", text="", source=block))
    return parts


def _arguments(raw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tool input, what to keep to write ``raw`` back exactly)."""
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {}, {"arguments": raw}
        if isinstance(parsed, dict):
            return parsed, ({} if json.dumps(parsed) == raw else {"arguments": raw})
        return {}, {"arguments": raw}
    return (raw if isinstance(raw, dict) else {}), {"arguments": raw}


def from_openai_chat(
    messages: Sequence[Mapping[str, Any]], session_id: str = "session", **info: Any
) -> Session:
    """A session from an OpenAI chat message list."""
    out: list[MessageWithParts] = []
    calls: dict[str, Part] = {}
    if not iterable(messages):
        raise FormatError(f"chat messages must be an array, got {json_kind(messages)}",
                          session_id=session_id)  # fmt: skip
    for i, raw in enumerate(messages):
        try:
            if not isinstance(raw, Mapping) or "role" not in raw:
                raise FormatError(f"message {i} is not a chat message (no role)", row=i,
                                  session_id=session_id)  # fmt: skip
            role = raw["role"]
            mid = str(raw.get("id") or _mid(session_id, i))
            extra = {k: v for k, v in raw.items() if k not in _MAPPED}
            if role == "tool":
                part = calls.get(str(raw.get("tool_call_id")))
                if part is None or part.state is None or part.state.status != "pending":
                    # orphaned (or second) result: kept as its own message, never dropped
                    out.append(MessageWithParts(
                        info=UserMessage(id=mid, sessionID=session_id, source={**raw}),
                        parts=[Part(id=f"{mid}-p00", type="text",
                                    text=str(raw.get("content") or ""), synthetic=True)],
                    ))  # fmt: skip
                    continue
                content = raw.get("content")
                part.state.status = "completed"
                part.state.output = content if isinstance(content, str) else json.dumps(content)
                keep = {k: v for k, v in raw.items() if k not in ("role", "tool_call_id")}
                if not isinstance(content, str):
                    keep["content"] = content
                else:
                    keep.pop("content")
                if keep:
                    part.__pydantic_extra__ = {**(part.model_extra or {}), "result_source": keep}
                continue
            src = {"source": extra} if extra else {}
            if role in ("system", "developer"):
                if role == "developer":
                    src = {"source": {**extra, "role": "developer"}}
                info_ = SystemMessage(id=mid, sessionID=session_id, **src)
                parts = _content_parts(mid, raw.get("content"))
                out.append(MessageWithParts(info=info_, parts=parts))
            elif role == "user":
                out.append(MessageWithParts(
                    info=UserMessage(id=mid, sessionID=session_id, **src),
                    parts=_content_parts(mid, raw.get("content")),
                ))  # fmt: skip
            elif role == "assistant":
                content = raw.get("content")
                parts = _content_parts(mid, content)
                if content is None:
                    src = {"source": {**extra, "content": None}}
                calls_in = raw.get("tool_calls") or []
                if not iterable(calls_in):
                    raise FormatError(f"tool_calls must be an array, got {json_kind(calls_in)}")
                for j, call in enumerate(calls_in):
                    if not isinstance(call, Mapping):
                        raise FormatError(f"tool_calls[{j}] must be an object, "
                                          f"got {json_kind(call)}")  # fmt: skip
                    fn = call.get("function") or {}
                    if not isinstance(fn, Mapping):
                        raise FormatError(f"tool_calls[{j}].function must be an object, "
                                          f"got {json_kind(fn)}")  # fmt: skip
                    args, keep = _arguments(fn.get("arguments"))
                    rest = {k: v for k, v in call.items() if k not in ("id", "function", "type")}
                    if call.get("type", "function") != "function":
                        rest["type"] = call.get("type")
                    source = {"source": {**rest, **keep}} if rest or keep else {}
                    part = Part(id=f"{mid}-t{j:02d}", type="tool", tool=fn.get("name"),
                                callID=call.get("id"),
                                state=ToolState(status="pending", input=args),
                                **source)  # fmt: skip
                    calls[str(call.get("id"))] = part
                    parts.append(part)
                out.append(MessageWithParts(
                    info=AssistantMessage(id=mid, sessionID=session_id, **src), parts=parts
                ))  # fmt: skip
            else:
                raise FormatError(f"message {i} has an unknown role {role!r}", row=i, column="role",
                                  session_id=session_id)  # fmt: skip
        except FormatError as e:
            if e.row is not None:
                raise
            raise FormatError(f"message {i}: {e}", row=i, session_id=session_id) from None
        except (TypeError, AttributeError) as e:  # a field of the wrong JSON type
            raise FormatError(f"message {i} has a field of the wrong type ({e})", row=i,
                              session_id=session_id) from None  # fmt: skip
    return Session(info=SessionInfo(id=session_id, **info), messages=out)


def _content_out(message: MessageWithParts) -> Any:
    texts = [p for p in message.parts if p.type in ("text", "file")]
    if len(texts) == 1 and texts[0].type == "text" and not (texts[0].model_extra or {}):
        return texts[0].text
    if not texts:
        return ""
    blocks = []
    for p in texts:
        source = source_of(p)
        if p.type == "file":
            blocks.append(source or {"type": "image_url", "image_url": {"url": p.url}})
        elif source is not None and "type" in source:
            blocks.append(source)
        else:
            blocks.append({"type": "text", "text": p.text or "", **(source or {})})
    return blocks


def to_openai_chat(session: Session) -> list[dict[str, Any]]:
    """The session as an OpenAI chat message list (tool results right after their call)."""
    out: list[dict[str, Any]] = []
    for message in session.messages:
        info = message.info
        source = source_dict(info)
        if isinstance(info, SystemMessage):
            role = source.pop("role", "system")
            out.append({"role": role, "content": _content_out(message), **source})
        elif isinstance(info, UserMessage):
            if source.get("role") == "tool":  # an orphaned result, as it was
                out.append(source)
                continue
            out.append({"role": "user", "content": _content_out(message), **source})
        else:
            tools = [p for p in message.parts if p.type == "tool"]
            texts = [p for p in message.parts if p.type in ("text", "file")]
            content: Any = None if "content" in source and source["content"] is None else (
                _content_out(message) if texts else (None if tools else ""))  # fmt: skip
            source.pop("content", None)
            entry: dict[str, Any] = {"role": "assistant", "content": content, **source}
            results = []
            if tools:
                entry["tool_calls"] = []
                for p in tools:
                    keep = source_dict(p)
                    arguments = keep.pop("arguments", None)
                    if arguments is None:
                        arguments = json.dumps((p.state.input if p.state else None) or {})
                    call_type = keep.pop("type", "function")
                    function = {"name": p.tool or "", "arguments": arguments}
                    entry["tool_calls"].append(
                        {"id": p.callID or p.id, "type": call_type, "function": function, **keep}
                    )
                    if p.state is not None and p.state.status in ("completed", "error"):
                        result = source_dict(p, "result_source")
                        body = result.pop("content", None)
                        if body is None:
                            body = (
                                p.state.output if p.state.status == "completed" else p.state.error
                            )
                        results.append({"role": "tool", "tool_call_id": p.callID or p.id,
                                        "content": body, **result})  # fmt: skip
            out.append(entry)
            out.extend(results)
    return out


# --- logs built on chat messages -------------------------------------------------------


def from_tau_bench(runs: Sequence[Mapping[str, Any]]) -> list[Session]:
    """tau-bench results: ``[{task_id, reward, info, traj: [chat messages], trial}]``."""
    if not iterable(runs):
        raise FormatError(f"tau-bench results must be a list of runs, got {json_kind(runs)}")
    sessions = []
    for i, run in enumerate(runs):
        if not isinstance(run, Mapping) or "traj" not in run:
            raise FormatError(f"run {i} has no 'traj'", row=i)
        sid = f"tau-{run.get('task_id', i)}-{run.get('trial', 0)}"
        rest = {k: v for k, v in run.items() if k != "traj"}
        sessions.append(from_openai_chat(run["traj"], sid, source=rest))
    return sessions


def to_tau_bench(sessions: Sequence[Session]) -> list[dict[str, Any]]:
    """Runs; a session that did not come from tau-bench gets its id as ``task_id``
    (a run's session id is made of ``task_id`` and ``trial`` only)."""
    runs = []
    for s in sessions:
        source = source_dict(s.info)
        source.setdefault("task_id", s.id)
        runs.append({**source, "traj": to_openai_chat(s)})
    return runs


def from_swe_agent(traj: Mapping[str, Any], session_id: str = "swe-agent") -> Session:
    """A SWE-agent ``.traj``: ``history`` is chat messages with agent fields
    (``thought``, ``action``, ``agent``...) and, with function calling,
    ``tool_calls`` / ``tool_call_ids``."""
    if not isinstance(traj, Mapping):
        raise FormatError(f"a trajectory must be an object, got {json_kind(traj)}",
                          session_id=session_id)  # fmt: skip
    history = traj.get("history")
    if not isinstance(history, list):
        raise FormatError(f"{session_id}: a .traj needs a 'history' list", session_id=session_id)
    messages = []
    for i, m in enumerate(history):
        if not isinstance(m, Mapping):
            raise FormatError(f"history[{i}] must be an object, got {json_kind(m)}", row=i,
                              session_id=session_id)  # fmt: skip
        m = dict(m)
        ids = m.get("tool_call_ids")
        if m.get("role") == "tool" and "tool_call_id" not in m and ids:
            m["tool_call_id"] = ids[0]
        messages.append(m)
    rest = {k: v for k, v in traj.items() if k != "history"}
    return from_openai_chat(messages, session_id, source=rest)


def to_swe_agent(session: Session) -> dict[str, Any]:
    history = []
    for m in to_openai_chat(session):
        if m.get("role") == "tool" and "tool_call_ids" in m:
            m = {k: v for k, v in m.items() if k != "tool_call_id"}
        history.append(m)
    return {**(source_dict(session.info)), "history": history}


def is_chat_list(obj: Any) -> bool:
    return (
        isinstance(obj, list)
        and bool(obj)
        and all(isinstance(m, Mapping) and m.get("role") in
                ("system", "developer", "user", "assistant", "tool") for m in obj)
    )  # fmt: skip


__all__ = [
    "from_openai_chat",
    "from_swe_agent",
    "from_tau_bench",
    "is_chat_list",
    "to_openai_chat",
    "to_swe_agent",
    "to_tau_bench",
]
