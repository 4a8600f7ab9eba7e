"""The ``tool_target`` column: what each tool call works on (the core's
``target.rs``), kept as one Arrow dictionary (``TARGETS_DICTIONARY``).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact.transcript.schema import SCHEMA, TOOL_TARGET, holds_names


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
    if not holds_names(column.type):
        return table  # left to the scans, which name the column's type
    if column.type == TARGETS_DICTIONARY.type and _one_dictionary(column):
        if table.schema.field(index) == TARGETS_DICTIONARY:
            return table
        return table.set_column(index, TARGETS_DICTIONARY, column)
    return table.set_column(index, TARGETS_DICTIONARY, encode_targets(column))
