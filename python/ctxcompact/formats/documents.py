"""A session document in, as ``Session`` models: ``read`` (a file, JSONL or one
JSON document, or an already parsed object), ``read_document`` and
``session_from_json`` (one parsed document in a named format).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ctxcompact.errors import FormatError, InputTypeError
from ctxcompact.formats.anthropic import claude_code_sessions, from_anthropic, from_claude_code
from ctxcompact.formats.chat import (
    from_mini_swe_agent,
    from_openai_chat,
    from_swe_agent,
    from_tau_bench,
)
from ctxcompact.formats.detect import FORMATS, RESPONSES_ITEMS, detect_format, jsonl_format
from ctxcompact.formats.jsonl import iterable, json_kind, parse_line
from ctxcompact.formats.openhands import from_openhands, from_openhands_output
from ctxcompact.formats.responses import from_openai_responses
from ctxcompact.formats.source import subagent_suffix
from ctxcompact.models import Session


def from_opencode_messages(messages: Sequence[Any]) -> list[Session]:
    """Sessions from OpenCode messages (``{"info": {"sessionID", ...}, "parts"}``);
    consecutive messages of one ``sessionID`` make one session."""
    groups: list[tuple[str, list[Any]]] = []
    for i, m in enumerate(messages):
        info = m.get("info") if isinstance(m, Mapping) else None
        sid = info.get("sessionID") if isinstance(info, Mapping) else None
        if not isinstance(sid, str):
            raise FormatError(f"message {i} has no info.sessionID", row=i)
        if not groups or groups[-1][0] != sid:
            groups.append((sid, []))
        groups[-1][1].append(m)
    return [Session.model_validate({"info": {"id": sid}, "messages": ms}) for sid, ms in groups]


def to_opencode_messages(session: Session) -> list[dict[str, Any]]:
    """One export per message, each naming its session in ``info.sessionID``."""
    out = []
    for m in session.to_export().get("messages", []):
        out.append({**m, "info": {**m["info"], "sessionID": session.id}})
    return out


def session_from_json(obj: Any, fmt: str, name: str) -> list[Session]:
    """The sessions of one parsed document (a file, or a JSONL line) in ``fmt``;
    ``name`` is the id of a session that has none. ``FormatError`` if it does not fit."""
    try:
        return _sessions(obj, fmt, name)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise FormatError(f"not a valid {fmt} session: {where}: {first['msg']}") from None
    except FormatError:
        raise
    except (AttributeError, TypeError, KeyError, ValueError) as e:
        raise FormatError(f"not a valid {fmt} session ({type(e).__name__}: {e})") from None


def _sessions(obj: Any, fmt: str, name: str) -> list[Session]:
    if fmt in ("openai-chat", "openhands") and not iterable(obj):
        raise FormatError(f"an {fmt} session must be an object or an array, got {json_kind(obj)}")
    if fmt == "opencode":
        # without this an OpenCode message ({"info", "parts"}) reads as an empty session
        if not isinstance(obj, Mapping) or not isinstance(obj.get("messages"), list):
            raise FormatError("not an OpenCode session export: no 'messages' list")
        return [Session.model_validate(obj)]
    if fmt == "opencode-messages":
        return from_opencode_messages(obj if isinstance(obj, list) else [obj])
    if fmt == "openai-chat":
        if isinstance(obj, Mapping):
            if "messages" not in obj:
                raise FormatError("not an OpenAI chat session: no 'messages'")
            if "system" in obj:
                raise FormatError("not an OpenAI chat session: it has a top-level 'system' "
                                  "(an Anthropic request?)")  # fmt: skip
            # a truthy "id" names the session, else "session_id"; when "id" does,
            # "session_id" is the document's own key, kept (the native reader's rule)
            named = ("id",) if obj.get("id") else ("id", "session_id")
            sid = str(obj.get("id") or obj.get("session_id") or name)
            rest = {k: v for k, v in obj.items() if k not in (*named, "messages")}
            return [from_openai_chat(obj["messages"], sid, **({"source": rest} if rest else {}))]
        return [from_openai_chat(obj, name)]
    if fmt == "openai-responses":
        items = obj.get("input") if isinstance(obj, Mapping) else obj
        if not isinstance(items, list):
            raise FormatError("OpenAI Responses input must be a list of items")
        return [from_openai_responses(items, name)]
    if fmt == "anthropic":
        return [from_anthropic(obj, name)]
    if fmt == "claude-code":
        if not isinstance(obj, list):
            raise FormatError("not a Claude Code session: not a list of events")
        for i, event in enumerate(obj):
            if not isinstance(event, Mapping) or not isinstance(event.get("type"), str):
                raise FormatError(f'not a Claude Code event: event {i} has no "type" string',
                                  row=i)  # fmt: skip
            if "role" in event or event["type"] in RESPONSES_ITEMS:
                # a Claude Code event holds its role in "message"
                raise FormatError(f"not a Claude Code event: event {i} is a chat message or an "
                                  "OpenAI Responses item", row=i)  # fmt: skip
        return [from_claude_code(obj, None)]
    if fmt == "swe-agent":
        return [from_swe_agent(obj, name)]
    if fmt == "mini-swe-agent":
        return [from_mini_swe_agent(obj, name)]
    if fmt == "tau-bench":
        return from_tau_bench(obj)
    if fmt == "openhands":
        if isinstance(obj, Mapping):
            return [from_openhands_output(obj, name)]
        return [from_openhands(obj, name)]
    raise FormatError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")


BOM = b"\xef\xbb\xbf"


def read(
    source: str | Path | Any, format: str | None = None, *, name: str | None = None
) -> list[Session]:
    """Sessions from a file (``.json``, ``.traj``, ``.jsonl``) or an already parsed object.

    JSONL holds one session per line, except Claude Code files (one event per
    line). A bad line raises ``FormatError`` naming the file and line. A UTF-8
    byte order mark is accepted; a JSONL file with nothing but blank lines
    holds no sessions (``[]``), an empty ``.json`` / ``.traj`` document is a
    ``FormatError`` naming it (``read_document``). ``name`` names the sessions
    without an id of their own (``<name>`` for a document, ``<name>:<line>``
    for JSONL); default: the file name up to its first dot (Claude Code: up
    to its last).
    """
    if not isinstance(source, str | os.PathLike):
        if format is None and not isinstance(source, Mapping | list | tuple):
            # (with a format, a JSON scalar is that format's bad document)
            raise InputTypeError(
                f"read takes a file path (str or Path) or a parsed JSON document (a dict or "
                f"a list), got {type(source).__name__}"
            )
        return session_from_json(source, format or detect_format(source), name or "session")
    path = Path(source)
    if path.suffix != ".jsonl":
        return read_document(path, format, name=name)[1]
    data = _file_bytes(path)
    if not data.strip():
        return []
    base = name if name is not None else path.name.split(".")[0]
    records = []
    for n, raw in enumerate(data.splitlines(), 1):
        if raw.strip():
            try:
                records.append((n, parse_line(raw)))
            except FormatError as e:
                raise FormatError(f"{path}:{n}: {e}", row=n) from None
    fmt = format or jsonl_format(records[0][1])
    if fmt == "claude-code":
        return _claude_code(path, records, name if name is not None else path.stem)
    if fmt == "opencode-messages":
        for n, record in records:  # a bad line is named by its file and line
            info = record.get("info") if isinstance(record, Mapping) else None
            if not isinstance(info, Mapping) or not isinstance(info.get("sessionID"), str):
                raise FormatError(f"{path}:{n}: not an OpenCode message: no info.sessionID "
                                  "string", row=n)  # fmt: skip
        try:
            return session_from_json([r for _, r in records], fmt, base)
        except FormatError as e:
            raise FormatError(f"{path}: {e}") from None
    sessions = []
    for n, record in records:
        try:
            sessions += session_from_json(record, fmt, f"{base}:{n}")
        except FormatError as e:
            raise FormatError(f"{path}:{n}: {e}", row=n, session_id=e.session_id,
                              message_id=e.message_id, column=e.column) from None  # fmt: skip
    return sessions


def read_document(
    path: str | Path, format: str | None = None, *, name: str | None = None
) -> tuple[str, list[Session]]:
    """The format and sessions of one JSON document file (``.json``, ``.traj``),
    parsed once. An empty file (no bytes, or only whitespace) is a
    ``FormatError`` naming it: a JSON document holds one value, so an empty
    one is a file cut short or never written, not a file of no sessions (an
    empty JSONL file, a list of no records, holds no sessions). ``name`` as
    in ``read``."""
    path = Path(path)
    data = _file_bytes(path)
    if not data.strip():
        raise FormatError(f"{path}: an empty file: a JSON document holds one JSON value "
                          "(cut short, or never written?)")  # fmt: skip
    base = name if name is not None else path.name.split(".")[0]
    try:
        obj = parse_line(data)
        fmt = format or detect_format(obj)
        return fmt, session_from_json(obj, fmt, base)
    except FormatError as e:
        raise FormatError(f"{path}: {e}") from None


def _file_bytes(path: Path) -> bytes:
    """A file's bytes without a UTF-8 byte order mark. A file that cannot be
    read is the ``OSError`` naming it (``FileNotFoundError``...), as the
    README's Errors section promises, not a format error."""
    return path.read_bytes().removeprefix(BOM)


def _claude_code(path: Path, records: list[tuple[int, Any]], default_id: str) -> list[Session]:
    """A Claude Code file's events; a line that is not an event (an object with a
    string ``type``) is a bad line, as in the native reader."""
    for n, event in records:
        if not isinstance(event, Mapping):
            got = json_kind(event)
            raise FormatError(f"{path}:{n}: not a Claude Code event: got {got}, not an "
                              'object with a "type"', row=n)  # fmt: skip
        if not isinstance(event.get("type"), str):
            raise FormatError(f'{path}:{n}: not a Claude Code event: it has no "type" string '
                              "(is this file in another format?)", row=n)  # fmt: skip
    try:
        return claude_code_sessions([e for _, e in records], default_id, subagent_suffix(path))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise FormatError(
            f"{path}: not a valid Claude Code session: {where}: {first['msg']}"
        ) from None
    except (AttributeError, TypeError) as e:
        raise FormatError(f"{path}: not a valid Claude Code session ({e})") from None
