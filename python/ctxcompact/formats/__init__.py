"""Session formats in and out: ``read`` / ``write`` any of ``FORMATS``.

Every format maps to the canonical model (OpenCode sessions, see
docs/formats.md) and back without loss; convert between two formats by
reading one and writing the other (``openai-chat`` is the common way out).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ctxcompact import _core
from ctxcompact._atomic import replacing
from ctxcompact.errors import FormatError, InputTypeError
from ctxcompact.formats.anthropic import (
    claude_code_sessions,
    from_anthropic,
    from_claude_code,
    to_anthropic,
    to_claude_code,
)
from ctxcompact.formats.chat import (
    from_mini_swe_agent,
    from_openai_chat,
    from_swe_agent,
    from_tau_bench,
    is_chat_list,
    looks_like_mini_swe_agent,
    to_mini_swe_agent,
    to_openai_chat,
    to_swe_agent,
    to_tau_bench,
)
from ctxcompact.formats.jsonl import iterable, json_kind, parse_line
from ctxcompact.formats.langchain import from_langchain, to_langchain
from ctxcompact.formats.openhands import from_openhands, from_openhands_output, to_openhands
from ctxcompact.formats.pydantic_ai import from_pydantic_ai, to_pydantic_ai
from ctxcompact.formats.responses import from_openai_responses, to_openai_responses
from ctxcompact.formats.source import claude_code_record, session_record, source_of
from ctxcompact.formats.views import View, viewed
from ctxcompact.models import MessageWithParts, Session, SystemMessage
from ctxcompact.policy import Policy

#: Every format name, from the core's one definition (``ingest::Format``).
FORMATS: tuple[str, ...] = tuple(_core.FORMATS)


#: The Responses item types the adapter maps.
RESPONSES_ITEMS = frozenset({"message", "function_call", "function_call_output", "reasoning"})
#: Content block types only the Responses API has (chat has text, image_url,
#: input_audio, file, refusal).
RESPONSES_BLOCKS = frozenset({"input_text", "output_text", "input_image", "input_file"})


def _responses_blocks(item: Any) -> bool:
    """A ``{role, content}`` item whose content holds a Responses-only block."""
    content = item.get("content") if isinstance(item, Mapping) else None
    return isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") in RESPONSES_BLOCKS for b in content
    )


def detect_format(obj: Any) -> str:
    """The format of a parsed JSON document (``FormatError`` when none fits)."""
    if isinstance(obj, Mapping):
        messages = obj.get("messages")
        first = messages[0] if isinstance(messages, list) and messages else None
        # An OpenCode message is {info, parts}; a chat message with a role
        # beside an "info" of another tool's record is not one.
        chat = isinstance(first, Mapping) and "role" in first and "info" not in first
        if "info" in obj and "messages" in obj and not chat:
            return "opencode"
        if isinstance(obj.get("history"), list) and "instruction" not in obj:
            return "swe-agent"
        if str(obj.get("trajectory_format", "")).startswith("mini-swe-agent"):
            return "mini-swe-agent"
        if isinstance(obj.get("messages"), list):
            contents = [m.get("content") for m in obj["messages"] if isinstance(m, Mapping)]
            blocks = [
                b.get("type") for c in contents if isinstance(c, list)
                for b in c if isinstance(b, Mapping)
            ]  # fmt: skip
            anthropic_blocks = {"tool_use", "tool_result", "thinking", "redacted_thinking"}
            if "system" in obj or anthropic_blocks & set(blocks):
                return "anthropic"
            return "openai-chat"
        if isinstance(obj.get("input"), list):  # a Responses request body
            kinds = RESPONSES_ITEMS
            if any(isinstance(i, Mapping) and (i.get("type") in kinds or "role" in i)
                   for i in obj["input"]):  # fmt: skip
                return "openai-responses"
    if isinstance(obj, list) and obj:
        first = obj[0]
        if isinstance(first, Mapping):
            if "traj" in first:
                return "tau-bench"
            if "source" in first and ("action" in first or "observation" in first):
                return "openhands"
            if "type" in first and ("uuid" in first or "sessionId" in first):
                return "claude-code"
            if any(isinstance(i, Mapping) and i.get("type") in RESPONSES_ITEMS for i in obj):
                return "openai-responses"
            if any(map(_responses_blocks, obj)):  # {role, content} items, no "type"
                return "openai-responses"
        if is_chat_list(obj):
            return "mini-swe-agent" if looks_like_mini_swe_agent(obj) else "openai-chat"
    raise FormatError("cannot tell which session format this is; pass format=")


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
        return claude_code_sessions([e for _, e in records], default_id)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise FormatError(
            f"{path}: not a valid Claude Code session: {where}: {first['msg']}"
        ) from None
    except (AttributeError, TypeError) as e:
        raise FormatError(f"{path}: not a valid Claude Code session ({e})") from None


def jsonl_format(first: Any) -> str:
    """The format of a JSONL file from its first record."""
    claude_types = {"user", "assistant", "summary", "system"}
    if (
        isinstance(first, Mapping)
        and first.get("type") in claude_types
        and ("uuid" in first or "sessionId" in first or "leafUuid" in first)
    ):
        return "claude-code"
    # Any other event in Claude Code's envelope (a "type" string, a "sessionId"
    # and a "uuid"): a hook's "progress" record, which current Claude Code may
    # write before the conversation's first line
    if (
        isinstance(first, Mapping)
        and isinstance(first.get("type"), str)
        and isinstance(first.get("sessionId"), str)
        and "uuid" in first
    ):
        return "claude-code"
    # Claude Code files may open with a file-history snapshot (no session id)
    if (
        isinstance(first, Mapping)
        and first.get("type") == "file-history-snapshot"
        and ("snapshot" in first or "messageId" in first)
    ):
        return "claude-code"
    if isinstance(first, Mapping) and "history" in first and "instruction" in first:
        return "openhands"
    if isinstance(first, Mapping) and "info" in first and "parts" in first:
        return "opencode-messages"
    return detect_format(first)


def _export(session: Session) -> dict[str, Any]:
    """An OpenCode export always with its ``messages`` (what the reader requires),
    even for a session built without any."""
    export = session.to_export()
    export.setdefault("messages", [])
    return export


_WRITERS: dict[str, Callable[[Session], Any]] = {
    "opencode": lambda s: _export(s),
    # a chat document's own keys (model, tools...) around its messages
    "openai-chat": lambda s: {
        "id": s.id,
        **session_record(s.info, "openai-chat"),
        "messages": to_openai_chat(s),
    },
    "openai-responses": to_openai_responses,
    "anthropic": to_anthropic,
    "swe-agent": to_swe_agent,
    "mini-swe-agent": to_mini_swe_agent,
    "openhands": to_openhands,
}


def write(
    sessions: Sequence[Session],
    path: str | Path,
    format: str,
    *,
    view: View = "full",
    policy: Policy | None = None,
) -> None:
    """Write ``sessions`` in ``format``: JSONL for a ``.jsonl`` path (one session
    per line; tau-bench: a list of one run; Claude Code and OpenCode messages:
    one event per line), else one JSON document: one session (tau-bench: its
    list of results); more is a ``FormatError``, as no reader takes such a
    file back.

    ``view="model"`` writes what the model is sent instead of the stored
    history (``formats.views``: cleared outputs as placeholders, from the
    latest compaction on, rendered under ``policy``), in any format.

    The file is replaced whole or left as it was (an error converting a
    session writes nothing) and keeps the replaced file's mode; a folder that
    does not exist, or a read-only file (no write permission bit), is an
    ``OSError``."""
    path = Path(path)
    sessions = list(sessions)
    for i, s in enumerate(sessions):
        if not isinstance(s, Session):
            raise InputTypeError(f"write takes Sessions; item {i} is a {type(s).__name__}"
                                 + (" (Session.model_validate(it) first)"
                                    if isinstance(s, dict) else ""))  # fmt: skip
    if view != "full":
        sessions = [viewed(s, view, policy) for s in sessions]
    jsonl = path.suffix == ".jsonl"
    if format in ("claude-code", "opencode-messages") and not jsonl:
        raise FormatError(f"{format} is a JSONL format (an event per line): write a .jsonl "
                          f"file, not {path.suffix or 'one without a suffix'}")  # fmt: skip
    if format != "tau-bench" and not jsonl and len(sessions) > 1:
        # An array of them is no document a reader takes back.
        raise FormatError(f"{len(sessions)} sessions do not fit one {format} document: "
                          f"write a .jsonl file (a session per line), not "
                          f"{path.suffix or 'one without a suffix'}")  # fmt: skip
    if format == "claude-code":
        lines = [json.dumps(e, ensure_ascii=False) for s in sessions for e in to_claude_code(s)]
        text = "\n".join(lines) + "\n"
    elif format == "opencode-messages":
        lines = [
            json.dumps(m, ensure_ascii=False) for s in sessions for m in to_opencode_messages(s)
        ]
        text = "".join(line + "\n" for line in lines)
    elif format == "tau-bench" and jsonl:  # a line is a list of runs: one run each
        text = "".join(json.dumps([run], ensure_ascii=False) + "\n" for run in
                       to_tau_bench(sessions))  # fmt: skip
    elif format == "tau-bench":
        text = json.dumps(to_tau_bench(sessions), ensure_ascii=False)
    else:
        writer = _WRITERS.get(format)
        if writer is None:
            raise FormatError(f"unknown format {format!r}; one of {', '.join(FORMATS)}")
        docs = [writer(s) for s in sessions]
        if jsonl:
            text = "\n".join(json.dumps(d, ensure_ascii=False) for d in docs) + "\n"
        else:
            text = json.dumps(docs[0] if docs else [], ensure_ascii=False)
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


#: Targets that write a text-protocol step (SWE-agent, mini-swe-agent) as the
#: text it was logged as: read back there, it is no tool call.
_STEPS_AS_TEXT = frozenset({"openai-chat", "tau-bench", "swe-agent", "mini-swe-agent"})
#: Targets that keep thinking (anthropic, claude-code as blocks, Responses as
#: reasoning summaries) and every part type (OpenCode's own).
_KEEP_THINKING = frozenset({"anthropic", "claude-code", "openai-responses"})
_OPENCODE = frozenset({"opencode", "opencode-messages"})
#: Part types every target holds (``tool-result``: a result folded into its call).
_PORTABLE = frozenset({"text", "tool", "file", "tool-result", "reasoning"})


_BEFORE_PIVOT = (
    "message(s) before a compaction written as model input (the compaction "
    "part that hides them is OpenCode only; --view model writes what the model "
    "is sent)"
)


def losses(sessions: Sequence[Session], format: str) -> list[str]:
    """What writing ``sessions`` as ``format`` cannot hold (docs/formats.md,
    Limits), one sentence each with how many parts and sessions: a
    text-protocol step written as plain text, thinking dropped, OpenCode-only
    parts (step markers, patches...) dropped, a system prompt written to
    Claude Code (which stores none: it reads back as a note never sent), and
    the marks of ``prune`` / ``compact`` (cleared outputs, pinned parts, the
    history before a compaction) that only OpenCode holds, so that the output
    is the unpruned run. Empty when nothing is lost (``view="model"`` sessions
    carry no marks)."""
    from ctxcompact.formats.chat import is_observed, mini_swe_agent_command, swe_agent_command
    from ctxcompact.scans.parts import filter_pivot

    counted: dict[str, tuple[int, set[str]]] = {}

    def lost(what: str, session: Session) -> None:
        n, ids = counted.get(what, (0, set()))
        counted[what] = (n + 1, ids | {session.id})

    if format in _OPENCODE:
        return []
    own = {"swe-agent": swe_agent_command, "mini-swe-agent": mini_swe_agent_command}.get(format)
    for session in sessions:
        hidden = len(session.messages) - len(filter_pivot(session).messages)
        if hidden:
            n, ids = counted.get(_BEFORE_PIVOT, (0, set()))
            counted[_BEFORE_PIVOT] = (n + hidden, ids | {session.id})
        for message in session.messages:
            if format == "claude-code" and _system_prompt(message):
                lost("system prompt(s) written as Claude Code 'system' events, which are never "
                     "model input (Claude Code stores no system prompt)", session)  # fmt: skip
            for part in message.parts:
                if part.compacted:
                    lost("cleared tool output(s) written in full (the prune mark "
                         "time.compacted is OpenCode only; --view model writes the "
                         "placeholders the model is sent)", session)  # fmt: skip
                if part.pinned:
                    lost("pinned part(s) written unpinned (OpenCode only)", session)
                if part.type == "tool" and format in _STEPS_AS_TEXT and is_observed(part):
                    if own is None or own(message) is None:  # not this format's own step
                        lost("tool call(s) of a text-protocol step written as plain text "
                             "(no tool call when read back)", session)  # fmt: skip
                elif part.type == "reasoning" and format not in _KEEP_THINKING:
                    lost("thinking part(s) dropped", session)
                elif part.type not in _PORTABLE:
                    lost(f"{part.type} part(s) dropped (OpenCode only)", session)
    return [f"{n:,} {what}, in {len(ids):,} session(s)" for what, (n, ids) in counted.items()]


def _system_prompt(message: MessageWithParts) -> bool:
    """A system message the model is sent (text not ``ignored``) that did not come
    from a Claude Code event: ``to_claude_code`` writes it as a ``system`` event,
    which the Claude Code readers keep as a note never sent to the model."""
    if not isinstance(message.info, SystemMessage):
        return False
    record = source_of(message.info, claude_code=True)
    if claude_code_record(record) or (isinstance(record, Mapping) and "raw" in record):
        return False  # a Claude Code event (or line) of its own, written back as it was
    return any(p.type == "text" and p.text and not p.ignored for p in message.parts)


# The native reader builds on the registry above, so it is imported last.
from ctxcompact.formats.reader import (  # noqa: E402
    FileReport,
    IngestResult,
    RejectedLine,
    iter_jsonl,
    iter_sessions,
    read_jsonl,
    read_sessions,
)

__all__ = [
    "FORMATS",
    "FileReport",
    "IngestResult",
    "RejectedLine",
    "detect_format",
    "from_anthropic",
    "from_claude_code",
    "from_langchain",
    "from_mini_swe_agent",
    "from_openai_chat",
    "from_openai_responses",
    "from_opencode_messages",
    "from_openhands",
    "from_pydantic_ai",
    "from_swe_agent",
    "from_tau_bench",
    "iter_jsonl",
    "iter_sessions",
    "jsonl_format",
    "losses",
    "read",
    "read_document",
    "read_jsonl",
    "read_sessions",
    "session_from_json",
    "to_anthropic",
    "to_claude_code",
    "to_langchain",
    "to_mini_swe_agent",
    "to_openai_chat",
    "to_openai_responses",
    "to_opencode_messages",
    "to_openhands",
    "to_pydantic_ai",
    "to_swe_agent",
    "to_tau_bench",
    "write",
]
