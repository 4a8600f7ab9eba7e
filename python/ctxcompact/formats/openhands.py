"""OpenHands event streams: ``[{id, source, action | observation, args, content, ...}]``.

Every event becomes one message and keeps itself under ``source`` (so the
stream is written back unchanged). Agent actions with ``tool_call_metadata``
become assistant tool parts; the observation that answers one (same tool
call id, or ``cause`` = the action's id) completes that part with its
content, which is what the scans count and prune.

Streams without ``tool_call_metadata`` (the resolver's ``output.jsonl``:
flat events, often without ``source`` or ``id``) pair by event: an
observation answers the action its ``cause`` names, or else the oldest
unanswered action of the same name (``observation: run`` answers
``action: run``). An answered action becomes a tool part (tool = the action
name, call id ``<message id>-call``, input = its ``args``, or its own fields
minus the event's bookkeeping) after a text part with its ``thought``; an
action nothing answers (``finish``, ``think``) stays text. A source-less
``message`` action before any agent action is the user's task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxcompact.errors import FormatError
from ctxcompact.formats.source import openhands_event, source_dict, source_of
from ctxcompact.formats.usage import openai_usage
from ctxcompact.models import (
    MessageWithParts,
    Part,
    Session,
    SessionInfo,
    TokenUsage,
    ToolState,
)


def _text(event: Mapping[str, Any]) -> str:
    args = event.get("args")
    if isinstance(args, Mapping) and isinstance(args.get("content"), str) and args["content"]:
        return str(args["content"])
    return str(event.get("message") or event.get("content") or "")


#: Event fields that are bookkeeping, not a call's input (a flat action's input
#: is the rest of its fields).
ACTION_META = frozenset({
    "id", "source", "timestamp", "message", "cause", "action", "thought", "tool_call_metadata",
    "llm_metrics", "security_risk", "action_risk", "is_confirmed", "confirmation_state",
    "hidden", "wait_for_response", "images_urls", "content", "observation", "extras",
})  # fmt: skip


def _flat_action(event: Any) -> bool:
    """An agent action without tool_call_metadata that an observation may answer."""
    return (
        isinstance(event, Mapping)
        and "action" in event
        and "observation" not in event
        and not event.get("tool_call_metadata")
        and event.get("source", "agent") == "agent"
        and event.get("action") != "message"
    )


def answered_actions(events: Sequence[Any]) -> dict[int, int]:
    """Observation index -> the flat action index it answers (see the module doc)."""
    answers: dict[int, int] = {}
    pending: list[int] = []
    by_id: dict[str, int] = {}
    for i, event in enumerate(events):
        if _flat_action(event):
            pending.append(i)
            if event.get("id") is not None:
                by_id[str(event["id"])] = i
        elif (
            isinstance(event, Mapping)
            and "observation" in event
            and not event.get("tool_call_metadata")
        ):
            if event.get("cause") is not None:
                target = by_id.get(str(event["cause"]))
            else:
                name = event.get("observation")
                target = next((a for a in pending if events[a].get("action") == name), None)
            if target is not None and target in pending:
                pending.remove(target)
                answers[i] = target
    return answers


def _flat_input(event: Mapping[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    if isinstance(args, Mapping):
        return dict(args)
    return {k: v for k, v in event.items() if k not in ACTION_META}


def _response_usage(meta: Any, seen: set[str], where: str) -> tuple[TokenUsage | None, str | None]:
    """The usage and model of the response an agent action came from, once per
    response (its tool calls are separate events that repeat it): a Chat
    Completions usage (``formats.usage.openai_usage``)."""
    response = meta.get("model_response") if isinstance(meta, Mapping) else None
    if not isinstance(response, Mapping):
        return None, None
    rid = response.get("id")
    if rid is not None:
        if str(rid) in seen:
            return None, None
        seen.add(str(rid))
    model = response.get("model")
    tokens = openai_usage(response.get("usage"), f"{where}.model_response.usage")
    return tokens, model if isinstance(model, str) else None


def from_openhands(events: Sequence[Mapping[str, Any]], session_id: str = "openhands") -> Session:
    out: list[MessageWithParts] = []
    by_call: dict[str, Part] = {}
    by_action: dict[str, Part] = {}
    answers = answered_actions(events) if isinstance(events, Sequence) else {}
    answered = set(answers.values())
    flat_parts: dict[int, Part] = {}
    responses: set[str] = set()
    agent_seen = False
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
            if i in answers:
                part = flat_parts[answers[i]]
            body = str(event.get("content") or "")
            if part is not None and part.state is not None:
                failed = event.get("success") is False or event.get("observation") == "error"
                if failed:
                    part.state.status, part.state.error = "error", body
                else:
                    part.state.status, part.state.output = "completed", body
            result = Part(id=f"{mid}-p00", type="tool-result", callID=call_id)
            out.append(MessageWithParts.of("user", mid, session_id, [result], source=source))
        elif event.get("source") == "user" or (
            "source" not in event and event.get("action") == "message" and not agent_seen
        ):
            said = Part(id=f"{mid}-p00", type="text", text=_text(event))
            out.append(MessageWithParts.of("user", mid, session_id, [said], source=source))
        elif i in answered:
            agent_seen = True
            thought = event.get("thought")
            parts = []
            if isinstance(thought, str) and thought:
                parts.append(Part(id=f"{mid}-p00", type="text", text=thought))
            name = str(event.get("action") or "tool")
            state = ToolState(status="pending", input=_flat_input(event))
            part = Part(id=f"{mid}-t00", type="tool", callID=f"{mid}-call", tool=name, state=state)
            flat_parts[i] = part
            parts.append(part)
            out.append(MessageWithParts.of("assistant", mid, session_id, [*parts],
                                           finish="stop", source=source))  # fmt: skip
        elif "source" not in event and "action" in event:
            agent_seen = True
            thought = event.get("thought")
            text = _text(event) or (thought if isinstance(thought, str) else "")
            shown = [Part(id=f"{mid}-p00", type="text", text=text)] if text else []
            out.append(MessageWithParts.of("assistant", mid, session_id, shown,
                                           finish="stop", source=source))  # fmt: skip
        elif event.get("source") == "agent":
            agent_seen = True
            try:
                tokens, model = _response_usage(meta, responses,
                                                f"event {i}: tool_call_metadata")  # fmt: skip
            except FormatError as e:
                raise FormatError(str(e), row=i, session_id=session_id, message_id=mid) from None
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
            known = {k: v for k, v in (("tokens", tokens), ("modelID", model)) if v is not None}
            out.append(MessageWithParts.of("assistant", mid, session_id, parts,
                                           finish="stop", source=source, **known))  # fmt: skip
        else:
            out.append(MessageWithParts.of("system", mid, session_id, source=source))
    return Session(info=SessionInfo(id=session_id), messages=out)


def to_openhands(session: Session) -> list[dict[str, Any]] | dict[str, Any]:
    """The session's events; for a session read from a resolver record
    (``from_openhands_output``), that whole record with the events as its
    ``history``."""
    events = _events(session)
    record = source_dict(session.info, openhands=True)
    if not record:
        return events
    # The record keeps its key order: "history" stands where it stood.
    record.setdefault("history", [])
    return {k: (events if k == "history" else v) for k, v in record.items()}


def _events(session: Session) -> list[dict[str, Any]]:
    events = []
    for message in session.messages:
        source = source_of(message.info, openhands=True)
        if not openhands_event(source):
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
    # The record but its history (the messages hold it), whose place is kept.
    rest = {k: ([] if k == "history" else v) for k, v in line.items()}
    return session.model_copy(update={"info": SessionInfo(id=session_id, source=rest)})


__all__ = ["from_openhands", "from_openhands_output", "to_openhands"]
