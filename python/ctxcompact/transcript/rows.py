"""Sessions to part rows: ``sessions_to_table``, one row per part, the scan
columns and the rest of each session, message and part as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ctxcompact.errors import TranscriptError
from ctxcompact.models import Session
from ctxcompact.transcript.counts import (
    INPUT_HASH,
    OUTPUT_HASH,
    count_exact_parts,
    counted_field,
    output_units,
)
from ctxcompact.transcript.schema import DERIVED, OUTPUT_UNITS, SCHEMA
from ctxcompact.transcript.targets import TARGETS_DICTIONARY, encode_targets, tool_targets


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _part_row(part: dict[str, Any]) -> dict[str, Any]:
    """Scan columns of one part, and the rest of it as JSON."""
    rest = dict(part)
    row: dict[str, Any] = {"part_id": rest.pop("id"), "part_type": rest.pop("type")}
    kind = row["part_type"]
    if kind in ("text", "reasoning") and isinstance(rest.get("text"), str):
        row["output"] = rest.pop("text")
    if kind == "compaction" and isinstance(rest.get("auto"), bool):
        row["auto"] = rest.pop("auto")
    if kind == "tool" and isinstance(rest.get("tool"), str):
        row["tool"] = rest.pop("tool")
    state = rest.get("state")
    if kind == "tool" and isinstance(state, dict):
        state = rest["state"] = dict(state)
        row["status"] = state.pop("status", None)
        if "input" in state and state["input"] is not None:
            row["input"] = _dumps(state.pop("input"))
        # The model sees the output of a completed tool and the error of a failed one.
        field = "output" if row["status"] == "completed" else "error"
        if isinstance(state.get(field), str):
            row["output"] = state.pop(field)
        time = state.get("time")
        if isinstance(time, dict) and time.get("compacted") is not None:
            state["time"] = {k: v for k, v in time.items() if k != "compacted"}
            row["compacted_at"] = time["compacted"]
    row["part_json"] = _dumps(rest)
    return row


def sessions_to_table(sessions: Sequence[Session]) -> pa.Table:
    """One row per part (docs/schema.md); empty messages/sessions get one placeholder row.

    ``output_utf16`` is taken from the counts a store kept with a loaded
    session (``Session._stored``) for each part that still holds the text
    counted; every other output is counted here."""
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names if name not in DERIVED}
    rows = columns["part_id"]
    stored: dict[int, int] = {}  # row: its part's stored count

    def add(values: dict[str, Any]) -> None:
        for name, col in columns.items():
            col.append(values.get(name))

    exact: dict[int, dict[str, list[int | None]]] = {}  # row: its part's stored exact counts
    for session in sessions:
        export = session.to_export()
        private = session.__pydantic_private__  # not ``session._stored``: 40x slower
        kept = private.get("_stored") if private else None
        known = kept.by_id() if kept is not None else None
        known_exact = kept.exact_by_id() if kept is not None else None
        base = {"session_id": session.id, "session_json": _dumps(export["info"])}
        if not export.get("messages"):
            add(base)
        for message in export.get("messages", []):
            info = message["info"]
            head = {
                **base,
                "message_id": info["id"],
                "role": info["role"],
                "parent_id": info.get("parentID"),
                "summary": info.get("summary") is True,
                "finished": info.get("finish") is not None,
                "error": info.get("error") is not None,
                "message_json": _dumps(info),
            }
            parts = message.get("parts", [])
            if not parts:
                add(head)
            for i, part in enumerate(parts):
                row = _part_row(part)
                # A count is read only for the very str object it counted (the row's output).
                hit = known.get(row["part_id"]) if known is not None else None
                if hit is not None and hit[0] is row.get("output"):
                    stored[len(rows)] = hit[1]
                # read only where the text still hashes as counted (the scans check)
                if known_exact and (counts := known_exact.get(row["part_id"])):
                    exact[len(rows)] = counts
                add({**(head if i == 0 else _strip_first_row(head)), **row})
            base = {"session_id": session.id}  # session_json only on the first row
    try:
        table = pa.table(columns, schema=_WITHOUT_COUNTS)
    except UnicodeEncodeError as e:
        raise _unencodable(columns, e) from None
    table = table.append_column(SCHEMA.field(OUTPUT_UNITS), output_units(table, stored))
    table = table.append_column(TARGETS_DICTIONARY, encode_targets(tool_targets(table)))
    return _with_stored_exact(table, exact) if exact else table


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


def exact_part_counts(
    parts: Sequence[dict[str, Any]], families: Sequence[str]
) -> list[dict[str, list[int | None]] | None]:
    """Each part's exact counts under ``families`` as a store keeps them
    (``StoredCounts``): ``{family: [output tokens, output hash, input tokens,
    input hash]}`` of the ``output`` and ``input`` its row holds (None for
    a text it has not), counted in the core as ``Transcript.count`` counts
    them; None for a part with neither."""
    if not families or not parts:
        return [None] * len(parts)
    rows = [_part_row(p) for p in parts]
    columns = {c: [r.get(c) for r in rows] for c in ("output", "input")}
    try:
        table = pa.table({c: pa.array(v, pa.large_string()) for c, v in columns.items()})
    except UnicodeEncodeError:  # a lone surrogate: left uncounted, as output_utf16 leaves it
        return [None] * len(parts)
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


_WITHOUT_COUNTS = pa.schema([f for f in SCHEMA if f.name not in DERIVED])


def _unencodable(columns: dict[str, list[Any]], error: UnicodeEncodeError) -> TranscriptError:
    """Name the first value Arrow cannot hold: a lone surrogate is not UTF-8."""
    for name, values in columns.items():
        for row, value in enumerate(values):
            if isinstance(value, str):
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    return TranscriptError(
                        f"{name} holds a lone surrogate ({error.reason}), which UTF-8 and Arrow "
                        "cannot store; fix the text (e.g. decode with errors='replace')",
                        session_id=columns["session_id"][row],
                        message_id=columns["message_id"][row],
                        row=row,
                        column=name,
                    )
    return TranscriptError(f"a value is not valid UTF-8: {error}")


def _strip_first_row(head: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in head.items() if k not in ("session_json", "message_json")}
