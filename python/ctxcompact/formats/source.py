"""What an adapter kept of the record a model was read from.

Adapters store the parts of a foreign record that OpenCode's export has no
field for under a model's ``source`` extra (``result_source`` for a tool
result's own record), and the writers put them back: that is what makes every
round trip lossless. These two accessors are the only readers of it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
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


#: Keys of a session's record (the keys of its document beside the messages)
#: that only one trajectory format's reader leaves, none of them a parameter
#: of an API request body.
_RECORD_KEYS = {
    "mini-swe-agent": frozenset({"trajectory_format"}),
    "swe-agent": frozenset({"trajectory", "environment", "replay_config"}),
    "tau-bench": frozenset({"task_id", "reward", "trial"}),
}


#: Parameters only a Chat Completions request body has (an Anthropic Messages
#: body has none of them).
_CHAT_BODY_KEYS = frozenset({
    "n", "stop", "max_completion_tokens", "presence_penalty", "frequency_penalty",
    "logit_bias", "logprobs", "top_logprobs", "user", "response_format", "seed",
    "parallel_tool_calls", "stream_options", "modalities", "audio", "prediction",
    "reasoning_effort", "store", "web_search_options", "functions", "function_call",
    "verbosity", "prompt_cache_key", "safety_identifier",
})  # fmt: skip
#: Parameters only an Anthropic Messages body has.
_ANTHROPIC_BODY_KEYS = frozenset({
    "stop_sequences", "top_k", "thinking", "container", "mcp_servers", "context_management",
    "anthropic_version", "anthropic_beta",
})  # fmt: skip


def _request_owners(record: dict[str, Any]) -> set[str]:
    """Whose request body's parameters ``record`` is: a chat document's (a key
    only chat has, chat-shaped ``tools`` / ``tool_choice``), an Anthropic
    request's (likewise), else both (``model``, ``temperature``,
    ``max_tokens``... mean the same in both)."""
    keys = set(record)
    listed = record.get("tools")
    tools = [t for t in listed if isinstance(t, dict)] if isinstance(listed, list) else []
    choice = record.get("tool_choice")
    chat = (
        bool(keys & _CHAT_BODY_KEYS)
        or any(t.get("type") == "function" and "function" in t for t in tools)
        or isinstance(choice, str)
        or (isinstance(choice, dict) and "function" in choice)
    )
    anthropic = (
        bool(keys & _ANTHROPIC_BODY_KEYS)
        or any("input_schema" in t or ("name" in t and "function" not in t) for t in tools)
        or (isinstance(choice, dict) and choice.get("type") in ("auto", "any", "tool", "none"))
    )
    if chat != anthropic:
        return {"openai-chat"} if chat else {"anthropic"}
    return {"openai-chat", "anthropic"}


def session_record(info: BaseModel, format: str) -> dict[str, Any]:
    """A copy of the session's record (``source_dict(session.info)``) if it is
    ``format``'s own, else ``{}``: a format's record goes back only into that
    format (a SWE-agent .traj's ``environment`` / ``trajectory`` / ``info``
    are no keys of a Messages body, and a mini-swe-agent ``trajectory_format``
    there made the body read back as a trajectory). Told by its keys: one only
    a trajectory format has (``_RECORD_KEYS``), else an ``info`` object (any of
    the three trajectory formats), else a request body's parameters: a chat
    document's (``openai-chat``) when a key or the shape of ``tools`` /
    ``tool_choice`` is chat's only, an Anthropic request's when it is
    Anthropic's only, else (``model``, ``max_tokens``..., which both have)
    either's."""
    record = source_dict(info)
    keys = set(record)
    owners = {f for f, marks in _RECORD_KEYS.items() if keys & marks}
    if owners:
        mine = format in owners
    elif "info" in keys:
        mine = format in _RECORD_KEYS
    else:
        mine = format in _request_owners(record)
    return record if mine else {}


#: The keys of an Anthropic text block beside ``type`` and ``text``.
ANTHROPIC_TEXT_KEYS = frozenset({"cache_control", "citations"})
#: The keys of a chat text block beside ``type`` and ``text`` that another
#: format's text block has too: ``cache_control``, which chat requests carry
#: with Anthropic's meaning (OpenRouter, LiteLLM).
CHAT_TEXT_KEYS = frozenset({"cache_control"})
#: The keys only an Anthropic text block has: a text part's record holding
#: one is an Anthropic block's.
_ANTHROPIC_ONLY_TEXT_KEYS = ANTHROPIC_TEXT_KEYS - CHAT_TEXT_KEYS


def pydantic_ai_record(value: Any) -> bool:
    """A pydantic-ai message's record (its ``kind``) or part's (its ``part_kind``)."""
    return isinstance(value, dict) and (
        "part_kind" in value or value.get("kind") in ("request", "response")
    )


def message_owner(record: Any) -> str | None:
    """Which format a message's record (``source_of(message.info)``) was kept
    by: ``pydantic-ai`` (its ``kind``), ``openai-responses`` (an item's keys
    with its ``role`` beside ``content_is_text``), ``anthropic`` (a turn's
    other keys beside ``content_is_text``, no ``role``), else ``openai-chat``
    (a chat message's other keys: chat and the formats built on it); ``None``
    when there is none."""
    if not isinstance(record, dict) or not record:
        return None
    if pydantic_ai_record(record):
        return "pydantic-ai"
    if "content_is_text" in record:
        return "openai-responses" if "role" in record else "anthropic"
    return "openai-chat"


def text_record(part: BaseModel, format: str) -> dict[str, Any]:
    """What of a text part's record ``format`` (``openai-chat`` or
    ``anthropic``) holds as its text block's other keys (a copy; ``{}`` for
    none): a pydantic-ai part or another format's whole block (one with a
    ``type``) is no text block's keys. Each target keeps the keys that are
    its own: Anthropic its text block's (``ANTHROPIC_TEXT_KEYS``); chat a
    chat block's (any but an Anthropic-only key), and of an Anthropic
    block's record (told by a key only Anthropic has, ``citations``) the keys
    chat has too (``cache_control``). So ``cache_control`` survives a chat
    round trip, and goes from either format into the other."""
    record = source_dict(part)
    if not record or "type" in record or pydantic_ai_record(record):
        return {}
    if format == "anthropic":
        return {k: v for k, v in record.items() if k in ANTHROPIC_TEXT_KEYS}
    if set(record) & _ANTHROPIC_ONLY_TEXT_KEYS:
        return {k: v for k, v in record.items() if k in CHAT_TEXT_KEYS}
    return record


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


def claude_code_call_id(source: Any) -> str | None:
    """The API message id of a Claude Code record (its ``message.id``), else
    None: the lines of one model call share it (one call per id)."""
    body = source.get("message") if claude_code_record(source) else None
    call = body.get("id") if isinstance(body, dict) else None
    return call if isinstance(call, str) and call else None


def claude_code_created_ms(source: Any) -> int | None:
    """When a Claude Code record's event was written: its ``timestamp`` (ISO
    8601, e.g. ``2026-02-11T20:51:16.246Z``) in Unix milliseconds, else None
    (absent or not a time). A call's is when its response began streaming:
    the replay's ``since_previous_s``, which the cache's lifetime is priced
    against (``tuning.cache``)."""
    event = source.get("event") if claude_code_record(source) else None
    stamp = event.get("timestamp") if isinstance(event, dict) else None
    if not isinstance(stamp, str):
        return None
    try:
        when = datetime.fromisoformat(
            stamp.replace("Z", "+00:00", 1) if stamp.endswith("Z") else stamp
        )
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return round(when.timestamp() * 1000)


#: Where Claude Code keeps a subagent's file: ``<session>/subagents/agent-<agent>.jsonl``.
SUBAGENTS = "/subagents/agent-"


def subagent_suffix(path: str | os.PathLike[str]) -> str:
    """What the session ids of a Claude Code subagent's file are suffixed
    with: ``/subagents/agent-<agent>`` for ``.../subagents/agent-<agent>.jsonl``
    (its lines name the parent's ``sessionId``; so read, the agent is a
    session of its own, ``<parent>/subagents/agent-<agent>``), else ``""``.
    The native reader's rule is ``claude_file::subagent_suffix``."""
    p = Path(path)
    stem = p.stem
    if p.parent.name == "subagents" and stem.startswith("agent-") and len(stem) > len("agent-"):
        return f"/subagents/{stem}"
    return ""


def subagent_parent(session_id: str) -> tuple[str, str] | None:
    """The parent session and the agent of a subagent's session id
    (``subagent_suffix``), else None."""
    parent, found, agent = session_id.rpartition(SUBAGENTS)
    return (parent, agent) if found and parent and agent and "/" not in agent else None


def compaction_agent(session_id: str) -> str | None:
    """The parent of a Claude Code compaction agent's session (its file is
    ``agent-acompact-*``: the one call that writes the summary, sent the
    parent's history), else None."""
    got = subagent_parent(session_id)
    return got[0] if got is not None and got[1].startswith("acompact-") else None


def claude_code_compact_boundary(source: Any) -> bool:
    """A Claude Code ``compact_boundary`` event (``{"type": "system", "subtype":
    "compact_boundary"}``, written where Claude Code compacted the session):
    the calls after it were sent its summary and what follows, not the history
    before it."""
    event = source.get("event") if isinstance(source, dict) else None
    return (
        isinstance(event, dict)
        and event.get("type") == "system"
        and event.get("subtype") == "compact_boundary"
        and isinstance(event.get("sessionId", ""), str)
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


def data_url(media: str | None, data: str) -> str:
    """A ``data:`` URL of base64 ``data`` (an unknown media type as octet-stream)."""
    return f"data:{media or 'application/octet-stream'};base64,{data}"


def split_data_url(url: str) -> tuple[str, str] | None:
    """``(media type, base64 data)`` of a base64 ``data:`` URL, else None."""
    head, comma, data = url.partition(",")
    if not (comma and head.startswith("data:") and head.endswith(";base64")):
        return None
    return head[5:-7], data


def image_of(part: Any) -> tuple[str | None, str | None, int | None]:
    """``(url, media type, size in bytes)`` of a file part, whichever format it
    was read from: a chat ``image_url`` block, an Anthropic ``image`` block (its
    base64 data as a ``data:`` URL), a Responses ``input_image``, else the
    part's own ``url``. Unknown parts of it are None."""
    source = source_dict(part)
    media: str | None = part.mime if part.mime and part.mime != "image/*" else None
    url: str | None = part.url or None
    size: int | None = None
    kind = source.get("type")
    if kind == "image_url" and isinstance(source.get("image_url"), dict):
        url = source["image_url"].get("url") or url
    elif kind == "input_image" and isinstance(source.get("image_url"), str):
        url = source["image_url"] or url
    elif kind == "image" and isinstance(source.get("source"), dict):
        inner = source["source"]
        media = inner.get("media_type") or media
        if inner.get("type") == "base64" and isinstance(inner.get("data"), str):
            data = inner["data"]
            url = data_url(media, data)
            size = len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))
        elif isinstance(inner.get("url"), str):
            url = inner["url"]
    if url and url.startswith("data:") and media is None:
        media = url[5:].split(";", 1)[0].split(",", 1)[0] or None
    return url, media, size


def image_block(
    part: Any, by_url: Callable[[str], dict[str, Any]], text: str = "text"
) -> dict[str, Any]:
    """A file part as a target format's image: ``by_url(url)`` when it has a
    URL (``image_of``), else a ``text`` block naming the image."""
    url, media, size = image_of(part)
    if url:
        return by_url(url)
    return {"type": text, "text": image_placeholder(media, size)}


def image_placeholder(media: str | None, size: int | None) -> str:
    """The text standing for an image a target format cannot carry."""
    said = media or "unknown type"
    return f"[image: {said}, {size} bytes]" if size is not None else f"[image: {said}]"
