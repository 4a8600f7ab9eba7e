"""What the lifecycle checks of a session and reads of its shape: the id's
type, the model an assistant message names, the invariants of a stored
session, and where a user turn ended (``Policy.acts``)."""

from __future__ import annotations

from typing import Any

import ctxcompact._core as _core
from ctxcompact.errors import InputTypeError, TranscriptError
from ctxcompact.live.markers import compaction_part
from ctxcompact.models import AssistantMessage, MessageWithParts, Session


def check_session_id(session_id: Any) -> None:
    """A session id is a str: anything else is a wrong argument, not a missing session."""
    if not isinstance(session_id, str):
        raise InputTypeError(f"a session id must be a str (store.create_session()), got "
                             f"{type(session_id).__name__}")  # fmt: skip


def model_name(message: MessageWithParts) -> str | None:
    """``providerID/modelID`` of an assistant message (``None`` when it names none)."""
    info = message.info
    model = getattr(info, "modelID", None) if info.role == "assistant" else None
    if not model:
        return None
    provider = getattr(info, "providerID", None)
    return f"{provider}/{model}" if provider else str(model)


def validate_session(session: Session, start: int = 0) -> None:
    """The lifecycle's invariants, with a specific error for each
    (``start``: the messages before it were checked already)."""
    ids = {m.id for m in session.messages}
    for i, message in enumerate(session.messages[start:], start):
        info = message.info
        if isinstance(info, AssistantMessage):
            if compaction_part(message) is not None:
                raise TranscriptError(
                    "a compaction part belongs in a user message, not an assistant one",
                    session_id=session.id,
                    message_id=message.id,
                    row=i,
                )
            if info.summary is True and info.parentID not in ids:
                raise TranscriptError(
                    f"summary message has no parent marker (parentID={info.parentID!r})",
                    column="parentID", session_id=session.id, message_id=message.id, row=i,
                )  # fmt: skip


def turn_end(session: Session) -> int | None:
    """Where a user turn ended since the last model call: the index of the
    first user message with text after the newest assistant message (the
    history before it is the turn that ended), or ``None`` (no assistant
    message yet, or none since). A policy that acts on turns prunes there
    (``Policy.acts``). The rule is the core's (``_core.turn_end``, the one the
    replay engine reads in rust/src/replay.rs)."""
    found: int | None = _core.turn_end([
        (m.info.role, m.info.role == "user" and any(p.type == "text" for p in m.parts))
        for m in session.messages
    ])  # fmt: skip
    return found
