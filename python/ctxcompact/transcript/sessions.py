"""Part rows to sessions: ``table_to_sessions``, the rows checked (types,
codes, order, the ``*_json`` objects against the columns they repeat) before
any session is built, each error naming where.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from pydantic import ValidationError

from ctxcompact._json import loads
from ctxcompact.errors import (
    CompactionError,
    FormatError,
    InconsistentMessageError,
    MissingColumnError,
    NonContiguousError,
    NullValueError,
    UnknownValueError,
)
from ctxcompact.models import Session
from ctxcompact.transcript.schema import CODES, REQUIRED, ROLES, code_names, place_of


def table_to_sessions(table: pa.Table) -> list[Session]:
    """Rebuild the sessions. Tables without ``*_json`` columns give minimal models.

    Bad data is a typed error naming the column and, where it is one value,
    the session, message and row, raised before any session is built: a
    column of the wrong Arrow type (``ColumnTypeError``), an unknown role or
    status, or an int8 code that stands for none (``UnknownValueError``;
    ``role``, ``part_type`` and ``status`` may hold the codes docs/schema.md
    gives, read as their names: part type 127 is ``other``), rows out of order (the scans' checks,
    ``_core.check_table``), a ``*_json`` or ``input`` value that is not
    the JSON object a session holds there (``FormatError``), and a role, id,
    type or session id in a ``*_json`` object that is not the column's it
    repeats (``InconsistentMessageError``: the columns are what the scans
    read)."""
    for name in REQUIRED:
        if name not in table.column_names:
            raise MissingColumnError(f"missing column {name!r}", column=name)
    if "output" not in table.column_names and table.num_rows:
        # Counts (output_utf16) are enough for a scan, not for a session:
        # every text and tool output would come back empty.
        raise MissingColumnError(
            "missing column 'output': the sessions would have no text (a table of "
            "counts alone can be estimated and pruned, not turned into sessions)",
            column="output",
        )
    _check_table(table)
    # A part type coded 127 (``other``) names no type: a part_json type the
    # codes do not list is the one it stands for.
    coded_types = table.schema.field("part_type").type == pa.int8()
    rows = code_names(table).to_pylist()
    sessions: list[dict[str, Any]] = []
    # Per session: its first row, and each message's first row and part rows
    # (where a model's complaint about a value is found in the table).
    where: list[tuple[int, list[tuple[int, str, list[int]]]]] = []
    seen_sessions: set[str] = set()
    seen_messages: set[str] = set()
    current: tuple[str | None, str | None] = (None, None)  # the session and message read
    for i, row in enumerate(rows):
        sid = row["session_id"]
        if sid is None:
            raise NullValueError("session_id is null", row=i, column="session_id")
        if not sessions or current[0] != sid:
            if sid in seen_sessions:
                raise NonContiguousError(
                    "rows of a session are not contiguous", session_id=sid, row=i
                )
            seen_sessions.add(sid)
            seen_messages = set()
            info = _json_object(row, i, "session_json") if row.get("session_json") else {}
            info["id"] = sid  # the column's (a table's sessions may be renamed)
            sessions.append({"info": info, "messages": []})
            where.append((i, []))
            current = (sid, None)
        messages = sessions[-1]["messages"]
        mid = row["message_id"]
        if mid is None:
            continue  # the placeholder row of an empty session
        if not messages or current[1] != mid:
            if mid in seen_messages:
                raise NonContiguousError(
                    "rows of a message are not contiguous", session_id=sid, message_id=mid, row=i
                )
            seen_messages.add(mid)
            messages.append({"info": _message_info(row, i), "parts": []})
            where[-1][1].append((i, mid, []))
            current = (sid, mid)
        if row["part_type"] is not None:
            messages[-1]["parts"].append(_part(row, i, coded_types))
            where[-1][1][-1][2].append(i)
    built = []
    for session, (first, rows_of) in zip(sessions, where, strict=True):
        try:
            built.append(Session.model_validate(session))
        except ValidationError as e:
            raise _invalid(e, rows[first]["session_id"], first, rows_of) from None
    return built


def _check_table(table: pa.Table) -> None:
    """The scans' checks (``_core.check_table``) over the columns
    ``table_to_sessions`` reads; an error about one row names its session
    and message too."""
    import ctxcompact._core as _core

    try:
        _core.check_table(table)
    except CompactionError as e:
        row = e.row
        if row is None or e.session_id is not None or not 0 <= row < table.num_rows:
            raise
        ids = table.slice(row, 1).select(["session_id", "message_id"]).to_pylist()[0]
        e.session_id, e.message_id = ids["session_id"], ids["message_id"]
        text = str(e)
        old = place_of(None, None, row, e.column)
        if text.endswith(old):
            e.args = (text[: -len(old)] + place_of(e.session_id, e.message_id, row, e.column),)
        raise


def _json_object(row: dict[str, Any], i: int, column: str) -> dict[str, Any]:
    """The JSON object in ``row[column]`` (a ``*_json`` column, or a tool's
    ``input``), or a ``FormatError`` naming the value's place."""
    text = row[column]
    at = place_of(row["session_id"], row.get("message_id"), i, column)
    try:
        value = loads(text)
    except ValueError as e:
        why = f"{e.msg} at character {e.pos}" if isinstance(e, json.JSONDecodeError) else str(e)
        raise FormatError(
            f"{column} is not valid JSON ({why}){at}",
            session_id=row["session_id"], message_id=row.get("message_id"), row=i, column=column,
        ) from None  # fmt: skip
    if not isinstance(value, dict):
        raise FormatError(
            f"{column} holds a JSON {_json_kind(value)}, not the JSON object a session keeps "
            f"there{at}",
            session_id=row["session_id"], message_id=row.get("message_id"), row=i, column=column,
        )  # fmt: skip
    return value


def _not_object(row: dict[str, Any], i: int, column: str, key: str, value: Any) -> FormatError:
    return FormatError(
        f"{column}'s {key} is a JSON {_json_kind(value)}, not an object"
        f"{place_of(row['session_id'], row.get('message_id'), i, column)}",
        session_id=row["session_id"], message_id=row.get("message_id"), row=i, column=column,
    )  # fmt: skip


def _json_kind(value: Any) -> str:
    kinds = ((list, "array"), (str, "string"), (bool, "boolean"), (int | float, "number"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "null")


#: The column a session's value comes from, by the model field's path under
#: a part (``state.status``) or a message (``role``); the rest is kept in
#: ``part_json`` / ``message_json`` / ``session_json``.
_PART_COLUMNS: dict[tuple[str, ...], str] = {
    ("id",): "part_id", ("type",): "part_type", ("text",): "output", ("tool",): "tool",
    ("auto",): "auto", ("state", "status"): "status", ("state", "input"): "input",
    ("state", "output"): "output", ("state", "error"): "output",
    ("state", "time", "compacted"): "compacted_at",
}  # fmt: skip
_MESSAGE_COLUMNS: dict[tuple[str, ...], str] = {
    ("role",): "role", ("parentID",): "parent_id", ("summary",): "summary",
    ("finish",): "finished", ("error",): "error",
}  # fmt: skip


def _invalid(
    error: ValidationError,
    sid: str,
    first: int,
    rows_of: list[tuple[int, str, list[int]]],
) -> FormatError:
    """The model's first complaint about a rebuilt session, as a
    ``FormatError`` naming the row and column the value came from."""
    problem = error.errors()[0]
    loc = list(problem["loc"])
    row, mid, column = first, None, "session_json"
    if len(loc) >= 2 and loc[0] == "messages" and isinstance(loc[1], int) and loc[1] < len(rows_of):
        start, mid, parts = rows_of[loc[1]]
        row, column, rest = start, "message_json", loc[2:]
        if rest[:1] == ["info"]:
            keys = tuple(str(x) for x in rest[1:] if x not in ("user", "assistant", "system"))
            column = _MESSAGE_COLUMNS.get(keys[:1], "message_json")
        elif rest[:1] == ["parts"] and len(rest) > 1 and isinstance(rest[1], int):
            row = parts[rest[1]] if rest[1] < len(parts) else start
            field = tuple(str(x) for x in rest[2:])
            column = next((c for path, c in _PART_COLUMNS.items() if field[: len(path)] == path),
                          "part_json")  # fmt: skip
    path = ".".join(str(x) for x in loc) or "the session"
    value = problem.get("input")
    shown = repr(value) if len(repr(value)) <= 60 else f"{type(value).__name__}"
    return FormatError(
        f"the rows do not make a valid session: {path}: {problem['msg']} (got {shown})"
        f"{place_of(sid, mid, row, column)}",
        session_id=sid, message_id=mid, row=row, column=column,
    )  # fmt: skip


def _message_info(row: dict[str, Any], i: int) -> dict[str, Any]:
    role = row["role"]
    if role is None:
        raise NullValueError("role is null", session_id=row["session_id"], row=i, column="role")
    if role not in ROLES:
        raise UnknownValueError(
            f"unknown role {role!r} for an OpenCode session",
            session_id=row["session_id"],
            message_id=row["message_id"],
            row=i,
            column="role",
        )
    if row.get("message_json"):
        info = _json_object(row, i, "message_json")
        # The role and message_id columns are the message's role and id (what
        # the scans read); message_json holds the rest of the info, so a role
        # or id there is the same one again or a contradiction. Where it
        # belongs (sessionID) follows the session_id column: renaming a
        # table's sessions rewrites that column only.
        if "role" in info and info["role"] != role:
            sid, mid = row["session_id"], row["message_id"]
            raise InconsistentMessageError(
                f"message_json's role {json.dumps(info['role'], ensure_ascii=False)} disagrees "
                f"with the role column's {json.dumps(role)} (the column is the message's "
                f"role){place_of(sid, mid, i, 'message_json')}",
                session_id=sid, message_id=mid, row=i, column="message_json",
            )  # fmt: skip
        _same(info, "id", row, i, "message_json", "message_id", "message's id")
        _follow(info, "sessionID", row, "session_id")
        info["role"], info["id"] = role, row["message_id"]
    else:
        info = {"id": row["message_id"], "sessionID": row["session_id"], "role": role}
    # The parent_id column is where the message sits in the thread (what the
    # pivot reads), for every role: it wins over message_json's parentID as
    # sessionID follows session_id (a user message keeps its parentID as an
    # extra key); a null column leaves message_json's.
    if row.get("parent_id") is not None:
        info["parentID"] = row["parent_id"]
    if role == "assistant":
        _assistant_flags(info, row)
    return info


#: What a finished / failed message holds when only the table's flag says so
#: (a table without ``message_json``): the flag is what the scans read.
_FINISH = "stop"
_ERROR = {"name": "UnknownError", "data": {"message": "error flag of the part-row table"}}


def _assistant_flags(info: dict[str, Any], row: dict[str, Any]) -> None:
    """Make ``info`` read back as the row's scan columns (``summary``,
    ``finished``, ``error``; ``parent_id`` for every role in ``_message_info``),
    which win over ``message_json``: a table without it would otherwise lose
    every completed summary's pivot. A null or absent column leaves ``info``
    as it is."""
    if row.get("summary") is True:
        info["summary"] = True
    elif row.get("summary") is False and info.get("summary") is True:
        del info["summary"]
    for column, key, value in (("finished", "finish", _FINISH), ("error", "error", _ERROR)):
        flag = row.get(column)
        if flag is True and info.get(key) is None:
            info[key] = value
        elif flag is False and info.get(key) is not None:
            del info[key]


def _same(
    info: dict[str, Any],
    key: str,
    row: dict[str, Any],
    i: int,
    json_column: str,
    column: str,
    what: str,
) -> None:
    """A ``key`` of the object in ``json_column`` that repeats ``column`` (a
    part's or message's id, type or session) says what the column says, or
    the rows contradict themselves: an ``InconsistentMessageError`` naming
    both values and where (column ``json_column``). A null on either side
    says nothing: the column's value is the part's (or message's), or the
    JSON's when the column is null."""
    value, truth = info.get(key), row.get(column)
    if value is None or truth is None or value == truth:
        return
    sid, mid = row["session_id"], row.get("message_id")
    raise InconsistentMessageError(
        f"{json_column}'s {key} {json.dumps(value, ensure_ascii=False)} disagrees with the "
        f"{column} column's {json.dumps(truth, ensure_ascii=False)} (the column is the "
        f"{what}){place_of(sid, mid, i, json_column)}",
        session_id=sid, message_id=mid, row=i, column=json_column,
    )  # fmt: skip


def _follow(info: dict[str, Any], key: str, row: dict[str, Any], column: str) -> None:
    """A ``key`` of a ``*_json`` object that says where the row belongs (its
    message or session) is the ``column``'s value, the one the scans group
    by: a table whose ids were renamed (its ``session_id`` column rewritten
    to make ids unique) reads as renamed. Absent stays absent (a session
    converts back as it was); a null column leaves the JSON's value."""
    if info.get(key) is not None and row.get(column) is not None:
        info[key] = row[column]


#: The part types that have a code (``CODES``): a part_json type of a part
#: coded 127 (``other``) must be none of them.
_CODED_TYPES = frozenset(CODES["part_type"][1].values()) - {"other"}


def _part(row: dict[str, Any], i: int, coded_types: bool = False) -> dict[str, Any]:
    """The part of a part row (``coded_types``: ``part_type`` held int8 codes)."""
    part = _json_object(row, i, "part_json") if row.get("part_json") else {}
    # The part_id and part_type columns say which part this is (what the
    # scans read); part_json holds the rest of it, so the same keys there
    # repeat them or contradict. Where it belongs (messageID, sessionID)
    # follows the message_id and session_id columns, as for a message.
    kind = row["part_type"]
    named = part.get("type")
    if not (coded_types and kind == "other" and isinstance(named, str)
            and named not in _CODED_TYPES):  # fmt: skip
        _same(part, "type", row, i, "part_json", "part_type", "part's type")
    else:
        kind = named  # code 127: the name part_json keeps is the part's type
    _same(part, "id", row, i, "part_json", "part_id", "part's id")
    _follow(part, "messageID", row, "message_id")
    _follow(part, "sessionID", row, "session_id")
    pid = row.get("part_id")
    if pid is None:  # no part_id (a foreign table): part_json's, if it has one
        pid = part.get("id") if part.get("id") is not None else ""
    part = {**part, "id": pid, "type": kind}
    if kind in ("text", "reasoning") and row.get("output") is not None:
        part["text"] = row["output"]
    if kind == "compaction" and row.get("auto") is not None:
        part["auto"] = row["auto"]
    if kind == "tool":
        if row.get("tool") is not None:
            part["tool"] = row["tool"]
        state = part.get("state") or {}
        if not isinstance(state, dict):
            raise _not_object(row, i, "part_json", "state", state)
        state = dict(state)
        if row.get("status") is not None:
            state["status"] = row["status"]
        if row.get("input") is not None:
            state["input"] = _json_object(row, i, "input")
        if row.get("output") is not None:
            state["output" if state.get("status") == "completed" else "error"] = row["output"]
        if row.get("compacted_at") is not None:
            time = state.get("time") or {}
            if not isinstance(time, dict):
                raise _not_object(row, i, "part_json", "state.time", time)
            state["time"] = {**time, "compacted": row["compacted_at"]}
        if state:
            part["state"] = state
    return part
