"""OpenHands event streams: ``[{id, source, action | observation, args, content, ...}]``.

Every event becomes one message and keeps itself under ``source`` (so the
stream is written back unchanged). Agent actions with ``tool_call_metadata``
become assistant tool parts; the observation that answers one (same tool
call id, or ``cause`` = the action's id) completes that part with its
content, which is what the scans count and prune.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxcompact.errors import FormatError
from ctxcompact.formats.source import source_dict
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


def _text(event: Mapping[str, Any]) -> str:
    args = event.get("args")
    if isinstance(args, Mapping) and isinstance(args.get("content"), str) and args["content"]:
        return str(args["content"])
    return str(event.get("message") or event.get("content") or "")


def from_openhands(events: Sequence[Mapping[str, Any]], session_id: str = "openhands") -> Session:
    out: list[MessageWithParts] = []
    by_call: dict[str, Part] = {}
    by_action: dict[str, Part] = {}
    for i, event in enumerate(events):
        if not isinstance(event, Mapping):
            raise FormatError(f"event {i} is not an object", row=i, session_id=session_id)
        # what tells an event from a chat message or another format's record
        if not ({"source", "action", "observation"} & event.keys()):
            raise FormatError(f"not an openhands event: event {i} has no 'source', 'action' or "
                              "'observation' key", row=i, session_id=session_id)  # fmt: skip
        if "role" in event:
            raise FormatError(f"not an openhands event: event {i} has a 'role' (a chat "
                              "message?)", row=i, session_id=session_id)  # fmt: skip
        mid = f"{session_id}-e{i:06d}"
        meta = event.get("tool_call_metadata") or {}
        call_id = meta.get("tool_call_id") if isinstance(meta, Mapping) else None
        source = {"event": dict(event)}
        if "observation" in event:
            part = by_call.get(str(call_id)) or by_action.get(str(event.get("cause")))
            body = str(event.get("content") or "")
            if part is not None and part.state is not None:
                failed = event.get("success") is False or event.get("observation") == "error"
                if failed:
                    part.state.status, part.state.error = "error", body
                else:
                    part.state.status, part.state.output = "completed", body
            out.append(MessageWithParts(
                info=UserMessage(id=mid, sessionID=session_id, source=source),
                parts=[Part(id=f"{mid}-p00", type="tool-result", callID=call_id)],
            ))  # fmt: skip
        elif event.get("source") == "user":
            out.append(MessageWithParts(
                info=UserMessage(id=mid, sessionID=session_id, source=source),
                parts=[Part(id=f"{mid}-p00", type="text", text=_text(event))],
            ))  # fmt: skip
        elif event.get("source") == "agent":
            parts = []
            if call_id is not None:
                args = event.get("args")
                name = str(meta.get("function_name") or event.get("action") or "tool")
                given = dict(args) if isinstance(args, Mapping) else {}
                state = ToolState(status="pending", input=given)
                part = Part(id=f"{mid}-t00", type="tool", callID=call_id, tool=name, state=state)
                by_call[str(call_id)] = part
                by_action[str(event.get("id"))] = part
                parts.append(part)
            elif _text(event):
                parts.append(Part(id=f"{mid}-p00", type="text", text=_text(event)))
            out.append(MessageWithParts(
                info=AssistantMessage(id=mid, sessionID=session_id, finish="stop", source=source),
                parts=parts,
            ))  # fmt: skip
        else:
            out.append(MessageWithParts(info=SystemMessage(id=mid, sessionID=session_id,
                                                           source=source)))  # fmt: skip
    return Session(info=SessionInfo(id=session_id), messages=out)


def to_openhands(session: Session) -> list[dict[str, Any]]:
    events = []
    for message in session.messages:
        source = source_dict(message.info)
        if "event" not in source:
            raise FormatError(
                f"message {message.id} did not come from an OpenHands stream; convert through "
                "openai-chat instead", session_id=session.id, message_id=message.id,
            )  # fmt: skip
        events.append(dict(source["event"]))
    return events


def from_openhands_output(line: Mapping[str, Any], session_id: str) -> Session:
    """One record of an OpenHands resolver ``output.jsonl`` (its ``history`` events)."""
    history = line.get("history")
    if not isinstance(history, list):
        raise FormatError(f"{session_id}: no 'history' list", session_id=session_id)
    session = from_openhands(history, session_id)
    rest = {k: v for k, v in line.items() if k != "history"}
    return session.model_copy(update={"info": SessionInfo(id=session_id, source=rest)})


__all__ = ["from_openhands", "from_openhands_output", "to_openhands"]
