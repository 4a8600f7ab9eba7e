"""The counted-once output lengths: ``output_utf16`` and each tokenizer
family's ``output_units_<family>`` column, counted in the core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact.errors import CompactionError
from ctxcompact.transcript.schema import OUTPUT_UNITS, UNITS_KEY


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


def output_units(table: pa.Table, stored: Mapping[int, int]) -> pa.ChunkedArray | pa.Array:
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
