"""Compaction markers: the user message with a compaction part that queues a
compaction, pending until a summary answers it. One definition, read by the
lifecycle and by the stores that queue markers atomically."""

from __future__ import annotations

from ctxcompact.models import AssistantMessage, MessageWithParts, Part, Session, UserMessage


def compaction_part(message: MessageWithParts) -> Part | None:
    return next((p for p in message.parts if p.type == "compaction"), None)


def pending_marker(session: Session) -> MessageWithParts | None:
    """The newest marker if no summary answers it yet. A cancelled marker
    (its part ``ignored``: a pre-compact hook said no) is never pending, and
    the model is never sent it."""
    summarized = {
        m.info.parentID
        for m in session.messages
        if isinstance(m.info, AssistantMessage) and m.info.summary is True
    }
    for message in reversed(session.messages):
        part = compaction_part(message) if isinstance(message.info, UserMessage) else None
        if part is not None and not part.ignored:
            return None if message.id in summarized else message
    return None
