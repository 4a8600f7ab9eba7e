"""Sessions to part rows: ``sessions_to_table``, a thin call into the core's
OpenCode mapper (``_core.session_rows``, the rules of ``ingest/opencode.rs``
that also read OpenCode JSONL): each session is serialized as the export it
is, one per line, and the core makes one row per part, the scan columns and
the rest of each session, message and part as JSON (docs/schema.md), with
``output_utf16`` and ``tool_target``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pydantic_core import PydanticSerializationError

from ctxcompact.errors import TranscriptError
from ctxcompact.models import AssistantMessage, Session, model_output
from ctxcompact.transcript.schema import DERIVED, OUTPUT_UNITS, SCHEMA, holds_names
from ctxcompact.transcript.targets import targets_as_dictionary


def sessions_to_table(sessions: Sequence[Session], *, threads: int | None = None) -> pa.Table:
    """One row per part (docs/schema.md); empty messages/sessions get one placeholder row.
    Mapped on ``threads`` threads (all cores by default).

    ``output_utf16`` is taken from the counts a store kept with a loaded
    session (``Session._stored``) for each part that still holds the text
    counted; every other output is counted by the core as it maps the row."""
    import ctxcompact._core as _core

    lines: list[bytes] = []
    failed: list[int] = []  # sessions that cannot be written as UTF-8 JSON
    for i, session in enumerate(sessions):
        _check_costs(session)
        try:
            lines.append(_export_json(session))
        except PydanticSerializationError:
            lines.append(b"")
            failed.append(i)
    if failed:
        _unencodable(sessions, lines, failed)  # raises, or mends `lines`
    table = targets_as_dictionary(pa.table(_core.session_rows(b"\n".join(lines), threads=threads)))
    stored = _stored_counts(sessions)
    if stored:
        units: list[int | None] = [None] * table.num_rows
        for row, n in stored.items():
            units[row] = n
        index = table.schema.get_field_index(OUTPUT_UNITS)
        counted = table.column(index).combine_chunks()
        table = table.set_column(index, SCHEMA.field(OUTPUT_UNITS),
                                 pc.coalesce(pa.array(units, pa.int64()), counted))  # fmt: skip
    return table


def _export_json(session: Session) -> bytes:
    """``session.to_export()`` as compact UTF-8 JSON, serialized by pydantic
    (the core writes every ``*_json`` value again as ``json.dumps`` would),
    with ``"messages": []`` when none were given (an export needs the list)."""
    if "messages" in session.model_fields_set:
        return session.__pydantic_serializer__.to_json(session, by_alias=True, exclude_unset=True)
    info = session.info
    text = info.__pydantic_serializer__.to_json(info, by_alias=True, exclude_unset=True)
    return b'{"info":' + text + b',"messages":[]}'


def _check_costs(session: Session) -> None:
    """A message ``cost`` that is NaN or infinite is refused: JSON has no
    such number (serialized, it would silently become null)."""
    for message in session.messages:
        info = message.info
        if (
            type(info) is AssistantMessage
            and info.cost is not None
            and not math.isfinite(info.cost)
        ):
            raise TranscriptError(
                f"message {info.id!r} has cost {info.cost}, which JSON cannot hold; give a "
                "finite number or none",
                session_id=session.id,
                message_id=info.id,
                column="message_json",
            )


def _stored_counts(sessions: Sequence[Session]) -> dict[int, int]:
    """``{row: stored output_utf16}`` for each part of a store-loaded session
    that still holds the very ``str`` object its store counted."""
    kept = []
    for i, session in enumerate(sessions):
        private = session.__pydantic_private__  # not ``session._stored``: 40x slower
        counts = private.get("_stored") if private else None
        known = counts.by_id() if counts is not None else None
        if known:
            kept.append((i, known))
    stored: dict[int, int] = {}
    if not kept:
        return stored
    row, last = 0, kept[-1][0]
    by_session = dict(kept)
    for i, session in enumerate(sessions[: last + 1]):
        known = by_session.get(i)
        if not session.messages:
            row += 1
        for message in session.messages:
            if known is None or not message.parts:
                row += max(1, len(message.parts))
                continue
            for part in message.parts:
                hit = known.get(part.id)
                if hit is not None and hit[0] is model_output(part):
                    stored[row] = hit[1]
                row += 1
    return stored


#: A code point UTF-8 cannot hold: half of a surrogate pair, alone.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _unencodable(sessions: Sequence[Session], lines: list[bytes], failed: list[int]) -> None:
    """Raise ``TranscriptError`` naming the first value (in column, then row
    order) that holds a lone surrogate, which UTF-8 and Arrow cannot store;
    the core maps the sessions with each such code point replaced by a
    marker, which shows where it lands. Sessions that pydantic could not
    serialize for another reason are written by ``json.dumps`` instead."""
    import ctxcompact._core as _core

    texts = {i: _dumps({"messages": [], **sessions[i].to_export()}) for i in failed}
    reason = None
    for i, text in texts.items():
        try:
            lines[i] = text.encode("utf-8")
        except UnicodeEncodeError as e:
            reason = reason or e.reason
    if reason is None:
        return  # every session written after all
    marker = next(c for c in map(chr, range(0xF0000, 0x110000))
                  if all(c not in t for t in texts.values())
                  and all(c.encode() not in line for line in lines))  # fmt: skip
    for i, text in texts.items():
        lines[i] = _SURROGATE.sub(marker, text).encode("utf-8")
    table = pa.table(_core.session_rows(b"\n".join(lines)))
    for name in SCHEMA.names:
        if name in DERIVED or not holds_names(SCHEMA.field(name).type):
            continue
        found = pc.fill_null(pc.match_substring(table.column(name), marker), False)
        row = int(pc.index(found, True).as_py())
        if row >= 0:
            ids = table.slice(row, 1).select(["session_id", "message_id"]).to_pylist()[0]
            sid, mid = (None if v is None else v.replace(marker, "\ufffd") for v in ids.values())
            raise TranscriptError(
                f"{name} holds a lone surrogate ({reason}), which UTF-8 and Arrow cannot store; "
                "fix the text (e.g. decode with errors='replace')",
                session_id=sid,
                message_id=mid,
                row=row,
                column=name,
            )
    raise TranscriptError(f"a value is not valid UTF-8: {reason}")


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
