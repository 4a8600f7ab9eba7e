"""``Transcript``: many sessions as one Arrow table, one row per part (docs/schema.md)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from ctxcompact.models import Session


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
            raise TypeError(f"Transcript wraps a pyarrow.Table, got {type(table).__name__}")
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
        raise TypeError(
            f"cannot read {type(data).__name__} as Arrow: it has no __arrow_c_stream__ "
            "or __arrow_c_array__"
        )

    @classmethod
    def from_sessions(cls, sessions: Iterable[Session]) -> Transcript:
        """One table of ``sessions``; ``DuplicateSessionError`` if two share an id
        (the scans need each session's rows together, under one id)."""
        from ctxcompact.columnar import sessions_to_table
        from ctxcompact.errors import DuplicateSessionError

        sessions = list(sessions)
        seen: dict[str, int] = {}
        for i, session in enumerate(sessions):
            first = seen.setdefault(session.id, i)
            if first != i:
                raise DuplicateSessionError(
                    f"session id {session.id!r} is repeated: sessions {first} and {i} "
                    "(ids must be unique; name sessions by path when reading a folder)",
                    session_id=session.id, row=i,
                )  # fmt: skip
        return cls(sessions_to_table(sessions))

    def to_sessions(self) -> list[Session]:
        from ctxcompact.columnar import table_to_sessions

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
        """A new transcript with column ``name`` replaced (or added)."""
        index = self._table.schema.get_field_index(name)
        field = pa.field(name, values.type)
        if index < 0:
            return Transcript(self._table.append_column(field, values))
        return Transcript(self._table.set_column(index, field, values))

    def __repr__(self) -> str:
        return f"Transcript(rows={self.num_rows}, columns={self._table.column_names})"
