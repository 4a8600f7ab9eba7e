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
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pydantic_core import PydanticSerializationError

from ctxcompact.errors import TranscriptError
from ctxcompact.models import AssistantMessage, Session, model_output
from ctxcompact.transcript.counts import INPUT_HASH, OUTPUT_HASH, count_exact_parts, counted_field
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
    stored, exact = _stored_counts(sessions)
    if stored:
        units: list[int | None] = [None] * table.num_rows
        for row, n in stored.items():
            units[row] = n
        index = table.schema.get_field_index(OUTPUT_UNITS)
        counted = table.column(index).combine_chunks()
        table = table.set_column(index, SCHEMA.field(OUTPUT_UNITS),
                                 pc.coalesce(pa.array(units, pa.int64()), counted))  # fmt: skip
    return _with_stored_exact(table, exact) if exact else table


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


def _stored_counts(
    sessions: Sequence[Session],
) -> tuple[dict[int, int], dict[int, dict[str, list[int | None]]]]:
    """``{row: stored output_utf16}`` for each part of a store-loaded session
    that still holds the very ``str`` object its store counted, and ``{row:
    its exact counts}`` the store kept (read only while the text still hashes
    as counted: the scans check)."""
    kept = []
    for i, session in enumerate(sessions):
        private = session.__pydantic_private__  # not ``session._stored``: 40x slower
        counts = private.get("_stored") if private else None
        if counts is not None and ((known := counts.by_id()) or counts.exact_by_id()):
            kept.append((i, (known, counts.exact_by_id())))
    stored: dict[int, int] = {}
    exact: dict[int, dict[str, list[int | None]]] = {}
    if not kept:
        return stored, exact
    row, last = 0, kept[-1][0]
    by_session = dict(kept)
    for i, session in enumerate(sessions[: last + 1]):
        mine = by_session.get(i)
        if not session.messages:
            row += 1
        for message in session.messages:
            if mine is None or not message.parts:
                row += max(1, len(message.parts))
                continue
            known, known_exact = mine
            for part in message.parts:
                hit = known.get(part.id)
                if hit is not None and hit[0] is model_output(part):
                    stored[row] = hit[1]
                if known_exact and (got := known_exact.get(part.id)):
                    exact[row] = got
                row += 1
    return stored, exact


def _with_stored_exact(table: pa.Table, exact: dict[int, dict[str, list[int | None]]]) -> pa.Table:
    """``table`` with the exact counts a store kept (``exact``, by row):
    ``Transcript.count``'s columns for each family, null (counted as the
    scan goes) for the rows without one; each count beside the hash of the
    text it counted, so a text changed since is counted again."""
    families = sorted({f for counts in exact.values() for f in counts})
    n = table.num_rows
    hashes: list[list[int | None]] = [[None] * n, [None] * n]
    for family in families:
        field = counted_field(f"{family}-exact")
        tokens: list[list[int | None]] = [[None] * n, [None] * n]
        for row, counts in exact.items():
            got = counts.get(family)
            if got is None:
                continue
            for k in (0, 1):  # output, input
                if got[2 * k] is not None and got[2 * k + 1] is not None:
                    tokens[k][row], hashes[k][row] = got[2 * k], got[2 * k + 1]
        for k, prefix in enumerate(("output_tokens_", "input_tokens_")):
            name = prefix + family
            table = table.append_column(field.with_name(name), pa.array(tokens[k], pa.int64()))
    table = table.append_column(OUTPUT_HASH, pa.array(hashes[0], pa.int64()))
    return table.append_column(INPUT_HASH, pa.array(hashes[1], pa.int64()))


def countable_texts(
    parts: Sequence[dict[str, Any]],
) -> tuple[list[str | None], list[str | None]] | None:
    """Each part's ``output`` and ``input`` as its row holds them: the text,
    reasoning or tool output/error the model reads, and a tool call's
    arguments as compact JSON, made by the core's OpenCode mapper itself
    (``_core.session_rows``, ``ingest/opencode.rs``: the parts as one
    message of one session), so a store counts exactly what a session's
    table counts. None when a text is not UTF-8 (a lone surrogate: left
    uncounted, as ``output_utf16`` leaves it; the table names it)."""
    import ctxcompact._core as _core

    message = {"info": {"id": "m", "role": "assistant"}, "parts": list(parts)}
    try:
        line = _dumps({"info": {"id": "s"}, "messages": [message]}).encode("utf-8")
    except UnicodeEncodeError:
        return None
    table = pa.table(_core.session_rows(line, threads=1))
    outputs: list[str | None] = table.column("output").to_pylist()
    inputs: list[str | None] = table.column("input").to_pylist()
    return outputs, inputs


def exact_part_counts(
    parts: Sequence[dict[str, Any]], families: Sequence[str]
) -> list[dict[str, list[int | None]] | None]:
    """Each part's exact counts under ``families`` as a store keeps them
    (``StoredCounts``): ``{family: [output tokens, output hash, input tokens,
    input hash]}`` of the ``output`` and ``input`` its row holds
    (``countable_texts``; None for a text it has not), counted in the core
    as ``Transcript.count`` counts them; None for a part with neither."""
    if not families or not parts:
        return [None] * len(parts)
    texts = countable_texts(parts)
    if texts is None:
        return [None] * len(parts)
    columns = dict(zip(("output", "input"), texts, strict=True))
    table = pa.table({c: pa.array(v, pa.large_string()) for c, v in columns.items()})
    out: list[dict[str, list[int | None]] | None] = [None] * len(parts)
    for family in families:
        counted = count_exact_parts(table, family)
        names = (f"output_tokens_{family}", OUTPUT_HASH, f"input_tokens_{family}", INPUT_HASH)
        values = [counted.column(c).to_pylist() for c in names]
        for i in range(len(parts)):
            got = [v[i] for v in values]
            for k, text in enumerate(("output", "input")):
                if columns[text][i] is None:
                    got[2 * k] = got[2 * k + 1] = None
            if any(v is not None for v in got):
                out[i] = {**(out[i] or {}), family: got}
    return out


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
