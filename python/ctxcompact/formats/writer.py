"""Sessions out: ``write`` any of ``FORMATS`` (a file replaced whole or left as
it was), and ``losses``, what a format cannot hold of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxcompact._atomic import replacing
from ctxcompact.errors import FormatError, InputTypeError
from ctxcompact.formats.anthropic import to_anthropic, to_claude_code
from ctxcompact.formats.chat import (
    is_observed,
    mini_swe_agent_command,
    swe_agent_command,
    to_mini_swe_agent,
    to_openai_chat,
    to_swe_agent,
    to_tau_bench,
)
from ctxcompact.formats.detect import FORMATS
from ctxcompact.formats.documents import to_opencode_messages
from ctxcompact.formats.openhands import to_openhands
from ctxcompact.formats.responses import to_openai_responses
from ctxcompact.formats.source import claude_code_record, session_record, source_of
from ctxcompact.formats.views import View, viewed
from ctxcompact.models import MessageWithParts, Session, SystemMessage
from ctxcompact.policy import Policy


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
