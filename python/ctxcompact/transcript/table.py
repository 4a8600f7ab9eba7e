"""``Transcript``: many sessions as one Arrow table, wrapped without a copy;
``unique_sessions`` and ``relocate`` (an error about a piece of a table made
to name its place in the file).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact.errors import (
    ColumnTypeError,
    CompactionError,
    DuplicateSessionError,
    InputTypeError,
    SchemaError,
)
from ctxcompact.models import Session
from ctxcompact.transcript.counts import (
    OUTPUT_TYPES,
    count_exact_parts,
    count_output_units,
    counted_columns,
    counted_field,
)
from ctxcompact.transcript.rows import sessions_to_table
from ctxcompact.transcript.schema import SCHEMA, TOOL_TARGET
from ctxcompact.transcript.sessions import table_to_sessions
from ctxcompact.transcript.targets import (
    TARGETS_DICTIONARY,
    encode_targets,
    targets_as_dictionary,
    tool_targets,
)


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


def _set_column(table: pa.Table, name: str, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    index = table.schema.get_field_index(name)
    field = pa.field(name, values.type)
    if index < 0:
        return table.append_column(field, values)
    return table.set_column(index, field, values)
