"""The part-row table's schema (docs/schema.md): its columns, the derived
ones, and the int8 codes ``role``, ``part_type`` and ``status`` may hold.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact.errors import UnknownValueError


def typed_columns(kind: pa.DataType, *names: str) -> list[pa.Field]:
    """Columns of one type, in order: a run of a schema's like columns."""
    return [pa.field(name, kind) for name in names]


SCHEMA = pa.schema(
    [
        ("session_id", pa.string()),
        ("message_id", pa.string()),
        ("role", pa.string()),
        ("parent_id", pa.string()),
        ("summary", pa.bool_()),
        ("finished", pa.bool_()),
        ("error", pa.bool_()),
        ("part_id", pa.string()),
        ("part_type", pa.string()),
        ("tool", pa.string()),
        ("status", pa.string()),
        ("input", pa.large_string()),
        ("output", pa.large_string()),
        ("compacted_at", pa.int64()),
        ("auto", pa.bool_()),
        ("session_json", pa.large_string()),
        ("message_json", pa.large_string()),
        ("part_json", pa.large_string()),
        # Each output's UTF-16 length, counted once when the table is made;
        # derived from ``output`` (a table without it is measured from the text).
        ("output_utf16", pa.int64()),
        # Each tool call's supersession target, worked out once from ``tool``
        # and ``input`` (``tool_targets``): "" where it has none. A dictionary
        # (``TARGETS_DICTIONARY``, one dictionary for the whole column, so a
        # table's chunking never shows in it), which supersession reads by key.
        ("tool_target", pa.dictionary(pa.int32(), pa.large_string())),
    ]
)
#: The counted-once output lengths column (``scans.with_output_units``).
OUTPUT_UNITS = "output_utf16"
#: The worked-out-once supersession targets column (``scans.with_tool_targets``).
TOOL_TARGET = "tool_target"
#: The columns derived from others when a table is made.
DERIVED = (OUTPUT_UNITS, TOOL_TARGET)
#: Field metadata of a family's counted column: the table it was counted with.
UNITS_KEY = "ctxcompact.units"
#: The columns the scans read (the schema minus the ``*_json`` columns and
#: the derived counts, which are optional).
SCAN_COLUMNS = [name for name in SCHEMA.names if not name.endswith("_json") and name not in DERIVED]
REQUIRED = ("session_id", "message_id", "role", "part_type")
ROLES = {"user", "assistant", "system"}
#: What the int8 codes docs/schema.md allows in ``role``, ``part_type`` and
#: ``status`` stand for (the core's ``codes.rs``), by column: what an error
#: calls the column's value, and each code's name. Part type 127 is ``other``:
#: a type the core does not know (its name is not in the table).
CODES: dict[str, tuple[str, dict[int, str]]] = {
    "role": ("role", dict(enumerate(("user", "assistant", "system", "tool")))),
    "part_type": ("part type", {
        **dict(enumerate(("text", "tool", "compaction", "file", "reasoning", "step-start",
                          "step-finish", "subtask", "snapshot", "patch", "agent", "retry"))),
        127: "other",
    }),
    "status": ("tool status", dict(enumerate(("pending", "running", "completed", "error")))),
}  # fmt: skip


def place_of(session_id: Any, message_id: Any, row: int | None, column: str | None) -> str:
    """Where a value is, as the core's errors say it: ``(session "s", message
    "m", row 3, column "c")``."""
    found = [
        f"{label} {json.dumps(value, ensure_ascii=False) if isinstance(value, str) else value}"
        for label, value in (("session", session_id), ("message", message_id),
                             ("row", row), ("column", column))
        if value is not None
    ]  # fmt: skip
    return f" ({', '.join(found)})" if found else ""


def holds_names(kind: pa.DataType) -> bool:
    """``kind`` is one of docs/schema.md's "string" types (or a dictionary of one)."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or pa.types.is_string_view(kind))  # fmt: skip


def mixed_codes(schemas: Iterable[pa.Schema]) -> list[str]:
    """The columns of ``CODES`` (``role``, ``part_type``, ``status``) that hold
    int8 codes in some of ``schemas`` and names (a string type) in others.
    docs/schema.md allows either form in each table, but tables joined into
    one must agree: a reader of several files reads these columns' codes as
    names (``code_names(table, mixed_codes(...))``) before joining them.
    A column of another type (``int32``, say) is no form of the schema's
    and is left to the join, which refuses it."""
    coded: set[str] = set()
    named: set[str] = set()
    for schema in schemas:
        for column in CODES:
            index = schema.get_field_index(column)
            if index < 0:
                continue
            kind = schema.field(index).type
            if kind == pa.int8():
                coded.add(column)
            elif holds_names(kind):
                named.add(column)
    return [column for column in CODES if column in coded and column in named]


def code_names(table: pa.Table, columns: Iterable[str] | None = None) -> pa.Table:
    """``table`` with each of ``role``, ``part_type`` and ``status`` (or of
    ``columns`` among them) that holds int8 codes (docs/schema.md) as the
    names they stand for (``CODES``; a null stays null), the columns of
    another type as they are. A code that stands for nothing is the core's
    ``UnknownValueError``, naming the session, message, row and column
    (``unknown role "7" (...)``)."""
    chosen = set(CODES if columns is None else columns)
    for column, (what, names) in CODES.items():
        if column not in chosen:
            continue
        index = table.schema.get_field_index(column)
        if index < 0 or table.schema.field(index).type != pa.int8():
            continue
        codes = table.column(index)
        # Every int8 shifted to 0..255 looks its name up (None: no name).
        lookup = pa.array([names.get(key - 128) for key in range(256)], pa.string())
        named = pc.take(lookup, pc.add(codes.cast(pa.int16()), 128))
        unknown = pc.and_(pc.is_null(named), pc.is_valid(codes))
        if pc.any(unknown).as_py():
            row = int(pc.index(unknown, True).as_py())
            ids = table.slice(row, 1).select(["session_id", "message_id"]).to_pylist()[0]
            sid, mid = ids["session_id"], ids["message_id"]
            code = str(codes[row].as_py())
            raise UnknownValueError(
                f"unknown {what} {json.dumps(code)}{place_of(sid, mid, row, column)}",
                session_id=sid, message_id=mid, row=row, column=column,
            )  # fmt: skip
        table = table.set_column(index, pa.field(column, pa.string()), named)
    return table
