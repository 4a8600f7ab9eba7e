"""Which history a writer writes: the stored one (lossless) or what the model sees.

``view="full"`` (every writer's default) writes the session as stored, every
output whole, so it reads back unchanged. ``view="model"`` writes exactly
what a model call is sent: from the latest completed compaction on (the
summary, and the pinned messages before it), cleared outputs as their
placeholders, cut outputs cut, cleared arguments as ``{}``, as
``to_model_messages`` renders them under ``policy``; format-specific fields
the model never sees are not kept.
"""

from __future__ import annotations

from typing import Any, Literal

from ctxcompact.errors import ConfigError
from ctxcompact.models import Session
from ctxcompact.policy import Policy

View = Literal["full", "model"]


def to_model_chat(
    session: Session, view: str, policy: Policy | None = None
) -> list[dict[str, Any]]:
    """The OpenAI chat messages a model call is sent (``view`` must be "model")."""
    if view != "model":
        raise ConfigError(f"view must be 'full' or 'model', got {view!r}", column="view")
    from ctxcompact.scans.parts import filter_pivot
    from ctxcompact.scans.view import to_model_messages

    return to_model_messages(filter_pivot(session), policy=policy)


def viewed(session: Session, view: str, policy: Policy | None = None) -> Session:
    """``session`` as a writer should write it under ``view``."""
    if view == "full":
        return session
    from ctxcompact.formats.chat import from_openai_chat

    return from_openai_chat(to_model_chat(session, view, policy), session.id)


__all__ = ["View", "to_model_chat", "viewed"]
