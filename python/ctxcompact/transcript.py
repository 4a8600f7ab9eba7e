"""``Transcript``: many sessions as one Arrow table, one row per part (docs/schema.md).

Sessions convert to and from the table losslessly: the scan columns hold what
the Rust core reads; the ``*_json`` columns hold everything else, so
``table_to_sessions(sessions_to_table(s))`` gives back the same export. The
scan columns are the source of truth when converting back (``compacted_at``
set by ``mark_pruned`` becomes ``state.time.compacted``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ValidationError

from ctxcompact._json import loads
from ctxcompact.errors import (
    ColumnTypeError,
    CompactionError,
    DuplicateSessionError,
    FormatError,
    InconsistentMessageError,
    InputTypeError,
    MissingColumnError,
    NonContiguousError,
    NullValueError,
    SchemaError,
    TranscriptError,
    UnknownValueError,
)
from ctxcompact.models import Session

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


def count_texts(texts: Sequence[str | None]) -> list[int | None]:
    """Each text's ``output_utf16`` (the core's counter ``count_output_units``
    runs); ``None`` for ``None`` and for a text UTF-8 cannot hold (a lone
    surrogate: it is left to the table, which names it)."""
    import ctxcompact._core as _core

    try:
        values = pa.array(texts, pa.large_string())
    except UnicodeEncodeError:
        if len(texts) == 1:
            return [None]
        return [n for text in texts for n in count_texts([text])]
    counts: list[int | None] = pa.chunked_array(
        _core.count_units(values, "opencode", 1), type=pa.int64()
    ).to_pylist()
    return counts


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

    for session in sessions:
        export = session.to_export()
        private = session.__pydantic_private__  # not ``session._stored``: 40x slower
        kept = private.get("_stored") if private else None
        known = kept.by_id() if kept is not None else None
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
                add({**(head if i == 0 else _strip_first_row(head)), **row})
            base = {"session_id": session.id}  # session_json only on the first row
    try:
        table = pa.table(columns, schema=_WITHOUT_COUNTS)
    except UnicodeEncodeError as e:
        raise _unencodable(columns, e) from None
    table = table.append_column(SCHEMA.field(OUTPUT_UNITS), _output_units(table, stored))
    return table.append_column(TARGETS_DICTIONARY, encode_targets(tool_targets(table)))


def _output_units(table: pa.Table, stored: Mapping[int, int]) -> pa.ChunkedArray | pa.Array:
    """``output_utf16``: the counts a store kept (``stored``, by row), the
    other outputs counted now."""
    if not stored:
        return count_output_units(table)
    units: list[int | None] = [None] * table.num_rows
    for at, n in stored.items():
        units[at] = n
    counts = pa.array(units, pa.int64())
    if len(stored) < table.num_rows - table.column("output").null_count:
        # Outputs without a stored count (edited, or rows of an older store): count those.
        missing = pc.and_(pc.is_null(counts), pc.is_valid(table.column("output"))).combine_chunks()
        fresh = count_output_units(table.select(["output"]).filter(missing))
        counts = pc.replace_with_mask(counts, missing, fresh.combine_chunks())
    return pc.fill_null(counts, 0)


_WITHOUT_COUNTS = pa.schema([f for f in SCHEMA if f.name not in DERIVED])


def tool_targets(table: pa.Table, threads: int | None = None) -> pa.ChunkedArray:
    """Each row's supersession target (the ``tool_target`` column), worked
    out from ``tool`` and ``input`` in Rust on the thread pool:
    ``file:<path>``, ``cmd:<n>:<tool>:<command>`` (``n`` the tool name's
    length in UTF-8 bytes) or ``""`` when the call has none (docs/schema.md).
    No null, so the column's statistics prove every row worked out."""
    import ctxcompact._core as _core

    return pa.chunked_array(
        _core.tool_targets(table.select(["tool", "input"]), threads), type=pa.large_string()
    )


#: ``tool_target`` as the library makes it: a dictionary, read by key.
TARGETS_DICTIONARY = SCHEMA.field(TOOL_TARGET)


def encode_targets(values: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    """``tool_target`` values (plain strings, or a dictionary of any layout)
    as ``TARGETS_DICTIONARY``: one dictionary shared by every chunk, its
    values in order of first occurrence. The layout follows from the values
    alone, so the same targets chunked differently (threads, windows, row
    groups read back) compare equal, and supersession reads each dictionary
    value once however many chunks share it."""
    if isinstance(values, pa.Array):
        values = pa.chunked_array([values])
    if values.type != pa.large_string():
        values = values.cast(pa.large_string())  # a dictionary is decoded first
    encoded = pc.dictionary_encode(values)
    if encoded.num_chunks == 0:
        return pa.chunked_array([], TARGETS_DICTIONARY.type)
    return encoded


def _strings(kind: pa.DataType) -> bool:
    """A string type, or a dictionary of one."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)
    )


def _one_dictionary(column: pa.ChunkedArray) -> bool:
    """Every chunk shares the first chunk's dictionary (the same buffers)."""
    if column.num_chunks < 2:
        return True
    first = [b.address if b is not None else 0 for b in column.chunk(0).dictionary.buffers()]
    for chunk in column.iterchunks():
        buffers = chunk.dictionary.buffers()
        if [b.address if b is not None else 0 for b in buffers] != first:
            return False
    return True


def targets_as_dictionary(table: pa.Table) -> pa.Table:
    """``table`` with its ``tool_target`` (if any) as the library makes it
    (``encode_targets``): plain strings, a Parquet file's
    ``dictionary<int32, string>`` or per-chunk dictionaries become one
    ``TARGETS_DICTIONARY``, so tables holding it either way join as one and
    compare equal. A column that is one such dictionary already is kept."""
    if TOOL_TARGET not in table.column_names:
        return table
    index = table.schema.get_field_index(TOOL_TARGET)
    column = table.column(index)
    if not _strings(column.type):
        return table  # left to the scans, which name the column's type
    if column.type == TARGETS_DICTIONARY.type and _one_dictionary(column):
        if table.schema.field(index) == TARGETS_DICTIONARY:
            return table
        return table.set_column(index, TARGETS_DICTIONARY, column)
    return table.set_column(index, TARGETS_DICTIONARY, encode_targets(column))


#: The Arrow types an ``output`` column is counted in (the core's string types).
OUTPUT_TYPES = "utf8, large_utf8, utf8_view or a dictionary of them"


def count_output_units(
    table: pa.Table, method: str = "opencode", threads: int | None = None
) -> pa.ChunkedArray:
    """Each output's length units under ``method`` (0 where the output is
    null, as a null output is measured): for opencode its UTF-16 length
    (``output_utf16``), for a tokenizer family its table's sum. Counted in Rust
    on the thread pool (all cores by default). A count column the library
    writes has no null, so its statistics prove every row counted."""
    import ctxcompact._core as _core

    counts = pa.chunked_array(
        _core.count_units(table.column("output"), method, threads), type=pa.int64()
    )
    return pc.fill_null(counts, 0)


def counted_field(method: str) -> pa.Field:
    """The column that holds ``method``'s counts, with the ``ctxcompact.units``
    metadata naming the family table they are made with (``ConfigError`` for
    a method that has none: ``ceil-bytes`` reads the texts' byte lengths)."""
    import ctxcompact._core as _core
    from ctxcompact.errors import ConfigError

    spec = _core.counted_column(method)
    if spec is None:
        raise ConfigError(
            f"the {method} estimate has no counted column: it reads the texts' byte lengths"
        )
    name, units = spec
    return pa.field(name, pa.int64(), metadata=None if units is None else {UNITS_KEY: units})


def counted_columns(schema: pa.Schema, *, current: bool = True) -> dict[str, str]:
    """The counted columns of ``schema`` by name, with the method each holds:
    ``output_utf16`` (opencode) and ``output_units_<family>``. ``current``:
    only those the scans read, i.e. a family's counts made with this
    release's table of it (an older table's counts are measured again)."""
    found: dict[str, str] = {}
    for field in schema:
        if field.name == OUTPUT_UNITS:
            found[field.name] = "opencode"
        elif field.name.startswith(_FAMILY_PREFIX):
            method = field.name.removeprefix(_FAMILY_PREFIX)
            try:
                want = counted_field(method)
            except CompactionError:
                continue  # not a family of this release
            if want.name == field.name and (not current or field.metadata == want.metadata):
                found[field.name] = method
    return found


_FAMILY_PREFIX = "output_units_"

#: Each output's text hash beside its exact counts (``count_exact_parts``).
OUTPUT_HASH = "output_hash"
_EXACT_PREFIX = "output_tokens_"


def count_exact_parts(table: pa.Table, family: str, threads: int | None = None) -> pa.Table:
    """``table`` with each output's exact tokens under ``family`` (texts,
    reasoning and tool outputs: ``output_tokens_<family>``, its field stamped
    ``<family>-exact``) and each output's text hash (``output_hash``), counted
    in Rust on the thread pool. The scans read a count only under that
    family's exact method and only where the row's text still hashes as it
    did when counted: a text changed since is counted again, never read
    stale. Counting again keeps every count whose text is unchanged and
    counts only the others."""
    import ctxcompact._core as _core
    from ctxcompact.scans.vocabularies import core_name

    core_name(family)  # ConfigError for an unknown family; loads a vocabulary not built in
    field = counted_field(f"{family}-exact")
    output = table.column("output")
    hashes = pc.fill_null(pa.chunked_array(_core.text_hashes(output, threads), type=pa.int64()), 0)
    stale = None
    if field.name in table.column_names and OUTPUT_HASH in table.column_names:
        old = table.column(field.name)
        if table.schema.field(field.name).metadata == field.metadata and old.type == pa.int64():
            same = pc.fill_null(pc.equal(table.column(OUTPUT_HASH).cast(pa.int64()), hashes), False)
            stale = pc.or_(pc.invert(same), pc.is_null(old)).combine_chunks()
    if stale is None:
        counts = count_output_units(table, f"{family}-exact", threads)
    else:
        fresh = count_output_units(table.select(["output"]).filter(stale), f"{family}-exact",
                                   threads)  # fmt: skip
        counts = pc.replace_with_mask(table.column(field.name).combine_chunks(), stale,
                                      fresh.combine_chunks())  # fmt: skip
    hash_field = pa.field(OUTPUT_HASH, pa.int64())
    for name, field_, values in ((field.name, field, counts), (OUTPUT_HASH, hash_field, hashes)):
        index = table.schema.get_field_index(name)
        if index < 0:
            table = table.append_column(field_, values)
        else:
            table = table.set_column(index, field_, values)
    return table


def exact_families(schema: pa.Schema) -> list[str]:
    """The families whose exact counts ``schema`` holds, stamped as this
    release writes them (with ``output_hash``, without which none is read)."""
    if OUTPUT_HASH not in schema.names:
        return []
    found = []
    for field in schema:
        if field.name.startswith(_EXACT_PREFIX):
            family = field.name.removeprefix(_EXACT_PREFIX)
            if field.metadata == {UNITS_KEY.encode(): f"{family}-exact".encode()}:
                found.append(family)
    return found


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


def _set_column(table: pa.Table, name: str, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    index = table.schema.get_field_index(name)
    field = pa.field(name, values.type)
    if index < 0:
        return table.append_column(field, values)
    return table.set_column(index, field, values)


def _strip_first_row(head: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in head.items() if k not in ("session_json", "message_json")}


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


def relocate(error: CompactionError, path: Any, row: int | None = None) -> CompactionError:
    """``error``, about row ``error.row`` of a piece of a table (a batch, a
    concatenation of files), made to name the row ``row`` of the file
    ``path`` it is (``row=None``: no row of it is known; ``path=None``: no
    file). Its message says so: every "row N" of ``error.row`` becomes "row
    ``row``" and "``path``: " leads it (once); its ``row`` becomes ``row``.
    The same error is returned, changed (class and other attributes kept)."""
    text = str(error)
    if row is not None and error.row is not None and row != error.row:
        text = re.sub(rf"\brow {error.row}\b", f"row {row}", text)
    if path is not None and not text.startswith(f"{path}: "):
        text = f"{path}: {text}"
    error.args = (text, *error.args[1:])
    error.row = row
    return error


def _at(session_id: Any, message_id: Any, row: int | None, column: str | None) -> str:
    """Where a value is, as the core's errors say it: ``(session "s", message
    "m", row 3, column "c")``."""
    found = [
        f"{label} {json.dumps(value, ensure_ascii=False) if isinstance(value, str) else value}"
        for label, value in (("session", session_id), ("message", message_id),
                             ("row", row), ("column", column))
        if value is not None
    ]  # fmt: skip
    return f" ({', '.join(found)})" if found else ""


def _holds_names(kind: pa.DataType) -> bool:
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
            elif _holds_names(kind):
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
                f"unknown {what} {json.dumps(code)}{_at(sid, mid, row, column)}",
                session_id=sid, message_id=mid, row=row, column=column,
            )  # fmt: skip
        table = table.set_column(index, pa.field(column, pa.string()), named)
    return table


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
        old = _at(None, None, row, e.column)
        if text.endswith(old):
            e.args = (text[: -len(old)] + _at(e.session_id, e.message_id, row, e.column),)
        raise


def _json_object(row: dict[str, Any], i: int, column: str) -> dict[str, Any]:
    """The JSON object in ``row[column]`` (a ``*_json`` column, or a tool's
    ``input``), or a ``FormatError`` naming the value's place."""
    text = row[column]
    at = _at(row["session_id"], row.get("message_id"), i, column)
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
        f"{_at(row['session_id'], row.get('message_id'), i, column)}",
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
        f"{_at(sid, mid, row, column)}",
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
                f"role){_at(sid, mid, i, 'message_json')}",
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
        f"{what}){_at(sid, mid, i, json_column)}",
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


def unique_sessions(sessions: list[Session]) -> list[Session]:
    """``sessions``, or ``DuplicateSessionError`` when two share an id (a scan
    or a replay would read their rows as one session's)."""
    seen: dict[str, int] = {}
    for i, session in enumerate(sessions):
        first = seen.setdefault(session.id, i)
        if first != i:
            raise DuplicateSessionError(
                f"session id {session.id!r} is repeated: sessions {first} and {i} "
                "(ids must be unique; name sessions by path when reading a folder)",
                session_id=session.id, row=i,
            )  # fmt: skip
    return sessions


def _session_list(sessions: Any) -> list[Session]:
    """``sessions`` as a list, each item a ``Session`` (``InputTypeError``
    naming the first that is not, by its index)."""
    if isinstance(sessions, Session | str | bytes | Mapping) or not isinstance(sessions, Iterable):
        one = " (one Session: pass [session])" if isinstance(sessions, Session) else ""
        raise InputTypeError(
            f"from_sessions takes a list of Sessions, got {type(sessions).__name__}{one}"
        )
    items = list(sessions)
    for i, item in enumerate(items):
        if not isinstance(item, Session):
            hint = " (a session dict: Session.model_validate(it) first)"
            raise InputTypeError(
                f"from_sessions: item {i} of sessions is not a Session (got "
                f"{type(item).__name__}){hint if isinstance(item, Mapping) else ''}",
                row=i,
            )
    return items


def _column_values(table: pa.Table, name: Any, values: Any) -> pa.Array | pa.ChunkedArray:
    """``with_column``'s arguments checked: ``name`` a string, ``values`` an
    Arrow array (or a list, converted) of one value per row."""
    if not isinstance(name, str):
        raise InputTypeError(f"with_column: name is a column name (str), got {type(name).__name__}")
    if isinstance(values, list | tuple):
        index = SCHEMA.get_field_index(name)
        try:
            values = pa.array(values, SCHEMA.field(index).type if index >= 0 else None)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
            raise InputTypeError(
                f"with_column: values for {name!r} cannot be made an Arrow array ({e})",
                column=name,
            ) from None
    elif not isinstance(values, pa.Array | pa.ChunkedArray):
        raise InputTypeError(
            f"with_column: values for {name!r} are a pyarrow Array or ChunkedArray (or a "
            f"list), got {type(values).__name__}",
            column=name,
        )
    if len(values) != table.num_rows:
        raise SchemaError(
            f"with_column: {len(values)} values for {name!r}, but the transcript has "
            f"{table.num_rows} rows (one value per row)",
            column=name,
        )
    return values


class Transcript:
    """Columnar transcripts of any number of sessions.

    Wraps a ``pyarrow.Table`` without copying it. Build one from pydantic
    sessions (``from_sessions``) or from any Arrow tabular object
    (``from_arrow``: pyarrow, polars, duckdb, a Parquet read); the scans read
    it in place from Rust with the GIL released.
    """

    __slots__ = ("_table",)

    def __init__(self, table: pa.Table) -> None:
        if not isinstance(table, pa.Table):
            raise InputTypeError(
                f"Transcript wraps a pyarrow.Table (the part-row table), got "
                f"{type(table).__name__}; for other Arrow data use Transcript.from_arrow, "
                "for sessions Transcript.from_sessions, for files ctxcompact.read_sessions"
            )
        self._table = table

    @classmethod
    def from_arrow(cls, data: Any) -> Transcript:
        """Accept a pyarrow Table/RecordBatch/reader or anything exporting ``__arrow_c_stream__``.

        Zero copy: pyarrow imports the columns through the Arrow PyCapsule
        interface (polars strings arrive as ``string_view``, kept as they are).
        """
        if isinstance(data, Transcript):
            return data
        if isinstance(data, pa.Table):
            return cls(data)
        if isinstance(data, pa.RecordBatch):
            return cls(pa.Table.from_batches([data]))
        if isinstance(data, pa.RecordBatchReader):
            return cls(data.read_all())
        if hasattr(data, "__arrow_c_stream__") or hasattr(data, "__arrow_c_array__"):
            return cls(pa.table(data))
        dict_hint = " (a session dict: Session.model_validate(it) first)"
        hint = dict_hint if isinstance(data, dict) else ""
        raise InputTypeError(
            f"cannot read {type(data).__name__} as Arrow: it has no __arrow_c_stream__ "
            f"or __arrow_c_array__{hint}"
        )

    @classmethod
    def from_sessions(cls, sessions: Iterable[Session]) -> Transcript:
        """One table of ``sessions``; ``DuplicateSessionError`` if two share an id
        (the scans need each session's rows together, under one id)."""
        return cls(sessions_to_table(unique_sessions(_session_list(sessions))))

    def to_sessions(self) -> list[Session]:
        return table_to_sessions(self._table)

    def to_arrow(self) -> pa.Table:
        """The underlying table (no copy)."""
        return self._table

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self._table.__arrow_c_stream__(requested_schema)

    @property
    def num_rows(self) -> int:
        return int(self._table.num_rows)

    @property
    def nbytes(self) -> int:
        return int(self._table.nbytes)

    def session_ids(self) -> list[str]:
        """Session ids in table order (each once)."""
        unique = pc.unique(self._table.column("session_id"))
        return [str(v) for v in unique.to_pylist()]

    def __len__(self) -> int:
        return len(self.session_ids())

    def __iter__(self) -> Iterator[Session]:
        return iter(self.to_sessions())

    def with_column(self, name: str, values: pa.Array | pa.ChunkedArray) -> Transcript:
        """A new transcript with column ``name`` replaced (or added). New
        outputs are counted again (every counted column follows ``output``), and
        new tools or inputs give new targets (``tool_target``, kept as a
        ``TARGETS_DICTIONARY`` whichever way it is given).

        ``values``: a pyarrow Array or ChunkedArray of ``num_rows`` values, or
        a list of Python values (converted, to the schema's type for a column
        of it, e.g. ``large_string`` for ``output``). ``InputTypeError`` for
        another kind of argument, ``SchemaError`` for a length other than
        ``num_rows``."""
        values = _column_values(self._table, name, values)
        table = _set_column(self._table, name, values)
        if name == TOOL_TARGET:
            table = targets_as_dictionary(table)
        if name in ("tool", "input") and TOOL_TARGET in table.column_names:
            index = table.schema.get_field_index(TOOL_TARGET)
            table = table.set_column(index, TARGETS_DICTIONARY, encode_targets(tool_targets(table)))
        if name == "output":
            for counted, method in counted_columns(table.schema, current=False).items():
                field = counted_field(method)
                index = table.schema.get_field_index(counted)
                try:
                    units = count_output_units(table, method)
                except ColumnTypeError as e:  # the core names its argument "values"
                    raise ColumnTypeError(
                        f"with_column: column 'output' has type {values.type}; expected "
                        f"{OUTPUT_TYPES} (its counts, {counted!r}, are made again)",
                        column="output",
                    ) from e
                table = table.set_column(index, field, units)
        return Transcript(table)

    def count(self, family: str, *, threads: int | None = None) -> Transcript:
        """A new transcript with each part's exact tokens under ``family``
        (``o200k``, ``cl100k``, ``llama3``, ``qwen``, ``tekken``,
        ``deepseek``), counted once in Rust on the thread pool
        (``count_exact_parts``): every scan under the ``<family>-exact``
        method reads them instead of counting the text again."""
        return Transcript(count_exact_parts(self._table, family, threads))

    def __repr__(self) -> str:
        return f"Transcript(rows={self.num_rows}, columns={self._table.column_names})"
