"""What an adapter kept of the record a model was read from.

Adapters store the parts of a foreign record that OpenCode's export has no
field for under a model's ``source`` extra (``result_source`` for a tool
result's own record), and the writers put them back: that is what makes every
round trip lossless. These two accessors are the only readers of it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def source_of(
    model: BaseModel, key: str = "source", *, openhands: bool = False, claude_code: bool = False
) -> Any:
    """The kept record as stored (``None`` when there is none).

    An OpenHands record (an event, or a resolver record around its history)
    is read only by the OpenHands writer (``openhands=True``): merged into
    another format's document it would make that document an OpenHands one
    with an empty history, and its sessions would read back empty. A Claude
    Code message's record (its event envelope, ``message`` fields...) is read
    only by the Claude Code writer (``claude_code=True``): other formats would
    carry its keys in their messages."""
    value = (model.model_extra or {}).get(key)
    if not openhands and _openhands_record(value):
        return None
    if not claude_code and claude_code_record(value):
        return None
    return value


def source_dict(
    model: BaseModel, key: str = "source", *, openhands: bool = False, claude_code: bool = False
) -> dict[str, Any]:
    """A fresh copy of the kept record (``{}`` when there is none), safe to edit."""
    return dict(source_of(model, key, openhands=openhands, claude_code=claude_code) or {})


#: The keys of a Claude Code message's record (``from_claude_code``).
_CLAUDE_CODE_KEYS = frozenset({"event", "message", "content_is_text", "has_content", "text_key"})


def claude_code_record(value: Any) -> bool:
    """A message's source as the Claude Code reader keeps it: its event (with a
    ``type`` string) beside its ``message`` fields or its ``text_key``."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("event"), dict)
        and isinstance(value["event"].get("type"), str)
        and ("message" in value or "text_key" in value)
        and set(value) <= _CLAUDE_CODE_KEYS
    )


def openhands_event(value: Any) -> bool:
    """A message's source as the OpenHands reader keeps it: ``{"event": {...}}``
    and nothing else (a Claude Code message keeps an ``event`` too, beside its
    ``message``)."""
    return isinstance(value, dict) and set(value) == {"event"} and isinstance(value["event"], dict)


def _openhands_record(value: Any) -> bool:
    return openhands_event(value) or (
        isinstance(value, dict) and "history" in value and "instruction" in value
    )
