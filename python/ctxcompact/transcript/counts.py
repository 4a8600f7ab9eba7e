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
    return _count_column(table.column("output"), method, threads)


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
#: Each tool call's arguments (``input``) hashed beside their exact counts.
INPUT_HASH = "input_hash"
_INPUT_EXACT_PREFIX = "input_tokens_"


def count_exact_parts(table: pa.Table, family: str, threads: int | None = None) -> pa.Table:
    """``table`` with each part's exact tokens under ``family``, counted in
    Rust on the thread pool: each output (texts, reasoning and tool outputs:
    ``output_tokens_<family>``) beside its text hash (``output_hash``), and
    each tool call's arguments (``input_tokens_<family>`` beside
    ``input_hash``, when the table has ``input``), every count field stamped
    ``<family>-exact``. The scans read a count only under that family's exact
    method and only where the row's text still hashes as it did when
    counted: a text changed since is counted again, never read stale.
    Counting again keeps every count whose text is unchanged and counts only
    the others."""
    from ctxcompact.scans.vocabularies import core_name

    core_name(family)  # ConfigError for an unknown family; loads a vocabulary not built in
    field = counted_field(f"{family}-exact")
    table = _count_exact(table, "output", field, OUTPUT_HASH, family, threads)
    if "input" in table.column_names:
        field = pa.field(_INPUT_EXACT_PREFIX + family, pa.int64(), metadata=field.metadata)
        table = _count_exact(table, "input", field, INPUT_HASH, family, threads)
    return table


def _count_exact(
    table: pa.Table, text: str, field: pa.Field, hash_name: str, family: str, threads: int | None
) -> pa.Table:
    """``count_exact_parts`` for one text column: ``field`` (its counts) and
    ``hash_name`` (its texts' hashes) set, the unchanged rows' counts kept."""
    import ctxcompact._core as _core

    method = f"{family}-exact"
    column = table.column(text)
    hashes = pc.fill_null(pa.chunked_array(_core.text_hashes(column, threads), type=pa.int64()), 0)
    stale = None
    if field.name in table.column_names and hash_name in table.column_names:
        old = table.column(field.name)
        same_type = table.schema.field(hash_name).type == pa.int64()
        if table.schema.field(field.name).metadata == field.metadata and old.type == pa.int64() \
                and same_type:  # fmt: skip
            same = pc.fill_null(pc.equal(table.column(hash_name), hashes), False)
            stale = pc.or_(pc.invert(same), pc.is_null(old)).combine_chunks()
    if stale is None:
        counts = _count_column(column, method, threads)
    else:
        fresh = _count_column(column.filter(stale), method, threads)
        counts = pc.replace_with_mask(table.column(field.name).combine_chunks(), stale,
                                      fresh.combine_chunks())  # fmt: skip
    hash_field = pa.field(hash_name, pa.int64())
    for name, field_, values in ((field.name, field, counts), (hash_name, hash_field, hashes)):
        index = table.schema.get_field_index(name)
        if index < 0:
            table = table.append_column(field_, values)
        else:
            table = table.set_column(index, field_, values)
    return table


def _count_column(
    column: pa.ChunkedArray | pa.Array, method: str, threads: int | None
) -> pa.ChunkedArray:
    """Each string's length units under ``method`` (0 where null), in Rust."""
    import ctxcompact._core as _core

    counts = pa.chunked_array(_core.count_units(column, method, threads), type=pa.int64())
    return pc.fill_null(counts, 0)


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


def exact_columns(schema: pa.Schema) -> dict[str, tuple[str, str, str]]:
    """Every exact count column of ``schema`` the scans read, by name, with
    its family, the text column it counts and that text's hash column:
    ``output_tokens_<family>`` (``output``, ``output_hash``) and
    ``input_tokens_<family>`` (``input``, ``input_hash``), each stamped
    ``<family>-exact`` and beside its hash column."""
    found: dict[str, tuple[str, str, str]] = {}
    for prefix, text, hashes in ((_EXACT_PREFIX, "output", OUTPUT_HASH),
                                 (_INPUT_EXACT_PREFIX, "input", INPUT_HASH)):  # fmt: skip
        if hashes not in schema.names:
            continue
        for field in schema:
            if field.name.startswith(prefix):
                family = field.name.removeprefix(prefix)
                if field.metadata == {UNITS_KEY.encode(): f"{family}-exact".encode()}:
                    found[field.name] = (family, text, hashes)
    return found
